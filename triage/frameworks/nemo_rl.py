"""NeMo-RL (NVIDIA-NeMo/RL): Ray, DTensor or Megatron-Core policy workers, vLLM generation.

`uv run python examples/run_grpo.py --config examples/configs/grpo_math_1B.yaml grpo.num_prompts_per_step=32 …`
(Hydra-style overrides on a YAML config). Each step prints a block: a header
`========================= Step 3/50 =========================`, then under `📊 Training Results:`
one `  • Name: value` item per metric (nemo_rl/algorithms/grpo.py, ppo.py, sft.py, dpo.py), read by
the `nemo_rl_block` grammar; the same metrics go to TensorBoard / W&B under `train/`
(`logger.tensorboard_enabled`, `logger.wandb_enabled`, in `logger.log_dir`).
"""

from triage.frameworks import Framework

FRAMEWORK = Framework(
    name="nemo_rl",
    title="NeMo-RL",
    run_names=("nemo_rl",),
    log_markers=(
        "nemo_rl.", "nemo_rl/", "examples/run_grpo", "examples/run_sft", "examples/run_dpo",
        # the step block's own lines (nemo_rl/algorithms/grpo.py)
        "📊 Training Results:", "Generation KL Error:", "▶ Worker Initialization Timing:",
    ),
    metric_grammars=("nemo_rl_block",),
    arg_sources=("hydra_overrides", "launch_script"),
    # (its wordings, `Not enough GPUs available. Requested …` of nemo_rl/distributed/virtual_cluster.py, are in
    # probes/signatures.yaml)
    needs_help={
        "metrics": "keep the driver log with its `📊 Training Results:` blocks, or run with "
                   "`logger.tensorboard_enabled=true` and keep `logger.log_dir`",
        "args": "keep the launch command with its overrides and the `--config` YAML it names",
        "checkpoint": "keep `checkpointing.checkpoint_dir` (step_N/policy) reachable from the run",
        "hf_checkpoint": "keep the `policy.model_name` directory reachable from the run",
    },
)
