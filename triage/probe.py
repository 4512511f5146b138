"""The probe contract and the registry of probes.

A probe examines one aspect of a run and returns an `Observation` whose outcome is
one of the outcomes it declares. Every probe may also end `unavailable` (it raised
`Unavailable`: an artifact, an engine or a GPU is missing) or `error` (it crashed);
the walker records those as findings and follows their edges.

Probes are found through the ``triage.probes`` entry-point group, built-ins too, so a
third-party package adds a probe exactly as the built-ins do.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from functools import lru_cache
from importlib import metadata
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError

from triage.errors import PlaybookError, TriageError
from triage.finding import IMPLICIT_OUTCOMES, Observation

if TYPE_CHECKING:
    from triage.run.run import Run

ENTRY_POINT_GROUP = "triage.probes"


class Cost(str, enum.Enum):
    """Where a probe can run and roughly what it costs."""

    STATIC = "static"  # reads artifacts only
    CPU = "cpu"  # recomputes something on CPU
    GPU = "gpu"  # needs an accelerator


class NoParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Probe:
    """Base class of every probe.

    Subclasses set `name`, `outcomes`, `needs`, `cost`, the capabilities they use
    (`executes_run_code`, `contacts_engine`, `writes_to_engine`), optionally a `Params`
    model, and implement `examine`. The class docstring's first line is the probe's
    one-line description shown by `triage probes`.
    """

    name: ClassVar[str]
    outcomes: ClassVar[tuple[str, ...]]
    needs: ClassVar[tuple[str, ...]] = ()
    cost: ClassVar[Cost] = Cost.STATIC
    Params: ClassVar[type[BaseModel]] = NoParams
    # how a user produces a need, where this probe can say it more precisely than the default
    how_to_get: ClassVar[dict[str, str]] = {}
    # What the probe does beyond reading the run's files, shown by `triage probes`. The
    # executor and the service gate on these, never on `cost`:
    executes_run_code: ClassVar[bool] = False  # may start the run's own job (its code runs here): --allow-relaunch
    contacts_engine: ClassVar[bool] = False  # sends requests to a live inference engine (consented addresses only)
    writes_to_engine: ClassVar[bool] = False  # may send requests that change an engine: --allow-engine-writes

    @classmethod
    def needs_for(cls, params: BaseModel | None) -> tuple[str, ...]:
        """What this probe needs with these params (a rule of config_rule that reads the log, not the args)."""
        return cls.needs

    @classmethod
    def capabilities(cls) -> dict[str, bool]:
        return {"executes_run_code": cls.executes_run_code, "contacts_engine": cls.contacts_engine,
                "writes_to_engine": cls.writes_to_engine}

    def __init__(self, params: BaseModel | None = None) -> None:
        self.params = params if params is not None else self.Params()

    @classmethod
    def description(cls) -> str:
        doc = (cls.__doc__ or "").strip()
        return doc.splitlines()[0] if doc else cls.name

    @classmethod
    def all_outcomes(cls) -> tuple[str, ...]:
        return tuple(cls.outcomes) + IMPLICIT_OUTCOMES

    @classmethod
    def parse_params(cls, raw: Mapping[str, Any] | None, where: str) -> BaseModel:
        try:
            return cls.Params(**(raw or {}))
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = ".".join(str(p) for p in first["loc"]) or "params"
            raise PlaybookError(f"{where}: bad params for probe {cls.name!r}: {loc}: {first['msg']}") from None

    def examine(self, run: Run) -> Observation:  # pragma: no cover - abstract
        raise NotImplementedError

    def observe(self, outcome: str, summary: str, confidence: float = 0.8, **evidence: Any) -> Observation:
        """Build an observation, refusing an outcome this probe did not declare."""
        if outcome not in self.outcomes:
            raise AssertionError(f"probe {self.name} returned undeclared outcome {outcome!r}")
        return Observation(outcome=outcome, summary=summary, evidence=evidence, confidence=confidence)


class ProbeLoadError(TriageError):
    pass


def _check_probe_class(name: str, cls: object) -> type[Probe]:
    if not (isinstance(cls, type) and issubclass(cls, Probe)):
        raise ProbeLoadError(f"entry point {name!r} in group {ENTRY_POINT_GROUP} is not a Probe subclass")
    if getattr(cls, "name", None) != name:
        raise ProbeLoadError(f"entry point {name!r} loads probe named {getattr(cls, 'name', None)!r}")
    clash = set(cls.outcomes) & set(IMPLICIT_OUTCOMES)
    if clash:
        raise ProbeLoadError(f"probe {name!r} declares reserved outcomes {sorted(clash)}")
    if not cls.outcomes:
        raise ProbeLoadError(f"probe {name!r} declares no outcomes")
    return cls


@lru_cache(maxsize=1)
def registry() -> Mapping[str, type[Probe]]:
    """Every probe registered in the ``triage.probes`` entry-point group, by name."""
    found: dict[str, type[Probe]] = {}
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            cls = ep.load()
        except Exception as exc:  # a broken plugin is reported, not fatal to the others
            raise ProbeLoadError(f"probe {ep.name!r} ({ep.value}) failed to import: {exc}") from exc
        found[ep.name] = _check_probe_class(ep.name, cls)
    return dict(sorted(found.items()))
