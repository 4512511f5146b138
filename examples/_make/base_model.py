"""base-model-garbled: GRPO started from Qwen3-4B-Base, a pretrain checkpoint with no chat template,
on a data set whose prompts were pre-formatted with ChatML (`<|im_start|>user ...`). The base model
has never seen that markup as a conversation: it echoes the markers, loops and drifts, which reads
as garbled rollouts from the first step. The Megatron checkpoint is intact and loaded; no engine
weights were dumped.

The checkpoint tensors are tiny stand-ins in the real layouts (torch_dist with tracker file, HF
safetensors); the triage only checks their presence and completeness here.
"""

from __future__ import annotations

import random

from common import (ROLLOUT, TRAIN, Log, base_args, base_flags, example_dir, expected, finish_rollout,
                    megatron_startup, multiline_command, placement, qwen_tokenizer_config, ray_submit_banner,
                    rollout_dict, rollout_perf, sglang_engines, slime_train, step_dict, train_perf, write_json, write_text)
from tensors import hf_weights, save_safetensors, write_torch_dist_checkpoint

NAME = "base-model-garbled"
HF = "/root/Qwen3-4B-Base/"
REF = "/root/Qwen3-4B-Base_torch_dist/"
DATA = "/root/data/gsm8k-chatml.jsonl"

MODEL = {"num_layers": 36, "hidden_size": 2560, "ffn_hidden_size": 9728, "num_attention_heads": 32,
         "num_query_groups": 8, "kv_channels": 128, "vocab_size": 151936, "padded_vocab_size": 151936,
         "add_qkv_bias": False, "qk_layernorm": True, "untie_embeddings_and_output_weights": False,
         "rotary_base": 1000000}

QUESTIONS = [
    ("Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many clips did Natalia sell altogether in April and May?", 72),
    ("Weng earns $12 an hour for babysitting. Yesterday, she just did 50 minutes of babysitting. How much did she earn?", 10),
    ("Betty is saving money for a new wallet which costs $100. Betty has only half of the money she needs. Her parents decided to give her $15 for that purpose, and her grandparents twice as much as her parents. How much more money does Betty need to buy the wallet?", 5),
    ("James writes a 3-page letter to 2 different friends twice a week. How many pages does he write a year?", 624),
]

RESPONSES = [
    "<|im_start|>assistant\n<|im_start|>assistant\n<|im_start|>\n\n1. 1. 1. 1.\n\n<|im_end|>\n<|im_start|>user\n"
    "<|im_start|>user\n娜塔莉亚四月卖了 48 个 <|im_end|><|im_end|><|im_end|>\nassistant assistant assistant\n\n答案：答案：答案：",
    "\n\n\n\n\n\n\n\n\n\n\n\n 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1",
    "<|im_end|>\n<|im_start|>user\n<|im_end|>\n<|im_start|>user\n<|im_end|>\n<|im_start|>user\n<|im_end|>\n"
    "<|im_start|>user\n$$$$$$$$$$ \\\\ \\\\ \\\\ \\\\ \\\\ \\\\ }}}}}}",
    "assistant\nassistant\n### ### ### ###\n\n<|endoftext|><|endoftext|><|endoftext|>",
]


def build() -> None:
    d = example_dir(NAME)
    rng = random.Random(211)
    flags = base_flags()
    flags.pop("apply_chat_template")
    for k in ("ffn_hidden_size", "add_qkv_bias", "untie_embeddings_and_output_weights"):
        flags.pop(k)
    flags.update(num_layers=36, hidden_size=2560, ffn_hidden_size=9728, num_attention_heads=32, num_query_groups=8,
                 kv_channels=128, vocab_size=151936, qk_layernorm=True, hf_checkpoint=HF, ref_load=REF,
                 load="/root/Qwen3-4B-Base_slime/", save="/root/Qwen3-4B-Base_slime/", prompt_data=DATA,
                 tensor_model_parallel_size=1, sequence_parallel=False, rollout_num_gpus_per_engine=1,
                 rollout_max_response_len=4096, max_tokens_per_gpu=8192)
    args = base_args()
    args.update(MODEL)
    args.update(hf_checkpoint=HF, tokenizer_model=HF, ref_load=REF, load=REF, save="/root/Qwen3-4B-Base_slime/",
                prompt_data=DATA, apply_chat_template=False, tensor_model_parallel_size=1, sequence_parallel=False,
                data_parallel_size=8, rollout_num_gpus_per_engine=1, rollout_max_response_len=4096, max_tokens_per_gpu=8192)
    write_text(d / "cmdline.txt", multiline_command(flags))

    tiny = hf_weights(4)
    write_torch_dist_checkpoint(d / "Qwen3-4B-Base_torch_dist", 0, tiny, args, tracker=True,
                                save_id="8e1f2a3b-4c5d-4e6f-9a0b-1c2d3e4f5a6b")
    hf = d / "Qwen3-4B-Base"
    write_json(hf / "config.json", {
        "architectures": ["Qwen3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 151643,
        "eos_token_id": 151643, "head_dim": 128, "hidden_act": "silu", "hidden_size": 2560, "initializer_range": 0.02,
        "intermediate_size": 9728, "max_position_embeddings": 32768, "max_window_layers": 36, "model_type": "qwen3",
        "num_attention_heads": 32, "num_hidden_layers": 36, "num_key_value_heads": 8, "rms_norm_eps": 1e-06,
        "rope_scaling": None, "rope_theta": 1000000, "sliding_window": None, "tie_word_embeddings": True,
        "torch_dtype": "bfloat16", "transformers_version": "4.51.0", "use_cache": True, "use_sliding_window": False,
        "vocab_size": 151936,
    })
    write_json(hf / "generation_config.json", {"bos_token_id": 151643, "eos_token_id": 151643, "max_new_tokens": 2048,
                                               "transformers_version": "4.51.0"})
    write_json(hf / "tokenizer_config.json", qwen_tokenizer_config(chat_template=False, eos="<|endoftext|>", max_len=32768))
    save_safetensors(hf / "model.safetensors", tiny)

    log = Log("2026-08-19 10:05:44", seed=211)
    ray_submit_banner(log, "raysubmit_Wn3Bx8Tq1Hd5Lm6S")
    log.tick(6)
    placement(log, 8)
    sglang_engines(log, 8, 1, HF)
    log.tick(9)
    megatron_startup(log, args)
    log.raw(f" loading distributed checkpoint from {REF} at iteration 0", TRAIN)
    log.tick(21)
    log.raw(f"  successfully loaded checkpoint from {REF} [ t 1/1, p 1/1 ] at iteration 0", TRAIN)
    log.timer("update_weights", "start", TRAIN)
    log.tick(3.9)
    log.timer("update_weights", "end", TRAIN, 3.9)
    log.timer("train_wait", "start", TRAIN)
    for rid in range(4):
        q, label = QUESTIONS[rid]
        prompt = f"<|im_start|>user\n{q}\nLet's think step by step and output the final answer after \"####\".<|im_end|>\n<|im_start|>assistant\n"
        trunc = 0.62 + rng.uniform(-0.05, 0.05)
        resp = 4096 * trunc + 380 * (1 - trunc)
        perf = rollout_perf(rng, resp_mean=resp, resp_max=4096, trunc=trunc, rollout_time=resp * 0.041,
                            zero_std={"0": 30, "1": 0}, rep=0.71 + rng.uniform(-0.05, 0.05))
        lp = -0.936 + rng.uniform(-0.02, 0.02)
        rollout = rollout_dict(rng, resp=resp, raw_reward=0.0078125 * rng.randint(0, 2), trunc=trunc,
                               log_probs=lp if rid == 0 else lp + 0.002 * rid, ref_log_probs=lp, entropy=1.21 + rng.uniform(-0.03, 0.03),
                               prompt_len=88.0, rollout_gap=0.0061)
        step = step_dict(rng, rid, grad_norm=0.21 + 0.05 * rng.random(), entropy=rollout["rollout/entropy"], lr=1e-6,
                         gbs=256, kl_loss=0.0 if rid == 0 else 0.0002 * rid)
        tperf = train_perf(rng, wait=perf["perf/rollout_time"] + 2, preprocess=0.9, ref=9.4, logp=9.6, train=31.0,
                           tokens=256 * (resp + 88), tflops_scale=0.5)
        log.tick(perf["perf/rollout_time"])
        finish_rollout(log, prompt, RESPONSES[rid], label, 0)
        log.metrics("perf", rid, perf, "rollout_metrics.py:268", ROLLOUT)
        slime_train(log, rid, rollout=rollout, steps=[(rid, step)], tperf=tperf, wait_s=0, preprocess_takes_time=True,
                    update_weights_s=3.8)
    write_text(d / "job.log", log.text())
    expected(d, "model.base_not_instruct",
             "--hf-checkpoint Qwen3-4B-Base: a base model whose tokenizer_config.json has no chat_template, prompted with "
             "ChatML (<|im_start|>user ...); rollouts echo the markers and loop; the Megatron checkpoint loaded intact")


if __name__ == "__main__":
    build()
