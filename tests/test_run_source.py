"""Resolving what the user typed: paths, run-ids under the runs root, and refusals."""

from __future__ import annotations

import pytest

from triage.errors import CorruptArtifact, RunNotFound, UnsafeRunRef
from triage.run import open_run


def make_run(root, name="run1", log="[2026-08-01 10:00:00] train.py:1 - hello\n"):
    d = root / name
    d.mkdir(parents=True)
    (d / "job.log").write_text(log)
    return d


def test_path_is_opened_and_log_discovered(tmp_path):
    d = make_run(tmp_path)
    run = open_run(str(d))
    assert run.root == d.resolve()
    assert [p.name for p in run.artifacts.logs] == ["job.log"]


def test_run_id_is_looked_up_under_the_runs_root(tmp_path):
    make_run(tmp_path / "runs", "exp-7")
    run = open_run("exp-7", runs_root=str(tmp_path / "runs"))
    assert run.root.name == "exp-7"


def test_runs_root_from_environment(tmp_path, monkeypatch):
    make_run(tmp_path / "runs", "exp-8")
    monkeypatch.setenv("TRIAGE_RUNS_ROOT", str(tmp_path / "runs"))
    assert open_run("exp-8").root.name == "exp-8"


def test_dotdot_run_id_is_refused(tmp_path):
    make_run(tmp_path / "runs", "a")
    make_run(tmp_path, "secret")
    with pytest.raises(UnsafeRunRef, match=r"'\.\.'"):
        open_run("../secret", runs_root=str(tmp_path / "runs"))


def test_absolute_path_outside_runs_root_is_refused(tmp_path):
    (tmp_path / "runs").mkdir()
    outside = make_run(tmp_path, "elsewhere")
    with pytest.raises(UnsafeRunRef, match="outside the runs root"):
        open_run(str(outside), runs_root=str(tmp_path / "runs"))


def test_symlink_escaping_the_runs_root_is_refused(tmp_path):
    (tmp_path / "runs").mkdir()
    outside = make_run(tmp_path, "elsewhere")
    (tmp_path / "runs" / "sneaky").symlink_to(outside)
    with pytest.raises(UnsafeRunRef, match="outside the runs root"):
        open_run("sneaky", runs_root=str(tmp_path / "runs"))


def test_missing_path_is_a_clear_error(tmp_path):
    with pytest.raises(RunNotFound, match="no such run directory"):
        open_run(str(tmp_path / "nope"))


def test_unknown_run_id_is_a_clear_error(tmp_path):
    (tmp_path / "runs").mkdir()
    with pytest.raises(RunNotFound, match="no run 'ghost'"):
        open_run("ghost", runs_root=str(tmp_path / "runs"))


def test_empty_directory_is_refused(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(RunNotFound, match="is empty"):
        open_run(str(tmp_path / "empty"))


def test_directory_without_artifacts_is_refused(tmp_path):
    d = tmp_path / "odd"
    d.mkdir()
    (d / "picture.png").write_bytes(b"\x89PNG")
    with pytest.raises(RunNotFound, match="nothing to triage"):
        open_run(str(d))


def test_file_instead_of_directory_is_refused(tmp_path):
    f = tmp_path / "job.log"
    f.write_text("x")
    with pytest.raises(RunNotFound, match="not a directory"):
        open_run(str(f))


def test_manifest_names_artifacts(tmp_path):
    d = tmp_path / "m"
    (d / "logs").mkdir(parents=True)
    (d / "logs" / "driver.txt").write_text("x\n")
    (d / "triage.yaml").write_text("framework: slime\nstatus: running\nlogs: [logs/driver.txt]\nargs: {lr: 1.0e-6}\n")
    run = open_run(str(d))
    assert [p.name for p in run.artifacts.logs] == ["driver.txt"]
    assert run.framework == "slime" and run.status == "running"


def test_manifest_naming_a_missing_file_is_refused(tmp_path):
    d = tmp_path / "m"
    d.mkdir()
    (d / "triage.yaml").write_text("logs: [nope.log]\n")
    with pytest.raises(CorruptArtifact, match="nope.log"):
        open_run(str(d))


def test_malformed_manifest_is_refused(tmp_path):
    d = tmp_path / "m"
    d.mkdir()
    (d / "triage.yaml").write_text("logs: [unclosed\n")
    with pytest.raises(CorruptArtifact, match="not valid YAML"):
        open_run(str(d))


def test_args_paths_are_looked_up_relative_to_the_run(tmp_path):
    d = make_run(tmp_path)
    (d / "ckpt" / "actor").mkdir(parents=True)
    run = open_run(str(d))
    assert run.resolve_path("/mnt/cluster/exp/ckpt/actor") == d / "ckpt" / "actor"
    assert run.resolve_path("ckpt/actor") == d / "ckpt" / "actor"
    assert run.resolve_path("/mnt/cluster/exp/nothing") is None


def test_a_wandb_run_folders_console_is_the_log_where_the_run_has_none_of_its_own(tmp_path):
    # raja17021998/LLM-AIL-821-Project:wandb/run-20241126_032230-lch50sgg/files/: W&B's capture of the job's console
    files = tmp_path / "wandb" / "run-20241126_032230-lch50sgg" / "files"
    files.mkdir(parents=True)
    (files / "output.log").write_text("{'loss': 0.52, 'grad_norm': 0.08, 'learning_rate': 1e-05, 'epoch': 0.5}\n")
    (files / "wandb-summary.json").write_text('{"train/loss": 0.52}\n')
    (tmp_path / "wandb" / "run-20241126_032230-lch50sgg" / "logs").mkdir()
    (tmp_path / "wandb" / "run-20241126_032230-lch50sgg" / "logs" / "debug.log").write_text("wandb debug\n")
    run = open_run(str(tmp_path))
    assert [p.name for p in run.artifacts.logs] == ["output.log"]
    # beside the job's own log, W&B's copy is not read twice
    (tmp_path / "train.log").write_text("{'loss': 0.52, 'grad_norm': 0.08, 'learning_rate': 1e-05, 'epoch': 0.5}\n")
    assert [p.name for p in open_run(str(tmp_path)).artifacts.logs] == ["train.log"]
