"""Resolving what the user typed (a path or a run-id under a runs root) to a Run."""

from __future__ import annotations

import os
from pathlib import Path

from triage import safe_io
from triage.errors import BadInput, RunNotFound, UnsafeRunRef
from triage.run.discover import discover
from triage.run.manifest import find_manifest, load_manifest, Manifest
from triage.run.run import Run

RUNS_ROOT_ENV = "TRIAGE_RUNS_ROOT"
MAX_NAME_BYTES = 255  # NAME_MAX: the longest file name Linux (ext4, xfs) accepts
MAX_REF_BYTES = 4096  # PATH_MAX


def runs_roots(cli_value: str | None = None) -> list[Path]:
    """The configured runs roots: the flag wins over the environment (os.pathsep separated)."""
    raw = cli_value if cli_value is not None else os.environ.get(RUNS_ROOT_ENV, "")
    return [Path(p).expanduser().resolve() for p in raw.split(os.pathsep) if p.strip()]


def _inside(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
    except ValueError:
        return False
    return True


def _check_ref(ref: str) -> None:
    """Refuse a reference no file system could hold, before it reaches one."""
    if not ref or not ref.strip():
        raise RunNotFound("empty run reference: give a run directory or a run-id under the runs root")
    if "\x00" in ref:
        raise UnsafeRunRef("run reference contains a NUL byte")
    size = len(ref.encode("utf-8", "surrogateescape"))
    if size > MAX_REF_BYTES:
        raise BadInput(f"run reference is {size} bytes long; the limit is {MAX_REF_BYTES} (PATH_MAX)")
    longest = max((len(part.encode("utf-8", "surrogateescape")) for part in ref.split("/")), default=0)
    if longest > MAX_NAME_BYTES:
        raise BadInput(f"run reference has a name of {longest} bytes; the limit is {MAX_NAME_BYTES} per "
                       "path component (NAME_MAX)")


def resolve_run_dir(ref: str, roots: list[Path]) -> Path:
    """Map a run reference to a directory, refusing anything that escapes the runs roots."""
    _check_ref(ref)
    try:
        return _resolve_run_dir(ref, roots)
    except OSError as exc:  # permission denied on a parent, a symlink loop, a name too long
        raise RunNotFound(f"cannot open run {ref!r}: {exc.strerror or exc}") from None
    except RuntimeError as exc:  # pathlib's symlink loop
        raise RunNotFound(f"cannot open run {ref!r}: {exc}") from None


def _resolve_run_dir(ref: str, roots: list[Path]) -> Path:
    ref_path = Path(ref).expanduser()
    if roots:
        if ".." in ref_path.parts:
            raise UnsafeRunRef(f"run-id {ref!r} contains '..': run-ids are names under the runs root")
        candidates = [ref_path.resolve()] if ref_path.is_absolute() else [(r / ref_path).resolve() for r in roots]
        for cand in candidates:
            root = next((r for r in roots if _inside(cand, r)), None)
            if root is None:
                raise UnsafeRunRef(
                    f"run {ref!r} is outside the runs root ({', '.join(map(str, roots))})"
                )
            if cand in roots:
                raise UnsafeRunRef(f"run-id {ref!r} names the runs root itself, not a run under it")
            if cand.is_dir():
                return cand
        raise RunNotFound(f"no run {ref!r} under the runs root ({', '.join(map(str, roots))})")
    path = ref_path.resolve()
    if not path.exists():
        raise RunNotFound(f"no such run directory: {ref} (set --runs-root or {RUNS_ROOT_ENV} to use run-ids)")
    if not path.is_dir():
        raise RunNotFound(f"{ref} is not a directory: a run is the directory a job left behind")
    return path


def open_run(ref: str, runs_root: str | None = None, allow_paths: list[str] | tuple[str, ...] = ()) -> Run:
    """The run `ref` names, its paths confined to its directory, `allow_paths` and $TRIAGE_ALLOWED_ROOTS."""
    root = resolve_run_dir(ref, runs_roots(runs_root))
    roots = safe_io.allowed_roots(root, allow_paths)
    manifest_path = find_manifest(root)
    manifest = load_manifest(manifest_path, roots) if manifest_path else Manifest()
    artifacts = discover(root, manifest, roots)
    return Run(ref=ref, root=root, manifest=manifest, artifacts=artifacts, allowed_roots=roots)
