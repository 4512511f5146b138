"""The optional run manifest: `triage.yaml` / `triage.json` naming artifacts explicitly.

Example::

    framework: slime            # slime | miles | relax | verl | openrlhf | hf_trainer | trl | axolotl | ms_swift
    status: failed              # failed | running | succeeded
    logs: [logs/driver.log]
    command_line: cmd.txt       # or an inline string under `command`
    rollout_dumps: [dump/rollout_data/0.pt]
    train_dumps: [dump/train_data/0_0.pt]
    checkpoints: [ckpt/actor]
    hf_checkpoints: [hf/Qwen2.5-0.5B-Instruct]
    engine_weights: [engine_dump/]
    engines: [http://127.0.0.1:30000]
    args: {rollout_max_response_len: 1024}
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from triage import safe_io
from triage.errors import CorruptArtifact

MANIFEST_NAMES = ("triage.yaml", "triage.yml", "triage.json")
MAX_MANIFEST_BYTES = 1024 * 1024  # a manifest names artifacts: 1 MB is over 10,000 paths (and parses in about 3 s)
MAX_MANIFEST_ENTRIES = 10_000  # paths, engines and args together: more than any run has files to name


class Manifest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    framework: Literal["slime", "miles", "relax", "verl", "openrlhf", "hf_trainer", "trl", "axolotl", "ms_swift",
                       "unknown"] | None = None
    status: Literal["failed", "running", "succeeded", "stopped", "pending"] | None = None
    logs: list[str] = []
    command: str | None = None
    command_line: str | None = None
    trainer_states: list[str] = []
    rollout_dumps: list[str] = []
    train_dumps: list[str] = []
    checkpoints: list[str] = []
    hf_checkpoints: list[str] = []
    engine_weights: list[str] = []
    flight_recorder: list[str] = []
    engines: list[str] = []
    args: dict[str, Any] = {}
    description: str | None = None


def find_manifest(root: Path) -> Path | None:
    """The run's manifest, if it has one (whatever it is: `load_manifest` refuses a FIFO or a symlink out)."""
    for name in MANIFEST_NAMES:
        try:
            os.lstat(root / name)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise CorruptArtifact(root / name, f"cannot read the manifest: {exc.strerror or exc}") from None
        return root / name
    return None


def _entries(raw: dict[str, Any]) -> int:
    return sum(len(v) if isinstance(v, (list, dict)) else 1 for v in raw.values())


def load_manifest(path: Path, roots: tuple[Path, ...] | None = None) -> Manifest:
    """The manifest at `path`, read only if it is a regular file inside `roots` (default: its directory)."""
    kind = "JSON" if path.suffix == ".json" else "YAML"
    try:
        text = safe_io.read_text(path, MAX_MANIFEST_BYTES, "manifest", roots or (path.parent.resolve(),))
        raw = safe_io.loads_json(text) if path.suffix == ".json" else safe_io.loads_yaml(text)
    except (UnicodeDecodeError, json.JSONDecodeError, yaml.YAMLError, ValueError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise CorruptArtifact(path, f"manifest is not valid {kind}: {reason}") from None
    except OSError as exc:  # RefusedFile included
        raise CorruptArtifact(path, f"cannot read the manifest: {exc.strerror or exc}") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise CorruptArtifact(path, "manifest must be a mapping of artifact kinds to paths")
    problem = safe_io.check_tree(raw)
    if problem:
        raise CorruptArtifact(path, f"manifest {problem}")
    entries = _entries(raw)
    if entries > MAX_MANIFEST_ENTRIES:
        raise CorruptArtifact(
            path, f"manifest has {entries} entries; the limit is {MAX_MANIFEST_ENTRIES} (MAX_MANIFEST_ENTRIES)")
    try:
        return Manifest.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise CorruptArtifact(path, f"manifest field {loc}: {err['msg']}") from None
