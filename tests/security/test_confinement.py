"""A run directory reads nothing outside itself and the roots the user allowed.

Each attack plants a secret outside the run and points the run at it: a manifest entry
(absolute, or `../../`), a symlinked `job.log`, a symlinked directory, absolute paths in
`cmdline.txt`, `/proc/self/environ` as a log. The secret is written as log lines an error
probe would quote, so a run that read it would print it. It must not appear in any
rendering (terminal, `--json`, `--markdown`), and the report must say what was skipped.
Run-ids that name the runs root itself or no file system could hold, permission denied
and symlink loops end in one line on stderr (exit 2) or a note, never a traceback.
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from triage import safe_io
from triage.cli import main
from triage.run import open_run
from triage.run.source import resolve_run_dir

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SECRET = "CANARY-7f3a9c-outside-the-run"
SLACK_TOKEN = "xoxb-CANARY-slack-bot-token-5521"
SLACK_SECRET = "CANARY-signing-secret-8812"
# A line the error probes quote: if the secret file is read, the report prints it.
SECRET_LOG = (
    "[2026-08-01 10:00:00] train.py:12 - step 1: {'loss': 1.0}\n"
    f"[2026-08-01 10:00:01] train.py:13 - RuntimeError: CUDA out of memory. {SECRET}\n"
    f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB {SECRET}\n"
)


@pytest.fixture(autouse=True)
def _confined(monkeypatch):
    """No allowed roots beyond the run, and Slack secrets in the environment to leak."""
    monkeypatch.delenv("TRIAGE_ALLOWED_ROOTS", raising=False)
    monkeypatch.delenv("TRIAGE_RUNS_ROOT", raising=False)
    monkeypatch.setenv("SLACK_BOT_TOKEN", SLACK_TOKEN)
    monkeypatch.setenv("SLACK_SIGNING_SECRET", SLACK_SECRET)


@pytest.fixture
def outside(tmp_path) -> Path:
    d = tmp_path / "outside"
    d.mkdir()
    (d / "secret.log").write_text(SECRET_LOG)
    ckpt = d / "secret_dir"  # a Megatron checkpoint whose tracker the integrity probe would quote
    (ckpt / "iter_0000001").mkdir(parents=True)
    (ckpt / "iter_0000001" / "common.pt").write_bytes(b"")
    (ckpt / "latest_checkpointed_iteration.txt").write_text(SECRET)
    return d


def base_run(tmp_path: Path, name: str = "run") -> Path:
    """A small slime run: the shipped healthy example's log and command line."""
    run = tmp_path / name
    run.mkdir(parents=True)
    (run / "job.log").write_text((EXAMPLES / "healthy-slime" / "job.log").read_text())
    (run / "cmdline.txt").write_text((EXAMPLES / "healthy-slime" / "cmdline.txt").read_text())
    return run


def triage(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["--width", "200", "run", *argv, "--no-cache"])
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code: int, err: str, *words: str) -> None:
    assert code == 2, err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("triage: error: ")
    for word in words:
        assert word in lines[0], lines[0]


def assert_no_secret_in_any_rendering(capsys, run: Path, *extra: str) -> list[str]:
    """Triage `run` (the CLI, --json) and render its report in the terminal and Markdown forms
    too; the secrets appear in none of them, nor on stderr. Returns the report's notes."""
    from io import StringIO

    from rich.console import Console

    from triage.render.markdown import render_markdown
    from triage.render.terminal import render_terminal
    from triage.report import Report

    code, out, err = triage(capsys, str(run), "--json", *extra)
    assert code in (0, 3), err
    assert "Traceback" not in err
    report = Report.model_validate_json(out)
    terminal = StringIO()
    render_terminal(report, Console(file=terminal, width=200))
    for text in (out, err, terminal.getvalue(), render_markdown(report)):
        for secret in (SECRET, SLACK_TOKEN, SLACK_SECRET):
            assert secret not in text
    return report.run.notes


# --- paths a run names -----------------------------------------------------------------------


def test_manifest_absolute_path_outside_is_skipped_and_said(tmp_path, outside, capsys):
    run = base_run(tmp_path)
    (run / "triage.yaml").write_text(f"logs: [job.log, {outside / 'secret.log'}]\n")

    notes = assert_no_secret_in_any_rendering(capsys, run)

    assert any("manifest logs" in n and "outside the run directory" in n for n in notes), notes


def test_manifest_dotdot_path_is_skipped(tmp_path, outside, capsys):
    run = base_run(tmp_path)
    (run / "triage.yaml").write_text("logs: [job.log, ../outside/secret.log]\n")

    notes = assert_no_secret_in_any_rendering(capsys, run)

    assert any("../outside/secret.log" in n and "skipped" in n for n in notes), notes


def test_allow_path_lets_the_manifest_reach_shared_storage(tmp_path, outside, capsys):
    """The positive control: with --allow-path the same entry is read (so the attacks above would leak)."""
    run = base_run(tmp_path)
    (run / "triage.yaml").write_text(f"logs: [job.log, {outside / 'secret.log'}]\n")

    code, out, err = triage(capsys, str(run), "--json", "--allow-path", str(outside))

    assert code in (0, 3), err
    assert json.loads(out)["run"]["artifacts"]["logs"] == 2


def test_allowed_roots_from_the_environment(tmp_path, outside, monkeypatch):
    run = base_run(tmp_path)
    (run / "triage.yaml").write_text(f"logs: [job.log, {outside / 'secret.log'}]\n")
    monkeypatch.setenv("TRIAGE_ALLOWED_ROOTS", os.pathsep.join([str(tmp_path / "elsewhere"), str(outside)]))

    assert len(open_run(str(run)).artifacts.logs) == 2


def test_symlinked_job_log_pointing_outside_is_not_read(tmp_path, outside, capsys):
    run = base_run(tmp_path)
    (run / "driver.log").symlink_to(outside / "secret.log")

    notes = assert_no_secret_in_any_rendering(capsys, run)

    assert any(n.startswith("driver.log: a symlink that resolves to") and "not followed" in n for n in notes), notes


def test_symlinked_directory_pointing_outside_is_not_walked(tmp_path, outside, capsys):
    run = base_run(tmp_path)
    (run / "logs").symlink_to(outside)

    notes = assert_no_secret_in_any_rendering(capsys, run)

    assert any(n.startswith("logs: a symlink") for n in notes), notes


def test_symlink_inside_the_run_is_followed(tmp_path):
    run = base_run(tmp_path)
    (run / "logs").mkdir()
    (run / "logs" / "worker.log").write_text(SECRET_LOG)
    (run / "latest.log").symlink_to(run / "logs" / "worker.log")

    found = open_run(str(run)).artifacts

    # one file, found once whichever name is met first; no skip note
    assert sorted(p.name for p in found.logs) == ["job.log", "latest.log"]
    assert found.skipped == []


def test_absolute_paths_in_cmdline_are_not_followed(tmp_path, outside, capsys):
    run = base_run(tmp_path)
    cmd = (EXAMPLES / "healthy-slime" / "cmdline.txt").read_text().strip()
    (run / "cmdline.txt").write_text(f"{cmd} --load {outside / 'secret_dir'} --ref-load {outside / 'secret_dir'}\n")

    assert_no_secret_in_any_rendering(capsys, run)

    opened = open_run(str(run))
    assert opened.resolve_path(str(outside / "secret_dir")) is None
    assert opened.resolve_path("../outside/secret_dir") is None
    assert any(str(outside / "secret_dir") in n and "not used" in n for n in opened.skipped)
    assert any("../outside/secret_dir" in n and "not used" in n for n in opened.skipped)


def test_cluster_path_is_still_found_inside_the_run(tmp_path):
    run = base_run(tmp_path)
    (run / "actor" / "iter_0000001").mkdir(parents=True)

    opened = open_run(str(run))

    assert opened.resolve_path("/mnt/cluster/run7/actor") == run / "actor"


def test_relative_argument_path_is_relative_to_the_run_not_the_working_directory(tmp_path, monkeypatch):
    run = base_run(tmp_path)
    cwd = tmp_path / "cwd"
    (cwd / "ckpt").mkdir(parents=True)
    monkeypatch.chdir(cwd)

    assert open_run(str(run)).resolve_path("ckpt") is None


# --- files that are not files ----------------------------------------------------------------


def test_proc_self_environ_as_a_log_is_never_read(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SLACK_BOT_TOKEN", f"RuntimeError: CUDA out of memory {SLACK_TOKEN}")
    run = base_run(tmp_path)
    (run / "env.log").symlink_to("/proc/self/environ")
    (run / "triage.yaml").write_text("logs: [job.log, /proc/self/environ]\n")

    notes = assert_no_secret_in_any_rendering(capsys, run)

    assert any("/proc/self/environ" in n for n in notes), notes


def test_dev_urandom_symlink_is_refused(tmp_path, capsys):
    run = base_run(tmp_path)
    (run / "noise.log").symlink_to("/dev/urandom")

    notes = assert_no_secret_in_any_rendering(capsys, run)

    assert any(n.startswith("noise.log") and "/dev" in n for n in notes), notes


def test_safe_io_refuses_what_a_file_is_not(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for path, words in ((fifo, "FIFO"), (Path("/dev/null"), "/dev"), (Path("/proc/self/environ"), "/proc"),
                        (tmp_path, "directory")):
        with pytest.raises(OSError, match=words):
            safe_io.open_regular(path)


# --- symlink loops, permission denied, run-ids -----------------------------------------------


def test_symlink_loops_are_noted_not_followed(tmp_path, capsys):
    run = base_run(tmp_path)
    (run / "a.log").symlink_to(run / "b.log")
    (run / "b.log").symlink_to(run / "a.log")
    (run / "sub").mkdir()
    (run / "sub" / "back").symlink_to(run)

    notes = assert_no_secret_in_any_rendering(capsys, run)

    assert any(n.startswith("a.log") and "symlink loop" in n for n in notes), notes
    assert any(n.startswith("sub/back") and "already walked" in n for n in notes), notes


def test_manifest_entry_that_is_a_symlink_loop(tmp_path, capsys):
    run = base_run(tmp_path)
    (run / "x.pt").symlink_to(run / "x.pt")
    (run / "triage.yaml").write_text("rollout_dumps: [x.pt]\nlogs: [job.log]\n")

    notes = assert_no_secret_in_any_rendering(capsys, run)

    assert any("x.pt" in n and "loop" in n for n in notes), notes


def test_permission_denied_on_the_manifest_is_one_line(tmp_path, capsys, monkeypatch):
    run = base_run(tmp_path)
    (run / "triage.yaml").write_text("logs: [job.log]\n")
    real_open = os.open

    def refusing_open(path, flags, *args, **kwargs):
        if str(path).endswith("triage.yaml"):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", refusing_open)
    code, out, err = triage(capsys, str(run))

    assert_one_line_error(code, err, "triage.yaml", "Permission denied")


def test_permission_denied_on_the_run_directory_is_one_line(tmp_path, capsys, monkeypatch):
    run = base_run(tmp_path)
    real_scandir = os.scandir

    def refusing_scandir(path="."):
        if Path(path) == run:
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", refusing_scandir)
    code, out, err = triage(capsys, str(run))

    assert_one_line_error(code, err, "cannot read run directory", "Permission denied")


def test_permission_denied_on_a_log_is_one_line(tmp_path, capsys, monkeypatch):
    run = base_run(tmp_path)
    real_open = os.open

    def refusing_open(path, flags, *args, **kwargs):
        if str(path).endswith("job.log"):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", refusing_open)
    code, out, err = triage(capsys, str(run))

    assert_one_line_error(code, err, "job.log", "Permission denied")


def test_run_id_dot_names_the_runs_root_and_is_refused(tmp_path, capsys):
    runs = tmp_path / "runs"
    base_run(runs, "a")
    base_run(runs, "b")
    for ref in (".", "./", str(runs), "a/.."):
        code, out, err = triage(capsys, ref, "--runs-root", str(runs))
        assert_one_line_error(code, err, "runs root")
        assert out == ""


def test_over_long_run_id_is_refused_with_one_line(tmp_path, capsys):
    runs = tmp_path / "runs"
    runs.mkdir()
    for argv in (("x" * 300, "--runs-root", str(runs)), (str(tmp_path / ("y" * 300)),), ("é" * 200,)):
        code, out, err = triage(capsys, *argv)
        assert_one_line_error(code, err, "limit is 255")


def test_service_run_id_resolution_refuses_the_root_and_long_names(tmp_path):
    from triage.errors import BadInput
    from triage.service.security import confine_run

    runs = tmp_path / "runs"
    base_run(runs, "a")
    for ref in (".", "x" * 5000):
        with pytest.raises(BadInput):
            confine_run(ref, (runs.resolve(),))
    with pytest.raises(BadInput):
        resolve_run_dir("a/" + "z" * 256, [runs.resolve()])
