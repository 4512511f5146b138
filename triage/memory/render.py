"""The report's "Changed since the last good run" section and "seen before" line, as plain lines."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from triage.report import Report

TITLE = "Changed since the last good run"


def baseline_line(report: Report) -> str | None:
    c = report.changes
    if c is None:
        return None
    return f"baseline {c.baseline_ref} ({c.baseline_status}; found in the {c.found_by})" if c.found_by != "given" \
        else f"baseline {c.baseline_ref} (given)"


def change_lines(report: Report, limit: int = 12) -> list[str]:
    c = report.changes
    if c is None:
        return []
    lines = c.lines(limit)
    return lines or ["no argument, version or path changed, no metric left the baseline's band"]


def history_lines(report: Report) -> list[str]:
    h = report.history
    if h is None:
        return []
    out = []
    line = h.line()
    if line:
        out.append(line)
    if h.triage_id:
        out.append(f"triage id {h.triage_id}: record the real cause with "
                   f"`triage confirm {h.triage_id} {report.root_cause.id if not report.inconclusive else 'VERDICT_ID'}`")
    return out
