"""The bounded work queue: a fixed number of triages at once, each within a time budget.

Triages never run on the event loop. By default each of the `concurrency` slots owns a
worker process (`triage.service.worker`); `workers="thread"` runs them in threads of
the server instead (for tests and embedding). The queue itself is the store's `queued`
triages, so a restart finds it where it was. Each probe's finding is written to the
store as it comes: a triage resumed after a crash reuses what the killed attempt had
already found instead of running those probes again.

The time budget is enforced at probe boundaries: once it is spent, the probes not yet
run end `unavailable` ("the time budget ran out"), the walk follows those edges to a
verdict, and the report is marked partial. A probe still running when the budget and a
grace period are both spent is stopped (its worker process killed; a thread cannot be,
so in thread mode the attempt is abandoned and its late findings refused by the store),
and the report is built from what was found before it.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from triage.api import triage_run
from triage.catalog import INCONCLUSIVE, load_catalog
from triage.errors import TriageError
from triage.executor import Executor, LocalExecutor
from triage.finding import UNAVAILABLE, Finding, Missing
from triage.graph import DEFAULT_DIR, DecisionGraph, Node, load_graph
from triage.probe import Probe
from triage.report import NotChecked, Report, RootCause, RunInfo, Step
from triage.run import open_run
from triage.run.run import Run
from triage.service.config import ServiceConfig
from triage.service.metrics import ServiceMetrics
from triage.service.store import TriageRow, TriageStore
from triage.service.uploads import is_upload, triage_upload
from triage.service.worker import CRASHED, DONE, FINDING, PROBE, REFUSED, Job, NodeInfo, WorkerDied, WorkerProcess

log = structlog.get_logger("triage.service.queue")



def _fmt_s(seconds: float) -> str:
    return f"{seconds:g} s"


# --- the triage function and its graph ---------------------------------------------------

_graphs: dict[str, DecisionGraph] = {}
_graphs_lock = threading.Lock()


def compiled_graph(playbooks: Path | str | None = None) -> DecisionGraph:
    """The playbooks compiled once per process: a server triages many runs with the same graph.

    Edits to the playbooks take effect when the server restarts.
    """
    key = str(playbooks or DEFAULT_DIR)
    with _graphs_lock:
        graph = _graphs.get(key)
        if graph is None:
            graph = _graphs[key] = load_graph(Path(playbooks) if playbooks else None)
        return graph


def triage_with_compiled_graph(ref: str, runs_root: str | None = None, playbooks: Path | str | None = None,
                               executor: Executor | None = None) -> Report:
    """`triage.api.triage`, without compiling the playbooks again for every run."""
    return triage_run(open_run(ref, runs_root), compiled_graph(playbooks), executor)


# --- the executor that keeps the budget ----------------------------------------------------


class BudgetExecutor:
    """Runs probes through `inner` while the budget lasts; reuses an earlier attempt's findings.

    `on_start(node)` is told when a probe starts and `on_finding(node, finding, fresh)`
    of every finding of the walk (`fresh` when the probe ran now, not reused or skipped),
    so the caller can record findings as they come.
    """

    def __init__(self, inner: Executor, *, run_ref: str, active: bool, budget_s: float,
                 relaunch_configured: bool = False, engine_allow: frozenset[str] = frozenset(),
                 previous: Mapping[str, str] | None = None,
                 on_start: Callable[[NodeInfo], None] | None = None,
                 on_finding: Callable[[NodeInfo, Finding, bool], None] | None = None) -> None:
        self.inner = inner
        self.run_ref = run_ref
        self.active = active
        # The run's job is relaunched only when the service is configured for it AND an allowed user asked for
        # the active probes on this triage; engines the run names are contacted only on the service's allow-list.
        self.relaunch_configured = relaunch_configured
        self.relaunch = bool(active and relaunch_configured)
        self.engine_allow = frozenset(engine_allow)
        self._consented: set[int] = set()
        self.budget_s = budget_s
        self.deadline = time.monotonic() + budget_s
        self.previous = dict(previous or {})
        self.on_start = on_start
        self.on_finding = on_finding
        self.steps: list[tuple[NodeInfo, Finding]] = []
        self.running: NodeInfo | None = None
        self.skipped_for_budget: list[str] = []
        self.reused = 0

    def run_probe(self, node: Node, probe_cls: type[Probe], run: Run) -> Finding:
        info = NodeInfo.of(node)
        finding, fresh = self._run(info, node, probe_cls, run)
        self.steps.append((info, finding))
        if self.on_finding is not None:
            self.on_finding(info, finding, fresh)
        return finding

    def _run(self, info: NodeInfo, node: Node, probe_cls: type[Probe], run: Run) -> tuple[Finding, bool]:
        stored = self.previous.get(node.id)
        if stored is not None:
            self.reused += 1
            return Finding.model_validate_json(stored), False
        base = {"node": node.id, "probe": probe_cls.name}
        self._consent(run)
        if time.monotonic() >= self.deadline:
            self.skipped_for_budget.append(node.id)
            reason = f"not run: the triage's time budget of {_fmt_s(self.budget_s)} ran out"
            return Finding(**base, outcome=UNAVAILABLE, summary=reason, missing=Missing(
                artifact="time", reason=reason, command=f"/triage {self.run_ref} --force (or raise --time-budget)")), False
        self.running = info
        if self.on_start is not None:
            self.on_start(info)
        try:
            finding = self.inner.run_probe(node, probe_cls, run)
        finally:
            self.running = None
        return finding, True


    def _consent(self, run: Run) -> None:
        """What this triage may do beyond reading the run: set once per run, from the service's consent only."""
        if id(run) in self._consented:
            return
        self._consented.add(id(run))
        from triage.engines.consent import consent_engines

        consent_engines(run, self.engine_allow)
        run.engine_writes_allowed = False
        run.relaunch_allowed = self.relaunch
        if not self.relaunch_configured:
            run.relaunch_hint = "this service is not configured to relaunch jobs (TRIAGE_ALLOW_RELAUNCH)"
        else:
            run.relaunch_hint = (f"an allowed user can press 'Run active probes' in Slack, or ask "
                                 f"/triage {self.run_ref} --active")


def mark_partial(report: Report, note: str) -> Report:
    run = report.run.model_copy(update={"partial": True, "notes": [*report.run.notes, note]})
    return report.model_copy(update={"run": run})


def stopped_report(triage: TriageRow, steps: list[tuple[NodeInfo, Finding]], running: NodeInfo | None,
                   budget_s: float, playbooks: Path | None = None) -> Report:
    """A partial report from the findings of an attempt whose probe outran the budget and the grace."""
    title = "Inconclusive"
    try:
        verdict = load_catalog((playbooks or DEFAULT_DIR) / "verdicts.yaml").get(INCONCLUSIVE)
        if verdict is not None:
            title = verdict.title
    except TriageError:
        pass
    stuck = running.probe if running is not None else "a probe"
    note = f"The time budget of {_fmt_s(budget_s)} ran out while {stuck} was still running: this report is partial."
    path = [
        Step(node=n.id, playbook=n.playbook, probe=f.probe, ask=n.ask, outcome=f.outcome, summary=f.summary,
             evidence=f.evidence, confidence=f.confidence, duration_s=round(f.duration_s, 4), missing=f.missing,
             error=f.error)
        for n, f in steps
    ]
    not_checked = []
    if running is not None:
        not_checked.append(NotChecked(node=running.id, probe=running.probe, artifact="time",
                                      reason=f"still running when the time budget of {_fmt_s(budget_s)} ran out"))
    return Report(
        created_at=dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        duration_s=round(budget_s, 4),
        run=RunInfo(ref=triage.run_ref, path=triage.run_dir, framework="unknown", partial=True, notes=[note]),
        root_cause=RootCause(
            id=INCONCLUSIVE, title=title, confidence=0.0,
            explanation=f"The walk did not reach a verdict within {_fmt_s(budget_s)}: {stuck} was still running.",
            remedy="Triage again with a larger --time-budget, or run the slow probe on its own.",
        ),
        path=path,
        not_checked=not_checked,
    )


@dataclass
class Attempt:
    """How one attempt of a triage ended."""

    report: Report | None = None
    error: str | None = None
    skipped_for_budget: int = 0
    stopped: bool = False  # a probe outran budget + grace and was stopped / abandoned
    interrupted: bool = False  # the server is shutting down: the triage resumes at its next start
    steps: list[tuple[NodeInfo, Finding]] = field(default_factory=list)
    running: NodeInfo | None = None


# --- the queue ---------------------------------------------------------------------------


class WorkQueue:
    """`concurrency` slots, each taking the oldest queued triage from the store."""

    def __init__(self, store: TriageStore, config: ServiceConfig, metrics: ServiceMetrics,
                 on_finished: Callable[[str], None] | None = None) -> None:
        self.store = store
        self.config = config
        self.metrics = metrics
        self.on_finished = on_finished
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._workers: dict[int, WorkerProcess] = {}
        self.stopped = 0

    @property
    def fn(self) -> Callable[..., Report]:
        return self.config.triage_fn if self.config.triage_fn is not None else triage_with_compiled_graph

    def warm(self) -> None:
        """Thread mode: compile the playbooks (importing the probes) before the first request needs them."""
        if self.config.triage_fn is not None or self.config.workers != "thread":
            return
        try:
            compiled_graph(self.config.playbooks)
        except TriageError as exc:
            log.error("playbooks_unusable", error=str(exc))

    def start(self) -> None:
        self.warm()
        for slot in range(self.config.concurrency):
            t = threading.Thread(target=self._loop, args=(slot,), name=f"triage-slot-{slot}", daemon=True)
            t.start()
            self._threads.append(t)

    def wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self.wake()
        for worker in list(self._workers.values()):
            worker.kill()  # a triage cut short here is resumed at the next start
        for t in self._threads:
            t.join(timeout)
        self._threads.clear()

    def worker_pids(self) -> list[int]:
        """The worker processes ready for work."""
        return [w.pid for w in self._workers.values() if w.pid is not None and w.ready and w.alive()]

    def _worker(self, slot: int) -> WorkerProcess:
        """The slot's worker process, (re)started from this slot's own long-lived thread."""
        worker = self._workers.get(slot)
        if worker is None or not worker.ready or not worker.alive():
            worker = WorkerProcess(self.fn, str(self.config.playbooks) if self.config.playbooks else None,
                                   json_logs=self.config.json_logs, verbosity=1, nice=self.config.worker_nice,
                                   name=f"triage-worker-{slot}")
            self._workers[slot] = worker  # so that stop() reaches it while it starts
            worker.start(cancel=self._stop)
            log.info("worker_started", slot=slot, pid=worker.pid)
        return worker

    def _loop(self, slot: int) -> None:
        while not self._stop.is_set():
            if self.config.workers == "process":
                try:
                    self._worker(slot)
                except Exception as exc:  # noqa: BLE001 - retried; the queue stays in the store
                    if self._stop.is_set():
                        break
                    log.error("worker_start_failed", slot=slot, error=repr(exc))
                    self._stop.wait(2.0)
                    continue
            try:
                job = self.store.claim_triage()
            except Exception as exc:  # noqa: BLE001 - a locked or failing database must not end the slot
                log.error("claim_failed", error=repr(exc))
                job = None
            if job is None:
                with self._cond:
                    self._cond.wait(1.0)
                continue
            structlog.contextvars.bind_contextvars(request_id=job.lead_request, run_id=job.run_ref, triage_id=job.id)
            try:
                self.run_one(job, slot)
            except Exception as exc:  # noqa: BLE001
                log.error("triage_slot_failed", error=repr(exc), exc_info=True)
            finally:
                structlog.contextvars.clear_contextvars()

    # --- one triage -----------------------------------------------------------------

    def _record(self, job: TriageRow) -> Callable[[NodeInfo, Finding, bool], None]:
        def record(node: NodeInfo, finding: Finding, fresh: bool) -> None:
            if fresh:
                self.metrics.observe("triage_probe_duration_seconds", finding.duration_s, probe=finding.probe)
                self.store.record_finding(job.id, job.attempt, node.id, finding.model_dump_json())
        return record

    def _in_thread(self, job: TriageRow, previous: dict[str, str]) -> Attempt:
        cfg = self.config
        executor = BudgetExecutor(LocalExecutor(), run_ref=job.run_ref, active=job.active, budget_s=cfg.time_budget_s,
                                  relaunch_configured=cfg.allow_relaunch, engine_allow=cfg.engine_allow,
                                  previous=previous, on_finding=self._record(job))
        box: dict[str, Any] = {}
        context = structlog.contextvars.get_contextvars()
        kwargs: dict[str, Any] = {"runs_root": cfg.runs_root_arg, "executor": executor}
        if cfg.playbooks is not None:
            kwargs["playbooks"] = cfg.playbooks

        def work() -> None:
            structlog.contextvars.bind_contextvars(**context)
            try:
                # a log handed over in Slack is triaged from its kept text, not opened as a run-id
                box["report"] = (triage_upload(job.run_dir, **kwargs) if is_upload(job.run_dir)
                                 else self.fn(job.run_ref, **kwargs))
            except BaseException as exc:  # noqa: BLE001 - carried back to the slot
                box["error"] = exc

        thread = threading.Thread(target=work, name=f"triage-{job.id}", daemon=True)
        thread.start()
        thread.join(cfg.time_budget_s + cfg.grace)
        if thread.is_alive():  # cannot be stopped: abandoned, its late findings refused by the store
            return Attempt(stopped=True, steps=list(executor.steps), running=executor.running)
        if "error" in box:
            exc = box["error"]
            if isinstance(exc, TriageError):
                return Attempt(error=(str(exc).splitlines() or [type(exc).__name__])[0])
            log.error("triage_crashed", error=repr(exc), exc_info=exc)
            return Attempt(error=f"internal error: {type(exc).__name__}: {exc}")
        return Attempt(report=box["report"], skipped_for_budget=len(executor.skipped_for_budget))

    def _in_process(self, job: TriageRow, previous: dict[str, str], slot: int) -> Attempt:
        cfg = self.config
        worker = self._worker(slot)
        record = self._record(job)
        attempt = Attempt()
        worker.send(Job(
            triage_id=job.id, attempt=job.attempt, run_ref=job.run_ref, run_dir=job.run_dir, active=job.active,
            budget_s=cfg.time_budget_s,
            runs_root=cfg.runs_root_arg, playbooks=str(cfg.playbooks) if cfg.playbooks else None, previous=previous,
            context=structlog.contextvars.get_contextvars(), relaunch_configured=cfg.allow_relaunch,
            engine_allow=tuple(sorted(cfg.engine_allow)),
        ))
        deadline = time.monotonic() + cfg.time_budget_s + cfg.grace
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                worker.kill()
                log.warning("probe_stopped", probe=attempt.running.probe if attempt.running else None, pid=worker.pid)
                attempt.stopped = True
                return attempt
            try:
                message = worker.receive(min(remaining, 1.0))
            except WorkerDied as exc:
                worker.kill()
                if self._stop.is_set():
                    attempt.interrupted = True
                    return attempt
                log.error("worker_died", error=str(exc))
                attempt.error = f"{exc}; the run may need more memory than the triage host has"
                return attempt
            if message is None:
                continue
            kind = message[0]
            if kind == PROBE:
                attempt.running = message[1]
            elif kind == FINDING:
                node, finding, fresh = message[1], Finding.model_validate_json(message[2]), message[3]
                attempt.running = None
                attempt.steps.append((node, finding))
                record(node, finding, fresh)
            elif kind == DONE:
                attempt.report = Report.model_validate_json(message[1])
                attempt.skipped_for_budget = message[2]
                return attempt
            elif kind in (REFUSED, CRASHED):
                attempt.error = message[1]
                return attempt
            else:
                raise AssertionError(f"unreachable: worker message {kind!r}")

    def run_one(self, job: TriageRow, slot: int = 0) -> None:
        cfg = self.config
        started = time.monotonic()
        previous = self.store.findings(job.id)
        log.info("triage_started", attempt=job.attempt, active=job.active, reused_findings=len(previous))
        if cfg.workers == "process":
            attempt = self._in_process(job, previous, slot)
        else:
            attempt = self._in_thread(job, previous)
        if attempt.interrupted:
            log.info("triage_interrupted", attempt=job.attempt)
            return
        report = attempt.report
        if attempt.stopped:
            self.stopped += 1
            self.metrics.inc("triage_abandoned_total")
            report = stopped_report(job, attempt.steps, attempt.running, cfg.time_budget_s, cfg.playbooks)
        elif report is not None and attempt.skipped_for_budget:
            report = mark_partial(report, (
                f"The time budget of {_fmt_s(cfg.time_budget_s)} ran out: {attempt.skipped_for_budget} "
                "probe(s) were not run; this report is partial."))
        partial = bool(report is not None and report.run.partial)
        verdict = report.root_cause.id if report is not None else None
        stored = self.store.finish_triage(
            job.id, job.attempt, report_json=report.model_dump_json() if report is not None else None,
            verdict=verdict, partial=partial, error=attempt.error,
        )
        elapsed = time.monotonic() - started
        if stored:
            self.metrics.inc("triage_triages_total", verdict=verdict or "error")
            self.metrics.observe("triage_duration_seconds", elapsed)
            if partial:
                self.metrics.inc("triage_partial_total")
        log.info("triage_finished", verdict=verdict, error=attempt.error, partial=partial,
                 duration_s=round(elapsed, 3), stored=stored)
        if self.on_finished is not None:
            self.on_finished(job.id)
