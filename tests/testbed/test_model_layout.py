"""The trainer's Megatron-layout model computes the HF model's function, and the converter round-trips."""

from __future__ import annotations

import pytest
import torch

from triage.testbed import convert
from triage.testbed.hf_models import ModelShape, build_model
from triage.testbed.megatron_model import GPTModel

VOCAB = 384


def _hf(arch: str, seed: int = 3):
    model = build_model(ModelShape(arch=arch), VOCAB, eos_token_id=2, pad_token_id=0, seed=seed)
    with torch.no_grad():  # non-trivial norms and biases, so a swapped tensor cannot hide
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.normal_(0, 0.1)
            if "norm" in name:
                p.normal_(1, 0.1)
    return model


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_megatron_layout_model_matches_hf_logits(arch):
    hf = _hf(arch)
    shape = ModelShape(arch=arch)
    megatron = GPTModel(shape, VOCAB)
    megatron.load_state_dict(convert.hf_to_megatron(hf.state_dict(), shape), strict=True)
    tokens = torch.randint(0, VOCAB, (3, 21), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected = hf(input_ids=tokens).logits
        got = megatron(tokens)
    assert got.shape == expected.shape == (3, 21, VOCAB)
    assert torch.allclose(got, expected, atol=1e-5), (got - expected).abs().max()


def test_parameter_names_are_megatron_core_names():
    names = set(GPTModel(ModelShape(arch="qwen2"), VOCAB).state_dict())
    for expected in [
        "embedding.word_embeddings.weight",
        "decoder.layers.0.self_attention.linear_qkv.weight",
        "decoder.layers.0.self_attention.linear_qkv.bias",
        "decoder.layers.0.self_attention.linear_qkv.layer_norm_weight",
        "decoder.layers.0.self_attention.linear_proj.weight",
        "decoder.layers.1.mlp.linear_fc1.weight",
        "decoder.layers.1.mlp.linear_fc1.layer_norm_weight",
        "decoder.layers.1.mlp.linear_fc2.weight",
        "decoder.final_layernorm.weight",
        "output_layer.weight",
    ]:
        assert expected in names
    assert "decoder.layers.0.self_attention.linear_qkv.bias" not in set(GPTModel(ModelShape(arch="llama"), VOCAB).state_dict())


def test_fused_qkv_is_laid_out_per_query_group():
    shape = ModelShape(arch="llama")  # 4 query heads in 2 groups, head_dim 16
    d = shape.head_dim
    q = torch.arange(4 * d, dtype=torch.float32)[:, None].repeat(1, 2)
    k = 1000 + torch.arange(2 * d, dtype=torch.float32)[:, None].repeat(1, 2)
    v = 2000 + torch.arange(2 * d, dtype=torch.float32)[:, None].repeat(1, 2)
    fused = convert.fuse_qkv(q, k, v, shape)
    rows = fused[:, 0].tolist()
    # group 0: q heads 0 and 1, then k head 0, then v head 0; group 1 follows.
    assert rows[: 2 * d] == q[: 2 * d, 0].tolist()
    assert rows[2 * d: 3 * d] == k[:d, 0].tolist()
    assert rows[3 * d: 4 * d] == v[:d, 0].tolist()
    assert rows[4 * d: 6 * d] == q[2 * d:, 0].tolist()
    q2, k2, v2 = convert.split_qkv(fused, shape)
    assert torch.equal(q2, q) and torch.equal(k2, k) and torch.equal(v2, v)


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_converter_round_trip_hf_megatron_hf(arch):
    hf = _hf(arch).state_dict()
    shape = ModelShape(arch=arch)
    back = dict(convert.convert_all(convert.hf_to_megatron(hf, shape).items(), shape))
    params = {k: v for k, v in hf.items() if "rotary_emb" not in k}
    assert set(back) == set(params)
    for name, tensor in params.items():
        assert torch.equal(back[name], tensor), name


def test_pipeline_stage_converter_adds_the_layer_offset():
    shape = ModelShape(arch="llama", num_layers=4)
    w = torch.randn(shape.hidden_size, shape.ffn_hidden_size)
    (name, tensor), = convert.megatron_to_hf("decoder.layers.1.mlp.linear_fc2.weight", w, shape, layer_offset=2)
    assert name == "model.layers.3.mlp.down_proj.weight" and tensor is w


@pytest.mark.parametrize("name,shape_", [
    ("decoder.layers.0.self_attention.linear_qkv.weight", (128, 64)),
    ("decoder.layers.0.self_attention.linear_proj.weight", (64, 64)),
    ("decoder.layers.0.mlp.linear_fc1.weight", (256, 64)),
    ("embedding.word_embeddings.weight", (384, 64)),
])
def test_tensor_parallel_shards_gather_back(name, shape_):
    full = torch.randn(*shape_)
    shards = [convert.shard_for_tp(name, full, 2, r) for r in range(2)]
    assert all(s.numel() == full.numel() // 2 for s in shards)
    assert torch.equal(convert.gather_tp(name, shards), full)
    if name.endswith("linear_fc1.weight"):  # each rank holds [its gate rows; its up rows]
        gate, up = full.chunk(2)
        assert torch.equal(shards[1][:64], gate[64:]) and torch.equal(shards[1][64:], up[64:])
