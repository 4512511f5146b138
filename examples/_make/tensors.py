"""Tiny checkpoints in the real layouts: Megatron (legacy `mp_rank_*` and torch_dist), HF, an engine dump.

The model is a Qwen2-architecture stand-in shrunk to hidden 16, 4 layers, 4 query heads
sharing 2 KV heads (head dim 4), SwiGLU FFN 32, vocabulary 256, so every file stays a
few kilobytes while the names, shapes' structure and fused layouts are the real ones:
Megatron fuses q/k/v per query group into `linear_qkv` and gate/up into `linear_fc1`,
and folds the norms into `*.layer_norm_weight`; HF keeps them apart.
"""

from __future__ import annotations

import json
import uuid
from collections import OrderedDict
from pathlib import Path
from typing import Any
from unittest import mock

import torch
from safetensors.torch import save_file

HIDDEN, LAYERS, HEADS, KV_HEADS, FFN, VOCAB = 16, 4, 4, 2, 32, 256
HEAD_DIM = HIDDEN // HEADS
Q_PER_GROUP = HEADS // KV_HEADS


def tiny_config(name_or_path: str, *, eos: int = 255, tie: bool = False) -> dict[str, Any]:
    """config.json of the tiny Qwen2 model, as transformers writes it."""
    return {
        "_name_or_path": name_or_path,
        "architectures": ["Qwen2ForCausalLM"],
        "attention_dropout": 0.0,
        "bos_token_id": 254,
        "eos_token_id": eos,
        "hidden_act": "silu",
        "hidden_size": HIDDEN,
        "initializer_range": 0.02,
        "intermediate_size": FFN,
        "max_position_embeddings": 4096,
        "max_window_layers": LAYERS,
        "model_type": "qwen2",
        "num_attention_heads": HEADS,
        "num_hidden_layers": LAYERS,
        "num_key_value_heads": KV_HEADS,
        "rms_norm_eps": 1e-06,
        "rope_scaling": None,
        "rope_theta": 1000000.0,
        "sliding_window": None,
        "tie_word_embeddings": tie,
        "torch_dtype": "bfloat16",
        "transformers_version": "4.51.3",
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": VOCAB,
    }


def tiny_args() -> dict[str, Any]:
    """The Megatron model arguments that describe the tiny model (what the job's args block says)."""
    return {
        "hidden_size": HIDDEN,
        "ffn_hidden_size": FFN,
        "num_layers": LAYERS,
        "num_attention_heads": HEADS,
        "num_query_groups": KV_HEADS,
        "kv_channels": HEAD_DIM,
        "vocab_size": VOCAB,
        "padded_vocab_size": VOCAB,
        "max_position_embeddings": 4096,
        "rotary_base": 1000000,
        "norm_epsilon": 1e-06,
        "seq_length": 4096,
    }


def hf_weights(seed: int) -> OrderedDict[str, torch.Tensor]:
    """A full HF state dict of the tiny model, drawn from `seed`."""
    g = torch.Generator().manual_seed(seed)

    def w(*shape: int, scale: float = 0.1) -> torch.Tensor:
        return (torch.randn(*shape, generator=g) * scale).to(torch.bfloat16)

    sd: OrderedDict[str, torch.Tensor] = OrderedDict()
    sd["model.embed_tokens.weight"] = w(VOCAB, HIDDEN)
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        sd[p + "input_layernorm.weight"] = (1 + w(HIDDEN, scale=0.05).float()).to(torch.bfloat16)
        sd[p + "self_attn.q_proj.weight"] = w(HEADS * HEAD_DIM, HIDDEN)
        sd[p + "self_attn.q_proj.bias"] = w(HEADS * HEAD_DIM, scale=0.02)
        sd[p + "self_attn.k_proj.weight"] = w(KV_HEADS * HEAD_DIM, HIDDEN)
        sd[p + "self_attn.k_proj.bias"] = w(KV_HEADS * HEAD_DIM, scale=0.02)
        sd[p + "self_attn.v_proj.weight"] = w(KV_HEADS * HEAD_DIM, HIDDEN)
        sd[p + "self_attn.v_proj.bias"] = w(KV_HEADS * HEAD_DIM, scale=0.02)
        sd[p + "self_attn.o_proj.weight"] = w(HIDDEN, HEADS * HEAD_DIM)
        sd[p + "post_attention_layernorm.weight"] = (1 + w(HIDDEN, scale=0.05).float()).to(torch.bfloat16)
        sd[p + "mlp.gate_proj.weight"] = w(FFN, HIDDEN)
        sd[p + "mlp.up_proj.weight"] = w(FFN, HIDDEN)
        sd[p + "mlp.down_proj.weight"] = w(HIDDEN, FFN)
    sd["model.norm.weight"] = (1 + w(HIDDEN, scale=0.05).float()).to(torch.bfloat16)
    sd["lm_head.weight"] = w(VOCAB, HIDDEN)
    return sd


def perturbed(sd: OrderedDict[str, torch.Tensor], seed: int, scale: float = 0.02) -> OrderedDict[str, torch.Tensor]:
    """The same model after some training: every tensor moved by a small, seeded amount."""
    g = torch.Generator().manual_seed(seed)
    out: OrderedDict[str, torch.Tensor] = OrderedDict()
    for k, v in sd.items():
        out[k] = (v.float() + torch.randn(v.shape, generator=g) * scale).to(torch.bfloat16)
    return out


# --- HF <-> Megatron ---------------------------------------------------------------------


def hf_layer_to_megatron(sd: dict[str, torch.Tensor], i: int, local: int) -> OrderedDict[str, torch.Tensor]:
    """HF layer `i` as Megatron names it at local index `local` (fused qkv per group, fused gate/up)."""
    p = f"model.layers.{i}."
    q = sd[p + "self_attn.q_proj.weight"].view(KV_HEADS, Q_PER_GROUP, HEAD_DIM, HIDDEN)
    k = sd[p + "self_attn.k_proj.weight"].view(KV_HEADS, 1, HEAD_DIM, HIDDEN)
    v = sd[p + "self_attn.v_proj.weight"].view(KV_HEADS, 1, HEAD_DIM, HIDDEN)
    qkv = torch.cat([q, k, v], dim=1).reshape(-1, HIDDEN)
    qb = sd[p + "self_attn.q_proj.bias"].view(KV_HEADS, Q_PER_GROUP, HEAD_DIM)
    kb = sd[p + "self_attn.k_proj.bias"].view(KV_HEADS, 1, HEAD_DIM)
    vb = sd[p + "self_attn.v_proj.bias"].view(KV_HEADS, 1, HEAD_DIM)
    qkv_b = torch.cat([qb, kb, vb], dim=1).reshape(-1)
    m = f"decoder.layers.{local}."
    out: OrderedDict[str, torch.Tensor] = OrderedDict()
    out[m + "self_attention.linear_proj.weight"] = sd[p + "self_attn.o_proj.weight"].clone()
    out[m + "self_attention.linear_qkv.layer_norm_weight"] = sd[p + "input_layernorm.weight"].clone()
    out[m + "self_attention.linear_qkv.weight"] = qkv.contiguous()
    out[m + "self_attention.linear_qkv.bias"] = qkv_b.contiguous()
    out[m + "mlp.linear_fc1.layer_norm_weight"] = sd[p + "post_attention_layernorm.weight"].clone()
    out[m + "mlp.linear_fc1.weight"] = torch.cat([sd[p + "mlp.gate_proj.weight"], sd[p + "mlp.up_proj.weight"]], 0)
    out[m + "mlp.linear_fc2.weight"] = sd[p + "mlp.down_proj.weight"].clone()
    return out


def megatron_stages(sd: dict[str, torch.Tensor], pp: int) -> list[OrderedDict[str, torch.Tensor]]:
    """The per-stage state dicts of a legacy Megatron checkpoint: local layer ids restart at 0 per stage."""
    per = LAYERS // pp
    stages = []
    for s in range(pp):
        st: OrderedDict[str, torch.Tensor] = OrderedDict()
        if s == 0:
            st["embedding.word_embeddings.weight"] = sd["model.embed_tokens.weight"].clone()
        for local in range(per):
            st.update(hf_layer_to_megatron(sd, s * per + local, local))
        if s == pp - 1:
            st["decoder.final_layernorm.weight"] = sd["model.norm.weight"].clone()
            st["output_layer.weight"] = sd["lm_head.weight"].clone()
        stages.append(st)
    return stages


def write_legacy_checkpoint(root: Path, iteration: int, sd: dict[str, torch.Tensor], pp: int,
                            args: dict[str, Any], tracker: bool = True) -> Path:
    """`<root>/latest_checkpointed_iteration.txt` + `iter_XXXXXXX/mp_rank_00_{pp:03d}/model_optim_rng.pt`."""
    it = root / f"iter_{iteration:07d}"
    for s, st in enumerate(megatron_stages(sd, pp)):
        rank_dir = it / (f"mp_rank_00_{s:03d}" if pp > 1 else "mp_rank_00")
        rank_dir.mkdir(parents=True, exist_ok=True)
        saved_args = dict(args)
        saved_args.update(pipeline_model_parallel_size=pp, tensor_model_parallel_size=1, rank=s)
        torch.save(
            {
                "args": saved_args,
                "checkpoint_version": 3.0,
                "iteration": iteration,
                "model": st,
                "num_floating_point_operations_so_far": 0,
            },
            rank_dir / "model_optim_rng.pt",
        )
    if tracker:
        (root / "latest_checkpointed_iteration.txt").write_text(str(iteration))
    return it


def write_torch_dist_checkpoint(root: Path, iteration: int, sd: dict[str, torch.Tensor], args: dict[str, Any],
                                tracker: bool = True, save_id: str = "3f6b8a52-2d7e-4c1a-9b0e-5d4c3b2a1f00") -> Path:
    """`iter_XXXXXXX/` with `.metadata`, `__0_0.distcp`, `common.pt`, `metadata.json`, as Megatron's torch_dist saves.

    Layer parameters are stacked over layers under one key (`decoder.layers.<param>`), as
    Megatron-core's sharded state dict keeps them.
    """
    import os
    import warnings

    import torch.distributed.checkpoint as dcp

    stage = megatron_stages(sd, 1)[0]
    sharded: OrderedDict[str, torch.Tensor] = OrderedDict()
    per_param: dict[str, list[torch.Tensor]] = {}
    for k, v in stage.items():
        if k.startswith("decoder.layers."):
            rest = k.split(".", 3)[3]
            per_param.setdefault(f"decoder.layers.{rest}", []).append(v)
        else:
            sharded[k] = v
    for k, vs in per_param.items():
        sharded[k] = torch.stack(vs)
    it = root / f"iter_{iteration:07d}"
    it.mkdir(parents=True, exist_ok=True)
    cwd = os.getcwd()
    os.chdir(it)
    try:
        with warnings.catch_warnings(), mock.patch.object(uuid, "uuid4", return_value=uuid.UUID(save_id)):
            warnings.simplefilter("ignore")
            dcp.save(sharded, checkpoint_id=".")
    finally:
        os.chdir(cwd)
    torch.save({"args": dict(args), "checkpoint_version": 3.0, "iteration": iteration}, it / "common.pt")
    (it / "metadata.json").write_text(json.dumps(
        {"sharded_backend": "torch_dist", "sharded_backend_version": 1, "common_backend": "torch", "common_backend_version": 1}
    ))
    if tracker:
        (root / "latest_checkpointed_iteration.txt").write_text(str(iteration))
    return it


def write_hf_checkpoint(d: Path, sd: dict[str, torch.Tensor], config: dict[str, Any],
                        generation: dict[str, Any] | None, tokenizer: dict[str, Any]) -> None:
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    if generation is not None:
        (d / "generation_config.json").write_text(json.dumps(generation, indent=2) + "\n")
    (d / "tokenizer_config.json").write_text(json.dumps(tokenizer, indent=2, ensure_ascii=False) + "\n")
    save_file(dict(sd), str(d / "model.safetensors"), metadata={"format": "pt"})


def save_safetensors(path: Path, sd: dict[str, torch.Tensor], metadata: dict[str, str] | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in sd.items()}, str(path), metadata=metadata or {"format": "pt"})
