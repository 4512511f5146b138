"""Whether the probe running now may start the run's own job.

Relaunching a run's job runs code the run chose: its entry script, the functions its
command line names (`--custom-rm-path evil.rm`), whatever they import. So it happens
only with the user's consent (`triage run --allow-relaunch`; in the service, its
configuration and an allowed user's request), and only for a probe that declares
`executes_run_code`. The executor grants the permission around each probe
(`relaunch_permission`), from the probe's declaration and `Run.relaunch_allowed`;
`triage.replay.launch` checks it before it starts anything, and refuses with
`RelaunchRefused` (an `Unavailable` carrying the exact command it did not run). The
default is refused: a probe called any other way never relaunches anything.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from triage.errors import Unavailable

ARTIFACT = "relaunch consent"
DEFAULT_HINT = "rerun the triage with --allow-relaunch to let it start the run's job"

_permitted: ContextVar[bool] = ContextVar("triage_relaunch_permitted", default=False)
_hint: ContextVar[str] = ContextVar("triage_relaunch_hint", default=DEFAULT_HINT)


class RelaunchRefused(Unavailable):
    """The run's job would have been started, and was not: no consent. `command` is what would have run."""

    def __init__(self, what: str, command: str) -> None:
        reason = (f"not run: {what} executes code the run chooses (the functions its command line names, "
                  f"what they import); {hint()}")
        super().__init__(ARTIFACT, reason, command)


@contextmanager
def relaunch_permission(permitted: bool, hint: str | None = None) -> Iterator[None]:
    """Within the block, `triage.replay.launch` may (or may not) start the run's job."""
    token = _permitted.set(bool(permitted))
    hint_token = _hint.set(hint or DEFAULT_HINT)
    try:
        yield
    finally:
        _permitted.reset(token)
        _hint.reset(hint_token)


def relaunch_permitted() -> bool:
    return _permitted.get()


def hint() -> str:
    return _hint.get()
