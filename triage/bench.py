"""`triage bench`: how often the triage names the right root cause on the testbed's scenarios.

Each scenario is a run the miniature slime (triage.testbed) made by planting one fault, or
a healthy control. The bench generates them (cached by content hash), triages each as a
user would (`triage run`, no findings cache), and writes:

    results.json   {"scenarios": [{"name", "fault", "expected", "got", "correct", "probes_run",
                                   "wall_s", "generate_s", "confidence", "path", "not_checked",
                                   "miss_reason"}],
                    "summary": {"scenarios", "correct", "top1_accuracy", "healthy_controls",
                                "healthy_correct", "healthy_false_positives", "inconclusive",
                                "median_wall_s", "p90_wall_s", "total_s"}}
    results.md     the same as a Markdown table, misses listed with what the triage said instead

It is a measurement: it exits 0 whatever the accuracy (2 on bad usage).
"""

from __future__ import annotations

import fnmatch
import json
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from triage.catalog import HEALTHY, INCONCLUSIVE
from triage.errors import BadInput
from triage.finding import UNAVAILABLE
from triage.graph import DecisionGraph, load_graph


@dataclass
class ScenarioResult:
    name: str
    fault: str | None
    expected: str
    got: str
    correct: bool
    probes_run: int
    wall_s: float
    generate_s: float
    confidence: float = 0.0
    path: list[str] = field(default_factory=list)  # "probe=outcome" along the walk
    not_checked: list[str] = field(default_factory=list)
    miss_reason: str | None = None


def _miss_reason(graph: DecisionGraph, expected: str, got: str, report: Any) -> str | None:
    if expected == got:
        return None
    if expected not in graph.reachable_verdicts():
        return f"no playbook path reaches {expected} yet"
    unchecked = [f"{n.probe} ({n.reason})" for n in report.not_checked]
    if got == INCONCLUSIVE and unchecked:
        return "could not check: " + "; ".join(unchecked)
    return f"said {got} instead" + (f"; could not check: {'; '.join(unchecked)}" if unchecked else "")


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return round(ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo), 3)


def summarise(results: list[ScenarioResult], total_s: float) -> dict[str, Any]:
    healthy = [r for r in results if r.expected == HEALTHY]
    walls = [r.wall_s for r in results]
    correct = sum(r.correct for r in results)
    return {
        "scenarios": len(results),
        "correct": correct,
        "top1_accuracy": round(correct / len(results), 4) if results else 0.0,
        "healthy_controls": len(healthy),
        "healthy_correct": sum(r.correct for r in healthy),
        "healthy_false_positives": sum(1 for r in healthy if r.got not in (HEALTHY, INCONCLUSIVE)),
        "inconclusive": sum(1 for r in results if r.got == INCONCLUSIVE),
        "median_wall_s": round(statistics.median(walls), 3) if walls else 0.0,
        "p90_wall_s": _percentile(walls, 0.9),
        "total_s": round(total_s, 1),
    }


def render_markdown(results: list[ScenarioResult], summary: dict[str, Any]) -> str:
    lines = [
        "# Triage accuracy on the testbed",
        "",
        f"Top-1 accuracy **{summary['top1_accuracy']:.1%}** ({summary['correct']}/{summary['scenarios']}); "
        f"healthy controls {summary['healthy_correct']}/{summary['healthy_controls']} "
        f"({summary['healthy_false_positives']} blamed); inconclusive {summary['inconclusive']}; "
        f"triage wall median {summary['median_wall_s']:.2f} s, p90 {summary['p90_wall_s']:.2f} s.",
        "",
        "| scenario | expected | got | ok | probes | triage s | generate s |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(f"| {r.name} | `{r.expected}` | `{r.got}` | {'yes' if r.correct else '**no**'} | "
                     f"{r.probes_run} | {r.wall_s:.2f} | {r.generate_s:.1f} |")
    misses = [r for r in results if not r.correct]
    if misses:
        lines += ["", "## Misses", ""]
        for r in misses:
            lines.append(f"- **{r.name}**: expected `{r.expected}`, {r.miss_reason}. Path: {' → '.join(r.path)}")
    return "\n".join(lines) + "\n"


def select(patterns: list[str] | None) -> list[str]:
    from triage.testbed.scenarios import SCENARIOS

    names = list(SCENARIOS)
    if not patterns:
        return names
    chosen = [n for n in names if any(fnmatch.fnmatchcase(n, p) or p == n for p in patterns)]
    if not chosen:
        raise BadInput(f"no scenario matches {', '.join(patterns)}; scenarios: {', '.join(names)}")
    return chosen


def run_bench(out: Path, patterns: list[str] | None = None, progress: bool = True) -> dict[str, Any]:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from triage.api import triage_run
    from triage.executor import LocalExecutor
    from triage.run import open_run
    from triage.testbed.scenarios import SCENARIOS, generate, job_environment

    names = select(patterns)
    graph = load_graph()
    out.mkdir(parents=True, exist_ok=True)
    results: list[ScenarioResult] = []
    started = time.perf_counter()
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeElapsedColumn(), disable=not progress, transient=False) as bar:
        task = bar.add_task("bench", total=len(names))
        for name in names:
            scenario = SCENARIOS[name]
            bar.update(task, description=f"generating {name}")
            t0 = time.perf_counter()
            run_dir = generate(name)
            gen_s = time.perf_counter() - t0
            bar.update(task, description=f"triaging {name}")
            t0 = time.perf_counter()
            run = open_run(str(run_dir))
            # the user generated these runs: the replays may relaunch their jobs, in the scenario's environment
            run.relaunch_allowed, run.relaunch_env = True, job_environment(name)
            report = triage_run(run, graph, LocalExecutor())
            wall = time.perf_counter() - t0
            got = report.root_cause.id
            results.append(ScenarioResult(
                name=name, fault=scenario.fault, expected=scenario.expected, got=got,
                correct=got == scenario.expected,
                probes_run=sum(1 for s in report.path if s.outcome != UNAVAILABLE),
                wall_s=round(wall, 3), generate_s=round(gen_s, 2), confidence=report.root_cause.confidence,
                path=[f"{s.probe}={s.outcome}" for s in report.path],
                not_checked=[f"{n.probe}: {n.reason}" for n in report.not_checked if n],
                miss_reason=_miss_reason(graph, scenario.expected, got, report),
            ))
            bar.advance(task)
    summary = summarise(results, time.perf_counter() - started)
    doc = {"scenarios": [asdict(r) for r in results], "summary": summary}
    (out / "results.json").write_text(json.dumps(doc, indent=2) + "\n")
    (out / "results.md").write_text(render_markdown(results, summary))
    return doc


def add_bench_parser(sub) -> None:
    p = sub.add_parser("bench", help="measure triage accuracy on the testbed's planted-fault scenarios")
    p.add_argument("--out", type=Path, default=None, help="where results.json and results.md go (default: bench-out)")
    p.add_argument("--only", action="append", metavar="PATTERN",
                   help="scenarios to run (glob on the name, repeatable), e.g. 'healthy.*'")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--list", action="store_true", help="list the scenarios and exit")
    p.add_argument("--field", nargs="?", const="", default=None, metavar="CORPUS",
                   help="score the field corpus of real public cases instead (default: field/); "
                        "writes field-results.json/.md only when --out is given")
    p.set_defaults(func=_cmd_bench)


def _cmd_bench(ns) -> int:
    import sys

    if ns.field is not None:
        from triage.field_bench import DEFAULT_CORPUS, cmd_field

        return cmd_field(Path(ns.field) if ns.field else DEFAULT_CORPUS, ns.out)
    ns.out = ns.out or Path("bench-out")
    if ns.list:
        from triage.testbed.scenarios import SCENARIOS

        for s in SCENARIOS.values():
            sys.stdout.write(f"{s.name:40s} {s.expected:32s} {s.description}\n")
        return 0
    doc = run_bench(ns.out, ns.only, progress=not ns.no_progress and sys.stderr.isatty())
    s = doc["summary"]
    sys.stdout.write(
        f"top-1 accuracy {s['top1_accuracy']:.1%} ({s['correct']}/{s['scenarios']}), healthy controls "
        f"{s['healthy_correct']}/{s['healthy_controls']} ({s['healthy_false_positives']} false positives), "
        f"inconclusive {s['inconclusive']}, triage median {s['median_wall_s']:.2f} s, p90 {s['p90_wall_s']:.2f} s, "
        f"total {s['total_s']:.0f} s\n"
    )
    for r in doc["scenarios"]:
        if not r["correct"]:
            sys.stdout.write(f"  miss {r['name']}: expected {r['expected']}, {r['miss_reason']}\n")
    sys.stdout.write(f"wrote {ns.out / 'results.json'} and {ns.out / 'results.md'}\n")
    return 0
