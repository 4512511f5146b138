"""Running one probe against a run, turning every way it can end into a Finding."""

from __future__ import annotations

import time
from typing import Protocol

import structlog

import re

from triage.errors import BadInput, CorruptArtifact, TriageError, Unavailable
from triage.finding import ERROR, UNAVAILABLE, Finding, Missing
from triage.graph import Node
from triage.probe import Probe
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


def missing_need(probe_cls: type[Probe], run: Run) -> Missing | None:
    help_for = {**NEEDS_HELP, **probe_cls.how_to_get}
    for need in probe_cls.needs:
        try:
            present = run.has(need)
        except TriageError as exc:
            return Missing(artifact=need, reason=f"{need} could not be read: {exc}", command=help_for.get(need))
        if not present:
            return Missing(artifact=need, reason=f"the run has no {need.replace('_', ' ')}", command=help_for.get(need))
    return None


def examine(node: Node, probe_cls: type[Probe], run: Run) -> Finding:
    """Run a probe in this process; never raises for anything the probe or the run does."""
    started = time.perf_counter()
    base = {"node": node.id, "probe": probe_cls.name}
    missing = missing_need(probe_cls, run)
    if missing is not None:
        return Finding(**base, outcome=UNAVAILABLE, summary=missing.reason, missing=missing)
    try:
        obs = probe_cls(node.params).examine(run)
    except Unavailable as exc:
        return Finding(
            **base, outcome=UNAVAILABLE, summary=exc.reason,
            missing=Missing(artifact=exc.artifact, reason=exc.reason, command=exc.command),
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
        log.error("probe_crashed", probe=probe_cls.name, node=node.id, error=repr(exc), exc_info=True)
        msg = f"probe {probe_cls.name} crashed: {type(exc).__name__}: {exc}"
        return Finding(**base, outcome=ERROR, summary=msg, error=msg, duration_s=time.perf_counter() - started)
    return Finding(
        **base, outcome=obs.outcome, summary=obs.summary, evidence=obs.evidence,
        confidence=obs.confidence, files=obs.files, duration_s=time.perf_counter() - started,
    )


class LocalExecutor:
    """Probes run in this process, one after another."""

    def run_probe(self, node: Node, probe_cls: type[Probe], run: Run) -> Finding:
        return examine(node, probe_cls, run)
