"""The one call every front end makes: triage a run, get a Report."""

from __future__ import annotations

import time
from pathlib import Path

from triage.executor import Executor
from triage.graph import DecisionGraph, load_graph
from triage.report import Report, build_report
from triage.run import Run, open_run
from triage.walker import walk


def triage_run(
    run: Run,
    graph: DecisionGraph | None = None,
    executor: Executor | None = None,
) -> Report:
    started = time.perf_counter()
    graph = graph or load_graph()
    notes = []
    if run.status == "running":
        notes.append("the job is still running: triaged on what it has written so far")
    if run.artifacts.logs and run.log.truncated_tail:
        notes.append("the log ends mid-line (still being written, or cut): its last line was read as far as it goes")
    result = walk(graph, run, executor)
    return build_report(graph, run, result, time.perf_counter() - started, notes + run.report_notes() + list(run.skipped))


def triage(ref: str, runs_root: str | None = None, playbooks: Path | None = None,
           executor: Executor | None = None) -> Report:
    """Open the run `ref` (a path, or a run-id under the runs root) and triage it."""
    graph = load_graph(playbooks) if playbooks else None
    return triage_run(open_run(ref, runs_root), graph, executor)
