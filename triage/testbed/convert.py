"""Megatron <-> HF weight conversion for the Llama / Qwen2 families, and TP / PP layout.

`megatron_to_hf` is what the trainer runs before sending weights to the engine (slime's
`megatron_to_hf/{llama,qwen2}.py`): the fused QKV is viewed per query group and split
into q / k / v, the fused `linear_fc1` is chunked into gate and up, layer norms fused
into the linears become `input_layernorm` / `post_attention_layernorm`, and a pipeline
stage's local layer ids are shifted by the stage's layer offset.

`hf_to_megatron` goes the other way (the HF checkpoint loaded into the trainer, what
slime's `convert_hf_to_torch_dist` does), and `shard_for_tp` / `gather_tp` cut a full
(TP=1) tensor into one rank's shard and back, with GLU shards regrouped as Megatron
does: each rank's `linear_fc1` holds [its gate rows; its up rows].
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

import torch

from triage.testbed.hf_models import ModelShape

LAYER = re.compile(r"^decoder\.layers\.(\d+)\.(.+)$")
HF_LAYER = re.compile(r"^model\.layers\.(\d+)\.(.+)$")

# How a parameter is partitioned across tensor-parallel ranks: the dim, "glu", or None (replicated).
def tp_partition(name: str) -> int | str | None:
    if name.endswith("linear_qkv.weight") or name.endswith("linear_qkv.bias"):
        return 0
    if name.endswith("linear_proj.weight") or name.endswith("linear_fc2.weight"):
        return 1
    if name.endswith("linear_fc1.weight"):
        return "glu"
    if name in ("embedding.word_embeddings.weight", "output_layer.weight"):
        return 0
    return None


def shard_for_tp(name: str, full: torch.Tensor, tp_size: int, tp_rank: int) -> torch.Tensor:
    part = tp_partition(name)
    if tp_size == 1 or part is None:
        return full.clone()
    if part == "glu":
        gate, up = full.chunk(2, dim=0)
        return torch.cat([gate.chunk(tp_size, 0)[tp_rank], up.chunk(tp_size, 0)[tp_rank]], dim=0).clone()
    return full.chunk(tp_size, dim=part)[tp_rank].clone()


def gather_tp(name: str, shards: list[torch.Tensor]) -> torch.Tensor:
    """The full tensor from every TP rank's shard (in rank order)."""
    part = tp_partition(name)
    if len(shards) == 1 or part is None:
        return shards[0]
    if part == "glu":
        halves = [s.chunk(2, dim=0) for s in shards]
        return torch.cat([h[0] for h in halves] + [h[1] for h in halves], dim=0)
    return torch.cat(shards, dim=part)


def to_global_name(name: str, layer_offset: int) -> str:
    m = LAYER.match(name)
    return f"decoder.layers.{int(m.group(1)) + layer_offset}.{m.group(2)}" if m else name


def to_local_name(name: str, layer_start: int, layer_end: int) -> str | None:
    """A global Megatron name as the stage holding [start, end) names it; None if another stage holds it."""
    m = LAYER.match(name)
    if not m:
        return name
    i = int(m.group(1))
    if not layer_start <= i < layer_end:
        return None
    return f"decoder.layers.{i - layer_start}.{m.group(2)}"


def split_qkv(qkv: torch.Tensor, shape: ModelShape) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = shape.num_query_groups
    qpg = shape.num_attention_heads // g
    d = shape.head_dim
    grouped = qkv.view(g, (qpg + 2) * d, *qkv.shape[1:])
    q, k, v = torch.split(grouped, [qpg * d, d, d], dim=1)
    return (q.reshape(g * qpg * d, *qkv.shape[1:]), k.reshape(g * d, *qkv.shape[1:]), v.reshape(g * d, *qkv.shape[1:]))


def fuse_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, shape: ModelShape) -> torch.Tensor:
    g = shape.num_query_groups
    qpg = shape.num_attention_heads // g
    d = shape.head_dim
    rest = q.shape[1:]
    return torch.cat([q.view(g, qpg * d, *rest), k.view(g, d, *rest), v.view(g, d, *rest)], dim=1).reshape(
        g * (qpg + 2) * d, *rest
    )


Converter = Callable[[str, torch.Tensor, ModelShape, int], list[tuple[str, torch.Tensor]]]


def megatron_to_hf(name: str, param: torch.Tensor, shape: ModelShape, layer_offset: int = 0) -> list[tuple[str, torch.Tensor]]:
    """HF names and tensors for one full (TP-gathered) Megatron parameter of a stage."""
    if name == "embedding.word_embeddings.weight":
        return [("model.embed_tokens.weight", param)]
    if name == "output_layer.weight":
        return [("lm_head.weight", param)]
    if name == "decoder.final_layernorm.weight":
        return [("model.norm.weight", param)]
    m = LAYER.match(name)
    if not m:
        raise ValueError(f"unknown Megatron parameter {name!r}")
    layer = int(m.group(1)) + layer_offset
    rest = m.group(2)
    prefix = f"model.layers.{layer}"
    if rest in ("self_attention.linear_qkv.weight", "self_attention.linear_qkv.bias"):
        kind = rest.rsplit(".", 1)[1]
        q, k, v = split_qkv(param, shape)
        return [(f"{prefix}.self_attn.q_proj.{kind}", q), (f"{prefix}.self_attn.k_proj.{kind}", k),
                (f"{prefix}.self_attn.v_proj.{kind}", v)]
    if rest == "self_attention.linear_qkv.layer_norm_weight":
        return [(f"{prefix}.input_layernorm.weight", param)]
    if rest == "self_attention.linear_proj.weight":
        return [(f"{prefix}.self_attn.o_proj.weight", param)]
    if rest == "mlp.linear_fc1.weight":
        gate, up = param.chunk(2, dim=0)
        return [(f"{prefix}.mlp.gate_proj.weight", gate), (f"{prefix}.mlp.up_proj.weight", up)]
    if rest == "mlp.linear_fc1.layer_norm_weight":
        return [(f"{prefix}.post_attention_layernorm.weight", param)]
    if rest == "mlp.linear_fc2.weight":
        return [(f"{prefix}.mlp.down_proj.weight", param)]
    raise ValueError(f"unknown Megatron parameter {name!r}")


def hf_to_megatron(hf: dict[str, torch.Tensor], shape: ModelShape) -> dict[str, torch.Tensor]:
    """A full (TP=1, PP=1) Megatron state dict from HF tensors; buffers and unknown names are skipped."""
    out: dict[str, torch.Tensor] = {
        "embedding.word_embeddings.weight": hf["model.embed_tokens.weight"],
        "output_layer.weight": hf["lm_head.weight"],
        "decoder.final_layernorm.weight": hf["model.norm.weight"],
    }
    for i in range(shape.num_layers):
        p = f"model.layers.{i}"
        m = f"decoder.layers.{i}"
        out[f"{m}.self_attention.linear_qkv.weight"] = fuse_qkv(
            hf[f"{p}.self_attn.q_proj.weight"], hf[f"{p}.self_attn.k_proj.weight"], hf[f"{p}.self_attn.v_proj.weight"], shape
        )
        if shape.qkv_bias:
            out[f"{m}.self_attention.linear_qkv.bias"] = fuse_qkv(
                hf[f"{p}.self_attn.q_proj.bias"], hf[f"{p}.self_attn.k_proj.bias"], hf[f"{p}.self_attn.v_proj.bias"], shape
            )
        out[f"{m}.self_attention.linear_qkv.layer_norm_weight"] = hf[f"{p}.input_layernorm.weight"]
        out[f"{m}.self_attention.linear_proj.weight"] = hf[f"{p}.self_attn.o_proj.weight"]
        out[f"{m}.mlp.linear_fc1.weight"] = torch.cat([hf[f"{p}.mlp.gate_proj.weight"], hf[f"{p}.mlp.up_proj.weight"]], 0)
        out[f"{m}.mlp.linear_fc1.layer_norm_weight"] = hf[f"{p}.post_attention_layernorm.weight"]
        out[f"{m}.mlp.linear_fc2.weight"] = hf[f"{p}.mlp.down_proj.weight"]
    return {k: v.detach().float().clone() for k, v in out.items()}


def convert_all(named: Iterable[tuple[str, torch.Tensor]], shape: ModelShape, layer_offset: int = 0,
                converter: Converter = megatron_to_hf) -> list[tuple[str, torch.Tensor]]:
    out: list[tuple[str, torch.Tensor]] = []
    for name, tensor in named:
        out.extend(converter(name, tensor, shape, layer_offset))
    return out
