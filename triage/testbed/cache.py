"""Where the testbed keeps what it builds once: tokenizer, warmed-up models, scenario runs.

Everything is keyed by a content hash of its recipe, so a changed recipe builds anew
and an unchanged one is reused across processes. Builds go to a temporary directory
next to the target and are renamed into place, under a file lock, so two processes
that build the same thing at once do not see half a model.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

ENV_CACHE = "TRIAGE_TESTBED_CACHE"
TESTBED_DIR = Path(__file__).resolve().parent


def cache_root() -> Path:
    """`TRIAGE_TESTBED_CACHE`, or `~/.cache/triage-testbed`."""
    root = Path(os.environ.get(ENV_CACHE) or Path.home() / ".cache" / "triage-testbed")
    root.mkdir(parents=True, exist_ok=True)
    return root


def content_hash(*parts: object, length: int = 16) -> str:
    """A short stable hash of JSON-serialisable parts (sorted keys, str() for the rest)."""
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:length]


def source_hash(names: list[str] | None = None) -> str:
    """Hash of the testbed's own source files: a changed testbed regenerates its scenarios."""
    h = hashlib.sha256()
    files = sorted(TESTBED_DIR.glob("*.py")) if names is None else [TESTBED_DIR / n for n in sorted(names)]
    for path in files:
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def build_once(target: Path, build: Callable[[Path], None], marker: str = ".complete") -> Path:
    """Return `target`, building it with `build(tmp_dir)` first if it is not complete.

    The marker file is written last, so a build killed half-way is redone next time.
    """
    if (target / marker).exists():
        return target
    with file_lock(target.parent / f".{target.name}.lock"):
        if (target / marker).exists():
            return target
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
        try:
            build(tmp)
            (tmp / marker).write_text("ok\n")
            if target.exists():
                shutil.rmtree(target)
            os.replace(tmp, target)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return target
