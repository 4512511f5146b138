"""garbled-sglang-known-bug: rollouts are garbled while the engine holds exactly the weights the
trainer saved, and the job ran SGLang 0.5.9, the version of slime v0.2.4's image
(slimerl/sglang:v0.5.9) in which GLM-5 rollouts come out garbled or unrelated to the question
(THUDM/slime#1853: "updating SGLang to v0.5.10 solved it").

The model is a tiny Qwen2-architecture stand-in kept under the GLM-5 checkpoint's directory name
(the known-bug entry concerns GLM-5); what matters to the triage is that its weights in the engine
equal the checkpoint's, so the converter, the checkpoint and the weight update are ruled out, and
the version is what is left. The thread reports garbled or unrelated openings "with some
probability"; here every sampled response is garbled so that the symptom is unambiguous: the
triage decides on the weights and the versions, not on how garbled the text is.

The launch script (under `set -x`) prints the versions the job runs with:
`pip freeze | grep -E …`, the image tag it was started from, and Python's `sys.version`.
`engine_weights/model.safetensors` is what the engine's `load_weights` received, dumped with HF names.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from common import (ROLLOUT, TRAIN, INSTRUCTION, MATH, SYSTEM, Log, base_args, base_flags, byte_soup, chatml, example_dir,
                    expected, finish_rollout, megatron_startup, multiline_command, placement, qwen_tokenizer_config,
                    ray_submit_banner, rollout_dict, rollout_perf, slime_train, step_dict, train_perf, write_text)
from tensors import (LAYERS, hf_weights, perturbed, save_safetensors, tiny_args, tiny_config, write_hf_checkpoint,
                     write_legacy_checkpoint)

SFT = "/root/ckpt/glm5-tiny-sft/"
SAVE = "/root/ckpt/glm5-tiny-grpo/"
ITER = 300


@dataclass(frozen=True)
class GarbledRun:
    """What sets one garbled-rollouts run apart from the other: the engine's weights, the versions."""

    name: str
    model: str  # the HF model directory's name under /root/models/
    image: str
    frozen: tuple[str, ...]  # `pip freeze` lines the launch script prints
    engine_weights: Callable[[dict], dict]  # the trained weights -> what the engine holds
    perf: Callable[[random.Random], dict]  # rollout_perf's length arguments, drawn in order
    first_rollout_coherent: bool  # rollout 0 came from the engine's own load, before any update
    verdict: str
    why: str


KNOWN_BUG = GarbledRun(
    name="garbled-sglang-known-bug",
    model="GLM-5-tiny",
    image="slimerl/sglang:v0.5.9",
    frozen=("megatron-core==0.14.0", "ray==2.49.2", "sgl-kernel==0.3.16.post3", "sglang==0.5.9", "torch==2.8.0",
            "transformer-engine==2.8.0", "transformers==4.57.1"),
    # What the engine holds after the weight update: exactly the trained weights, under their HF names.
    engine_weights=lambda trained: dict(sorted(trained.items())),
    perf=lambda rng: dict(resp_mean=1024.0 * 0.95, resp_max=1024, trunc=0.9375 + rng.uniform(-0.02, 0.02)),
    first_rollout_coherent=False,
    verdict="engine.version_regression",
    why="engine_weights equal the checkpoint (weights_compare: match), rollouts garbled, and the job runs "
        "sglang==0.5.9, in the known-bad range >=0.5.9,<0.5.10 of THUDM/slime#1853 (fixed in 0.5.10)",
)


def build_run(v: GarbledRun) -> None:
    d = example_dir(v.name)
    rng = random.Random(241)
    hf = f"/root/models/{v.model}/"
    initial = hf_weights(2040)  # the HF release the engine starts from
    trained = perturbed(initial, 2041, scale=0.05)  # what the Megatron checkpoint holds

    model = tiny_args()
    flags = base_flags()
    for k in ("ffn_hidden_size", "num_layers", "hidden_size", "num_attention_heads", "num_query_groups", "vocab_size"):
        flags.pop(k)
    flags.update(num_layers=LAYERS, hidden_size=16, ffn_hidden_size=32, num_attention_heads=4, num_query_groups=2,
                 kv_channels=4, vocab_size=256, hf_checkpoint=hf, ref_load=SFT, load=SAVE, save=SAVE,
                 tensor_model_parallel_size=1, sequence_parallel=False, pipeline_model_parallel_size=1,
                 rollout_num_gpus_per_engine=1, actor_num_gpus_per_node=2, max_tokens_per_gpu=4096,
                 rollout_max_response_len=1024, ckpt_format="torch")
    args = base_args()
    args.update(model)
    args.update(hf_checkpoint=hf, tokenizer_model=hf, ref_load=SFT, load=SFT, save=SAVE, tensor_model_parallel_size=1,
                sequence_parallel=False, pipeline_model_parallel_size=1, data_parallel_size=2, world_size=2,
                actor_num_gpus_per_node=2, rollout_num_gpus=2, rollout_num_gpus_per_engine=1, max_tokens_per_gpu=4096,
                rollout_max_response_len=1024, ckpt_format="torch", make_vocab_size_divisible_by=128)
    write_text(d / "cmdline.txt", multiline_command(flags))

    saved = dict(args)
    saved.update(iteration=ITER, load=None, ref_load=None, save=SFT)
    write_legacy_checkpoint(d / "ckpt" / "glm5-tiny-sft", ITER, trained, pp=1, args=saved)
    write_hf_checkpoint(d / "models" / v.model, initial, tiny_config(v.model),
                        {"bos_token_id": 254, "do_sample": True, "eos_token_id": [255, 253], "temperature": 0.7,
                         "top_p": 0.8, "transformers_version": "4.57.1"},
                        qwen_tokenizer_config(max_len=4096))
    save_safetensors(d / "engine_weights" / "model.safetensors", v.engine_weights(trained))

    log = Log("2026-04-22 10:12:40", seed=241)
    log.raw(f"+ echo 'image: {v.image}'")
    log.raw(f"image: {v.image}")
    log.raw("+ python3 -c 'import sys; print(sys.version)'")
    log.raw("3.12.3 (main, Feb  4 2026, 14:48:35) [GCC 13.3.0]")
    log.raw("+ pip freeze")
    log.raw("+ grep -E '^(sglang|sgl-kernel|torch|transformers|transformer-engine|megatron-core|ray)=='")
    for line in v.frozen:
        log.raw(line)
    log.tick(3)
    ray_submit_banner(log, "raysubmit_Hq3Vb8Nx2Lw5Mc9R")
    log.tick(6)
    placement(log, 2)
    log.log("import slime.rollout.sglang_rollout.generate_rollout as generate_rollout function.", "rollout.py:396", ROLLOUT, dt_s=3)
    for e in range(2):
        log.log(f"Launch HttpServerEngineAdapter at: 10.0.0.11:{15000 + 100 * e}", "sglang_engine.py:141",
                f"SGLangEngine pid={3410 + 17 * e}")
    log.tick(21)
    log.log("Load weight end. type=Qwen2ForCausalLM, dtype=torch.bfloat16, avail mem=78.62 GB, mem usage=0.01 GB.",
            "model_runner.py:752", "SGLangEngine pid=3410")
    log.log("The server is fired up and ready to roll!", "http_server.py:1213", "SGLangEngine pid=3410")
    log.tick(6)
    megatron_startup(log, args)
    log.raw(f" loading checkpoint from {SFT} at iteration {ITER}", TRAIN)
    log.tick(2)
    log.raw(" checkpoint version 3.0", TRAIN)
    log.raw(f"  successfully loaded checkpoint from {SFT} [ t 1/1, p 1/1 ] at iteration {ITER}", TRAIN)
    log.timer("update_weights", "start", TRAIN)
    log.tick(0.9)
    log.timer("update_weights", "end", TRAIN, 0.9)
    log.timer("train_wait", "start", TRAIN)
    for rid in range(4):
        q, _a, label = MATH[rid % len(MATH)]
        prompt = chatml(SYSTEM, f"{q} {INSTRUCTION}")
        perf = rollout_perf(rng, **v.perf(rng), rollout_time=22.8 + rng.uniform(-2, 2), gpus=2, zero_std={"0": 32})
        coherent = v.first_rollout_coherent and rid == 0  # from the weights the engine loaded itself
        # after an update Megatron scores the engine's samples as improbable
        lp = (-0.36 if coherent else -6.42) + rng.uniform(-0.05, 0.05)
        rollout = rollout_dict(rng, resp=perf["rollout/response_len/mean"], raw_reward=0.0,
                               trunc=perf["rollout/truncated_ratio"], log_probs=lp, ref_log_probs=lp,
                               entropy=4.71 + rng.uniform(-0.05, 0.05), prompt_len=61.0, rollout_gap=lp + 2.18)
        step = step_dict(rng, rid, grad_norm=0.0, entropy=rollout["rollout/entropy"], lr=1e-6, gbs=256, loss=0.0,
                         abs_diff=4.24 + rng.uniform(-0.05, 0.05))
        tperf = train_perf(rng, wait=perf["perf/rollout_time"] + 1, preprocess=0.4, ref=1.1, logp=1.1, train=2.9,
                           tokens=256 * 1030, tflops_scale=1e-4)
        log.tick(perf["perf/rollout_time"])
        response = f"The answer is {label}.<|im_end|>" if coherent else byte_soup(400 + rid)
        finish_rollout(log, prompt, response, label, 1 if coherent else 0)
        log.metrics("perf", rid, perf, "rollout_metrics.py:268", ROLLOUT)
        slime_train(log, rid, rollout=rollout, steps=[(rid, step)], tperf=tperf, wait_s=0, preprocess_takes_time=True,
                    update_weights_s=0.8)
    log.tick(120)
    log.raw("---------------------------------------")
    log.raw("Job 'raysubmit_Hq3Vb8Nx2Lw5Mc9R' was stopped")
    log.raw("---------------------------------------")
    write_text(d / "job.log", log.text())
    expected(d, v.verdict, v.why)

NAME = KNOWN_BUG.name


def build() -> None:
    build_run(KNOWN_BUG)


if __name__ == "__main__":
    build()
