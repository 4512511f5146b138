"""TensorBoard event files, written by torch's real SummaryWriter, read as the run's metrics."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from triage.cli import main
from triage.errors import CorruptArtifact
from triage.run import open_run

torch_tb = pytest.importorskip("torch.utils.tensorboard")


def _write_verl_events(logdir: Path, steps: int = 6) -> Path:
    """verl with trainer.logger=['tensorboard'] logs the same keys as its console (verl/utils/tracking.py)."""
    writer = torch_tb.SummaryWriter(str(logdir))
    for step in range(1, steps + 1):
        writer.add_scalar("actor/grad_norm", 0.4 + 0.01 * step, step)
        writer.add_scalar("actor/entropy", 0.6 - 0.01 * step, step)
        writer.add_scalar("critic/score/mean", float("nan") if step == 4 else 0.1 * step, step)
    writer.close()
    return next(logdir.glob("events.out.tfevents.*"))


def _write_hf_events(logdir: Path) -> Path:
    """The HF Trainer's TensorBoardCallback writes its log dict under `train/` (report_to='tensorboard')."""
    writer = torch_tb.SummaryWriter(str(logdir))
    for step in (10, 20, 30):
        writer.add_scalar("train/grad_norm", 1.0 / step, step)
        writer.add_scalar("train/reward", 0.01 * step, step)
        writer.add_scalar("train/completions/clipped_ratio", 0.9, step)
    writer.close()
    return next(logdir.glob("events.out.tfevents.*"))


def test_event_files_in_the_run_directory_are_discovered_and_read(tmp_path):
    _write_verl_events(tmp_path / "tensorboard_log" / "proj" / "exp")
    run = open_run(str(tmp_path))
    assert len(run.artifacts.tensorboard) == 1
    grad = run.metrics.get("grad_norm")
    assert grad.source == "tensorboard:actor/grad_norm"
    assert list(grad.steps) == [1, 2, 3, 4, 5, 6]
    assert grad.values[0] == pytest.approx(0.41)
    reward = run.metrics.get("reward")
    assert math.isnan(reward.values[3])
    assert run.metrics.records()["entropy"]["source"] == "tensorboard"


def test_hf_trainer_tags_under_train_prefix_map_to_canonical_names(tmp_path):
    _write_hf_events(tmp_path / "runs" / "Nov25")
    run = open_run(str(tmp_path))
    assert run.metrics.get("grad_norm").source == "tensorboard:train/grad_norm"
    assert list(run.metrics.get("truncated_ratio").values) == pytest.approx([0.9, 0.9, 0.9])


def test_an_event_file_truncated_mid_record_is_a_one_line_error(tmp_path):
    path = _write_verl_events(tmp_path / "tb")
    data = path.read_bytes()
    path.write_bytes(data[:-9])  # the last record loses its checksum and part of its body
    run = open_run(str(tmp_path))
    with pytest.raises(CorruptArtifact, match="truncated mid-record") as exc:
        run.metrics.get("grad_norm")
    assert exc.value.path == str(path) and "\n" not in str(exc.value)


def test_a_truncated_event_file_stops_the_triage_with_exit_2(tmp_path, capsys):
    path = _write_verl_events(tmp_path / "tb")
    path.write_bytes(path.read_bytes()[:-9])
    (tmp_path / "job.log").write_text("(TaskRunner pid=1) step:1 - actor/grad_norm:0.4\n")
    rc = main(["run", str(tmp_path), "--no-cache", "--json"])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert len(err.splitlines()) == 1 and path.name in err and "truncated" in err


def test_a_git_lfs_pointer_in_an_event_files_place_is_skipped_and_named(tmp_path, capsys):
    # Silver-8ce/llamaTest:runs/Dec30_14-32-19_slab-0002/: HF Hub's .gitattributes sends `*tfevents*` to LFS, and a
    # clone without `git lfs pull` holds the pointer text; the trainer_state.json beside it is still read
    path = _write_verl_events(tmp_path / "runs")
    path.write_text("version https://git-lfs.github.com/spec/v1\n"
                    "oid sha256:ac07394363b907a009e199b28f8b66bbfacde478f5acb04b071cb50ac4648d28\nsize 210539\n")
    (tmp_path / "job.log").write_text("(TaskRunner pid=1) step:1 - actor/grad_norm:0.4\n")
    rc = main(["run", str(tmp_path), "--no-cache", "--json"])
    out = capsys.readouterr().out
    assert rc in (0, 3)
    assert "Git LFS pointers" in out and path.name in out
