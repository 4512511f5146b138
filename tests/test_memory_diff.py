"""What changed since the last good run: `triage diff`, the automatic baseline, the report's section.

Pairs of runs from one config (tests/metric_runs.py: slime logs with Megatron's arguments
block and `step N:` records, as THUDM/slime's train.py prints them), one healthy, one
failed with one change.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from metric_runs import SLIME_ARGS, healthy_series, slime_run
from triage.api import triage_run
from triage.cli import main
from triage.memory import enrich
from triage.memory.diff import compare
from triage.run import open_run

sys.path.insert(0, str(Path(__file__).resolve().parent / "service"))
from service_runs import slime_oom_run  # noqa: E402


@pytest.fixture(autouse=True)
def _no_memory_config():
    enrich.configure()
    yield
    enrich.configure()


def _exploding(series: dict[str, np.ndarray], at: int = 12) -> dict[str, np.ndarray]:
    out = {k: v.copy() for k, v in series.items()}
    out["grad_norm"][at:] *= 8
    return out


def _good(root: Path, args: dict | None = None) -> Path:
    slime_run(root, healthy_series(30, 0), args=args)
    (root / "triage.yaml").write_text("status: succeeded\n")
    return root


def test_a_changed_parallel_flag_is_first_and_raises_its_candidate(tmp_path, capsys):
    runs = tmp_path / "runs"
    _good(runs / "good", dict(SLIME_ARGS, tensor_model_parallel_size=1))
    slime_run(runs / "bad", _exploding(healthy_series(30, 0)), args=dict(SLIME_ARGS, tensor_model_parallel_size=2))
    code = main(["run", "bad", "--runs-root", str(runs), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 3 and report["root_cause"]["id"] == "inconclusive"
    changes = report["changes"]
    assert changes["found_by"] == "runs root" and changes["baseline"].endswith("good")
    top = changes["changes"][0]
    assert (top["name"], top["baseline"], top["run"]) == ("tensor_model_parallel_size", "1", "2")
    assert "parallel.sharding_bug" in top["bears_on"]
    first = report["candidates"][0]
    assert first["id"] == "parallel.sharding_bug"
    assert first["supports"][0] == "changed since the last good run: tensor_model_parallel_size: 1 → 2 (×2)"
    assert report["root_cause"]["explanation"].endswith("Candidates, most supported first: parallel.sharding_bug, "
                                                        "data.bad_sample, numerics.overflow.")
    assert changes["divergence"]["metric"] == "grad_norm" and changes["divergence"]["step"] == 12


def test_a_changed_learning_rate_in_diff_json_and_markdown(tmp_path, capsys):
    good = _good(tmp_path / "good")
    slime_run(tmp_path / "bad", _exploding(healthy_series(30, 0)), args=dict(SLIME_ARGS, lr=1e-5))
    assert main(["diff", str(tmp_path / "bad"), str(good), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    lr = out["changes"][0]
    assert (lr["name"], lr["baseline"], lr["run"], lr["note"]) == ("lr", "1e-06", "1e-05", "×10")
    assert lr["bears_on"] == ["optim.lr_too_high", "optim.lr_too_low"]
    assert out["divergence"]["metric"] == "grad_norm" and out["divergence"]["step"] == 12
    assert "3.5 × the baseline's robust spread (1.4826 × MAD" in out["rule"]
    assert main(["diff", str(tmp_path / "bad"), str(good), "--markdown"]) == 0
    md = capsys.readouterr().out
    assert md.splitlines()[0] == "# Changed since the last good run: `" + str(tmp_path / "bad") + "`"
    assert "- argument: lr: 1e-06 → 1e-05 (×10) — bears on optim.lr_too_high, optim.lr_too_low" in md


def test_a_package_version_change(tmp_path):
    good = _good(tmp_path / "good")
    (good / "pip_freeze.txt").write_text("sglang==0.4.6.post5\ntorch==2.6.0\n")
    bad_root = tmp_path / "bad"
    slime_run(bad_root, healthy_series(30, 0))
    (bad_root / "pip_freeze.txt").write_text("sglang==0.4.9\ntorch==2.6.0\n")
    summary = compare(open_run(str(bad_root)), open_run(str(good)))
    top = summary.changes[0]
    assert (top.kind, top.name, top.baseline, top.run, top.note) == ("version", "sglang", "0.4.6.post5", "0.4.9", "upgrade")
    assert top.bears_on[0] == "engine.version_regression"
    assert [c.name for c in summary.changes] == ["sglang"]  # torch did not change
    assert summary.divergence is None  # the same metrics


def test_a_data_path_change(tmp_path):
    good = _good(tmp_path / "good", dict(SLIME_ARGS, prompt_data="/data/gsm8k/train.jsonl"))
    slime_run(tmp_path / "bad", healthy_series(30, 0), args=dict(SLIME_ARGS, prompt_data="/data/gsm8k/train_v2.jsonl"))
    summary = compare(open_run(str(tmp_path / "bad")), open_run(str(good)))
    assert summary.lines()[0] == ("data path: prompt_data: /data/gsm8k/train.jsonl → /data/gsm8k/train_v2.jsonl"
                                  " — bears on data.bad_sample, data.chat_template_mismatch")


def test_a_changed_memory_flag_is_cited_in_the_decided_verdict(tmp_path, capsys):
    runs = tmp_path / "runs"
    good = slime_oom_run(runs / "good")
    (good / "cmdline.txt").write_text((good / "cmdline.txt").read_text().replace("32768", "16384"))
    (good / "triage.yaml").write_text("status: succeeded\n")
    slime_oom_run(runs / "bad")
    assert main(["run", "bad", "--runs-root", str(runs), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["root_cause"]["id"].startswith("memory.")
    top = report["changes"]["changes"][0]
    assert (top["name"], top["baseline"], top["run"]) == ("max_tokens_per_gpu", "16384", "32768")
    assert "Changed since the last good run: max_tokens_per_gpu: 16384 → 32768 (×2)." in report["root_cause"]["explanation"]


def test_healthy_runs_of_other_seeds_do_not_diverge_and_a_spike_does(tmp_path):
    base = open_run(str(_good(tmp_path / "g")))
    for seed in (1, 2, 3):
        other = slime_run(tmp_path / f"s{seed}", healthy_series(30, seed))
        assert compare(other, base).divergence is None, seed
    spiked = slime_run(tmp_path / "spike", _exploding(healthy_series(30, 0), at=20))
    d = compare(spiked, base).divergence
    assert d is not None and (d.metric, d.step) == ("grad_norm", 20)


def test_the_baseline_is_found_in_the_store(tmp_path, capsys, monkeypatch):
    # The good run was triaged healthy before; the failed one lives elsewhere (no runs root).
    good = slime_run(tmp_path / "shared" / "good", healthy_series(30, 0))
    assert triage_run(good).root_cause.id == "healthy"
    slime_run(tmp_path / "scratch" / "bad", _exploding(healthy_series(30, 0)), args=dict(SLIME_ARGS, lr=3e-6))
    monkeypatch.delenv("TRIAGE_RUNS_ROOT", raising=False)
    assert main(["run", str(tmp_path / "scratch" / "bad"), "--markdown"]) == 3
    md = capsys.readouterr().out
    section = md.split("## Changed since the last good run", 1)[1].split("## How the triage got there", 1)[0]
    assert f"_baseline {tmp_path / 'shared' / 'good'} (triaged healthy on " in section
    assert "found in the store)_" in section
    assert "- argument: lr: 1e-06 → 3e-06 (×3) — bears on optim.lr_too_high, optim.lr_too_low" in section


def test_no_baseline_no_section(tmp_path, capsys):
    slime_run(tmp_path / "runs" / "bad", _exploding(healthy_series(30, 0)))
    slime_run(tmp_path / "runs" / "other-job", healthy_series(30, 0), args=dict(SLIME_ARGS, hf_checkpoint="/m/Other"))
    (tmp_path / "runs" / "other-job" / "triage.yaml").write_text("status: succeeded\n")
    assert main(["run", "bad", "--runs-root", str(tmp_path / "runs"), "--json"]) == 3
    assert json.loads(capsys.readouterr().out)["changes"] is None  # a different model is a different job


def test_a_baseline_that_is_not_a_run_is_one_line_exit_2(tmp_path, capsys):
    slime_run(tmp_path / "bad", healthy_series(30, 0))
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("buy milk\n")
    for argv in (["diff", str(tmp_path / "bad"), str(tmp_path / "notes")],
                 ["run", str(tmp_path / "bad"), "--baseline", str(tmp_path / "missing")],
                 ["diff", str(tmp_path / "bad")]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("triage: error: ") and err.count("\n") == 1, err
    assert main(["diff", str(tmp_path / "bad"), str(tmp_path / "notes")]) == 2
    assert "is not a run" in capsys.readouterr().err


def test_the_postmortem_cites_the_baseline_diff(tmp_path, capsys):
    runs = tmp_path / "runs"
    _good(runs / "good")
    slime_run(runs / "bad", _exploding(healthy_series(30, 0)), args=dict(SLIME_ARGS, lr=1e-5))
    assert main(["postmortem", "bad", "--runs-root", str(runs)]) == 0
    md = capsys.readouterr().out
    section = md.split("## Changed since the last good run", 1)[1].split("\n## ", 1)[0]
    assert "_baseline good (its manifest says it succeeded; found in the runs root); divergence: " in section
    assert "- argument: lr: 1e-06 → 1e-05 (×10) — bears on optim.lr_too_high, optim.lr_too_low" in section
    assert "- first divergence: grad_norm from step 12 " in section
