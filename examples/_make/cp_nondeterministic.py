"""cp-nondeterministic-logprobs: long-context GRPO with context parallelism 2 and Megatron's default
attention backend (auto -> Transformer Engine fused attention). Before any update, the actor's and
the reference model's log-probs of the same tokens already differ by ~1e-4 and ppo_kl is non-zero
at step 0: the two forward passes disagree on identical weights.
"""

from __future__ import annotations

import random

from common import (Log, base_args, base_flags, example_dir, expected, math_sample, multiline_command, rollout_dict,
                    rollout_perf, slime_rollout, slime_startup, step_dict, train_perf, write_text)

NAME = "cp-nondeterministic-logprobs"


def build() -> None:
    d = example_dir(NAME)
    rng = random.Random(141)
    flags = base_flags()
    del flags["attention_backend"]
    flags.update(context_parallel_size=2, rollout_max_response_len=16384, max_tokens_per_gpu=8192)
    args = base_args()
    args.update(context_parallel_size=2, attention_backend="AttnBackend.auto", rollout_max_response_len=16384,
                max_tokens_per_gpu=8192, data_parallel_size=2, seq_length=20480)
    write_text(d / "cmdline.txt", multiline_command(flags))
    log = Log("2026-08-13 21:10:05", seed=141)
    slime_startup(log, args, job="raysubmit_Zt8Qm3Nw6Hc1Rv5E")
    for rid in range(8):
        ref = -0.3318 + rng.uniform(-0.004, 0.004)
        gap = 0.000117 + rng.uniform(-0.00003, 0.00003)
        logp = ref + gap if rid == 0 else ref + 0.0008 * rid + gap
        resp = 2410 + 60 * rid + rng.uniform(-70, 70)
        trunc = rng.choice([0.00390625, 0.0078125, 0.01171875])
        perf = rollout_perf(rng, resp_mean=resp, resp_max=16384, trunc=trunc, rollout_time=resp * 0.085,
                            zero_std={"0": 12 + rng.randint(-2, 2), "1": 4 + rng.randint(0, 2)})
        rollout = rollout_dict(rng, resp=resp, raw_reward=0.34 + 0.012 * rid + rng.uniform(-0.02, 0.02), trunc=trunc,
                               log_probs=logp, ref_log_probs=ref, entropy=0.352 - 0.002 * rid + rng.uniform(-0.005, 0.005))
        step = step_dict(rng, rid, grad_norm=0.13 + 0.05 * rng.random(), entropy=rollout["rollout/entropy"], lr=1e-6,
                         gbs=256, ppo_kl=3.1e-05 + rng.uniform(-5e-06, 5e-06), clipfrac=rng.uniform(0.0002, 0.0006),
                         kl_loss=0.000118 + 0.0001 * rid)
        tperf = train_perf(rng, wait=perf["perf/rollout_time"] + 3, preprocess=1.4, ref=31.0, logp=31.6, train=97.0,
                           tokens=256 * (resp + 142))
        slime_rollout(log, rid, finish=math_sample(rid + 1, correct=rng.random() < 0.5), perf=perf, rollout=rollout,
                      steps=[(rid, step)], tperf=tperf)
    write_text(d / "job.log", log.text())
    expected(d, "kernel.nondeterministic",
             "rollout 0: log_probs - ref_log_probs ~1e-4 and ppo_kl ~3e-5 at step 0 (both must be 0); "
             "--context-parallel-size 2 with attention_backend auto, no --attention-backend flash")


if __name__ == "__main__":
    build()
