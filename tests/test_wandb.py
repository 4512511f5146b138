"""W&B runs written offline by the real `wandb.init(mode="offline")`, read with the wandb package's reader."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from triage.cli import main
from triage.errors import CorruptArtifact
from triage.run import open_run

wandb = pytest.importorskip("wandb")


@pytest.fixture
def offline_env(monkeypatch):
    """Nothing may reach the network: offline mode, no stats, no git, no update check."""
    for key, value in {"WANDB_MODE": "offline", "WANDB_SILENT": "true", "WANDB_DISABLE_GIT": "true",
                       "WANDB_DISABLE_CODE": "true", "WANDB_ERROR_REPORTING": "false",
                       "WANDB_API_KEY": ""}.items():
        monkeypatch.setenv(key, value)


def _offline_run(root: Path, rows: list[dict[str, float]]) -> Path:
    """What slime's `--use-wandb` (or verl's trainer.logger=['wandb']) leaves with WANDB_MODE=offline."""
    run = wandb.init(mode="offline", dir=str(root), project="triage-test",
                     settings=wandb.Settings(x_disable_stats=True, x_disable_meta=True, console="off",
                                             disable_git=True, save_code=False))
    for step, row in enumerate(rows):
        run.log(row, step=step)
    run.finish()
    return next(root.glob("wandb/offline-run-*/run-*.wandb"))


ROWS = [{"train/grad_norm": 0.5 + 0.1 * i, "rollout/raw_reward": 0.1 * i, "train/loss": float("nan") if i == 2 else 0.3}
        for i in range(5)]


def test_an_offline_run_is_discovered_and_its_history_read(tmp_path, offline_env):
    path = _offline_run(tmp_path, ROWS)
    run = open_run(str(tmp_path))
    assert [p.name for p in run.artifacts.wandb_runs] == [path.name]
    grad = run.metrics.get("grad_norm")
    assert grad.source == "wandb:train/grad_norm"
    assert list(grad.steps) == [0, 1, 2, 3, 4]
    assert grad.values[4] == pytest.approx(0.9)
    assert math.isnan(run.metrics.get("loss").values[2])
    assert run.metrics.get("reward").source == "wandb:rollout/raw_reward"
    assert run.metrics.records()["grad_norm"]["source"] == "wandb"


def test_a_corrupt_wandb_file_is_a_one_line_error_naming_it(tmp_path, offline_env):
    path = _offline_run(tmp_path, ROWS)
    data = bytearray(path.read_bytes())
    lo, hi = len(data) // 4, len(data) * 3 // 4
    data[lo:hi] = b"\xab" * (hi - lo)  # a stretch overwritten: its records fail their checksums
    path.write_bytes(bytes(data))
    run = open_run(str(tmp_path))
    with pytest.raises(CorruptArtifact, match="not a readable W&B run file") as exc:
        run.metrics.get("grad_norm")
    assert Path(exc.value.path).name == path.name and "\n" not in str(exc.value)


def test_a_file_that_is_not_a_wandb_run_stops_the_triage_with_exit_2(tmp_path, capsys):
    bad = tmp_path / "wandb" / "offline-run-20260101_000000-abc" / "run-abc.wandb"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"this is not a transaction log\n" * 20)
    (tmp_path / "job.log").write_text("[2026-08-01 10:00:00] model.py:918 - step 0: {'train/loss': 0.1}\n")
    rc = main(["run", str(tmp_path), "--no-cache", "--json"])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert len(err.splitlines()) == 1 and "run-abc.wandb" in err and "W&B" in err


def test_a_run_killed_before_its_first_record_has_no_metrics_and_no_error(tmp_path):
    empty = tmp_path / "wandb" / "offline-run-20260101_000000-abc" / "run-abc.wandb"
    empty.parent.mkdir(parents=True)
    empty.write_bytes(b"")
    (tmp_path / "job.log").write_text("[2026-08-01 10:00:00] model.py:918 - step 0: {'train/grad_norm': 0.3}\n")
    run = open_run(str(tmp_path))
    assert run.metrics.get("grad_norm").source == "step:train/grad_norm"


def test_trls_completions_table_kept_offline_is_read_as_the_rollouts_text(tmp_path, offline_env, capsys):
    # TRL's GRPOTrainer with log_completions=True logs a `completions` wandb.Table (step, prompt, completion, one
    # column per reward function, advantage); offline, W&B keeps it as files/media/table/completions_*.table.json
    import json

    run = wandb.init(mode="offline", dir=str(tmp_path), project="triage-test",
                     settings=wandb.Settings(x_disable_stats=True, x_disable_meta=True, console="off",
                                             disable_git=True, save_code=False))
    garbled = ["нафтаξλ大学 vergütung ماهي สวัสดี Привет 的 αβγ abcдежfgh",
               "ysicsOrg\ufffd\ufffd DRM\x03 cosponsoredNexus мosqu ξλ"]
    for step in (1, 2):
        rows = [[str(step), "What is 6*7?", text, 0.0, 0.0] for text in garbled * 4]
        run.log({"completions": wandb.Table(columns=["step", "prompt", "completion", "accuracy_reward", "advantage"],
                                            data=rows), "train/loss": 0.1}, step=step)
    run.finish()
    opened = open_run(str(tmp_path))
    tables = opened.artifacts.rollout_dumps
    assert len(tables) == 2 and all(p.name.startswith("completions_") for p in tables)
    dump = opened.rollout_dump(tables[0])
    assert dump.rollout_id == 1 and dump.samples[0]["reward"] == {"accuracy_reward": 0.0}
    assert main(["run", str(tmp_path), "--json", "--no-cache"]) in (0, 3)
    first = json.loads(capsys.readouterr().out)["path"][0]
    assert first["outcome"] == "garbled_rollouts" and "completions_" in first["summary"], first["summary"]
