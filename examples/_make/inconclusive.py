"""garbled-no-engine-dump: rollouts are token soup from the first step, yet the Megatron checkpoint is
intact and loaded, the model is an instruct model, and Megatron scores the engine's samples at -7.4
nats per token while the engine itself sampled them at -2.1: the engine holds different weights than
the trainer. Which ones (a name mapping, a missing group, released buffers) only the engine's own
weights can tell, and the run kept no dump of them: the triage must say so and how to get one.

The checkpoint tensors are tiny stand-ins in the real layouts; the triage only checks their presence
and completeness here.
"""

from __future__ import annotations

import random

from common import (ROLLOUT, TRAIN, INSTRUCTION, MATH, SYSTEM, Log, base_args, base_flags, chatml, example_dir,
                    expected, finish_rollout, megatron_startup, multiline_command, placement, qwen_tokenizer_config,
                    ray_submit_banner, rollout_dict, rollout_perf, sglang_engines, soup, slime_train, step_dict, train_perf,
                    write_json, write_text)
from tensors import hf_weights, save_safetensors, write_torch_dist_checkpoint

NAME = "garbled-no-engine-dump"
HF = "/root/Qwen2.5-7B-Instruct/"
REF = "/root/Qwen2.5-7B-Instruct_torch_dist/"


def build() -> None:
    d = example_dir(NAME)
    rng = random.Random(221)
    flags = base_flags()
    args = base_args()
    write_text(d / "cmdline.txt", multiline_command(flags))
    tiny = hf_weights(5)
    write_torch_dist_checkpoint(d / "Qwen2.5-7B-Instruct_torch_dist", 0, tiny, args, tracker=True,
                                save_id="c0ffee00-1234-4abc-8def-0123456789ab")
    hf = d / "Qwen2.5-7B-Instruct"
    write_json(hf / "config.json", {
        "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643, "eos_token_id": 151645,
        "hidden_act": "silu", "hidden_size": 3584, "initializer_range": 0.02, "intermediate_size": 18944,
        "max_position_embeddings": 32768, "max_window_layers": 28, "model_type": "qwen2", "num_attention_heads": 28,
        "num_hidden_layers": 28, "num_key_value_heads": 4, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
        "sliding_window": 131072, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
        "transformers_version": "4.43.1", "use_cache": True, "use_sliding_window": False, "vocab_size": 152064,
    })
    write_json(hf / "generation_config.json", {
        "bos_token_id": 151643, "pad_token_id": 151643, "do_sample": True, "eos_token_id": [151645, 151643],
        "repetition_penalty": 1.05, "temperature": 0.7, "top_p": 0.8, "top_k": 20, "transformers_version": "4.37.0",
    })
    write_json(hf / "tokenizer_config.json", qwen_tokenizer_config())
    save_safetensors(hf / "model.safetensors", tiny)

    log = Log("2026-08-20 08:31:09", seed=221)
    ray_submit_banner(log, "raysubmit_Gt5Kp9Xa2Vm7Qw4N")
    log.tick(6)
    placement(log, 8)
    sglang_engines(log, 4, 2, HF)
    log.tick(9)
    megatron_startup(log, args)
    log.raw(f" loading distributed checkpoint from {REF} at iteration 0", TRAIN)
    log.tick(46)
    log.raw(f"  successfully loaded checkpoint from {REF} [ t 1/2, p 1/1 ] at iteration 0", TRAIN)
    log.timer("update_weights", "start", TRAIN)
    log.tick(7.0)
    log.timer("update_weights", "end", TRAIN, 7.0)
    log.timer("train_wait", "start", TRAIN)
    for rid in range(3):
        q, _a, label = MATH[(rid + 2) % len(MATH)]
        prompt = chatml(SYSTEM, f"{q} {INSTRUCTION}")
        perf = rollout_perf(rng, resp_mean=7980.0 + rng.uniform(-60, 60), resp_max=8192, trunc=0.95703125 + rng.uniform(-0.01, 0.01),
                            rollout_time=1366.0 + rng.uniform(-30, 30), zero_std={"0": 32})
        lp = -7.41 + rng.uniform(-0.05, 0.05)
        rollout = rollout_dict(rng, resp=perf["rollout/response_len/mean"], raw_reward=0.0,
                               trunc=perf["rollout/truncated_ratio"], log_probs=lp, ref_log_probs=lp,
                               entropy=5.13 + rng.uniform(-0.05, 0.05), rollout_gap=lp + 2.12)
        step = step_dict(rng, rid, grad_norm=0.0, entropy=rollout["rollout/entropy"], lr=1e-6, gbs=256, loss=0.0,
                         abs_diff=5.29 + rng.uniform(-0.05, 0.05))
        tperf = train_perf(rng, wait=perf["perf/rollout_time"] + 3, preprocess=2.3, ref=60.2, logp=61.0, train=170.4,
                           tokens=256 * 8120)
        log.tick(perf["perf/rollout_time"])
        finish_rollout(log, prompt, soup(500 + rid), label, 0)
        log.metrics("perf", rid, perf, "rollout_metrics.py:268", ROLLOUT)
        slime_train(log, rid, rollout=rollout, steps=[(rid, step)], tperf=tperf, wait_s=0, preprocess_takes_time=True,
                    update_weights_s=6.9)
    log.tick(300)
    log.raw("---------------------------------------")
    log.raw("Job 'raysubmit_Gt5Kp9Xa2Vm7Qw4N' was stopped")
    log.raw("---------------------------------------")
    write_text(d / "job.log", log.text())
    expected(d, "inconclusive",
             "garbled from rollout 0 with an intact, loaded checkpoint and an instruct model; train/rollout log-prob gap ~5.3 "
             "says the engine's weights differ, but no engine weights dump exists to say how")


if __name__ == "__main__":
    build()
