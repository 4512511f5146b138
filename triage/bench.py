"""`triage bench`: how often the triage names the right root cause on the testbed's scenarios.

Each scenario is a run the miniature slime (triage.testbed) made by planting one fault, or
a healthy control. The bench generates them (cached by content hash) and triages each as
a user would (`triage run`, no findings cache), in one or both modes:

- `full`: the run as the testbed left it;
- `real`: a copy of the run without what only the testbed writes — the engine's weights
  dump and `.testbed/` (`triage.testbed.scenarios.TESTBED_ONLY`) — as a real slime job
  leaves it: slime never dumps the engine's weights. The copy lives in a temporary folder
  under a neutral name and is deleted after its triage; the cache is never touched.

A verdict is *wrong* when it names a fault that was not planted, calls a faulty run
`healthy`, or names a fault on a healthy control. `inconclusive` is never wrong, and in
`real` mode it is the only acceptable alternative to the right verdict. The healthy
controls that count are the long ones: jobs run long enough for every health check
(`healthy` rests on positive evidence). A short healthy job (two or three rollouts) expects
`inconclusive`: its health checks cannot run, and it must never be blamed.

    results.json   {"modes": ["full", "real"],
                    "scenarios": [{"name", "mode", "fault", "expected", "got", "correct", "wrong",
                                   "probes_run", "wall_s", "generate_s", "confidence", "path",
                                   "not_checked", "health_checks", "health_checks_source",
                                   "every_check_ran", "stripped", "miss_reason"}],
                    "summary": {<mode>: {"scenarios", "correct", "top1_accuracy", "wrong_verdicts",
                                         "wrong", "inconclusive", "refused", "faults", "faults_correct",
                                         "healthy_on_fault", "healthy_controls", "healthy_correct",
                                         "healthy_every_check_ran", "healthy_fully_checked",
                                         "healthy_false_positives", "short_controls",
                                         "short_controls_inconclusive", "median_wall_s", "p90_wall_s",
                                         "triage_s"}},
                    "generate_s", "total_s"}
    results.md     both modes side by side, one row per scenario, misses listed with what the
                   triage said instead

`scenarios` holds one row per scenario and mode. `health_checks` (healthy jobs only) lists
each health check of the `healthy` gate with whether it could run: from the walk when the
gate ran in it (`health_checks_source: "walk"`), otherwise asked of the run after the walk
(`"direct"`). `every_check_ran` is true when each of them ran.

It is a measurement: it exits 0 whatever the accuracy (2 on bad usage).
"""

from __future__ import annotations

import fnmatch
import json
import shutil
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from triage.catalog import HEALTHY, INCONCLUSIVE
from triage.errors import BadInput, TriageError
from triage.finding import UNAVAILABLE
from triage.graph import DecisionGraph, load_graph

MODES = ("full", "real")
REFUSED = "error"  # `got` when the triage refused the run (a one-line error, exit 2 for a user)
HEALTH_GATE = "health_checks"  # the probe whose findings list the health checks of the `healthy` verdict


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
    mode: str = "full"
    wrong: bool = False
    confidence: float = 0.0
    path: list[str] = field(default_factory=list)  # "probe=outcome" along the walk
    not_checked: list[str] = field(default_factory=list)
    # healthy jobs: each check of the `healthy` gate {name, available, passed, records, needed, detail}
    health_checks: list[dict[str, Any]] | None = None
    health_checks_source: str | None = None  # "walk" | "direct"
    every_check_ran: bool | None = None
    stripped: list[str] = field(default_factory=list)  # what the real mode left out of the copy
    miss_reason: str | None = None


def is_wrong(fault: str | None, expected: str, got: str) -> bool:
    """A verdict that blames the wrong thing: another fault, `healthy` on a fault, a fault on a healthy job."""
    if got in (expected, INCONCLUSIVE, REFUSED):
        return False
    if fault is None:
        return got != HEALTHY  # a healthy job (long or short) given a fault verdict
    return True  # `healthy` on a fault, or a fault that was not planted


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


def is_long_control(r: ScenarioResult) -> bool:
    return r.fault is None and r.expected == HEALTHY


def is_short_control(r: ScenarioResult) -> bool:
    return r.fault is None and r.expected != HEALTHY


def summarise(results: list[ScenarioResult]) -> dict[str, Any]:
    """The figures of one mode's results."""
    long = [r for r in results if is_long_control(r)]
    short = [r for r in results if is_short_control(r)]
    faults = [r for r in results if r.fault is not None]
    walls = [r.wall_s for r in results]
    correct = sum(r.correct for r in results)
    wrong = [r.name for r in results if r.wrong]
    return {
        "scenarios": len(results),
        "correct": correct,
        "top1_accuracy": round(correct / len(results), 4) if results else 0.0,
        "wrong_verdicts": len(wrong),
        "wrong": wrong,
        "inconclusive": sum(1 for r in results if r.got == INCONCLUSIVE),
        "refused": sum(1 for r in results if r.got == REFUSED),
        "faults": len(faults),
        "faults_correct": sum(r.correct for r in faults),
        "healthy_on_fault": sum(1 for r in faults if r.got == HEALTHY),
        "healthy_controls": len(long),
        "healthy_correct": sum(r.correct for r in long),
        "healthy_every_check_ran": sum(1 for r in long if r.correct and r.every_check_ran),
        "healthy_fully_checked": sum(1 for r in long if r.correct and r.every_check_ran and not r.not_checked),
        "healthy_false_positives": sum(1 for r in long + short if r.wrong),
        "short_controls": len(short),
        "short_controls_inconclusive": sum(1 for r in short if r.got == INCONCLUSIVE),
        "median_wall_s": round(statistics.median(walls), 3) if walls else 0.0,
        "p90_wall_s": _percentile(walls, 0.9),
        "triage_s": round(sum(walls), 1),
    }


# --- the real-artifacts copy -------------------------------------------------------------


def real_artifacts_copy(run_dir: Path, dest: Path) -> list[str]:
    """Copy `run_dir` to `dest` as a real slime job would leave it; the paths left out, relative.

    Left out: `TESTBED_ONLY` (the engine's weights dump, `.testbed/`) and any other folder
    holding the testbed engine's dump manifest. `run_dir` is only read.
    """
    from triage.testbed.scenarios import ENGINE_DUMP_MANIFEST, TESTBED_ONLY

    run_dir = Path(run_dir)
    left_out: list[str] = []

    def ignore(directory: str, names: list[str]) -> set[str]:
        here = Path(directory)
        skipped = set()
        for n in names:
            p = here / n
            rel = p.relative_to(run_dir).as_posix()
            if rel in TESTBED_ONLY or (p.is_dir() and not p.is_symlink() and (p / ENGINE_DUMP_MANIFEST).is_file()):
                skipped.add(n)
                left_out.append(rel)
        return skipped

    shutil.copytree(run_dir, dest, symlinks=True, ignore=ignore)
    return sorted(left_out)


# --- one triage --------------------------------------------------------------------------


def _health_checks(report: Any, run: Any) -> tuple[list[dict[str, Any]] | None, str | None]:
    """The health checks of the `healthy` gate: from the walk when it ran there, else asked of the run."""
    coverage = getattr(report, "coverage", None)
    for check in getattr(coverage, "checks", None) or []:
        if check.get("probe") == HEALTH_GATE and isinstance(check.get("health_checks"), list):
            return list(check["health_checks"]), "walk"
    from triage.probe import registry

    try:
        gate = registry().get(HEALTH_GATE)
    except TriageError:
        return None, None
    if gate is None:
        return None, None
    try:
        obs = gate().examine(run)
    except TriageError as exc:
        return [{"name": HEALTH_GATE, "available": False, "passed": None, "detail": str(exc)}], "direct"
    checks = obs.evidence.get("checks")
    return (list(checks), "direct") if isinstance(checks, list) else (None, None)


def triage_scenario(name: str, mode: str, run_dir: Path, graph: DecisionGraph, generate_s: float) -> ScenarioResult:
    """Triage scenario `name`'s run in `mode`, as `triage run` would."""
    from triage.api import triage_run
    from triage.executor import LocalExecutor
    from triage.run import open_run
    from triage.testbed.scenarios import SCENARIOS, job_environment

    scenario = SCENARIOS[name]
    stripped: list[str] = []
    workdir = None
    if mode == "real":
        workdir = Path(tempfile.mkdtemp(prefix="triage-bench-"))
        copy = workdir / "run"
        stripped = real_artifacts_copy(run_dir, copy)
        run_dir = copy
    base = dict(name=name, mode=mode, fault=scenario.fault, expected=scenario.expected, generate_s=round(generate_s, 2),
                stripped=stripped)
    t0 = time.perf_counter()
    try:
        try:
            run = open_run(str(run_dir))
            # the user generated these runs: the replays may relaunch their jobs, in the scenario's environment
            run.relaunch_allowed, run.relaunch_env = True, job_environment(name)
            report = triage_run(run, graph, LocalExecutor())
        except TriageError as exc:
            return ScenarioResult(**base, got=REFUSED, correct=False, probes_run=0,
                                  wall_s=round(time.perf_counter() - t0, 3),
                                  miss_reason=f"the triage refused the run: {exc}")
        wall = time.perf_counter() - t0
        got = report.root_cause.id
        checks, source = _health_checks(report, run) if scenario.fault is None else (None, None)
        return ScenarioResult(
            **base, got=got, correct=got == scenario.expected, wrong=is_wrong(scenario.fault, scenario.expected, got),
            probes_run=sum(1 for s in report.path if s.outcome != UNAVAILABLE),
            wall_s=round(wall, 3), confidence=report.root_cause.confidence,
            path=[f"{s.probe}={s.outcome}" for s in report.path],
            not_checked=[f"{n.probe}: {n.reason}" for n in report.not_checked if n],
            health_checks=checks, health_checks_source=source,
            every_check_ran=None if checks is None else bool(checks) and all(c.get("available") for c in checks),
            miss_reason=_miss_reason(graph, scenario.expected, got, report),
        )
    finally:
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)


# --- the bench ---------------------------------------------------------------------------


def select(patterns: list[str] | None) -> list[str]:
    from triage.testbed.scenarios import SCENARIOS

    names = list(SCENARIOS)
    if not patterns:
        return names
    chosen = [n for n in names if any(fnmatch.fnmatchcase(n, p) or p == n for p in patterns)]
    if not chosen:
        raise BadInput(f"no scenario matches {', '.join(patterns)}; scenarios: {', '.join(names)}")
    return chosen


def run_bench(out: Path, patterns: list[str] | None = None, progress: bool = True,
              modes: tuple[str, ...] = MODES) -> dict[str, Any]:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from triage.testbed.scenarios import generate

    unknown = [m for m in modes if m not in MODES]
    if unknown or not modes:
        raise BadInput(f"unknown bench mode {', '.join(unknown) or '(none)'}: choose from {', '.join(MODES)}")
    names = select(patterns)
    graph = load_graph()
    out.mkdir(parents=True, exist_ok=True)
    results: list[ScenarioResult] = []
    generate_total = 0.0
    started = time.perf_counter()
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeElapsedColumn(), disable=not progress, transient=False) as bar:
        task = bar.add_task("bench", total=len(names) * len(modes))
        for name in names:
            bar.update(task, description=f"generating {name}")
            t0 = time.perf_counter()
            run_dir = generate(name)
            gen_s = time.perf_counter() - t0
            generate_total += gen_s
            for mode in modes:
                bar.update(task, description=f"triaging {name} ({mode})")
                results.append(triage_scenario(name, mode, run_dir, graph, gen_s))
                bar.advance(task)
    doc = {
        "modes": list(modes),
        "scenarios": [asdict(r) for r in results],
        "summary": {m: summarise([r for r in results if r.mode == m]) for m in modes},
        "generate_s": round(generate_total, 1),
        "total_s": round(time.perf_counter() - started, 1),
    }
    (out / "results.json").write_text(json.dumps(doc, indent=2) + "\n")
    (out / "results.md").write_text(render_markdown(doc))
    return doc


# --- rendering ---------------------------------------------------------------------------


def _ratio(a: int, b: int) -> str:
    return f"{a}/{b}"


def summary_rows(doc: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """(label, one cell per mode) for the printed and Markdown summaries."""
    modes = doc["modes"]
    s = [doc["summary"][m] for m in modes]
    return [
        ("top-1 accuracy", [f"{x['top1_accuracy']:.1%} ({_ratio(x['correct'], x['scenarios'])})" for x in s]),
        ("wrong verdicts", [str(x["wrong_verdicts"]) for x in s]),
        ("inconclusive", [str(x["inconclusive"]) for x in s]),
        ("refused", [str(x["refused"]) for x in s]),
        ("faults named", [_ratio(x["faults_correct"], x["faults"]) for x in s]),
        ("healthy on a fault", [str(x["healthy_on_fault"]) for x in s]),
        ("healthy controls healthy", [_ratio(x["healthy_correct"], x["healthy_controls"]) for x in s]),
        ("  ... every health check ran", [_ratio(x["healthy_every_check_ran"], x["healthy_controls"]) for x in s]),
        ("  ... nothing left unchecked", [_ratio(x["healthy_fully_checked"], x["healthy_controls"]) for x in s]),
        ("short healthy jobs inconclusive", [_ratio(x["short_controls_inconclusive"], x["short_controls"]) for x in s]),
        ("fault verdicts on healthy jobs", [str(x["healthy_false_positives"]) for x in s]),
        ("triage median / p90 s", [f"{x['median_wall_s']:.2f} / {x['p90_wall_s']:.2f}" for x in s]),
        ("triage total s", [f"{x['triage_s']:.1f}" for x in s]),
    ]


def _cell(r: dict[str, Any]) -> str:
    mark = "yes" if r["correct"] else ("**WRONG**" if r["wrong"] else "no")
    checks = ""
    if r.get("every_check_ran") is not None:
        checks = ", every check ran" if r["every_check_ran"] else ", **a check could not run**"
    return f"`{r['got']}` {mark}{checks} ({r['wall_s']:.2f} s)"


def render_markdown(doc: dict[str, Any]) -> str:
    modes = doc["modes"]
    lines = ["# Triage accuracy on the testbed", "",
             "| | " + " | ".join(modes) + " |", "|---|" + "---|" * len(modes)]
    for label, cells in summary_rows(doc):
        lines.append(f"| {label.replace('  ... ', '… ')} | " + " | ".join(cells) + " |")
    lines += ["", f"Generating the runs took {doc['generate_s']:.0f} s (cached runs are reused); the bench "
              f"{doc['total_s']:.0f} s in all."]
    if "real" in modes:
        lines.append("The `real` mode triages a copy of each run without what only the testbed writes "
                     "(the engine's weights dump, `.testbed/`): each must get its verdict or `inconclusive`.")
    by_name: dict[str, dict[str, dict[str, Any]]] = {}
    for r in doc["scenarios"]:
        by_name.setdefault(r["name"], {})[r["mode"]] = r
    lines += ["", "| scenario | expected | " + " | ".join(modes) + " | generate s |",
              "|---|---|" + "---|" * len(modes) + "---|"]
    for name, rows in by_name.items():
        first = next(iter(rows.values()))
        cells = [_cell(rows[m]) if m in rows else "" for m in modes]
        lines.append(f"| {name} | `{first['expected']}` | " + " | ".join(cells) + f" | {first['generate_s']:.1f} |")
    for mode in modes:
        misses = [r for r in doc["scenarios"] if r["mode"] == mode and not r["correct"]]
        if misses:
            lines += ["", f"## Misses ({mode})", ""]
            for r in misses:
                kind = "**wrong verdict**" if r["wrong"] else "miss"
                lines.append(f"- **{r['name']}** ({kind}): expected `{r['expected']}`, {r['miss_reason']}. "
                             f"Path: {' → '.join(r['path'])}")
    return "\n".join(lines) + "\n"


def render_text(doc: dict[str, Any]) -> str:
    modes = doc["modes"]
    rows = summary_rows(doc)
    width = max(len(label) for label, _ in rows) + 2
    cols = [max([len(m)] + [len(cells[i]) for _, cells in rows]) + 2 for i, m in enumerate(modes)]
    out = [" " * width + "".join(m.ljust(c) for m, c in zip(modes, cols)).rstrip()]
    for label, cells in rows:
        out.append(label.ljust(width) + "".join(v.ljust(c) for v, c in zip(cells, cols)).rstrip())
    out.append(f"generation {doc['generate_s']:.0f} s, total {doc['total_s']:.0f} s")
    for r in doc["scenarios"]:
        if not r["correct"]:
            kind = "WRONG" if r["wrong"] else "miss"
            out.append(f"  {kind} {r['name']} ({r['mode']}): expected {r['expected']}, {r['miss_reason']}")
    for r in doc["scenarios"]:
        if r["correct"] and r["fault"] is None and r["expected"] == HEALTHY and not r["every_check_ran"]:
            lacking = [c.get("name") for c in r["health_checks"] or [] if not c.get("available")]
            out.append(f"  unchecked {r['name']} ({r['mode']}): healthy, but could not run "
                       f"{', '.join(map(str, lacking)) or 'the health checks'}")
    return "\n".join(out) + "\n"


def add_bench_parser(sub) -> None:
    p = sub.add_parser("bench", help="measure triage accuracy on the testbed's planted-fault scenarios")
    p.add_argument("--out", type=Path, default=None, help="where results.json and results.md go (default: bench-out)")
    p.add_argument("--only", action="append", metavar="PATTERN",
                   help="scenarios to run (glob on the name, repeatable), e.g. 'healthy.*'")
    p.add_argument("--mode", choices=(*MODES, "both"), default=None,
                   help="full: the runs as generated; real: without the testbed-only artifacts (the engine's "
                        "weights dump, .testbed/); both (default)")
    p.add_argument("--real-artifacts", action="store_true",
                   help="the real mode only (= --mode real): each run as a real slime job leaves it")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--list", action="store_true", help="list the scenarios and exit")
    p.add_argument("--field", nargs="?", const="", default=None, metavar="CORPUS",
                   help="score the field corpus of real public cases instead (default: field/); "
                        "writes field-results.json/.md only when --out is given")
    p.set_defaults(func=_cmd_bench)


def bench_modes(mode: str | None, real_artifacts: bool) -> tuple[str, ...]:
    if real_artifacts:
        if mode not in (None, "real"):
            raise BadInput(f"--real-artifacts is the real mode; it cannot go with --mode {mode}")
        return ("real",)
    return MODES if mode in (None, "both") else (mode,)


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
    modes = bench_modes(ns.mode, ns.real_artifacts)
    doc = run_bench(ns.out, ns.only, progress=not ns.no_progress and sys.stderr.isatty(), modes=modes)
    sys.stdout.write(render_text(doc))
    sys.stdout.write(f"wrote {ns.out / 'results.json'} and {ns.out / 'results.md'}\n")
    return 0
