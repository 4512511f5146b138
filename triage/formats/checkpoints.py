"""Checkpoint layouts: what is on disk, and whether a framework could load it.

Only names, sizes and headers are read here (a checkpoint can be 100 GB); tensor
data is streamed elsewhere.

Megatron (`--load`, `--ref-load`, `--save`)::

    <dir>/latest_checkpointed_iteration.txt     an iteration number or `release`
    <dir>/iter_0000100/                         torch_dist: .metadata, __<rank>_<n>.distcp, common.pt, metadata.json
    <dir>/iter_0000100/mp_rank_00[_000][_000]/model_optim_rng.pt      legacy torch: one dir per TP[/PP][/EP] rank

Megatron only loads a directory holding the tracker file; without it slime falls
back to `--ref-load`, and Megatron warns that it "will start from random".

Hugging Face (`--hf-checkpoint`): config.json, *.safetensors (+ model.safetensors.index.json),
generation_config.json, tokenizer files.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import pickletools
import re
import struct
import zipfile
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from triage import safe_io
from triage.errors import CorruptArtifact

TRACKER = "latest_checkpointed_iteration.txt"
ITER_DIR = re.compile(r"^iter_(\d{7})$")
DISTCP = re.compile(r"^__(\d+)_(\d+)\.distcp$")
MP_RANK = re.compile(r"^mp_rank_(\d{2})(?:_(\d{3}))?(?:_(\d{3}))?$")
MAX_TRACKER_BYTES = 4096
MAX_METADATA_BYTES = 256 * 1024 * 1024
MAX_SAFETENSORS_HEADER = 100 * 1024 * 1024
MAX_JSON_BYTES = 64 * 1024 * 1024


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None


def _zip_truncated(path: Path) -> bool:
    """A torch.save zip whose central directory is gone (cut short while written or copied).

    Reads the first bytes and the end of the file only.
    """
    try:
        with safe_io.open_regular(path) as fh:
            magic = fh.read(2)
            return magic == b"PK" and not zipfile.is_zipfile(fh)
    except OSError:
        return False


# --- Megatron ----------------------------------------------------------------------


@dataclass
class IterationLayout:
    """One `iter_XXXXXXX` (or `release`) directory of a Megatron checkpoint."""

    name: str
    path: Path
    iteration: int | None
    format: str = "unknown"  # torch_dist | legacy | zarr | empty | unknown
    # torch_dist
    distcp_files: list[str] = field(default_factory=list)
    distcp_ranks: list[int] = field(default_factory=list)
    has_dcp_metadata: bool = False
    has_common: bool = False
    metadata_json: dict[str, Any] | None = None
    # legacy torch
    mp_dirs: list[str] = field(default_factory=list)
    tp_ranks: list[int] = field(default_factory=list)
    pp_ranks: list[int] = field(default_factory=list)
    ep_ranks: list[int] = field(default_factory=list)
    grid_complete: bool | None = None
    missing_cells: list[str] = field(default_factory=list)
    # both
    zero_byte: list[str] = field(default_factory=list)
    missing_files: list[str] = field(default_factory=list)
    truncated: list[str] = field(default_factory=list)
    total_bytes: int = 0
    problems: list[str] = field(default_factory=list)
    inspected: bool = True  # False: only named and its format guessed (not the iteration a loader opens)

    @property
    def intact(self) -> bool:
        return not self.problems

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "format": self.format, "bytes": self.total_bytes}
        if self.format == "torch_dist":
            out["distcp_files"] = len(self.distcp_files)
            out["ranks"] = len(self.distcp_ranks)
        if self.format == "legacy":
            out["grid"] = {"tp": len(self.tp_ranks), "pp": len(self.pp_ranks) or 1, "ep": len(self.ep_ranks) or 1}
            out["grid_complete"] = self.grid_complete
        if self.problems:
            out["problems"] = list(self.problems)
        return out


@dataclass
class MegatronCheckpoint:
    """A Megatron checkpoint directory as Megatron's loader would see it."""

    path: Path
    exists: bool
    tracker_exists: bool = False
    tracker_text: str | None = None  # stripped, at most 200 characters
    tracker_iteration: int | None = None
    tracker_release: bool = False
    tracker_problem: str | None = None  # missing / empty / not an iteration number
    iterations: dict[str, IterationLayout] = field(default_factory=dict)  # by directory name, in order
    named_dir: str | None = None  # the directory the tracker names
    named_exists: bool = False
    problems: list[str] = field(default_factory=list)

    @property
    def loaded_iteration(self) -> IterationLayout | None:
        """The iteration Megatron would load, when the tracker names one that exists."""
        return self.iterations.get(self.named_dir) if self.named_dir else None

    @property
    def iteration_names(self) -> list[str]:
        return list(self.iterations)

    @property
    def tracker_usable(self) -> bool:
        return self.tracker_exists and self.tracker_problem is None


def _read_tracker(ckpt: MegatronCheckpoint) -> None:
    tracker = ckpt.path / TRACKER
    if not tracker.is_file():
        ckpt.tracker_problem = f"no {TRACKER} in {ckpt.path}: Megatron will not load from this directory"
        return
    ckpt.tracker_exists = True
    try:
        with safe_io.open_regular(tracker) as fh:
            raw = fh.read(MAX_TRACKER_BYTES + 1)
    except OSError as exc:
        ckpt.tracker_problem = f"{TRACKER} cannot be read: {exc.strerror}"
        return
    text = raw.decode("utf-8", errors="replace").strip()
    ckpt.tracker_text = text[:200]
    if not text:
        ckpt.tracker_problem = f"{TRACKER} is empty: Megatron cannot tell which iteration to load"
        return
    if len(raw) > MAX_TRACKER_BYTES:
        ckpt.tracker_problem = f"{TRACKER} is {len(raw)}+ bytes of text, not an iteration number"
        return
    if text == "release":
        ckpt.tracker_release = True
        ckpt.named_dir = "release"
        return
    try:
        ckpt.tracker_iteration = int(text)
    except ValueError:
        shown = text if len(text) <= 40 else text[:40] + "…"
        ckpt.tracker_problem = f"{TRACKER} holds {shown!r}, neither an iteration number nor 'release'"
        return
    if ckpt.tracker_iteration < 0:
        ckpt.tracker_problem = f"{TRACKER} holds a negative iteration ({ckpt.tracker_iteration})"
        return
    ckpt.named_dir = f"iter_{ckpt.tracker_iteration:07d}"


def _dcp_storage_extents(path: Path) -> dict[str, int] | None:
    """File name -> bytes the DCP `.metadata` says it holds, by disassembling the pickle.

    `.metadata` is a pickle of torch.distributed.checkpoint dataclasses; it is never
    unpickled. Each `_StorageInfo` state appears as the sequence
    'relative_path', <file>, 'offset', <int>, 'length', <int>, read here from the
    opcode stream (memoised strings resolved), so nothing in the file can run.
    """
    size = _size(path)
    if not size or size > MAX_METADATA_BYTES:
        return None
    memo: dict[int, str | None] = {}
    last: Any = None
    window: deque[Any] = deque(maxlen=6)  # the last six literal values, memo references resolved
    extents: dict[str, int] = {}
    literal_ops = {"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE", "SHORT_BINSTRING", "BINSTRING",
                   "BININT", "BININT1", "BININT2", "LONG1", "LONG4", "INT", "LONG"}
    try:
        with safe_io.open_regular(path) as fh:
            for op, arg, _pos in pickletools.genops(fh):
                name = op.name
                if name in literal_ops:
                    last = arg
                elif name == "MEMOIZE":  # numbers every memoised object, so keep a slot for each
                    memo[len(memo)] = last if isinstance(last, str) else None
                    continue
                elif name in ("BINPUT", "LONG_BINPUT", "PUT"):
                    if isinstance(last, str):
                        memo[int(arg)] = last
                    continue
                elif name in ("BINGET", "LONG_BINGET", "GET"):
                    last = memo.get(int(arg))
                else:
                    last = None
                    if name not in ("MARK", "FRAME", "EMPTY_DICT", "EMPTY_TUPLE", "EMPTY_LIST"):
                        window.append(None)
                    continue
                window.append(last)
                if len(window) == 6 and window[4] == "length" and window[2] == "offset" and window[0] == "relative_path":
                    rel, offset, length = window[1], window[3], window[5]
                    if isinstance(rel, str) and isinstance(offset, int) and isinstance(length, int):
                        extents[rel] = max(extents.get(rel, 0), offset + length)
    except Exception:
        return None
    return extents or None


def _inspect_torch_dist(layout: IterationLayout, names: list[str]) -> None:
    d = layout.path
    layout.has_dcp_metadata = ".metadata" in names
    layout.has_common = "common.pt" in names
    ranks: dict[int, set[int]] = {}
    for n in names:
        m = DISTCP.match(n)
        if m:
            layout.distcp_files.append(n)
            ranks.setdefault(int(m.group(1)), set()).add(int(m.group(2)))
    layout.distcp_files.sort(key=_distcp_order)
    layout.distcp_ranks = sorted(ranks)

    if "metadata.json" in names:
        try:
            raw = safe_io.loads_json(safe_io.read_text(d / "metadata.json", MAX_JSON_BYTES, "metadata.json"))
            layout.metadata_json = raw if isinstance(raw, dict) else None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            layout.problems.append(f"{layout.name}/metadata.json is not valid JSON")
    else:
        layout.problems.append(
            f"{layout.name} has no metadata.json: Megatron will not recognise it as a distributed checkpoint"
        )
    if not layout.has_dcp_metadata:
        layout.problems.append(
            f"{layout.name} has no .metadata: the torch_dist save did not finish (it is written last)"
        )
    elif not _size(d / ".metadata"):
        layout.zero_byte.append(".metadata")
    if not layout.has_common:
        layout.problems.append(f"{layout.name} has no common.pt (the saved arguments and common state)")
    else:
        if not _size(d / "common.pt"):
            layout.zero_byte.append("common.pt")
        elif _zip_truncated(d / "common.pt"):
            layout.truncated.append("common.pt")

    extents = _dcp_storage_extents(d / ".metadata") if layout.has_dcp_metadata else None
    if not layout.distcp_files:
        layout.problems.append(f"{layout.name} has no __<rank>_<n>.distcp shard files")
    elif extents is None:
        # Without readable extents, expect every rank 0..max to have written the same file indices.
        missing_ranks = sorted(set(range(max(ranks) + 1)) - set(ranks))
        per_rank = set().union(*ranks.values())
        for r in sorted(ranks):
            layout.missing_files.extend(f"__{r}_{n}.distcp" for n in sorted(per_rank - ranks[r]))
        if missing_ranks:
            shown = ", ".join(map(str, missing_ranks[:10]))
            layout.problems.append(f"{layout.name}: no shard files from rank(s) {shown} of {max(ranks) + 1}")
        layout.zero_byte.extend(n for n in layout.distcp_files if not _size(d / n))
    if extents is not None:
        # .metadata says which file holds which bytes: the authoritative check.
        present = set(layout.distcp_files)
        for rel, needed in sorted(extents.items(), key=lambda kv: _distcp_order(kv[0])):
            if rel not in present:
                layout.missing_files.append(rel)
                continue
            size = _size(d / rel) or 0
            if size == 0 and needed > 0:
                layout.zero_byte.append(rel)
            elif size < needed:
                layout.truncated.append(f"{rel} ({size} of {needed} bytes)")


def _distcp_order(name: str) -> tuple[int, ...]:
    m = DISTCP.match(name)
    return tuple(int(x) for x in m.groups()) if m else (1 << 62,)


def _inspect_legacy(layout: IterationLayout, names: list[str], ep_hint: bool) -> None:
    d = layout.path
    cells: dict[tuple[int, int, int], str] = {}
    for n in names:
        m = MP_RANK.match(n)
        if not m or not (d / n).is_dir():
            continue
        tp = int(m.group(1))
        a, b = m.group(2), m.group(3)
        if a is not None and b is not None:
            pp, ep = int(a), int(b)
        elif a is not None:
            pp, ep = (0, int(a)) if ep_hint else (int(a), 0)
        else:
            pp, ep = 0, 0
        cells[(tp, pp, ep)] = n
        layout.mp_dirs.append(n)
    layout.mp_dirs.sort()
    tps = {c[0] for c in cells}
    pps = {c[1] for c in cells}
    eps = {c[2] for c in cells}
    layout.tp_ranks = list(range(max(tps) + 1))
    layout.pp_ranks = list(range(max(pps) + 1))
    layout.ep_ranks = list(range(max(eps) + 1))
    for cell in itertools.product(layout.tp_ranks, layout.pp_ranks, layout.ep_ranks):
        if cell not in cells:
            tp, pp, ep = cell
            label = f"tp={tp}" + (f", pp={pp}" if len(layout.pp_ranks) > 1 else "") + (f", ep={ep}" if len(layout.ep_ranks) > 1 else "")
            layout.missing_cells.append(label)
    layout.grid_complete = not layout.missing_cells
    if layout.missing_cells:
        grid = f"{len(layout.tp_ranks)} TP x {len(layout.pp_ranks)} PP" + (f" x {len(layout.ep_ranks)} EP" if len(layout.ep_ranks) > 1 else "")
        shown = "; ".join(layout.missing_cells[:6])
        layout.problems.append(f"{layout.name}: the {grid} grid is incomplete, no directory for {shown}")
    for cell, n in sorted(cells.items()):
        shard = d / n / "model_optim_rng.pt"
        size = _size(shard)
        if size is None:
            layout.missing_files.append(f"{n}/model_optim_rng.pt")
        elif size == 0:
            layout.zero_byte.append(f"{n}/model_optim_rng.pt")
        elif _zip_truncated(shard):
            layout.truncated.append(f"{n}/model_optim_rng.pt")
        optim = d / n / "distrib_optim.pt"
        if optim.exists() and not _size(optim):
            layout.zero_byte.append(f"{n}/distrib_optim.pt")


def _dir_bytes(path: Path, limit: int = 20_000) -> int:
    total = 0
    for i, p in enumerate(path.rglob("*")):
        if i >= limit:
            break
        try:
            if p.is_file():
                total += p.stat().st_size
        except OSError:
            continue
    return total


def inspect_iteration(path: str | Path, ep_hint: bool = False) -> IterationLayout:
    """The layout of one iteration directory; `ep_hint` reads `mp_rank_XX_YYY` as TP x EP (no PP)."""
    p = Path(path)
    m = ITER_DIR.match(p.name)
    layout = IterationLayout(name=p.name, path=p, iteration=int(m.group(1)) if m else None)
    try:
        names = sorted(x.name for x in p.iterdir())
    except OSError as exc:
        layout.format = "unknown"
        layout.problems.append(f"{p.name} cannot be listed: {exc.strerror}")
        return layout
    if not names:
        layout.format = "empty"
        layout.problems.append(f"{p.name} is empty: the save was interrupted or the files were not copied")
        return layout
    if any(MP_RANK.match(n) for n in names):
        layout.format = "legacy"
        _inspect_legacy(layout, names, ep_hint)
    elif any(DISTCP.match(n) for n in names) or ".metadata" in names:
        layout.format = "torch_dist"
        _inspect_torch_dist(layout, names)
    elif "metadata.json" in names:
        try:
            meta = safe_io.loads_json(safe_io.read_text(p / "metadata.json", MAX_JSON_BYTES, "metadata.json"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            meta = {}
        backend = meta.get("sharded_backend") if isinstance(meta, dict) else None
        layout.format = backend if backend in ("zarr", "torch_dist") else "unknown"
        if layout.format == "torch_dist":
            _inspect_torch_dist(layout, names)
    else:
        layout.problems.append(f"{p.name} holds neither torch_dist shards (*.distcp) nor mp_rank_* directories")
    if layout.zero_byte:
        layout.problems.append(f"{p.name}: zero-byte file(s): {', '.join(layout.zero_byte[:8])}")
    if layout.missing_files:
        layout.problems.append(f"{p.name}: missing shard file(s): {', '.join(layout.missing_files[:8])}")
    if layout.truncated:
        layout.problems.append(f"{p.name}: truncated file(s): {', '.join(layout.truncated[:8])}")
    layout.total_bytes = _dir_bytes(p)
    return layout


def _shallow_iteration(path: Path) -> IterationLayout:
    """An iteration a loader would not open: its name and likely format, nothing read."""
    m = ITER_DIR.match(path.name)
    layout = IterationLayout(name=path.name, path=path, iteration=int(m.group(1)) if m else None, inspected=False)
    try:
        with os.scandir(path) as it:
            for i, entry in enumerate(it):
                if MP_RANK.match(entry.name):
                    layout.format = "legacy"
                    break
                if DISTCP.match(entry.name) or entry.name == ".metadata":
                    layout.format = "torch_dist"
                    break
                if i > 64:
                    break
            else:
                if layout.format == "unknown" and not any(True for _ in path.iterdir()):
                    layout.format = "empty"
    except OSError:
        pass
    return layout


def inspect_megatron_checkpoint(path: str | Path, ep_hint: bool = False, also: str | None = None) -> MegatronCheckpoint:
    """Tracker, iterations and shard completeness of a Megatron checkpoint directory.

    The iteration the tracker names (and `also`, e.g. the one `--ckpt-step` asks
    for) is inspected shard by shard; the others are only listed, so a save
    directory with hundreds of iterations stays cheap. Never raises for what a
    user can get wrong: a missing directory, a missing or garbled tracker, a
    missing iteration or shard all become `problems`.
    """
    p = Path(path)
    if not p.is_dir():
        ckpt = MegatronCheckpoint(path=p, exists=False)
        ckpt.tracker_problem = f"{p} does not exist" if not p.exists() else f"{p} is a file, not a checkpoint directory"
        ckpt.problems.append(ckpt.tracker_problem)
        return ckpt
    ckpt = MegatronCheckpoint(path=p, exists=True)
    _read_tracker(ckpt)
    try:
        children = sorted(c for c in p.iterdir() if c.is_dir() and (ITER_DIR.match(c.name) or c.name == "release"))
    except OSError as exc:
        ckpt.problems.append(f"{p} cannot be listed: {exc.strerror}")
        children = []
    for child in children:
        ckpt.iterations[child.name] = _shallow_iteration(child)
    for name in {ckpt.named_dir, also}:
        if name and name in ckpt.iterations:
            ckpt.iterations[name] = inspect_iteration(ckpt.iterations[name].path, ep_hint=ep_hint)
    if ckpt.tracker_problem:
        ckpt.problems.append(ckpt.tracker_problem)
        if not ckpt.tracker_exists and ckpt.iterations:
            ckpt.problems.append(
                f"{len(ckpt.iterations)} iteration dir(s) exist ({', '.join(list(ckpt.iterations)[-3:])}) "
                f"but without {TRACKER} none of them is loaded"
            )
    if ckpt.named_dir:
        ckpt.named_exists = ckpt.named_dir in ckpt.iterations
        if not ckpt.named_exists:
            present = ", ".join(list(ckpt.iterations)[-3:]) or "none"
            ckpt.problems.append(
                f"{TRACKER} names {ckpt.named_dir}, which is not in {p} (iterations present: {present})"
            )
        else:
            ckpt.problems.extend(ckpt.iterations[ckpt.named_dir].problems)
    return ckpt


def saved_args(path: str | Path) -> dict[str, Any] | None:
    """The arguments a torch_dist checkpoint was saved with (`common.pt["args"]`), or None.

    `path` is a checkpoint directory (the tracker's iteration is used) or an
    iteration directory. Loaded with weights_only=True admitting argparse.Namespace
    alone; a common.pt that needs anything else raises `UnsafeArtifact`.
    """
    from triage.formats.dumps import safe_torch_load

    p = Path(path)
    common = p / "common.pt"
    if not common.is_file():
        ckpt = inspect_megatron_checkpoint(p)
        layout = ckpt.loaded_iteration or (list(ckpt.iterations.values())[-1] if ckpt.iterations else None)
        if layout is None:
            return None
        common = layout.path / "common.pt"
        if not common.is_file():
            return None
    data = safe_torch_load(common, extra_safe_globals=[argparse.Namespace])
    if not isinstance(data, dict):
        raise CorruptArtifact(common, f"expected a dict with 'args', found a {type(data).__name__}")
    args = data.get("args")
    if isinstance(args, argparse.Namespace):
        return dict(vars(args))
    if isinstance(args, dict):
        return dict(args)
    return None


# --- Hugging Face --------------------------------------------------------------------

HF_CONFIG_KEYS = (
    "model_type", "architectures", "hidden_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "intermediate_size", "vocab_size", "rope_theta", "rms_norm_eps",
    "tie_word_embeddings", "torch_dtype", "head_dim", "max_position_embeddings",
    "num_experts", "num_local_experts", "n_routed_experts", "moe_intermediate_size", "layer_norm_eps",
)


@dataclass
class SafetensorsFile:
    name: str
    size: int
    tensors: dict[str, tuple[str, tuple[int, ...]]] = field(default_factory=dict)  # name -> (dtype, shape)
    problem: str | None = None


@dataclass
class HFCheckpoint:
    path: Path
    exists: bool
    config: dict[str, Any] | None = None  # the keys in HF_CONFIG_KEYS that config.json has
    raw_config: dict[str, Any] | None = None
    safetensors: list[SafetensorsFile] = field(default_factory=list)
    index_weight_map: dict[str, str] | None = None
    has_pytorch_bin: bool = False
    generation_config: dict[str, Any] | None = None
    eos_token_ids: list[int] = field(default_factory=list)
    has_chat_template: bool | None = None
    eos_token: str | None = None
    pad_token: str | None = None
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def get(self, key: str) -> Any:
        return (self.config or {}).get(key)

    def tensor_names(self) -> list[str]:
        return sorted(name for f in self.safetensors for name in f.tensors)

    def tensor(self, name: str) -> tuple[str, tuple[int, ...]] | None:
        for f in self.safetensors:
            if name in f.tensors:
                return f.tensors[name]
        return None


def read_safetensors_header(path: str | Path) -> SafetensorsFile:
    """Tensor names, dtypes and shapes from a .safetensors header (8-byte length + JSON); no data read."""
    p = Path(path)
    size = _size(p)
    f = SafetensorsFile(name=p.name, size=size or 0)
    if size is None:
        f.problem = f"{p.name} is missing"
        return f
    if size == 0:
        f.problem = f"{p.name} is empty (0 bytes)"
        return f
    if size < 8:
        f.problem = f"{p.name} is {size} bytes, shorter than a safetensors header"
        return f
    try:
        with safe_io.open_regular(p) as fh:
            (n,) = struct.unpack("<Q", fh.read(8))
            if n > MAX_SAFETENSORS_HEADER or n + 8 > size:
                f.problem = f"{p.name}: header length {n} does not fit in the file ({size} bytes): truncated or not safetensors"
                return f
            header = safe_io.loads_json(fh.read(n).decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, struct.error) as exc:
        f.problem = f"{p.name}: unreadable safetensors header ({type(exc).__name__})"
        return f
    if not isinstance(header, dict):
        f.problem = f"{p.name}: safetensors header is not a JSON object"
        return f
    end = 0
    for name, entry in header.items():
        if name == "__metadata__" or not isinstance(entry, dict):
            continue
        offsets = entry.get("data_offsets")
        shape = entry.get("shape")
        f.tensors[name] = (str(entry.get("dtype")), tuple(shape) if isinstance(shape, list) and all(type(x) is int for x in shape) else ())
        if isinstance(offsets, list) and len(offsets) == 2 and all(isinstance(x, int) for x in offsets):
            end = max(end, offsets[1])
    if 8 + n + end > size:
        f.problem = f"{p.name} is truncated: {size} bytes, its header needs {8 + n + end}"
    return f


def _read_json(path: Path, what: str, problems: list[str]) -> dict[str, Any] | None:
    size = _size(path)
    if size is None:
        return None
    if size == 0:
        problems.append(f"{what} is empty (0 bytes)")
        return None
    if size > MAX_JSON_BYTES:
        problems.append(f"{what} is {size} bytes, too large to read")
        return None
    try:
        raw = safe_io.loads_json(safe_io.read_text(path, MAX_JSON_BYTES, what))
    except json.JSONDecodeError as exc:
        problems.append(f"{what} is not valid JSON (line {exc.lineno} column {exc.colno}: {exc.msg})")
        return None
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(f"{what} cannot be read ({type(exc).__name__})")
        return None
    if not isinstance(raw, dict):
        problems.append(f"{what} is not a JSON object")
        return None
    return raw


def _token_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    return None


def _config_view(raw: dict[str, Any]) -> dict[str, Any]:
    """The model-shape keys, looking into `text_config` and `rope_parameters` where newer configs keep them."""
    view: dict[str, Any] = {}
    nested = raw.get("text_config") if isinstance(raw.get("text_config"), dict) else {}
    for key in HF_CONFIG_KEYS:
        if key in raw:
            view[key] = raw[key]
        elif key in nested:
            view[key] = nested[key]
    if "torch_dtype" not in view and "dtype" in raw:
        view["torch_dtype"] = raw["dtype"]
    if "rope_theta" not in view:
        for holder in (raw, nested):
            rope = holder.get("rope_parameters") or holder.get("rope_scaling")
            if isinstance(rope, dict) and "rope_theta" in rope:
                view["rope_theta"] = rope["rope_theta"]
                break
    return view


def inspect_hf_checkpoint(path: str | Path) -> HFCheckpoint:
    """config.json, weight files and their index, generation and tokenizer settings of an HF checkpoint."""
    p = Path(path)
    if not p.is_dir():
        ckpt = HFCheckpoint(path=p, exists=False)
        ckpt.problems.append(f"{p} does not exist" if not p.exists() else f"{p} is a file, not a model directory")
        return ckpt
    ckpt = HFCheckpoint(path=p, exists=True)
    raw = _read_json(p / "config.json", "config.json", ckpt.problems)
    if raw is None and not (p / "config.json").exists():
        ckpt.problems.append(f"no config.json in {p}")
    if raw is not None:
        ckpt.raw_config = raw
        ckpt.config = _config_view(raw)

    try:
        names = sorted(x.name for x in p.iterdir() if x.is_file())
    except OSError as exc:
        ckpt.problems.append(f"{p} cannot be listed: {exc.strerror}")
        names = []
    ckpt.has_pytorch_bin = any(n == "pytorch_model.bin" or (n.startswith("pytorch_model-") and n.endswith(".bin")) for n in names)
    for n in names:
        if n.endswith(".safetensors"):
            f = read_safetensors_header(p / n)
            ckpt.safetensors.append(f)
            if f.problem:
                ckpt.problems.append(f.problem)
    by_name = {f.name: f for f in ckpt.safetensors}

    index_path = p / "model.safetensors.index.json"
    if index_path.exists():
        index = _read_json(index_path, "model.safetensors.index.json", ckpt.problems)
        weight_map = index.get("weight_map") if index else None
        if index is not None and not isinstance(weight_map, dict):
            ckpt.problems.append("model.safetensors.index.json has no 'weight_map'")
        elif isinstance(weight_map, dict):
            ckpt.index_weight_map = {str(k): str(v) for k, v in weight_map.items()}
            for shard in sorted(set(ckpt.index_weight_map.values())):
                if shard not in by_name:
                    count = sum(1 for v in ckpt.index_weight_map.values() if v == shard)
                    ckpt.problems.append(f"the index names shard {shard} ({count} tensor(s)), which is missing")
            absent = [
                t for t, shard in ckpt.index_weight_map.items()
                if shard in by_name and not by_name[shard].problem and t not in by_name[shard].tensors
            ]
            if absent:
                ckpt.problems.append(
                    f"{len(absent)} tensor(s) the index places in a shard are not in it, e.g. {absent[0]}"
                )
    if not ckpt.safetensors and not ckpt.has_pytorch_bin:
        ckpt.problems.append(f"no weights in {p}: no *.safetensors or pytorch_model*.bin")
    elif not ckpt.safetensors:
        ckpt.notes.append("weights are pytorch_model*.bin pickles: not inspected")

    gen = _read_json(p / "generation_config.json", "generation_config.json", ckpt.problems)
    if gen is not None:
        ckpt.generation_config = gen
        eos = gen.get("eos_token_id")
        if isinstance(eos, int) and not isinstance(eos, bool):
            ckpt.eos_token_ids = [eos]
        elif isinstance(eos, list):
            ckpt.eos_token_ids = [x for x in eos if isinstance(x, int) and not isinstance(x, bool)]
    elif raw is not None and isinstance(raw.get("eos_token_id"), (int, list)):
        eos = raw["eos_token_id"]
        ckpt.eos_token_ids = [eos] if isinstance(eos, int) else [x for x in eos if isinstance(x, int)]
        ckpt.notes.append("no generation_config.json: eos taken from config.json")

    tok = _read_json(p / "tokenizer_config.json", "tokenizer_config.json", ckpt.problems)
    if tok is not None:
        template = tok.get("chat_template")
        ckpt.has_chat_template = bool(template) or (p / "chat_template.jinja").exists() or (p / "chat_template.json").exists()
        ckpt.eos_token = _token_text(tok.get("eos_token"))
        ckpt.pad_token = _token_text(tok.get("pad_token"))
    elif (p / "chat_template.jinja").exists():
        ckpt.has_chat_template = True
    return ckpt
