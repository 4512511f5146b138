"""The optional run manifest: `triage.yaml` / `triage.json` naming artifacts explicitly.

Example::

    framework: slime            # slime | miles | relax | hf_trainer
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
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from triage.errors import CorruptArtifact

MANIFEST_NAMES = ("triage.yaml", "triage.yml", "triage.json")


class Manifest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    framework: Literal["slime", "miles", "relax", "hf_trainer", "unknown"] | None = None
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
    for name in MANIFEST_NAMES:
        if (root / name).is_file():
            return root / name
    return None


def load_manifest(path: Path) -> Manifest:
    try:
        text = path.read_text(encoding="utf-8")
        raw = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (UnicodeDecodeError, json.JSONDecodeError, yaml.YAMLError) as exc:
        reason = str(exc).splitlines()[0]
        raise CorruptArtifact(path, f"manifest is not valid {'JSON' if path.suffix == '.json' else 'YAML'}: {reason}") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise CorruptArtifact(path, "manifest must be a mapping of artifact kinds to paths")
    try:
        return Manifest(**raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise CorruptArtifact(path, f"manifest field {loc}: {err['msg']}") from None
