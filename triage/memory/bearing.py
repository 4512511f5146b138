"""Which catalog verdicts a change bears on: data, not code.

A changed argument or package version that a verdict depends on raises that verdict among
the candidates, and is quoted in its support (`triage/differential.py`, `boost`). Keys
are the normalised canonical argument names (`triage/frameworks/args.yaml`) and the
canonical package names (`triage/versions.py`).
"""

from __future__ import annotations

MEMORY_VERDICTS = ["memory.max_tokens_per_gpu", "memory.sequence_too_long", "memory.logits_tensor",
                   "memory.colocate_second_step"]

# argument -> catalog ids it bears on
ARGUMENTS: dict[str, list[str]] = {
    "lr": ["optim.lr_too_high", "optim.lr_too_low"],
    "min_lr": ["optim.lr_too_high", "optim.lr_too_low"],
    "lr_warmup_iters": ["optim.lr_too_high", "optim.lr_too_low"],
    "n_samples_per_prompt": ["algo.degenerate_groups", "reward.no_signal"],
    "rollout_batch_size": ["config.batch_size_mismatch"],
    "global_batch_size": ["config.batch_size_mismatch"],
    "micro_batch_size": ["config.batch_size_mismatch", *MEMORY_VERDICTS],
    "max_tokens_per_gpu": MEMORY_VERDICTS,
    "use_dynamic_batch_size": MEMORY_VERDICTS,
    "rollout_max_response_len": ["rollout.max_len_too_small", "memory.sequence_too_long", "config.sample_exceeds_limits"],
    "rollout_max_prompt_len": ["config.sample_exceeds_limits", "memory.sequence_too_long"],
    "rollout_temperature": ["mismatch.train_inference", "policy.entropy_collapse"],
    "eps_clip": ["ppo.clip_too_aggressive"],
    "kl_loss_coef": ["policy.kl_divergence"],
    "kl_coef": ["policy.kl_divergence"],
    "entropy_coef": ["policy.entropy_collapse"],
    "colocate": ["memory.colocate_second_step", "engine.buffers_released"],
    "sglang_mem_fraction_static": ["engine.oom_illegal_memory", "memory.colocate_second_step"],
    "tensor_model_parallel_size": ["parallel.sharding_bug", "weights.name_mapping"],
    "pipeline_model_parallel_size": ["weights.pp_layer_offset", "parallel.sharding_bug"],
    "context_parallel_size": ["parallel.sharding_bug"],
    "actor_num_nodes": ["sched.insufficient_gpus", "sched.placement_resources"],
    "actor_num_gpus_per_node": ["sched.insufficient_gpus", "sched.placement_resources"],
    "hf_checkpoint": ["engine.wrong_model", "model.base_not_instruct", "tokenizer.no_pad_token"],
    "load": ["ckpt.not_loaded"],
    "ref_load": ["ckpt.not_loaded"],
    "prompt_data": ["data.bad_sample", "data.chat_template_mismatch"],
    "apply_chat_template": ["data.chat_template_mismatch", "template.eos_mismatch"],
    "rm_type": ["reward.broken_fn", "reward.no_signal"],
    "custom_rm_path": ["reward.broken_fn", "reward.no_signal"],
    "fp8": ["fp8.collapse"],
    "bf16": ["numerics.overflow"],
    "fp16": ["numerics.overflow"],
}

# package -> catalog ids a version change bears on
PACKAGES: dict[str, list[str]] = {
    "sglang": ["engine.version_regression", "deps.version_mismatch"],
    "vllm": ["engine.version_regression", "deps.version_mismatch"],
    "torch": ["deps.version_mismatch", "kernel.nondeterministic", "compile.cache_corrupt"],
    "transformers": ["deps.version_mismatch", "tokenizer.no_pad_token"],
    "megatron-core": ["deps.version_mismatch", "weights.name_mapping"],
    "flash-attn": ["deps.version_mismatch", "kernel.nondeterministic"],
    "trl": ["deps.version_mismatch"],
    "ray": ["deps.version_mismatch"],
    "nvidia-nccl-cu12": ["dist.collective_mismatch", "deps.version_mismatch"],
}
# any other package's change
ANY_PACKAGE = ["deps.version_mismatch"]


def bears_on(kind: str, name: str) -> list[str]:
    if kind == "version":
        return list(PACKAGES.get(name, ANY_PACKAGE))
    return list(ARGUMENTS.get(name, []))
