"""slime-growing-drift: a slime GRPO run (bf16, colocated SGLang engines) whose
train/rollout log-prob gap grows rollout after rollout instead of staying at its bf16 level:
`train/train_rollout_logprob_abs_diff` rises steadily from ~0.012 to ~0.06 over 30 rollouts,
and the rollout means of `rollout/rollout_log_probs` and `rollout/log_probs` drift apart with
it. Each level on its own is under the guide's 0.1; the rise is the finding. Everything else
is healthy: the step-1 invariants hold, grad_norm stays at ~0.15, the reward improves. The
shape follows vllm-project/vime#64 (state on the engine drifting across weight updates).
"""

from __future__ import annotations

import math
import random

from common import (ROLLOUT, TRAIN, Log, base_args, base_flags, example_dir, expected, math_sample,
                    megatron_startup, multiline_command, placement, ray_submit_banner, rollout_perf,
                    sglang_engines, slime_rollout, train_perf, write_text)

NAME = "slime-growing-drift"
ROLLOUTS = 30


def build() -> None:
    d = example_dir(NAME)
    rng = random.Random(64)
    flags = base_flags()
    args = base_args()
    write_text(d / "cmdline.txt", multiline_command(flags))

    log = Log("2026-08-03 09:00:00", seed=64)
    ray_submit_banner(log, "raysubmit_Vx2mE8p4QkT6uN1a")
    log.tick(6)
    placement(log, 8)
    log.log("import slime.rollout.sglang_rollout.generate_rollout as generate_rollout function.", "rollout.py:396", ROLLOUT, dt_s=3)
    sglang_engines(log, 4, 2, "/root/Qwen2.5-7B-Instruct/")
    log.tick(9)
    megatron_startup(log, args)
    log.tick(27)
    log.raw(" loading distributed checkpoint from /root/Qwen2.5-7B-Instruct_torch_dist/ at iteration 0", TRAIN)
    log.tick(48)
    log.raw("  successfully loaded checkpoint from /root/Qwen2.5-7B-Instruct_torch_dist/ [ t 1/2, p 1/1 ] at iteration 0", TRAIN)
    log.timer("update_weights", "start", TRAIN)
    log.tick(7.1)
    log.timer("update_weights", "end", TRAIN, 7.1)
    log.timer("train_wait", "start", TRAIN)

    ref0 = -0.3041
    for rid in range(ROLLOUTS):
        acc = 0.25 + 0.22 * (rid / (ROLLOUTS - 1)) + rng.uniform(-0.03, 0.03)
        resp = 1150 + 18 * rid + rng.uniform(-60, 60)
        trunc = rng.choice([0.0078125, 0.01171875, 0.015625, 0.0234375])
        gap = 0.012 * math.exp(1.6 * rid / (ROLLOUTS - 1)) * rng.uniform(0.9, 1.1)  # ~0.012 -> ~0.06
        perf = rollout_perf(
            rng, resp_mean=resp, resp_max=8192 if trunc > 0 else 7311, trunc=trunc,
            rollout_time=resp * 0.08 + rng.uniform(-4, 4),
            zero_std={"0": int(13 - 6 * rid / ROLLOUTS + rng.randint(-2, 2)), "1": int(3 + 3 * rid / ROLLOUTS + rng.randint(0, 2))},
        )
        ref = ref0 + rng.uniform(-0.01, 0.01)
        logp = ref if rid == 0 else ref + 0.0008 * rid + rng.uniform(0, 0.002)
        rollout = {
            "rollout/response_lengths": resp,
            "rollout/rewards": rng.choice([0.0, -1.862645149230957e-09, 2.7939677238464355e-09]),
            "rollout/raw_reward": acc,
            "rollout/truncated": trunc,
            "rollout/rollout_log_probs": logp - 0.35 * gap,
            "rollout/total_lengths": resp + 142.3 + rng.uniform(-3, 3),
            "rollout/log_probs": logp,
            "rollout/ref_log_probs": ref,
            "rollout/entropy": 0.381 - 0.002 * rid + rng.uniform(-0.006, 0.006),
            "rollout/advantages": rng.uniform(-0.004, 0.004),
            "rollout/returns": rng.uniform(-0.004, 0.004),
        }
        step = {
            "train/loss": rng.uniform(-0.012, 0.009),
            "train/pg_loss": rng.uniform(-0.012, 0.009),
            "train/entropy_loss": rollout["rollout/entropy"] + rng.uniform(-0.004, 0.004),
            "train/pg_clipfrac": 0.0,
            "train/ppo_kl": 0.0,
            "train/train_rollout_logprob_abs_diff": gap,
            "train/kl_loss": 0.0 if rid == 0 else 0.0001 * rid + rng.uniform(0, 5e-05),
            "train/grad_norm": 0.12 + 0.05 * rng.random(),
            "train/lr-pg_0": 1e-06,
            "train/lr-pg_1": 1e-06,
            "train/global_batch_size": 256,
            "train/step": rid,
        }
        tperf = train_perf(rng, wait=perf["perf/rollout_time"] + 3.1, preprocess=1.1 + rng.random() * 0.3,
                           ref=17.0 + rng.uniform(-1, 1), logp=17.6 + rng.uniform(-1, 1),
                           train=57.9 + rng.uniform(-3, 3), tokens=256 * (resp + 142))
        slime_rollout(log, rid, finish=math_sample(rid, correct=rng.random() < acc + 0.2), perf=perf,
                      rollout=rollout, steps=[(rid, step)], tperf=tperf)
    write_text(d / "job.log", log.text())
    expected(d, "mismatch.growing_drift",
             "train/train_rollout_logprob_abs_diff rises steadily from ~0.012 to ~0.06 over 30 rollouts (each value "
             "under the guide's 0.1) while grad_norm, reward and the step-1 invariants are healthy")


if __name__ == "__main__":
    build()
