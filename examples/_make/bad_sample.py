"""bad-sample-nan (a Relax run, colorlog format): one rollout holds a sample whose response is
empty (response_len/min 0 in its perf record); its step's loss and grad_norm are NaN and the
optimizer step is skipped. The steps before and after are finite and healthy.
"""

from __future__ import annotations

import random

from common import (Log, MATH, base_args, chatml, example_dir, expected, megatron_startup,
                    rollout_dict, rollout_perf, step_dict, write_text)

NAME = "bad-sample-nan"
TRAIN = "ActorWorker pid=7421"
ROLL = "RolloutWorker pid=7102"
HF = "/mnt/models/Qwen3-8B/"
REF = "/mnt/models/Qwen3-8B_torch_dist/"
N = 36
BAD = 23

CMD = """python3 relax/entrypoints/train.py \\
    --actor-num-nodes 1 --actor-num-gpus-per-node 8 --colocate \\
    --hf-checkpoint /mnt/models/Qwen3-8B/ --ref-load /mnt/models/Qwen3-8B_torch_dist/ \\
    --load /mnt/ckpt/qwen3-8b-dapo/ --save /mnt/ckpt/qwen3-8b-dapo/ --save-interval 50 \\
    --prompt-data /mnt/data/dapo-math-17k.jsonl --input-key prompt --label-key label --apply-chat-template \\
    --rm-type dapo --num-rollout 500 --rollout-batch-size 32 --n-samples-per-prompt 8 \\
    --rollout-max-response-len 8192 --rollout-temperature 1.0 --global-batch-size 256 \\
    --tensor-model-parallel-size 2 --sequence-parallel --use-dynamic-batch-size --max-tokens-per-gpu 8192 \\
    --advantage-estimator grpo --use-kl-loss --kl-loss-coef 0.00 --eps-clip 0.2 --eps-clip-high 0.28 \\
    --optimizer adam --lr 1e-6 --lr-decay-style constant --weight-decay 0.1 \\
    --rollout-num-gpus-per-engine 2 --sglang-mem-fraction-static 0.7 --attention-backend flash
"""

MODEL = {"num_layers": 36, "hidden_size": 4096, "ffn_hidden_size": 12288, "num_attention_heads": 32,
         "num_query_groups": 8, "kv_channels": 128, "vocab_size": 151936, "padded_vocab_size": 151936,
         "add_qkv_bias": False, "qk_layernorm": True, "rm_type": "dapo", "max_tokens_per_gpu": 8192}


def build() -> None:
    d = example_dir(NAME)
    rng = random.Random(181)
    args = base_args()
    args.update(MODEL)
    args.update(hf_checkpoint=HF, ref_load=REF, load=REF, save="/mnt/ckpt/qwen3-8b-dapo/", tokenizer_model=HF,
                prompt_data="/mnt/data/dapo-math-17k.jsonl", num_rollout=500, save_interval=50)
    write_text(d / "cmdline.txt", CMD)
    log = Log("2026-08-17 06:30:12", style="relax", seed=181)
    log.log("Creating placement group with 8 GPUs...", "", logger="relax.distributed.ray.placement_group:118")
    log.tick(61)
    megatron_startup(log, args, actor=TRAIN)
    log.raw(f" loading distributed checkpoint from {REF} at iteration 0", TRAIN)
    log.tick(52)
    log.raw(f"  successfully loaded checkpoint from {REF} [ t 1/2, p 1/1 ] at iteration 0", TRAIN)
    for rid in range(N):
        q, a, label = MATH[rid % len(MATH)]
        log.log(f"Start rollout {rid}/{N}", "", ROLL, logger="relax.components.rollout:167")
        resp = 1510 + 12 * rid + rng.uniform(-70, 70)
        perf = rollout_perf(rng, resp_mean=resp, resp_max=8192, trunc=rng.choice([0.01171875, 0.015625, 0.0234375]),
                            rollout_time=resp * 0.071, zero_std={"0": 13 + rng.randint(-2, 2), "1": 3 + rng.randint(0, 2)})
        if rid == BAD:
            perf["rollout/response_len/min"] = 0
        log.tick(perf["perf/rollout_time"])
        prompt = chatml(None, f"{q}\n\nRemember to put your answer on its own line after \"Answer:\".")
        log.log(f"Finish rollout: {[prompt + a]!r}, label: {label}, reward: {1 if rng.random() < 0.5 else -1}", "", ROLL,
                logger="relax.rollout.sglang_rollout:452")
        log.metrics("perf", rid, perf, "", ROLL, logger="relax.utils.metrics.rollout_metrics:268")
        log.log(f"Finish rollout {rid}/{N}", "", ROLL, logger="relax.components.rollout:189")
        log.log(f"Actor training step {rid}/{N}", "", TRAIN, logger="relax.components.actor:214")
        ref = -0.3122 + rng.uniform(-0.005, 0.005)
        logp = ref if rid == 0 else ref + 0.0006 * rid
        rollout = rollout_dict(rng, resp=resp, raw_reward=-0.44 + 0.006 * rid + rng.uniform(-0.04, 0.04),
                               trunc=perf["rollout/truncated_ratio"], log_probs=logp, ref_log_probs=ref,
                               entropy=0.366 - 0.001 * rid + rng.uniform(-0.008, 0.008))
        log.tick(30)
        log.metrics("rollout", rid, rollout, "", TRAIN, logger="relax.utils.metrics.train_metric_utils:135")
        step = step_dict(rng, rid, grad_norm=0.14 + 0.06 * rng.random(), entropy=rollout["rollout/entropy"], lr=1e-6,
                         gbs=256, kl_loss=0.0 if rid == 0 else 0.00009 * rid)
        if rid == BAD:
            step.update({"train/loss": float("nan"), "train/pg_loss": float("nan"), "train/grad_norm": float("nan"),
                         "train/entropy_loss": float("nan")})
        log.tick(55)
        log.metrics("step", rid, step, "", TRAIN, logger="relax.backends.megatron.model:918")
        log.log(f"Actor training completed step {rid}/{N}", "", TRAIN, logger="relax.components.actor:218")
    write_text(d / "job.log", log.text())
    expected(d, "data.bad_sample",
             f"loss and grad_norm are NaN at step {BAD} only (finite before and after); that rollout's "
             "response_len/min is 0 (an empty response)")


if __name__ == "__main__":
    build()
