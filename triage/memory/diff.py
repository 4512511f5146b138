"""`triage diff RUN BASELINE`: what changed between a run and the last good run of its job.

Arguments are compared under their normalised canonical names (`run.args`, one row per
argument however the framework spells it), numbers as numbers (`1e-6` and `0.000001`
are the same learning rate); package versions as `run.versions` reads them; paths are
sorted into data, checkpoint and output paths; the metrics by `divergence`; error lines
by their masked text (`triage/formats/tracebacks.py:normalise`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from triage.errors import TriageError
from triage.memory.bearing import bears_on
from triage.memory.divergence import first_divergence, rule_text
from triage.memory.models import (ARGUMENT, CHECKPOINT_PATH, DATA_PATH, KIND_ORDER, OUTPUT_PATH, VERSION, Change,
                                  ChangeSummary)

if TYPE_CHECKING:
    from triage.run.run import Run

# Differ from run to run by design: never a change worth listing.
PER_RUN = frozenset({"wandb_run_id", "wandb_key", "master_port", "master_addr", "node_rank", "local_rank",
                     "timestamp", "run_id", "job_id"})
OUTPUT_NAMES = frozenset({"save", "output_dir", "logging_dir", "dump_details", "save_debug_rollout_data",
                          "save_debug_train_data", "tensorboard_dir", "wandb_dir", "trainer.default_local_dir",
                          "save_hf", "ckpt_dir"})
CHECKPOINT_NAMES = frozenset({"load", "ref_load", "hf_checkpoint", "critic_load", "load_debug_rollout_data",
                              "actor_rollout_ref.model.path", "model_name_or_path", "pretrain", "resume_from_checkpoint"})
DATA_NAMES = frozenset({"prompt_data", "eval_prompt_data", "data.train_files", "data.val_files", "dataset_name",
                        "train_files", "val_files", "dataset", "data_path", "prompt_data_path"})
MAX_NEW_ERRORS = 10


def _number(v: Any) -> float | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v.strip())
        except ValueError:
            return None
    return None


def _show(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, (list, tuple)):
        return " ".join(_show(x) for x in v)
    return str(v)


def _same(a: Any, b: Any) -> bool:
    na, nb = _number(a), _number(b)
    if na is not None and nb is not None:
        return na == nb or (math.isnan(na) and math.isnan(nb))
    if isinstance(a, str) and isinstance(b, str):
        return a.strip().rstrip("/") == b.strip().rstrip("/")
    return _show(a) == _show(b)


def _ratio(a: Any, b: Any) -> str | None:
    na, nb = _number(a), _number(b)
    if na is None or nb is None or na == 0 or nb == 0 or math.isnan(na) or math.isnan(nb):
        return None
    r = nb / na
    if r >= 1:
        return f"×{r:.3g}"
    return f"÷{1 / r:.3g}"


def _kind(name: str, values: tuple[Any, Any]) -> str:
    if name in OUTPUT_NAMES:
        return OUTPUT_PATH
    if name in CHECKPOINT_NAMES:
        return CHECKPOINT_PATH
    if name in DATA_NAMES:
        return DATA_PATH
    pathlike = any(isinstance(v, str) and "/" in v for v in values)
    if pathlike:
        leaf = name.rsplit(".", 1)[-1]
        if any(w in leaf for w in ("data", "dataset", "files", "prompt")):
            return DATA_PATH
        if any(w in leaf for w in ("load", "ckpt", "checkpoint", "model")):
            return CHECKPOINT_PATH
        if any(w in leaf for w in ("save", "output", "log", "dump", "dir")):
            return OUTPUT_PATH
    return ARGUMENT


def _args(run: Run) -> tuple[dict[str, Any], set[str]]:
    try:
        args = run.args
    except TriageError:
        return {}, set()
    origins = getattr(args, "_origins", {}) or {}
    aliases = {orig for canon, orig in origins.items() if orig != canon}
    return args.as_dict(), aliases


def argument_changes(run: Run, baseline: Run) -> list[Change]:
    ours, our_aliases = _args(run)
    theirs, their_aliases = _args(baseline)
    aliases = our_aliases | their_aliases
    out = []
    for name in sorted(set(ours) | set(theirs)):
        if name in PER_RUN or name in aliases:
            continue
        a, b = theirs.get(name), ours.get(name)
        if a is not None and b is not None and _same(a, b):
            continue
        kind = _kind(name, (a, b))
        out.append(Change(kind=kind, name=name, baseline=None if a is None else _show(a),
                          run=None if b is None else _show(b), note=_ratio(a, b) if kind == ARGUMENT else None,
                          bears_on=bears_on(kind, name)))
    return out


def version_changes(run: Run, baseline: Run) -> list[Change]:
    try:
        ours, theirs = run.versions.as_dict(), baseline.versions.as_dict()
    except TriageError:
        return []
    from packaging.version import InvalidVersion, Version

    out = []
    for pkg in sorted(set(ours) | set(theirs)):
        a, b = theirs.get(pkg), ours.get(pkg)
        if a == b:
            continue
        note = None
        if a and b:
            try:
                note = "upgrade" if Version(b) > Version(a) else "downgrade"
            except InvalidVersion:
                note = None
        out.append(Change(kind=VERSION, name=pkg, baseline=a, run=b, note=note, bears_on=bears_on(VERSION, pkg)))
    return out


def new_error_lines(run: Run, baseline: Run) -> list[str]:
    from triage.formats.tracebacks import normalise

    def errors(r: Run) -> list[str]:
        try:
            return [e.text for e in r.log.errors] if r.artifacts.logs else []
        except TriageError:
            return []

    seen = {normalise(t) for t in errors(baseline)}
    out: list[str] = []
    shown: set[str] = set()
    for text in errors(run):
        key = normalise(text)
        if key in seen or key in shown:
            continue
        shown.add(key)
        out.append(text.strip()[:240])
        if len(out) >= MAX_NEW_ERRORS:
            break
    return out


def _order(c: Change) -> tuple[int, int, str]:
    return (0 if c.bears_on else 1, KIND_ORDER.index(c.kind), c.name)


def compare(run: Run, baseline: Run, *, found_by: str = "given", status: str = "given as the baseline") -> ChangeSummary:
    changes = sorted(argument_changes(run, baseline) + version_changes(run, baseline), key=_order)
    divergences, aligned = first_divergence(run, baseline)
    return ChangeSummary(
        baseline=str(baseline.root), baseline_ref=baseline.ref, found_by=found_by, baseline_status=status,
        changes=changes, divergence=divergences[0] if divergences else None, other_divergences=divergences[1:6],
        new_errors=new_error_lines(run, baseline), aligned_steps=aligned, rule=rule_text(),
    )


def open_baseline(ref: str | Path, runs_root: str | None = None) -> Run:
    """The baseline run `ref`; BadInput (one line) when it is not a run."""
    from triage.api import recognisable
    from triage.errors import BadInput
    from triage.run import open_run

    try:
        run = open_run(str(ref), runs_root)
    except TriageError as exc:
        raise BadInput(f"baseline {ref}: {(str(exc).splitlines() or ['not a run'])[0]}") from None
    if not recognisable(run):
        raise BadInput(f"baseline {ref} is not a run: nothing in it reads as a training job's log, metrics or arguments")
    return run
