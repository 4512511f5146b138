"""Findings: the immutable record of one probe run at one node of the walk."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

UNAVAILABLE = "unavailable"
ERROR = "error"
IMPLICIT_OUTCOMES = (UNAVAILABLE, ERROR)


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
