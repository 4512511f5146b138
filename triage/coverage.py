"""What a triage read, what it could not understand, and which checks ran.

A verdict is only as good as what it stood on, so every report carries this section:

- `read`: the artifacts read, per kind, and which format read each log
  (`{"logs": [{"file": "job.log", "format": "slime_dict", "records": 120}], ...}`);
- `metrics`: records per canonical metric and where they came from;
- `not_understood`: what looked like evidence but was not read (metric-like lines no
  grammar recognised, with samples; lines over the length cap; trainer_state copies
  skipped; files skipped by discovery);
- `checks`: every probe the walk ran, with `ran` / `could not run`, and the health checks
  with their record counts when the `healthy` gate ran;
- `versions`: the package versions read, or a note that none was found.

`confidence_factor` scales the verdict's confidence down for each thing that looked like
evidence but was not understood.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from triage.errors import TriageError
from triage.finding import ERROR, UNAVAILABLE, Finding

MAX_SAMPLES = 3
UNREAD_PENALTY = 0.9  # the same step as one probe that could not run (report.UNCHECKED_STEP_PENALTY)
MAX_UNREAD_PENALTIES = 3


class Coverage(BaseModel):
    read: dict[str, Any] = Field(default_factory=dict)
    metrics: dict[str, dict[str, Any]] = Field(default_factory=dict)
    not_understood: list[str] = Field(default_factory=list)
    checks: list[dict[str, Any]] = Field(default_factory=list)
    versions: dict[str, str] = Field(default_factory=dict)
    versions_note: str | None = None

    @property
    def checks_ran(self) -> int:
        return sum(1 for c in self.checks if c["status"] == "ran")


def _relative(path: Any, root: str) -> str:
    text = str(path)
    prefix = root.rstrip("/") + "/"
    return text[len(prefix):] if text.startswith(prefix) else text


def _logs(run: Any, root: str) -> tuple[list[dict[str, Any]], list[str]]:
    log = run.log
    parsed_by = getattr(log, "parsed_by", {}) or {}
    entries = []
    pasted = getattr(getattr(run, "metrics", None), "pasted", None) or {}
    for f in run.artifacts.logs:
        grammars = parsed_by.get(str(f)) or parsed_by.get(f.name) or parsed_by.get(_relative(f, root)) or {}
        if not grammars and pasted.get(str(f)):
            # a table or a typed summary of a paste is read beside the scan (triage/formats/pasted_table.py)
            grammars = {"pasted_table": pasted[str(f)]}
        fmt = ", ".join(sorted(grammars)) or ("no metric records" if parsed_by else log.framework)
        entries.append({"file": _relative(f, root), "format": fmt, "records": sum(grammars.values())})
    gaps = []
    unparsed = getattr(log, "unparsed_metric_lines", 0)
    if unparsed:
        prefix = root.rstrip("/") + "/"
        samples = "; ".join(f"`{s.replace(prefix, '')[:200]}`" for s in getattr(log, "unparsed_samples", [])[:MAX_SAMPLES])
        gaps.append(f"{unparsed} line{'s' if unparsed != 1 else ''} look like metric records but no parser "
                    f"recognised them" + (f": {samples}" if samples else ""))
    if getattr(log, "skipped_long_lines", 0):
        gaps.append(f"{log.skipped_long_lines} line(s) over the per-line length cap were counted, not parsed")
    if log.truncated_tail:
        gaps.append("the log ends mid-line: its last line was read as far as it goes")
    return entries, gaps


def build_coverage(run: Any, findings: list[Finding]) -> Coverage:
    """The coverage section of a report; never raises for anything the run holds."""
    cov = Coverage()
    root = str(run.root)
    kinds = {k: v for k, v in run.artifacts.kinds().items() if v}
    cov.read["artifacts"] = kinds
    if run.artifacts.command_line is not None:
        cov.read["command_line"] = _relative(run.artifacts.command_line, root)
    try:
        if run.artifacts.logs:
            cov.read["logs"], gaps = _logs(run, root)
            cov.not_understood.extend(gaps)
            cov.read["log_lines"] = run.log.lines
        state = run.trainer_state
        if state is not None:
            cov.read["trainer_state"] = {"files": len(state.paths), "rows": len(state.log_history)}
            cov.not_understood.extend(f"trainer_state copy skipped: {u}" for u in state.unreadable)
        records = getattr(run.metrics, "records", None)
        cov.metrics = records() if callable(records) else {n: {"records": len(run.metrics.get(n))}
                                                          for n in run.metrics.available()}
        cov.read["arguments"] = len(run.args) if run.args else 0
    except TriageError as exc:  # a bad artifact stops the walk before this; say so if it did not
        cov.not_understood.append(f"could not read: {exc}")
    cov.not_understood.extend(getattr(run.artifacts, "skipped", []) or [])
    if not cov.metrics:
        cov.not_understood.append("no training metric was read (no recognised metric lines, trainer_state.json, "
                                  "TensorBoard or W&B records)")
    try:
        versions = run.versions
        cov.versions = versions.as_dict() if hasattr(versions, "as_dict") else {}
        cov.versions_note = versions.note() if hasattr(versions, "note") else None
    except TriageError as exc:
        cov.versions_note = f"versions could not be read: {exc}"
    if not cov.versions and not cov.versions_note:
        cov.versions_note = "no version information: no pip / conda list, version banner or image tag was found"
    for f in findings:
        status = "could not run" if f.outcome == UNAVAILABLE else "failed" if f.outcome == ERROR else "ran"
        entry: dict[str, Any] = {"probe": f.probe, "node": f.node, "status": status, "outcome": f.outcome}
        if f.probe == "health_checks" and isinstance(f.evidence.get("checks"), list):
            entry["health_checks"] = f.evidence["checks"]
        cov.checks.append(entry)
    return cov


def confidence_factor(cov: Coverage) -> float:
    """Each thing that looked like evidence but was not understood lowers the confidence (at most three).

    Probes that could not run are already counted by the walk (`report.UNCHECKED_STEP_PENALTY`).
    """
    return round(UNREAD_PENALTY ** min(MAX_UNREAD_PENALTIES, len(cov.not_understood)), 3)
