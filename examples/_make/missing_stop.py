"""missing-stop-token: the --hf-checkpoint is an in-house SFT of Qwen2.5-7B whose export lost
`eos_token_id` (neither generation_config.json nor config.json has one) and the launch script
sets no --rollout-stop / --rollout-stop-token-ids. The model answers, then keeps writing until
the 8192-token limit: ~99% of responses are truncated and each rollout takes ~25 minutes.
"""

from __future__ import annotations

import random

from common import (TRAIN, Log, base_args, base_flags, chatml, example_dir, expected, INSTRUCTION, MATH,
                    megatron_startup, multiline_command, placement, qwen_tokenizer_config, ray_submit_banner,
                    rollout_perf, sglang_engines, slime_rollout, SYSTEM, train_perf, write_json, write_text)

NAME = "missing-stop-token"
HF = "/root/models/qwen2.5-7b-math-sft/"

RAMBLE = [
    "Let me double-check this result by another method.",
    "We can also verify the answer by listing the cases explicitly and counting them one by one, which gives the same total.",
    "As a sanity check, consider a smaller version of the problem: the same reasoning applied there gives a count we can confirm by hand.",
    "Another way to see it is to think about the complementary case and subtract it from the total number of possibilities.",
    "It is worth noting that the constraint in the problem is exactly what rules out the boundary cases we might otherwise include.",
    "In summary, every approach we tried leads to the same value, so we can be confident in the final answer above.",
    "However, the problem could also be read slightly differently, so let us make sure that our interpretation matches the statement.",
    "Re-reading the statement, the quantities are positive integers and the order matters, which is what we assumed.",
    "Therefore the computation stands. For completeness, here is the general formula that this problem is a special case of.",
    "If we replace the specific numbers with variables, the same argument shows that the count depends only on the number of divisors involved.",
]


def response(i: int, rng: random.Random) -> str:
    _q, a, _label = MATH[i % len(MATH)]
    parts = [a, ""]
    order = list(range(len(RAMBLE)))
    rng.shuffle(order)
    parts += [RAMBLE[k] for k in order]
    # With no stop token the model goes on to pose and solve exercises of its own.
    extra = []
    for k in range(1, len(MATH)):
        q2, a2, _l2 = MATH[(i + k) % len(MATH)]
        extra.append(f"Practice problem {k}: {q2}\n\nSolution: {a2}")
    return "\n\n".join(parts + extra)


def build() -> None:
    d = example_dir(NAME)
    rng = random.Random(71)
    flags = base_flags()
    flags["hf_checkpoint"] = HF
    args = base_args()
    args.update(hf_checkpoint=HF, tokenizer_model=HF)
    write_text(d / "cmdline.txt", multiline_command(flags))

    hf = d / "models" / "qwen2.5-7b-math-sft"
    write_json(hf / "config.json", {
        "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "hidden_act": "silu", "hidden_size": 3584,
        "initializer_range": 0.02, "intermediate_size": 18944, "max_position_embeddings": 32768, "max_window_layers": 28,
        "model_type": "qwen2", "num_attention_heads": 28, "num_hidden_layers": 28, "num_key_value_heads": 4,
        "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 1000000.0, "sliding_window": 131072,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16", "transformers_version": "4.51.3", "use_cache": True,
        "use_sliding_window": False, "vocab_size": 152064,
    })
    write_json(hf / "generation_config.json", {
        "do_sample": True, "repetition_penalty": 1.05, "temperature": 0.7, "top_k": 20, "top_p": 0.8,
        "transformers_version": "4.51.3",
    })
    write_json(hf / "tokenizer_config.json", qwen_tokenizer_config())

    log = Log("2026-08-08 07:45:10", seed=71)
    ray_submit_banner(log, "raysubmit_Mc5Pz8Ka3Rt7Wd1Q")
    log.tick(6)
    placement(log, 8)
    sglang_engines(log, 4, 2, HF)
    log.tick(9)
    megatron_startup(log, args)
    log.raw(" loading distributed checkpoint from /root/Qwen2.5-7B-Instruct_torch_dist/ at iteration 0", TRAIN)
    log.tick(46)
    log.raw("  successfully loaded checkpoint from /root/Qwen2.5-7B-Instruct_torch_dist/ [ t 1/2, p 1/1 ] at iteration 0", TRAIN)
    log.timer("update_weights", "start", TRAIN)
    log.tick(7.2)
    log.timer("update_weights", "end", TRAIN, 7.2)
    log.timer("train_wait", "start", TRAIN)
    for rid in range(5):
        trunc = rng.choice([0.98828125, 0.9921875, 0.99609375, 1.0])
        resp = 8192 * trunc + (1 - trunc) * 2100
        perf = rollout_perf(rng, resp_mean=resp, resp_max=8192, trunc=trunc, rollout_time=1491.0 + rng.uniform(-40, 40),
                            zero_std={"0": 27 + rng.randint(-2, 2), "1": 1}, rep=0.1171875 + rng.uniform(-0.03, 0.03))
        perf["rollout/response_len/median"] = 8192.0
        ref = -0.2211 + rng.uniform(-0.005, 0.005)
        logp = ref if rid == 0 else ref + 0.0007 * rid
        rollout = {
            "rollout/response_lengths": resp, "rollout/rewards": 0.0, "rollout/raw_reward": 0.04 + rng.uniform(0, 0.03),
            "rollout/truncated": trunc, "rollout/rollout_log_probs": logp - 0.0038, "rollout/total_lengths": resp + 139.8,
            "rollout/log_probs": logp, "rollout/ref_log_probs": ref, "rollout/entropy": 0.262 + rng.uniform(-0.01, 0.01),
            "rollout/advantages": rng.uniform(-0.002, 0.002), "rollout/returns": rng.uniform(-0.002, 0.002),
        }
        step = {
            "train/loss": rng.uniform(-0.005, 0.005), "train/pg_loss": rng.uniform(-0.005, 0.005),
            "train/entropy_loss": rollout["rollout/entropy"], "train/pg_clipfrac": 0.0, "train/ppo_kl": 0.0,
            "train/train_rollout_logprob_abs_diff": 0.0119, "train/kl_loss": 0.0 if rid == 0 else 4e-05 * rid,
            "train/grad_norm": 0.08 + 0.05 * rng.random(), "train/lr-pg_0": 1e-06, "train/lr-pg_1": 1e-06,
            "train/global_batch_size": 256, "train/step": rid,
        }
        tperf = train_perf(rng, wait=perf["perf/rollout_time"] + 3, preprocess=2.2, ref=58.0, logp=59.3, train=168.0,
                           tokens=256 * (resp + 140))
        q, _a, label = MATH[(rid + 3) % len(MATH)]
        finish = (chatml(SYSTEM, f"{q} {INSTRUCTION}"), response(rid + 3, rng), label, 0)
        slime_rollout(log, rid, finish=finish, perf=perf, rollout=rollout, steps=[(rid, step)], tperf=tperf)
    log.tick(900)
    log.raw("---------------------------------------")
    log.raw("Job 'raysubmit_Mc5Pz8Ka3Rt7Wd1Q' was stopped")
    log.raw("---------------------------------------")
    write_text(d / "job.log", log.text())
    expected(d, "rollout.missing_stop_token",
             "truncated_ratio ~0.99 with responses at the 8192 limit and ~25 min rollouts; no --rollout-stop(-token-ids); "
             "the HF checkpoint's generation_config.json and config.json have no eos_token_id")


if __name__ == "__main__":
    build()
