"""Triage worker processes: the triage runs outside the server's process.

A triage is CPU work in Python (parsing logs, walking the graph); in the server's process
it would compete with the event loop for the interpreter lock, and Slack's 3-second
acknowledgements would wait behind it. Each worker is a long-lived process (started
with `spawn`, at a lower scheduling priority, killed with the server if the server
dies) that compiles the playbooks once and then triages one run at a time:

    parent -> child   Job                              a triage to run
    child -> parent   ("ready",)                       playbooks compiled, waiting for work
                      ("probe", node)                  a probe starts (so a stuck one can be named)
                      ("finding", node, json, fresh)   a finding of the walk, as soon as it is known
                      ("done", report_json, skipped)   the report; `skipped` probes ran out of budget
                      ("refused", message)             the run cannot be triaged (a TriageError)
                      ("crashed", message)             anything else

A probe still running when the budget and its grace are spent is stopped by killing its
worker, which is then replaced.
"""

from __future__ import annotations

import atexit
import ctypes
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

import structlog

from triage.errors import TriageError

READY, PROBE, FINDING, DONE, REFUSED, CRASHED = "ready", "probe", "finding", "done", "refused", "crashed"
PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class NodeInfo:
    """What a report needs to know about a graph node (picklable, unlike the node's params)."""

    id: str
    playbook: str
    probe: str
    ask: str

    @classmethod
    def of(cls, node: Any) -> NodeInfo:
        return cls(node.id, node.playbook, node.probe, node.ask)


@dataclass(frozen=True)
class Job:
    triage_id: str
    attempt: int
    run_ref: str
    active: bool
    budget_s: float
    runs_root: str
    playbooks: str | None
    previous: dict[str, str] = field(default_factory=dict)  # node -> finding JSON from an earlier attempt
    context: dict[str, Any] = field(default_factory=dict)  # log context: request_id, run_id, triage_id
    relaunch_configured: bool = False  # the service may relaunch a run's job (only on an active triage)
    engine_allow: tuple[str, ...] = ()  # host:port of the engines a run may name and have contacted
    run_dir: str = ""  # `slack-upload:...` for a log handed over in Slack (triage.service.uploads)


class WorkerDied(Exception):
    """The worker process ended (killed, out of memory, crashed) without answering."""


def _die_with_parent(parent: int) -> None:
    """Ask Linux to kill this process when the server dies, so no triage outlives it."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # the server died before the request above
        os._exit(1)


def child_main(conn: Connection, fn: Callable[..., Any], playbooks: str | None, json_logs: bool, verbosity: int,
               nice: int, parent: int) -> None:
    """The worker's loop; runs in the child process."""
    _die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C goes to the server, which stops its workers
    if nice:
        try:
            os.nice(nice)
        except OSError:
            pass
    from triage.logging import configure

    configure(verbosity, json=json_logs)
    log = structlog.get_logger("triage.service.worker")
    from triage.service.queue import BudgetExecutor, compiled_graph, triage_with_compiled_graph
    from triage.executor import LocalExecutor
    from triage.service.uploads import is_upload, triage_upload

    if fn is triage_with_compiled_graph:
        try:
            compiled_graph(playbooks)
        except TriageError as exc:
            log.error("playbooks_unusable", error=str(exc))
    conn.send((READY,))
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            return
        if job is None:
            return
        structlog.contextvars.bind_contextvars(**job.context)
        executor = BudgetExecutor(
            LocalExecutor(), run_ref=job.run_ref, active=job.active, budget_s=job.budget_s, previous=job.previous,
            relaunch_configured=job.relaunch_configured, engine_allow=frozenset(job.engine_allow),
            on_start=lambda node: conn.send((PROBE, node)),
            on_finding=lambda node, finding, fresh: conn.send((FINDING, node, finding.model_dump_json(), fresh)),
        )
        kwargs: dict[str, Any] = {"runs_root": job.runs_root, "executor": executor}
        if job.playbooks:
            kwargs["playbooks"] = job.playbooks
        try:
            if is_upload(job.run_dir):
                report = triage_upload(job.run_dir, **kwargs)
            else:
                report = fn(job.run_ref, **kwargs)
            message: tuple[Any, ...] = (DONE, report.model_dump_json(), len(executor.skipped_for_budget))
        except TriageError as exc:
            message = (REFUSED, (str(exc).splitlines() or [type(exc).__name__])[0])
        except Exception as exc:  # noqa: BLE001 - reported to the parent, the worker goes on
            log.error("triage_crashed", error=repr(exc), exc_info=True)
            message = (CRASHED, f"internal error: {type(exc).__name__}: {exc}")
        try:
            conn.send(message)
        except (BrokenPipeError, OSError):
            return
        finally:
            structlog.contextvars.clear_contextvars()


class WorkerProcess:
    """One worker process and its pipe, seen from the server."""

    def __init__(self, fn: Callable[..., Any], playbooks: str | None, *, json_logs: bool = True, verbosity: int = 1,
                 nice: int = 5, name: str = "triage-worker") -> None:
        self.fn = fn
        self.playbooks = playbooks
        self.json_logs = json_logs
        self.verbosity = verbosity
        self.nice = nice
        self.name = name
        self.proc: Any = None
        self.conn: Connection | None = None
        self.ready = False

    def start(self, timeout: float = 300.0, cancel: threading.Event | None = None) -> None:
        """Start the process and wait until it has compiled the playbooks (or `cancel` is set)."""
        ctx = multiprocessing.get_context("spawn")
        parent_conn, child_conn = ctx.Pipe()
        # Not a daemon: a probe may start processes of its own (a two-rank gloo replay, say),
        # which multiprocessing refuses to daemons. `atexit` and PR_SET_PDEATHSIG end it instead.
        self.proc = ctx.Process(
            target=child_main, name=self.name, daemon=False,
            args=(child_conn, self.fn, self.playbooks, self.json_logs, self.verbosity, self.nice, os.getpid()),
        )
        self.proc.start()
        atexit.register(self.kill)
        child_conn.close()
        self.conn = parent_conn
        deadline = time.monotonic() + timeout
        while True:
            message = self.receive(0.2)
            if message is not None and message[0] == READY:
                self.ready = True
                return
            if (cancel is not None and cancel.is_set()) or time.monotonic() > deadline:
                self.kill()
                raise WorkerDied("stopped while starting" if cancel is not None and cancel.is_set()
                                 else f"worker did not start within {timeout:g} s")

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.is_alive()

    def send(self, job: Job) -> None:
        assert self.conn is not None
        try:
            self.conn.send(job)
        except (BrokenPipeError, OSError) as exc:
            raise WorkerDied(f"worker pipe closed: {exc}") from None

    def receive(self, timeout: float) -> tuple[Any, ...] | None:
        """The next message, None after `timeout` seconds; WorkerDied when the process is gone."""
        assert self.conn is not None
        try:
            if self.conn.poll(timeout):
                return self.conn.recv()
        except (EOFError, OSError):
            pass
        else:
            if self.alive():
                return None
        code = self.proc.exitcode if self.proc is not None else None
        if self.proc is not None:
            self.proc.join(1)
            code = self.proc.exitcode
        raise WorkerDied(f"the triage worker process ended (exit code {code})")

    def kill(self) -> None:
        if self.proc is not None and self.proc.is_alive():
            self.proc.kill()
            self.proc.join(5)
        if self.proc is not None and not self.proc.is_alive():
            atexit.unregister(self.kill)
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def stop(self, timeout: float = 3.0) -> None:
        """Ask the worker to finish, then make sure it has."""
        if self.conn is not None and self.alive():
            try:
                self.conn.send(None)
            except (BrokenPipeError, OSError):
                pass
            self.proc.join(timeout)
        self.kill()
