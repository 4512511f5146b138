"""`triage watch`: triage every Ray job that fails, once, and hand the report on.

The watcher polls the dashboard's `GET /api/jobs/`. Each submission job that is FAILED
and has not been triaged is triaged (from the job itself, as `triage run <id>` does),
its report stored, and the report handed to the notifier. With `--unhealthy`, running
jobs are also examined every `--unhealthy-every` seconds with the entry playbook's
symptom classifier (which runs the metric anomaly probes); a running job it finds a
symptom in is triaged and reported once.

What "once per job" means. A job is its submission id *and* its start time: a head
that restarts forgets its jobs (without GCS fault tolerance the job table lives in
memory), and a user may then submit a new job under an old id (`--submission-id`);
that new job is triaged in its own right, while the job the old head ran is never
triaged twice. The record of what was triaged is kept in SQLite, in the findings-cache
file ($TRIAGE_DB), table `watch_jobs`, so a watcher that restarts picks up where it was:

- a job that failed while the watcher was down is triaged when it comes back (jobs that
  ended before the watcher first watched this dashboard, less `--backfill-hours`, are
  left alone, so a first start does not triage a cluster's whole history);
- a triage cut short (the watcher killed mid-way) is redone; a finished triage whose
  notification did not go out is notified from the stored report, never triaged again;
- a job that failed on a head which then restarted before the watcher saw it is gone
  with that head's job table: nothing is left to triage.

The dashboard being down or restarting is waited out with exponential backoff (capped
at `--backoff-max` seconds), one line on stderr when it goes and when it comes back.
At most one watcher uses a database file at a time.
"""

from __future__ import annotations

import argparse
import fcntl
import importlib
import json
import signal
import sqlite3
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

import structlog

from triage.errors import BadInput, TriageError
from triage.executor import Executor, examine
from triage.finding import ERROR, UNAVAILABLE
from triage.graph import VERDICT_PREFIX, DecisionGraph
from triage.ray.jobs_api import FAILED, RUNNING, DashboardUnavailable, JobsClient, RayDashboardError, RayJob
from triage.report import Report

log = structlog.get_logger("triage.ray.watch")

KIND_FAILED = "failed"
KIND_UNHEALTHY = "unhealthy"
# watch_jobs.state
TRIAGING, TRIAGED, NOTIFIED, GAVE_UP = "triaging", "triaged", "notified", "gave_up"

SCHEMA = """
CREATE TABLE IF NOT EXISTS watch_clusters (
  address TEXT PRIMARY KEY,
  since REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS watch_jobs (
  address TEXT NOT NULL,
  job_key TEXT NOT NULL,
  kind TEXT NOT NULL,
  submission_id TEXT NOT NULL,
  status TEXT NOT NULL,
  state TEXT NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  notify_attempts INTEGER NOT NULL DEFAULT 0,
  verdict TEXT,
  report TEXT,
  error TEXT,
  claimed_at REAL,
  triaged_at REAL,
  notified_at REAL,
  PRIMARY KEY (address, job_key, kind)
);
"""


# --------------------------------------------------------------------------------------
# notifiers


class Notifier(Protocol):
    """Where a watcher's reports go: printed, posted to Slack, ..."""

    def notify(self, job: RayJob, report: Report) -> None: ...


class PrintNotifier:
    """A few lines per report on stdout (or one JSON object per line)."""

    def __init__(self, stream: IO[str] | None = None, json_lines: bool = False) -> None:
        self.stream = stream or sys.stdout
        self.json_lines = json_lines

    def notify(self, job: RayJob, report: Report) -> None:
        if self.json_lines:
            line = json.dumps({"submission_id": job.submission_id, "job_key": job.key, "status": job.status,
                               "report": report.model_dump(mode="json")})
            self.stream.write(line + "\n")
        else:
            rc = report.root_cause
            lines = [f"{job.submission_id} {job.status} -> {rc.id} ({rc.confidence:.0%}): {rc.title}"]
            lines += [f"  - {note}" for note in report.run.notes]
            lines += [f"  * {ev}" for ev in report.key_evidence(3)]
            lines.append(f"  fix: {rc.remedy}")
            self.stream.write("\n".join(lines) + "\n")
        self.stream.flush()


def slack_notifier() -> Notifier:
    """The Slack notifier of the service, imported only when asked for."""
    try:
        module = importlib.import_module("triage.service.slack")
    except ImportError as exc:
        raise BadInput(f"--notify slack needs the Slack service (triage.service.slack): {exc}") from None
    factory = getattr(module, "make_watch_notifier", None)
    if factory is None:
        raise BadInput("--notify slack: triage.service.slack has no make_watch_notifier(); "
                       "this installation cannot post watcher reports to Slack")
    return factory()


NOTIFIERS: dict[str, Callable[[argparse.Namespace], Notifier]] = {
    "print": lambda ns: PrintNotifier(json_lines=bool(getattr(ns, "json", False))),
    "slack": lambda ns: slack_notifier(),
}


# --------------------------------------------------------------------------------------
# the record of what was triaged


@dataclass(frozen=True)
class WatchRow:
    address: str
    job_key: str
    kind: str
    submission_id: str
    status: str
    state: str
    attempts: int
    notify_attempts: int
    verdict: str | None
    report: str | None
    error: str | None
    triaged_at: float | None
    notified_at: float | None


class WatchStore:
    """Which jobs were triaged, and their reports, in the findings-cache database file."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).expanduser()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock_fh: IO[str] | None = None
        self._mutex = threading.Lock()
        self._db = sqlite3.connect(str(self.path), timeout=30, check_same_thread=False)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(SCHEMA)
        self._db.commit()

    @classmethod
    def open(cls, path: str | Path | None = None) -> WatchStore:
        from triage.cache import default_db_path

        return cls(Path(path) if path else default_db_path())

    def lock(self) -> None:
        """Refuse a second watcher on the same file: both would triage the same jobs."""
        fh = open(str(self.path) + ".watch.lock", "a+")  # noqa: SIM115 - held for the watcher's lifetime
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.close()
            raise BadInput(f"another `triage watch` is using {self.path}; give this one its own --db") from None
        self._lock_fh = fh

    def close(self) -> None:
        with self._mutex:
            self._db.close()
        if self._lock_fh is not None:
            self._lock_fh.close()
            self._lock_fh = None

    def _exec(self, sql: str, args: tuple[Any, ...] = ()) -> sqlite3.Cursor:
        with self._mutex:
            cur = self._db.execute(sql, args)
            self._db.commit()
            return cur

    def since(self, address: str, default: float) -> float:
        """When this dashboard was first watched (less the backfill): older failures are history."""
        self._exec("INSERT OR IGNORE INTO watch_clusters (address, since) VALUES (?, ?)", (address, default))
        with self._mutex:
            row = self._db.execute("SELECT since FROM watch_clusters WHERE address = ?", (address,)).fetchone()
        return float(row["since"])

    def get(self, address: str, job: RayJob, kind: str) -> WatchRow | None:
        with self._mutex:
            row = self._db.execute("SELECT * FROM watch_jobs WHERE address = ? AND job_key = ? AND kind = ?",
                                   (address, job.key, kind)).fetchone()
        return _row(row) if row else None

    def claim(self, address: str, job: RayJob, kind: str) -> int:
        """Record a triage starting; the number of attempts so far, this one included."""
        self._exec(
            "INSERT INTO watch_jobs (address, job_key, kind, submission_id, status, state, attempts, claimed_at) "
            "VALUES (?, ?, ?, ?, ?, ?, 1, ?) ON CONFLICT (address, job_key, kind) DO UPDATE SET "
            "attempts = attempts + 1, state = excluded.state, status = excluded.status, claimed_at = excluded.claimed_at",
            (address, job.key, kind, job.submission_id, job.status, TRIAGING, time.time()),
        )
        row = self.get(address, job, kind)
        assert row is not None
        return row.attempts

    def unclaim(self, address: str, job: RayJob, kind: str) -> None:
        """A triage cut short by the dashboard going away: it does not count as an attempt."""
        self._exec("UPDATE watch_jobs SET attempts = MAX(0, attempts - 1) WHERE address = ? AND job_key = ? "
                   "AND kind = ? AND state = ?", (address, job.key, kind, TRIAGING))

    def triaged(self, address: str, job: RayJob, kind: str, report: Report) -> None:
        self._exec("UPDATE watch_jobs SET state = ?, verdict = ?, report = ?, error = NULL, triaged_at = ? "
                   "WHERE address = ? AND job_key = ? AND kind = ?",
                   (TRIAGED, report.root_cause.id, report.model_dump_json(), time.time(), address, job.key, kind))

    def notified(self, address: str, job: RayJob, kind: str) -> None:
        self._exec("UPDATE watch_jobs SET state = ?, notified_at = ?, notify_attempts = notify_attempts + 1, "
                   "error = NULL WHERE address = ? AND job_key = ? AND kind = ?",
                   (NOTIFIED, time.time(), address, job.key, kind))

    def failed(self, address: str, job: RayJob, kind: str, error: str, *, give_up: bool, notifying: bool = False) -> None:
        column = "notify_attempts = notify_attempts + 1, " if notifying else ""
        state_sql = "state = ?, " if give_up else ""
        args: tuple[Any, ...] = ((GAVE_UP,) if give_up else ()) + (error[:2000], address, job.key, kind)
        self._exec(f"UPDATE watch_jobs SET {column}{state_sql}error = ? WHERE address = ? AND job_key = ? AND kind = ?",
                   args)

    def rows(self, address: str | None = None) -> list[WatchRow]:
        sql = "SELECT * FROM watch_jobs" + (" WHERE address = ?" if address else "") + " ORDER BY claimed_at"
        with self._mutex:
            found = self._db.execute(sql, (address,) if address else ()).fetchall()
        return [_row(r) for r in found]


def _row(r: sqlite3.Row) -> WatchRow:
    return WatchRow(
        address=r["address"], job_key=r["job_key"], kind=r["kind"], submission_id=r["submission_id"],
        status=r["status"], state=r["state"], attempts=r["attempts"], notify_attempts=r["notify_attempts"],
        verdict=r["verdict"], report=r["report"], error=r["error"], triaged_at=r["triaged_at"],
        notified_at=r["notified_at"],
    )


# --------------------------------------------------------------------------------------
# the watcher


class JobWatcher:
    """Polls one dashboard; triages each failed (and, if asked, unhealthy running) job once."""

    def __init__(
        self,
        client: JobsClient,
        store: WatchStore,
        notifier: Notifier,
        *,
        executor: Executor | None = None,
        graph: DecisionGraph | None = None,
        unhealthy: bool = False,
        unhealthy_every_s: float = 600.0,
        backfill_s: float = 24 * 3600.0,
        max_attempts: int = 3,
        interval_s: float = 10.0,
        backoff_max_s: float = 300.0,
        cache_root: Path | None = None,
        err: IO[str] | None = None,
    ) -> None:
        self.client = client
        self.store = store
        self.notifier = notifier
        self.executor = executor
        self._graph = graph
        self.unhealthy = unhealthy
        self.unhealthy_every_s = unhealthy_every_s
        self.backfill_s = backfill_s
        self.max_attempts = max(1, max_attempts)
        self.interval_s = interval_s
        self.backoff_max_s = max(interval_s, backoff_max_s)
        self.cache_root = cache_root
        self.err = err or sys.stderr
        self._health_checked: dict[str, float] = {}
        self._down_since: float | None = None

    @property
    def address(self) -> str:
        return self.client.address

    @property
    def graph(self) -> DecisionGraph:
        if self._graph is None:
            from triage.graph import load_graph

            self._graph = load_graph()
        return self._graph

    def _say(self, text: str) -> None:
        self.err.write(f"triage watch: {text}\n")
        self.err.flush()

    # -- one pass ---------------------------------------------------------------------

    def poll_once(self) -> list[str]:
        """One look at the dashboard; the submission ids reported on this pass.

        Raises DashboardUnavailable / RayDashboardError when the dashboard cannot be read.
        """
        jobs = self.client.list_jobs()
        since = self.store.since(self.address, time.time() - self.backfill_s)
        done: list[str] = []
        for job in sorted(jobs, key=lambda j: (j.end_time or j.start_time or 0)):
            if job.type != "SUBMISSION" or not job.submission_id:
                continue  # a bare driver (`python script.py` on the head) has no job log to read
            if job.status == FAILED:
                ended = (job.end_time or job.start_time or 0) / 1000.0
                if ended < since:
                    continue
                if self._handle(job, KIND_FAILED):
                    done.append(job.submission_id)
            elif job.status == RUNNING and self.unhealthy:
                if self._check_health(job):
                    done.append(job.submission_id)
        return done

    def _handle(self, job: RayJob, kind: str) -> bool:
        row = self.store.get(self.address, job, kind)
        if row is not None and row.state in (NOTIFIED, GAVE_UP):
            return False
        if row is not None and row.state == TRIAGED and row.report:
            return self._notify(job, kind, Report.model_validate_json(row.report), row.notify_attempts)
        attempts = self.store.claim(self.address, job, kind)
        if attempts > self.max_attempts:
            self.store.failed(self.address, job, kind, row.error if row and row.error else "too many attempts",
                              give_up=True)
            self._say(f"gave up on {job.submission_id} after {self.max_attempts} attempts: {row.error if row else ''}")
            return False
        try:
            report = self._triage(job)
        except (DashboardUnavailable, RayDashboardError):
            self.store.unclaim(self.address, job, kind)
            raise
        except TriageError as exc:
            self.store.failed(self.address, job, kind, str(exc), give_up=attempts >= self.max_attempts)
            self._say(f"could not triage {job.submission_id} (attempt {attempts}/{self.max_attempts}): {exc}")
            return False
        except Exception as exc:  # noqa: BLE001 - one job's internal error must not stop the watcher
            log.error("watch_triage_crashed", submission_id=job.submission_id, error=repr(exc), exc_info=True)
            self.store.failed(self.address, job, kind, f"{type(exc).__name__}: {exc}",
                              give_up=attempts >= self.max_attempts)
            self._say(f"internal error triaging {job.submission_id}: {type(exc).__name__}: {exc}")
            return False
        self.store.triaged(self.address, job, kind, report)
        return self._notify(job, kind, report, 0)

    def _triage(self, job: RayJob, run: Any = None) -> Report:
        from triage.api import triage_run
        from triage.ray.source import open_ray_run

        run = run or open_ray_run(job.submission_id or "", client=self.client, cache_root=self.cache_root)
        try:
            return triage_run(run, self.graph, self.executor)
        finally:
            close = getattr(self.executor, "close", None)
            if close is not None:
                close()  # cancel whatever was started on a guess for this run

    def _notify(self, job: RayJob, kind: str, report: Report, notify_attempts: int) -> bool:
        try:
            self.notifier.notify(job, report)
        except Exception as exc:  # noqa: BLE001 - the report is stored; notifying is retried next pass
            give_up = notify_attempts + 1 >= self.max_attempts
            self.store.failed(self.address, job, kind, f"notify: {type(exc).__name__}: {exc}", give_up=give_up,
                              notifying=True)
            self._say(f"could not hand the report of {job.submission_id} to the notifier: {type(exc).__name__}: {exc}")
            return False
        self.store.notified(self.address, job, kind)
        return True

    def _check_health(self, job: RayJob) -> bool:
        """Run the entry symptom classifier on a running job; triage it when it shows a symptom."""
        from triage.ray.source import open_ray_run

        row = self.store.get(self.address, job, KIND_UNHEALTHY)
        if row is not None and row.state in (NOTIFIED, GAVE_UP):
            return False
        if row is not None and row.state == TRIAGED and row.report:
            return self._notify(job, KIND_UNHEALTHY, Report.model_validate_json(row.report), row.notify_attempts)
        now = time.monotonic()
        last = self._health_checked.get(job.key)
        if last is not None and now - last < self.unhealthy_every_s:
            return False
        self._health_checked[job.key] = now
        try:
            run = open_ray_run(job.submission_id or "", client=self.client, cache_root=self.cache_root)
        except (DashboardUnavailable, RayDashboardError):
            raise
        except TriageError as exc:
            self._say(f"could not read running job {job.submission_id}: {exc}")
            return False
        graph = self.graph
        entry = graph.nodes[graph.entry]
        finding = examine(entry, graph.probes[entry.probe], run)
        if finding.outcome in (UNAVAILABLE, ERROR) or _leads_to_healthy(graph, entry.edges[finding.outcome]):
            return False
        log.info("unhealthy_job", submission_id=job.submission_id, symptom=finding.outcome)
        return self._handle_unhealthy(job, run)

    def _handle_unhealthy(self, job: RayJob, run: Any) -> bool:
        attempts = self.store.claim(self.address, job, KIND_UNHEALTHY)
        try:
            report = self._triage(job, run)
        except TriageError as exc:
            self.store.failed(self.address, job, KIND_UNHEALTHY, str(exc), give_up=attempts >= self.max_attempts)
            self._say(f"could not triage running job {job.submission_id}: {exc}")
            return False
        self.store.triaged(self.address, job, KIND_UNHEALTHY, report)
        return self._notify(job, KIND_UNHEALTHY, report, 0)

    # -- the loop ---------------------------------------------------------------------

    def run(self, stop: threading.Event | None = None, max_polls: int | None = None) -> None:
        """Poll until `stop` is set (or `max_polls` passes), waiting out a dashboard that is down."""
        stop = stop or threading.Event()
        polls = 0
        failures = 0
        while not stop.is_set():
            try:
                self.poll_once()
                if failures:
                    self._say(f"dashboard at {self.address} is back after {failures} failed polls")
                failures = 0
                delay = self.interval_s
            except (DashboardUnavailable, RayDashboardError) as exc:
                failures += 1
                delay = min(self.backoff_max_s, self.interval_s * (2 ** (failures - 1)))
                self._say(f"{exc} — retrying in {delay:g} s")
            polls += 1
            if max_polls is not None and polls >= max_polls:
                return
            stop.wait(delay)


def _leads_to_healthy(graph: DecisionGraph, target: str) -> bool:
    if target.startswith(VERDICT_PREFIX):
        return target[len(VERDICT_PREFIX):] in ("healthy", "inconclusive")
    node = graph.nodes.get(target)
    return node is not None and node.playbook == "healthy"


# --------------------------------------------------------------------------------------
# the command


def add_watch_parser(subparsers: Any) -> argparse.ArgumentParser:
    """`triage watch …`, added to the CLI's subcommands."""
    w = subparsers.add_parser("watch", help="triage each Ray job that fails (once) and report it",
                              description=(__doc__ or "").split("\n\n")[0])
    w.add_argument("--ray-address", default=None,
                   help="the Ray dashboard to watch (default: $RAY_ADDRESS, else http://127.0.0.1:8265)")
    w.add_argument("--interval", type=float, default=10.0, help="seconds between polls (default 10)")
    w.add_argument("--backoff-max", type=float, default=300.0,
                   help="longest wait between polls while the dashboard is down (default 300 s)")
    w.add_argument("--unhealthy", action="store_true",
                   help="also triage running jobs whose metrics show a symptom (once per job)")
    w.add_argument("--unhealthy-every", type=float, default=600.0,
                   help="seconds between health checks of one running job (default 600)")
    w.add_argument("--backfill-hours", type=float, default=24.0,
                   help="on the first watch of a dashboard, also triage jobs that failed this long before (default 24)")
    w.add_argument("--max-attempts", type=int, default=3, help="triage attempts per job before giving up (default 3)")
    w.add_argument("--notify", choices=sorted(NOTIFIERS), default="print",
                   help="where reports go: printed (default) or posted to Slack by the service's notifier")
    w.add_argument("--json", action="store_true", help="print each report as one JSON line")
    w.add_argument("--once", action="store_true", help="poll once and exit (for cron)")
    w.add_argument("--db", default=None,
                   help="where triaged jobs and the findings cache live (default: $TRIAGE_DB or ~/.cache/triage/triage.db)")
    w.add_argument("--executor", choices=("local", "ray"), default="local", help="where probes run")
    w.add_argument("--no-cache", action="store_true", help="rerun every probe instead of reusing cached findings")
    w.set_defaults(func=cmd_watch)
    return w


def _watch_executor(ns: argparse.Namespace) -> Executor:
    from triage.executor import LocalExecutor

    inner: Executor = LocalExecutor()
    if ns.executor == "ray":
        from triage.ray.executor import RayExecutor

        inner = RayExecutor(address=ns.ray_address)
    if ns.no_cache:
        return inner
    from triage.cache import CachingExecutor, FindingsCache

    return CachingExecutor(inner, FindingsCache.open(ns.db))


def cmd_watch(ns: argparse.Namespace) -> int:
    from triage.graph import load_graph

    notifier = NOTIFIERS[ns.notify](ns)
    playbooks = getattr(ns, "playbooks", None)
    graph = load_graph(playbooks) if playbooks else load_graph()
    store = WatchStore.open(ns.db)
    store.lock()
    client = JobsClient(ns.ray_address, retries=1)
    watcher = JobWatcher(
        client, store, notifier, executor=_watch_executor(ns), graph=graph, unhealthy=ns.unhealthy,
        unhealthy_every_s=ns.unhealthy_every, backfill_s=ns.backfill_hours * 3600.0, max_attempts=ns.max_attempts,
        interval_s=ns.interval, backoff_max_s=ns.backoff_max,
    )
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set()) if threading.current_thread() is threading.main_thread() else None
    try:
        if ns.once:
            watcher.poll_once()
        else:
            watcher._say(f"watching {client.address} every {ns.interval:g} s (records in {store.path})")
            watcher.run(stop)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        client.close()
        store.close()
    return 0
