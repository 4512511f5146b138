"""ckpt-not-loaded: --ref-load points at a converted torch_dist directory that has
`iter_0000000/` but no `latest_checkpointed_iteration.txt` (only the iteration directory
was copied to the cluster). slime warns, Megatron warns it "will start from random",
the engine receives random weights and the first rollout is token soup.
"""

from __future__ import annotations

import random

from common import (ROLLOUT, TRAIN, Log, base_args, base_flags, chatml, example_dir, expected, finish_rollout,
                    INSTRUCTION, MATH, SYSTEM, megatron_startup, multiline_command, placement, ray_submit_banner,
                    rollout_perf, sglang_engines, soup, slime_train, train_perf, write_text)
from tensors import hf_weights, write_torch_dist_checkpoint

NAME = "ckpt-not-loaded"
REF = "/root/Qwen2.5-7B-Instruct_torch_dist/"


def build() -> None:
    d = example_dir(NAME)
    rng = random.Random(31)
    flags = base_flags()
    args = base_args()
    write_text(d / "cmdline.txt", multiline_command(flags))
    # The converted checkpoint, copied without its tracker file.
    write_torch_dist_checkpoint(d / "Qwen2.5-7B-Instruct_torch_dist", 0, hf_weights(7), args, tracker=False)

    log = Log("2026-08-03 14:12:40", seed=31)
    ray_submit_banner(log, "raysubmit_9QbNf2XkTz81pRcA")
    log.tick(5)
    log.log(
        f"ref_load {REF} does not have latest_checkpointed_iteration.txt, please make sure it is a valid megatron "
        "checkpoint directory.",
        "arguments.py:1780",
    )
    placement(log, 8)
    sglang_engines(log, 4, 2, "/root/Qwen2.5-7B-Instruct/")
    log.tick(9)
    megatron_startup(log, args)
    log.tick(12)
    log.raw(f"WARNING: could not find the metadata file {REF}latest_checkpointed_iteration.txt", TRAIN)
    log.raw("    will not load any checkpoints and will start from random", TRAIN)
    log.raw("(min, max) time across ranks (ms):", TRAIN)
    log.raw("    load-checkpoint ................................: (0.41, 0.63)", TRAIN)
    log.tick(3)
    log.raw(f"WARNING: could not find the metadata file {REF}latest_checkpointed_iteration.txt", TRAIN)
    log.raw("    will not load any checkpoints and will start from random", TRAIN)
    log.timer("update_weights", "start", TRAIN)
    log.tick(6.8)
    log.timer("update_weights", "end", TRAIN, 6.8)
    log.timer("train_wait", "start", TRAIN)

    for rid in range(2):
        q, _a, label = MATH[(rid * 3) % len(MATH)]
        prompt = chatml(SYSTEM, f"{q} {INSTRUCTION}")
        perf = rollout_perf(rng, resp_mean=8192.0, resp_max=8192, trunc=1.0, rollout_time=1418.6 + rng.uniform(-20, 20),
                            zero_std={"0": 32}, rep=0.0)
        perf["rollout/response_len/median"] = 8192.0
        lp = -11.9307 + rng.uniform(-0.01, 0.01)
        rollout = {
            "rollout/response_lengths": 8192.0,
            "rollout/rewards": 0.0,
            "rollout/raw_reward": 0.0,
            "rollout/truncated": 1.0,
            "rollout/rollout_log_probs": lp + 0.0112,
            "rollout/total_lengths": 8334.3,
            "rollout/log_probs": lp,
            "rollout/ref_log_probs": lp,
            "rollout/entropy": 11.8724 + rng.uniform(-0.005, 0.005),
            "rollout/advantages": 0.0,
            "rollout/returns": 0.0,
        }
        step = {
            "train/loss": 0.0, "train/pg_loss": 0.0, "train/entropy_loss": rollout["rollout/entropy"],
            "train/pg_clipfrac": 0.0, "train/ppo_kl": 0.0, "train/train_rollout_logprob_abs_diff": 0.0112,
            "train/kl_loss": 0.0, "train/grad_norm": 0.0, "train/lr-pg_0": 1e-06, "train/lr-pg_1": 1e-06,
            "train/global_batch_size": 256, "train/step": rid,
        }
        tperf = train_perf(rng, wait=perf["perf/rollout_time"] + 2.9, preprocess=2.4, ref=61.2 + rng.uniform(-2, 2),
                           logp=62.0 + rng.uniform(-2, 2), train=171.3 + rng.uniform(-5, 5), tokens=256 * 8334)
        log.tick(perf["perf/rollout_time"])
        finish_rollout(log, prompt, soup(100 + rid), label, 0)
        log.metrics("perf", rid, perf, "rollout_metrics.py:268", ROLLOUT)
        slime_train(log, rid, rollout=rollout, steps=[(rid, step)], tperf=tperf, wait_s=2.0, preprocess_takes_time=True,
                    update_weights_s=6.5)
    log.tick(600)
    log.raw("---------------------------------------")
    log.raw("Job 'raysubmit_9QbNf2XkTz81pRcA' was stopped")
    log.raw("---------------------------------------")
    write_text(d / "job.log", log.text())
    expected(d, "ckpt.not_loaded",
             "--ref-load Qwen2.5-7B-Instruct_torch_dist/ has iter_0000000 but no latest_checkpointed_iteration.txt; Megatron: "
             "'will not load any checkpoints and will start from random'; rollout 0 is token soup with log_probs -11.93")


if __name__ == "__main__":
    build()
