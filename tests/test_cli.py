"""The command line as a user meets it: exit codes, one-line errors, no tracebacks, no hangs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from triage.cli import main

ROOT = Path(__file__).resolve().parent.parent
LOG_HEAD = "[2026-08-01 10:00:00] train.py:12 - start training\n"
HEALTHY = ROOT / "examples" / "healthy-slime"


def cli(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def assert_one_line_error(rc, err, *fragments):
    assert rc == 2, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("triage: error: ")
    assert "Traceback" not in err
    for f in fragments:
        assert f in lines[0], lines[0]


def run_dir(tmp_path, name="run", log=LOG_HEAD):
    d = tmp_path / name
    d.mkdir(parents=True)
    if log is not None:
        (d / "job.log").write_text(log)
    return d


# ---- bad input: a clear one-line error and exit 2 ----

def test_missing_path(capsys, tmp_path):
    rc, _, err = cli(capsys, "run", str(tmp_path / "nope"))
    assert_one_line_error(rc, err, "no such run directory")


def test_dotdot_run_id(capsys, tmp_path):
    (tmp_path / "runs").mkdir()
    rc, _, err = cli(capsys, "run", "../etc", "--runs-root", str(tmp_path / "runs"))
    assert_one_line_error(rc, err, "'..'")


def test_absolute_path_outside_runs_root(capsys, tmp_path):
    (tmp_path / "runs").mkdir()
    d = run_dir(tmp_path, "outside")
    rc, _, err = cli(capsys, "run", str(d), "--runs-root", str(tmp_path / "runs"))
    assert_one_line_error(rc, err, "outside the runs root")


def test_empty_directory(capsys, tmp_path):
    (tmp_path / "empty").mkdir()
    rc, _, err = cli(capsys, "run", str(tmp_path / "empty"))
    assert_one_line_error(rc, err, "is empty")


def test_binary_log(capsys, tmp_path):
    d = run_dir(tmp_path, log=None)
    (d / "job.log").write_bytes(os.urandom(4096) + b"\x00" * 100)
    rc, _, err = cli(capsys, "run", str(d))
    assert_one_line_error(rc, err, "job.log", "not a text log")


def test_corrupt_rollout_dump(capsys, tmp_path):
    d = run_dir(tmp_path)
    (d / "rollout_data").mkdir()
    buf = tmp_path / "full.pt"
    torch.save({"rollout_id": 0, "samples": [{"tokens": [1, 2, 3], "response_length": 1}]}, buf)
    (d / "rollout_data" / "0.pt").write_bytes(buf.read_bytes()[:200])
    rc, _, err = cli(capsys, "run", str(d))
    assert_one_line_error(rc, err, "0.pt")


class _Exploit:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_hostile_pickle_is_refused_and_never_runs(capsys, tmp_path):
    d = run_dir(tmp_path)
    marker = tmp_path / "pwned"
    (d / "rollout_data").mkdir()
    torch.save({"rollout_id": 0, "samples": [_Exploit(marker)]}, d / "rollout_data" / "0.pt")
    rc, _, err = cli(capsys, "run", str(d))
    assert_one_line_error(rc, err, "0.pt", "refused")
    assert not marker.exists()


def test_malformed_trainer_state(capsys, tmp_path):
    d = run_dir(tmp_path, log=None)
    (d / "trainer_state.json").write_text('{"log_history": [{"step": 1, "loss": 0.5}, {"step": 2, "lo')
    rc, _, err = cli(capsys, "run", str(d))
    assert_one_line_error(rc, err, "trainer_state.json")


def test_playbook_defect(capsys, tmp_path):
    books = tmp_path / "books"
    shutil.copytree(ROOT / "playbooks", books, ignore=shutil.ignore_patterns("__*"))
    text = (books / "hang.yaml").read_text().replace("      agree: verdict:inconclusive\n", "")
    (books / "hang.yaml").write_text(text)
    rc, _, err = cli(capsys, "--playbooks", str(books), "run", str(HEALTHY))
    assert_one_line_error(rc, err, "hang.yaml", "'collectives'", "agree")


def test_unknown_playbook_for_graph(capsys):
    rc, _, err = cli(capsys, "graph", "astrology")
    assert_one_line_error(rc, err, "no playbook 'astrology'")


def test_usage_error_exits_2(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["run"])
    assert exc.value.code == 2


# ---- half-written and hostile logs are triaged, not crashed on ----

def test_truncated_log_is_triaged_with_a_note(capsys, tmp_path):
    text = (HEALTHY / "job.log").read_text()
    cut = text[: text.rindex("step ") + 40]  # ends inside a step dict, no newline
    d = run_dir(tmp_path, log=cut)
    shutil.copy(HEALTHY / "cmdline.txt", d / "cmdline.txt") if (HEALTHY / "cmdline.txt").exists() else None
    rc, out, err = cli(capsys, "run", str(d), "--json")
    assert rc in (0, 3), err
    report = json.loads(out)
    assert any("ends mid-line" in n for n in report["run"]["notes"])


def test_ten_megabyte_line_does_not_hang(capsys, tmp_path):
    d = run_dir(tmp_path, log=None)
    with open(d / "job.log", "w") as f:
        f.write(LOG_HEAD)
        f.write("[2026-08-01 10:00:01] train.py:13 - " + "x" * (10 * 1024 * 1024) + "\n")
        f.write("[2026-08-01 10:00:02] train.py:14 - step 0: {'train/loss': 0.1, 'train/grad_norm': 0.5}\n")
    started = time.perf_counter()
    rc, out, err = cli(capsys, "run", str(d), "--json")
    assert time.perf_counter() - started < 30
    assert rc in (0, 3), err
    assert json.loads(out)["root_cause"]["id"]


# ---- outputs ----

def test_json_report_schema(capsys):
    rc, out, _ = cli(capsys, "run", str(HEALTHY), "--json")
    report = json.loads(out)
    assert rc == 0
    assert report["root_cause"]["id"] == "healthy"
    assert report["schema_version"] == "1"
    assert {"run", "root_cause", "path", "ruled_out", "not_checked"} <= set(report)
    assert report["path"][0]["probe"] == "symptom"


def test_markdown_report(capsys):
    rc, out, _ = cli(capsys, "run", str(HEALTHY), "--markdown")
    assert rc == 0
    assert out.startswith("# Triage of") and "**Root cause:** `healthy`" in out


def test_terminal_report(capsys):
    rc, out, _ = cli(capsys, "--width", "120", "run", str(HEALTHY))
    assert rc == 0 and "Healthy run" in out and "How the triage got there" in out


def test_graph_mermaid_and_dot(capsys):
    rc, out, _ = cli(capsys, "graph", "garbled")
    assert rc == 0 and out.startswith("flowchart TD") and "weights.pp_layer_offset" in out
    rc, out, _ = cli(capsys, "graph", "garbled", "--format", "dot")
    assert rc == 0 and out.startswith('digraph "garbled"') and "shifted_layers" in out


def test_probes_and_verdicts_listing(capsys):
    rc, out, _ = cli(capsys, "probes", "--json")
    probes = {p["name"]: p for p in json.loads(out)}
    assert rc == 0 and "symptom" in probes and "unavailable" in probes["symptom"]["outcomes"]
    rc, out, _ = cli(capsys, "verdicts", "--json")
    assert rc == 0 and "weights.pp_layer_offset" in {v["id"] for v in json.loads(out)}


def test_installed_entry_point_runs():
    exe = Path(sys.executable).parent / "triage"
    proc = subprocess.run([str(exe), "run", str(HEALTHY), "--json"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["root_cause"]["id"] == "healthy"


def test_truncated_checkpoint_shard_is_a_finding_naming_the_file(capsys, tmp_path):
    """A corrupt shard is evidence about the run: the walk records it and goes on (not exit 2)."""
    src = ROOT / "examples" / "pp-offset-garbled"
    d = tmp_path / "run"
    shutil.copytree(src, d)
    shards = sorted(d.rglob("model_optim_rng.pt"))
    assert shards
    shard = shards[-1]
    shard.write_bytes(shard.read_bytes()[:300])
    rc, out, err = cli(capsys, "run", str(d), "--json", "--no-cache")
    assert rc in (0, 3), err
    report = json.loads(out)
    errors = [s for s in report["path"] if s["outcome"] == "error" or s["outcome"] == "shards_incomplete"]
    assert errors, [(s["probe"], s["outcome"]) for s in report["path"]]
    assert any(shard.parent.name in (s["summary"] + json.dumps(s["evidence"])) for s in errors)
    assert "Traceback" not in err
