"""Checkpoint readers that stream tensor by tensor, memory bounded by the largest tensor.

Four layouts, one shape of API (`listing()` without reading data, `tensors()` streaming,
and for the engine / baseline side `get(name)`):

- HF safetensors, one file or sharded (`model.safetensors.index.json`): opened with
  `safetensors.safe_open`, whose tensors are views of a memory map; the handle is
  closed after every few tens of MB so mapped pages do not pile up in the resident set.
- Megatron torch_dist (PyTorch distributed checkpoint, `.metadata` + `__<rank>_<n>.distcp`):
  `.metadata` is read with a restricted unpickler (torch's own `FileSystemReader`
  calls plain `pickle.load` on it, which would run whatever a hostile file names).
  Each stored chunk is a `torch.save` record: when its pickle (read with pickletools,
  never executed) describes a plain contiguous tensor, the chunk is a view of the
  memory-mapped file; otherwise `torch.load(weights_only=True)` reads it. Megatron
  stacks the layers of a homogeneous decoder into one tensor with a leading layer axis
  (and experts into a second one); they come out one layer / expert at a time, in the
  order their bytes lie in the files, with the next ones read ahead by a helper thread.
- Megatron legacy (`mp_rank_XX[_YYY][_ZZZ]/model_optim_rng.pt`): `torch.load(weights_only=True,
  mmap=True)`; TP shards merged along each parameter's partition dim, PP stages'
  local layer ids shifted to global, EP ranks' local experts to global.
- A torch state dict (`.pt` / `.bin`), e.g. an engine's weights dumped from `load_weights`.

A truncated or corrupt file raises `CorruptArtifact` naming it; a pickle that needs
code to load raises `UnsafeArtifact`.

Tensors that come out of a reader may be views of a memory-mapped file whose pages
are dropped once the reader moves on (they fault back in from the file if touched):
treat them as read-only and copy one before modifying it.
"""

from __future__ import annotations

import argparse
import ctypes
import io
import itertools
import json
import mmap
import os
import pickle
import pickletools
import queue
import re
import struct
import sys
import threading
import zipfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from triage import safe_io
from triage.errors import BadInput, CorruptArtifact, UnsafeArtifact
from triage.weights.convert import canonical_name, merge_tp_shards

TRACKER = "latest_checkpointed_iteration.txt"
ITER_DIR = re.compile(r"^iter_(\d{7})$")
MP_RANK = re.compile(r"^mp_rank_(\d{2})(?:_(\d{3}))?(?:_(\d{3}))?$")
LEGACY_FILES = ("model_optim_rng.pt", "model_rng.pt")
MAX_METADATA_BYTES = 1 << 30
MAX_SAFETENSORS_HEADER = 100 * 1024 * 1024
MAX_INDEX_BYTES = 64 * 1024 * 1024  # model.safetensors.index.json: a weight_map of a few hundred KB in real models
MAPPED_WINDOW = 64 * 1024 * 1024  # close a safetensors handle once this much was mapped through it
PREFETCH_BYTES = 256 * 1024 * 1024
NON_MODEL = re.compile(r"(^|\.)(optimizer|rng_state|rerun_state_machine)|_extra_state|(^|\.)_state")

SAFETENSORS_DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
    "BOOL": torch.bool, "F8_E4M3": torch.float8_e4m3fn, "F8_E5M2": torch.float8_e5m2,
}


@dataclass(frozen=True)
class TensorInfo:
    """A tensor's name, shape and dtype as listed without reading its data."""

    name: str
    shape: tuple[int, ...]
    dtype: torch.dtype
    file: str

    @property
    def nbytes(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n * torch.empty((), dtype=self.dtype).element_size()


# --- page-cache helpers ---------------------------------------------------------------------

_PAGE = mmap.PAGESIZE
_libc: Any = None


def file_mappings(path: str | Path) -> list[tuple[int, int]]:
    """Address ranges where this process maps a file (from /proc/self/maps; empty where there is none)."""
    real = os.path.realpath(path)
    out = []
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                parts = line.rstrip("\n").split(None, 5)
                if len(parts) == 6 and parts[5] == real:
                    lo, hi = parts[0].split("-")
                    out.append((int(lo, 16), int(hi, 16)))
    except OSError:
        pass
    return out


def release_pages(t: torch.Tensor, mappings: list[tuple[int, int]]) -> None:
    """Drop the resident pages of a tensor that lies in a private file mapping (torch.load mmap=True).

    The data stays valid: a later access faults it in again from the file. Without
    this, a memory-mapped checkpoint read end to end stays resident in full. Only
    pages inside `mappings` (file-backed ranges) are touched: on anonymous memory the
    same call would discard data.
    """
    global _libc
    if not sys.platform.startswith("linux") or t.numel() == 0 or not mappings:
        return
    start = t.data_ptr()
    end = start + t.numel() * t.element_size()
    for lo_map, hi_map in mappings:
        if lo_map <= start < hi_map:
            lo, hi = max(lo_map, start // _PAGE * _PAGE), min(hi_map, -(-end // _PAGE) * _PAGE)
            try:
                if _libc is None:
                    _libc = ctypes.CDLL(None, use_errno=True)
                    _libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
                _libc.madvise(ctypes.c_void_p(lo), ctypes.c_size_t(hi - lo), 4)  # MADV_DONTNEED
            except (OSError, AttributeError):
                pass
            return


def advise_willneed(path: str | Path, offset: int, length: int) -> None:
    """Ask the kernel to read a byte range into the page cache now, so a later read finds it there.

    The call itself can block while the reads are submitted; `ReadAhead` issues it from a
    helper thread so the reading overlaps the caller's work.
    """
    if not hasattr(os, "posix_fadvise") or length <= 0:
        return
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO must not block the hint
    except OSError:
        return
    try:
        os.posix_fadvise(fd, offset, length, os.POSIX_FADV_WILLNEED)
    except OSError:
        pass
    finally:
        os.close(fd)


class ReadAhead:
    """Byte ranges to pull into the page cache ahead of use, issued from one helper thread.

    The thread starts on the first request and ends by itself after a second with nothing
    to do, so nothing outlives the reading. Only the page cache is filled: no memory of
    the process is held.
    """

    IDLE_S = 1.0

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[tuple[str, int, int]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def request(self, path: str | Path, offset: int, length: int) -> None:
        if length <= 0:
            return
        self._queue.put((str(path), offset, length))
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="triage-readahead", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            try:
                path, offset, length = self._queue.get(timeout=self.IDLE_S)
            except queue.Empty:
                with self._lock:
                    if self._queue.empty():
                        self._thread = None
                        return
                continue
            advise_willneed(path, offset, length)


# --- torch.load with the harmless classes real checkpoints need ------------------------------


class _MegatronValue:
    """Inert stand-in for a Megatron enum / config object inside saved args: holds nothing, runs nothing."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args = args

    def __setstate__(self, state: Any) -> None:
        self.state = state

    def __repr__(self) -> str:
        return f"<megatron value {self.args!r}>"


# Megatron pickles these inside `args` (e.g. --attention-backend becomes an AttnBackend enum);
# they load as inert stand-ins, never as the real classes.
_MEGATRON_ARG_CLASSES = (
    "megatron.core.transformer.enums.AttnBackend",
    "megatron.core.transformer.enums.CudaGraphScope",
    "megatron.core.transformer.enums.CudaGraphModule",
    "megatron.core.transformer.enums.InferenceCudaGraphScope",
    "megatron.core.transformer.enums.AttnMaskType",
    "megatron.core.enums.ModelType",
    "megatron.core.rerun_state_machine.RerunMode",
    "megatron.core.rerun_state_machine.RerunState",
    "megatron.core.rerun_state_machine.RerunDiagnostic",
)


def _numpy_array_globals() -> list[Any]:
    """What numpy arrays (Megatron's saved `np_rng_state`) need: array reconstruction, no code."""
    try:
        import numpy as np

        try:
            from numpy._core.multiarray import _reconstruct
        except ImportError:  # numpy < 2
            from numpy.core.multiarray import _reconstruct  # type: ignore[no-redef]
        return [_reconstruct, np.ndarray, np.dtype, type(np.dtype(np.uint32))]
    except ImportError:
        return []


def safe_torch_load(path: Path, mmap_: bool = True) -> Any:
    """torch.load(weights_only=True) admitting argparse.Namespace, numpy arrays and inert Megatron enums."""
    allowed: list[Any] = [argparse.Namespace, *_numpy_array_globals()]
    allowed += [(_MegatronValue, name) for name in _MEGATRON_ARG_CLASSES]
    safe_io.regular_file(path)  # RefusedFile: a FIFO or device, a /proc file, a path outside the run
    try:
        with torch.serialization.safe_globals(allowed):
            return torch.load(path, map_location="cpu", weights_only=True, mmap=mmap_ and _is_zip(path))
    except pickle.UnpicklingError as exc:
        m = re.search(r"GLOBAL ([\w.]+)", str(exc))
        if m:
            raise UnsafeArtifact(path, f"needs class {m.group(1)} to unpickle; only tensors, "
                                       "argparse.Namespace and numpy arrays are loaded") from None
        raise CorruptArtifact(path, f"not a readable torch checkpoint: {_first_line(exc)}") from None
    except (RuntimeError, EOFError, ValueError, OSError, struct.error, OverflowError) as exc:
        raise CorruptArtifact(path, f"truncated or corrupt torch checkpoint: {_first_line(exc)}") from None


def _is_zip(path: Path) -> bool:
    """torch.load can memory-map only the zip format (torch >= 1.6); older files load whole."""
    try:
        with safe_io.open_regular(path) as fh:
            return fh.read(2) == b"PK"
    except OSError:
        return False


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


# --- tracker -------------------------------------------------------------------------------


def resolve_iteration_dir(root: Path, iteration: int | None = None) -> tuple[Path, int | None, bool]:
    """(iteration directory, iteration, whether the tracker named it) of a Megatron checkpoint dir.

    The tracker `latest_checkpointed_iteration.txt` names an iteration (-> `iter_{:07d}`)
    or `release` (-> `release/`). Without it, the newest `iter_*` is taken.
    """
    if iteration is not None:
        d = root / f"iter_{iteration:07d}"
        if not d.is_dir():
            raise BadInput(f"{root}: no iter_{iteration:07d} (have {', '.join(_iteration_names(root)) or 'none'})")
        return d, iteration, False
    tracker = root / TRACKER
    if tracker.is_file():
        try:
            text = safe_io.read_bytes(tracker, 4096, TRACKER).decode("utf-8", "replace").strip()[:64]
        except OSError as exc:  # RefusedFile too
            raise CorruptArtifact(tracker, f"cannot read: {exc.strerror or exc}") from None
        if text == "release":
            d = root / "release"
            if not d.is_dir():
                raise CorruptArtifact(tracker, "says `release` but there is no release/ directory")
            return d, None, True
        if not text.isdigit():
            raise CorruptArtifact(tracker, f"holds {text!r}, not an iteration number or `release`")
        d = root / f"iter_{int(text):07d}"
        if not d.is_dir():
            raise CorruptArtifact(tracker, f"names iteration {int(text)} but {d.name}/ is missing")
        return d, int(text), True
    names = _iteration_names(root)
    if names:
        return root / names[-1], int(ITER_DIR.match(names[-1]).group(1)), False  # type: ignore[union-attr]
    if (root / "release").is_dir():
        return root / "release", None, False
    raise BadInput(f"{root}: not a Megatron checkpoint (no {TRACKER}, no iter_* directories)")


def _iteration_names(root: Path) -> list[str]:
    try:
        return sorted(p.name for p in root.iterdir() if p.is_dir() and ITER_DIR.match(p.name))
    except OSError:
        return []


# --- safetensors ---------------------------------------------------------------------------


def read_safetensors_header(path: Path) -> tuple[int, dict[str, Any]]:
    """(data start offset, header) of a safetensors file, checked against the file's size."""
    try:
        with safe_io.open_regular(path) as fh:
            size = os.fstat(fh.fileno()).st_size
            head = fh.read(8)
            if len(head) < 8:
                raise CorruptArtifact(path, f"truncated: {size} bytes, not even a safetensors header")
            (n,) = struct.unpack("<Q", head)
            if n > MAX_SAFETENSORS_HEADER or 8 + n > size:
                raise CorruptArtifact(path, f"truncated or not safetensors: header claims {n} bytes, file has {size}")
            header = safe_io.loads_json(fh.read(n))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CorruptArtifact(path, f"safetensors header is not valid JSON: {_first_line(exc)}") from None
    except OSError as exc:
        raise CorruptArtifact(path, f"cannot read: {exc.strerror}") from None
    if not isinstance(header, dict):
        raise CorruptArtifact(path, "safetensors header is not a JSON object")
    data_start = 8 + n
    end = 0
    for name, v in header.items():
        if name == "__metadata__":
            continue
        offsets = v.get("data_offsets") if isinstance(v, dict) else None
        if (not isinstance(offsets, list) or len(offsets) != 2 or not all(isinstance(x, int) for x in offsets)
                or not isinstance(v.get("shape"), list) or not all(type(x) is int and x >= 0 for x in v["shape"])
                or not 0 <= offsets[0] <= offsets[1]):
            raise CorruptArtifact(path, f"safetensors header entry {name!r} has no valid shape / data_offsets")
        end = max(end, offsets[1])
    if data_start + end > size:
        raise CorruptArtifact(path, f"truncated: its header places tensor data up to byte {data_start + end}, "
                                    f"the file has {size}")
    return data_start, header


class WeightsReader:
    """Common surface: listing, streaming, random access, and bytes read."""

    format = "unknown"
    naming = "hf"

    def __init__(self, path: Path) -> None:
        self.path = path
        self.bytes_read = 0
        self.iteration: int | None = None
        self.tracker_used = False
        self.saved_args: dict[str, Any] | None = None

    def listing(self) -> list[TensorInfo]:
        raise NotImplementedError

    def tensors(self) -> Iterator[tuple[str, torch.Tensor]]:
        raise NotImplementedError

    def get(self, name: str) -> torch.Tensor:
        raise NotImplementedError(f"{self.format} reader has no random access")

    def prefetch(self, name: str) -> None:
        """Start reading a tensor's bytes in the background (a hint; may do nothing)."""

    def release(self, t: torch.Tensor) -> None:
        """The caller is done with a tensor from get(): drop what it keeps resident."""

    def names(self) -> list[str]:
        return [i.name for i in self.listing()]

    def describe(self) -> dict[str, Any]:
        return {"path": str(self.path), "format": self.format, "iteration": self.iteration}


class SafetensorsReader(WeightsReader):
    """HF safetensors: one file, a directory of shards, or a sharded index."""

    format = "safetensors"

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        files = self._files(path)
        self._info: dict[str, tuple[TensorInfo, int, int]] = {}  # name -> (info, abs start, abs end)
        for f in files:
            start, header = read_safetensors_header(f)
            for name, v in header.items():
                if name == "__metadata__" or not isinstance(v, dict):
                    continue
                dtype = SAFETENSORS_DTYPES.get(v.get("dtype", ""))
                if dtype is None:
                    raise CorruptArtifact(f, f"tensor {name!r} has unsupported dtype {v.get('dtype')!r}")
                a, b = v["data_offsets"]
                self._info[name] = (TensorInfo(name, tuple(v["shape"]), dtype, str(f)), start + a, start + b)
        self._handle: Any = None
        self._handle_file: str | None = None
        self._mapped = 0
        self._ahead = ReadAhead()

    @staticmethod
    def _files(path: Path) -> list[Path]:
        if path.is_file():
            return [path]
        index = path / "model.safetensors.index.json"
        if index.is_file():
            try:
                weight_map = safe_io.loads_json(safe_io.read_text(index, MAX_INDEX_BYTES, index.name))["weight_map"]
            except (KeyError, TypeError, UnicodeDecodeError, json.JSONDecodeError, OSError) as exc:
                raise CorruptArtifact(index, f"no usable weight_map: {_first_line(exc)}") from None
            files = sorted({path / f for f in weight_map.values()})
            missing = [f.name for f in files if not f.is_file()]
            if missing:
                raise CorruptArtifact(index, f"names shard(s) that are missing: {', '.join(missing[:5])}")
            return files
        files = sorted(path.glob("*.safetensors"))
        if not files:
            raise BadInput(f"{path}: no *.safetensors files")
        return files

    def listing(self) -> list[TensorInfo]:
        return [v[0] for v in sorted(self._info.values(), key=lambda v: (v[0].file, v[1]))]

    def names(self) -> list[str]:
        return list(self._info)

    def __contains__(self, name: str) -> bool:
        return name in self._info

    def info(self, name: str) -> TensorInfo:
        return self._info[name][0]

    def _open(self, file: str) -> Any:
        from safetensors import SafetensorError, safe_open

        if self._handle_file != file or self._mapped >= MAPPED_WINDOW:
            self.close()
            safe_io.regular_file(file)  # safetensors opens by name: a FIFO would block it
            try:
                self._handle = safe_open(file, framework="pt", device="cpu")
            except (SafetensorError, OSError) as exc:
                raise CorruptArtifact(file, f"cannot open safetensors: {_first_line(exc)}") from None
            self._handle_file, self._mapped = file, 0
        return self._handle

    def close(self) -> None:
        self._handle, self._handle_file, self._mapped = None, None, 0

    def prefetch(self, name: str) -> None:
        if name in self._info:
            info, a, b = self._info[name]
            self._ahead.request(info.file, a, b - a)

    def get(self, name: str) -> torch.Tensor:
        from safetensors import SafetensorError

        info, a, b = self._info[name]
        handle = self._open(info.file)
        try:
            t = handle.get_tensor(name)
        except (SafetensorError, OSError, RuntimeError) as exc:
            raise CorruptArtifact(info.file, f"tensor {name!r} unreadable: {_first_line(exc)}") from None
        self.bytes_read += b - a
        self._mapped += b - a
        return t

    def release(self, t: torch.Tensor) -> None:
        if self._mapped >= MAPPED_WINDOW:
            self.close()

    def tensors(self) -> Iterator[tuple[str, torch.Tensor]]:
        listing = self.listing()
        for i, info in enumerate(listing):
            if i + 1 < len(listing):
                self.prefetch(listing[i + 1].name)
            yield info.name, self.get(info.name)
            if self._mapped >= MAPPED_WINDOW:
                self.close()
        self.close()


# --- torch state dicts ---------------------------------------------------------------------


def _flat_state_dict(obj: Any) -> dict[str, torch.Tensor]:
    """Tensors of a saved state dict, whether bare or under `state_dict` / `model` / `module`."""
    if isinstance(obj, Mapping):
        tensors = {k: v for k, v in obj.items() if isinstance(k, str) and isinstance(v, torch.Tensor)}
        if tensors:
            return tensors
        for key in ("state_dict", "model", "module", "weights"):
            if isinstance(obj.get(key), Mapping):
                return _flat_state_dict(obj[key])
    return {}


class TorchStateDictReader(WeightsReader):
    """One or more torch.save'd state dicts (`.pt` / `.bin` / `.pth`), memory-mapped."""

    format = "torch"
    SUFFIXES = (".pt", ".bin", ".pth")

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        files = [path] if path.is_file() else sorted(p for p in path.iterdir() if p.suffix in self.SUFFIXES)
        if not files:
            raise BadInput(f"{path}: no .pt / .bin state dict files")
        self._tensors: dict[str, torch.Tensor] = {}
        self._file: dict[str, str] = {}
        self._mappings: list[tuple[int, int]] = []
        for f in files:
            before = set(file_mappings(f))
            sd = _flat_state_dict(safe_torch_load(f, mmap_=True))
            self._mappings += [r for r in file_mappings(f) if r not in before]  # ours, alive while sd is
            for name, t in sd.items():
                name = name[len("module."):] if name.startswith("module.") else name
                if name not in self._tensors:
                    self._tensors[name] = t
                    self._file[name] = str(f)
        if not self._tensors:
            raise CorruptArtifact(files[0], "holds no tensors (expected a state dict of name -> tensor)")

    def listing(self) -> list[TensorInfo]:
        return [TensorInfo(n, tuple(t.shape), t.dtype, self._file[n]) for n, t in self._tensors.items()]

    def names(self) -> list[str]:
        return list(self._tensors)

    def __contains__(self, name: str) -> bool:
        return name in self._tensors

    def info(self, name: str) -> TensorInfo:
        t = self._tensors[name]
        return TensorInfo(name, tuple(t.shape), t.dtype, self._file[name])

    def get(self, name: str) -> torch.Tensor:
        t = self._tensors[name]
        self.bytes_read += t.numel() * t.element_size()
        return t

    def release(self, t: torch.Tensor) -> None:
        release_pages(t, self._mappings)

    def tensors(self) -> Iterator[tuple[str, torch.Tensor]]:
        for name in list(self._tensors):
            t = self.get(name)
            yield name, t
            release_pages(t, self._mappings)


# --- torch distributed checkpoint (Megatron torch_dist) -----------------------------------


class _DcpMetadataUnpickler(pickle.Unpickler):
    """Loads `.metadata` admitting only torch.distributed.checkpoint's metadata classes.

    torch's `FileSystemReader.read_metadata` uses plain `pickle.load`. Here every global
    is checked: the DCP dataclasses, torch.Size / dtypes / layouts, pathlib paths,
    OrderedDict; Megatron's own classes (`MCoreMetadata` ...) become inert stand-ins;
    anything else is refused.
    """

    DCP = {
        ("torch.distributed.checkpoint.metadata", n)
        for n in ("Metadata", "TensorStorageMetadata", "BytesStorageMetadata", "ChunkStorageMetadata",
                  "TensorProperties", "MetadataIndex", "StorageMeta", "_MEM_FORMAT_ENCODING")
    } | {
        ("torch.distributed.checkpoint.filesystem", "_StorageInfo"),
        ("torch", "Size"),
        ("torch.serialization", "_get_layout"),
        ("collections", "OrderedDict"),
        ("pathlib", "PosixPath"),
        ("pathlib", "PurePosixPath"),
        ("pathlib", "WindowsPath"),
        ("pathlib", "PureWindowsPath"),
        ("builtins", "set"),
        ("builtins", "frozenset"),
    }

    def __init__(self, fh: Any, path: Path) -> None:
        super().__init__(fh)
        self.path = path

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in self.DCP:
            return super().find_class(module, name)
        if module == "torch" and isinstance(getattr(torch, name, None), (torch.dtype, torch.memory_format)):
            return getattr(torch, name)
        if module == "megatron" or module.startswith("megatron."):
            return _MegatronValue
        raise UnsafeArtifact(self.path, f"DCP metadata names class {module}.{name}, which is not a checkpoint "
                                        "metadata class; refusing to unpickle it")


def read_dcp_metadata(path: Path) -> Any:
    """The Metadata object of a DCP checkpoint's `.metadata`, read with the restricted unpickler."""
    import torch.distributed.checkpoint.metadata as dcp_md

    try:
        size = path.stat().st_size
    except OSError:
        raise CorruptArtifact(path, "missing: the torch_dist save did not finish (.metadata is written last)") from None
    if size == 0 or size > MAX_METADATA_BYTES:
        raise CorruptArtifact(path, f"{size} bytes: empty or implausibly large")
    try:
        with safe_io.open_regular(path) as fh:
            md = _DcpMetadataUnpickler(fh, path).load()
    except (UnsafeArtifact, CorruptArtifact):
        raise
    except Exception as exc:  # noqa: BLE001 - any unpickling failure means a damaged file
        raise CorruptArtifact(path, f"unreadable DCP metadata: {_first_line(exc)}") from None
    if not isinstance(md, dcp_md.Metadata) or not isinstance(getattr(md, "state_dict_metadata", None), Mapping):
        raise CorruptArtifact(path, "does not hold a torch.distributed.checkpoint Metadata")
    return md


class _FileSlice(io.RawIOBase):
    """A read-only window [offset, offset + length) of an open file, for torch.load."""

    def __init__(self, fh: Any, offset: int, length: int) -> None:
        super().__init__()
        self.fh, self.offset, self.length, self.pos = fh, offset, length, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, pos: int, whence: int = 0) -> int:
        base = {0: 0, 1: self.pos, 2: self.length}[whence]
        self.pos = max(0, base + pos)
        return self.pos

    def readinto(self, buf: Any) -> int:
        n = min(len(buf), self.length - self.pos)
        if n <= 0:
            return 0
        self.fh.seek(self.offset + self.pos)
        got = self.fh.readinto(memoryview(buf)[:n])
        self.pos += got or 0
        return got or 0


@dataclass
class _Chunk:
    offsets: tuple[int, ...]
    sizes: tuple[int, ...]
    file: str
    offset: int
    length: int
    transforms: Any


@dataclass
class _Unit:
    """One output tensor: a whole DCP tensor, or one layer (/ expert) of a stacked one."""

    name: str
    fqn: str
    lead: tuple[int, ...]  # fixed indices along the stacked leading axes
    shape: tuple[int, ...]
    dtype: torch.dtype
    chunks: list[_Chunk]


_STORAGE_DTYPES = {
    "BFloat16Storage": torch.bfloat16, "FloatStorage": torch.float32, "HalfStorage": torch.float16,
    "DoubleStorage": torch.float64, "LongStorage": torch.int64, "IntStorage": torch.int32,
    "ShortStorage": torch.int16, "CharStorage": torch.int8, "ByteStorage": torch.uint8, "BoolStorage": torch.bool,
}
_MARK = object()


def _saved_tensor_layout(pkl: bytes) -> tuple[torch.dtype, str, int, int, tuple[int, ...], tuple[int, ...]] | None:
    """(dtype, storage key, storage numel, offset, size, stride) of a torch.save'd plain tensor.

    Read off the pickle's opcodes with pickletools, never executed; anything but the
    plain `_rebuild_tensor_v2(storage, offset, size, stride, ...)` shape gives None.
    """
    stack: list[Any] = []
    try:
        for op, arg, _ in pickletools.genops(pkl):
            n = op.name
            if n in ("PROTO", "FRAME", "BINPUT", "LONG_BINPUT", "PUT", "MEMOIZE"):
                continue
            if n in ("BININT", "BININT1", "BININT2", "LONG1", "INT", "LONG",
                     "BINUNICODE", "SHORT_BINUNICODE", "UNICODE", "BINUNICODE8"):
                stack.append(arg)
            elif n == "MARK":
                stack.append(_MARK)
            elif n == "TUPLE":
                i = len(stack) - 1 - stack[::-1].index(_MARK)
                items = tuple(stack[i + 1:])
                del stack[i:]
                stack.append(items)
            elif n in ("TUPLE1", "TUPLE2", "TUPLE3"):
                k = int(n[-1])
                items = tuple(stack[-k:])
                del stack[-k:]
                stack.append(items)
            elif n == "EMPTY_TUPLE":
                stack.append(())
            elif n in ("NEWFALSE", "NEWTRUE"):
                stack.append(n == "NEWTRUE")
            elif n == "GLOBAL":
                stack.append(("global", *str(arg).split(" ", 1)))
            elif n == "STACK_GLOBAL":
                name, module = stack.pop(), stack.pop()
                stack.append(("global", module, name))
            elif n == "BINPERSID":
                stack.append(("persid", stack.pop()))
            elif n == "REDUCE":
                call_args, fn = stack.pop(), stack.pop()
                stack.append(("call", fn, call_args))
            elif n == "STOP":
                break
            else:
                return None
        (top,) = stack
        if top[0] != "call" or top[1] != ("global", "torch._utils", "_rebuild_tensor_v2"):
            return None
        (_, storage), offset, size, stride = top[2][:4]
        tag, (kind, module, cls), key, location, numel = storage
        if tag != "storage" or kind != "global" or module != "torch" or location != "cpu":
            return None
        dtype = _STORAGE_DTYPES[cls]
        return dtype, str(key), int(numel), int(offset), tuple(size), tuple(stride)
    except (ValueError, TypeError, KeyError, IndexError, AttributeError):
        return None


def _contiguous_strides(size: tuple[int, ...]) -> tuple[int, ...]:
    out, acc = [], 1
    for d in reversed(size):
        out.append(acc)
        acc *= d
    return tuple(reversed(out))


def _record_entries(raw: Any) -> dict[str, tuple[int, int]] | None:
    """name -> (data offset, size) of the stored (uncompressed) entries of a zip record."""
    try:
        z = zipfile.ZipFile(raw)
        out = {}
        for info in z.infolist():
            if info.compress_type != zipfile.ZIP_STORED:
                return None
            raw.seek(info.header_offset)
            head = raw.read(30)
            if head[:4] != b"PK\x03\x04":
                return None
            n, e = struct.unpack("<HH", head[26:30])
            out[info.filename] = (info.header_offset + 30 + n + e, info.file_size)
        return out
    except (zipfile.BadZipFile, OSError, ValueError, struct.error, EOFError):
        return None


# Megatron's torch_dist keys of homogeneous layers carry no layer id (a leading layer axis instead),
# and those of experts none (an expert axis): `decoder.layers.mlp.experts.experts.linear_fc1.weight`.
STACKED_LAYERS = re.compile(r"^(?P<head>(?:.*\.)?decoder\.layers\.)(?P<rest>(?!\d).+)$")
STACKED_EXPERTS = re.compile(r"\.mlp\.experts\.experts\.(?!\d)")


class TorchDistReader(WeightsReader):
    """A PyTorch distributed checkpoint directory (Megatron's torch_dist), model weights only."""

    format = "torch_dist"

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.metadata = read_dcp_metadata(path / ".metadata")
        self._maps: dict[str, mmap.mmap] = {}
        self._ahead = ReadAhead()
        self._units = self._plan()
        names = [u.name for u in self._units]
        self.naming = "megatron" if any(n.startswith(("decoder.", "embedding.", "output_layer")) for n in names) else "hf"
        self.saved_args = _common_args(path / "common.pt")

    def _storage(self) -> dict[tuple[str, tuple[int, ...]], Any]:
        out = {}
        for idx, info in (self.metadata.storage_data or {}).items():
            out[(idx.fqn, tuple(idx.offset or ()))] = info
        return out

    def _plan(self) -> list[_Unit]:
        import torch.distributed.checkpoint.metadata as dcp_md

        storage = self._storage()
        sizes: dict[str, int] = {}
        # every stored item, optimizer state included, must lie inside its file: a shard cut short anywhere
        # is a damaged checkpoint even where the bytes lost are not model weights
        for (fqn, _), info in storage.items():
            file = str(self.path / info.relative_path)
            if file not in sizes:
                try:
                    sizes[file] = os.path.getsize(file)
                except OSError:
                    raise CorruptArtifact(file, "missing: .metadata says it holds checkpoint data") from None
            if info.offset + info.length > sizes[file]:
                raise CorruptArtifact(file, f"truncated: .metadata places {fqn} at bytes {info.offset}.."
                                            f"{info.offset + info.length}, the file has {sizes[file]}")
        units: list[_Unit] = []
        for fqn, md in self.metadata.state_dict_metadata.items():
            if not isinstance(md, dcp_md.TensorStorageMetadata) or NON_MODEL.search(fqn):
                continue
            chunks = []
            for c in md.chunks:
                info = storage.get((fqn, tuple(c.offsets)))
                if info is None:
                    raise CorruptArtifact(self.path / ".metadata", f"no storage entry for {fqn} at {tuple(c.offsets)}")
                file = str(self.path / info.relative_path)
                chunks.append(_Chunk(tuple(c.offsets), tuple(c.sizes), file, info.offset, info.length,
                                     getattr(info, "transform_descriptors", None)))
            units.extend(self._units_of(fqn, tuple(md.size), md.properties.dtype, chunks))
        # in the order the bytes lie in the files (DCP does not write in state-dict order): one sequential pass
        return sorted(units, key=lambda u: min(((c.file, c.offset) for c in u.chunks), default=("", 0)))

    @staticmethod
    def _units_of(fqn: str, size: tuple[int, ...], dtype: torch.dtype, chunks: list[_Chunk]) -> list[_Unit]:
        """Split a stacked tensor into its layers (and experts); other tensors are one unit."""
        layers = STACKED_LAYERS.match(fqn)
        experts = STACKED_EXPERTS.search(fqn)
        axes = int(bool(layers)) + int(bool(experts))
        if axes == 0 or len(size) <= axes:
            return [_Unit(canonical_name(fqn), fqn, (), size, dtype, chunks)]
        by_first: dict[int, list[_Chunk]] = {}
        for c in chunks:  # Megatron stores one chunk per layer (and TP rank); a plain DCP one for all
            for i in range(c.offsets[0], c.offsets[0] + c.sizes[0]):
                by_first.setdefault(i, []).append(c)
        units = []
        for lead in itertools.product(*(range(size[k]) for k in range(axes))):
            name = fqn
            if layers:
                name = f"{layers['head']}{lead[0]}.{layers['rest']}"
            if experts:
                name = STACKED_EXPERTS.sub(f".mlp.experts.local_experts.{lead[-1]}.", name, count=1)
            own = [c for c in by_first.get(lead[0], [])
                   if all(c.offsets[k] <= lead[k] < c.offsets[k] + c.sizes[k] for k in range(1, axes))]
            units.append(_Unit(canonical_name(name), fqn, tuple(lead), size[axes:], dtype, own))
        return units

    def listing(self) -> list[TensorInfo]:
        return [TensorInfo(u.name, u.shape, u.dtype, u.chunks[0].file if u.chunks else str(self.path))
                for u in self._units]

    def _map(self, file: str) -> mmap.mmap:
        if file not in self._maps:
            with safe_io.open_regular(file) as fh:
                self._maps[file] = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_COPY)  # private: never writes back
        return self._maps[file]

    def _view_chunk(self, c: _Chunk, fqn: str) -> torch.Tensor | None:
        """The chunk as a view of the memory-mapped file when its record is a plain stored tensor, else None.

        DCP writes each chunk as a torch.save zip record; its data entry holds the raw
        bytes. Mapping them avoids a copy and a fresh allocation per chunk.
        """
        with safe_io.open_regular(c.file, buffering=0) as fh:
            raw = io.BufferedReader(_FileSlice(fh, c.offset, c.length), 64 * 1024)
            entries = _record_entries(raw)
            if not entries:
                return None
            pkl = next((k for k in entries if k.endswith("/data.pkl") or k == "data.pkl"), None)
            order = next((k for k in entries if k.endswith("/byteorder")), None)
            if pkl is None:
                return None
            def read(name: str) -> bytes:
                off, size = entries[name]
                raw.seek(off)
                return raw.read(size)
            if order is not None and read(order) != b"little" or sys.byteorder != "little":
                return None
            layout = _saved_tensor_layout(read(pkl))
        if layout is None:
            return None
        dtype, key, numel, offset, size, stride = layout
        data = next((k for k in entries if k.endswith(f"/data/{key}")), None)
        elem = torch.empty((), dtype=dtype).element_size()
        count = 1
        for d in size:
            count *= d
        if (data is None or offset != 0 or size != c.sizes or count != numel or entries[data][1] != numel * elem
                or any(st != want and d > 1 for st, want, d in zip(stride, _contiguous_strides(size), size))
                or count == 0):
            return None
        return torch.frombuffer(self._map(c.file), dtype=dtype, count=count,
                                offset=c.offset + entries[data][0]).view(size)

    def _drop(self, c: _Chunk) -> None:
        """Drop a chunk's mapped pages from the resident set (they are re-read from the file if touched)."""
        mm = self._maps.get(c.file)
        if mm is None or not hasattr(mm, "madvise"):
            return
        lo = c.offset // _PAGE * _PAGE
        hi = min(-(-(c.offset + c.length) // _PAGE) * _PAGE, len(mm))
        try:
            mm.madvise(mmap.MADV_DONTNEED, lo, hi - lo)
        except (OSError, ValueError):
            pass

    def _load_chunk(self, c: _Chunk, fqn: str) -> torch.Tensor:
        if c.transforms:
            raise BadInput(f"{c.file}: {fqn} is stored with transforms {list(c.transforms)}, which this reader "
                           "does not decode")
        try:
            t = self._view_chunk(c, fqn)
            if t is None:
                with safe_io.open_regular(c.file, buffering=0) as fh:
                    fh.seek(c.offset)
                    magic = fh.read(2)
                    if magic == b"PK":  # a torch.save record (DCP's default serialization)
                        t = torch.load(io.BufferedReader(_FileSlice(fh, c.offset, c.length), 1 << 20),
                                       map_location="cpu", weights_only=True)
                    else:  # raw bytes (DCP's safetensors-style serialization)
                        t = torch.empty(c.sizes, dtype=self._dtype_of(fqn))
                        if t.numel() * t.element_size() != c.length:
                            raise ValueError(f"{c.length} bytes do not hold a {list(c.sizes)} tensor")
                        fh.seek(c.offset)
                        fh.readinto(memoryview(t.view(-1).view(torch.uint8).numpy()))
        except (pickle.UnpicklingError, RuntimeError, EOFError, ValueError, OSError) as exc:
            raise CorruptArtifact(c.file, f"tensor {fqn} at byte {c.offset}: {_first_line(exc)}") from None
        if not isinstance(t, torch.Tensor) or tuple(t.shape) != c.sizes:
            got = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
            raise CorruptArtifact(c.file, f"tensor {fqn} at byte {c.offset} is {got}, .metadata says {c.sizes}")
        self.bytes_read += c.length
        return t

    def _dtype_of(self, fqn: str) -> torch.dtype:
        return self.metadata.state_dict_metadata[fqn].properties.dtype

    def _load_unit(self, u: _Unit, cache: dict[str, Any]) -> torch.Tensor:
        lead = len(u.lead)
        region_start = u.lead + (0,) * len(u.shape)
        region_size = (1,) * lead + u.shape
        parts = [c for c in u.chunks if _overlaps(c.offsets, c.sizes, region_start, region_size)]
        if not parts:
            raise CorruptArtifact(self.path / ".metadata", f"no stored chunk covers {u.name}")
        out: torch.Tensor | None = None
        for c in parts:
            key = (u.fqn, c.offsets)
            if cache.get("key") == key:
                t = cache["tensor"]
            else:
                t = self._load_chunk(c, u.fqn)
                if "chunk" in cache:
                    self._drop(cache["chunk"])
                cache.clear()
                if any(s > 1 for s in c.sizes[:lead]):  # spans several layers: keep it for the next ones
                    cache.update(key=key, tensor=t, chunk=c)
            src, dst = [], []
            for d in range(len(region_size)):
                lo = max(c.offsets[d], region_start[d])
                hi = min(c.offsets[d] + c.sizes[d], region_start[d] + region_size[d])
                src.append(slice(lo - c.offsets[d], hi - c.offsets[d]))
                dst.append(slice(lo - region_start[d], hi - region_start[d]))
            piece = t[tuple(src)]
            if len(parts) == 1 and tuple(piece.shape) == region_size:
                return piece.reshape(u.shape) if lead else piece
            if out is None:
                out = torch.empty(region_size, dtype=u.dtype)
            out[tuple(dst)] = piece
            del t, piece
        assert out is not None
        return out.reshape(u.shape)

    def tensors(self) -> Iterator[tuple[str, torch.Tensor]]:
        cache: dict[str, Any] = {}
        order: list[_Chunk] = []  # every stored chunk once, in the order the units need them
        first: list[int] = []  # index in `order` of each unit's first chunk
        seen: dict[tuple[str, int], int] = {}
        for u in self._units:
            first.append(len(order))
            for c in u.chunks:
                if (c.file, c.offset) not in seen:
                    seen[(c.file, c.offset)] = len(order)
                    order.append(c)
        ends = list(itertools.accumulate(c.length for c in order))  # bytes up to and including chunk k
        ahead = 0
        for i, u in enumerate(self._units):
            # keep the kernel reading up to PREFETCH_BYTES ahead of the chunk being loaded
            start = ends[first[i] - 1] if first[i] else 0
            while ahead < len(order) and ends[ahead] - start <= PREFETCH_BYTES:
                self._ahead.request(order[ahead].file, order[ahead].offset, order[ahead].length)
                ahead += 1
            yield u.name, self._load_unit(u, cache)
            for c in u.chunks:  # the consumer is done with it: its mapped pages need not stay resident
                if cache.get("chunk") is not c:
                    self._drop(c)
        if "chunk" in cache:
            self._drop(cache["chunk"])
        cache.clear()


def _overlaps(off: tuple[int, ...], size: tuple[int, ...], start: tuple[int, ...], length: tuple[int, ...]) -> bool:
    return all(o < s + n and s < o + z for o, z, s, n in zip(off, size, start, length))


def _common_args(path: Path) -> dict[str, Any] | None:
    """The arguments a torch_dist save keeps in common.pt (`["args"]`), when readable."""
    if not path.is_file():
        return None
    try:
        common = safe_torch_load(path, mmap_=False)
    except (CorruptArtifact, UnsafeArtifact):
        return None
    args = common.get("args") if isinstance(common, Mapping) else None
    return vars(args) if isinstance(args, argparse.Namespace) else None


# --- Megatron legacy -------------------------------------------------------------------------


@dataclass
class _RankFile:
    tp: int
    pp: int
    ep: int
    path: Path


class LegacyMegatronReader(WeightsReader):
    """`mp_rank_XX[_YYY][_ZZZ]/model_optim_rng.pt` shards merged into global Megatron names."""

    format = "legacy"
    naming = "megatron"

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        dirs = sorted(p for p in path.iterdir() if p.is_dir() and MP_RANK.match(p.name))
        if not dirs:
            raise BadInput(f"{path}: no mp_rank_* directories")
        first = self._file_in(dirs[0])
        args = self._args(safe_torch_load(first))
        self.saved_args = vars(args) if args is not None else None
        a = self.saved_args or {}
        self.tp_size = int(a.get("tensor_model_parallel_size") or 1)
        self.pp_size = int(a.get("pipeline_model_parallel_size") or 1)
        self.ep_size = int(a.get("expert_model_parallel_size") or 1)
        etp = a.get("expert_tensor_parallel_size")
        self.etp_size = int(etp) if etp else self.tp_size
        self.num_experts = int(a.get("num_experts") or 0)
        self.gated = bool(a.get("swiglu", True))
        self.files = [self._rank_file(d, args is not None) for d in dirs]
        self.tp_size = max(self.tp_size, 1 + max(f.tp for f in self.files))
        self.pp_size = max(self.pp_size, 1 + max(f.pp for f in self.files))
        self.ep_size = max(self.ep_size, 1 + max(f.ep for f in self.files))
        if self.etp_size > self.tp_size:
            self.etp_size = self.tp_size
        self._check_complete()
        self._offsets: dict[tuple[int, int], int] | None = None
        self._loaded: dict[tuple[int, int, int], dict[str, dict[str, torch.Tensor]]] = {}
        self._mappings: list[tuple[int, int]] = []

    @staticmethod
    def _file_in(d: Path) -> Path:
        for name in LEGACY_FILES:
            if (d / name).is_file():
                return d / name
        raise CorruptArtifact(d, f"holds no {LEGACY_FILES[0]}")

    @staticmethod
    def _args(sd: Any) -> argparse.Namespace | None:
        args = sd.get("args") if isinstance(sd, Mapping) else None
        return args if isinstance(args, argparse.Namespace) else None

    def _rank_file(self, d: Path, have_args: bool) -> _RankFile:
        m = MP_RANK.match(d.name)
        assert m is not None
        tp, a, b = int(m.group(1)), m.group(2), m.group(3)
        if a is not None and b is not None:
            pp, ep = int(a), int(b)
        elif a is not None:  # one 3-digit group: PP rank, unless the args say PP is off and EP is on
            pp, ep = (0, int(a)) if have_args and self.pp_size == 1 and self.ep_size > 1 else (int(a), 0)
        else:
            pp, ep = 0, 0
        return _RankFile(tp, pp, ep, self._file_in(d))

    def _check_complete(self) -> None:
        have = {(f.tp, f.pp, f.ep) for f in self.files}
        for pp in range(self.pp_size):
            for ep in range(self.ep_size):
                for tp in range(self.tp_size):
                    if (tp, pp, ep) not in have:
                        name = f"mp_rank_{tp:02d}" + (f"_{pp:03d}" if self.pp_size > 1 else "") + \
                               (f"_{ep:03d}" if self.ep_size > 1 else "")
                        raise CorruptArtifact(self.path / name, f"missing: TP {tp} / PP {pp} / EP {ep} of "
                                                                f"{self.tp_size}x{self.pp_size}x{self.ep_size}")

    def _load(self, tp: int, pp: int, ep: int) -> dict[str, dict[str, torch.Tensor]]:
        """The model chunk(s) of one rank file: {'model' | 'model0', 'model1', ...: state dict}.

        Kept for the reader's life: the tensors are memory maps, only touched pages cost memory.
        """
        key = (tp, pp, ep)
        if key not in self._loaded:
            f = next(x for x in self.files if (x.tp, x.pp, x.ep) == key)
            before = set(file_mappings(f.path))
            self._loaded[key] = self._load_file(tp, pp, ep)
            self._mappings += [r for r in file_mappings(f.path) if r not in before]  # kept alive by the cache
        return self._loaded[key]

    def _load_file(self, tp: int, pp: int, ep: int) -> dict[str, dict[str, torch.Tensor]]:
        f = next(x for x in self.files if (x.tp, x.pp, x.ep) == (tp, pp, ep))
        sd = safe_torch_load(f.path)
        if not isinstance(sd, Mapping):
            raise CorruptArtifact(f.path, "does not hold a Megatron state dict")
        chunks = {k: v for k, v in sd.items() if isinstance(k, str) and re.fullmatch(r"model\d*", k)
                  and isinstance(v, Mapping)}
        if not chunks:
            raise CorruptArtifact(f.path, "holds no `model` state dict")
        return {k: {n: t for n, t in v.items() if isinstance(t, torch.Tensor) and not NON_MODEL.search(n)}
                for k, v in sorted(chunks.items(), key=lambda kv: int(kv[0][5:] or 0))}

    def layer_offsets(self) -> dict[tuple[int, int], int]:
        """Global id of the first layer of each (virtual stage, PP rank), counted from the stages' files."""
        if self._offsets is None:
            counts: dict[tuple[int, int], int] = {}
            for pp in range(self.pp_size):
                for vp, (_, sd) in enumerate(self._load(0, pp, 0).items()):
                    counts[(vp, pp)] = len({int(m.group(1)) for n in sd
                                            if (m := re.match(r"(?:.*\.)?decoder\.layers\.(\d+)\.", n))})
            offsets, running = {}, 0
            for key in sorted(counts):  # interleaved order: vp 0 of every stage, then vp 1, ...
                offsets[key] = running
                running += counts[key]
            self._offsets = offsets
        return self._offsets

    def _is_expert(self, name: str) -> bool:
        return ".mlp.experts." in name

    def _ordered(self) -> Iterator[tuple[int, int, str]]:
        """(pp, vp, local name) in the order the tensors come out."""
        for pp in range(self.pp_size):
            for vp, (_, sd) in enumerate(self._load(0, pp, 0).items()):
                for name in sd:
                    yield pp, vp, name

    def listing(self) -> list[TensorInfo]:
        out = []
        for name, tensors, _ in self._merged(read=False):
            shape, dtype, file = tensors
            out.append(TensorInfo(name, shape, dtype, file))
        return out

    def tensors(self) -> Iterator[tuple[str, torch.Tensor]]:
        for name, t, sources in self._merged(read=True):
            yield name, t
            for s in sources:
                release_pages(s, self._mappings)
            del t, sources  # hold nothing while the next one is merged

    def _merged(self, read: bool) -> Iterator[tuple[str, Any, list[torch.Tensor]]]:
        offsets = self.layer_offsets()
        for pp in range(self.pp_size):
            ranks = {(tp, ep): self._load(tp, pp, ep) for tp in range(self.tp_size) for ep in range(self.ep_size)}
            first_file = str(next(f.path for f in self.files if (f.tp, f.pp, f.ep) == (0, pp, 0)))
            for vp, chunk in enumerate(ranks[(0, 0)]):
                layer_off = offsets.get((vp, pp), 0)
                for name in ranks[(0, 0)][chunk]:
                    eps = range(self.ep_size) if self._is_expert(name) else range(1)
                    for ep in eps:
                        e_off = ep * self.num_experts // self.ep_size if self.num_experts else 0
                        tps = range(self.etp_size if self._is_expert(name) else self.tp_size)
                        try:
                            shards = [ranks[(tp, ep)][chunk][name] for tp in tps]
                        except KeyError:
                            raise CorruptArtifact(first_file, f"{name} is not on every TP rank of stage {pp}") from None
                        gname = canonical_name(name, layer_off, e_off)
                        if not read:
                            merged = merge_tp_shards(name, [torch.empty(s.shape, dtype=s.dtype, device="meta")
                                                            for s in shards], self.gated)
                            yield gname, (tuple(merged.shape), merged.dtype, first_file), []
                            continue
                        try:
                            merged = merge_tp_shards(name, shards, self.gated)
                        except RuntimeError as exc:
                            raise CorruptArtifact(first_file, f"{name}: TP shards do not fit together: "
                                                              f"{_first_line(exc)}") from None
                        self.bytes_read += sum(s.numel() * s.element_size() for s in shards)
                        yield gname, merged, shards
                        del merged, shards


# --- opening -------------------------------------------------------------------------------


def is_megatron_dir(path: Path) -> bool:
    return (path / TRACKER).is_file() or bool(_iteration_names(path)) or (path / "release").is_dir()


def open_iteration(path: Path) -> WeightsReader:
    """The reader for one iteration directory (torch_dist or legacy)."""
    if (path / ".metadata").exists() or any(path.glob("*.distcp")):
        return TorchDistReader(path)
    if any(MP_RANK.match(p.name) for p in path.iterdir() if p.is_dir()):
        return LegacyMegatronReader(path)
    raise BadInput(f"{path}: neither a torch_dist (.metadata, *.distcp) nor a legacy (mp_rank_*) checkpoint")


def open_checkpoint(path: str | Path, iteration: int | None = None) -> WeightsReader:
    """A trainer checkpoint: a Megatron checkpoint dir (tracker resolved), an iteration dir, or HF weights."""
    p = Path(path)
    if not p.exists():
        raise BadInput(f"{p}: no such checkpoint")
    if p.is_dir() and is_megatron_dir(p):
        d, it, tracked = resolve_iteration_dir(p, iteration)
        reader = open_iteration(d)
        reader.iteration, reader.tracker_used = it, tracked
        return reader
    if p.is_dir() and ((p / ".metadata").exists() or any(MP_RANK.match(c.name) for c in p.iterdir())):
        reader = open_iteration(p)
        m = ITER_DIR.match(p.name)
        reader.iteration = int(m.group(1)) if m else None
        return reader
    return open_weights(p)


def open_weights(path: str | Path) -> WeightsReader:
    """HF-named weights with random access: safetensors (file / dir / index) or torch state dicts."""
    p = Path(path)
    if not p.exists():
        raise BadInput(f"{p}: no such weights file or directory")
    if p.is_file():
        return SafetensorsReader(p) if p.suffix == ".safetensors" else TorchStateDictReader(p)
    if (p / "model.safetensors.index.json").is_file() or any(p.glob("*.safetensors")):
        return SafetensorsReader(p)
    if any(c.suffix in TorchStateDictReader.SUFFIXES for c in p.iterdir()):
        return TorchStateDictReader(p)
    raise BadInput(f"{p}: no *.safetensors or .pt / .bin weights")
