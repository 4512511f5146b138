"""The verdict catalog: every root-cause id with its title, explanation and remedy.

It lives in `playbooks/verdicts.yaml`; reports, tests and benchmarks key on the ids.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from triage.errors import PlaybookError

HEALTHY = "healthy"
INCONCLUSIVE = "inconclusive"


class Verdict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    title: str
    explanation: str
    remedy: str
    flags: tuple[str, ...] = ()  # the exact flags / settings the remedy names
    sources: tuple[str, ...] = ()  # which guides it comes from
    # the findings that establish it, as "probe:outcome": every path to the verdict must
    # pass one of them (checked when the graph is compiled)
    evidence: tuple[str, ...] = ()
    # the cheapest step that would confirm or rule it out, when the walk could not decide
    confirm: str | None = None
    # findings ("probe:outcome") that make it a candidate of an `inconclusive` walk without
    # establishing it (a SIGKILL points at host memory and at a scheduler's time limit alike)
    suspected_by: tuple[str, ...] = ()


def load_catalog(path: Path) -> Mapping[str, Verdict]:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise PlaybookError(f"{path}: cannot read the verdict catalog: {str(exc).splitlines()[0]}") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("verdicts"), list):
        raise PlaybookError(f"{path}: the catalog must be a mapping with a 'verdicts' list")
    out: dict[str, Verdict] = {}
    for i, entry in enumerate(raw["verdicts"]):
        try:
            verdict = Verdict(**entry)
        except (TypeError, ValidationError) as exc:
            msg = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
            raise PlaybookError(f"{path}: verdict #{i}: {msg}") from None
        if verdict.id in out:
            raise PlaybookError(f"{path}: verdict {verdict.id!r} is defined twice")
        out[verdict.id] = verdict
    for required in (HEALTHY, INCONCLUSIVE):
        if required not in out:
            raise PlaybookError(f"{path}: the catalog must define {required!r}")
    return out
