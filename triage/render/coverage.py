"""Coverage and the differential as plain lines, shared by the terminal, Markdown and Slack renderings."""

from __future__ import annotations

from triage.report import Report

MAX_METRICS = 8


def coverage_lines(report: Report) -> list[str]:
    """What was read, what was not understood, which checks ran: one line each."""
    cov = report.coverage
    out = []
    arts = cov.read.get("artifacts", {})
    if arts:
        out.append("read: " + ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in arts.items()))
    for log in cov.read.get("logs", [])[:6]:
        out.append(f"log {log['file']}: {log['format']} ({log['records']} metric records)")
    if cov.metrics:
        shown = sorted(cov.metrics.items(), key=lambda kv: -int(kv[1].get("records", 0)))[:MAX_METRICS]
        more = len(cov.metrics) - len(shown)
        out.append("metrics: " + ", ".join(f"{name} ×{m.get('records', 0)}" for name, m in shown)
                   + (f" (+{more} more)" if more > 0 else ""))
    out.extend(f"not understood: {gap}" for gap in cov.not_understood)
    ran = cov.checks_ran
    if cov.checks:
        skipped = [c["probe"] for c in cov.checks if c["status"] != "ran"]
        out.append(f"checks: {ran} of {len(cov.checks)} ran" + (f"; could not run: {', '.join(skipped)}" if skipped else ""))
    for c in cov.checks:
        for h in c.get("health_checks", []):
            state = "passed" if h.get("passed") else "failed" if h.get("available") else "could not run"
            needed = f" of {h['needed']} needed" if h.get("needed") else ""
            out.append(f"health check {h['name']}: {state} ({h.get('records', 0)} records{needed}) — {h.get('detail', '')}")
    if cov.versions:
        out.append("versions: " + ", ".join(f"{k} {v}" for k, v in list(cov.versions.items())[:8]))
    elif cov.versions_note:
        out.append(cov.versions_note)
    return out


def candidate_lines(report: Report) -> list[str]:
    """The ranked differential, one line per candidate, best first."""
    out = []
    root = report.run.path.rstrip("/") + "/"
    for i, c in enumerate(report.candidates, 1):
        why = f" — supported by: {c.supports[0].replace(root, '')}" if c.supports else ""
        step = f" — to decide: {c.next_step}" if c.next_step else ""
        out.append(f"{i}. {c.id} ({c.title}; {c.score:.0%} of its evidence seen){why}{step}")
    return out
