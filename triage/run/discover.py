"""Finding a run's artifacts in its directory, or taking them from its manifest."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from triage.errors import CorruptArtifact, RunNotFound
from triage.run.manifest import MANIFEST_NAMES, Manifest

MAX_ENTRIES = 50_000
MAX_DEPTH = 6
LOG_SUFFIXES = {".log", ".out", ".err", ".txt"}
LOG_NAMES = {"stdout", "stderr", "output", "log"}
NOT_LOGS = {"latest_checkpointed_iteration.txt", "cmdline.txt", "command.txt", "requirements.txt", "README.txt"}
COMMAND_FILES = ("cmdline.txt", "command.txt", "cmd.txt", "entrypoint.txt")
ITER_DIR = re.compile(r"^iter_\d{7}$")
FLIGHT_RECORDER = re.compile(r"(nccl_trace|fr_trace|flight_recorder|flightrecorder)", re.I)


@dataclass
class Artifacts:
    logs: list[Path] = field(default_factory=list)
    command_line: Path | None = None
    command: str | None = None
    trainer_states: list[Path] = field(default_factory=list)
    rollout_dumps: list[Path] = field(default_factory=list)
    train_dumps: list[Path] = field(default_factory=list)
    checkpoints: list[Path] = field(default_factory=list)
    hf_checkpoints: list[Path] = field(default_factory=list)
    engine_weights: list[Path] = field(default_factory=list)
    flight_recorder: list[Path] = field(default_factory=list)
    engines: list[str] = field(default_factory=list)

    def kinds(self) -> dict[str, int]:
        return {
            "logs": len(self.logs),
            "trainer_states": len(self.trainer_states),
            "rollout_dumps": len(self.rollout_dumps),
            "train_dumps": len(self.train_dumps),
            "checkpoints": len(self.checkpoints),
            "hf_checkpoints": len(self.hf_checkpoints),
            "engine_weights": len(self.engine_weights),
            "flight_recorder": len(self.flight_recorder),
            "engines": len(self.engines),
        }

    def empty(self) -> bool:
        return not any(self.kinds().values()) and self.command_line is None and self.command is None


def _manifest_paths(root: Path, values: list[str], field_name: str) -> list[Path]:
    out = []
    for value in values:
        p = (root / value).resolve() if not os.path.isabs(value) else Path(value)
        if not p.exists():
            raise CorruptArtifact(root / MANIFEST_NAMES[0], f"manifest names {field_name} {value!r}, which does not exist")
        out.append(p)
    return out


def _is_megatron_checkpoint(path: Path, names: set[str]) -> bool:
    return "latest_checkpointed_iteration.txt" in names or any(ITER_DIR.match(n) for n in names)


def _is_hf_checkpoint(names: set[str]) -> bool:
    return "config.json" in names and any(
        n.endswith(".safetensors") or n == "pytorch_model.bin" or n == "tokenizer_config.json" or n == "model.safetensors.index.json"
        for n in names
    )


def _walk(root: Path) -> Artifacts:
    found = Artifacts()
    seen = 0
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        here = Path(dirpath)
        depth = len(here.relative_to(root).parts)
        names = set(filenames) | set(dirnames)
        seen += len(names)
        if seen > MAX_ENTRIES:
            break
        if _is_megatron_checkpoint(here, names):
            found.checkpoints.append(here)
            dirnames[:] = []  # the checkpoint readers walk inside
            continue
        if here.name.startswith("iter_") or re.match(r"^mp_rank_\d{2}", here.name):
            dirnames[:] = []
            continue
        if _is_hf_checkpoint(names) and "trainer_state.json" not in names:
            found.hf_checkpoints.append(here)
        if here.name in ("engine_weights", "engine_dump") or "engine_weights.json" in names:
            found.engine_weights.append(here)
            dirnames[:] = []
            continue
        if depth >= MAX_DEPTH:
            dirnames[:] = []
        dirnames.sort()
        for name in sorted(filenames):
            path = here / name
            if name in MANIFEST_NAMES:
                continue
            if name == "trainer_state.json":
                found.trainer_states.append(path)
            elif name.endswith(".pt") and here.name == "rollout_data":
                found.rollout_dumps.append(path)
            elif name.endswith(".pt") and here.name == "train_data":
                found.train_dumps.append(path)
            elif FLIGHT_RECORDER.search(name) or here.name in ("flight_recorder", "fr_dumps"):
                found.flight_recorder.append(path)
            elif name in COMMAND_FILES and found.command_line is None:
                found.command_line = path
            elif name in NOT_LOGS:
                continue
            elif (path.suffix in LOG_SUFFIXES or name in LOG_NAMES) and here.name not in ("rollout_result", "trajectory"):
                found.logs.append(path)
    return found


def discover(root: Path, manifest: Manifest) -> Artifacts:
    """Artifacts named by the manifest where it names them; otherwise found on disk."""
    try:
        found = _walk(root)
    except PermissionError as exc:
        raise RunNotFound(f"cannot read run directory {root}: {exc.strerror}") from None
    for attr in ("logs", "trainer_states", "rollout_dumps", "train_dumps", "checkpoints",
                 "hf_checkpoints", "engine_weights", "flight_recorder"):
        named = getattr(manifest, attr)
        if named:
            setattr(found, attr, _manifest_paths(root, named, attr))
    if manifest.command_line:
        found.command_line = _manifest_paths(root, [manifest.command_line], "command_line")[0]
    if manifest.command:
        found.command = manifest.command
    found.engines = list(manifest.engines)
    if found.empty() and not manifest.args:
        if not any(root.iterdir()):
            raise RunNotFound(f"run directory {root} is empty: nothing to triage")
        raise RunNotFound(
            f"nothing to triage in {root}: expected a job log (*.log), trainer_state.json, "
            "--dump-details dumps, checkpoints, or a triage.yaml manifest naming them"
        )
    return found
