"""`triage postmortem`: the Markdown sections, and the plots checked as images."""

from __future__ import annotations


import numpy as np
import pytest
from PIL import Image

import service_graph
import service_runs as runs
from triage.plots import ONSET_COLOR, SERIES_COLOR, Plot
from triage.postmortem import build_postmortem, write_postmortem
from triage.run import open_run


def _rgb(hex_color: str) -> np.ndarray:
    return np.array([int(hex_color[i:i + 2], 16) for i in (1, 3, 5)])


def _column_has(img: np.ndarray, x: int, top: float, bottom: float, color: str, tol: int = 40) -> bool:
    strip = img[int(top) + 2:int(bottom) - 2, max(0, x - 1):x + 2, :3].reshape(-1, 3).astype(int)
    return bool((np.abs(strip - _rgb(color)).sum(axis=1) < tol).any())


def _check_plot(plot: Plot, onset_step: int) -> np.ndarray:
    img = np.asarray(Image.open(plot.path).convert("RGB"))
    assert img.shape[1::-1] == plot.size_px == (800, 300)
    assert img.std() > 10  # not blank
    left, top, right, bottom = plot.axes_px
    assert 0 < left < right < 800 and 0 < top < bottom < 300
    series_px = (np.abs(img.reshape(-1, 3).astype(int) - _rgb(SERIES_COLOR)).sum(axis=1) < 40).sum()
    assert series_px > 200  # the series is drawn
    at = plot.column_of(onset_step)
    assert _column_has(img, at, top, bottom, ONSET_COLOR)
    away = plot.column_of(plot.xlim[0] + 0.02 * (plot.xlim[1] - plot.xlim[0]))
    assert abs(away - at) > 20 and not _column_has(img, away, top, bottom, ONSET_COLOR)
    return img


def test_postmortem_of_a_reward_that_broke_marks_the_onset_the_probe_found(tmp_path, runs_root):
    runs.reward_collapse_run(runs_root / "grpo-12")
    report = service_graph.triage("grpo-12", runs_root=str(runs_root))
    run = open_run("grpo-12", str(runs_root))
    pm = write_postmortem(run, report, tmp_path / "out" / "incident.md")
    md = (tmp_path / "out" / "incident.md").read_text()
    headings = [line for line in md.splitlines() if line.startswith("## ")]
    assert headings == ["## Summary", "## Impact", "## Timeline", "## Metrics around the anomaly",
                        "## How the triage got there", "## Ruled out", "## Not checked", "## Remedy", "## Reproduce"]
    assert md.startswith("# Postmortem: `grpo-12` — ")
    assert "- Anomaly onset: step 13 in `hf:reward` (reported by constant_reward)." in md
    assert "- Steps completed: 30 of 100 planned (last logged step 30)." in md
    assert "- Steps after the onset: 18." in md
    assert "- Last checkpoint: step 20; 10 step(s) after it are lost on a restart." in md
    assert "| 13 | **onset: step 13** (reported by constant_reward) |" in md
    assert "| 10 | checkpoint saved |" in md and "| 20 | checkpoint saved |" in md
    assert "Resume from the last checkpoint before the onset (step 10)" in md
    assert f"--resume_from_checkpoint {runs_root / 'grpo-12' / 'checkpoint-10'}" in md
    assert "- `reward.broken_fn`" not in md.split("## Ruled out")[1]  # the verdict is not among the ruled out
    assert [p.path.name for p in pm.plots][0] == "incident-reward.png"
    for p in pm.plots:
        assert p.path.parent == tmp_path / "out" and f"![{p.metric}]({p.path.name})" in md
    _check_plot(pm.plots[0], 13)


def test_postmortem_finds_a_nan_onset_the_report_did_not_name(tmp_path, runs_root):
    runs.nan_grad_run(runs_root / "nan-18", onset=18)
    report = service_graph.triage("nan-18", runs_root=str(runs_root))
    assert report.root_cause.id == "healthy"  # the test graph does not look at grad_norm
    pm = write_postmortem(open_run("nan-18", str(runs_root)), report, tmp_path / "pm.md")
    assert pm.onset is not None and (pm.onset.step, pm.onset.metric) == (18, "hf:grad_norm")
    grad = next(p for p in pm.plots if p.metric == "grad_norm")
    assert grad.nonfinite == 13 and grad.points == 30
    img = _check_plot(grad, 18)
    # NaN steps are drawn as black crosses along the top, at their steps only.
    left, top, right, bottom = grad.axes_px
    band = img[int(top) + 3:int(top + 0.25 * (bottom - top)), :, :3].sum(axis=2) < 60

    def crossed(step: float) -> bool:
        x = grad.column_of(step)
        return bool(band[:, x - 2:x + 3].any())

    assert all(crossed(s) for s in range(19, 31))
    assert not any(crossed(s) for s in (10, 12, 14, 16))


def test_postmortem_of_a_slime_oom_prices_the_loss_and_gives_the_replay_commands(tmp_path, runs_root):
    runs.slime_oom_run(runs_root / "oom7")
    report = service_graph.triage("oom7", runs_root=str(runs_root))
    pm = write_postmortem(open_run("oom7", str(runs_root)), report, tmp_path / "oom7.md")
    md = pm.markdown
    assert "`oom7` (slime): the triage names **" in md and "The job crashed after step 7." in md
    assert "- Steps completed: 8 of 3000 planned (last logged step 7)." in md
    assert "- Wall time: 9 min from the first to the last log line; about 68 s per step." in md
    assert "- Time lost: about 9 min: 8 step(s) with no checkpoint, all to redo; with 8 GPUs, 1.2 GPU-hours." in md
    assert "| `actor_train` | 8 | 5 min | 40 s |" in md
    assert "| traceback: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 18.50 GiB." in md
    replay = md.split("Replay training on the saved rollouts", 1)[1].split("```", 2)[1]
    assert replay.strip().startswith("bash\npython3 train.py \\")
    assert "--load-debug-rollout-data '/mnt/debug/run7/rollout_{rollout_id}.pt'" in replay
    assert replay.rstrip().endswith("--debug-train-only")
    assert replay.count("-debug-rollout-data") == 1  # the run's own --save-debug-rollout-data is replaced
    rollout_only = md.split("Generate rollouts alone", 1)[1].split("```", 2)[1]
    assert "--debug-rollout-only" in rollout_only and "--max-tokens-per-gpu 32768" in rollout_only
    assert "- `--max-tokens-per-gpu`" in md.split("## Remedy", 1)[1]
    crash = pm.plots[0]
    assert pm.onset.crash and pm.onset.step == 7
    _check_plot(crash, 7)


def test_postmortem_without_an_output_file_has_no_plots(runs_root):
    runs.reward_collapse_run(runs_root / "grpo-12")
    report = service_graph.triage("grpo-12", runs_root=str(runs_root))
    pm = build_postmortem(open_run("grpo-12", str(runs_root)), report, None)
    assert pm.plots == [] and "are written with `-o FILE.md`" in pm.markdown


@pytest.mark.parametrize("ref", ["../escape", "missing"])
def test_postmortem_cli_refuses_bad_run_ids_with_exit_code_2(runs_root, ref, capsys):
    import argparse

    from triage.postmortem import add_postmortem_parser

    parser = argparse.ArgumentParser()
    add_postmortem_parser(parser.add_subparsers())
    ns = parser.parse_args(["postmortem", ref, "--runs-root", str(runs_root)])
    assert ns.func(ns) == 2
    err = capsys.readouterr().err
    assert err.startswith("triage: error: ") and len(err.strip().splitlines()) == 1


def test_postmortem_of_a_testbed_failure_renders_with_its_onset_marked(tmp_path):
    """A run the testbed made by planting a too-high learning rate: the real pipeline, end to end."""
    from triage.api import triage_run
    from triage.testbed.scenarios import generate

    run = open_run(str(generate("optim.lr_too_high")))
    report = triage_run(run)
    assert report.root_cause.id == "optim.lr_too_high"
    pm = write_postmortem(run, report, tmp_path / "pm.md")
    md = (tmp_path / "pm.md").read_text()
    assert "optim.lr_too_high" in md and "--load-debug-rollout-data" in md
    assert pm.onset is not None and pm.plots
    # the onset the deciding finding names, not an earlier probe's: a spike once the 4-step warmup has
    # reached the full rate (step 3). Where the first one comes depends on the CPU the testbed trained on
    # (a tiny model at 1e-3 is chaotic: its float rounding differs between CPUs), so only its order is fixed.
    decided = report.path[-1].evidence
    assert pm.onset.step == decided["onset_step"]
    assert decided["lr"]["peak_step"] == 3 <= pm.onset.step
    assert "lr_schedule" in pm.onset.how
    for plot in pm.plots:
        assert plot.path.exists() and plot.path.parent == tmp_path
        assert f"]({plot.path.name})" in md
    plot = pm.plots[0]
    img = np.asarray(Image.open(plot.path).convert("RGB"))
    assert img.shape[1::-1] == plot.size_px and img.std() > 10
    left, top, right, bottom = plot.axes_px
    at = plot.column_of(pm.onset.step)
    assert _column_has(img, at, top, bottom, ONSET_COLOR)
    far = int(left + 5 if at > (left + right) / 2 else right - 5)  # the other side of the axes
    assert abs(far - at) > 20 and not _column_has(img, far, top, bottom, ONSET_COLOR)
