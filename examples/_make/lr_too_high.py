"""lr-too-high (a miles run): Qwen3-4B GRPO with --lr 1e-4 (a LoRA-style value on a full-parameter
run) and a 10-step linear warmup. While the LR ramps up the grad norm stays at 0.2-0.4; once the
LR reaches its peak the grad norm grows step after step into the hundreds and the reward falls
back. miles' log format: `[time.ms proc] file:line - message`.
"""

from __future__ import annotations

import math
import random

from common import (Log, MATH, SYSTEM, INSTRUCTION, base_args, base_flags, chatml, example_dir, expected,
                    megatron_startup, multiline_command, rollout_dict, rollout_perf, step_dict, train_perf,
                    write_text)

NAME = "lr-too-high"
TRAIN = "MegatronTrainRayActor pid=5120"
ROLL = "RolloutManager pid=4877"
HF = "/data/models/Qwen3-4B/"
REF = "/data/models/Qwen3-4B_torch_dist/"
WARMUP = 10
N = 30

MODEL = {"num_layers": 36, "hidden_size": 2560, "ffn_hidden_size": 9728, "num_attention_heads": 32,
         "num_query_groups": 8, "kv_channels": 128, "vocab_size": 151936, "padded_vocab_size": 151936,
         "add_qkv_bias": False, "qk_layernorm": True, "untie_embeddings_and_output_weights": False}


def lr_at(step: int) -> float:
    return 1e-4 * min(1.0, (step + 1) / WARMUP)


def grad_norm_at(step: int, rng: random.Random) -> float:
    if step < WARMUP:
        return rng.uniform(0.19, 0.38)
    g = 1.2 * math.exp((step - WARMUP + 1) / 2.5)
    return min(g, 420.0) * rng.uniform(0.8, 1.25)


def build() -> None:
    d = example_dir(NAME)
    rng = random.Random(171)
    flags = base_flags()
    for k in ("ffn_hidden_size", "add_qkv_bias", "untie_embeddings_and_output_weights"):
        flags.pop(k)
    flags.update(num_layers=36, hidden_size=2560, ffn_hidden_size=9728, num_attention_heads=32, num_query_groups=8,
                 kv_channels=128, vocab_size=151936, qk_layernorm=True, hf_checkpoint=HF, ref_load=REF,
                 load="/data/ckpt/qwen3-4b-grpo/", save="/data/ckpt/qwen3-4b-grpo/", lr="1e-4",
                 lr_warmup_iters=WARMUP, tensor_model_parallel_size=1, sequence_parallel=False,
                 rollout_num_gpus_per_engine=1)
    args = base_args()
    args.update(MODEL)
    args.update(hf_checkpoint=HF, ref_load=REF, load=REF, save="/data/ckpt/qwen3-4b-grpo/", tokenizer_model=HF,
                lr=0.0001, lr_warmup_iters=WARMUP, tensor_model_parallel_size=1, sequence_parallel=False,
                data_parallel_size=8, rollout_num_gpus_per_engine=1)
    write_text(d / "cmdline.txt", multiline_command(flags))

    log = Log("2026-08-16 22:14:09", style="miles", seed=171)
    log.log("Creating placement group with 8 GPUs...", "placement_group.py:131", proc="main")
    log.tick(5)
    log.log(f"Launch HttpServerEngineAdapter at: 10.0.2.31:15000", "sglang_engine.py:171", "SGLangEngine pid=4903",
            proc="main")
    log.tick(52)
    megatron_startup(log, args, actor=TRAIN)
    log.raw(f" loading distributed checkpoint from {REF} at iteration 0", TRAIN)
    log.tick(31)
    log.raw(f"  successfully loaded checkpoint from {REF} [ t 1/1, p 1/1 ] at iteration 0", TRAIN)
    for rid in range(N):
        early = rid < WARMUP + 2
        q, a, label = MATH[rid % len(MATH)]
        acc = (0.41 + 0.01 * rid if early else max(0.05, 0.53 - 0.035 * (rid - WARMUP))) + rng.uniform(-0.03, 0.03)
        resp = 1320 + rng.uniform(-80, 80) + (0 if early else 95 * (rid - WARMUP))
        perf = rollout_perf(rng, resp_mean=resp, resp_max=8192, trunc=0.0078125 if early else min(0.3, 0.01 * (rid - WARMUP)),
                            rollout_time=resp * 0.05, zero_std={"0": 12 + rng.randint(-2, 2), "1": 4})
        log.tick(perf["perf/rollout_time"])
        preview = (chatml(SYSTEM, f"{q} {INSTRUCTION}") + a).replace("\n", "\\n")
        log.log(f"Finish rollout: text_preview={preview}, label={label}, reward_summary={1 if acc > 0.4 else 0}",
                "sglang_rollout.py:514", ROLL, proc="rollout_manager")
        log.metrics("perf", rid, perf, "rollout_metrics.py:271", ROLL, proc="rollout_manager")
        ref = -0.2934 + rng.uniform(-0.005, 0.005)
        logp = ref if rid == 0 else ref + (0.002 * rid if early else 0.03 * (rid - WARMUP))
        rollout = rollout_dict(rng, resp=resp, raw_reward=acc, trunc=perf["rollout/truncated_ratio"], log_probs=logp,
                               ref_log_probs=ref, entropy=0.402 + rng.uniform(-0.01, 0.01))
        log.timer("train", "start", TRAIN, proc="actor_cell0_rank0")
        log.tick(20)
        log.metrics("rollout", rid, rollout, "log_utils.py:123", TRAIN, proc="actor_cell0_rank0")
        gn = grad_norm_at(rid, rng)
        step = step_dict(rng, rid, grad_norm=gn, entropy=rollout["rollout/entropy"], lr=lr_at(rid), gbs=256,
                         kl_loss=0.0 if rid == 0 else (0.0004 * rid if early else 0.02 * (rid - WARMUP) ** 1.5),
                         abs_diff=0.0118 if early else 0.0118 + 0.004 * (rid - WARMUP),
                         extra={"train/train_rollout_kl": 0.00021 if early else 0.00021 + 0.0009 * (rid - WARMUP)})
        log.tick(41)
        log.metrics("step", rid, step, "log_utils.py:542", TRAIN, proc="actor_cell0_rank0")
        tperf = train_perf(rng, wait=perf["perf/rollout_time"] + 2, preprocess=0.9, ref=8.1, logp=8.4, train=40.2,
                           tokens=256 * (resp + 140), tflops_scale=0.55)
        log.timer("train", "end", TRAIN, tperf["perf/train_time"], proc="actor_cell0_rank0")
        log.metrics("perf", rid, tperf, "log_utils.py:401", TRAIN, proc="actor_cell0_rank0")
    write_text(d / "job.log", log.text())
    expected(d, "optim.lr_too_high",
             "grad_norm 0.2-0.4 during the 10-step warmup, then grows from ~0.5 to hundreds once lr-pg_0 reaches its "
             "1e-4 peak (full-parameter RL usually runs near 1e-6); the reward falls back")


if __name__ == "__main__":
    build()
