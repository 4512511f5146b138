"""The fault registry: each fault is a small plug that changes what the testbed does.

A fault never writes a symptom. It swaps a piece of code for a wrong one (a converter
that forgets the pipeline stage's layer offset, an engine whose memory release also
frees the rotary buffers, a row-parallel reduction that averages partial sums, a rank
that skips a collective, a log-prob kernel whose reduction order is random), or it
makes the job's inputs wrong the way a user does (a too-high `--lr`, an HF checkpoint
without a stop token, prompt data in another template, a reward function that
reads a field the data lacks, a `--max-tokens-per-gpu` the GPU cannot hold, more GPUs
than the cluster has). The symptoms then follow from running the job.

`Plugs` holds the swappable behaviours with their healthy defaults; `plugs_for(name)`
returns them with the fault's plug applied. A fault's `flags` override the scenario's
command line, and its `setup` prepares the artifacts the job starts from.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from triage.testbed.convert import Converter, megatron_to_hf
from triage.testbed.hf_models import ModelShape


@dataclass
class Plugs:
    """The testbed's swappable behaviours; the defaults are the healthy ones."""

    converter: Converter = megatron_to_hf
    apply_layer_offset: bool = True  # a PP stage adds its layer offset to local layer ids
    skip_in_sync: Callable[[str], bool] = lambda name: False  # Megatron names never sent to the engine
    engine_release_buffers: bool = False  # release_memory_occupation also frees rotary inv_freq
    nondeterministic_logprobs: bool = False  # forward-only passes run a split-K output GEMM, random order
    row_parallel_reduce: str = "sum"  # how TP partial outputs of row-parallel linears combine
    skip_collective: tuple[int, str, int] | None = None  # (rank, collective name, occurrence) it skips


def _swapped_gate_up(name: str, param: torch.Tensor, shape: ModelShape, layer_offset: int = 0):
    out = megatron_to_hf(name, param, shape, layer_offset)
    if name.endswith("mlp.linear_fc1.weight"):
        (gate_name, gate), (up_name, up) = out
        return [(gate_name, up), (up_name, gate)]
    return out


@dataclass(frozen=True)
class Fault:
    name: str  # also the verdict id of ROOT_CAUSES.md it should be diagnosed as
    what: str  # what the plug does, in a sentence
    plug: Callable[[Plugs], None] | None = None
    flags: dict[str, Any] = field(default_factory=dict)  # flag overrides ("--lr": "0.05"; None removes a flag)
    setup: str | None = None  # name of a run-preparation step in triage.testbed.prepare

    @property
    def expected(self) -> str:
        return self.name


def _set(**values) -> Callable[[Plugs], None]:
    def apply(plugs: Plugs) -> None:
        for k, v in values.items():
            setattr(plugs, k, v)
    return apply


FAULTS: dict[str, Fault] = {f.name: f for f in [
    Fault("ckpt.not_loaded",
          "--load and --ref-load point at a directory without latest_checkpointed_iteration.txt, so Megatron "
          "starts from random init and the first weight sync sends random weights to the engine",
          setup="ref_without_tracker"),
    Fault("weights.name_mapping",
          "the Megatron->HF converter swaps gate_proj and up_proj when splitting linear_fc1",
          plug=_set(converter=_swapped_gate_up)),
    Fault("weights.pp_layer_offset",
          "with two pipeline stages, stage 2's converter forgets its layer offset, so its layers overwrite stage 1's "
          "in the engine and the engine's last layers keep their HF weights",
          plug=_set(apply_layer_offset=False),
          flags={"--pipeline-model-parallel-size": "2", "--actor-num-gpus-per-node": "2"}),
    Fault("weights.missing",
          "the weight sync skips every mlp.linear_fc2 (down_proj), so the engine keeps its initial down_proj",
          plug=_set(skip_in_sync=lambda name: name.endswith("mlp.linear_fc2.weight"))),
    Fault("engine.buffers_released",
          "the engine's release_memory_occupation also frees the rotary inv_freq buffer, and resume never "
          "restores it: after the first release/resume cycle the engine generates without positions",
          plug=_set(engine_release_buffers=True),
          flags={"--colocate": True}),
    Fault("model.base_not_instruct",
          "the job is pointed at the base model (no chat SFT) while the prompts use the chat template",
          setup="base_model"),
    Fault("data.chat_template_mismatch",
          "the prompt data is pre-rendered with another model's chat roles and sent without --apply-chat-template",
          flags={"--apply-chat-template": None},
          setup="other_template_prompts"),
    Fault("kernel.nondeterministic",
          "the forward-only log-prob passes run the output GEMM as a split-K kernel whose partial sums "
          "(rounded to bf16) depend on random split points",
          plug=_set(nondeterministic_logprobs=True)),
    Fault("optim.lr_too_high",
          "the learning rate is 1e-3 (10x the long healthy runs' 1e-4) after a 4-step warmup, on the long runs' "
          "rollout batch (32 prompts x 16 samples) taken in 8 optimizer steps",
          flags={"--lr": "1e-3", "--lr-warmup-iters": "4", "--num-rollout": "5", "--num-steps-per-rollout": "8",
                 "--rollout-batch-size": "32", "--n-samples-per-prompt": "16", "--micro-batch-size": "16"}),
    Fault("data.bad_sample",
          "one prompt row in the data is longer than --rollout-max-context-len: its samples come back empty "
          "and their per-sample means divide by zero tokens in one step",
          flags={"--no-check-for-nan-in-loss-and-grad": True, "--num-rollout": "4", "--num-steps-per-rollout": "2",
                 "--rollout-max-context-len": "64", "--micro-batch-size": "2"},
          setup="overlong_prompt_row"),
    Fault("numerics.overflow",
          "training runs in fp16 on a model with a massive-activation MLP channel (exact in fp32), "
          "whose linear_fc1 output overflows fp16",
          flags={"--fp16": True},
          setup="massive_activation_model"),
    Fault("rollout.missing_stop_token",
          "the HF checkpoint names no stop token (config.json and generation_config.json without eos_token_id, "
          "a tokenizer without eos_token, as a conversion that knows no token ids writes them) and no "
          "--rollout-stop-token-ids is given, so nothing stops generation at <|im_end|>",
          flags={"--rollout-stop-token-ids": None},
          setup="no_chat_stop_token"),
    Fault("reward.broken_fn",
          "the reward function reads metadata['answer'], which the prompt data does not have",
          flags={"--custom-rm-path": "triage.testbed.rewards.metadata_answer_rm"}),
    Fault("reward.no_signal",
          "the prompts are three-digit additions the model never gets right: every group scores all 0",
          setup="hard_prompts"),
    Fault("policy.entropy_collapse",
          "sampling at a near-greedy rollout temperature (0.001): the policy is near-deterministic",
          flags={"--rollout-temperature": "0.001"}),
    Fault("memory.max_tokens_per_gpu",
          "dynamic batching with --max-tokens-per-gpu 8192 packs a whole step into one micro-batch",
          flags={"--use-dynamic-batch-size": True, "--max-tokens-per-gpu": "8192", "--micro-batch-size": None}),
    Fault("sched.insufficient_gpus",
          "16 GPUs requested (8 actor + 8 rollout, not colocated) on an 8-GPU cluster",
          flags={"--actor-num-gpus-per-node": "8", "--rollout-num-gpus": "8", "--colocate": None}),
    Fault("parallel.sharding_bug",
          "with TP=2 the row-parallel linears average their partial outputs instead of summing them",
          plug=_set(row_parallel_reduce="mean"),
          flags={"--tensor-model-parallel-size": "2", "--actor-num-gpus-per-node": "2"}),
    Fault("dist.collective_mismatch",
          "with TP=2, rank 1 skips the gradient-norm all-reduce of the second step and the job hangs",
          plug=_set(skip_collective=(1, "grad_norm", 2)),
          flags={"--tensor-model-parallel-size": "2", "--actor-num-gpus-per-node": "2"}),
    Fault("mismatch.train_inference",
          "the HF checkpoint's config says torch_dtype bfloat16, so the engine runs in bf16 while Megatron trains in fp32",
          setup="bf16_engine_config"),
]}


def plugs_for(fault: str | None) -> Plugs:
    plugs = Plugs()
    if fault:
        if fault not in FAULTS:
            raise KeyError(f"unknown fault {fault!r}: choose one of {', '.join(sorted(FAULTS))}")
        if FAULTS[fault].plug is not None:
            FAULTS[fault].plug(plugs)
    return plugs
