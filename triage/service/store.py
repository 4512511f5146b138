"""Durable record of triage requests, findings, reports and the Slack posts owed for them.

The service acknowledges nothing it has not written down. Each change is one SQLite
transaction (WAL journal; requests, reports and sent posts flushed to disk before the
call returns), and every state change names the state it leaves, so doing it twice does
nothing the second time:

    triage   queued ──claim──> running ──finish──> done
                ^                 │
                └──── recover ────┘   (a restart puts unfinished triages back in the queue)

    post     pending ──claim──> sending ──sent──> sent
                ^                  │ └──failed──> failed
                │                  v
                └──retry── unsure  (a crash or a lost answer mid-post: Slack may have it;
                                    the poster looks before posting again)

A post is an outbox row written in the same transaction as the request it answers, so a
request is never acknowledged without its answer owed, and an answer is marked sent with
the message's Slack `ts` the moment Slack returns it.

`TriageStore` is the interface the service uses; `SQLiteStore` implements it in one file
with no server to run. One `triage serve` owns a database file at a time (a lock file
next to it says so).
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from triage.errors import BadInput

SCHEMA_VERSION = 1

QUEUED, RUNNING, DONE = "queued", "running", "done"
PENDING, SENDING, UNSURE, SENT, FAILED, SKIPPED = "pending", "sending", "unsure", "sent", "failed", "skipped"
ANCHOR, REPORT, FILE = "anchor", "report", "file"

# What `submit` did with a request.
NEW, JOINED, STORED, DUPLICATE, QUEUE_FULL = "new", "joined", "stored", "duplicate", "queue_full"

SCHEMA = """
CREATE TABLE IF NOT EXISTS triages (
  id TEXT PRIMARY KEY,
  seq INTEGER NOT NULL,
  run_ref TEXT NOT NULL,
  run_dir TEXT NOT NULL,
  run_key TEXT NOT NULL,
  active INTEGER NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('queued', 'running', 'done')),
  attempt INTEGER NOT NULL DEFAULT 0,
  lead_request TEXT,
  created_at REAL NOT NULL,
  started_at REAL,
  finished_at REAL,
  verdict TEXT,
  partial INTEGER NOT NULL DEFAULT 0,
  error TEXT,
  report TEXT
);
CREATE UNIQUE INDEX IF NOT EXISTS triages_one_live ON triages(run_key) WHERE state IN ('queued', 'running');
CREATE INDEX IF NOT EXISTS triages_by_state ON triages(state, seq);
CREATE INDEX IF NOT EXISTS triages_by_run ON triages(run_key, finished_at);

CREATE TABLE IF NOT EXISTS requests (
  id TEXT PRIMARY KEY,
  triage_id TEXT NOT NULL REFERENCES triages(id),
  source TEXT NOT NULL,
  run_ref TEXT NOT NULL,
  team TEXT,
  channel TEXT,
  user TEXT,
  reply_to TEXT,
  thread_of TEXT,
  thread_ts TEXT,
  dedupe_key TEXT UNIQUE,
  detail TEXT,
  created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS requests_by_triage ON requests(triage_id);

CREATE TABLE IF NOT EXISTS findings (
  triage_id TEXT NOT NULL REFERENCES triages(id),
  node TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  seq INTEGER NOT NULL,
  finding TEXT NOT NULL,
  recorded_at REAL NOT NULL,
  PRIMARY KEY (triage_id, node)
);

CREATE TABLE IF NOT EXISTS posts (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  request_id TEXT NOT NULL REFERENCES requests(id),
  kind TEXT NOT NULL CHECK (kind IN ('anchor', 'report', 'file')),
  state TEXT NOT NULL CHECK (state IN ('pending', 'sending', 'unsure', 'sent', 'failed', 'skipped')),
  attempts INTEGER NOT NULL DEFAULT 0,
  next_at REAL NOT NULL DEFAULT 0,
  started_at REAL,
  ts TEXT,
  detail TEXT,
  error TEXT,
  UNIQUE (request_id, kind)
);
CREATE INDEX IF NOT EXISTS posts_by_state ON posts(state, next_at);
"""


def new_id() -> str:
    return uuid.uuid4().hex[:16]


def run_key(run_dir: str, active: bool) -> str:
    """Requests for the same run directory and the same probe set share one triage."""
    return f"{run_dir}|{'active' if active else 'static'}"


@dataclass(frozen=True)
class NewRequest:
    """A request as the front end validated it; `id` is the request id logged on every line."""

    id: str
    source: str  # slack | button | hook | api
    run_ref: str  # as the user typed it
    run_dir: str  # the directory it resolved to under the runs root
    active: bool = False
    force: bool = False
    team: str | None = None
    channel: str | None = None
    user: str | None = None
    reply_to: str | None = None  # a thread to answer in (a button pressed inside one)
    dedupe_key: str | None = None  # the same delivery twice is one request
    post: bool = False  # owes a Slack answer
    attach_postmortem: bool = False  # owes the postmortem file too (failed-job hooks)
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TriageRow:
    id: str
    seq: int
    run_ref: str
    run_dir: str
    active: bool
    state: str
    attempt: int
    lead_request: str | None
    created_at: float
    started_at: float | None
    finished_at: float | None
    verdict: str | None
    partial: bool
    error: str | None
    report: str | None  # the report's JSON

    @classmethod
    def of(cls, row: sqlite3.Row) -> TriageRow:
        return cls(
            id=row["id"], seq=row["seq"], run_ref=row["run_ref"], run_dir=row["run_dir"], active=bool(row["active"]),
            state=row["state"], attempt=row["attempt"], lead_request=row["lead_request"], created_at=row["created_at"],
            started_at=row["started_at"], finished_at=row["finished_at"], verdict=row["verdict"],
            partial=bool(row["partial"]), error=row["error"], report=row["report"],
        )


@dataclass(frozen=True)
class RequestRow:
    id: str
    triage_id: str
    source: str
    run_ref: str
    team: str | None
    channel: str | None
    user: str | None
    reply_to: str | None
    thread_of: str | None
    thread_ts: str | None
    detail: dict[str, Any]
    created_at: float

    @classmethod
    def of(cls, row: sqlite3.Row) -> RequestRow:
        return cls(
            id=row["id"], triage_id=row["triage_id"], source=row["source"], run_ref=row["run_ref"], team=row["team"],
            channel=row["channel"], user=row["user"], reply_to=row["reply_to"], thread_of=row["thread_of"],
            thread_ts=row["thread_ts"], detail=json.loads(row["detail"] or "{}"), created_at=row["created_at"],
        )


@dataclass(frozen=True)
class Submission:
    """What became of a request: `outcome` is one of new / joined / stored / duplicate / queue_full."""

    outcome: str
    request_id: str
    triage: TriageRow | None
    position: int = 0  # its place among the queued triages, 1 first (0 when running or done)
    thread_of: str | None = None  # joined: the earlier request whose thread gets the answer
    running: int = 0  # triages running when it was recorded (the same snapshot as `position`)


@dataclass(frozen=True)
class PostJob:
    """One Slack post owed, claimed by a poster."""

    id: int
    kind: str
    was_unsure: bool  # a previous attempt may have reached Slack: look before posting
    attempts: int
    started_at: float
    detail: dict[str, Any]
    request: RequestRow
    triage: TriageRow


@dataclass(frozen=True)
class Counts:
    queued: int
    running: int
    done: int
    posts_pending: int
    posts_failed: int


class TriageStore(Protocol):
    """What the service needs from its database; SQLite here, a server database later."""

    def submit(self, req: NewRequest, max_queued: int) -> Submission: ...
    def claim_triage(self) -> TriageRow | None: ...
    def record_finding(self, triage_id: str, attempt: int, node: str, finding_json: str) -> bool: ...
    def findings(self, triage_id: str) -> dict[str, str]: ...
    def finish_triage(self, triage_id: str, attempt: int, *, report_json: str | None, verdict: str | None,
                      partial: bool, error: str | None) -> bool: ...
    def recover(self) -> tuple[int, int]: ...
    def triage(self, triage_id: str) -> TriageRow | None: ...
    def request(self, request_id: str) -> RequestRow | None: ...
    def requests_of(self, triage_id: str) -> list[RequestRow]: ...
    def joined_users(self, request_id: str) -> list[str]: ...
    def position(self, triage_id: str) -> int: ...
    def counts(self) -> Counts: ...
    def claim_post(self, now: float | None = None) -> PostJob | None: ...
    def post_sent(self, post_id: int, ts: str | None, thread_ts: str | None = None) -> bool: ...
    def post_progress(self, post_id: int, detail: dict[str, Any]) -> None: ...
    def post_retry(self, post_id: int, delay_s: float, error: str, unsure: bool) -> None: ...
    def post_failed(self, post_id: int, error: str, state: str = FAILED) -> None: ...
    def posts_of(self, request_id: str) -> list[dict[str, Any]]: ...
    def close(self) -> None: ...


@dataclass
class _Admission:
    req: NewRequest
    max_queued: int
    done: bool = False
    result: Submission | None = None
    error: Exception | None = None


class DatabaseBusy(BadInput):
    """Another server holds the database."""


class SQLiteStore:
    """`TriageStore` on one SQLite file; safe to use from any thread (a connection per thread)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._all_lock = threading.Lock()
        # One writer at a time, queued here: SQLite's own busy handler makes waiting writers sleep
        # with growing back-offs, which under a burst of requests costs seconds.
        self._write_lock = threading.Lock()
        # Group commit of requests: one fsync for every request that arrived while the last one ran.
        self._admit_mutex = threading.Lock()
        self._admit_lock = threading.Lock()
        self._admissions: list[_Admission] = []
        self._lock_file = self._take_lock()
        con = self._con()
        version = con.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise BadInput(f"{self.path}: written by a newer triage (schema {version} > {SCHEMA_VERSION})")
        con.executescript(SCHEMA)
        con.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    # --- connections and transactions ---------------------------------------------

    def _take_lock(self) -> Any:
        lock_path = self.path.with_name(self.path.name + ".lock")
        fh = open(lock_path, "a+")  # noqa: SIM115 - held for the store's lifetime
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.seek(0)
            holder = fh.read().strip() or "another process"
            fh.close()
            raise DatabaseBusy(f"{self.path} is in use by another triage server (pid {holder}); "
                               "give each server its own --db") from None
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        return fh

    def _con(self) -> sqlite3.Connection:
        con = getattr(self._local, "con", None)
        if con is None:
            con = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
            con.row_factory = sqlite3.Row
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=NORMAL")
            con.execute("PRAGMA foreign_keys=ON")
            con.execute("PRAGMA busy_timeout=30000")
            self._local.con = con
            with self._all_lock:
                self._all.append(con)
        return con

    @contextmanager
    def _tx(self, durable: bool = False) -> Iterator[sqlite3.Connection]:
        """One write transaction.

        `durable` ones (a request before its acknowledgement, a report, a sent post) are on disk
        when this returns (`synchronous=FULL`, which also flushes every commit before them); the
        others (claims, findings, retries) survive a crash of the process, and may be lost with
        the machine's power, which only means some probes run again.
        """
        con = self._con()
        with self._write_lock:
            if getattr(self._local, "durable", None) != durable:
                con.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
                self._local.durable = durable
            con.execute("BEGIN IMMEDIATE")
            try:
                yield con
            except BaseException:
                con.execute("ROLLBACK")
                raise
            con.execute("COMMIT")

    def close(self) -> None:
        with self._all_lock:
            for con in self._all:
                try:
                    con.close()
                except sqlite3.Error:
                    pass
            self._all.clear()
        self._local = threading.local()
        if self._lock_file is not None:
            self._lock_file.close()
            self._lock_file = None

    # --- requests and triages ------------------------------------------------------

    def submit(self, req: NewRequest, max_queued: int) -> Submission:
        """Record a request (and the triage and posts it needs); on disk when this returns."""
        item = _Admission(req, max_queued)
        with self._admit_lock:
            self._admissions.append(item)
        with self._admit_mutex:
            if not item.done:
                with self._admit_lock:
                    batch, self._admissions = self._admissions, []
                try:
                    with self._tx(durable=True) as con:
                        for one in batch:
                            con.execute("SAVEPOINT admission")
                            try:
                                one.result = self._admit(con, one.req, one.max_queued)
                            except Exception as exc:  # noqa: BLE001 - this request fails, the batch goes on
                                con.execute("ROLLBACK TO admission")
                                one.error = exc
                            con.execute("RELEASE admission")
                except Exception as exc:  # noqa: BLE001 - the commit failed: every request of the batch did
                    for one in batch:
                        one.result, one.error = None, exc
                for one in batch:
                    one.done = True
        if item.error is not None:
            raise item.error
        assert item.result is not None
        return item.result

    def _admit(self, con: sqlite3.Connection, req: NewRequest, max_queued: int) -> Submission:
        now = time.time()
        key = run_key(req.run_dir, req.active)
        if req.dedupe_key:
            seen = con.execute("SELECT id, triage_id FROM requests WHERE dedupe_key = ?", (req.dedupe_key,)).fetchone()
            if seen is not None:
                t = self._triage(con, seen["triage_id"])
                return Submission(DUPLICATE, seen["id"], t, self._position(con, t), running=self._running(con))
        live = con.execute(
            "SELECT * FROM triages WHERE run_key = ? AND state IN ('queued', 'running')", (key,)
        ).fetchone()
        thread_of = None
        if live is not None:
            triage = TriageRow.of(live)
            outcome = JOINED
            if req.post:
                lead = con.execute(
                    "SELECT id FROM requests WHERE triage_id = ? AND thread_of IS NULL AND source = ? "
                    "AND channel IS ? AND reply_to IS ? ORDER BY created_at LIMIT 1",
                    (triage.id, req.source, req.channel, req.reply_to),
                ).fetchone()
                thread_of = lead["id"] if lead is not None else None
        else:
            done = None
            if not req.force:
                done = con.execute(
                    "SELECT * FROM triages WHERE run_key = ? AND state = 'done' AND error IS NULL AND partial = 0 "
                    "ORDER BY finished_at DESC LIMIT 1", (key,),
                ).fetchone()
            if done is not None:
                triage = TriageRow.of(done)
                outcome = STORED
            else:
                waiting = con.execute("SELECT COUNT(*) FROM triages WHERE state = 'queued'").fetchone()[0]
                if waiting >= max_queued:
                    return Submission(QUEUE_FULL, req.id, None, waiting)
                seq = con.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM triages").fetchone()[0]
                tid = new_id()
                con.execute(
                    "INSERT INTO triages (id, seq, run_ref, run_dir, run_key, active, state, lead_request, created_at) "
                    "VALUES (?, ?, ?, ?, ?, ?, 'queued', ?, ?)",
                    (tid, seq, req.run_ref, req.run_dir, key, int(req.active), req.id, now),
                )
                triage = self._triage(con, tid)
                outcome = NEW
        con.execute(
            "INSERT INTO requests (id, triage_id, source, run_ref, team, channel, user, reply_to, thread_of, thread_ts, "
            "dedupe_key, detail, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (req.id, triage.id, req.source, req.run_ref, req.team, req.channel, req.user, req.reply_to, thread_of,
             None, req.dedupe_key, json.dumps(req.detail), now),
        )
        if req.post and thread_of is None:
            kinds = [ANCHOR, REPORT] + ([FILE] if req.attach_postmortem else [])
            con.executemany("INSERT INTO posts (request_id, kind, state) VALUES (?, ?, 'pending')",
                            [(req.id, k) for k in kinds])
        return Submission(outcome, req.id, triage, self._position(con, triage), thread_of, self._running(con))

    @staticmethod
    def _triage(con: sqlite3.Connection, triage_id: str) -> TriageRow:
        return TriageRow.of(con.execute("SELECT * FROM triages WHERE id = ?", (triage_id,)).fetchone())

    @staticmethod
    def _running(con: sqlite3.Connection) -> int:
        return int(con.execute("SELECT COUNT(*) FROM triages WHERE state = 'running'").fetchone()[0])

    @staticmethod
    def _position(con: sqlite3.Connection, triage: TriageRow | None) -> int:
        if triage is None or triage.state != QUEUED:
            return 0
        ahead = con.execute("SELECT COUNT(*) FROM triages WHERE state = 'queued' AND seq < ?", (triage.seq,)).fetchone()[0]
        return int(ahead) + 1

    def claim_triage(self) -> TriageRow | None:
        """The oldest queued triage, now running under a new attempt number."""
        if self._con().execute("SELECT 1 FROM triages WHERE state = 'queued' LIMIT 1").fetchone() is None:
            return None  # idle: no write transaction
        with self._tx() as con:
            row = con.execute("SELECT id FROM triages WHERE state = 'queued' ORDER BY seq LIMIT 1").fetchone()
            if row is None:
                return None
            con.execute(
                "UPDATE triages SET state = 'running', attempt = attempt + 1, started_at = ? WHERE id = ? AND state = 'queued'",
                (time.time(), row["id"]),
            )
            return self._triage(con, row["id"])

    def record_finding(self, triage_id: str, attempt: int, node: str, finding_json: str) -> bool:
        """Keep a finding of the running attempt; an abandoned attempt's late findings are dropped."""
        with self._tx() as con:
            cur = con.execute(
                "INSERT OR IGNORE INTO findings (triage_id, node, attempt, seq, finding, recorded_at) "
                "SELECT ?, ?, ?, (SELECT COUNT(*) FROM findings WHERE triage_id = ?), ?, ? "
                "WHERE EXISTS (SELECT 1 FROM triages WHERE id = ? AND state = 'running' AND attempt = ?)",
                (triage_id, node, attempt, triage_id, finding_json, time.time(), triage_id, attempt),
            )
            return cur.rowcount == 1

    def findings(self, triage_id: str) -> dict[str, str]:
        rows = self._con().execute("SELECT node, finding FROM findings WHERE triage_id = ? ORDER BY seq", (triage_id,))
        return {r["node"]: r["finding"] for r in rows}

    def finish_triage(self, triage_id: str, attempt: int, *, report_json: str | None, verdict: str | None,
                      partial: bool, error: str | None) -> bool:
        """Store the outcome of one attempt; False when that attempt no longer owns the triage."""
        with self._tx(durable=True) as con:
            cur = con.execute(
                "UPDATE triages SET state = 'done', finished_at = ?, report = ?, verdict = ?, partial = ?, error = ? "
                "WHERE id = ? AND state = 'running' AND attempt = ?",
                (time.time(), report_json, verdict, int(partial), error, triage_id, attempt),
            )
            return cur.rowcount == 1

    def recover(self) -> tuple[int, int]:
        """After a restart: unfinished triages go back to the queue, posts cut short become unsure."""
        with self._tx() as con:
            requeued = con.execute("UPDATE triages SET state = 'queued' WHERE state = 'running'").rowcount
            unsure = con.execute("UPDATE posts SET state = 'unsure' WHERE state = 'sending'").rowcount
        return requeued, unsure

    def triage(self, triage_id: str) -> TriageRow | None:
        row = self._con().execute("SELECT * FROM triages WHERE id = ?", (triage_id,)).fetchone()
        return TriageRow.of(row) if row is not None else None

    def request(self, request_id: str) -> RequestRow | None:
        row = self._con().execute("SELECT * FROM requests WHERE id = ?", (request_id,)).fetchone()
        return RequestRow.of(row) if row is not None else None

    def requests_of(self, triage_id: str) -> list[RequestRow]:
        rows = self._con().execute("SELECT * FROM requests WHERE triage_id = ? ORDER BY created_at", (triage_id,))
        return [RequestRow.of(r) for r in rows]

    def joined_users(self, request_id: str) -> list[str]:
        rows = self._con().execute(
            "SELECT DISTINCT user FROM requests WHERE thread_of = ? AND user IS NOT NULL ORDER BY created_at", (request_id,)
        )
        return [r["user"] for r in rows]

    def position(self, triage_id: str) -> int:
        con = self._con()
        row = con.execute("SELECT * FROM triages WHERE id = ?", (triage_id,)).fetchone()
        return self._position(con, TriageRow.of(row)) if row is not None else 0

    def counts(self) -> Counts:
        con = self._con()
        by_state = dict(con.execute("SELECT state, COUNT(*) FROM triages GROUP BY state").fetchall())
        posts = dict(con.execute("SELECT state, COUNT(*) FROM posts GROUP BY state").fetchall())
        return Counts(
            queued=by_state.get(QUEUED, 0), running=by_state.get(RUNNING, 0), done=by_state.get(DONE, 0),
            posts_pending=posts.get(PENDING, 0) + posts.get(SENDING, 0) + posts.get(UNSURE, 0),
            posts_failed=posts.get(FAILED, 0),
        )

    # --- the outbox of Slack posts --------------------------------------------------

    _ELIGIBLE = """
        SELECT p.id AS post_id FROM posts p
        JOIN requests r ON r.id = p.request_id
        JOIN triages t ON t.id = r.triage_id
        WHERE p.state IN ('pending', 'unsure') AND p.next_at <= ?
          AND (p.kind = 'anchor'
               OR (t.state = 'done' AND r.thread_ts IS NOT NULL
                   AND (p.kind = 'report'
                        OR EXISTS (SELECT 1 FROM posts q WHERE q.request_id = p.request_id
                                   AND q.kind = 'report' AND q.state IN ('sent', 'failed', 'skipped')))))
        ORDER BY p.id LIMIT 1
    """

    def claim_post(self, now: float | None = None) -> PostJob | None:
        """The next post that can go out now (a report waits for its thread and its triage)."""
        now = time.time() if now is None else now
        if self._con().execute(self._ELIGIBLE, (now,)).fetchone() is None:
            return None  # idle: no write transaction
        with self._tx() as con:
            row = con.execute(self._ELIGIBLE, (now,)).fetchone()
            if row is None:
                return None
            post = con.execute("SELECT * FROM posts WHERE id = ?", (row["post_id"],)).fetchone()
            con.execute(
                "UPDATE posts SET state = 'sending', attempts = attempts + 1, started_at = ? WHERE id = ? AND state = ?",
                (now, post["id"], post["state"]),
            )
            req = RequestRow.of(con.execute("SELECT * FROM requests WHERE id = ?", (post["request_id"],)).fetchone())
            return PostJob(
                id=post["id"], kind=post["kind"], was_unsure=post["state"] == UNSURE, attempts=post["attempts"] + 1,
                started_at=post["started_at"] or now, detail=json.loads(post["detail"] or "{}"),
                request=req, triage=self._triage(con, req.triage_id),
            )

    def post_sent(self, post_id: int, ts: str | None, thread_ts: str | None = None) -> bool:
        """Mark a post sent with its Slack ts; an anchor also fixes the request's thread."""
        with self._tx(durable=True) as con:
            post = con.execute("SELECT request_id, kind FROM posts WHERE id = ?", (post_id,)).fetchone()
            cur = con.execute(
                "UPDATE posts SET state = 'sent', ts = ?, error = NULL WHERE id = ? AND state = 'sending'", (ts, post_id)
            )
            if cur.rowcount == 1 and post["kind"] == ANCHOR:
                con.execute("UPDATE requests SET thread_ts = ? WHERE id = ? AND thread_ts IS NULL",
                            (thread_ts or ts, post["request_id"]))
            return cur.rowcount == 1

    def post_progress(self, post_id: int, detail: dict[str, Any]) -> None:
        """Remember what a multi-step post (a file upload) has done so far."""
        with self._tx() as con:
            con.execute("UPDATE posts SET detail = ? WHERE id = ?", (json.dumps(detail), post_id))

    def post_retry(self, post_id: int, delay_s: float, error: str, unsure: bool) -> None:
        with self._tx() as con:
            con.execute(
                "UPDATE posts SET state = ?, next_at = ?, error = ? WHERE id = ? AND state = 'sending'",
                (UNSURE if unsure else PENDING, time.time() + delay_s, error[:500], post_id),
            )

    def post_failed(self, post_id: int, error: str, state: str = FAILED) -> None:
        with self._tx() as con:
            con.execute("UPDATE posts SET state = ?, error = ? WHERE id = ? AND state IN ('sending', 'pending', 'unsure')",
                        (state, error[:500], post_id))

    def posts_of(self, request_id: str) -> list[dict[str, Any]]:
        rows = self._con().execute("SELECT * FROM posts WHERE request_id = ? ORDER BY id", (request_id,))
        return [dict(r) for r in rows]
