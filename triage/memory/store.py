"""The team's memory in SQLite: every triage's verdict and error signature, and confirmed causes.

Kept in the findings database (`$TRIAGE_DB`, `--cache-db`; the service's `--db`), in
tables of their own: the CLI already writes its findings cache there and the service its
store, so one file holds what both front ends saw, and a confirmation given in Slack is
seen by the next `triage run` on the same machine. Each write is one transaction
(WAL journal), so a reader never sees half an import.

    memory_triages        id, when, run, job identity, verdict, error signature, key evidence
    memory_confirmations  one row per triage: the real cause, who said so, when, a note

A triage of the service is confirmed under the service's own triage id (its `triages`
table, in the same file); the verdict, run and signature are then read from its report.
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
import time
import uuid
from pathlib import Path
from typing import Any

from triage.memory.models import ConfirmedCause

SCHEMA = """
CREATE TABLE IF NOT EXISTS memory_triages (
  id TEXT PRIMARY KEY,
  at REAL NOT NULL,
  run_ref TEXT NOT NULL,
  run_dir TEXT NOT NULL,
  identity TEXT NOT NULL,
  verdict TEXT NOT NULL,
  signature TEXT,
  evidence TEXT NOT NULL,
  source TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS memory_triages_by_signature ON memory_triages(signature);
CREATE INDEX IF NOT EXISTS memory_triages_by_verdict ON memory_triages(verdict, at);
CREATE TABLE IF NOT EXISTS memory_confirmations (
  triage_id TEXT PRIMARY KEY,
  verdict TEXT NOT NULL,
  given TEXT NOT NULL,
  by TEXT NOT NULL,
  at REAL NOT NULL,
  note TEXT,
  signature TEXT,
  evidence TEXT NOT NULL,
  run_ref TEXT,
  run_dir TEXT
);
CREATE INDEX IF NOT EXISTS memory_confirmations_by_signature ON memory_confirmations(signature, at);
"""

STORED, UNCHANGED, REPLACED = "stored", "unchanged", "replaced"


def iso(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_iso(text: str) -> float:
    return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.timezone.utc).timestamp()


class MemoryStore:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).expanduser()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(str(self.path), timeout=30.0, isolation_level=None, check_same_thread=False)
        self.db.row_factory = sqlite3.Row
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA busy_timeout=30000")
        self.db.executescript(SCHEMA)

    @classmethod
    def open(cls, path: str | Path | None = None) -> MemoryStore:
        from triage.cache import default_db_path

        return cls(path or default_db_path())

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _tx(self) -> sqlite3.Connection:
        self.db.execute("BEGIN IMMEDIATE")
        return self.db

    # --- triages ------------------------------------------------------------------

    def record_triage(self, *, run_ref: str, run_dir: str, identity: dict[str, str], verdict: str,
                      signature: str | None, evidence: list[str], source: str = "cli",
                      triage_id: str | None = None) -> str:
        if triage_id is None:  # the same run triaged again to the same answer keeps its id
            same = self.db.execute(
                "SELECT id FROM memory_triages WHERE run_dir = ? AND verdict = ? AND signature IS ? AND source = ? "
                "ORDER BY at DESC LIMIT 1", (run_dir, verdict, signature, source)).fetchone()
            if same is not None:
                self.db.execute("UPDATE memory_triages SET at = ?, evidence = ? WHERE id = ?",
                                (time.time(), json.dumps(evidence), same["id"]))
                return str(same["id"])
        tid = triage_id or uuid.uuid4().hex[:16]
        self.db.execute(
            "INSERT OR REPLACE INTO memory_triages (id, at, run_ref, run_dir, identity, verdict, signature, evidence, source) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (tid, time.time(), run_ref, run_dir, json.dumps(identity, sort_keys=True), verdict, signature,
             json.dumps(evidence), source))
        return tid

    def _service_triage(self, triage_id: str) -> dict[str, Any] | None:
        try:
            row = self.db.execute("SELECT id, run_ref, run_dir, verdict, report FROM triages WHERE id = ? AND state = 'done'",
                                  (triage_id,)).fetchone()
        except sqlite3.OperationalError:  # no service store in this file
            return None
        if row is None or row["verdict"] is None:
            return None
        signature, evidence = None, []
        if row["report"]:
            try:
                report = json.loads(row["report"])
                signature = ((report.get("history") or {}).get("signature"))
                evidence = [s.get("summary", "") for s in reversed(report.get("path") or [])
                            if s.get("outcome") not in ("unavailable", "error")][:3]
            except (ValueError, AttributeError):
                pass
        return {"id": row["id"], "run_ref": row["run_ref"], "run_dir": row["run_dir"], "verdict": row["verdict"],
                "signature": signature, "evidence": evidence}

    def triage(self, triage_id: str) -> dict[str, Any] | None:
        """A triage this file knows: one `triage run` recorded, or one the service finished."""
        row = self.db.execute("SELECT * FROM memory_triages WHERE id = ?", (triage_id,)).fetchone()
        if row is not None:
            return {"id": row["id"], "run_ref": row["run_ref"], "run_dir": row["run_dir"], "verdict": row["verdict"],
                    "signature": row["signature"], "evidence": json.loads(row["evidence"])}
        return self._service_triage(triage_id)

    def healthy_runs(self) -> list[dict[str, Any]]:
        """Runs triaged healthy, newest first, with their job identity."""
        rows = self.db.execute("SELECT run_ref, run_dir, identity, at FROM memory_triages WHERE verdict = 'healthy' "
                               "ORDER BY at DESC LIMIT 500")
        return [{"run_ref": r["run_ref"], "run_dir": r["run_dir"], "identity": json.loads(r["identity"]), "at": r["at"]}
                for r in rows]

    def seen_runs(self, signature: str, exclude_run_dir: str | None = None) -> int:
        """Other runs triaged with this signature (and confirmed runs imported from elsewhere)."""
        rows = self.db.execute(
            "SELECT run_dir FROM memory_triages WHERE signature = ? UNION "
            "SELECT COALESCE(run_dir, triage_id) FROM memory_confirmations WHERE signature = ?", (signature, signature))
        return len({r[0] for r in rows if r[0] != exclude_run_dir})

    # --- confirmations ---------------------------------------------------------------

    def confirm(self, triage: dict[str, Any], verdict: str, by: str, note: str | None = None) -> tuple[str, ConfirmedCause]:
        """Record `verdict` as the real cause of `triage`; the same answer twice is stored once."""
        con = self._tx()
        try:
            old = con.execute("SELECT * FROM memory_confirmations WHERE triage_id = ?", (triage["id"],)).fetchone()
            if old is not None and old["verdict"] == verdict and (old["note"] or None) == (note or None):
                con.execute("COMMIT")
                return UNCHANGED, self._cause(old)
            now = float(int(time.time()))  # whole seconds, as exported: an export / import round trip is exact
            con.execute(
                "INSERT OR REPLACE INTO memory_confirmations (triage_id, verdict, given, by, at, note, signature, evidence, "
                "run_ref, run_dir) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (triage["id"], verdict, triage["verdict"], by, now, note or None, triage.get("signature"),
                 json.dumps(triage.get("evidence") or []), triage.get("run_ref"), triage.get("run_dir")))
            row = con.execute("SELECT * FROM memory_confirmations WHERE triage_id = ?", (triage["id"],)).fetchone()
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        return (REPLACED if old is not None else STORED), self._cause(row)

    @staticmethod
    def _cause(row: sqlite3.Row) -> ConfirmedCause:
        return ConfirmedCause(verdict=row["verdict"], given=row["given"], by=row["by"], at=iso(row["at"]),
                              note=row["note"], triage_id=row["triage_id"], run=row["run_ref"])

    def confirmed_for(self, signature: str) -> list[ConfirmedCause]:
        rows = self.db.execute("SELECT * FROM memory_confirmations WHERE signature = ? ORDER BY at DESC", (signature,))
        return [self._cause(r) for r in rows]

    def confirmations(self) -> list[dict[str, Any]]:
        """Every confirmation as an export record, oldest first."""
        rows = self.db.execute("SELECT * FROM memory_confirmations ORDER BY at, triage_id")
        return [{"triage_id": r["triage_id"], "verdict": r["verdict"], "given": r["given"], "by": r["by"],
                 "at": iso(r["at"]), "note": r["note"], "signature": r["signature"],
                 "evidence": json.loads(r["evidence"]), "run": r["run_ref"], "run_dir": r["run_dir"]}
                for r in rows]

    def import_confirmations(self, records: list[dict[str, Any]]) -> tuple[int, int]:
        """Store already-validated records in one transaction: (new, already there)."""
        con = self._tx()
        new = same = 0
        try:
            for r in records:
                cur = con.execute(
                    "INSERT OR IGNORE INTO memory_confirmations (triage_id, verdict, given, by, at, note, signature, "
                    "evidence, run_ref, run_dir) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (r["triage_id"], r["verdict"], r["given"], r["by"], parse_iso(r["at"]), r.get("note"),
                     r.get("signature"), json.dumps(r.get("evidence") or []), r.get("run"), r.get("run_dir")))
                if cur.rowcount == 1:
                    new += 1
                else:
                    same += 1
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        return new, same

    # --- verdict quality ----------------------------------------------------------------

    def verdict_counts(self) -> dict[str, dict[str, Any]]:
        """Per verdict id: how often given, confirmed, corrected, and to what."""
        out: dict[str, dict[str, Any]] = {}

        def row(vid: str) -> dict[str, Any]:
            return out.setdefault(vid, {"given": 0, "confirmed": 0, "corrected": 0, "corrected_to": {}})

        for r in self.db.execute("SELECT verdict, COUNT(*) AS n FROM memory_triages GROUP BY verdict"):
            row(r["verdict"])["given"] = r["n"]
        for r in self.db.execute("SELECT given, verdict, COUNT(*) AS n FROM memory_confirmations GROUP BY given, verdict"):
            entry = row(r["given"])
            if r["given"] == r["verdict"]:
                entry["confirmed"] += r["n"]
            else:
                entry["corrected"] += r["n"]
                entry["corrected_to"][r["verdict"]] = entry["corrected_to"].get(r["verdict"], 0) + r["n"]
        return dict(sorted(out.items()))
