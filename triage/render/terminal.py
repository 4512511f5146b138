"""The report in a terminal, with rich."""

from __future__ import annotations

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from triage.catalog import HEALTHY, INCONCLUSIVE
from triage.finding import ERROR, UNAVAILABLE
from triage.render.coverage import candidate_lines, coverage_lines
from triage.render.evidence import evidence_lines
from triage.report import Report

MAX_RULED_OUT = 8


def render_terminal(report: Report, console: Console) -> None:
    rc = report.root_cause
    colour = "green" if rc.id == HEALTHY else "yellow" if rc.id == INCONCLUSIVE else "red"
    head = Text.assemble((f"{rc.title}", f"bold {colour}"), ("  ", ""), (rc.id, "bold"),
                         (f"   confidence {rc.confidence:.0%}", "dim"))
    body = [head, Text(""), Text(rc.explanation)]
    for note in report.run.notes:
        body += [Text(""), Text(f"note: {note}", style="italic yellow")]
    body += [Text(""), Text.assemble(("Remedy: ", "bold"), rc.remedy)]
    if rc.flags:
        body.append(Text.assemble(("Flags: ", "bold"), ", ".join(rc.flags)))
    console.print(Panel(Group(*body), title=f"triage · {report.run.ref}", subtitle=f"{report.run.framework}", expand=True))
    from triage.memory.render import TITLE, baseline_line, change_lines, history_lines

    if report.changes is not None:
        console.print(Text.assemble((f"{TITLE}: ", "bold"), (baseline_line(report) or "", "dim")))
        for line in change_lines(report):
            console.print(Text(f"  {line}"))

    table = Table(title="How the triage got there", show_lines=True, expand=True)
    table.add_column("#", justify="right", width=3)
    table.add_column("question (probe)", ratio=2)
    table.add_column("outcome", min_width=14, overflow="fold")
    table.add_column("finding and evidence", ratio=5)
    for i, step in enumerate(report.path, 1):
        style = "yellow" if step.outcome == UNAVAILABLE else "red" if step.outcome == ERROR else "cyan"
        detail = Text(step.summary.replace(report.run.path.rstrip("/") + "/", ""))
        for line in evidence_lines(step.evidence, limit=6, root=report.run.path):
            detail.append("\n  " + line, style="dim")
        if step.missing and step.missing.command:
            detail.append(f"\n  to check it: {step.missing.command}", style="yellow")
        outcome = Text(step.outcome, style=style)
        if step.cached:
            outcome.append("\n(cached)", style="dim")
        table.add_row(str(i), Text.assemble(step.ask, ("\n" + step.probe, "dim")), outcome, detail)
    console.print(table)

    if report.ruled_out:
        ruled = Text("Ruled out: ", style="bold")
        shown = list(reversed(report.ruled_out))[:MAX_RULED_OUT]  # the most specific exclusions come last in the walk
        ruled.append(", ".join(r.verdict for r in shown))
        if len(report.ruled_out) > MAX_RULED_OUT:
            ruled.append(f" (+{len(report.ruled_out) - MAX_RULED_OUT} more in --json)")
        console.print(ruled)
    if report.not_checked:
        console.print(Text("Not checked:", style="bold yellow"))
        for n in report.not_checked:
            tail = f" — {n.command}" if n.command else ""
            console.print(Text(f"  {n.probe}: {n.reason}{tail}"))
    if report.candidates:
        supported = any(c.score > 0 or c.supports for c in report.candidates)
        console.print(Text("Candidates (most supported first):" if supported else
                           "Candidates (nothing observed points at one; the checks that could not run decide):",
                           style="bold yellow"))
        for line in candidate_lines(report):
            console.print(Text(f"  {line}"))
    for line in history_lines(report):
        console.print(Text(line, style="bold" if line.startswith("seen before") else "dim"))
    lines = coverage_lines(report)
    if lines:
        console.print(Text("Coverage:", style="bold"))
        for line in lines:
            console.print(Text(f"  {line}", style="dim"))
