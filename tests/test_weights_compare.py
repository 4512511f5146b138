"""The weights compare: each outcome on a planted difference, `match` on a faithful conversion."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml

from probes.weights_compare import WeightsCompare
from test_weight_readers import (
    hf_config,
    make_hf_state,
    to_megatron,
    write_legacy,
    write_safetensors,
    write_torch_dist,
)
from triage.errors import CorruptArtifact, Unavailable
from triage.run import open_run
from triage.weights.compare import compare_weights
from triage.weights.convert import ModelDims, expected_inv_freq, family_for, fuse_for_sglang
from triage.weights.readers import open_checkpoint, open_weights

CFG = hf_config("llama", layers=4)
DIMS = ModelDims.from_hf_config(CFG)


def trained(base: dict[str, torch.Tensor], seed: int = 1, scale: float = 0.05) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {n: t + scale * torch.randn(t.shape, generator=g) for n, t in base.items()}


@pytest.fixture(scope="module")
def weights() -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    base = make_hf_state(CFG, seed=0)
    return base, trained(base)


@pytest.fixture(scope="module")
def dist_ckpt(tmp_path_factory, weights) -> Path:
    return write_torch_dist(tmp_path_factory.mktemp("dist"), to_megatron(weights[1], CFG), CFG, tp=2)


@pytest.fixture(scope="module")
def pp_ckpt(tmp_path_factory, weights) -> Path:
    return write_legacy(tmp_path_factory.mktemp("legacy"), to_megatron(weights[1], CFG), CFG, tp=2, pp=2)


@pytest.fixture(scope="module")
def baseline_dir(tmp_path_factory, weights) -> Path:
    return write_safetensors(tmp_path_factory.mktemp("hf"), weights[0], CFG)


def compare(tmp_path: Path, ckpt: Path, engine: dict[str, torch.Tensor], baseline: Path | None = None,
            cfg: dict = CFG, **kw):
    dump = write_safetensors(tmp_path / "engine", engine, cfg)
    dims = ModelDims.from_hf_config(cfg)
    return compare_weights(open_checkpoint(ckpt), open_weights(dump), dims=dims, family=family_for(dims.model_type),
                           baseline=open_weights(baseline) if baseline else None, **kw)


def test_faithful_conversion_matches(tmp_path, weights, dist_ckpt, baseline_dir):
    r = compare(tmp_path, dist_ckpt, weights[1], baseline_dir)
    assert r.outcome == "match", r.summary
    assert r.evidence["tensors_compared"] == len(weights[1]) == 39
    assert r.evidence["tensors_exact"] == 39
    assert r.evidence["checkpoint"]["format"] == "torch_dist" and r.evidence["checkpoint"]["iteration"] == 7
    assert r.evidence["bytes_read"] > 2 * sum(t.numel() * 4 for t in weights[1].values()) * 0.9
    assert "39 engine tensors match" in r.summary


def test_bf16_engine_matches_fp32_checkpoint_at_bf16_precision(tmp_path, weights, dist_ckpt):
    r = compare(tmp_path, dist_ckpt, {n: t.bfloat16() for n, t in weights[1].items()})
    assert r.outcome == "match", r.summary
    assert r.evidence["tensors_exact"] == 39  # the engine's cast is the checkpoint rounded to bf16


def test_sglang_fused_engine_names_are_split_before_comparing(tmp_path, weights, pp_ckpt):
    dump = tmp_path / "engine"
    dump.mkdir()
    torch.save(fuse_for_sglang(weights[1]), dump / "weights.pt")
    (dump / "config.json").write_text(json.dumps(CFG))
    r = compare_weights(open_checkpoint(pp_ckpt), open_weights(dump), dims=DIMS, family=family_for("llama"))
    assert r.outcome == "match", r.summary
    assert r.evidence["tensors_compared"] == 39


def pp_offset_bug(base: dict[str, torch.Tensor], train: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """What the engine holds when stage 2 of PP=2 sends local layer ids 0, 1 without its offset of 2."""
    engine = dict(train)
    for name in train:
        if name.startswith("model.layers."):
            layer = int(name.split(".")[2])
            if layer >= 2:
                engine[name.replace(f"layers.{layer}.", f"layers.{layer - 2}.", 1)] = train[name]
                engine[name] = base[name]  # never overwritten: still the initial weights
    return engine


def test_pp_offset_dropped_is_shifted_layers(tmp_path, weights, pp_ckpt, baseline_dir):
    r = compare(tmp_path, pp_ckpt, pp_offset_bug(*weights), baseline_dir)
    assert r.outcome == "shifted_layers", r.summary
    ev = r.evidence
    assert ev["offset"] == 2
    assert ev["engine_layers"] == [0, 1] and ev["checkpoint_layers"] == [2, 3]
    assert ev["stale_layers"] == [2, 3]
    assert ev["counts"]["shifted"] == 18  # 9 parameters in each of 2 layers
    assert "engine layers 0-1 hold checkpoint layers 2-3" in r.summary


def test_swapped_names_are_misnamed_pairs(tmp_path, weights, dist_ckpt):
    engine = dict(weights[1])
    g, u = "model.layers.1.mlp.gate_proj.weight", "model.layers.1.mlp.up_proj.weight"
    engine[g], engine[u] = engine[u], engine[g]
    r = compare(tmp_path, dist_ckpt, engine)
    assert r.outcome == "misnamed", r.summary
    assert {"engine": g, "holds": u} in r.evidence["pairs"] and {"engine": u, "holds": g} in r.evidence["pairs"]


def test_tensor_left_at_initial_weights_is_stale(tmp_path, weights, dist_ckpt, baseline_dir):
    engine = dict(weights[1])
    engine["model.layers.3.mlp.down_proj.weight"] = weights[0]["model.layers.3.mlp.down_proj.weight"]
    r = compare(tmp_path, dist_ckpt, engine, baseline_dir)
    assert r.outcome == "stale_or_missing", r.summary
    assert r.evidence["stale"] == ["model.layers.3.mlp.down_proj.weight"]
    assert r.evidence["missing"] == []
    # without the baseline the same engine is only a value mismatch, and says why
    r2 = compare(tmp_path / "nobase", dist_ckpt, engine)
    assert r2.outcome == "value_mismatch"
    assert "no baseline" in r2.summary


def test_tensor_absent_from_engine_is_missing(tmp_path, weights, dist_ckpt):
    engine = {n: t for n, t in weights[1].items() if n != "model.layers.2.self_attn.o_proj.weight"}
    r = compare(tmp_path, dist_ckpt, engine)
    assert r.outcome == "stale_or_missing"
    assert r.evidence["missing"] == ["model.layers.2.self_attn.o_proj.weight"]


def test_all_zero_engine_tensor_is_zeroed(tmp_path, weights, dist_ckpt, baseline_dir):
    engine = dict(weights[1])
    engine["lm_head.weight"] = torch.zeros_like(engine["lm_head.weight"])
    r = compare(tmp_path, dist_ckpt, engine, baseline_dir)
    assert r.outcome == "zeroed", r.summary
    assert r.evidence["zeroed"] == ["lm_head.weight"]


def test_perturbed_tensor_is_value_mismatch_with_its_diffs(tmp_path, weights, dist_ckpt, baseline_dir):
    engine = dict(weights[1])
    v = "model.layers.0.self_attn.v_proj.weight"
    engine[v] = engine[v].clone()
    engine[v][0, :4] += 0.25
    r = compare(tmp_path, dist_ckpt, engine, baseline_dir)
    assert r.outcome == "value_mismatch", r.summary
    worst = r.evidence["worst"][0]
    assert worst["name"] == v
    assert worst["max_abs"] == pytest.approx(0.25, rel=1e-4)
    assert worst["mismatched_fraction"] == pytest.approx(4 / engine[v].numel())
    assert r.evidence["counts"]["mismatched"] == 1


@pytest.mark.parametrize("planted", ["zeros", "other_theta"])
def test_wrong_rotary_buffer_with_matching_parameters_is_buffers_differ(tmp_path, weights, dist_ckpt, planted):
    good = expected_inv_freq(DIMS)
    engine = dict(weights[1])
    engine["model.rotary_emb.inv_freq"] = good
    r = compare(tmp_path / "good", dist_ckpt, engine)
    assert r.outcome == "match" and r.evidence["counts"]["buffers_checked"] == 1
    bad = torch.zeros_like(good) if planted == "zeros" else expected_inv_freq(ModelDims.from_hf_config(CFG | {"rope_theta": 1e6}))
    engine["model.rotary_emb.inv_freq"] = bad
    r = compare(tmp_path / "bad", dist_ckpt, engine)
    assert r.outcome == "buffers_differ", r.summary
    assert r.evidence["buffers"][0]["name"] == "model.rotary_emb.inv_freq"
    assert "rope_theta=10000" in r.summary


def test_priority_shift_before_zeroed_and_counts_keep_both(tmp_path, weights, pp_ckpt, baseline_dir):
    engine = pp_offset_bug(*weights)
    engine["lm_head.weight"] = torch.zeros_like(engine["lm_head.weight"])
    r = compare(tmp_path, pp_ckpt, engine, baseline_dir)
    assert r.outcome == "shifted_layers"
    assert r.evidence["counts"]["zeroed"] == 1


def test_tied_embeddings_compare_lm_head_against_the_embedding(tmp_path):
    cfg = hf_config("qwen3", layers=2, tie=True)
    hf = make_hf_state(cfg, seed=4)
    ckpt = write_legacy(tmp_path / "ckpt", to_megatron(hf, cfg), cfg, tp=2)
    engine = dict(hf) | {"lm_head.weight": hf["model.embed_tokens.weight"].clone()}
    r = compare(tmp_path / "a", ckpt, engine, cfg=cfg)
    assert r.outcome == "match" and "lm_head.weight" in r.diffs
    engine["lm_head.weight"] = torch.randn_like(engine["lm_head.weight"])
    r = compare(tmp_path / "b", ckpt, engine, cfg=cfg)
    assert r.outcome == "value_mismatch" and r.evidence["worst"][0]["name"] == "lm_head.weight"


# --- the probe on a run directory --------------------------------------------------------------


def make_run(root: Path, weights, engine: dict[str, torch.Tensor] | None, pp: int = 2) -> Path:
    base, train = weights
    write_legacy(root / "ckpt", to_megatron(train, CFG), CFG, tp=2, pp=pp)
    write_safetensors(root / "hf", base, CFG)
    if engine is not None:
        write_safetensors(root / "engine_weights", engine)
    (root / "triage.yaml").write_text(yaml.safe_dump({
        "framework": "slime",
        "args": {"load": "/mnt/cluster/run/ckpt", "hf_checkpoint": "hf", "pipeline_model_parallel_size": pp},
    }))
    return root


def test_probe_names_the_stage_offset(tmp_path, weights):
    run = open_run(str(make_run(tmp_path / "run", weights, pp_offset_bug(*weights))))
    obs = WeightsCompare().examine(run)
    assert obs.outcome == "shifted_layers"
    assert obs.evidence["offset"] == 2 and obs.evidence["stage_offsets"] == [0, 2]
    assert obs.evidence["family"] == "llama"
    assert obs.evidence["dims_from"].endswith("config.json")
    assert obs.evidence["baseline"].endswith("hf")
    assert obs.evidence["seconds"] > 0 and obs.evidence["tensors_compared"] == 39


def test_probe_without_engine_dump_is_unavailable_with_the_command(tmp_path, weights):
    run = open_run(str(make_run(tmp_path / "run", weights, None)))
    with pytest.raises(Unavailable) as exc:
        WeightsCompare().examine(run)
    assert exc.value.artifact == "engine_weights"
    assert "engine_weights/" in exc.value.command and "--engine http://HOST:PORT" in exc.value.command


def test_probe_on_a_truncated_shard_raises_corrupt_artifact_naming_it(tmp_path, weights):
    root = make_run(tmp_path / "run", weights, weights[1])
    victim = root / "ckpt" / "iter_0000007" / "mp_rank_01_001" / "model_optim_rng.pt"
    victim.write_bytes(victim.read_bytes()[:2048])
    with pytest.raises(CorruptArtifact) as exc:
        WeightsCompare().examine(open_run(str(root)))
    assert str(victim) in str(exc.value)


def test_checkpoint_tensors_without_a_rule_are_reported_not_silently_matched(tmp_path, weights):
    meg = to_megatron(weights[1], CFG) | {"mtp.layers.0.enorm.weight": torch.ones(16)}
    ckpt = write_legacy(tmp_path / "ckpt", meg, CFG)
    r = compare(tmp_path, ckpt, weights[1])
    assert r.outcome == "match"
    assert r.evidence["coverage_complete"] is False
    assert r.evidence["unconverted"] == ["mtp.layers.0.enorm.weight"]
    assert "1 checkpoint tensors were not compared (e.g. mtp.layers.0.enorm.weight)" in r.summary
