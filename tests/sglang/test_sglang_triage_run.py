"""The whole triage on a garbled run whose engine is live: the verdict names the weight-sync bug.

The run has a garbled first rollout in its log, the trainer's Megatron checkpoint and the
HF base, and no dump of the engine's weights: the engine-weights question's
weights_compare is `unavailable`, and live_weights asks the engine itself. The last test
runs `triage run RUN --engine URL --allow-engine-writes` as a user would.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import sglang_scenarios as sc
import yaml

from probes.isolated_rollout import IsolatedRollout
from probes.live_weights import LiveWeights
from triage.api import triage_run
from triage.engines.sglang import SGLangEngine
from triage.graph import DEFAULT_DIR, load_graph
from triage.probe import registry
from triage.run import open_run

REPO = Path(__file__).resolve().parents[2]
CASES = [("pp_offset", "weights.pp_layer_offset"), ("names_swapped", "weights.name_mapping"),
         ("stale", "weights.missing")]


def wired_playbooks(tmp: Path) -> Path:
    """The shipped playbooks: the engine-weights question asks a live engine when no dump is there."""
    return DEFAULT_DIR


def garbled_run_on(server, weights, scenario: str, tmp_path: Path) -> Path:
    with SGLangEngine(server.url, allow_writes=True) as e:
        e.update_weights_from_disk(weights[f"qwen2/{scenario}"])
    return sc.garbled_run(tmp_path / "run", checkpoint=weights["qwen2/megatron"], base_dir=weights["qwen2/base"])


@pytest.mark.parametrize(("scenario", "verdict"), CASES)
def test_the_walk_names_the_weight_sync_bug(servers, weights, tmp_path, scenario, verdict):
    qwen = servers.get("model")
    root = garbled_run_on(qwen, weights, scenario, tmp_path)
    probes = {**registry(), "live_weights": LiveWeights, "isolated_rollout": IsolatedRollout}
    graph = load_graph(wired_playbooks(tmp_path), probes=probes)
    run = open_run(str(root))
    run.engines.append(qwen.url)
    report = triage_run(run, graph)
    assert report.root_cause.id == verdict, report.model_dump_json(indent=1)[:3000]
    path = report.model_dump()
    text = json.dumps(path)
    assert "live_weights" in text and qwen.url in text and "/weights_checker" in text


def _shipped_wiring() -> str | None:
    if "live_weights" not in registry():
        return "live_weights is not registered in the triage.probes entry points yet"
    if not any(n.probe == "live_weights" and n.playbook == "garbled" for n in load_graph().nodes.values()):
        return "the shipped garbled playbook does not run live_weights yet"
    return None


def test_triage_run_with_engine_from_the_command_line(servers, weights, tmp_path):
    missing = _shipped_wiring()
    if missing:
        pytest.skip(f"skipped: {missing}")
    qwen = servers.get("model")
    root = garbled_run_on(qwen, weights, "pp_offset", tmp_path)
    triage = Path(sys.executable).parent / "triage"
    cmd = [str(triage) if triage.exists() else sys.executable, *([] if triage.exists() else ["-m", "triage"]),
           "run", str(root), "--engine", qwen.url, "--allow-engine-writes", "--json", "--no-cache"]
    env = dict(os.environ, PYTHONPATH=str(REPO), TRIAGE_DB=str(tmp_path / "db.sqlite"))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    assert report["root_cause"]["id"] == "weights.pp_layer_offset"
    assert qwen.url in proc.stdout and "/weights_checker" in proc.stdout


def test_step1_logprobs_with_wrong_engine_weights_name_the_weight_fault_through_engine(servers, weights, tmp_path):
    """The symptom is step-1 log-probs, not garbled text: the walk still asks the live engine for its weights."""
    qwen = servers.get("model")
    with SGLangEngine(qwen.url, allow_writes=True) as e:
        e.update_weights_from_disk(weights["qwen2/pp_offset"])
    root = sc.step1_run(tmp_path / "run", checkpoint=weights["qwen2/megatron"], base_dir=weights["qwen2/base"])
    offline = triage_run(open_run(str(root)), load_graph())
    assert offline.root_cause.id == "inconclusive"  # without the engine, the weights cannot be shown right or wrong
    assert "weights.pp_layer_offset" in [c.id for c in offline.candidates]
    run = open_run(str(root))
    run.engines.append(qwen.url)
    report = triage_run(run, load_graph())
    assert report.root_cause.id == "weights.pp_layer_offset", [(s.probe, s.outcome, s.summary) for s in report.path]
    assert [s.outcome for s in report.path if s.probe == "step1_invariants"][0] == "logprob_extreme"
    assert any(s.probe == "live_weights" and s.outcome == "shifted_layers" for s in report.path)
