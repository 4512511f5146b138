"""The report as Markdown (paste into an issue or an incident doc)."""

from __future__ import annotations

from triage.finding import ERROR, UNAVAILABLE
from triage.render.coverage import candidate_lines, coverage_lines
from triage.render.evidence import evidence_lines
from triage.report import Report


def render_markdown(report: Report) -> str:
    rc = report.root_cause
    out = [
        f"# Triage of `{report.run.ref}`",
        "",
        f"**Root cause:** `{rc.id}` — {rc.title} (confidence {rc.confidence:.0%})",
        "",
        rc.explanation,
        "",
    ]
    if report.run.notes:
        out += [f"> {note}" for note in report.run.notes] + [""]
    out += ["## Remedy", "", rc.remedy, ""]
    if rc.flags:
        out += ["Flags: " + ", ".join(f"`{f}`" for f in rc.flags), ""]
    from triage.memory.render import TITLE, baseline_line, change_lines, history_lines

    if report.changes is not None:
        out += [f"## {TITLE}", "", f"_{baseline_line(report)}_", "", *[f"- {line}" for line in change_lines(report)], ""]
    out += ["## How the triage got there", ""]
    for i, step in enumerate(report.path, 1):
        mark = {UNAVAILABLE: "not checked", ERROR: "error"}.get(step.outcome, step.outcome)
        out.append(f"{i}. **{step.ask}** (`{step.probe}` → `{mark}`): {step.summary}")
        for line in evidence_lines(step.evidence, root=report.run.path):
            out.append(f"    - {line}")
        if step.missing and step.missing.command:
            out.append(f"    - to check it: {step.missing.command}")
    out.append("")
    if report.ruled_out:
        out += ["## Ruled out", ""]
        out += [f"- `{r.verdict}` ({r.title}): {r.because}" for r in report.ruled_out]
        out.append("")
    if report.not_checked:
        out += ["## Not checked", ""]
        for n in report.not_checked:
            tail = f" — {n.command}" if n.command else ""
            out.append(f"- `{n.probe}`: {n.reason}{tail}")
        out.append("")
    if report.candidates:
        out += ["## Candidates", "", *candidate_lines(report), ""]
    cov = coverage_lines(report)
    if cov:
        out += ["## Coverage", "", *[f"- {line}" for line in cov], ""]
    if history_lines(report):
        out += ["## Team memory", "", *[f"- {line}" for line in history_lines(report)], ""]
    art = ", ".join(f"{k}: {v}" for k, v in report.run.artifacts.items() if v)
    out += [f"_Run `{report.run.path}` ({report.run.framework}; {art}); triaged in {report.duration_s:.2f} s._", ""]
    return "\n".join(out)
