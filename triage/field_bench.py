"""`triage bench --field`: how often the triage names the right root cause on real public cases.

The field corpus (`field/`, see its README) holds failures users reported in public issue
threads: `field/<case>/` is what they pasted, verbatim (what the triage reads), and
`field/<case>.yaml` beside it says what the thread established::

    expected: infra.disk_full          # a catalog id
    acceptable: [crash.unrecognized]   # alternatives that also count as right (may be empty)
    framework: verl
    fragment: false                    # optional: the paste was cut
    provenance: {repo, thread, url, date, title, established_by}

Each case is triaged as a user would (`triage run field/<case>`, no findings cache). The
scorer writes, when given a folder:

    field-results.json  {"cases": [{"name", "framework", "expected", "acceptable", "got", "correct",
                                    "healthy_on_fault", "confidence", "path", "not_checked",
                                    "miss_reason", "error", "wall_s", "candidates", "first_candidate"}],
                         "summary": {"cases", "correct", "top1_accuracy", "healthy_on_fault",
                                     "inconclusive", "inconclusive_first_candidate", "by_framework",
                                     "by_expected", "total_s"}}
    field-results.md    the same as Markdown, misses listed with what the triage said and why

It is a measurement: it exits 0 whatever the accuracy (2 on bad usage or a malformed case file).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from triage.catalog import HEALTHY, INCONCLUSIVE
from triage.errors import BadInput, TriageError

DEFAULT_CORPUS = Path(__file__).resolve().parent.parent / "field"
PROVENANCE_KEYS = ("repo", "thread", "url", "date", "title", "established_by")


@dataclass(frozen=True)
class FieldCase:
    name: str
    directory: Path
    expected: str
    acceptable: tuple[str, ...]
    framework: str
    fragment: bool
    provenance: dict[str, Any]


@dataclass
class CaseResult:
    name: str
    framework: str
    expected: str
    acceptable: list[str]
    got: str
    correct: bool
    healthy_on_fault: bool
    confidence: float = 0.0
    path: list[str] = field(default_factory=list)  # "probe=outcome" along the walk
    not_checked: list[str] = field(default_factory=list)
    miss_reason: str | None = None
    error: str | None = None  # the one-line message when the triage refused the case
    wall_s: float = 0.0
    candidates: list[str] = field(default_factory=list)  # an inconclusive report's, best first
    # a miss that is inconclusive, with the expected cause (or an acceptable one) its first candidate and a
    # finding behind it
    first_candidate: bool = False


def _load_case(spec: Path, known_ids: set[str]) -> FieldCase:
    try:
        raw = yaml.safe_load(spec.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise BadInput(f"{spec}: cannot read the case file: {str(exc).splitlines()[0]}") from None
    if not isinstance(raw, dict):
        raise BadInput(f"{spec}: a case file must be a mapping with expected, framework and provenance")
    directory = spec.with_suffix("")
    if not directory.is_dir():
        raise BadInput(f"{spec}: its case folder {directory.name}/ is missing")
    expected = raw.get("expected")
    acceptable = raw.get("acceptable") or []
    if not isinstance(acceptable, list):
        raise BadInput(f"{spec}: 'acceptable' must be a list of catalog ids")
    for verdict in [expected, *acceptable]:
        if verdict not in known_ids:
            raise BadInput(f"{spec}: {verdict!r} is not a catalog id (playbooks/verdicts.yaml)")
    provenance = raw.get("provenance")
    if not isinstance(provenance, dict) or any(not provenance.get(k) for k in PROVENANCE_KEYS):
        raise BadInput(f"{spec}: provenance needs {', '.join(PROVENANCE_KEYS)}")
    if not raw.get("framework"):
        raise BadInput(f"{spec}: 'framework' is missing")
    return FieldCase(name=directory.name, directory=directory, expected=expected, acceptable=tuple(acceptable),
                     framework=str(raw["framework"]), fragment=bool(raw.get("fragment", False)),
                     provenance=provenance)


def load_corpus(corpus: Path, known_ids: set[str]) -> list[FieldCase]:
    if not corpus.is_dir():
        raise BadInput(f"{corpus}: no field corpus there (a folder of <case>/ + <case>.yaml pairs)")
    cases = [_load_case(spec, known_ids) for spec in sorted(corpus.glob("*.yaml"))]
    if not cases:
        raise BadInput(f"{corpus}: the field corpus holds no case (<case>.yaml beside <case>/)")
    return cases


def _miss_reason(reachable: set[str], case: FieldCase, got: str, report: Any) -> str:
    wanted = [case.expected, *case.acceptable]
    unchecked = "; ".join(f"{n.probe} ({n.reason})" for n in report.not_checked)
    said = f"said {got}"
    if not any(v in reachable for v in wanted):
        said += f" (no playbook path reaches {case.expected} yet)"
    return said + (f"; could not check: {unchecked}" if unchecked else "")


def score_case(case: FieldCase, graph: Any, reachable: set[str]) -> CaseResult:
    from triage.api import triage_run
    from triage.executor import LocalExecutor
    from triage.sources import open_any_run

    base = dict(name=case.name, framework=case.framework, expected=case.expected,
                acceptable=list(case.acceptable))
    t0 = time.perf_counter()
    try:
        report = triage_run(open_any_run(str(case.directory)), graph, LocalExecutor())
    except TriageError as exc:
        return CaseResult(**base, got="error", correct=False, healthy_on_fault=False,
                          miss_reason=f"the triage refused it: {exc}", error=str(exc),
                          wall_s=round(time.perf_counter() - t0, 3))
    got = report.root_cause.id
    wanted = (case.expected, *case.acceptable)
    correct = got in wanted
    first = report.candidates[0] if report.candidates else None
    return CaseResult(
        **base, got=got, correct=correct,
        healthy_on_fault=got == HEALTHY and case.expected != HEALTHY,
        confidence=report.root_cause.confidence,
        path=[f"{s.probe}={s.outcome}" for s in report.path],
        not_checked=[f"{n.probe}: {n.reason}" for n in report.not_checked],
        miss_reason=None if correct else _miss_reason(reachable, case, got, report),
        wall_s=round(time.perf_counter() - t0, 3),
        candidates=[c.id for c in report.candidates],
        first_candidate=(not correct and got == INCONCLUSIVE and first is not None and first.id in wanted
                         and bool(first.supports)),
    )


def _tally(results: list[CaseResult], key: str) -> dict[str, dict[str, int]]:
    total = Counter(getattr(r, key) for r in results)
    right = Counter(getattr(r, key) for r in results if r.correct)
    return {k: {"cases": total[k], "correct": right[k]} for k in sorted(total)}


def summarise(results: list[CaseResult], total_s: float) -> dict[str, Any]:
    correct = sum(r.correct for r in results)
    return {
        "cases": len(results),
        "correct": correct,
        "top1_accuracy": round(correct / len(results), 4) if results else 0.0,
        "healthy_on_fault": sum(r.healthy_on_fault for r in results),
        "inconclusive": sum(1 for r in results if r.got == INCONCLUSIVE),
        "inconclusive_first_candidate": sum(r.first_candidate for r in results),
        "refused": sum(1 for r in results if r.error),
        "by_framework": _tally(results, "framework"),
        "by_expected": _tally(results, "expected"),
        "total_s": round(total_s, 1),
    }


def run_field(corpus: Path = DEFAULT_CORPUS, out: Path | None = None) -> dict[str, Any]:
    from triage.catalog import load_catalog
    from triage.graph import DEFAULT_DIR, load_graph

    cases = load_corpus(corpus, set(load_catalog(DEFAULT_DIR / "verdicts.yaml")))
    graph = load_graph()
    reachable = set(graph.reachable_verdicts())
    started = time.perf_counter()
    results = [score_case(c, graph, reachable) for c in cases]
    doc = {"cases": [asdict(r) for r in results], "summary": summarise(results, time.perf_counter() - started)}
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "field-results.json").write_text(json.dumps(doc, indent=2) + "\n")
        (out / "field-results.md").write_text(render_markdown(doc))
    return doc


def summary_lines(doc: dict[str, Any]) -> list[str]:
    s = doc["summary"]
    lines = [
        f"field corpus: top-1 accuracy {s['top1_accuracy']:.1%} ({s['correct']}/{s['cases']}), "
        f"healthy on a fault {s['healthy_on_fault']}, inconclusive {s['inconclusive']}, "
        f"refused {s['refused']}, total {s['total_s']:.0f} s",
        f"misses that are inconclusive with the expected cause as the first candidate, a finding behind it: "
        f"{s['inconclusive_first_candidate']}",
        "by framework: " + ", ".join(f"{k} {v['correct']}/{v['cases']}" for k, v in s["by_framework"].items()),
        "by expected id: " + ", ".join(f"{k} {v['correct']}/{v['cases']}" for k, v in s["by_expected"].items()),
    ]
    for r in doc["cases"]:
        if not r["correct"]:
            lines.append(f"  miss {r['name']}: expected {r['expected']}, {r['miss_reason']}")
    return lines


def render_markdown(doc: dict[str, Any]) -> str:
    s = doc["summary"]
    lines = [
        "# Triage accuracy on the field corpus",
        "",
        f"Top-1 accuracy **{s['top1_accuracy']:.1%}** ({s['correct']}/{s['cases']}); "
        f"called healthy on a fault: {s['healthy_on_fault']}; inconclusive {s['inconclusive']}; "
        f"refused {s['refused']}; misses that are inconclusive with the expected cause as the first candidate, "
        f"a finding behind it: {s['inconclusive_first_candidate']}.",
        "",
        "| case | framework | expected | got | ok |",
        "|---|---|---|---|---|",
    ]
    for r in doc["cases"]:
        lines.append(f"| {r['name']} | {r['framework']} | `{r['expected']}` | `{r['got']}` | "
                     f"{'yes' if r['correct'] else '**no**'} |")
    lines += ["", "## By framework", "", "| framework | correct | cases |", "|---|---|---|"]
    lines += [f"| {k} | {v['correct']} | {v['cases']} |" for k, v in s["by_framework"].items()]
    lines += ["", "## By expected id", "", "| id | correct | cases |", "|---|---|---|"]
    lines += [f"| `{k}` | {v['correct']} | {v['cases']} |" for k, v in s["by_expected"].items()]
    misses = [r for r in doc["cases"] if not r["correct"]]
    if misses:
        lines += ["", "## Misses", ""]
        for r in misses:
            lines.append(f"- **{r['name']}** ({r['framework']}): expected `{r['expected']}`, {r['miss_reason']}. "
                         f"Path: {' → '.join(r['path']) or '(none)'}")
    return "\n".join(lines) + "\n"


def cmd_field(corpus: Path, out: Path | None) -> int:
    import sys

    doc = run_field(corpus, out)
    for line in summary_lines(doc):
        sys.stdout.write(line + "\n")
    if out is not None:
        sys.stdout.write(f"wrote {out / 'field-results.json'} and {out / 'field-results.md'}\n")
    return 0
