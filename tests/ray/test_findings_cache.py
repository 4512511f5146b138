"""The findings cache: an unchanged run reruns no probe; a changed artifact reruns; --no-cache forces."""

from __future__ import annotations

import json
import os
import shutil
import textwrap
from collections import Counter
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from triage.api import triage_run
from triage.cache import CachingExecutor, FindingsCache
from triage.cli import main
from triage.errors import Unavailable
from triage.executor import LocalExecutor
from graph_support import write_catalog
from triage.graph import load_graph
from triage.probe import Probe
from triage.run import open_run

ROOT = Path(__file__).resolve().parents[2]
RUNS: Counter[str] = Counter()  # probe executions, by node tag


class TagParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    tag: str


class LogLines(Probe):
    """Counts the log's lines."""

    name = "log_lines"
    outcomes = ("some", "none")
    Params = TagParams

    def examine(self, run):
        RUNS[self.params.tag] += 1
        n = sum(len(p.read_text().splitlines()) for p in run.artifacts.logs)
        return self.observe("some" if n else "none", f"the log has {n} lines", confidence=0.9, lines=n)


class NeedsDump(Probe):
    """Needs a rollout dump the run does not have."""

    name = "needs_dump"
    outcomes = ("ok", "bad")
    needs = ("rollout_dump",)

    def examine(self, run):  # pragma: no cover - never reached without a dump
        raise AssertionError("must not run without its dump")


class AsksEngine(Probe):
    """Finds no engine to ask: that says nothing about the run, so it is asked again next time."""

    name = "asks_engine"
    outcomes = ("ok", "bad")
    Params = TagParams

    def examine(self, run):
        RUNS[self.params.tag] += 1
        raise Unavailable("engine", "no SGLang engine answers at http://127.0.0.1:30000", "pass --engine URL")


class Crashes(Probe):
    """Crashes: never cached."""

    name = "crashes"
    outcomes = ("ok", "bad")
    Params = TagParams

    def examine(self, run):
        RUNS[self.params.tag] += 1
        raise RuntimeError("boom")


class CheckpointFiles(Probe):
    """Counts the files of the checkpoint named by --load."""

    name = "checkpoint_files"
    outcomes = ("found", "absent")
    Params = TagParams

    def examine(self, run):
        RUNS[self.params.tag] += 1
        path = run.resolve_path(run.args.get("load"))
        n = len(list(path.iterdir())) if path else 0
        return self.observe("found" if n else "absent", f"--load has {n} files", confidence=0.9, files=n)


PROBES = {p.name: p for p in (LogLines, NeedsDump, AsksEngine, Crashes, CheckpointFiles)}
DONE = "{ok: verdict:healthy, bad: verdict:healthy, unavailable: NEXT, error: NEXT}"
BOOK = f"""
playbook: entry
entry: lines
nodes:
  lines:
    probe: log_lines
    params: {{tag: lines}}
    on: {{some: dump, none: dump, unavailable: dump, error: dump}}
  dump:
    probe: needs_dump
    on: {DONE.replace("NEXT", "engine")}
  engine:
    probe: asks_engine
    params: {{tag: engine}}
    on: {DONE.replace("NEXT", "crash")}
  crash:
    probe: crashes
    params: {{tag: crash}}
    on: {DONE.replace("NEXT", "ckpt")}
  ckpt:
    probe: checkpoint_files
    params: {{tag: ckpt}}
    on: {{found: again, absent: again, unavailable: again, error: again}}
  again:
    probe: log_lines
    params: {{tag: lines}}
    on: {{some: verdict:data.bad_sample, none: verdict:healthy, unavailable: verdict:inconclusive, error: verdict:inconclusive}}
"""


def setup(tmp_path: Path):
    books = tmp_path / "books"
    books.mkdir()
    (books / "entry.yaml").write_text(textwrap.dedent(BOOK))
    write_catalog(books)
    ckpt = tmp_path / "shared" / "ckpt"  # on the "shared filesystem", outside the run directory
    ckpt.mkdir(parents=True)
    (ckpt / "latest_checkpointed_iteration.txt").write_text("100\n")
    run = tmp_path / "run"
    run.mkdir()
    (run / "job.log").write_text("[2026-08-01 10:00:00] train.py:1 - start\n")
    (run / "cmdline.txt").write_text(f"python3 train.py --load {ckpt} --lr 1e-6\n")
    RUNS.clear()
    return load_graph(books, probes=PROBES), run, ckpt


def triage(graph, run_dir: Path, db: Path):
    cache = FindingsCache.open(db)
    try:
        return triage_run(open_run(str(run_dir)), graph, CachingExecutor(LocalExecutor(), cache))
    finally:
        cache.close()


def test_an_unchanged_run_reruns_no_probe(tmp_path):
    graph, run, _ = setup(tmp_path)
    db = tmp_path / "triage.db"
    first = triage(graph, run, db)
    # the same probe with the same params at a second node ran once
    assert RUNS == {"lines": 1, "engine": 1, "crash": 1, "ckpt": 1}
    assert [s.cached for s in first.path] == [False, False, False, False, False, True]

    second = triage(graph, run, db)
    # only what depends on the environment (no engine) or failed (a crash) is asked again
    assert RUNS == {"lines": 1, "engine": 2, "crash": 2, "ckpt": 1}
    assert [(s.probe, s.cached) for s in second.path] == [
        ("log_lines", True), ("needs_dump", True), ("asks_engine", False), ("crashes", False),
        ("checkpoint_files", True), ("log_lines", True)]
    assert second.root_cause.id == first.root_cause.id == "data.bad_sample"
    assert [s.summary for s in second.path] == [s.summary for s in first.path]
    assert second.path[1].outcome == "unavailable" and second.path[1].missing.artifact == "rollout_dump"


def test_a_changed_artifact_reruns_the_probes(tmp_path):
    graph, run, ckpt = setup(tmp_path)
    db = tmp_path / "triage.db"
    triage(graph, run, db)
    with open(run / "job.log", "a") as fh:
        fh.write("[2026-08-01 10:00:05] train.py:2 - step 0\n")
    after_log = triage(graph, run, db)
    assert RUNS["lines"] == 2 and RUNS["ckpt"] == 2
    assert after_log.path[0].evidence["lines"] == 2 and not after_log.path[0].cached

    # a checkpoint the command line names, outside the run directory, changes too
    (ckpt / "iter_0000100").mkdir()
    after_ckpt = triage(graph, run, db)
    assert RUNS["ckpt"] == 3
    assert after_ckpt.path[4].evidence["files"] == 2

    unchanged = triage(graph, run, db)
    assert RUNS["lines"] == 3 and RUNS["ckpt"] == 3
    assert unchanged.path[4].cached and unchanged.path[4].evidence["files"] == 2


def test_the_cli_reuses_findings_unless_no_cache(tmp_path, capsys):
    db = tmp_path / "cli.db"
    example = str(ROOT / "examples" / "oom-max-tokens-per-gpu")

    def run(*extra: str) -> dict:
        assert main(["run", example, "--json", "--cache-db", str(db), *extra]) == 0
        return json.loads(capsys.readouterr().out)

    first, second, forced = run(), run(), run("--no-cache")
    assert first["root_cause"]["id"] == second["root_cause"]["id"] == forced["root_cause"]["id"]
    assert not any(s["cached"] for s in first["path"])
    assert all(s["cached"] for s in second["path"]) and len(second["path"]) == len(first["path"])
    assert not any(s["cached"] for s in forced["path"])
    assert [s["summary"] for s in second["path"]] == [s["summary"] for s in first["path"]]
    assert os.path.getsize(db) > 0
