"""The tiny causal LMs: Llama and Qwen2 families from transformers configs.

Shapes are those of a real GQA model shrunk down (hidden 64, 4 query heads sharing 2
KV heads, SwiGLU MLP, RMSNorm, rotary embeddings, untied output layer), so the
Megatron layout (per-group fused QKV, fused gate/up) and its conversion are exercised
for real. Qwen2 adds the QKV bias.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

ARCHS = ("llama", "qwen2")


@dataclass(frozen=True)
class ModelShape:
    arch: str = "qwen2"
    hidden_size: int = 64
    ffn_hidden_size: int = 128
    num_layers: int = 2
    num_attention_heads: int = 4
    num_query_groups: int = 2
    rotary_base: float = 10000.0
    norm_epsilon: float = 1e-6
    max_position_embeddings: int = 512

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def qkv_bias(self) -> bool:
        return self.arch == "qwen2"

    def to_dict(self) -> dict:
        return asdict(self)


def hf_config(shape: ModelShape, vocab_size: int, eos_token_id: int, pad_token_id: int):
    from transformers import LlamaConfig, Qwen2Config

    if shape.arch not in ARCHS:
        raise ValueError(f"unknown arch {shape.arch!r}: choose one of {', '.join(ARCHS)}")
    cls = Qwen2Config if shape.arch == "qwen2" else LlamaConfig
    kwargs = dict(
        vocab_size=vocab_size,
        hidden_size=shape.hidden_size,
        intermediate_size=shape.ffn_hidden_size,
        num_hidden_layers=shape.num_layers,
        num_attention_heads=shape.num_attention_heads,
        num_key_value_heads=shape.num_query_groups,
        max_position_embeddings=shape.max_position_embeddings,
        rms_norm_eps=shape.norm_epsilon,
        rope_theta=shape.rotary_base,
        tie_word_embeddings=False,
        eos_token_id=eos_token_id,
        pad_token_id=pad_token_id,
        bos_token_id=None,
        dtype="float32",
    )
    if shape.arch == "llama":
        kwargs.update(attention_bias=False, mlp_bias=False)
    return cls(**kwargs)


def model_class(arch: str):
    from transformers import LlamaForCausalLM, Qwen2ForCausalLM

    return Qwen2ForCausalLM if arch == "qwen2" else LlamaForCausalLM


def build_model(shape: ModelShape, vocab_size: int, eos_token_id: int, pad_token_id: int, seed: int):
    import torch

    config = hf_config(shape, vocab_size, eos_token_id, pad_token_id)
    torch.manual_seed(seed)
    model = model_class(shape.arch)(config)
    model.config._attn_implementation = "sdpa"
    return model.float().eval()


def load_model(path: Path, dtype=None):
    """Load an HF checkpoint directory (config.json + safetensors) on CPU."""
    import torch
    from transformers import AutoConfig
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    config = AutoConfig.from_pretrained(str(path))
    arch = config.model_type
    if arch not in ARCHS:
        raise ValueError(f"{path}: model_type {arch!r} is not one the testbed runs ({', '.join(ARCHS)})")
    model = model_class(arch).from_pretrained(str(path), dtype=dtype or torch.float32)
    return model.eval()


def shape_from_config_file(path: Path) -> tuple[ModelShape, int]:
    """Shape and vocab size from an HF checkpoint's config.json, without importing transformers."""
    import json

    cfg = json.loads((Path(path) / "config.json").read_text())
    rope = cfg.get("rope_parameters") or {}
    shape = ModelShape(
        arch=cfg["model_type"],
        hidden_size=cfg["hidden_size"],
        ffn_hidden_size=cfg["intermediate_size"],
        num_layers=cfg["num_hidden_layers"],
        num_attention_heads=cfg["num_attention_heads"],
        num_query_groups=cfg.get("num_key_value_heads", cfg["num_attention_heads"]),
        rotary_base=float(rope.get("rope_theta", cfg.get("rope_theta", 10000.0))),
        norm_epsilon=cfg.get("rms_norm_eps", 1e-6),
        max_position_embeddings=cfg.get("max_position_embeddings", 512),
    )
    return shape, cfg["vocab_size"]


def shape_from_config(config) -> ModelShape:
    return ModelShape(
        arch=config.model_type,
        hidden_size=config.hidden_size,
        ffn_hidden_size=config.intermediate_size,
        num_layers=config.num_hidden_layers,
        num_attention_heads=config.num_attention_heads,
        num_query_groups=config.num_key_value_heads,
        rotary_base=float(config.rope_parameters["rope_theta"]) if getattr(config, "rope_parameters", None) else 10000.0,
        norm_epsilon=config.rms_norm_eps,
        max_position_embeddings=config.max_position_embeddings,
    )
