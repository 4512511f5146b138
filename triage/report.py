"""The report: one pydantic model, built from a walk, rendered for terminal, JSON, Markdown, Slack.

JSON schema (stable, `schema_version` bumps on breaking change)::

    {
      "schema_version": "1",
      "triage_version": "0.1.0",
      "created_at": "2026-11-21T10:00:00Z",
      "duration_s": 0.42,
      "run": {"ref", "path", "framework", "status", "artifacts": {kind: count}, "partial", "notes": [..]},
      "root_cause": {"id", "title", "confidence", "explanation", "remedy", "flags": [..]},
      "path": [{"node", "playbook", "probe", "ask", "outcome", "summary", "evidence", "confidence",
                "duration_s", "missing": {"artifact", "reason", "command"} | null, "error"}],
      "ruled_out": [{"verdict", "title", "by", "because"}],
      "not_checked": [{"node", "probe", "artifact", "reason", "command"}],
      "candidates": [{"id", "title", "score", "supports": [..], "lacks": [..], "next_step"}],
      "coverage": {"read": {...}, "metrics": {name: {"records", "key", "kind", "source"}},
                   "not_understood": [..], "checks": [{"probe", "node", "status", "outcome"}],
                   "versions": {package: version}, "versions_note"},
      "changes": {"baseline", "found_by", "baseline_status", "changes": [{"kind", "name", "baseline", "run",
                  "note", "bears_on"}], "divergence": {"metric", "step", ...} | null, "new_errors"} | null,
      "history": {"triage_id", "signature", "seen_runs", "confirmed": [{"verdict", "by", "at", ...}]} | null
    }

`candidates` is the ranked differential (`triage/differential.py`): filled when the
verdict is `inconclusive` and the findings point somewhere, best first. `coverage`
(`triage/coverage.py`) says what was read, what looked like evidence but was not
understood, and which checks ran; the verdict's confidence is scaled by it.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import BaseModel, Field

from triage import __version__
from triage.catalog import HEALTHY, INCONCLUSIVE
from triage.coverage import Coverage, build_coverage, confidence_factor
from triage.differential import Boost, Candidate, apply_boost, rank_candidates
from triage.finding import ERROR, UNAVAILABLE, Finding, Missing, open_outcomes
from triage.graph import DecisionGraph, edge_tokens
from triage.memory.models import ChangeSummary, History
from triage.run.run import Run
from triage.walker import Walk

SCHEMA_VERSION = "1"
# Each step that could not run on the way lowers the confidence of what follows.
UNCHECKED_STEP_PENALTY = 0.9


class RootCause(BaseModel):
    id: str
    title: str
    confidence: float
    explanation: str
    remedy: str
    flags: list[str] = Field(default_factory=list)


class Step(BaseModel):
    node: str
    playbook: str
    probe: str
    ask: str
    outcome: str
    summary: str
    evidence: dict[str, Any] = Field(default_factory=dict)
    confidence: float = 0.0
    duration_s: float = 0.0
    missing: Missing | None = None
    error: str | None = None
    cached: bool = False


class RuledOut(BaseModel):
    verdict: str
    title: str
    by: str
    because: str


class NotChecked(BaseModel):
    node: str
    probe: str
    artifact: str | None
    reason: str
    command: str | None = None


class RunInfo(BaseModel):
    ref: str
    path: str
    framework: str
    status: str | None = None
    artifacts: dict[str, int] = Field(default_factory=dict)
    partial: bool = False
    notes: list[str] = Field(default_factory=list)


class Report(BaseModel):
    schema_version: str = SCHEMA_VERSION
    triage_version: str = __version__
    created_at: str
    duration_s: float
    run: RunInfo
    root_cause: RootCause
    path: list[Step]
    ruled_out: list[RuledOut] = Field(default_factory=list)
    not_checked: list[NotChecked] = Field(default_factory=list)
    candidates: list[Candidate] = Field(default_factory=list)
    coverage: Coverage = Field(default_factory=Coverage)
    changes: ChangeSummary | None = None  # what changed since the last good run (triage/memory/)
    history: History | None = None  # the triage's id, its error signature, causes confirmed for it before

    @property
    def inconclusive(self) -> bool:
        return self.root_cause.id == INCONCLUSIVE

    def key_evidence(self, limit: int = 3) -> list[str]:
        """The few lines a reader needs: the deciding findings' summaries, latest first."""
        lines = [s.summary for s in reversed(self.path) if s.outcome not in (UNAVAILABLE, ERROR)]
        return lines[:limit]


def _confidence(walk: Walk) -> float:
    if walk.verdict == INCONCLUSIVE:
        return 0.0
    deciding = walk.deciding
    base = deciding.confidence if deciding is not None else 0.5
    unchecked = sum(1 for f in walk.findings if f.outcome in (UNAVAILABLE, ERROR))
    return round(base * (UNCHECKED_STEP_PENALTY ** unchecked), 3)


def _ruled_out(graph: DecisionGraph, findings: list[Finding], verdict: str) -> list[RuledOut]:
    out: list[RuledOut] = []
    seen = {verdict, HEALTHY, INCONCLUSIVE}
    # a verdict a finding made a suspect of is open, not ruled out, though the edge taken bypassed it
    # (a SIGKILL with no word of memory is no evidence against host memory)
    seen |= {vid for f in findings for token in edge_tokens(graph.nodes[f.node], f.outcome)
             for vid in graph.suspects.get(token, ())}
    for f in findings:
        if f.outcome in (UNAVAILABLE, ERROR):
            continue
        node = graph.nodes[f.node]
        taken = graph.verdicts_reachable_from(node.edges[f.outcome])
        still_open = open_outcomes(f.evidence)
        for outcome in still_open & node.edges.keys():  # (a verdict the finding leaves open stays open by every edge)
            taken = taken | graph.verdicts_reachable_from(node.edges[outcome])
        for outcome, target in node.edges.items():
            if outcome in (f.outcome, UNAVAILABLE, ERROR) or outcome in still_open:
                continue
            for vid in sorted(graph.verdicts_reachable_from(target) - taken - seen):
                seen.add(vid)
                out.append(RuledOut(verdict=vid, title=graph.catalog[vid].title, by=f.node, because=f.summary))
    return out


# A probe's hint that the walk could not decide on (`evidence["suggests"]`: a verdict and why),
# weighted below a change since the last good run and a cause the team confirmed
SUGGESTION_WEIGHT = 0.5


def _suggested(findings: list[Finding]) -> dict[str, Boost]:
    out: dict[str, Boost] = {}
    for f in findings:
        for s in f.evidence.get("suggests") or []:
            if isinstance(s, dict) and isinstance(s.get("verdict"), str):
                prior = out.get(s["verdict"])
                out[s["verdict"]] = Boost(weight=SUGGESTION_WEIGHT,
                                          supports=[*(prior.supports if prior else []), str(s.get("because", ""))])
    return out


def _not_checked(findings: list[Finding]) -> list[NotChecked]:
    out = []
    for f in findings:
        if f.outcome == UNAVAILABLE:
            m = f.missing
            out.append(NotChecked(node=f.node, probe=f.probe, artifact=m.artifact if m else None,
                                  reason=f.summary, command=m.command if m else None))
        elif f.outcome == ERROR:
            out.append(NotChecked(node=f.node, probe=f.probe, artifact=None, reason=f.summary))
    return out


def without_root(report: Report, root: str, shown: str) -> Report:
    """The report with `root/` left out of every path it quotes, and `shown` as the run's path: a pasted
    fragment's temporary folder means nothing to the reader, and is removed with the run."""
    prefix = root.rstrip("/") + "/"

    def strip(value: Any) -> Any:
        if isinstance(value, str):
            return value.replace(prefix, "")
        if isinstance(value, list):
            return [strip(v) for v in value]
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items()}
        return value

    data = strip(report.model_dump())
    data["run"]["path"] = shown
    return Report.model_validate(data)


def build_report(graph: DecisionGraph, run: Run, walk: Walk, duration_s: float, notes: list[str] | None = None) -> Report:
    verdict = graph.catalog[walk.verdict]
    steps = [
        Step(
            node=f.node, playbook=graph.nodes[f.node].playbook, probe=f.probe, ask=graph.nodes[f.node].ask,
            outcome=f.outcome, summary=f.summary, evidence=f.evidence, confidence=f.confidence,
            duration_s=round(f.duration_s, 4), missing=f.missing, error=f.error, cached=f.cached,
        )
        for f in walk.findings
    ]
    explanation = verdict.explanation
    if walk.verdict == HEALTHY:
        from probes.health_checks import healthy_explanation

        gate = next((f for f in reversed(walk.findings) if f.probe == "health_checks"), None)
        explanation = (healthy_explanation(gate.evidence) if gate is not None else None) or explanation
    not_checked = _not_checked(walk.findings)
    ruled_out = _ruled_out(graph, walk.findings, walk.verdict)
    candidates: list[Candidate] = []
    if walk.verdict == INCONCLUSIVE:
        candidates = rank_candidates(graph, walk.findings, {r.verdict for r in ruled_out})
        hints = _suggested(walk.findings)
        if hints:
            titles = {vid: v.title for vid, v in graph.catalog.items()}
            candidates = apply_boost(candidates, hints, titles, {r.verdict for r in ruled_out})
        if not_checked:
            # a check asked at two nodes is one thing the run lacks, said once
            missing = "; ".join(dict.fromkeys(f"{n.probe}: {n.reason}" for n in not_checked))
            explanation = f"{explanation} Could not check: {missing}."
        else:
            # every check ran: what they saw leaves more than one cause open (a SIGKILL no line explains)
            explanation = ("The walk could not reach a root cause: every check it asked ran, and what they observed "
                           "does not decide between the causes it leaves open.")
        if candidates and any(c.score > 0 or c.supports for c in candidates):
            explanation += " Candidates, most supported first: " + ", ".join(c.id for c in candidates) + "."
        elif candidates:
            # nothing the walk saw points at one of them: they are only what the blocked checks could still
            # decide, in the graph's order, so naming the first few would read as suspicion (a cut traceback
            # listed memory ids first: verl-project/verl#834); the JSON keeps them all
            n = len(candidates)
            explanation += (f" Nothing observed points at one cause; {n} {'causes stay' if n > 1 else 'cause stays'} "
                            "open to the checks that could not run.")
    coverage = build_coverage(run, walk.findings)
    remedy, flags = verdict.remedy, list(verdict.flags)
    if walk.verdict == INCONCLUSIVE and not not_checked and candidates and candidates[0].next_step:
        # nothing is missing: the step that tells the open causes apart is the remedy
        remedy, flags = (f"Tell the candidates apart, the first one first: {candidates[0].id}: "
                         f"{candidates[0].next_step}" + "".join(f"; {c.id}: {c.next_step}" for c in candidates[1:3]
                                                                 if c.next_step) + "."), []
    elif walk.verdict == INCONCLUSIVE:
        remedy, flags = _inconclusive_remedy(run, remedy, flags)
    elif (own := _own_remedy(walk.findings)) is not None:
        # the finding that decided quotes a remedy the log itself gives (an engine's own advice), which
        # the catalog's general one would contradict; its flags with it (the catalog's name another engine's
        # flag, or the opposite direction: verl-project/verl#2245, vLLM's KV cache with no room)
        remedy = own["remedy"]
        flags = [f for f in own.get("flags") or [] if isinstance(f, str)]
        if isinstance(own.get("explanation"), str) and own.get("signature"):
            # a wording with a remedy of its own is explained in its own terms too: DeepSpeed's batch check is
            # not slime's batch rule, which the catalog's text spells out (OpenGVLab/InternImage#111)
            explanation = own["explanation"]
    if walk.verdict != INCONCLUSIVE:
        remedy, flags = _framework_remedy(run, remedy, flags)
    report = Report(
        created_at=dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        duration_s=round(duration_s, 4),
        run=RunInfo(
            ref=run.ref, path=str(run.root), framework=run.framework, status=run.status,
            artifacts=run.artifacts.kinds(), partial=run.status == "running", notes=list(notes or []),
        ),
        root_cause=RootCause(
            id=verdict.id, title=verdict.title, confidence=round(_confidence(walk) * confidence_factor(coverage), 3),
            explanation=explanation,
            remedy=remedy, flags=flags,
        ),
        path=steps,
        ruled_out=ruled_out,
        not_checked=not_checked,
        candidates=candidates,
        coverage=coverage,
    )
    from triage.memory.enrich import enrich

    return enrich(report, run)  # changes since the last good run, confirmed history; records the verdict


def _framework_remedy(run: Run, remedy: str, flags: list[str]) -> tuple[str, list[str]]:
    """The catalog's remedy names slime's flags; another framework's run is told its own names for them
    (args.yaml), and which of them it has no name for here, so that no flag it lacks is passed off as its
    own (an OpenRLHF run was told `--offload` and `--colocate`)."""
    from triage import frameworks

    fw = frameworks.for_run(run.framework)
    if fw is None or fw.name == "slime" or not flags:
        return remedy, flags
    flags, told, unnamed = fw.own_flags(flags)
    # (a flag whose names the remedy already gives beside it needs no note: `num_generations` is written there)
    notes = [f"`{flag}` is " + " or ".join(f"`{n}`" for n in names) for flag, names in told
             if not all(n in remedy for n in names)]
    if unnamed:
        listed = ", ".join(f"`{u}`" for u in unnamed)
        notes.append(f"{listed} {'is a slime flag' if len(unnamed) == 1 else 'are slime flags'} with no {fw.title} "
                     "name known here")
    if notes:
        remedy = f"{remedy.rstrip()} In {fw.title}: " + "; ".join(notes) + "."
    return remedy, flags


def _own_remedy(findings: list) -> dict | None:
    """The evidence of the finding that gives the verdict a remedy of its own: the deciding one, or the error
    signature on the path to it whose wording has its own (TRL's batch check, answered in TRL's keys before the
    batch arithmetic is checked)."""
    if not findings:
        return None
    if isinstance(findings[-1].evidence.get("remedy"), str):
        return findings[-1].evidence
    for f in reversed(findings):
        if f.probe == "error_signatures" and isinstance(f.evidence.get("remedy"), str):
            return f.evidence
    return None


def _inconclusive_remedy(run: Run, remedy: str, flags: list[str]) -> tuple[str, list[str]]:
    """The catalog's remedy names slime's dump flags; another framework's run is told its own way
    to keep the rollouts (its adapter's `needs_help`), or none, never a flag it does not have."""
    from triage import frameworks

    fw = frameworks.for_run(run.framework)
    if fw is not None and fw.name == "slime":
        return remedy, flags
    text = "Produce the missing artifacts and triage again: each check that could not run says what it needs."
    keep = fw.needs_help.get("rollout_dump") if fw is not None else None
    if keep:
        text += f" To keep the rollouts in {fw.title}: {keep}."
    return text, []
