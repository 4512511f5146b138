"""The trainer's model: a GPT under megatron-core's parameter names and layouts.

    embedding.word_embeddings.weight                       [V/tp, H]   (first stage)
    decoder.layers.N.self_attention.linear_qkv.layer_norm_weight   [H]
    decoder.layers.N.self_attention.linear_qkv.weight      [G/tp * (q_per_group + 2) * d, H]
    decoder.layers.N.self_attention.linear_qkv.bias        (Qwen2 only)
    decoder.layers.N.self_attention.linear_proj.weight     [H, Q/tp * d]
    decoder.layers.N.mlp.linear_fc1.layer_norm_weight      [H]
    decoder.layers.N.mlp.linear_fc1.weight                 [2 * F/tp, H]   (gate rows, then up rows)
    decoder.layers.N.mlp.linear_fc2.weight                 [H, F/tp]
    decoder.final_layernorm.weight                         [H]         (last stage)
    output_layer.weight                                    [V/tp, H]   (last stage)

N is the stage-local layer id, as in Megatron: every pipeline stage numbers its layers
from 0, and the global id is N + the stage's layer offset. The fused QKV weight is laid
out per query group: for each group its q heads, then its k head, then its v head.

The function computed is the HF Llama / Qwen2 forward (RMSNorm in fp32, rotary
embeddings with rotate-half, SwiGLU), so converted weights give the same logits in
the engine. Parameters stay fp32 (Megatron's main params); `compute_dtype` casts
them for the forward, as `--fp16` / `--bf16` do.
"""

from __future__ import annotations

import math
import os

import torch
import torch.nn.functional as F
from torch import nn

from triage.testbed.hf_models import ModelShape
from triage.testbed.parallel_state import (
    SINGLE,
    ParallelState,
    copy_to_tensor_parallel,
    gather_from_tensor_parallel,
    reduce_from_tensor_parallel,
)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    dtype = x.dtype
    h = x.to(torch.float32)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return weight.to(dtype) * h.to(dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class RotaryEmbedding(nn.Module):
    def __init__(self, head_dim: int, base: float) -> None:
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float) / head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, seq_len: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        positions = torch.arange(seq_len, dtype=torch.float32)
        freqs = positions[:, None] * self.inv_freq[None, :].float()
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(dtype), emb.sin().to(dtype)


class _Linear(nn.Module):
    """Holds `weight` (and optionally `bias` / `layer_norm_weight`) under Megatron's names."""

    def __init__(self, out_features: int, in_features: int, bias: bool = False, layer_norm: bool = False) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(out_features, in_features))
        if bias:
            self.bias = nn.Parameter(torch.zeros(out_features))
        else:
            self.register_parameter("bias", None)
        if layer_norm:
            self.layer_norm_weight = nn.Parameter(torch.ones(in_features))


class SelfAttention(nn.Module):
    def __init__(self, shape: ModelShape, state: ParallelState) -> None:
        super().__init__()
        if shape.num_query_groups % state.tp_size:
            raise ValueError(
                f"num_query_groups={shape.num_query_groups} is not divisible by tensor-model-parallel-size={state.tp_size}"
            )
        self.shape = shape
        self.state = state
        self.groups = shape.num_query_groups // state.tp_size
        self.q_per_group = shape.num_attention_heads // shape.num_query_groups
        d = shape.head_dim
        self.linear_qkv = _Linear(self.groups * (self.q_per_group + 2) * d, shape.hidden_size, bias=shape.qkv_bias,
                                  layer_norm=True)
        self.linear_proj = _Linear(shape.hidden_size, self.groups * self.q_per_group * d)

    def forward(self, x, cos, sin, dtype):
        b, s, _ = x.shape
        d = self.shape.head_dim
        h = rms_norm(x, self.linear_qkv.layer_norm_weight, self.shape.norm_epsilon)
        h = copy_to_tensor_parallel(h, self.state)
        bias = self.linear_qkv.bias.to(dtype) if self.linear_qkv.bias is not None else None
        mixed = F.linear(h, self.linear_qkv.weight.to(dtype), bias)
        mixed = mixed.view(b, s, self.groups, (self.q_per_group + 2) * d)
        q, k, v = torch.split(mixed, [self.q_per_group * d, d, d], dim=-1)
        q = q.reshape(b, s, self.groups * self.q_per_group, d).transpose(1, 2)
        k = k.reshape(b, s, self.groups, d).transpose(1, 2)
        v = v.reshape(b, s, self.groups, d).transpose(1, 2)
        cos_, sin_ = cos[None, None], sin[None, None]
        q = q * cos_ + rotate_half(q) * sin_
        k = k * cos_ + rotate_half(k) * sin_
        k = k.repeat_interleave(self.q_per_group, dim=1)
        v = v.repeat_interleave(self.q_per_group, dim=1)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1.0 / math.sqrt(d))
        out = out.transpose(1, 2).reshape(b, s, self.groups * self.q_per_group * d)
        out = F.linear(out, self.linear_proj.weight.to(dtype))
        return reduce_from_tensor_parallel(out, self.state)


class MLP(nn.Module):
    def __init__(self, shape: ModelShape, state: ParallelState) -> None:
        super().__init__()
        if shape.ffn_hidden_size % state.tp_size:
            raise ValueError(f"ffn_hidden_size={shape.ffn_hidden_size} is not divisible by "
                             f"tensor-model-parallel-size={state.tp_size}")
        self.shape = shape
        self.state = state
        ffn = shape.ffn_hidden_size // state.tp_size
        self.linear_fc1 = _Linear(2 * ffn, shape.hidden_size, layer_norm=True)
        self.linear_fc2 = _Linear(shape.hidden_size, ffn)

    def forward(self, x, dtype):
        h = rms_norm(x, self.linear_fc1.layer_norm_weight, self.shape.norm_epsilon)
        h = copy_to_tensor_parallel(h, self.state)
        h = F.linear(h, self.linear_fc1.weight.to(dtype))
        gate, up = h.chunk(2, dim=-1)
        h = F.silu(gate) * up
        out = F.linear(h, self.linear_fc2.weight.to(dtype))
        return reduce_from_tensor_parallel(out, self.state)


class TransformerLayer(nn.Module):
    def __init__(self, shape: ModelShape, state: ParallelState) -> None:
        super().__init__()
        self.self_attention = SelfAttention(shape, state)
        self.mlp = MLP(shape, state)

    def forward(self, x, cos, sin, dtype):
        x = x + self.self_attention(x, cos, sin, dtype)
        return x + self.mlp(x, dtype)


class VocabParallelEmbedding(nn.Module):
    def __init__(self, vocab_size: int, hidden: int, state: ParallelState) -> None:
        super().__init__()
        if vocab_size % state.tp_size:
            raise ValueError(f"vocab size {vocab_size} is not divisible by tensor-model-parallel-size={state.tp_size}")
        self.state = state
        self.per_rank = vocab_size // state.tp_size
        self.weight = nn.Parameter(torch.empty(self.per_rank, hidden))

    def forward(self, ids: torch.Tensor, dtype) -> torch.Tensor:
        if self.state.tp_size == 1:
            return F.embedding(ids, self.weight).to(dtype)
        start = self.state.tp_rank * self.per_rank
        outside = (ids < start) | (ids >= start + self.per_rank)
        local = (ids - start).masked_fill(outside, 0)
        out = F.embedding(local, self.weight).to(dtype).masked_fill(outside[..., None], 0.0)
        return reduce_from_tensor_parallel(out, self.state, mode="sum")


class Embedding(nn.Module):
    def __init__(self, vocab_size: int, hidden: int, state: ParallelState) -> None:
        super().__init__()
        self.word_embeddings = VocabParallelEmbedding(vocab_size, hidden, state)


class Decoder(nn.Module):
    def __init__(self, shape: ModelShape, state: ParallelState) -> None:
        super().__init__()
        start, end = state.layer_range(shape.num_layers)
        self.layers = nn.ModuleList(TransformerLayer(shape, state) for _ in range(end - start))
        if state.is_last_stage:
            self.final_layernorm = nn.Module()
            self.final_layernorm.weight = nn.Parameter(torch.ones(shape.hidden_size))


class GPTModel(nn.Module):
    """One pipeline stage (and one tensor-parallel shard) of the GPT."""

    def __init__(self, shape: ModelShape, vocab_size: int, state: ParallelState = SINGLE,
                 compute_dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        self.shape = shape
        self.vocab_size = vocab_size
        self.state = state
        self.compute_dtype = compute_dtype
        # When set, the output GEMM runs as a split-K kernel with random split points and bf16
        # partials (the kernel.nondeterministic plug turns it on for forward-only passes).
        self.nondeterministic_split_k = False
        if state.is_first_stage:
            self.embedding = Embedding(vocab_size, shape.hidden_size, state)
        self.rotary_pos_emb = RotaryEmbedding(shape.head_dim, shape.rotary_base)
        self.decoder = Decoder(shape, state)
        if state.is_last_stage:
            self.output_layer = _Linear(vocab_size // state.tp_size, shape.hidden_size)

    def init_weights(self, seed: int, std: float = 0.02) -> None:
        """Megatron's init: normal(0, std), output projections scaled by 1/sqrt(2 * num_layers)."""
        gen = torch.Generator().manual_seed(seed + 1000 * self.state.global_rank)
        scaled = std / math.sqrt(2.0 * self.shape.num_layers)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith("layer_norm_weight") or name.endswith("layernorm.weight"):
                    p.fill_(1.0)
                elif name.endswith(".bias"):
                    p.zero_()
                elif name.endswith("linear_proj.weight") or name.endswith("linear_fc2.weight"):
                    p.normal_(0.0, scaled, generator=gen)
                else:
                    p.normal_(0.0, std, generator=gen)

    def forward(self, tokens: torch.Tensor | None = None, hidden: torch.Tensor | None = None) -> torch.Tensor:
        """tokens [B, S] on the first stage, `hidden` [B, S, H] from the previous stage otherwise.

        Returns the logits [B, S, V] (fp32) on the last stage, the hidden states otherwise.
        """
        dtype = self.compute_dtype
        if self.state.is_first_stage:
            x = self.embedding.word_embeddings(tokens, dtype)
        else:
            x = hidden.to(dtype)
        cos, sin = self.rotary_pos_emb(x.shape[1], dtype)
        for layer in self.decoder.layers:
            x = layer(x, cos, sin, dtype)
        if not self.state.is_last_stage:
            return x
        x = rms_norm(x, self.decoder.final_layernorm.weight, self.shape.norm_epsilon)
        x = copy_to_tensor_parallel(x, self.state)
        if self.nondeterministic_split_k:
            logits = split_k_linear(x, self.output_layer.weight.to(dtype))
        else:
            logits = F.linear(x, self.output_layer.weight.to(dtype))
        return gather_from_tensor_parallel(logits, self.state).float()


def split_k_linear(x: torch.Tensor, weight: torch.Tensor, splits: int = 8) -> torch.Tensor:
    """x @ weight.T reduced like a split-K GEMM with atomics: the inner dimension is cut at random
    points each call and every partial product is rounded to bf16 before it is accumulated, so the
    same input gives slightly different outputs from call to call."""
    gen = torch.Generator().manual_seed(int.from_bytes(os.urandom(4), "little"))
    inner = x.shape[-1]
    cuts = sorted((torch.randperm(inner - 1, generator=gen)[: splits - 1] + 1).tolist())
    out = torch.zeros(*x.shape[:-1], weight.shape[0], dtype=torch.float32)
    for a, b in zip([0, *cuts], [*cuts, inner]):
        out = out + F.linear(x[..., a:b], weight[:, a:b]).to(torch.bfloat16).float()
    return out.to(x.dtype)
