"""Running one probe against a run, turning every way it can end into a Finding."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

import structlog

import re

from triage.errors import BadInput, CorruptArtifact, TriageError, Unavailable
from triage.finding import ERROR, UNAVAILABLE, Finding, Missing
from triage.graph import Node
from triage.probe import Probe
from triage.replay.consent import relaunch_permission
from triage.run.run import NEEDS_HELP, Run

log = structlog.get_logger("triage.executor")


# Files of a checkpoint (Megatron torch_dist / legacy, HF) or an engine's weight dump: when
# one of these is corrupt, that is evidence about the run (a save that did not finish, a
# truncated shard), so the probe's finding names it; a corrupt log or dump is bad input.
CHECKPOINT_FILE = re.compile(
    r"(\.distcp|/\.metadata|common\.pt|model_optim_rng\.pt|\.safetensors|safetensors\.index\.json|"
    r"pytorch_model[^/]*\.bin|/iter_\d{7}/|/release/|/mp_rank_\d\d|latest_checkpointed_iteration\.txt)"
)


def is_checkpoint_file(path: str) -> bool:
    return bool(CHECKPOINT_FILE.search(path))


class Executor(Protocol):
    def run_probe(self, node: Node, probe_cls: type[Probe], run: Run) -> Finding: ...


def _framework_help(probe_cls: type[Probe], run: Run, needs: tuple[str, ...] | None = None) -> dict[str, str]:
    """How the run's own framework produces each need (a verl run is not told slime's flags)."""
    return {need: text for need in (probe_cls.needs if needs is None else needs) if (text := _own_help(need, run))}


def _own_help(need: str, run: Run) -> str | None:
    """The run's framework's way to produce `need`; None for the slime family (the catalog's own words)
    and where its adapter says nothing."""
    try:
        if run.framework in ("slime", "miles", "relax", "unknown"):
            return None
        from triage.frameworks import needs_help

        return needs_help(run.framework, need)
    except TriageError:
        return None


def missing_need(probe_cls: type[Probe], run: Run, params: Any = None) -> Missing | None:
    needs = probe_cls.needs_for(params)
    help_for = {**NEEDS_HELP, **probe_cls.how_to_get, **_framework_help(probe_cls, run, needs)}
    for need in needs:
        try:
            present = run.has(need)
        except TriageError as exc:
            return Missing(artifact=need, reason=f"{need} could not be read: {exc}", command=help_for.get(need))
        if not present:
            if need in ("engine", "engine_weights") and run.engines_not_contacted:
                return _engines_not_contacted(need, run)
            return Missing(artifact=need, reason=f"the run has no {need.replace('_', ' ')}", command=help_for.get(need))
    return None


def _engines_not_contacted(need: str, run: Run) -> Missing:
    """The run names engines, and none may be contacted: say which and how to allow one."""
    named = ", ".join(run.engines_not_contacted[:4])
    first = run.engines_not_contacted[0]
    from triage.engines.consent import host_port

    return Missing(artifact=need, reason=f"the run names engine(s) {named}, not contacted: an engine the run names "
                   "is contacted only when its host:port is on the engine allow-list",
                   command=f"--engine-allow {host_port(first) or 'HOST:PORT'} (or TRIAGE_ENGINE_ALLOW), "
                           f"or --engine {first}")


def relaunch_allowed_for(probe_cls: type[Probe], run: Run) -> bool:
    """The relaunch gate: a probe may start the run's job only if it declares so and the user consented."""
    return bool(probe_cls.executes_run_code and run.relaunch_allowed)


def _short(exc: BaseException, limit: int = 300) -> str:
    """`Type: message` on one line, bounded, without advice to load unsafely."""
    from triage.errors import without_unsafe_advice

    try:
        text = " ".join(without_unsafe_advice(str(exc)[:10_000]).split())
    except Exception:  # noqa: BLE001 - a message that cannot even be rendered (a 5,000-digit int)
        text = ""
    text = text if len(text) <= limit else text[:limit] + "…"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


@contextmanager
def confined_to(run: Run) -> Iterator[None]:
    """While a probe runs, files are read only inside the run's allowed roots (`triage.safe_io`)."""
    from triage import safe_io

    token = safe_io.confine(getattr(run, "allowed_roots", None) or (run.root,))
    try:
        yield
    finally:
        safe_io.reset(token)


def examine(node: Node, probe_cls: type[Probe], run: Run) -> Finding:
    """Run a probe in this process; never raises for anything the probe or the run does."""
    started = time.perf_counter()
    base = {"node": node.id, "probe": probe_cls.name}
    missing = missing_need(probe_cls, run, node.params)
    if missing is not None:
        return Finding(**base, outcome=UNAVAILABLE, summary=missing.reason, missing=missing)
    try:
        with relaunch_permission(relaunch_allowed_for(probe_cls, run), run.relaunch_hint), confined_to(run):
            obs = probe_cls(node.params).examine(run)
    except Unavailable as exc:
        # a probe's way to produce what it lacked is slime's; a TRL run is told TRL's (huggingface/trl#5697's
        # run was told to rerun with `--save-debug-rollout-data`)
        command = exc.command and (_own_help(exc.artifact, run) or exc.command)
        return Finding(
            **base, outcome=UNAVAILABLE, summary=exc.reason,
            missing=Missing(artifact=exc.artifact, reason=exc.reason, command=command),
            duration_s=time.perf_counter() - started,
        )
    except CorruptArtifact as exc:
        if not is_checkpoint_file(exc.path):
            raise  # a corrupt log, dump or trainer_state.json: the triage stops (exit code 2)
        msg = f"corrupt checkpoint file {exc}"
        log.warning("corrupt_checkpoint", probe=probe_cls.name, node=node.id, error=str(exc))
        return Finding(**base, outcome=ERROR, summary=msg, error=msg, duration_s=time.perf_counter() - started)
    except BadInput:
        # a hostile pickle, a binary log, a malformed trainer_state.json: the user's input
        # cannot be used, and the whole triage stops with a one-line error (exit code 2)
        raise
    except TriageError as exc:  # a corrupt checkpoint shard, an engine that died: a finding naming it
        log.warning("probe_failed", probe=probe_cls.name, node=node.id, error=str(exc))
        return Finding(**base, outcome=ERROR, summary=str(exc), error=str(exc), duration_s=time.perf_counter() - started)
    except Exception as exc:  # noqa: BLE001 - a crashing probe is a finding, the walk goes on
        # one line on stderr; the traceback (plain, no local variables: they can hold secrets and
        # huge values) only in the debug log (-vv)
        log.error("probe_crashed", probe=probe_cls.name, node=node.id, error=_short(exc))
        log.debug("probe_crashed_traceback", probe=probe_cls.name, node=node.id, exc_info=True)
        msg = f"probe {probe_cls.name} crashed: {_short(exc)}"
        return Finding(**base, outcome=ERROR, summary=msg, error=msg, duration_s=time.perf_counter() - started)
    return Finding(
        **base, outcome=obs.outcome, summary=obs.summary, evidence=obs.evidence,
        confidence=obs.confidence, files=obs.files, duration_s=time.perf_counter() - started,
    )


class LocalExecutor:
    """Probes run in this process, one after another."""

    def run_probe(self, node: Node, probe_cls: type[Probe], run: Run) -> Finding:
        return examine(node, probe_cls, run)
