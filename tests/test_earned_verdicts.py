"""Every verdict earned by evidence: what a user sees when the evidence is short.

A folder that is not a run is refused; a log that holds no metric the triage can read,
or a trainer_state.json whose values cannot be parsed, is inconclusive and says what it
could not read; `healthy` needs every health check to have run; an inconclusive report
ranks the candidates its findings point at, each with the step that would decide it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from metric_runs import SLIME_ARGS, noisy_extra, noisy_series, slime_metrics_log

from triage.cli import main

ROOT = Path(__file__).resolve().parent.parent


def triage_json(capsys, path: Path, *extra: str) -> tuple[int, dict]:
    code = main(["run", str(path), "--json", "--no-cache", *extra])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else {"stderr": err})


def test_a_folder_with_no_run_in_it_is_refused_in_one_line(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("Shopping list\nmilk\neggs\n")
    (tmp_path / "README.md").write_text("# my project\n")
    code = main(["run", str(tmp_path), "--no-cache"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "reads as a training run" in err and "notes.txt" in err
    assert "Traceback" not in err


def test_a_launch_script_cut_before_its_command_is_named_in_the_refusal(tmp_path, capsys):
    # THUDM/slime#1237: the pasted run.sh ends at its `mkdir -p` lines, before any training argument
    (tmp_path / "run.sh").write_text("#!/bin/bash\nset -ex\nexport CUDA_VISIBLE_DEVICES=0,1\nnum_gpus=2\n"
                                     "mkdir -p $ckpt_save_folder\n")
    code = main(["run", str(tmp_path), "--no-cache"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "run.sh held no metric record, argument" in err and "no file" not in err


def test_a_log_with_only_the_arguments_block_is_inconclusive_and_says_no_metric_was_read(tmp_path, capsys):
    log = slime_metrics_log(noisy_series(3), dict(SLIME_ARGS))
    log.lines = [line for line in log.lines if not any(f" - {k} " in line for k in ("step", "rollout", "perf"))]
    log.write(tmp_path)
    code, report = triage_json(capsys, tmp_path)
    assert code == 3 and report["root_cause"]["id"] == "inconclusive"
    assert report["coverage"]["metrics"] == {}
    assert any("no training metric was read" in gap for gap in report["coverage"]["not_understood"])
    assert report["coverage"]["read"]["arguments"] >= len(SLIME_ARGS)  # the arguments block itself was read


def test_a_log_whose_metric_lines_no_parser_reads_is_inconclusive_even_when_they_hold_nan(tmp_path, capsys):
    lines = ["[2026-08-01 10:00:00] train.py:10 - starting training"]
    for i in range(30):
        grad = "nan" if i > 20 else f"{0.3 + 0.01 * i:.3f}"
        lines.append(f"[2026-08-01 10:{i:02d}:00] train.py:99 - step {i}: {{'train/grad_norm': {grad}, 'train/loss': 0.1")
    (tmp_path / "job.log").write_text("\n".join(lines) + "\n")
    code, report = triage_json(capsys, tmp_path)
    assert report["root_cause"]["id"] == "inconclusive", report["root_cause"]
    assert code == 3
    gaps = " ".join(report["coverage"]["not_understood"])
    assert "look like metric records but no parser recognised them" in gaps and "step 0: {'train/grad_norm'" in gaps


def test_a_trainer_state_whose_values_cannot_be_parsed_is_inconclusive(tmp_path, capsys):
    rows = [{"step": i + 1, "loss": "n/a", "grad_norm": None, "reward": "?", "epoch": (i + 1) / 30} for i in range(30)]
    (tmp_path / "trainer_state.json").write_text(json.dumps({"global_step": 30, "max_steps": 30, "log_history": rows}))
    code, report = triage_json(capsys, tmp_path)
    assert code == 3 and report["root_cause"]["id"] == "inconclusive"
    assert "grad_norm" not in report["coverage"]["metrics"]


def test_healthy_needs_every_health_check_a_short_clean_run_is_inconclusive_with_healthy_ranked(tmp_path, capsys):
    series = noisy_series(3, seed=4)
    slime_metrics_log(series, dict(SLIME_ARGS), extra=noisy_extra(series)).write(tmp_path)
    code, report = triage_json(capsys, tmp_path)
    assert code == 3 and report["root_cause"]["id"] == "inconclusive"
    gate = next(s for s in report["path"] if s["probe"] == "health_checks")
    assert gate["outcome"] == "insufficient" and "grad_norm" in gate["evidence"]["missing"]
    assert report["candidates"][0]["id"] == "healthy" and report["candidates"][0]["next_step"]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_long_noisy_healthy_run_is_healthy_with_every_check_run(tmp_path, capsys, seed):
    series = noisy_series(40, seed=seed)
    slime_metrics_log(series, dict(SLIME_ARGS), extra=noisy_extra(series)).write(tmp_path)
    code, report = triage_json(capsys, tmp_path)
    assert report["root_cause"]["id"] == "healthy", [(s["probe"], s["outcome"], s["summary"]) for s in report["path"]]
    assert code == 0
    gate = next(s for s in report["path"] if s["probe"] == "health_checks")
    assert all(c["available"] and c["passed"] for c in gate["evidence"]["checks"] if c["required"])
    health = [c for c in report["coverage"]["checks"] if c["probe"] == "health_checks"][0]
    assert {h["name"] for h in health["health_checks"]} >= {"grad_norm", "reward_signal", "truncation", "nonfinite"}


def test_an_inconclusive_example_ranks_candidates_with_a_confirming_step(capsys):
    code, report = triage_json(capsys, ROOT / "examples" / "garbled-no-engine-dump")
    assert code == 3 and report["root_cause"]["id"] == "inconclusive"
    top = report["candidates"][0]
    assert top["id"].startswith("weights.") and top["supports"] and "--engine" in top["next_step"]
    assert "candidates" in report["root_cause"]["explanation"].lower()


def test_step1_huge_logprobs_without_the_engine_weights_is_not_a_configuration_verdict(tmp_path, capsys):
    series = noisy_series(30, seed=3)
    series["log_probs"] = series["log_probs"] - 3.0
    series["ref_log_probs"] = series["log_probs"].copy()
    slime_metrics_log(series, dict(SLIME_ARGS), extra=noisy_extra(series)).write(tmp_path)
    code, report = triage_json(capsys, tmp_path)
    assert report["root_cause"]["id"] == "inconclusive", report["root_cause"]["id"]
    ids = [c["id"] for c in report["candidates"]]
    assert "config.training_error" in ids and any(i.startswith("weights.") for i in ids)
    assert not math.isnan(report["root_cause"]["confidence"])


def test_a_peer_reset_without_the_flight_recorder_is_not_called_the_network(tmp_path, capsys):
    # a rank that left the collectives and exited resets its peers' connections too
    (tmp_path / "job.log").write_text(
        "[2026-08-01 10:00:00] train.py:12 - Start training\n"
        "(WorkerDict pid=812, ip=10.0.0.5) ConnectionResetError: [Errno 104] Connection reset by peer\n",
        encoding="utf-8",
    )
    code, doc = triage_json(capsys, tmp_path)
    assert code == 3 and doc["root_cause"]["id"] == "inconclusive"
    ranked = [c["id"] for c in doc["candidates"]]
    assert "infra.network" in ranked and "dist.collective_mismatch" in ranked


def test_a_connect_failure_is_the_network_without_asking_the_flight_recorder(tmp_path, capsys):
    (tmp_path / "job.log").write_text(
        "[2026-08-01 10:00:00] train.py:12 - Start training\n"
        "[rank9]:gpu-node-2:2345:2410 [1] NCCL WARN socketStartConnect: Connect to 10.0.0.11<43211> failed : "
        "Software caused connection abort\n",
        encoding="utf-8",
    )
    code, doc = triage_json(capsys, tmp_path)
    assert code == 0 and doc["root_cause"]["id"] == "infra.network"
    assert "flight_recorder" not in [step["probe"] for step in doc["path"]]
