"""Megatron -> HF names and layouts, from the rules in triage/weights/families.yaml."""

from __future__ import annotations

import textwrap

import pytest
import torch

from test_weight_readers import hf_config, make_hf_state, to_megatron
from triage.errors import BadInput
from triage.weights.convert import (
    LayoutError,
    MegatronToHF,
    ModelDims,
    UnmappedParameter,
    canonical_name,
    expected_inv_freq,
    expert_offset,
    family_for,
    fuse_for_sglang,
    hf_to_sglang,
    load_rules,
    merge_tp_shards,
    split_sglang,
    uniform_layer_offset,
)


def converter(cfg: dict) -> MegatronToHF:
    dims = ModelDims.from_hf_config(cfg)
    return MegatronToHF(family_for(dims.model_type), dims)


@pytest.mark.parametrize("model_type", ["llama", "qwen2", "qwen3"])
def test_megatron_checkpoint_converts_back_to_the_hf_weights(model_type):
    cfg = hf_config(model_type, layers=2)
    hf = make_hf_state(cfg, seed=5)
    got = dict(converter(cfg).convert_all(to_megatron(hf, cfg).items()))
    assert sorted(got) == sorted(hf)
    assert all(torch.equal(got[n], hf[n]) for n in hf)


def test_fused_qkv_is_split_per_query_group():
    # 2 query groups, 2 q heads per group, head_dim 1, hidden 1: rows are [q q k v | q q k v]
    cfg = hf_config("llama", hidden=4, heads=4, groups=2)
    cfg["head_dim"] = 1
    dims = ModelDims.from_hf_config(cfg)
    qkv = torch.tensor([[10.0], [11.0], [20.0], [30.0], [12.0], [13.0], [21.0], [31.0]])
    out = dict(MegatronToHF(family_for("llama"), dims).convert("decoder.layers.0.self_attention.linear_qkv.weight", qkv))
    assert out["model.layers.0.self_attn.q_proj.weight"].flatten().tolist() == [10, 11, 12, 13]
    assert out["model.layers.0.self_attn.k_proj.weight"].flatten().tolist() == [20, 21]
    assert out["model.layers.0.self_attn.v_proj.weight"].flatten().tolist() == [30, 31]


def test_qwen2_qkv_bias_and_qwen3_qk_norm_names():
    c2 = converter(hf_config("qwen2"))
    assert c2.hf_names("decoder.layers.1.self_attention.linear_qkv.bias") == [
        "model.layers.1.self_attn.q_proj.bias", "model.layers.1.self_attn.k_proj.bias",
        "model.layers.1.self_attn.v_proj.bias"]
    c3 = converter(hf_config("qwen3"))
    assert c3.hf_names("decoder.layers.0.self_attention.k_layernorm.weight") == ["model.layers.0.self_attn.k_norm.weight"]
    with pytest.raises(UnmappedParameter):  # llama has no qk norm
        converter(hf_config("llama")).hf_names("decoder.layers.0.self_attention.k_layernorm.weight")


def test_layer_norms_fused_into_linear_layers_are_renamed():
    c = converter(hf_config("llama"))
    assert c.hf_names("decoder.layers.3.self_attention.linear_qkv.layer_norm_weight") == ["model.layers.3.input_layernorm.weight"]
    assert c.hf_names("decoder.layers.3.mlp.linear_fc1.layer_norm_weight") == ["model.layers.3.post_attention_layernorm.weight"]
    assert c.hf_names("decoder.final_layernorm.weight") == ["model.norm.weight"]


def test_padded_vocab_rows_are_dropped():
    cfg = hf_config("llama", vocab=40)
    hf = make_hf_state(cfg)
    meg = to_megatron(hf, cfg, padded_vocab=64)
    assert meg["embedding.word_embeddings.weight"].shape[0] == 64
    out = dict(converter(cfg).convert("output_layer.weight", meg["output_layer.weight"]))
    assert torch.equal(out["lm_head.weight"], hf["lm_head.weight"])


def test_pipeline_stage_local_layer_ids_get_the_stage_offset():
    c = converter(hf_config("llama", layers=8))
    offset = uniform_layer_offset(pp_rank=1, pp_size=2, num_layers=8)
    assert offset == 4
    assert c.hf_names("decoder.layers.1.mlp.linear_fc2.weight", layer_offset=offset) == ["model.layers.5.mlp.down_proj.weight"]
    # interleaved virtual stages: chunk 1 of PP rank 0 starts after chunk 0 of every rank
    assert uniform_layer_offset(pp_rank=0, pp_size=2, num_layers=8, vp_stage=1, vp_size=2) == 4
    assert canonical_name("module.module.decoder.layers.0.mlp.linear_fc1.weight", layer_offset=6) == \
        "decoder.layers.6.mlp.linear_fc1.weight"


def test_expert_parallel_local_experts_get_the_rank_offset():
    cfg = hf_config("qwen3_moe") | {"num_experts": 8}
    c = converter(cfg)
    off = expert_offset(ep_rank=1, num_experts=8, ep_size=2)
    assert off == 4
    t = torch.arange(48 * 16, dtype=torch.float32).reshape(48, 16)
    out = dict(c.convert("decoder.layers.1.mlp.experts.local_experts.1.linear_fc1.weight", t, expert_offset=off))
    assert torch.equal(out["model.layers.1.mlp.experts.5.gate_proj.weight"], t[:24])
    assert torch.equal(out["model.layers.1.mlp.experts.5.up_proj.weight"], t[24:])
    # TEGroupedMLP's `linear_fc2.weight{E}` names the same expert
    assert c.hf_names("decoder.layers.1.mlp.experts.linear_fc2.weight3", expert_offset=off) == \
        ["model.layers.1.mlp.experts.7.down_proj.weight"]
    assert c.hf_names("decoder.layers.0.mlp.router.weight") == ["model.layers.0.mlp.gate.weight"]


def test_tp_shards_merge_along_each_partition_dim():
    gate, up = torch.arange(8.0).reshape(4, 2), 100 + torch.arange(8.0).reshape(4, 2)
    shards = [torch.cat([gate[:2], up[:2]]), torch.cat([gate[2:], up[2:]])]  # GLU: each rank [gate_i; up_i]
    assert torch.equal(merge_tp_shards("decoder.layers.0.mlp.linear_fc1.weight", shards), torch.cat([gate, up]))
    w = torch.arange(12.0).reshape(2, 6)
    assert torch.equal(merge_tp_shards("decoder.layers.0.mlp.linear_fc2.weight", list(w.chunk(2, dim=1))), w)
    assert torch.equal(merge_tp_shards("decoder.layers.0.self_attention.linear_qkv.weight", list(w.chunk(2))), w)
    norm = torch.ones(6)
    assert merge_tp_shards("decoder.layers.0.self_attention.linear_qkv.layer_norm_weight", [norm, norm]) is norm


def test_sglang_fused_names_round_trip():
    cfg = hf_config("llama")
    dims = ModelDims.from_hf_config(cfg)
    hf = make_hf_state(cfg, seed=2)
    assert hf_to_sglang("model.layers.0.self_attn.k_proj.weight") == ("model.layers.0.self_attn.qkv_proj.weight", "k")
    assert hf_to_sglang("model.layers.0.mlp.up_proj.weight") == ("model.layers.0.mlp.gate_up_proj.weight", 1)
    assert hf_to_sglang("model.norm.weight") is None
    fused = fuse_for_sglang(hf)
    qkv = fused["model.layers.1.self_attn.qkv_proj.weight"]
    assert qkv.shape == (16 + 8 + 8, 16)
    assert torch.equal(qkv[16:24], hf["model.layers.1.self_attn.k_proj.weight"])
    assert "model.layers.1.self_attn.q_proj.weight" not in fused
    parts = dict(split_sglang("model.layers.1.self_attn.qkv_proj.weight", qkv, dims))
    assert all(torch.equal(parts[f"model.layers.1.self_attn.{p}_proj.weight"], hf[f"model.layers.1.self_attn.{p}_proj.weight"])
               for p in "qkv")
    half = dict(split_sglang("model.layers.0.mlp.gate_up_proj.weight", fused["model.layers.0.mlp.gate_up_proj.weight"], dims))
    assert torch.equal(half["model.layers.0.mlp.up_proj.weight"], hf["model.layers.0.mlp.up_proj.weight"])


def test_family_choice_and_unknown_family_message():
    assert family_for("qwen2").name == "qwen2"
    assert family_for("mistral").name == "llama"
    assert family_for(None, {"qk_layernorm": True}).name == "qwen3"
    assert family_for(None, {"qk_layernorm": True, "num_experts": 64}).name == "qwen3_moe"
    assert family_for(None, {"add_qkv_bias": True}).name == "qwen2"
    with pytest.raises(BadInput, match="families.yaml"):
        family_for("gpt_bigcode")


def test_wrong_dims_raise_a_layout_error_naming_the_parameter():
    cfg = hf_config("llama")
    wrong = ModelDims.from_hf_config(cfg | {"num_key_value_heads": 4})
    meg = to_megatron(make_hf_state(cfg), cfg)
    with pytest.raises(LayoutError, match="linear_qkv.weight.*32 rows"):
        MegatronToHF(family_for("llama"), wrong).convert("decoder.layers.0.self_attention.linear_qkv.weight",
                                                          meg["decoder.layers.0.self_attention.linear_qkv.weight"])


def test_a_new_family_is_a_yaml_entry(tmp_path):
    rules = tmp_path / "families.yaml"
    rules.write_text(textwrap.dedent("""
        families:
          llama:
            model_types: [llama]
            rules:
              - {megatron: 'decoder\\.final_layernorm\\.weight', hf: model.norm.weight, op: copy}
          gemma_like:
            extends: llama
            model_types: [gemma_like]
            rules:
              - {megatron: 'decoder\\.layers\\.(?P<layer>\\d+)\\.mlp\\.linear_fc1\\.weight',
                 hf: ['model.layers.{layer}.mlp.gate.weight', 'model.layers.{layer}.mlp.up.weight'], op: split_gate_up}
    """))
    fam = load_rules(rules).families["gemma_like"]
    c = MegatronToHF(fam, ModelDims.from_hf_config(hf_config("llama")))
    assert c.hf_names("decoder.layers.2.mlp.linear_fc1.weight") == ["model.layers.2.mlp.gate.weight", "model.layers.2.mlp.up.weight"]
    assert c.hf_names("decoder.final_layernorm.weight") == ["model.norm.weight"]  # inherited


def test_dims_from_transformers5_config_and_megatron_args():
    dims = ModelDims.from_hf_config({"model_type": "qwen3", "hidden_size": 64, "num_attention_heads": 8,
                                     "num_key_value_heads": 2, "head_dim": 16,
                                     "rope_parameters": {"rope_theta": 1e6, "rope_type": "default"}})
    assert (dims.num_query_groups, dims.head_dim, dims.rope_theta) == (2, 16, 1e6)
    inv = expected_inv_freq(dims)
    assert inv.shape == (8,) and inv[0] == 1.0 and float(inv[1]) == pytest.approx(1e6 ** (-2 / 16))
    margs = ModelDims.from_megatron_args({"hidden_size": 64, "num_attention_heads": 8, "group_query_attention": True,
                                          "num_query_groups": 2, "kv_channels": 16, "rotary_base": 5e5,
                                          "untie_embeddings_and_output_weights": True})
    assert (margs.num_query_groups, margs.head_dim, margs.rope_theta, margs.tie_word_embeddings) == (2, 16, 5e5, False)
