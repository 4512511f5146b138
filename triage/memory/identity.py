"""Which job a run is (name, entrypoint, model), and its normalised error signature.

Two runs are "the same job" when every identity field both of them name agrees, and they
agree on at least one: a run that names no model, entrypoint or name matches nothing.
"""

from __future__ import annotations

from triage import safe_io

import re
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from triage.errors import TriageError

if TYPE_CHECKING:
    from triage.report import Report
    from triage.run.run import Run

# Arguments that name the job (W&B / TensorBoard grouping, verl's trainer.*, TRL's run_name), first found wins.
NAME_ARGS = ("wandb_group", "wandb_project", "trainer.experiment_name", "experiment_name", "run_name",
             "trainer.project_name", "project_name")
# Arguments that name the model trained.
MODEL_ARGS = ("hf_checkpoint", "actor_rollout_ref.model.path", "model_name_or_path", "pretrain", "model", "model_path")
# Logs larger than this are not read a second time for their first traceback (a cost, not a judgement:
# the static triage of a 1 GB log takes about 5 s, NOTES.md; the error-signature id or first error line is used).
MAX_SIGNATURE_LOG_BYTES = 256 << 20
_SCRIPT = re.compile(r"([\w./-]+\.py)\b|-m\s+([\w.]+)")


def _args(run: Run) -> Any:
    try:
        return run.args
    except TriageError:
        return {}


def _entrypoint(run: Run) -> str | None:
    text = None
    try:
        if run.artifacts.command_line is not None:
            with safe_io.open_regular(run.artifacts.command_line) as fh:
                text = fh.read(65536).decode("utf-8", "replace")
        elif run.artifacts.command:
            text = run.artifacts.command
        elif run.artifacts.logs and run.log.command_line:
            text = run.log.command_line
    except (OSError, TriageError):
        return None
    if not text:
        return None
    m = _SCRIPT.search(text)
    if not m:
        return None
    return PurePosixPath(m.group(1)).name if m.group(1) else m.group(2)


def job_identity(run: Run) -> dict[str, str]:
    """{"framework", "name", "entrypoint", "model"}: those the run names."""
    args = _args(run)
    out: dict[str, str] = {}
    try:
        out["framework"] = run.framework
    except TriageError:
        pass
    for key, names in (("name", NAME_ARGS), ("model", MODEL_ARGS)):
        for n in names:
            v = args.get(n) if args else None
            if isinstance(v, str) and v.strip():
                out[key] = PurePosixPath(v.rstrip("/")).name if key == "model" else v.strip()
                break
    entry = _entrypoint(run)
    if entry:
        out["entrypoint"] = entry
    return out


def same_job(a: dict[str, str], b: dict[str, str]) -> bool:
    shared = [k for k in ("name", "entrypoint", "model") if k in a and k in b]
    if not shared:
        return False
    if a.get("framework") and b.get("framework") and "unknown" not in (a["framework"], b["framework"]) \
            and a["framework"] != b["framework"]:
        return False
    return all(a[k] == b[k] for k in shared)


def _traceback_signature(run: Run) -> str | None:
    """The first traceback's signature in log order (the crash the walk's `crash_location` would pick first)."""
    logs = list(run.artifacts.logs)
    if not logs:
        return None
    try:
        if sum(Path(p).stat().st_size for p in logs) > MAX_SIGNATURE_LOG_BYTES:
            return None  # a second pass over a huge log is not worth a signature: the error line serves
    except OSError:
        return None
    try:
        reader = run.tracebacks  # (the reader the walk's crash_location used, when it ran here)
    except (OSError, TriageError):
        return None
    pos = {str(p): i for i, p in enumerate(logs)}
    groups = sorted(reader.groups.values(), key=lambda g: (pos.get(str(g.first.path), len(pos)), g.first.start_line))
    return groups[0].signature if groups else None


def error_signature(run: Run, report: Report | None = None) -> str | None:
    """The run's normalised error signature: the deciding traceback's (`crash_location`), else the
    first traceback's in the log (`triage/formats/tracebacks.py:signature_of`: exception type, masked
    message, in-app frames), else the error-signature probe's id, else the log's first error line,
    masked (`tracebacks.normalise`). None for a run without an error."""
    steps = report.path if report is not None else []
    for step in steps:
        sig = step.evidence.get("signature") if step.probe == "crash_location" else None
        if isinstance(sig, str) and sig:
            return sig
    sig = _traceback_signature(run)
    if sig:
        return sig
    for step in steps:
        sig = step.evidence.get("signature") if step.probe == "error_signatures" else None
        if isinstance(sig, str) and sig:
            return "error_signatures | " + sig
    try:
        errors = run.log.errors if run.artifacts.logs else []
    except TriageError:
        return None
    if not errors:
        return None
    from triage.formats.tracebacks import normalise

    return "line | " + normalise(errors[0].text)
