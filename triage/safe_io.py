"""Opening a run's files: only regular files, only inside the run or the allowed roots.

A run directory is untrusted input. Every reader opens its files through `open_regular`
(or checks a path with `regular_file` before handing it to a library that opens it by
name), which:

- resolves the path (every symlink followed, a loop refused as a loop),
- refuses anything under /proc, /sys or /dev, whatever it is,
- refuses a path that resolves outside the roots the current run is confined to (the run
  directory, `--allow-path DIR`, `$TRIAGE_ALLOWED_ROOTS`),
- opens with O_NONBLOCK, so a FIFO cannot block the open, then refuses anything `fstat`
  does not call a regular file: FIFOs, sockets and devices are refused by what they are,
  never by their size.

A refusal raises `RefusedFile` (a `CorruptArtifact` and an `OSError`), one line naming the
file and the reason.
"""

from __future__ import annotations

import contextvars
import errno
import fcntl
import io
import os
import re
import stat
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

from triage.errors import RefusedFile

ALLOWED_ROOTS_ENV = "TRIAGE_ALLOWED_ROOTS"
SYSTEM_DIRS = (Path("/proc"), Path("/sys"), Path("/dev"))

# The roots the run being triaged may read from; None: no run is confined (only the
# regular-file and system-directory checks apply).
_confined_to: contextvars.ContextVar[tuple[Path, ...] | None] = contextvars.ContextVar("confined_to", default=None)


def env_allowed_roots() -> list[str]:
    """The roots `$TRIAGE_ALLOWED_ROOTS` names (os.pathsep separated)."""
    return [p for p in os.environ.get(ALLOWED_ROOTS_ENV, "").split(os.pathsep) if p.strip()]


def allowed_roots(run_root: str | Path, extra: Iterable[str | Path] = ()) -> tuple[Path, ...]:
    """The run directory, the roots given on the command line, and those of the environment, resolved."""
    out: list[Path] = []
    for raw in [run_root, *extra, *env_allowed_roots()]:
        p = Path(os.path.realpath(Path(raw).expanduser()))
        if p not in out:
            out.append(p)
    return tuple(out)


def confine(roots: Iterable[Path]) -> contextvars.Token:
    """From now on (in this context) files are read only inside `roots`."""
    return _confined_to.set(tuple(roots))


def reset(token: contextvars.Token) -> None:
    _confined_to.reset(token)


def confined_roots() -> tuple[Path, ...] | None:
    return _confined_to.get()


def inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def resolve(path: str | Path) -> Path:
    """The real path of `path`; `RefusedFile` for a symlink loop. A missing path raises FileNotFoundError."""
    try:
        return Path(os.path.realpath(path, strict=True))
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise RefusedFile(path, "symlink loop: the path never resolves", errno.ELOOP) from None
        if isinstance(exc, FileNotFoundError):
            raise
        raise RefusedFile(path, f"cannot resolve: {exc.strerror or exc}", exc.errno or 0) from None


def why_refused(real: Path, roots: tuple[Path, ...] | None = None) -> str | None:
    """Why a resolved path may not be read, or None: a system directory, or outside the roots."""
    for system in SYSTEM_DIRS:
        if inside(real, system):
            return f"resolves to {real}, under {system}: system files are never read"
    roots = confined_roots() if roots is None else roots
    if roots and not any(inside(real, r) for r in roots):
        return (f"resolves to {real}, outside the run directory and the allowed roots "
                f"(add one with --allow-path DIR or ${ALLOWED_ROOTS_ENV})")
    return None


def check_path(path: str | Path, roots: tuple[Path, ...] | None = None) -> Path:
    """The real path of `path` when it may be read (it may be a directory); `RefusedFile` otherwise."""
    real = resolve(path)
    reason = why_refused(real, roots)
    if reason:
        raise RefusedFile(path, reason, errno.EACCES)
    return real


def kind_of(mode: int) -> str:
    """What a non-regular file is, in words."""
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISREG(mode):
        return "a regular file"
    return "not a regular file"


def regular_file(path: str | Path, roots: tuple[Path, ...] | None = None) -> Path:
    """The real path of `path` if it is a regular file that may be read; `RefusedFile` otherwise.

    For libraries that open a file by name themselves (safetensors, torch.load with mmap).
    """
    try:
        real = check_path(path, roots)
        mode = os.stat(real).st_mode
    except FileNotFoundError:
        raise RefusedFile(path, "No such file or directory", errno.ENOENT) from None
    except RefusedFile:
        raise
    except OSError as exc:
        raise RefusedFile(path, exc.strerror or str(exc), exc.errno or 0) from None
    if not stat.S_ISREG(mode):
        raise RefusedFile(path, f"{kind_of(mode)}, not a regular file: not read", errno.EINVAL)
    return real


def open_regular(path: str | Path, roots: tuple[Path, ...] | None = None, buffering: int = -1) -> BinaryIO:
    """`path` opened for binary reading, if it is a regular file that may be read; `RefusedFile` otherwise."""
    try:
        real = check_path(path, roots)
        # O_NONBLOCK: opening a FIFO returns at once instead of waiting for a writer;
        # O_NOFOLLOW: the resolved path must not have become a symlink since.
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise RefusedFile(path, "No such file or directory", errno.ENOENT) from None
    except RefusedFile:
        raise
    except OSError as exc:
        raise RefusedFile(path, exc.strerror or str(exc), exc.errno or 0) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise RefusedFile(path, f"{kind_of(mode)}, not a regular file: not read", errno.EINVAL)
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~os.O_NONBLOCK)
        return os.fdopen(fd, "rb", buffering=buffering)
    except BaseException:
        os.close(fd)
        raise


def read_tail(path: str | Path, limit: int, roots: tuple[Path, ...] | None = None) -> tuple[bytes, int]:
    """The last `limit` bytes of a regular file and the offset they start at (0: the whole file). A gzip file's
    tail is compressed data, not its text: b"" for it. Raises OSError (`RefusedFile`) as `open_regular` does."""
    with open_regular(path, roots) as fh:
        if fh.read(2) == b"\x1f\x8b":
            return b"", 0
        size = fh.seek(0, os.SEEK_END)
        start = max(0, size - limit)
        fh.seek(start)
        return fh.read(limit), start


def written_end(fd: int, max_extents: int = 10_000) -> int | None:
    """Where a file's written data ends when all that follows is a hole (a sparse tail, e.g. a
    log extended by `truncate -s 20G`), or None when data runs to the end or it cannot be told.
    Uses SEEK_DATA / SEEK_HOLE, so the holes are never read."""
    if not hasattr(os, "SEEK_DATA"):
        return None
    try:
        size = os.fstat(fd).st_size
        pos = end = 0
        for _ in range(max_extents):
            try:
                data = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError as exc:
                if exc.errno != errno.ENXIO or end >= size:
                    return None
                # data is allocated in blocks: the written part ends at the last non-NUL byte
                tail = os.pread(fd, min(end, 1 << 16), max(0, end - (1 << 16)))
                return end - len(tail) + len(tail.rstrip(b"\0"))
            end = pos = os.lseek(fd, data, os.SEEK_HOLE)
            if end >= size:
                return None
        return None
    except OSError:
        return None
    finally:
        try:
            os.lseek(fd, 0, os.SEEK_SET)
        except OSError:
            pass


class _WrittenPart(io.RawIOBase):
    """A file read only up to where its written data ends (`written_end`)."""

    def __init__(self, raw: BinaryIO, end: int) -> None:
        self._raw = raw
        self._end = end

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._raw.fileno()

    def tell(self) -> int:
        return self._raw.tell()

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._raw.seek(offset, whence)

    def readinto(self, buf) -> int:
        left = self._end - self._raw.tell()
        if left <= 0:
            return 0
        view = memoryview(buf)
        return self._raw.readinto(view[:min(len(view), left)]) or 0

    def close(self) -> None:
        self._raw.close()
        super().close()


def open_written(path: str | Path, roots: tuple[Path, ...] | None = None) -> tuple[BinaryIO, int | None]:
    """`open_regular`, reading a sparse file only as far as its written data goes: (file, where
    the written data ends, or None when it runs to the end)."""
    fh = open_regular(path, roots, buffering=0)
    end = written_end(fh.fileno())
    if end is None:
        return io.BufferedReader(fh), None  # type: ignore[arg-type]
    return io.BufferedReader(_WrittenPart(fh, end)), end  # type: ignore[return-value]


def read_bytes(path: str | Path, limit: int, what: str = "file", roots: tuple[Path, ...] | None = None) -> bytes:
    """The whole of a regular file of at most `limit` bytes; `RefusedFile` if larger."""
    with open_regular(path, roots) as fh:
        too_big = os.fstat(fh.fileno()).st_size > limit
        data = b"" if too_big else fh.read(limit + 1)
    if too_big or len(data) > limit:
        raise RefusedFile(path, f"{what} is larger than the {_size_words(limit)} limit: not read", errno.EFBIG)
    return data


# A stretch of zeros a writer left in a text file is no binary data: a log truncated (`> job.log`) while the job kept
# writing at its own offset is zero-filled up to where its next write lands (KramCoder/ADL-3's full_training_log.txt:
# 2,024 zeros between two progress-bar frames), as is a tail a crash left unwritten. A binary format's NULs come in
# short runs too (a length field's high bytes, UTF-16's every other byte); a text file's only in long ones.
ZERO_FILL_MIN_BYTES = 16


def holds_binary(sample: bytes, cut: bool = False) -> bool:
    """Whether `sample` holds NUL bytes other than zero-filled stretches, or nothing but zeros. `cut`: the sample
    is a file's head, so a run of zeros at its end may go on past it."""
    if b"\x00" not in sample:
        return False
    if not sample.strip(b"\x00").strip():
        return True
    return any(m.end() - m.start() < ZERO_FILL_MIN_BYTES and not (cut and m.end() == len(sample))
               for m in re.finditer(rb"\x00+", sample))


# The text Git LFS leaves in place of a file it did not fetch (git-lfs docs/spec.md: a pointer file starts with
# this version line, then `oid sha256:…` and `size N`); HF Hub's .gitattributes routes `*tfevents*` and weights there
LFS_POINTER = b"version https://git-lfs.github.com/spec/v1"


def lfs_pointer(path: str | Path) -> bool:
    """Whether a file is a Git LFS pointer (a clone without `git lfs pull`), not the file it stands for."""
    try:
        with open_regular(path) as fh:
            return fh.read(len(LFS_POINTER)) == LFS_POINTER
    except (OSError, ValueError):
        return False


def read_text(path: str | Path, limit: int, what: str = "file", roots: tuple[Path, ...] | None = None) -> str:
    """A regular file of at most `limit` bytes as UTF-8 text (UnicodeDecodeError if it is not)."""
    return read_bytes(path, limit, what, roots).decode("utf-8")


def _size_words(n: int) -> str:
    for unit, shift in (("GB", 30), ("MB", 20), ("KB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n}-byte"


# --- bounded parsing ------------------------------------------------------------------------

# Input limits, not judgments about a run: each is far above anything a real artifact holds.
MAX_NESTING = 64  # a manifest nests 3 levels, a safetensors header 3 (name -> entry -> shape)
MAX_TREE_NODES = 1_000_000  # values in one manifest; also bounds a YAML alias bomb
MAX_INT_DIGITS = 18  # int64 (9.2e18) holds every 18-digit integer: steps, token counts, byte sizes


class TooDeep(ValueError):
    """A JSON/YAML document nested beyond MAX_NESTING (or beyond what the parser can recurse)."""


def json_int(text: str) -> int | float:
    """JSON integers past int64 become floats (inf when past float range): no 4,300-digit
    `int()` error, no `OverflowError` when a step or size is converted later."""
    if len(text) > MAX_INT_DIGITS + (text[0] == "-"):
        return float(text)
    return int(text)


def loads_json(text: str | bytes) -> object:
    """`json.loads` with integers bounded (`json_int`); nesting the parser cannot recurse
    into raises `json.JSONDecodeError` naming the limit, never RecursionError."""
    import json

    try:
        return json.loads(text, parse_int=json_int)
    except RecursionError:
        raise json.JSONDecodeError(
            f"nested deeper than the parser's recursion limit (limit MAX_NESTING is {MAX_NESTING} levels)",
            "", 0) from None


def check_tree(value: object, max_depth: int = MAX_NESTING, max_nodes: int = MAX_TREE_NODES) -> str | None:
    """Why a parsed document is out of bounds (too deep, too many values, an integer too
    large), or None. Iterative, and it stops at the first violation, so a shared-reference
    bomb costs at most `max_nodes` steps."""
    stack: list[tuple[object, int, str]] = [(value, 1, "")]
    nodes = 0
    while stack:
        node, depth, where = stack.pop()
        nodes += 1
        if nodes > max_nodes:
            return f"holds more than {max_nodes} values (limit MAX_TREE_NODES)"
        if depth > max_depth:
            return f"is nested more than {max_depth} levels deep at {where or 'the top'} (limit MAX_NESTING)"
        if isinstance(node, bool):
            continue
        if isinstance(node, int):
            if node.bit_length() > 63:
                return (f"holds an integer of {node.bit_length()} bits at {where or 'the top'}; "
                        f"the limit is {MAX_INT_DIGITS} digits (int64, limit MAX_INT_DIGITS)")
        elif isinstance(node, dict):
            for k, v in node.items():
                stack.append((v, depth + 1, f"{where}.{k}" if where else str(k)))
        elif isinstance(node, (list, tuple)):
            for i, v in enumerate(node):
                stack.append((v, depth + 1, f"{where}[{i}]"))
    return None


def loads_yaml(text: str) -> object:
    """`yaml.safe_load`, with nesting the parser cannot recurse into raised as `TooDeep`
    and a 5,000-digit integer (Python's int max_str_digits) as `ValueError`."""
    import yaml

    try:
        return yaml.safe_load(text)  # the pure-Python loader: libyaml's crashes on deep nesting
    except ValueError as exc:
        if "digits" not in str(exc):
            raise
        raise ValueError(f"holds an integer longer than {sys.get_int_max_str_digits()} digits "
                         "(Python's int max_str_digits)") from None
    except RecursionError:
        raise TooDeep(f"nested deeper than the parser's recursion limit (limit MAX_NESTING is {MAX_NESTING} levels)") from None
