"""A Ray job as a run: `triage run raysubmit_…` / `triage run ray:<submission-id>`.

The job is materialised into an ordinary run directory, so everything downstream (the
probes, the cache, a Ray worker re-opening the run) reads files as for any other run:

    ~/.cache/triage/ray/<address-hash>/<submission-id>/
        job.log        the driver log, streamed from the dashboard to disk
        cmdline.txt    the job's entrypoint: the framework's flags come from it
        ray_job.json   what the dashboard said about the job (status, message, times, metadata)
        triage.yaml    the manifest: status mapped from Ray's, the log, the command line

Checkpoint and dump paths in the entrypoint's flags are the cluster's shared-filesystem
paths; `Run.resolve_path` takes them as given where they exist. Relative ones are
relative to the job's working directory: an entrypoint `cd /shared/run7 && python3
train.py --save ckpt …` has the manifest pin `save: /shared/run7/ckpt`. A job that is
still running is triaged on what it has written so far (the report says so).

The log of a finished job is fetched once; a running job's log is fetched again on each
open, and the file is replaced only when its content changed, so the findings cache
(which fingerprints sizes, mtimes and content) sees an unchanged run as unchanged.
Set $TRIAGE_RAY_CACHE to put the directories elsewhere (a shared filesystem, when
probes run with `--executor ray` on other machines).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
from pathlib import Path
from typing import Any

import yaml

from triage.ray.jobs_api import JobsClient, RayJob, check_submission_id
from triage.run import Run, open_run

CACHE_ENV = "TRIAGE_RAY_CACHE"
LOG_NAME = "job.log"
MESSAGE_LOG_NAME = "ray_message.log"
COMMAND_NAME = "cmdline.txt"
JOB_NAME = "ray_job.json"
MANIFEST_NAME = "triage.yaml"
COMPLETE_MARK = ".complete"
# Ray's job statuses as the manifest's run status.
STATUS_MAP = {
    "PENDING": "pending",
    "RUNNING": "running",
    "SUCCEEDED": "succeeded",
    "FAILED": "failed",
    "STOPPED": "stopped",
}
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")
# Flags whose values are paths the probes read (checkpoints, dumps, data).
PATH_FLAGS = ("load", "ref_load", "save", "hf_checkpoint", "dump_details", "save_debug_rollout_data",
              "load_debug_rollout_data", "save_debug_train_data", "prompt_data")


def ray_cache_root() -> Path:
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "triage" / "ray"


def address_hash(address: str) -> str:
    return hashlib.sha256(address.rstrip("/").lower().encode()).hexdigest()[:16]


def job_dir_name(submission_id: str) -> str:
    """The submission id itself where it is a safe file name; otherwise a digest of it."""
    if _SAFE_NAME.match(submission_id) and submission_id not in (".", ".."):
        return submission_id
    return "job-" + hashlib.sha256(submission_id.encode()).hexdigest()[:24]


def job_dir(address: str, submission_id: str, cache_root: Path | None = None) -> Path:
    return (cache_root or ray_cache_root()) / address_hash(address) / job_dir_name(submission_id)


def _sha256(path: Path) -> str | None:
    if not path.is_file():
        return None
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _write_if_changed(path: Path, text: str) -> None:
    """Write `text` unless the file already holds it: an unchanged file keeps its mtime."""
    data = text.encode("utf-8")
    try:
        if path.read_bytes() == data:
            return
    except OSError:
        pass
    tmp = path.with_name(path.name + ".part")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _fetch_log(client: JobsClient, job: RayJob, dest: Path) -> None:
    part = dest.with_name(dest.name + ".part")
    try:
        client.download_logs(job, part)
        if _sha256(part) == _sha256(dest):
            part.unlink()
        else:
            os.replace(part, dest)
    finally:
        if part.exists():
            part.unlink()


def working_dir(entrypoint: str) -> Path | None:
    """The directory an entrypoint `cd`s into before it runs the job (`cd DIR && python3 …`), when absolute."""
    try:
        tokens = shlex.split(entrypoint)
    except ValueError:
        return None
    if len(tokens) >= 3 and tokens[0] == "cd" and tokens[2] in ("&&", ";") and tokens[1].startswith("/"):
        return Path(tokens[1])
    return None


def pinned_paths(entrypoint: str) -> dict[str, Any]:
    """The path flags of the entrypoint that are relative, made absolute against its working directory."""
    from triage.formats.run_args import parse_command_line

    cwd = working_dir(entrypoint)
    if cwd is None:
        return {}
    flags = parse_command_line(entrypoint)
    return {k: str(cwd / v) for k in PATH_FLAGS
            if isinstance(v := flags.get(k), str) and v and not v.startswith(("/", "~", "$"))}


def _manifest(job: RayJob, address: str, logs: list[str]) -> dict:
    first = (job.message or "").strip().splitlines()
    description = f"Ray job {job.submission_id} at {address}: {job.status}"
    if first:
        # Ray's message repeats the log's tail after this; the first clause is the news
        description += f" ({first[0].split(', last available logs')[0].rstrip(':')[:300]})"
    manifest: dict[str, Any] = {
        "status": STATUS_MAP.get(job.status, None),
        "logs": logs,
        "command_line": COMMAND_NAME,
        "description": description,
    }
    pinned = pinned_paths(job.entrypoint)
    if pinned:
        manifest["args"] = pinned
    return manifest


def materialise_job(client: JobsClient, submission_id: str, cache_root: Path | None = None) -> tuple[Path, RayJob]:
    """Write the job's artifacts into its run directory; the directory and the job as the dashboard reported it."""
    sid = check_submission_id(submission_id)
    job = client.get_job(sid)
    root = job_dir(client.address, sid, cache_root)
    root.mkdir(parents=True, exist_ok=True)
    complete = root / COMPLETE_MARK
    mark = f"{job.key} {job.status} {job.end_time}"
    log_path = root / LOG_NAME
    if not (job.terminal and log_path.is_file() and complete.is_file() and complete.read_text() == mark):
        if complete.exists():
            complete.unlink()
        _fetch_log(client, job, log_path)
        if job.terminal:
            complete.write_text(mark)
    logs = [LOG_NAME]
    message_log = root / MESSAGE_LOG_NAME
    if log_path.stat().st_size == 0 and (job.message or "").strip():
        # the job died before its driver wrote anything (runtime env setup, supervisor start):
        # the dashboard's message is the only account of why
        _write_if_changed(message_log, job.message.rstrip("\n") + "\n")
        logs.append(MESSAGE_LOG_NAME)
    elif message_log.exists():
        message_log.unlink()
    _write_if_changed(root / COMMAND_NAME, job.entrypoint.rstrip("\n") + "\n")
    _write_if_changed(root / JOB_NAME, json.dumps({"address": client.address, **job.to_dict()}, indent=2) + "\n")
    _write_if_changed(root / MANIFEST_NAME, yaml.safe_dump(_manifest(job, client.address, logs), sort_keys=False))
    return root, job


def open_ray_run(submission_id: str, address: str | None = None, *, client: JobsClient | None = None,
                 cache_root: Path | None = None) -> Run:
    """The run a Ray job left: its log, entrypoint and status, read through the dashboard at `address`."""
    own = client is None
    client = client or JobsClient(address)
    try:
        root, job = materialise_job(client, submission_id, cache_root)
    finally:
        if own:
            client.close()
    run = open_run(str(root), runs_root="")
    run.ref = job.submission_id or submission_id
    return run
