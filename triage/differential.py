"""A ranked differential instead of a bare `inconclusive`.

When the walk cannot decide, the findings still point somewhere. A check that could not
run at a node stood between the walk and the verdicts its real outcomes lead to: those
are the candidates. Each is scored by how much of its own evidence (its catalog
`evidence:` entry, the best alternative) the walk already observed, and carries the
findings that support it and the cheapest step that would confirm or rule it out: the
command the missing check named, else the catalog's `confirm:`.

A finding's `unseen_outcomes` (outcomes it could not have observed with what it had) open the verdicts
behind them as a blocked check does.

A finding the catalog lists under a verdict's `suspected_by:` opens that verdict as well,
with the finding as its support: it points at the verdict without establishing it (a
SIGKILL with nothing saying who sent it opens host memory and a scheduler's time limit).

Candidates the walk ruled out are never listed. When the `healthy` gate lacked records,
`healthy` itself is a candidate: every check that ran passed, and the report says what
more would settle it.

Evidence from outside the walk raises a candidate (`boost`, `apply_boost`): an argument or
package that changed since the last good run and that the verdict depends on, or the cause
the team confirmed for the same error signature, which then ranks first
(`triage/memory/enrich.py`).
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, Field

from triage.catalog import HEALTHY, INCONCLUSIVE
from triage.finding import ERROR, IMPLICIT_OUTCOMES, UNAVAILABLE, Finding, unseen_outcomes
from triage.graph import DecisionGraph, edge_tokens, evidence_alternatives

MAX_CANDIDATES = 6


class Candidate(BaseModel):
    id: str
    title: str
    score: float  # share of its own evidence the walk observed, 0..1
    supports: list[str] = Field(default_factory=list)  # observed findings that point at it
    lacks: list[str] = Field(default_factory=list)  # evidence not observed yet, as probe:outcome
    next_step: str | None = None  # the cheapest step that would confirm or rule it out


def _observed(graph: DecisionGraph, findings: list[Finding]) -> dict[tuple[str, str], Finding]:
    seen: dict[tuple[str, str], Finding] = {}
    for f in findings:
        node = graph.nodes[f.node]
        question = graph.questions.get(node.question or "")
        own = question.probe_names if question else frozenset()
        for token in edge_tokens(node, f.outcome, set(seen), own):
            # a question's answer left standing by a follow-up that could not run is the earlier finding's
            source = f if f.outcome not in IMPLICIT_OUTCOMES else next(
                (seen[(p, token[1])] for p in own if (p, token[1]) in seen), f)
            seen.setdefault(token, source)
    return seen


def rank_candidates(graph: DecisionGraph, findings: list[Finding], ruled_out: set[str],
                    boost: Mapping[str, Boost] | None = None) -> list[Candidate]:
    """The differential, best first; `boost` (see `apply_boost`) raises verdicts evidence from outside the walk points at."""
    observed = _observed(graph, findings)
    opened: dict[str, Finding] = {}  # candidate -> the nearest check before it that could not run
    for f in findings:
        still_open = unseen_outcomes(f.evidence)
        if f.outcome not in (UNAVAILABLE, ERROR) and not still_open:
            continue
        node = graph.nodes[f.node]
        for outcome, target in node.edges.items():
            if outcome in IMPLICIT_OUTCOMES or (f.outcome not in (UNAVAILABLE, ERROR) and outcome not in still_open):
                continue
            # nearest first, then in the order the playbook lists the edges (the same on every run): six
            # candidates cut by catalog order dropped rollout.max_len_too_small, one step behind a truncation
            # check, for weights verdicts further on (huggingface/trl#5697)
            for vid in graph.verdicts_nearest_first(target):
                opened[vid] = f  # a later blocker stands nearer to the verdict: its step decides it
    # a finding the catalog lists under a verdict's `suspected_by:` opens it too, the finding its support
    # (a SIGKILL with nothing saying who sent it: host memory or a scheduler, 002's `exitcode: -9`)
    suspected: dict[str, list[Finding]] = {}
    for token, finding in observed.items():
        for vid in graph.suspects.get(token, ()):
            suspected.setdefault(vid, []).append(finding)
    for vid in graph.catalog:  # in catalog order, as the playbooks list the blocked checks' verdicts
        if vid in suspected:
            opened.setdefault(vid, suspected[vid][0])
    health = next((f for f in findings if f.probe == "health_checks" and f.outcome == "insufficient"), None)
    if health is not None:
        opened.setdefault(HEALTHY, health)
    out = []
    for vid, blocker in opened.items():
        if vid == INCONCLUSIVE or (vid in ruled_out and vid != HEALTHY):
            continue
        verdict = graph.catalog[vid]
        alternatives = evidence_alternatives(verdict, graph.probes, graph.questions)
        best, best_share = frozenset(), 0.0
        for alt in alternatives:
            share = len([t for t in alt if t in observed]) / len(alt) if alt else 0.0
            if share > best_share or not best:
                best, best_share = alt, share
        supports = list(dict.fromkeys([*(observed[t].summary for t in best if t in observed),
                                       *(f.summary for f in suspected.get(vid, ()))]))
        lacks = [f"{a}:{b}" for a, b in sorted(best) if (a, b) not in observed]
        command = blocker.missing.command if blocker.missing and blocker.missing.command else None
        if vid == HEALTHY:
            # only what the checks that ran saw: none ran, nothing stands behind it (THUDM/slime#1542's
            # paste of rollout requests refused 58 times ranked `healthy` first on no check at all)
            ran = int(health.evidence.get("ran", 0)) if health is not None else 0
            supports = [f"no symptom was seen, and the {ran} health check{'s' if ran > 1 else ''} that ran "
                        f"passed"] if ran else []
            command = blocker.evidence.get("command") or verdict.confirm
        out.append(Candidate(id=vid, title=verdict.title, score=round(best_share, 3), supports=supports,
                             lacks=lacks, next_step=command or verdict.confirm))
    order = {vid: i for i, vid in enumerate(opened)}  # first opened first, among equal scores
    out.sort(key=lambda c: (-c.score, not c.supports, order[c.id]))  # a finding behind it ranks it first
    if boost:
        return apply_boost(out, boost, {vid: v.title for vid, v in graph.catalog.items()}, ruled_out)
    return out[:MAX_CANDIDATES]


class Boost(BaseModel):
    """Evidence from outside the walk for one verdict: a change since the last good run (weight 1), a
    cause the team confirmed for the same error signature (weight 2, ranked first)."""

    weight: float
    supports: list[str] = Field(default_factory=list)


def apply_boost(candidates: list[Candidate], boost: Mapping[str, Boost], titles: Mapping[str, str],
                ruled_out: set[str] = frozenset()) -> list[Candidate]:
    """Raise boosted verdicts above the others (highest weight first, then score), their outside evidence
    quoted first in `supports`; a boosted verdict the walk did not open is added (score 0) unless ruled out
    (a confirmed cause, weight >= 2, is added even then: the team's answer outranks the walk's guess)."""
    by_id = {c.id: c for c in candidates}
    for vid, b in boost.items():
        if vid in (HEALTHY, INCONCLUSIVE) or vid not in titles:
            continue
        c = by_id.get(vid)
        if c is None:
            if vid in ruled_out and b.weight < 2:
                continue
            c = by_id[vid] = Candidate(id=vid, title=titles[vid], score=0.0)
        by_id[vid] = c.model_copy(update={"supports": list(dict.fromkeys([*b.supports, *c.supports]))})
    order = {c.id: i for i, c in enumerate(candidates)}
    ranked = sorted(by_id.values(), key=lambda c: (-(boost[c.id].weight if c.id in boost else 0.0), -c.score,
                                                   order.get(c.id, len(order))))
    return ranked[:MAX_CANDIDATES]
