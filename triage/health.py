"""The health checks a `healthy` verdict rests on, as one small record each.

A run is healthy only on positive evidence: every health check ran over enough records
and passed. Each metric probe that answers a health question (grad norm, reward signal,
truncation, entropy / KL, learning-rate schedule) exposes a pure `check(run)` returning
a `CheckResult`, and its `examine` uses the same function, so each question is decided
in one place. The minimum records of each check are in `triage/thresholds.yaml`
(`health.*.min_records`) with their sources.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class CheckResult:
    """Whether one health check could run on the run's records, and whether it passed."""

    name: str  # the check, e.g. "grad_norm"
    available: bool  # the check ran: the records it needs were there
    passed: bool | None  # None when not available
    records: int  # usable records found
    needed: int  # records the check needs
    detail: str  # one line: what it found, or what it lacked

    def __post_init__(self) -> None:
        if not self.available and self.passed is not None:
            raise ValueError(f"check {self.name}: an unavailable check can neither pass nor fail")
        if self.available and self.passed is None:
            raise ValueError(f"check {self.name}: an available check must pass or fail")

    def as_evidence(self) -> dict[str, Any]:
        return asdict(self)


def unavailable(name: str, records: int, needed: int, detail: str) -> CheckResult:
    return CheckResult(name, False, None, records, needed, detail)
