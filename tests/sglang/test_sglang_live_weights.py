"""The live weights compare on real engines: the trainer's Megatron checkpoint against what the engine holds.

Each test puts weights into the engine the way a buggy weight sync would (through
/update_weights_from_disk, with writes explicitly allowed), then runs the probe on a run
directory whose --load is the trained Megatron checkpoint and whose --hf-checkpoint is the
base model the engine started from.
"""

from __future__ import annotations

from pathlib import Path

import sglang_scenarios as sc

from probes.live_weights import LiveWeights
from triage.engines.sglang import SGLangEngine
from triage.run import open_run


def load(server, weights_dir: Path) -> None:
    with SGLangEngine(server.url, allow_writes=True) as e:
        e.update_weights_from_disk(weights_dir)
        assert e.model_info().model_path == str(weights_dir)


def run_for(tmp_path: Path, weights: dict[str, Path], arch: str, url: str):
    root = sc.garbled_run(tmp_path / "run", checkpoint=weights[f"{arch}/megatron"], base_dir=weights[f"{arch}/base"])
    run = open_run(str(root))
    run.engines.append(url)
    return run


def examine(run, **params):
    probe = LiveWeights(LiveWeights.Params(**params)) if params else LiveWeights()
    obs = probe.examine(run)
    reqs = obs.evidence["requests"]
    assert obs.evidence["request_count"] == len(reqs) >= 3
    assert all(r["method"] in ("GET", "POST") and r["path"].startswith("/") and r["status"] == 200 for r in reqs)
    return obs


def test_an_engine_with_the_trained_weights_matches(servers, weights, tmp_path):
    qwen = servers.get("model")
    load(qwen, weights["qwen2/trained"])
    obs = examine(run_for(tmp_path, weights, "qwen2", qwen.url))
    assert obs.outcome == "match", obs.summary
    ev = obs.evidence
    assert ev["via"] == "checksums" and ev["tensors_compared"] == 17 == ev["tensors_matching"]
    assert ev["family"] == "qwen2" and ev["served_dtype"] == "float32"
    assert [r["path"] for r in ev["requests"]] == ["/get_server_info", "/get_model_info", "/weights_checker"]


def test_an_engine_still_on_the_base_model_is_stale(servers, weights, tmp_path):
    qwen = servers.get("model")
    load(qwen, weights["qwen2/stale"])
    obs = examine(run_for(tmp_path, weights, "qwen2", qwen.url))
    assert obs.outcome == "stale_or_missing", obs.summary
    assert sorted(obs.evidence["stale"]) == sorted(f"model.layers.{i}.mlp.{n}.weight" for i in (0, 1)
                                                   for n in ("gate_up_proj", "down_proj"))
    assert str(weights["qwen2/base"]) in obs.summary


def test_a_pipeline_stage_without_its_layer_offset(servers, weights, tmp_path):
    qwen = servers.get("model")
    load(qwen, weights["qwen2/pp_offset"])
    obs = examine(run_for(tmp_path, weights, "qwen2", qwen.url))
    assert obs.outcome == "shifted_layers", obs.summary
    ev = obs.evidence
    assert ev["offset"] == 1 and ev["engine_layers"] == [0] and ev["checkpoint_layers"] == [1]
    assert ev["stale_layers"] == [1]
    assert "engine layer 0 holds checkpoint layer 1: a fixed shift of 1 layer" in obs.summary


def test_gate_and_up_swapped(servers, weights, tmp_path):
    qwen = servers.get("model")
    load(qwen, weights["qwen2/names_swapped"])
    obs = examine(run_for(tmp_path, weights, "qwen2", qwen.url))
    assert obs.outcome == "misnamed", obs.summary
    assert {(p["engine"], p["how"]) for p in obs.evidence["pairs"]} == {
        (f"model.layers.{i}.mlp.gate_up_proj.weight", "gate_up_swapped") for i in (0, 1)}
    assert "gate_proj and up_proj in swapped order" in obs.summary


def test_llama_is_compared_through_get_weights_by_name(servers, weights, tmp_path):
    llama = servers.get("model-llama")
    load(llama, weights["llama/pp_offset"])
    run = run_for(tmp_path, weights, "llama", llama.url)
    obs = examine(run, via="by_name", rows=3)
    assert obs.outcome == "shifted_layers", obs.summary
    ev = obs.evidence
    assert ev["via"] == "get_weights_by_name" and ev["offset"] == 1 and ev["stale_layers"] == [1]
    assert sum(r["path"] == "/get_weights_by_name" for r in ev["requests"]) == 21  # every HF tensor, one request each
    load(llama, weights["llama/trained"])
    assert examine(run).outcome == "match"  # and auto mode uses the checksums
