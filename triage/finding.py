"""Findings: the immutable record of one probe run at one node of the walk."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

UNAVAILABLE = "unavailable"
ERROR = "error"
IMPLICIT_OUTCOMES = (UNAVAILABLE, ERROR)
# Outcomes besides its own that a finding does not exclude, under two evidence keys. UNSEEN: those it could
# not have observed with what it had (a step-1 check that read the KL but no log-probs says nothing of the
# log-probs' size): the verdicts behind them stay candidates, as behind a check that could not run. ALSO_SEEN:
# those it observed as well (the symptoms below the primary one): the verdicts behind them are not ruled out
# by the branch the walk took. UNJUDGED: those it did not look for, beside the one it found (trends over too few
# records under a metric symptom): not ruled out, and not opened as candidates ahead of the branch's own causes.
UNSEEN_OUTCOMES = "unseen_outcomes"
ALSO_SEEN_OUTCOMES = "also_seen_outcomes"
UNJUDGED_OUTCOMES = "unjudged_outcomes"


def _outcomes(evidence: dict[str, Any], key: str) -> frozenset[str]:
    raw = evidence.get(key) or ()
    return frozenset(o for o in raw if isinstance(o, str))


def unseen_outcomes(evidence: dict[str, Any]) -> frozenset[str]:
    return _outcomes(evidence, UNSEEN_OUTCOMES)


def open_outcomes(evidence: dict[str, Any]) -> frozenset[str]:
    """The outcomes a finding leaves open: unseen, seen as well, or not judged."""
    return (_outcomes(evidence, UNSEEN_OUTCOMES) | _outcomes(evidence, ALSO_SEEN_OUTCOMES)
            | _outcomes(evidence, UNJUDGED_OUTCOMES))


class Missing(BaseModel):
    """What a probe needed and did not find, and how to produce it."""

    model_config = ConfigDict(frozen=True)

    artifact: str
    reason: str
    command: str | None = None


class Observation(BaseModel):
    """What a probe returns: one of its declared outcomes, and why."""

    model_config = ConfigDict(frozen=True)

    outcome: str
    summary: str
    evidence: dict[str, Any] = Field(default_factory=dict)
    confidence: float = 0.8
    files: tuple[str, ...] = ()


class Finding(BaseModel):
    """A probe's observation as recorded by the walker at one node."""

    model_config = ConfigDict(frozen=True)

    node: str
    probe: str
    outcome: str
    summary: str
    evidence: dict[str, Any] = Field(default_factory=dict)
    confidence: float = 0.0
    files: tuple[str, ...] = ()
    missing: Missing | None = None
    error: str | None = None
    duration_s: float = 0.0
    cached: bool = False  # answered from the findings cache
