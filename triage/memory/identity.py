"""Which job a run is (name, entrypoint, model), and its normalised error signature.

Two runs are "the same job" when every identity field both of them name agrees, and they
agree on at least one: a run that names no model, entrypoint or name matches nothing.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath
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
            text = run.artifacts.command_line.read_text(errors="replace")[:65536]
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


def error_signature(run: Run, report: Report | None = None) -> str | None:
    """The run's normalised error signature: the deciding traceback's (`crash_location`,
    `triage/formats/tracebacks.py:signature_of`), else the error-signature probe's id, else
    the first error line of the log, masked (`tracebacks.normalise`)."""
    if report is not None:
        for probe in ("crash_location", "error_signatures"):
            for step in report.path:
                sig = step.evidence.get("signature") if step.probe == probe else None
                if isinstance(sig, str) and sig:
                    return sig
    try:
        errors = run.log.errors if run.artifacts.logs else []
    except TriageError:
        return None
    if not errors:
        return None
    from triage.formats.tracebacks import normalise

    return "line | " + normalise(errors[0].text)
