"""Readers for the debug dumps of slime / miles / Relax (`--dump-details`, `--save-debug-*-data`).

The frameworks write these with `torch.save` and read them back with
`weights_only=False`; the triage never does. Their content is plain containers,
tensors and strings, which `torch.load(..., weights_only=True)` reads; a file that
needs anything else is refused before any of its code can run.

Shapes (see FORMATS.md "Debug dumps"):

- rollout dump `rollout_data/{id}.pt`: ``{"rollout_id", "samples": [Sample dicts]}``
- legacy train dump `train_data/{id}_{rank}.pt`: ``{"rollout_id", "rank", "rollout_data": {column: [per sample]}}``
  (miles adds ``cp_rank``, ``cp_size``, ``qkv_format``)
- Relax train dump: ``{"rollout_id", "rank", "samples": [per-sample dicts]}``
- slime v2 train dump `train_data/{id}.pt`: ``{"format_version": 2, "rollout_id", "rank", "samples", "dp_shards", ...}``
"""

from __future__ import annotations

import math
import pickletools
import re
import warnings
import zipfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from triage import safe_io
from triage.errors import CorruptArtifact, UnsafeArtifact

_GLOBAL_IN_MESSAGE = re.compile(r"GLOBAL ([\w.]+)")
_GLOBAL_OPCODES = {"GLOBAL", "INST", "STACK_GLOBAL"}


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:300]
    return text.strip()[:300]


def _globals_in_raw_pickle(path: Path, max_pickles: int = 4) -> list[str]:
    """Global names a non-zip pickle file refers to, found by disassembly (nothing is executed)."""
    names: list[str] = []
    recent_strings: list[str] = []
    try:
        with safe_io.open_regular(path) as fh:
            for _ in range(max_pickles):
                for op, arg, _pos in pickletools.genops(fh):
                    if op.name in ("SHORT_BINUNICODE", "BINUNICODE", "UNICODE", "BINUNICODE8"):
                        recent_strings = (recent_strings + [str(arg)])[-2:]
                    elif op.name in ("GLOBAL", "INST"):
                        names.append(str(arg).replace(" ", "."))
                    elif op.name == "STACK_GLOBAL" and len(recent_strings) == 2:
                        names.append(".".join(recent_strings))
    except Exception:  # the end of the readable part; what was seen so far is the answer
        pass
    return sorted(set(names))


def _unsafe_globals(path: Path, message: str) -> list[str]:
    try:
        if zipfile.is_zipfile(path):
            import torch

            found = list(torch.serialization.get_unsafe_globals_in_checkpoint(path))
        else:
            found = _globals_in_raw_pickle(path)
    except Exception:
        found = []
    found += _GLOBAL_IN_MESSAGE.findall(message)
    return sorted(set(found))


def safe_torch_load(path: str | Path, extra_safe_globals: list[type] | None = None) -> object:
    """`torch.load` that only ever materialises tensors and plain containers.

    CUDA tensors come back on CPU. A file that would need any other class or
    function to unpickle raises `UnsafeArtifact` naming it, and nothing from the
    file runs; a truncated or non-torch file raises `CorruptArtifact`.
    `extra_safe_globals` admits a harmless class a real format needs (e.g.
    `argparse.Namespace` in Megatron's `common.pt`), and nothing else.
    """
    import pickle

    import torch

    p = Path(path)
    if not p.exists():
        raise CorruptArtifact(p, "file does not exist")
    if p.is_dir():
        raise CorruptArtifact(p, "is a directory, expected a file written by torch.save")
    if not p.is_file():
        raise CorruptArtifact(p, "not a regular file, expected a file written by torch.save")
    safe_io.regular_file(p)  # RefusedFile: a FIFO or device, a /proc file, a path outside the run
    try:
        if p.stat().st_size == 0:
            raise CorruptArtifact(p, "file is empty (0 bytes): the save was interrupted or the copy failed")
    except OSError as exc:
        raise CorruptArtifact(p, f"cannot read: {exc.strerror}") from None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if extra_safe_globals:
                with torch.serialization.safe_globals(list(extra_safe_globals)):
                    return torch.load(p, map_location="cpu", weights_only=True)
            return torch.load(p, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        message = str(exc)
        unsafe = _unsafe_globals(p, message)
        if extra_safe_globals:
            allowed = {f"{c.__module__}.{c.__qualname__}" for c in extra_safe_globals}
            unsafe = [name for name in unsafe if name not in allowed]
        if unsafe:
            raise UnsafeArtifact(
                p,
                f"the file needs arbitrary code to unpickle ({', '.join(unsafe[:5])}); "
                "the triage only loads plain tensors and containers",
            ) from None
        raise CorruptArtifact(p, f"not a readable torch.save file: {_first_line(message)}") from None
    except EOFError:
        raise CorruptArtifact(p, "file ends early (truncated): the save was interrupted or the copy failed") from None
    except OSError as exc:
        raise CorruptArtifact(p, f"cannot read: {exc.strerror or exc}") from None
    except RuntimeError as exc:
        message = _first_line(str(exc))
        if "central directory" in message or "zip archive" in message:
            raise CorruptArtifact(p, "truncated or damaged torch.save archive (zip central directory not found)") from None
        raise CorruptArtifact(p, f"not a readable torch.save file: {message}") from None
    except (KeyError, ValueError, TypeError, AttributeError, IndexError, MemoryError, zipfile.BadZipFile) as exc:
        raise CorruptArtifact(
            p, f"not a torch.save file ({type(exc).__name__}: {_first_line(str(exc)) or 'unreadable header'})"
        ) from None


# --- conversion helpers ----------------------------------------------------------


def _as_list(value: Any) -> list | None:
    """Tensors, numpy-free sequences and scalars as plain Python lists."""
    if value is None:
        return None
    tolist = getattr(value, "tolist", None)
    if callable(tolist) and not isinstance(value, (list, tuple, str, bytes)):
        out = tolist()
        return out if isinstance(out, list) else [out]
    if isinstance(value, (list, tuple)):
        return [v.tolist() if callable(getattr(v, "tolist", None)) else v for v in value]
    return None


def _as_float(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    item = getattr(value, "item", None)
    numel = getattr(value, "numel", None)
    if callable(item) and callable(numel):
        try:
            if numel() == 1:
                return float(item())
        except (RuntimeError, ValueError, TypeError):
            return None
    return None


def _as_int(value: Any) -> int | None:
    f = _as_float(value)
    if f is None or math.isnan(f) or math.isinf(f):
        return None
    return int(f)


def reward_value(reward: Any, reward_key: str | None = None) -> float | None:
    """A sample's reward as a float: the `--reward-key` entry of a dict reward, else its first number."""
    if isinstance(reward, dict):
        if reward_key is not None:
            return _as_float(reward.get(reward_key))
        for value in reward.values():
            f = _as_float(value)
            if f is not None:
                return f
        return None
    return _as_float(reward)


# --- rollout dumps ---------------------------------------------------------------


@dataclass
class RolloutDump:
    """One `rollout_data/{id}.pt`: the samples the rollout produced, as dicts."""

    path: Path
    rollout_id: int | str | None
    samples: list[dict[str, Any]]

    @property
    def is_eval(self) -> bool:
        return self.path.stem.startswith("eval_")

    def __len__(self) -> int:
        return len(self.samples)

    def response_lengths(self) -> list[int]:
        """Per sample: `response_length`, else the length of its loss mask or rollout log-probs."""
        out = []
        for s in self.samples:
            n = _as_int(s.get("response_length"))
            if n is None:
                for key in ("loss_mask", "rollout_log_probs"):
                    seq = _as_list(s.get(key))
                    if seq is not None:
                        n = len(seq)
                        break
            out.append(n if n is not None else 0)
        return out

    def rewards(self, reward_key: str | None = None) -> list[float | None]:
        return [reward_value(s.get("reward"), reward_key) for s in self.samples]

    def statuses(self) -> list[str]:
        out = []
        for s in self.samples:
            status = s.get("status")
            value = getattr(status, "value", status)
            out.append(str(value) if value is not None else "unknown")
        return out

    def status_counts(self) -> dict[str, int]:
        return dict(Counter(self.statuses()))

    def has_routed_experts(self) -> bool:
        """Whether the engine recorded routed experts (`rollout_routed_experts`, needed for routing replay)."""
        return any(s.get("rollout_routed_experts") is not None for s in self.samples)

    def responses(self) -> list[str]:
        return [str(s.get("response", "")) for s in self.samples]

    def groups(self) -> list[list[str]]:
        """The responses sampled for one prompt, per prompt (slime's `group_index`, else the prompt text)."""
        by: dict[Any, list[str]] = {}
        for s in self.samples:
            key = s.get("group_index")
            key = ("group", key) if isinstance(key, int) else ("prompt", str(s.get("prompt", "")))
            by.setdefault(key, []).append(str(s.get("response", "")))
        return list(by.values())


def load_rollout_dump(path: str | Path) -> RolloutDump:
    p = Path(path)
    if p.suffix in (".jsonl", ".json"):
        from triage.formats.completion_records import load_completion_record

        rollout_id, records = load_completion_record(p)
        return RolloutDump(path=p, rollout_id=rollout_id, samples=records)
    data = safe_torch_load(p)
    if not isinstance(data, dict):
        raise CorruptArtifact(
            p, f"expected a rollout dump {{'rollout_id', 'samples': [...]}}, found a {type(data).__name__}"
        )
    samples = data.get("samples")
    if not isinstance(samples, list):
        keys = ", ".join(sorted(map(str, data))[:8]) or "no keys"
        raise CorruptArtifact(
            p, f"expected a rollout dump {{'rollout_id', 'samples': [...]}}; 'samples' list missing (keys: {keys})"
        )
    bad = next((i for i, s in enumerate(samples) if not isinstance(s, dict)), None)
    if bad is not None:
        raise CorruptArtifact(p, f"sample {bad} is a {type(samples[bad]).__name__}, expected a dict of Sample fields")
    rollout_id = data.get("rollout_id")
    return RolloutDump(path=p, rollout_id=rollout_id if isinstance(rollout_id, (int, str)) else None, samples=samples)


# --- train dumps -----------------------------------------------------------------

# Canonical per-sample field -> the key names the frameworks use for it.
TRAIN_FIELDS: dict[str, tuple[str, ...]] = {
    "tokens": ("tokens",),
    "log_probs": ("log_probs",),
    "ref_log_probs": ("ref_log_probs",),
    "rollout_log_probs": ("rollout_log_probs",),
    "loss_mask": ("loss_masks", "loss_mask"),
    "advantages": ("advantages",),
    "returns": ("returns",),
    "values": ("values",),
    "entropy": ("entropy",),
    "kl": ("kl",),
}
TRAIN_SCALARS: dict[str, tuple[str, ...]] = {
    "response_lengths": ("response_lengths", "response_length"),
    "total_lengths": ("total_lengths", "total_length"),
    "rewards": ("rewards", "reward"),
    "raw_reward": ("raw_reward",),
}


@dataclass
class TrainDump:
    """One train dump, whatever its layout, as per-sample columns of plain lists.

    `sequences[name][i]` is sample i's sequence for a canonical field (`tokens`,
    `log_probs`, `ref_log_probs`, `rollout_log_probs`, `loss_mask`, `advantages`, …);
    a field absent from the dump is absent from `sequences`. With context
    parallelism > 1 a legacy dump holds CP-local shards (`cp_size` says so).
    """

    path: Path
    layout: str  # "legacy" | "relax" | "v2"
    rollout_id: int | None
    rank: int | None
    num_samples: int
    sequences: dict[str, list[list[float] | None]] = field(default_factory=dict)
    scalars: dict[str, list[float | None]] = field(default_factory=dict)
    cp_size: int | None = None
    extra_keys: list[str] = field(default_factory=list)

    def get(self, name: str) -> list[list[float] | None] | None:
        return self.sequences.get(name)

    @property
    def tokens(self) -> list[list[float] | None] | None:
        return self.sequences.get("tokens")

    @property
    def log_probs(self) -> list[list[float] | None] | None:
        return self.sequences.get("log_probs")

    @property
    def ref_log_probs(self) -> list[list[float] | None] | None:
        return self.sequences.get("ref_log_probs")

    @property
    def rollout_log_probs(self) -> list[list[float] | None] | None:
        return self.sequences.get("rollout_log_probs")

    @property
    def loss_mask(self) -> list[list[float] | None] | None:
        return self.sequences.get("loss_mask")

    @property
    def advantages(self) -> list[list[float] | None] | None:
        return self.sequences.get("advantages")

    @property
    def response_lengths(self) -> list[int | None]:
        values = self.scalars.get("response_lengths")
        if values is not None:
            return [int(v) if v is not None else None for v in values]
        mask = self.loss_mask
        return [len(m) if m is not None else None for m in mask] if mask is not None else [None] * self.num_samples


def _column_from_samples(samples: list[dict], keys: tuple[str, ...]) -> list[Any] | None:
    key = next((k for k in keys if any(k in s for s in samples)), None)
    if key is None:
        return None
    return [s.get(key) for s in samples]


def _column_from_rollout_data(rollout_data: dict, keys: tuple[str, ...], n: int) -> list[Any] | None:
    key = next((k for k in keys if k in rollout_data), None)
    if key is None:
        return None
    value = rollout_data[key]
    if isinstance(value, (list, tuple)):
        return list(value)
    as_list = _as_list(value)
    if as_list is not None and len(as_list) == n:
        return as_list
    return None


def _fill(dump: TrainDump, columns: dict[str, list[Any] | None]) -> None:
    for name in TRAIN_FIELDS:
        column = columns.get(name)
        if column is not None:
            dump.sequences[name] = [_sequence(v) for v in column]
    for name in TRAIN_SCALARS:
        column = columns.get(name)
        if column is not None:
            dump.scalars[name] = [_as_float(v) if not isinstance(v, dict) else reward_value(v) for v in column]


def _sequence(value: Any) -> list | None:
    seq = _as_list(value)
    if seq is not None:
        return seq
    f = _as_float(value)
    return [f] if f is not None else None


def _count(rollout_data: dict) -> int:
    for key in ("response_lengths", "tokens", "total_lengths", "loss_masks"):
        value = rollout_data.get(key)
        if isinstance(value, (list, tuple)):
            return len(value)
    for value in rollout_data.values():
        if isinstance(value, (list, tuple)):
            return len(value)
    return 0


def load_train_dump(path: str | Path) -> TrainDump:
    p = Path(path)
    data = safe_torch_load(p)
    expected = (
        "expected a train dump: {'rollout_id', 'rank', 'rollout_data': {...}} (legacy), "
        "{'rollout_id', 'rank', 'samples': [...]} (Relax) or {'format_version': 2, 'samples': [...]} (slime)"
    )
    if not isinstance(data, dict):
        raise CorruptArtifact(p, f"{expected}; found a {type(data).__name__}")
    rollout_id = _as_int(data.get("rollout_id"))
    rank = _as_int(data.get("rank"))
    extra = sorted(str(k) for k in data if k not in ("rollout_id", "rank", "rollout_data", "samples", "format_version"))

    if isinstance(data.get("rollout_data"), dict):
        rollout_data = data["rollout_data"]
        n = _count(rollout_data)
        dump = TrainDump(p, "legacy", rollout_id, rank, n, cp_size=_as_int(data.get("cp_size")), extra_keys=extra)
        columns = {name: _column_from_rollout_data(rollout_data, keys, n) for name, keys in {**TRAIN_FIELDS, **TRAIN_SCALARS}.items()}
        _fill(dump, columns)
        return dump

    samples = data.get("samples")
    if isinstance(samples, list):
        bad = next((i for i, s in enumerate(samples) if not isinstance(s, dict)), None)
        if bad is not None:
            raise CorruptArtifact(p, f"sample {bad} is a {type(samples[bad]).__name__}, expected a dict")
        version = data.get("format_version")
        if version is not None and version != 2:
            raise CorruptArtifact(p, f"train dump format_version {version!r} is not one the triage reads (it reads 2)")
        layout = "v2" if version == 2 else "relax"
        dump = TrainDump(p, layout, rollout_id, rank, len(samples), extra_keys=extra)
        columns = {name: _column_from_samples(samples, keys) for name, keys in {**TRAIN_FIELDS, **TRAIN_SCALARS}.items()}
        if columns.get("raw_reward") is None and isinstance(data.get("raw_reward"), (list, tuple)) and len(data["raw_reward"]) == len(samples):
            columns["raw_reward"] = list(data["raw_reward"])
        _fill(dump, columns)
        return dump

    keys = ", ".join(sorted(map(str, data))[:8]) or "no keys"
    raise CorruptArtifact(p, f"{expected}; found keys: {keys}")
