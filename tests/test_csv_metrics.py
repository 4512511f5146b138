"""Metric files beyond the log: CSV files written by the standard library's csv writer in the shapes trainers and their
exporters use, and JSON nested deeper than the parser recurses."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

from triage.cli import main
from triage.run import open_run


def _write(path: Path, header: list[str], rows: list[list[object]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def _lightning(path: Path, grad_norms: list[float]) -> Path:
    # Lightning's CSVLogger (lightning/pytorch/loggers/csv_logs.py): `epoch`, `step` and one column per logged key, a
    # cell left empty where its row did not log that key (a validation row beside the training rows)
    rows: list[list[object]] = []
    for i, g in enumerate(grad_norms):
        rows.append([0, 10 * (i + 1), 2.0 - 0.05 * i, g, 1e-5, ""])
        if i % 5 == 4:
            rows.append([0, 10 * (i + 1), "", "", "", 1.9 - 0.05 * i])
    return _write(path, ["epoch", "step", "loss", "grad_norm", "learning_rate", "eval_loss"], rows)


def test_a_lightning_metrics_csv_in_the_run_directory_is_read_by_step(tmp_path):
    _lightning(tmp_path / "lightning_logs" / "version_0" / "metrics.csv", [0.5 + 0.01 * i for i in range(20)])
    run = open_run(str(tmp_path))
    grad = run.metrics.get("grad_norm")
    assert grad.source == "csv:grad_norm"
    assert list(grad.steps[:3]) == [10, 20, 30] and len(grad) == 20
    assert grad.values[0] == pytest.approx(0.5)
    assert run.metrics.records()["loss"]["source"] == "csv"


def test_a_scripts_csv_keyed_by_iteration_with_a_timestamp_column_is_read(tmp_path, capsys):
    # Prem01-cyber/AxiomForgeAI:logs/grpo/grpo_20260426_032827/metrics.csv (a GRPO trainer's per-iteration export)
    rows = [[i, f"2026-04-26T03:{38 + i:02d}:38", 0.0006 - 0.00003 * i, 0.91 - 0.001 * i, 0.16, 1e-6 * (1 + i % 4)]
            for i in range(1, 31)]
    _write(tmp_path / "metrics.csv", ["iteration", "timestamp", "loss", "mean_reward", "std_reward", "learning_rate"],
           rows)
    rc = main(["run", str(tmp_path / "metrics.csv"), "--no-cache", "--json"])
    out = capsys.readouterr().out
    assert rc == 3, out  # read, and nothing in it decides a cause
    run = open_run(str(tmp_path))
    lr = run.metrics.get("lr")
    assert list(lr.steps[:2]) == [1, 2] and lr.values[1] == pytest.approx(3e-6)


def test_a_csv_runs_nan_grad_norm_is_seen(tmp_path):
    _lightning(tmp_path / "metrics.csv", [0.5] * 10 + [math.nan] * 10)
    run = open_run(str(tmp_path))
    grad = run.metrics.get("grad_norm")
    assert sum(math.isnan(v) for v in grad.values) == 10


def test_a_data_sets_csv_is_not_a_metric_file(tmp_path, capsys):
    _write(tmp_path / "train.csv", ["prompt", "answer"], [["What is 2+2?", "4"], ["Name a prime", "7"]])
    (tmp_path / "job.log").write_text("step:1 - actor/grad_norm:0.4 - critic/score/mean:0.1\n"
                                      "step:2 - actor/grad_norm:0.41 - critic/score/mean:0.2\n")
    run = open_run(str(tmp_path))
    assert "csv" not in run.metrics.table.kinds()
    assert run.metrics.get("grad_norm").source == "verl:actor/grad_norm"
    # alone, it is no run
    (tmp_path / "job.log").unlink()
    rc = main(["run", str(tmp_path), "--no-cache"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "reads as a training run" in err


def test_a_csv_whose_quote_is_never_closed_is_a_one_line_error(tmp_path, capsys):
    # the rest of the file becomes one cell, longer than the csv reader's field limit
    path = _lightning(tmp_path / "metrics.csv", [0.5] * 5)
    path.write_bytes(path.read_bytes() + b'0,60,"1.7,0.5,1e-05,\n' + b"0,70,1.6,0.5,1e-05,\n" * 10000)
    rc = main(["run", str(tmp_path), "--no-cache"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "metrics.csv" in err and "CSV" in err and "Traceback" not in err


def test_json_nested_deeper_than_the_parser_goes_is_a_bad_line_not_a_crash(tmp_path, capsys):
    # a metric JSONL line and a pip list of `[` to a depth json's parser recurses out of
    (tmp_path / "metrics.jsonl").write_text("[" * 200_000 + "\n")
    (tmp_path / "rl-run.jsonl").write_text("[" * 200_000 + "\n")
    (tmp_path / "job.log").write_text("step:1 - actor/grad_norm:0.4\n")
    rc = main(["run", str(tmp_path), "--no-cache"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "metrics.jsonl" in err and "internal error" not in err
    (tmp_path / "metrics.jsonl").unlink()
    (tmp_path / "pip_list.json").write_text("[" * 200_000)
    rc = main(["run", str(tmp_path), "--no-cache", "--json"])
    assert rc in (0, 3), capsys.readouterr().err


def test_areal_stats_exported_to_csv_are_read_under_its_own_names(tmp_path):
    # ethanewer/teacher-answer-rl's *_training_metrics.csv: AReaL's stats_tracker keys per step (areal/engine/ppo/actor.py,
    # under the trainer's `ppo_actor` scope)
    header = ["step", "ppo_actor/update/entropy/avg", "ppo_actor/update/grad_norm", "ppo_actor/task_reward/avg",
              "ppo_actor/no_eos_ratios/avg", "timeperf/train_step"]
    rows = [[i, 0.2 + 0.001 * i, 0.7, 0.4 + 0.002 * i, 0.0078125, 44.0] for i in range(1, 41)]
    _write(tmp_path / "grpo_baseline_training_metrics.csv", header, rows)
    run = open_run(str(tmp_path))
    assert run.metrics.get("grad_norm").source == "csv:ppo_actor/update/grad_norm"
    assert run.metrics.get("reward").source == "csv:ppo_actor/task_reward/avg"
    assert run.metrics.get("truncated_ratio").values[0] == 0.0078125  # AReaL's share with no EOS
    assert run.metrics.get("entropy").source == "csv:ppo_actor/update/entropy/avg"
