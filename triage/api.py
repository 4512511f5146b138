"""The one call every front end makes: triage a run, get a Report."""

from __future__ import annotations

import time
from pathlib import Path

from triage.errors import BadInput, TriageError
from triage.executor import Executor
from triage.graph import DecisionGraph, load_graph
from triage.report import Report, build_report, without_root
from triage.run import Run, open_run
from triage.walker import walk


RUN_EVIDENCE = ("trainer_states", "rollout_dumps", "train_dumps", "checkpoints", "hf_checkpoints",
                "engine_weights", "flight_recorder", "tensorboard", "wandb_runs", "metric_jsonl")


def recognisable(run: Run) -> bool:
    """Whether anything the run holds reads as a training job's: more than text files by their names.

    A folder of unrelated text (`triage run /etc`) has files named like logs, but no metric
    record, argument, traceback, error line or framework marker in them: that is not a run.
    """
    kinds = run.artifacts.kinds()
    if any(kinds.get(k) for k in RUN_EVIDENCE) or run.engines:
        return True
    if run.args:
        return True
    # a CSV is a run's record where its header names metrics (not a data set's train.csv: csv_metrics.py)
    if kinds.get("metric_csv") and "csv" in run.metrics.table.kinds():
        return True
    try:
        if len(run.versions):  # a pasted `pip list` / `pip show` is about the run's environment
            return True
    except TriageError:
        pass
    if not run.artifacts.logs:
        return False
    log = run.log
    if (log.framework != "unknown" or not log.metrics.empty() or log.arguments or log.command_line
            or log.errors or log.tracebacks or log.finish_rollouts or log.placement_group_waits
            or log.first_timestamp or getattr(log, "unparsed_metric_lines", 0)
            # a job's own account of a step of its life: Megatron's `could not find the metadata file …, will not
            # load any checkpoints` (THUDM/Chinese-Transformer-XL#16), a weight update, a skipped NaN step
            or log.notable):
        return True
    try:  # metrics the log's own records do not hold: a pasted table (huggingface/trl#5697)
        if run.metrics.table.kinds():
            return True
    except TriageError:
        return False
    from triage.formats.ray_scheduling import holds_request

    # Ray's report of a request it cannot schedule: a job stuck at submission (OpenRLHF/OpenRLHF#516); and `ray status`
    # pasted for a job that seems stuck (rllm-org/rllm#95: every GPU reserved, no demand): the cluster's state is the
    # job's, read by the scheduling checks
    if any(holds_request(text) or ("Node status" in text and "Demands:" in text) for text in run.pastes.values()):
        return True
    return run.paste_holds_traceback


def triage_run(
    run: Run,
    graph: DecisionGraph | None = None,
    executor: Executor | None = None,
) -> Report:
    started = time.perf_counter()
    graph = graph or load_graph()
    if not recognisable(run):
        read = run.artifacts.logs + run.artifacts.launch_scripts + run.artifacts.configs + run.artifacts.python_configs
        # (a single file is the run's root itself: it is named, not `.`)
        files = ", ".join(str(p.relative_to(run.root)) if p.is_relative_to(run.root) and p != run.root else p.name
                          for p in read[:3])
        ignored = any("Exception ignored in" in text for text in run.pastes.values()) if run.artifacts.logs else False
        where = "the pasted fragment" if getattr(run, "is_fragment", False) else str(run.root)
        raise BadInput(f"nothing in {where} reads as a training run: {files or 'it'} held no metric record, "
                       "argument, traceback, error line, timestamp or framework marker that the triage reads"
                       + (" (its traceback is one Python reported under `Exception ignored in` and went on from, "
                          "as at a clean shutdown)" if ignored else "")
                       + " (expected a job log, trainer_state.json, dumps, checkpoints, TensorBoard / W&B files or a "
                         "triage.yaml)")
    notes = []
    if run.status == "running":
        notes.append("the job is still running: triaged on what it has written so far")
    if run.artifacts.logs and run.log.truncated_tail:
        notes.append("the log ends mid-line (still being written, or cut): its last line was read as far as it goes")
    if run.artifacts.logs and run.log.notebook_output:
        notes.append(f"{', '.join(run.log.notebook_output[:3])}: a notebook's saved output (a JSON array of stream "
                     "records): its text was read, and its line numbers count the lines of that text")
    if run.artifacts.logs and run.log.skipped_long_lines:
        from triage.formats.slime_log import MAX_LINE_BYTES

        notes.append(f"{run.log.skipped_long_lines} log line(s) longer than {MAX_LINE_BYTES >> 20} MB "
                     f"(MAX_LINE_BYTES) skipped, not read, in {', '.join(run.log.files[:3])}")
    result = walk(graph, run, executor)
    report = build_report(graph, run, result, time.perf_counter() - started, notes + run.report_notes() + list(run.skipped))
    if getattr(run, "is_fragment", False):
        # a fragment lives in a folder of its own that is gone when the run is: its name is where things are
        report = without_root(report, str(run.root), run.ref)
    return report


def triage(ref: str, runs_root: str | None = None, playbooks: Path | None = None,
           executor: Executor | None = None) -> Report:
    """Open the run `ref` (a path, or a run-id under the runs root) and triage it."""
    graph = load_graph(playbooks) if playbooks else None
    return triage_run(open_run(ref, runs_root), graph, executor)
