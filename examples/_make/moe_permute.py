"""moe-permute-fusion: Qwen3-30B-A3B (128 experts, top-8) trained with expert parallelism 8 and
without --moe-permute-fusion. At the first step the actor's log-probs already differ from the
reference's, ppo_kl is non-zero and grad_norm is ~40 where a healthy first step is well below 1.
"""

from __future__ import annotations

import random

from common import (Log, base_args, base_flags, example_dir, expected, math_sample, multiline_command, rollout_dict,
                    rollout_perf, slime_rollout, slime_startup, step_dict, train_perf, write_text)

NAME = "moe-permute-fusion"
HF = "/root/Qwen3-30B-A3B/"
REF = "/root/Qwen3-30B-A3B_torch_dist/"

MODEL = {
    "num_layers": 48, "hidden_size": 2048, "ffn_hidden_size": 6144, "num_attention_heads": 32, "num_query_groups": 4,
    "kv_channels": 128, "vocab_size": 151936, "padded_vocab_size": 151936, "rotary_base": 1000000,
    "add_qkv_bias": False, "qk_layernorm": True, "untie_embeddings_and_output_weights": True,
    "num_experts": 128, "moe_ffn_hidden_size": 768, "moe_router_topk": 8, "moe_grouped_gemm": True,
    "moe_token_dispatcher_type": "alltoall", "moe_router_score_function": "softmax", "moe_aux_loss_coeff": 0.0,
    "moe_router_load_balancing_type": "none", "moe_permute_fusion": False,
}


def build() -> None:
    d = example_dir(NAME)
    rng = random.Random(151)
    flags = base_flags()
    for k in ("ffn_hidden_size", "add_qkv_bias"):
        flags.pop(k)
    flags.update(actor_num_nodes=2, hf_checkpoint=HF, ref_load=REF, load="/root/Qwen3-30B-A3B_slime/",
                 save="/root/Qwen3-30B-A3B_slime/", num_layers=48, hidden_size=2048, num_attention_heads=32,
                 kv_channels=128, vocab_size=151936, qk_layernorm=True, num_experts=128, moe_ffn_hidden_size=768,
                 moe_router_topk=8, moe_grouped_gemm=True, moe_token_dispatcher_type="alltoall",
                 moe_router_score_function="softmax", moe_aux_loss_coeff=0, tensor_model_parallel_size=4,
                 expert_model_parallel_size=8, rollout_num_gpus_per_engine=8, rollout_num_gpus=16)
    args = base_args()
    args.update(MODEL)
    args.update(actor_num_nodes=2, world_size=16, tensor_model_parallel_size=4, expert_model_parallel_size=8,
                data_parallel_size=4, hf_checkpoint=HF, ref_load=REF, load=REF, tokenizer_model=HF,
                save="/root/Qwen3-30B-A3B_slime/", rollout_num_gpus=16, rollout_num_gpus_per_engine=8)
    write_text(d / "cmdline.txt", multiline_command(flags))
    log = Log("2026-08-14 03:22:48", seed=151)
    slime_startup(log, args, job="raysubmit_Kq1Ws7Ye4Tn2Zb9M", n_gpus=16, engines=2, ckpt=REF,
                  ips=("10.0.1.21", "10.0.1.22"), tp=4)
    gns = [41.7, 38.2, 45.9, 36.4, 52.3, 47.1]
    for rid in range(6):
        ref = -0.3894 + rng.uniform(-0.006, 0.006)
        logp = ref - 0.0127 + rng.uniform(-0.002, 0.002)
        resp = 1610 + 40 * rid + rng.uniform(-60, 60)
        perf = rollout_perf(rng, resp_mean=resp, resp_max=8192, trunc=0.01171875, rollout_time=resp * 0.061, gpus=16,
                            zero_std={"0": 14 + rng.randint(-2, 2), "1": 2 + rng.randint(0, 2)})
        rollout = rollout_dict(rng, resp=resp, raw_reward=0.28 + rng.uniform(-0.03, 0.03), trunc=0.01171875,
                               log_probs=logp, ref_log_probs=ref, entropy=0.417 + rng.uniform(-0.01, 0.01), rollout_gap=0.0131)
        step = step_dict(rng, rid, grad_norm=gns[rid] * rng.uniform(0.95, 1.05), entropy=rollout["rollout/entropy"],
                         lr=1e-6, gbs=256, ppo_kl=0.00124 + rng.uniform(-0.0002, 0.0002),
                         clipfrac=0.0191 + rng.uniform(-0.003, 0.003), kl_loss=0.0131 + 0.002 * rid, abs_diff=0.0462)
        tperf = train_perf(rng, wait=perf["perf/rollout_time"] + 4, preprocess=1.7, ref=26.0, logp=26.9, train=84.5,
                           tokens=256 * (resp + 142), tflops_scale=0.4)
        slime_rollout(log, rid, finish=math_sample(rid + 4, correct=rng.random() < 0.3), perf=perf, rollout=rollout,
                      steps=[(rid, step)], tperf=tperf)
    write_text(d / "job.log", log.text())
    expected(d, "moe.permute_fusion",
             "MoE (num_experts 128, top-8, EP 8) with moe_permute_fusion False; step 0: ppo_kl 1.2e-3 != 0, "
             "log_probs differ from ref_log_probs by ~0.013 at rollout 0, grad_norm ~40")


if __name__ == "__main__":
    build()
