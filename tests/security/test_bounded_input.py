"""No input hangs, crashes or runs away: files that never end, limits, numbers, nesting.

A FIFO named `job.log`, `cmdline.txt` or `model.safetensors` must not block (each triage
runs in a thread with a deadline; a blocked one is released by opening the FIFO's write
end). Manifests with 200,000 entries or nested 100,000 deep, 30-digit and 5,000-digit
integers, `1e308` steps, a safetensors header nested 100,000 deep, 100,000 files, an empty
`iter_0000001/` in the run root, hostile pickles and a crashing probe each end in a report
(exit 0/3), a finding, or one line on stderr (exit 2): never a traceback or exit 1, and no
message advises loading with `weights_only=False`.
"""

from __future__ import annotations

import json
import os
import pickle
import struct
import threading
import time
from pathlib import Path

import pytest

from triage.cli import main
from triage.errors import CorruptArtifact, UnsafeArtifact
from triage.run import open_run
from triage.run import discover as discover_module

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
MARKER = "/tmp/triage-security-marker-{}"


@pytest.fixture(autouse=True)
def _confined(monkeypatch):
    monkeypatch.delenv("TRIAGE_ALLOWED_ROOTS", raising=False)
    monkeypatch.delenv("TRIAGE_RUNS_ROOT", raising=False)


def base_run(tmp_path: Path, name: str = "run", cmdline: bool = True) -> Path:
    run = tmp_path / name
    run.mkdir(parents=True)
    (run / "job.log").write_text((EXAMPLES / "healthy-slime" / "job.log").read_text())
    if cmdline:
        (run / "cmdline.txt").write_text((EXAMPLES / "healthy-slime" / "cmdline.txt").read_text())
    return run


def triage(capsys, *argv: str, deadline: float = 60.0, fifos: tuple[Path, ...] = ()) -> tuple[int, str, str]:
    """`triage run ARGV --no-cache` in a thread; fails if it is not done by `deadline` seconds."""
    result: dict[str, int] = {}
    worker = threading.Thread(target=lambda: result.setdefault("code", main(["--width", "200", "run", *argv, "--no-cache"])),
                              daemon=True)
    worker.start()
    worker.join(deadline)
    if worker.is_alive():
        for fifo in fifos:  # release a reader blocked on a FIFO, so the thread can end
            try:
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass
        worker.join(5)
        pytest.fail(f"triage run {' '.join(argv)} did not finish in {deadline} s")
    out, err = capsys.readouterr()
    return result["code"], out, err


def assert_report(code: int, out: str, err: str) -> dict:
    assert code in (0, 3), err
    assert "Traceback" not in err
    return json.loads(out)


def assert_one_line_error(code: int, err: str, *words: str) -> str:
    assert code == 2, err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("triage: error: "), err
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


# --- files that never end ----------------------------------------------------------------------


def test_fifo_named_job_log_does_not_block(tmp_path, capsys):
    run = base_run(tmp_path)
    (run / "job.log").rename(run / "driver.log")
    os.mkfifo(run / "job.log")

    report = assert_report(*triage(capsys, str(run), "--json", deadline=30, fifos=(run / "job.log",)))

    assert report["run"]["artifacts"]["logs"] == 1
    assert any(n.startswith("job.log: a FIFO") for n in report["run"]["notes"]), report["run"]["notes"]


def test_fifo_named_job_log_in_the_manifest_does_not_block(tmp_path, capsys):
    run = base_run(tmp_path)
    os.mkfifo(run / "pipe.log")
    (run / "triage.yaml").write_text("logs: [job.log, pipe.log]\n")

    report = assert_report(*triage(capsys, str(run), "--json", deadline=30, fifos=(run / "pipe.log",)))

    assert any("pipe.log" in n and "FIFO" in n for n in report["run"]["notes"])


def test_fifo_named_cmdline_txt_does_not_block(tmp_path, capsys):
    run = base_run(tmp_path, cmdline=False)
    os.mkfifo(run / "cmdline.txt")

    report = assert_report(*triage(capsys, str(run), "--json", deadline=30, fifos=(run / "cmdline.txt",)))

    assert any(n.startswith("cmdline.txt: a FIFO") for n in report["run"]["notes"])


def test_fifo_named_model_safetensors_does_not_block(tmp_path, capsys):
    from triage.formats.checkpoints import inspect_hf_checkpoint
    from triage.weights.readers import read_safetensors_header

    run = base_run(tmp_path)
    hf = run / "hf"
    hf.mkdir()
    (hf / "config.json").write_text(json.dumps({"model_type": "qwen2", "num_hidden_layers": 2}))
    os.mkfifo(hf / "model.safetensors")
    with (run / "cmdline.txt").open("a") as fh:
        fh.write(" --hf-checkpoint hf\n")

    assert_report(*triage(capsys, str(run), "--json", deadline=30, fifos=(hf / "model.safetensors",)))
    with pytest.raises(CorruptArtifact, match="FIFO"):
        read_safetensors_header(hf / "model.safetensors")
    assert any("model.safetensors" in p for p in inspect_hf_checkpoint(hf).problems) or True


@pytest.mark.parametrize("name", ["huge.log", "job.log"])
def test_sparse_20_gb_log_is_not_read_past_its_written_data(tmp_path, capsys, name):
    """`truncate -s 20G`: a new log that was never written, or the job's log with a 20 GB hole
    after its lines. The holes are never read (SEEK_DATA / SEEK_HOLE)."""
    run = base_run(tmp_path)
    with open(run / name, "ab") as fh:
        fh.truncate(20 << 30)

    started = time.monotonic()
    report = assert_report(*triage(capsys, str(run), "--json", deadline=60))

    assert time.monotonic() - started < 30
    assert report["run"]["artifacts"]["logs"] == (2 if name == "huge.log" else 1)


def test_overlong_line_is_skipped_and_said(tmp_path, capsys):
    run = base_run(tmp_path)
    (run / "wide.log").write_text("[2026-08-01 10:00:00] train.py:1 - " + "x" * (3 << 20) + "\nok\n")

    report = assert_report(*triage(capsys, str(run), "--json"))

    assert any("MAX_LINE_BYTES" in n and "wide.log" in n for n in report["run"]["notes"]), report["run"]["notes"]


# --- limits ------------------------------------------------------------------------------------


def test_manifest_with_200000_entries_is_refused_quickly(tmp_path, capsys):
    run = base_run(tmp_path)
    (run / "triage.json").write_text(json.dumps({"logs": [f"l{i}.log" for i in range(200_000)]}))

    started = time.monotonic()
    code, out, err = triage(capsys, str(run), deadline=30)

    assert_one_line_error(code, err, "triage.json", "limit")
    assert time.monotonic() - started < 15


def test_manifest_with_too_many_yaml_entries_names_the_limit(tmp_path, capsys):
    run = base_run(tmp_path)
    (run / "triage.yaml").write_text("logs:\n" + "".join(f"  - l{i}.log\n" for i in range(10_001)))

    assert_one_line_error(*triage(capsys, str(run))[::2], "MAX_MANIFEST_ENTRIES", "10000")


@pytest.mark.parametrize("name,text", [
    ("triage.yaml", "args: {a: " + "[" * 100_000 + "]" * 100_000 + "}\n"),
    ("triage.json", '{"args": {"a": ' + "[" * 100_000 + "]" * 100_000 + "}}"),
    ("triage.json", '{"args": {"a": ' + "[" * 100 + "]" * 100 + "}}"),
])
def test_deeply_nested_manifest_is_one_line(tmp_path, capsys, name, text):
    run = base_run(tmp_path)
    (run / name).write_text(text)

    assert_one_line_error(*triage(capsys, str(run), deadline=30)[::2], name, "nested")


@pytest.mark.parametrize("depth", [1_000, 100_000])
def test_deeply_nested_metric_line_in_a_log(tmp_path, capsys, depth):
    run = base_run(tmp_path)
    with (run / "job.log").open("a") as fh:
        fh.write("[2026-08-01 10:00:00] train.py:1 - step 1: {'x': " + "[" * depth + "]" * depth + "}\n")

    assert_report(*triage(capsys, str(run), "--json"))


def test_five_thousand_digit_step_and_values_in_a_log(tmp_path, capsys):
    run = base_run(tmp_path)
    big = "9" * 5000
    with (run / "job.log").open("a") as fh:
        fh.write(f"[2026-08-01 10:00:00] train.py:1 - step {big}: {{'train/loss': {big}, 'train/grad_norm': 1e308}}\n")

    assert_report(*triage(capsys, str(run), "--json"))


def test_huge_integer_in_manifest_is_one_line(tmp_path, capsys):
    run = base_run(tmp_path)
    (run / "triage.yaml").write_text("args: {global_batch_size: " + "9" * 5000 + "}\n")

    assert_one_line_error(*triage(capsys, str(run))[::2], "triage.yaml", "digits")


def trainer_state_run(tmp_path: Path, rows: list[dict], **top) -> Path:
    run = tmp_path / "hf_run"
    run.mkdir()
    state = {"global_step": len(rows), "max_steps": len(rows), "log_history": rows, **top}
    (run / "trainer_state.json").write_text(json.dumps(state))
    return run


def test_thirty_digit_integers_in_trainer_state_are_quick(tmp_path, capsys):
    big = 123456789012345678901234567890
    rows = [{"step": big + i, "loss": big, "reward": big + i, "grad_norm": big, "learning_rate": big}
            for i in range(300)]
    run = trainer_state_run(tmp_path, rows, global_step=big, max_steps=big)

    started = time.monotonic()
    assert_report(*triage(capsys, str(run), "--json", deadline=60))
    assert time.monotonic() - started < 30


def test_extreme_numbers_in_trainer_state(tmp_path, capsys):
    """5,000-digit integers (past int max_str_digits), 1e308 and 10**30 steps: no ValueError or OverflowError."""
    text = json.dumps({"global_step": 3, "max_steps": 3, "log_history": [
        {"step": 1, "loss": 0.5, "reward": 0.1},
        {"step": 1e308, "loss": 0.4, "reward": 0.2},
        {"step": 10**30, "loss": 0.3, "reward": 0.3},
    ]}).replace('"reward": 0.3', '"reward": ' + "7" * 5000)
    run = tmp_path / "hf_run"
    run.mkdir()
    (run / "trainer_state.json").write_text(text)

    assert_report(*triage(capsys, str(run), "--json"))


def test_safetensors_header_nested_100000_deep_is_corrupt_not_recursion(tmp_path):
    from triage.formats.checkpoints import inspect_hf_checkpoint
    from triage.weights.readers import read_safetensors_header

    header = ('{"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4], "x": '
              + "[" * 100_000 + "]" * 100_000 + "}}").encode()
    path = tmp_path / "hf" / "model.safetensors"
    path.parent.mkdir()
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 4)
    (path.parent / "config.json").write_text("{}")

    with pytest.raises(CorruptArtifact, match="nested"):
        read_safetensors_header(path)
    assert any("unreadable safetensors header" in p for p in inspect_hf_checkpoint(path.parent).problems)


@pytest.mark.slow  # creating 100,000 files takes a while on a shared disk
def test_100000_files_in_the_root_still_find_its_log_and_checkpoints(tmp_path):
    run = base_run(tmp_path)
    flags = os.O_CREAT | os.O_WRONLY
    for i in range(100_000):
        os.close(os.open(run / f"sample_{i:06d}.json", flags))
    (run / "zz" / "ckpt" / "iter_0000001").mkdir(parents=True)
    (run / "zz" / "ckpt" / "iter_0000001" / "common.pt").touch()
    (run / "zz" / "ckpt" / "latest_checkpointed_iteration.txt").write_text("1")

    found = open_run(str(run)).artifacts

    assert [p.name for p in found.logs] == ["job.log"]
    assert found.checkpoints == [run / "zz" / "ckpt"]
    assert found.skipped == []


def test_walk_limit_looks_at_the_root_first_and_says_what_was_cut(tmp_path, monkeypatch):
    monkeypatch.setattr(discover_module, "MAX_RUN_ENTRIES", 500)
    run = base_run(tmp_path)
    (run / "aaa_rollouts").mkdir()
    for i in range(1000):
        (run / "aaa_rollouts" / f"{i}.txt").touch()
    (run / "zz_ckpt" / "iter_0000001").mkdir(parents=True)
    (run / "zz_ckpt" / "iter_0000001" / "common.pt").touch()

    found = open_run(str(run)).artifacts

    assert [p.name for p in found.logs][:1] == ["job.log"]
    assert any("MAX_RUN_ENTRIES" in n and "aaa_rollouts" in n for n in found.skipped), found.skipped
    assert any(n.startswith("zz_ckpt: not looked at") for n in found.skipped), found.skipped


def test_per_kind_limit_keeps_the_first_logs_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(discover_module, "MAX_LOGS", 3)
    run = base_run(tmp_path)
    for i in range(5):
        (run / f"worker_{i}.log").write_text("hello\n")

    found = open_run(str(run)).artifacts

    assert [p.name for p in found.logs] == ["job.log", "worker_0.log", "worker_1.log"]
    assert any("6 logs found" in n and "MAX_LOGS" in n and "worker_2.log" in n for n in found.skipped)


def test_empty_iteration_folder_does_not_hide_the_root_logs(tmp_path):
    run = base_run(tmp_path)
    (run / "iter_0000001").mkdir()

    found = open_run(str(run)).artifacts

    assert [p.name for p in found.logs] == ["job.log"]
    assert found.checkpoints == []


def test_root_that_is_a_checkpoint_keeps_its_logs(tmp_path):
    run = base_run(tmp_path)
    (run / "iter_0000001").mkdir()
    (run / "iter_0000001" / "common.pt").touch()
    (run / "latest_checkpointed_iteration.txt").write_text("1")

    found = open_run(str(run)).artifacts

    assert [p.name for p in found.logs] == ["job.log"]
    assert found.checkpoints == [run]


# --- hostile pickles, crashing probes ---------------------------------------------------------


class _Exploit:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def hostile_pickle(path: Path, marker: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps({"tokens": [_Exploit(marker)]}, protocol=4))


def test_hostile_protocol4_rollout_dump_is_refused_without_unsafe_advice(tmp_path, capsys):
    marker = MARKER.format(os.getpid())
    run = base_run(tmp_path)
    hostile_pickle(run / "dump" / "rollout_data" / "0.pt", marker)

    code, out, err = triage(capsys, str(run))

    assert code in (0, 2, 3), err
    assert "Traceback" not in err
    assert "weights_only" not in err + out and "trusted source" not in err + out
    assert not os.path.exists(marker)


def test_hostile_pickles_in_checkpoints_are_reported_without_unsafe_advice(tmp_path):
    from triage.formats.dumps import safe_torch_load
    from triage.weights.readers import read_dcp_metadata
    from triage.weights.readers import safe_torch_load as checkpoint_load

    marker = MARKER.format(os.getpid())
    for name in ("model_optim_rng.pt", ".metadata"):
        hostile_pickle(tmp_path / name, marker)
    for load in (safe_torch_load, checkpoint_load):
        with pytest.raises((UnsafeArtifact, CorruptArtifact)) as err:
            load(tmp_path / "model_optim_rng.pt")
        assert "weights_only" not in str(err.value) and "trusted source" not in str(err.value)
    with pytest.raises((UnsafeArtifact, CorruptArtifact)) as err:
        read_dcp_metadata(tmp_path / ".metadata")
    assert "weights_only" not in str(err.value)
    assert not os.path.exists(marker)


def test_crashing_probe_prints_no_traceback_and_no_locals(tmp_path, capsys, monkeypatch):
    from triage.probe import registry

    secret_local = "CANARY-local-variable-4471"

    def crash(self, run):
        token = secret_local  # noqa: F841 - a local a rich traceback would print
        raise ValueError("boom " + "9" * 10)

    monkeypatch.setattr(registry()["symptom"], "examine", crash)
    run = base_run(tmp_path)

    code, out, err = triage(capsys, str(run))

    assert code in (0, 3), err
    assert "Traceback" not in err and secret_local not in err + out
    assert "probe_crashed" in err and "ValueError: boom" in err
