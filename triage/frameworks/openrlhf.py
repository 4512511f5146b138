"""OpenRLHF: Ray + DeepSpeed training, vLLM rollouts, configured by argparse flags.

`python3 -m openrlhf.cli.train_ppo_ray --n_samples_per_prompt 8 ...` (openrlhf/cli/train_ppo_ray.py).
Metrics: the tqdm bar's postfix (`Train step of episode 0: 10%|█| 1/10 [00:05<00:45, policy_loss=0.1, kl=0.01, ...]`)
and the logging dicts of openrlhf/trainer/ppo_trainer.py; W&B / TensorBoard with the
same keys under `train/` (`--use_wandb`, `--use_tensorboard`).
"""

from triage.frameworks import ErrorWording, Framework

FRAMEWORK = Framework(
    name="openrlhf",
    title="OpenRLHF",
    run_names=("openrlhf",),
    log_markers=("openrlhf.", "openrlhf/", "ActorModelRayActor", "ReferenceModelRayActor", "LLMRayActor",
                 "Train step of episode", "Episode [",
                 # its Ray entry point and the flags only it takes (openrlhf/cli/train_ppo_ray.py)
                 "train_ppo_ray", "--ref_num_nodes", "--vllm_num_engines", "--colocate_actor_ref"),
    metric_grammars=("tqdm_postfix", "hf_dict"),
    arg_sources=("command_line", "launch_script"),
    error_wordings=(
        ErrorWording("config.batch_size_mismatch",
                     # the batch names inside the assertion's own first sentence, not flags a user pasted after it
                     # (hkust-nlp/simpleRL-reason#58: verl's context-length assertion, then `--train_batch_size 1024`)
                     r"AssertionError:[^.\n]*?(?<![-\w])(?:rollout_batch_size|train_batch_size|micro_train_batch_size)\b",
                     "OpenRLHF/OpenRLHF openrlhf/cli/train_ppo_ray.py / openrlhf/utils/deepspeed/deepspeed.py"),
        ErrorWording("host.ram_exhausted", r"Task was killed due to the node running low on memory",
                     "ray-project/ray python/ray/_private/memory_monitor.py"),
    ),
    needs_help={
        "metrics": "keep the driver log with its progress-bar postfix, or rerun with `--use_tensorboard <dir>` "
                   "(or `--use_wandb` offline) and keep that directory",
        "args": "keep the launch script or the `train_ppo_ray` command line",
        "checkpoint": "keep `--ckpt_path` / `--save_path` reachable from the run",
        "hf_checkpoint": "keep the `--pretrain` directory reachable from the run",
    },
)
