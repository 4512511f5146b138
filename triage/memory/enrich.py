"""What the team's memory adds to a report: the changes since the last good run, and history.

`enrich(report, run)` runs after the walk, in every front end (the CLI, the service's
workers, the API): it finds the baseline (`--baseline`, else `baseline.find_baseline`),
lists what changed (`diff.compare`), looks up causes confirmed for the same error
signature, raises the candidates the changes and the confirmed cause bear on
(`triage/differential.py:apply_boost`), and records the triage's verdict and signature in
the store. It never fails a triage: a store that cannot be read or written leaves a note.

Where the store and the runs roots are: `configure(...)` (the CLI and the service call
it), else `$TRIAGE_DB` and `$TRIAGE_RUNS_ROOT`. `TRIAGE_MEMORY=off` turns it off.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from triage.errors import BadInput
from triage.memory.models import ChangeSummary, History

if TYPE_CHECKING:
    from triage.report import Report
    from triage.run.run import Run

log = structlog.get_logger("triage.memory")

DB_ENV = "TRIAGE_MEMORY_DB"  # set by the service for its worker processes (they do not share its memory)
RUNS_ENV = "TRIAGE_MEMORY_RUNS_ROOTS"
CONFIRMED_WEIGHT, CHANGE_WEIGHT = 2.0, 1.0
CANDIDATES_SENTENCE = " Candidates, most supported first: "  # as triage/report.py words it

_config: dict[str, Any] = {}


def configure(*, db: str | Path | None = None, runs_roots: list[Path] | None = None, baseline: str | None = None,
              export_env: bool = False) -> None:
    """Where `enrich` finds the store and the runs; `baseline` pins the next triages' baseline."""
    for name in _config.get("exported", ()):  # what an earlier call exported is withdrawn
        os.environ.pop(name, None)
    _config.clear()
    _config.update(db=db, runs_roots=runs_roots, baseline=baseline, exported=[])
    if export_env:
        if db:
            os.environ[DB_ENV] = str(db)
            _config["exported"].append(DB_ENV)
        if runs_roots:
            os.environ[RUNS_ENV] = os.pathsep.join(str(r) for r in runs_roots)
            _config["exported"].append(RUNS_ENV)


def _db() -> str | Path:
    from triage.cache import default_db_path

    return _config.get("db") or os.environ.get(DB_ENV) or default_db_path()


def _runs_roots() -> list[Path]:
    roots = _config.get("runs_roots")
    if roots:
        return [Path(r) for r in roots]
    env = os.environ.get(RUNS_ENV) or os.environ.get("TRIAGE_RUNS_ROOT")
    return [Path(p).expanduser() for p in env.split(os.pathsep) if p] if env else []


def _service_triage_id() -> str | None:
    tid = structlog.contextvars.get_contextvars().get("triage_id")
    return tid if isinstance(tid, str) and tid else None


def changes_for(run: Run, report: Report | None, store: Any) -> ChangeSummary | None:
    from triage.memory.baseline import find_baseline
    from triage.memory.diff import compare, open_baseline

    given = _config.get("baseline")
    if given:
        baseline = open_baseline(given)
        if baseline.root.resolve() == run.root.resolve():
            raise BadInput(f"baseline {given} is the run itself")
        return compare(run, baseline, found_by="given", status="given with --baseline")
    if report is not None and report.root_cause.id == "healthy":
        return None  # nothing to explain
    found = find_baseline(run, _runs_roots(), store)
    if found is None:
        return None
    return compare(run, found.run, found_by=found.found_by, status=found.status)


def _boosts(changes: ChangeSummary | None, history: History) -> dict[str, Any]:
    from triage.differential import Boost

    out: dict[str, Boost] = {}
    if changes is not None:
        for vid, items in changes.bears_on().items():
            out[vid] = Boost(weight=CHANGE_WEIGHT,
                             supports=[f"changed since the last good run: {c.line()}" for c in items])
    if history.confirmed:
        c = history.confirmed[0]
        line = history.line() or f"confirmed as {c.verdict}"
        prior = out.get(c.verdict)
        out[c.verdict] = Boost(weight=CONFIRMED_WEIGHT, supports=[line, *(prior.supports if prior else [])])
    return out


def _titles() -> dict[str, str]:
    from triage.catalog import load_catalog
    from triage.graph import DEFAULT_DIR

    return {vid: v.title for vid, v in load_catalog(DEFAULT_DIR / "verdicts.yaml").items()}


def enrich(report: Report, run: Run) -> Report:
    if os.environ.get("TRIAGE_MEMORY", "").lower() in ("off", "0", "no"):
        return report
    from triage.differential import apply_boost
    from triage.memory.identity import error_signature, job_identity
    from triage.memory.store import MemoryStore

    try:
        store = MemoryStore.open(_db())
    except (sqlite3.Error, OSError) as exc:
        return report.model_copy(update={"run": report.run.model_copy(update={
            "notes": [*report.run.notes, f"the team's memory was not consulted: {exc}"]})})
    try:
        try:
            changes = changes_for(run, report, store)
        except BadInput:
            raise
        except Exception as exc:  # noqa: BLE001 - a baseline that cannot be compared never fails the triage
            log.warning("baseline_not_compared", error=repr(exc))
            changes = None
        signature = None if report.root_cause.id == "healthy" else error_signature(run, report)
        history = History(triage_id=_service_triage_id(), signature=signature)
        if signature:
            history.confirmed = store.confirmed_for(signature)
            history.seen_runs = store.seen_runs(signature, str(run.root))
        update: dict[str, Any] = {"changes": changes}
        if report.inconclusive:
            boost = _boosts(changes, history)
            if boost:
                ranked = apply_boost(report.candidates, boost, _titles(), {r.verdict for r in report.ruled_out})
                update["candidates"] = ranked
                head = report.root_cause.explanation.split(CANDIDATES_SENTENCE, 1)[0]
                if ranked:
                    head += CANDIDATES_SENTENCE + ", ".join(c.id for c in ranked) + "."
                update["root_cause"] = report.root_cause.model_copy(update={"explanation": head})
        elif changes is not None and changes.bears_on().get(report.root_cause.id):
            items = changes.bears_on()[report.root_cause.id]
            update["root_cause"] = report.root_cause.model_copy(update={"explanation": (
                report.root_cause.explanation + " Changed since the last good run: "
                + "; ".join(c.line() for c in items) + ".")})
        history.triage_id = store.record_triage(
            run_ref=run.ref, run_dir=str(run.root), identity=job_identity(run), verdict=report.root_cause.id,
            signature=signature, evidence=report.key_evidence(3), source="service" if history.triage_id else "cli",
            triage_id=history.triage_id)
        update["history"] = history
        return report.model_copy(update=update)
    except sqlite3.Error as exc:
        log.warning("memory_unavailable", error=str(exc))
        return report.model_copy(update={"run": report.run.model_copy(update={
            "notes": [*report.run.notes, f"the team's memory was not consulted: {exc}"]})})
    finally:
        store.close()
