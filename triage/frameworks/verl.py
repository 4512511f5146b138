"""verl (volcengine/verl): a Ray single controller, FSDP or Megatron workers, vLLM / SGLang rollouts.

Configured by Hydra: `python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.n=8 ...`,
with the composed config saved in `outputs/<date>/<time>/.hydra/config.yaml`. Metrics go
to the console as `step:N - key:value - key:value` (verl/utils/logger/aggregate_logger.py,
LocalLogger / concat_dict_to_str) behind Ray's `(TaskRunner pid=…)` prefix, and to
TensorBoard / W&B with the same keys (`trainer.logger=['console','wandb']`).
"""

from triage.frameworks import ErrorWording, Framework

FRAMEWORK = Framework(
    name="verl",
    title="verl",
    run_names=("verl",),
    log_markers=(
        "verl.trainer", "verl/trainer", "verl/workers", "verl/utils/", "(TaskRunner pid=", "(WorkerDict pid=",
        "actor_rollout_ref.", "actor_rollout_ref:", "global_seqlen/", "timing_s/", "critic/score/mean",
        # Ray's name for verl's driver actor in a remote error (`ray::TaskRunner.run()`), and the entry
        # points of verl's recipes (verl-project/verl recipe/dapo/main_dapo.py; verl-project/verl#747)
        "ray::TaskRunner.", "recipe/dapo/", "main_dapo.py",
        # verl's driver before TaskRunner (`main_task`), its vendored engines, its agent loop, Hydra's keys
        # of its config and its progress bar (verl/trainer/ppo/ray_trainer.py: tqdm desc "Training Progress")
        "(main_task pid=", "verl/third_party/", "AgentLoopWorker", "algorithm.adv_estimator", "Training Progress:",
        # its colocated worker class and the fully-async recipe's actors (verl/single_controller/ray/base.py)
        "create_colocated_worker_cls", "FullyAsyncRollouter", "FullyAsyncTrainer",
        # its actor's and critic's skip of a step whose gradient is not finite (verl/workers/actor/dp_actor.py:
        # `WARN: rank 0 grad_norm is not finite: inf`; EvolvingLMMs-Lab/multimodal-search-r1#19 pasted only those)
        "grad_norm is not finite: ",
        # its environment report (scripts/diagnose.py: `----------verl Info-----------`), its vLLM server actor
        # (verl/workers/rollout/vllm_rollout/vllm_async_server.py), its model code and checkpoint merger
        # (verl-project/verl#7416, #6608, #6549, #4370)
        "-verl Info-", "(vLLMHttpServer pid=", "verl/models/", "verl.model_merger",
    ),
    metric_grammars=("verl_console",),
    arg_sources=("hydra_overrides", "hydra_config", "launch_script"),
    error_wordings=(
        ErrorWording("config.batch_size_mismatch",
                     r"(ppo_mini_batch_size|train_batch_size).*(divisible|must be|should be)|"
                     r"real_train_batch_size .* must be divisible",
                     "volcengine/verl verl/trainer/ppo/ray_trainer.py (_validate_config) / verl/workers/fsdp_workers.py"),
        ErrorWording("memory.colocate_second_step", r"\bwake_up\b.*(?:out of memory|OutOfMemoryError)",
                     "volcengine/verl verl/workers/sharding_manager/fsdp_vllm.py (the engine woken for rollout)"),
        ErrorWording("host.ram_exhausted", r"Task was killed due to the node running low on memory",
                     "ray-project/ray python/ray/_private/memory_monitor.py"),
        # Ray reports GPUs as floats: `Total available GPUs 7.0 is less than total desired GPUs 8` (verl-project/verl#5954).
        # Not 0: verl asked Ray for the GPUs *available*, so a pool checked again while its own actors held
        # every GPU read 0 (verl-project/verl#539 after its first validation, fixed by verl-project/verl#648)
        ErrorWording("sched.insufficient_gpus",
                     r"Total available GPUs (?!0(?:\.0)? )[\d.]+ is less than total desired GPUs [\d.]+",
                     "volcengine/verl verl/trainer/ppo/ray_trainer.py (ResourcePoolManager._check_resource_available)"),
    ),
    needs_help={
        "metrics": "keep the driver log with its `step:N - key:value` lines, or run with "
                   "`trainer.logger=['console','tensorboard']` and keep `tensorboard_log/`",
        "args": "keep the launch script or the Hydra output `outputs/<date>/<time>/.hydra/config.yaml`",
        "rollout_dump": "rerun with `trainer.rollout_data_dir=<dir>` (verl dumps each step's rollouts as JSONL)",
        "checkpoint": "keep `trainer.default_local_dir` (global_step_N/actor) reachable from the run",
        "hf_checkpoint": "keep the `actor_rollout_ref.model.path` directory reachable from the run",
        "flight_recorder": "rerun with TORCH_NCCL_TRACE_BUFFER_SIZE=2000 TORCH_NCCL_DUMP_ON_TIMEOUT=1 in "
                           "`+ray_kwargs.ray_init.runtime_env.env_vars`",
    },
)
