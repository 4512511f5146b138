"""healthy-slime: a slime GRPO run of Qwen2.5-7B-Instruct on dapo-math-17k that is fine.

Step-1 invariants hold (rollout 0: log_probs == ref_log_probs, ppo_kl == 0), grad_norm
stays in 0.05-0.3, raw reward climbs from 0.27 to ~0.45, few responses truncated.
"""

from __future__ import annotations

import random

from common import (ROLLOUT, TRAIN, Log, base_args, base_flags, example_dir, expected, math_sample,
                    megatron_startup, multiline_command, placement, ray_submit_banner, rollout_perf,
                    sglang_engines, slime_rollout, train_perf, write_text)

NAME = "healthy-slime"
ROLLOUTS = 20


def build() -> None:
    d = example_dir(NAME)
    rng = random.Random(11)
    flags = base_flags()
    flags["global_batch_size"] = 128  # two optimizer steps per rollout
    args = base_args()
    args["global_batch_size"] = 128
    write_text(d / "cmdline.txt", multiline_command(flags))

    log = Log("2026-08-01 10:00:00", seed=11)
    ray_submit_banner(log, "raysubmit_Lq7mWc1DgS4tEy2N")
    log.tick(6)
    placement(log, 8)
    log.log("import slime.rollout.sglang_rollout.generate_rollout as generate_rollout function.", "rollout.py:396", ROLLOUT, dt_s=3)
    log.log("import slime.rollout.sglang_rollout.generate_rollout as eval_generate_rollout function.", "rollout.py:397", ROLLOUT)
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

    ref0 = -0.3127
    for rid in range(ROLLOUTS):
        acc = 0.27 + 0.19 * (rid / (ROLLOUTS - 1)) + rng.uniform(-0.03, 0.03)
        resp = 1180 + 22 * rid + rng.uniform(-60, 60)
        trunc = rng.choice([0.0078125, 0.01171875, 0.015625, 0.0234375, 0.01953125])
        perf = rollout_perf(
            rng, resp_mean=resp, resp_max=8192 if trunc > 0 else 7311, trunc=trunc,
            rollout_time=resp * 0.081 + rng.uniform(-4, 4),
            zero_std={"0": int(14 - 6 * rid / ROLLOUTS + rng.randint(-2, 2)), "1": int(3 + 3 * rid / ROLLOUTS + rng.randint(0, 2))},
            rep=rng.choice([0.0, 0.00390625, 0.0078125]),
        )
        ref = ref0 + rng.uniform(-0.01, 0.01)
        drift = 0.0 if rid == 0 else 0.0009 * rid + rng.uniform(0, 0.002)
        logp = ref if rid == 0 else ref + drift
        rollout = {
            "rollout/response_lengths": resp,
            "rollout/rewards": rng.choice([0.0, -1.862645149230957e-09, 2.7939677238464355e-09, 9.313225746154785e-10]),
            "rollout/raw_reward": acc,
            "rollout/truncated": trunc,
            "rollout/rollout_log_probs": logp - 0.0041 - rng.uniform(0, 0.002),
            "rollout/total_lengths": resp + 142.3 + rng.uniform(-3, 3),
            "rollout/log_probs": logp,
            "rollout/ref_log_probs": ref,
            "rollout/entropy": 0.384 - 0.0021 * rid + rng.uniform(-0.006, 0.006),
            "rollout/advantages": rng.uniform(-0.004, 0.004),
            "rollout/returns": rng.uniform(-0.004, 0.004),
        }
        steps = []
        for k in range(2):
            step = 2 * rid + k
            gn = 0.11 + 0.04 * rng.random() + (0.03 if k else 0.0)
            steps.append((step, {
                "train/loss": rng.uniform(-0.012, 0.009),
                "train/pg_loss": rng.uniform(-0.012, 0.009),
                "train/entropy_loss": rollout["rollout/entropy"] + rng.uniform(-0.004, 0.004),
                "train/pg_clipfrac": 0.0 if k == 0 else rng.uniform(0.0009, 0.0021),
                "train/ppo_kl": 0.0 if k == 0 else rng.uniform(2e-05, 6e-05),
                "train/train_rollout_logprob_abs_diff": 0.0131 + rng.uniform(-0.001, 0.001),
                "train/kl_loss": 0.0 if rid == 0 and k == 0 else 0.00011 * rid + rng.uniform(0, 5e-05),
                "train/grad_norm": gn,
                "train/lr-pg_0": 1e-06,
                "train/lr-pg_1": 1e-06,
                "train/global_batch_size": 128,
                "train/step": step,
            }))
        tperf = train_perf(rng, wait=perf["perf/rollout_time"] + 3.2, preprocess=1.1 + rng.random() * 0.3,
                           ref=17.2 + rng.uniform(-1, 1), logp=17.9 + rng.uniform(-1, 1),
                           train=58.4 + rng.uniform(-3, 3), tokens=256 * (resp + 142))
        slime_rollout(log, rid, finish=math_sample(rid, correct=rng.random() < acc + 0.2), perf=perf,
                      rollout=rollout, steps=steps, tperf=tperf)
    write_text(d / "job.log", log.text())
    expected(d, "healthy", "rollout 0 log_probs == ref_log_probs and ppo_kl == 0; grad_norm 0.11-0.18 throughout; raw reward rises 0.27 -> 0.45; no error lines")


if __name__ == "__main__":
    build()
