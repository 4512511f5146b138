"""pp-offset-garbled (the `make demo` example): a pipeline-parallel (PP=2) run whose Megatron->HF
weight conversion does not add the second stage's layer offset.

The model is a small Qwen2-architecture debug model (hidden 16, 4 layers, vocabulary 256) trained
with PP=2: stage 0 holds layers 0-1, stage 1 holds layers 2-3, and a legacy Megatron checkpoint
stores each stage's layers under local ids 0-1. The conversion that pushes weights to SGLang names
stage 1's layers `model.layers.0/1` instead of `model.layers.2/3`, so in the engine layers 0-1 are
overwritten with the checkpoint's layers 2-3, and layers 2-3 keep the initial HF weights the engine
started from. Rollouts are byte soup from the first step, while Megatron (which holds the right
weights) scores those samples at -6.9 nats per token against the engine's -2.4.

`engine_weights/model.safetensors` is what the engine's `load_weights` received, dumped with HF names.
"""

from __future__ import annotations

import random

from common import (ROLLOUT, TRAIN, Log, base_args, base_flags, byte_soup, chatml, example_dir, expected, finish_rollout,
                    INSTRUCTION, MATH, SYSTEM, megatron_startup, multiline_command, placement, qwen_tokenizer_config,
                    ray_submit_banner, rollout_dict, rollout_perf, slime_train, step_dict, train_perf, write_text)
from tensors import (LAYERS, hf_weights, perturbed, save_safetensors, tiny_args, tiny_config, write_hf_checkpoint,
                     write_legacy_checkpoint)

NAME = "pp-offset-garbled"
HF = "/root/models/qwen2-h16-l4-instruct/"
SFT = "/root/ckpt/qwen2-h16-l4-sft-pp2/"
SAVE = "/root/ckpt/qwen2-h16-l4-grpo-pp2/"
ITER = 500


def build() -> None:
    d = example_dir(NAME)
    rng = random.Random(201)
    initial = hf_weights(2024)  # the HF release the engine starts from
    trained = perturbed(initial, 2025, scale=0.05)  # after SFT: what the Megatron checkpoint holds

    model = tiny_args()
    flags = base_flags()
    for k in ("ffn_hidden_size", "num_layers", "hidden_size", "num_attention_heads", "num_query_groups", "vocab_size"):
        flags.pop(k)
    flags.update(num_layers=LAYERS, hidden_size=16, ffn_hidden_size=32, num_attention_heads=4, num_query_groups=2,
                 kv_channels=4, vocab_size=256, hf_checkpoint=HF, ref_load=SFT, load=SAVE, save=SAVE,
                 tensor_model_parallel_size=1, sequence_parallel=False, pipeline_model_parallel_size=2,
                 rollout_num_gpus_per_engine=1, actor_num_gpus_per_node=2, max_tokens_per_gpu=4096,
                 rollout_max_response_len=1024, ckpt_format="torch")
    args = base_args()
    args.update(model)
    args.update(hf_checkpoint=HF, tokenizer_model=HF, ref_load=SFT, load=SFT, save=SAVE, tensor_model_parallel_size=1,
                sequence_parallel=False, pipeline_model_parallel_size=2, data_parallel_size=1, world_size=2,
                actor_num_gpus_per_node=2, rollout_num_gpus=2, rollout_num_gpus_per_engine=1, max_tokens_per_gpu=4096,
                rollout_max_response_len=1024, ckpt_format="torch", make_vocab_size_divisible_by=128)
    write_text(d / "cmdline.txt", multiline_command(flags))

    # The trained checkpoint (legacy format, PP=2, local layer ids per stage).
    saved = dict(args)
    saved.update(iteration=ITER, load=None, ref_load=None, save=SFT)
    write_legacy_checkpoint(d / "ckpt" / "qwen2-h16-l4-sft-pp2", ITER, trained, pp=2, args=saved)
    # The HF release the engine loads at start.
    write_hf_checkpoint(d / "models" / "qwen2-h16-l4-instruct", initial, tiny_config("qwen2-h16-l4-instruct"),
                        {"bos_token_id": 254, "do_sample": True, "eos_token_id": [255, 253], "temperature": 0.7,
                         "top_p": 0.8, "transformers_version": "4.51.3"},
                        qwen_tokenizer_config(max_len=4096))
    # What the engine holds after the weight update: stage 1's layers landed on ids 0-1.
    engine = dict(initial)
    per = LAYERS // 2
    for name, t in trained.items():
        if not name.startswith("model.layers."):
            engine[name] = t  # embeddings (stage 0), final norm and lm_head (stage 1) are named right
    for stage in range(2):
        for local in range(per):
            src = f"model.layers.{stage * per + local}."
            dst = f"model.layers.{local}."  # the bug: no `+ stage * per`
            for name, t in trained.items():
                if name.startswith(src):
                    engine[dst + name[len(src):]] = t
    save_safetensors(d / "engine_weights" / "model.safetensors", dict(sorted(engine.items())))

    log = Log("2026-08-18 15:40:02", seed=201)
    ray_submit_banner(log, "raysubmit_Yc6Ef3Lg9Na2Pk7D")
    log.tick(6)
    placement(log, 2)
    log.log("import slime.rollout.sglang_rollout.generate_rollout as generate_rollout function.", "rollout.py:396", ROLLOUT, dt_s=3)
    for e in range(2):
        log.log(f"Launch HttpServerEngineAdapter at: 10.0.0.11:{15000 + 100 * e}", "sglang_engine.py:141",
                f"SGLangEngine pid={3310 + 17 * e}")
    log.tick(21)
    log.log("Load weight end. type=Qwen2ForCausalLM, dtype=torch.bfloat16, avail mem=78.62 GB, mem usage=0.01 GB.",
            "model_runner.py:752", "SGLangEngine pid=3310")
    log.log("The server is fired up and ready to roll!", "http_server.py:1213", "SGLangEngine pid=3310")
    log.tick(6)
    megatron_startup(log, args)
    log.raw(f" loading checkpoint from {SFT} at iteration {ITER}", TRAIN)
    log.tick(2)
    log.raw(" checkpoint version 3.0", TRAIN)
    log.raw(f"  successfully loaded checkpoint from {SFT} [ t 1/1, p 1/2 ] at iteration {ITER}", TRAIN)
    log.raw(f"  successfully loaded checkpoint from {SFT} [ t 1/1, p 2/2 ] at iteration {ITER}",
            "MegatronTrainRayActor pid=2232")
    log.timer("update_weights", "start", TRAIN)
    log.tick(0.9)
    log.timer("update_weights", "end", TRAIN, 0.9)
    log.timer("train_wait", "start", TRAIN)
    for rid in range(4):
        q, _a, label = MATH[rid % len(MATH)]
        prompt = chatml(SYSTEM, f"{q} {INSTRUCTION}")
        perf = rollout_perf(rng, resp_mean=1024.0 * 0.97, resp_max=1024, trunc=0.96875 + rng.uniform(-0.02, 0.02),
                            rollout_time=21.4 + rng.uniform(-2, 2), gpus=2, zero_std={"0": 32})
        lp = -6.912 + rng.uniform(-0.05, 0.05)
        rollout = rollout_dict(rng, resp=perf["rollout/response_len/mean"], raw_reward=0.0,
                               trunc=perf["rollout/truncated_ratio"], log_probs=lp, ref_log_probs=lp,
                               entropy=4.92 + rng.uniform(-0.05, 0.05), prompt_len=61.0, rollout_gap=lp + 2.43)
        step = step_dict(rng, rid, grad_norm=0.0, entropy=rollout["rollout/entropy"], lr=1e-6, gbs=256, loss=0.0,
                         abs_diff=4.48 + rng.uniform(-0.05, 0.05))
        tperf = train_perf(rng, wait=perf["perf/rollout_time"] + 1, preprocess=0.4, ref=1.1, logp=1.1, train=2.9,
                           tokens=256 * 1050, tflops_scale=1e-4)
        log.tick(perf["perf/rollout_time"])
        finish_rollout(log, prompt, byte_soup(300 + rid), label, 0)
        log.metrics("perf", rid, perf, "rollout_metrics.py:268", ROLLOUT)
        slime_train(log, rid, rollout=rollout, steps=[(rid, step)], tperf=tperf, wait_s=0, preprocess_takes_time=True,
                    update_weights_s=0.8)
    log.tick(120)
    log.raw("---------------------------------------")
    log.raw("Job 'raysubmit_Yc6Ef3Lg9Na2Pk7D' was stopped")
    log.raw("---------------------------------------")
    write_text(d / "job.log", log.text())
    expected(d, "weights.pp_layer_offset",
             "engine_weights: engine layers 0-1 equal checkpoint layers 2-3 (offset 2 = num_layers 4 / pp 2) and "
             "engine layers 2-3 still hold the initial HF weights; rollouts garbled from rollout 0; checkpoint intact")


if __name__ == "__main__":
    build()
