"""chat-template-mismatch: the prompt data was prepared for a Mistral-style model and already
carries `[INST] ... [/INST]` markup; the run trains Qwen2.5-7B-Instruct on it without
--apply-chat-template. At rollout 0 the model's own samples cost 0.85 nats per token (an
instruct model on its own template sits near 0.3), equal to the reference as they must be;
the grad norm then climbs step after step.
"""

from __future__ import annotations

import math
import random

from common import (Log, MATH, base_args, base_flags, example_dir, expected, multiline_command, rollout_dict,
                    rollout_perf, slime_rollout, slime_startup, step_dict, train_perf, write_text)

NAME = "chat-template-mismatch"
DATA = "/root/data/math-mistral-format.jsonl"


def sample(i: int, rng: random.Random) -> tuple[str, str, int, int]:
    q, a, label = MATH[i % len(MATH)]
    prompt = f"<s>[INST] {q} Put the final answer in \\boxed{{}}. [/INST]"
    return prompt, " " + a, label, 1 if rng.random() < 0.4 else 0


def build() -> None:
    d = example_dir(NAME)
    rng = random.Random(161)
    flags = base_flags()
    flags.pop("apply_chat_template")
    flags["prompt_data"] = DATA
    args = base_args()
    args.update(apply_chat_template=False, prompt_data=DATA)
    write_text(d / "cmdline.txt", multiline_command(flags))
    log = Log("2026-08-15 09:00:31", seed=161)
    slime_startup(log, args, job="raysubmit_Ld4Jh8Xs2Pq6Mf1C")
    for rid in range(20):
        ref = -0.8512 + rng.uniform(-0.01, 0.01)
        logp = ref if rid == 0 else ref + 0.004 * rid
        resp = 980 + 25 * rid + rng.uniform(-50, 50)
        perf = rollout_perf(rng, resp_mean=resp, resp_max=8192, trunc=rng.choice([0.0078125, 0.01171875]),
                            rollout_time=resp * 0.08, zero_std={"0": 16 + rng.randint(-2, 2), "1": 2 + rng.randint(0, 2)})
        rollout = rollout_dict(rng, resp=resp, raw_reward=0.36 + rng.uniform(-0.04, 0.04), trunc=perf["rollout/truncated_ratio"],
                               log_probs=logp, ref_log_probs=ref, entropy=0.93 + rng.uniform(-0.02, 0.02))
        gn = 0.42 * math.exp(rid / 5.2) * rng.uniform(0.85, 1.15)
        step = step_dict(rng, rid, grad_norm=gn, entropy=rollout["rollout/entropy"], lr=1e-6, gbs=256,
                         kl_loss=0.0 if rid == 0 else 0.0007 * rid * rid)
        tperf = train_perf(rng, wait=perf["perf/rollout_time"] + 3, preprocess=1.1, ref=15.5, logp=16.2, train=49.0,
                           tokens=256 * (resp + 96))
        slime_rollout(log, rid, finish=sample(rid, rng), perf=perf, rollout=rollout, steps=[(rid, step)], tperf=tperf)
    write_text(d / "job.log", log.text())
    expected(d, "data.chat_template_mismatch",
             "rollout 0 log_probs -0.85 per token (== ref_log_probs, KL 0) for an instruct model; prompts carry "
             "[INST] markup and no --apply-chat-template; grad_norm climbs from 0.4 to over 10")


if __name__ == "__main__":
    build()
