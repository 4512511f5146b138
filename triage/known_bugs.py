"""The known-bug index: package versions with a bug a public thread establishes.

Records are shaped like OSV / pip-audit entries (package, affected range, references,
fixed version) and matched against the versions a run names (`Run.versions`), with
`packaging` doing every comparison: an entry's `affected` is a
`packaging.specifiers.SpecifierSet`, an installed version a `packaging.version.Version`.

The shipped index is `known_bugs.yaml` next to this module; it also holds the package
list every entry must name. Users add entries in their own files of the same shape (only
`bugs:`), given with `triage run --known-bugs FILE` or `$TRIAGE_KNOWN_BUGS` (several files
separated by ':'). Loading refuses, with one line naming the file and the entry, a
malformed version range, an unknown package, an unknown verdict id, a duplicate id, or a
missing field.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from triage.errors import BadInput
from triage.versions import RunVersions, normal_name

INDEX_FILE = Path(__file__).with_name("known_bugs.yaml")
ENV = "TRIAGE_KNOWN_BUGS"
MAX_INDEX_BYTES = 4 << 20


class RangeOf(BaseModel):
    """Another package that must be in a range too (an incompatible pair)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    package: str
    affected: str


class KnownBug(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    id: str
    package: str
    affected: str
    symptom: str
    verdict: str
    thread: str
    url: str
    fixed: str | None = None
    note: str | None = None
    models: tuple[str, ...] = ()
    with_: tuple[RangeOf, ...] = Field(default=(), alias="with")

    @property
    def specifiers(self) -> SpecifierSet:
        return SpecifierSet(self.affected)

    def row(self) -> dict[str, Any]:
        d = self.model_dump(by_alias=True, exclude_none=True)
        if not d.get("with"):
            d.pop("with", None)
        if not d.get("models"):
            d.pop("models", None)
        return d


@dataclass(frozen=True)
class BugMatch:
    bug: KnownBug
    installed: str
    where: str
    with_installed: tuple[tuple[str, str, str], ...]  # (package, version, where) of each `with` package
    model_checked: bool  # False: the entry names models and the run's model is unknown

    def evidence(self) -> dict[str, Any]:
        b = self.bug
        out: dict[str, Any] = {
            "id": b.id, "package": b.package, "installed": self.installed, "read_at": self.where,
            "affected": b.affected, "fixed": b.fixed, "thread": b.thread, "url": b.url, "verdict": b.verdict,
            "symptom": b.symptom,
        }
        if self.with_installed:
            out["with"] = [{"package": p, "installed": v, "read_at": w,
                            "affected": next(r.affected for r in b.with_ if normal_name(r.package) == p)}
                           for p, v, w in self.with_installed]
        if b.models:
            out["models"] = list(b.models)
            out["model_checked"] = self.model_checked
        if b.note:
            out["note"] = b.note
        return out


@dataclass(frozen=True)
class KnownBugIndex:
    packages: frozenset[str]
    bugs: tuple[KnownBug, ...]
    files: tuple[str, ...]
    digest: str

    def for_package(self, package: str | None) -> list[KnownBug]:
        if not package:
            return list(self.bugs)
        name = normal_name(package)
        return [b for b in self.bugs if b.package == name or any(normal_name(r.package) == name for r in b.with_)]

    def match(self, versions: RunVersions, model: str | None = None) -> list[BugMatch]:
        """The entries whose ranges hold the run's versions (and whose `with` packages are in range too)."""
        out = []
        for bug in self.bugs:
            found = _installed(versions, bug.package, bug.affected)
            if found is None:
                continue
            others = []
            for req in bug.with_:
                other = _installed(versions, req.package, req.affected)
                if other is None:
                    break
                others.append((normal_name(req.package), *other))
            else:
                model_checked = True
                if bug.models:
                    if model:
                        if not any(m.lower() in model.lower() for m in bug.models):
                            continue
                    else:
                        model_checked = False
                out.append(BugMatch(bug, found[0], found[1], tuple(others), model_checked))
        return out


def _installed(versions: RunVersions, package: str, affected: str) -> tuple[str, str] | None:
    """(version, where) when the run's version of `package` is in `affected`; None otherwise or when unknown."""
    rec = versions.records.get(normal_name(package))
    if rec is None or rec.parsed is None:
        return None
    if not SpecifierSet(affected).contains(rec.parsed, prereleases=True):
        return None
    return rec.version, rec.where


# --- loading -----------------------------------------------------------------------------


def env_files() -> list[Path]:
    raw = os.environ.get(ENV, "")
    return [Path(p).expanduser() for p in raw.split(os.pathsep) if p.strip()]


def load_index(extra: Iterable[str | Path] = ()) -> KnownBugIndex:
    """The shipped index plus $TRIAGE_KNOWN_BUGS files plus `extra` files, validated."""
    files = [INDEX_FILE, *env_files(), *(Path(p) for p in extra)]
    seen: list[Path] = []
    for f in files:
        if f not in seen:
            seen.append(f)
    stamps = tuple((str(f), _stamp(f)) for f in seen)
    return _load(stamps)


def _stamp(path: Path) -> tuple[int, int]:
    try:
        st = path.stat()
    except OSError:
        return (-1, -1)
    return (st.st_size, st.st_mtime_ns)


@lru_cache(maxsize=8)
def _load(stamps: tuple[tuple[str, tuple[int, int]], ...]) -> KnownBugIndex:
    from triage.catalog import load_catalog
    from triage.graph import DEFAULT_DIR

    catalog = load_catalog(DEFAULT_DIR / "verdicts.yaml")
    shipped_path = Path(stamps[0][0])
    shipped, text = _read(shipped_path)
    packages = shipped.get("packages")
    if not isinstance(packages, list) or not all(isinstance(p, str) for p in packages):
        raise BadInput(f"known-bug index {shipped_path}: 'packages' must be a list of package names")
    names = frozenset(normal_name(p) for p in packages)
    h = hashlib.sha256(text.encode())
    bugs: list[KnownBug] = []
    ids: dict[str, str] = {}
    for i, (name, _stamp_) in enumerate(stamps):
        path = Path(name)
        data, text = (shipped, "") if i == 0 else _read(path)
        if i:
            h.update(text.encode())
            unknown = set(data) - {"bugs"}
            if unknown:
                raise BadInput(f"known-bug file {path}: unknown keys {sorted(unknown)} (a user file holds only 'bugs:')")
        raw = data.get("bugs") or []
        if not isinstance(raw, list):
            raise BadInput(f"known-bug file {path}: 'bugs' must be a list of entries")
        for n, entry in enumerate(raw, 1):
            bug = _entry(path, n, entry, names, catalog)
            if bug.id in ids:
                raise BadInput(f"known-bug file {path}: entry {bug.id!r}: duplicate id (also in {ids[bug.id]})")
            ids[bug.id] = str(path)
            bugs.append(bug)
    return KnownBugIndex(names, tuple(bugs), tuple(s[0] for s in stamps), h.hexdigest()[:16])


def _read(path: Path) -> tuple[dict[str, Any], str]:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise BadInput(f"known-bug file {path}: cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_INDEX_BYTES:
        raise BadInput(f"known-bug file {path}: larger than {MAX_INDEX_BYTES >> 20} MiB")
    try:
        text = data.decode("utf-8")
        parsed = yaml.safe_load(text)
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        raise BadInput(f"known-bug file {path}: not readable YAML: {str(exc).splitlines()[0]}") from None
    if parsed is None:
        parsed = {}
    if not isinstance(parsed, dict):
        raise BadInput(f"known-bug file {path}: expected a mapping with 'bugs:'")
    return parsed, text


def _entry(path: Path, n: int, entry: Any, packages: frozenset[str], catalog: Any) -> KnownBug:
    label = repr(entry.get("id")) if isinstance(entry, dict) and entry.get("id") else f"#{n}"
    where = f"known-bug file {path}: entry {label}"
    if not isinstance(entry, dict):
        raise BadInput(f"{where}: expected a mapping (id, package, affected, symptom, verdict, thread, url)")
    try:
        bug = KnownBug.model_validate(entry)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "entry"
        raise BadInput(f"{where}: {loc}: {first['msg']}") from None
    _check_package(where, bug.package, packages)
    _check_range(where, "affected", bug.affected)
    for req in bug.with_:
        _check_package(where, req.package, packages)
        _check_range(where, f"with {req.package} affected", req.affected)
    if bug.fixed is not None:
        try:
            Version(bug.fixed)
        except InvalidVersion:
            raise BadInput(f"{where}: fixed {bug.fixed!r} is not a version (PEP 440)") from None
    if bug.verdict not in catalog:
        raise BadInput(f"{where}: verdict {bug.verdict!r} is not in the verdict catalog")
    return bug.model_copy(update={"package": normal_name(bug.package)})


def _check_package(where: str, package: str, packages: frozenset[str]) -> None:
    if normal_name(package) not in packages:
        raise BadInput(f"{where}: unknown package {package!r} (the index knows: {', '.join(sorted(packages))})")


def _check_range(where: str, what: str, spec: str) -> None:
    try:
        parsed = SpecifierSet(spec)
    except InvalidSpecifier:
        raise BadInput(f"{where}: {what} {spec!r} is not a version range (e.g. '>=0.4.6,<0.4.7')") from None
    if not str(parsed):
        raise BadInput(f"{where}: {what} is empty: name the affected versions (e.g. '==0.5.12.post1')")


def use_known_bug_files(files: Sequence[str]) -> None:
    """`triage run --known-bugs FILE`: validate now (a bad file is exit 2 before any probe runs) and
    put the files on $TRIAGE_KNOWN_BUGS, where the known_bugs probe (and a Ray worker) finds them."""
    paths = [str(Path(f).expanduser().resolve()) for f in files]
    for p in paths:
        if not Path(p).is_file():
            raise BadInput(f"known-bug file {p}: no such file")
    load_index(paths)
    existing = [p for p in os.environ.get(ENV, "").split(os.pathsep) if p.strip()]
    os.environ[ENV] = os.pathsep.join(paths + [p for p in existing if p not in paths])


def index_digest() -> str:
    """A digest of the index in use (shipped + user files): part of the findings-cache key of the probe."""
    return load_index().digest


# --- `triage known-bugs` -----------------------------------------------------------------


def add_known_bugs_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("known-bugs", help="list the known-bug index (package versions with a bug a public thread names)")
    p.add_argument("--package", default=None, help="only the entries about this package (as pip names it)")
    p.add_argument("--known-bugs", action="append", metavar="FILE", default=None,
                   help="also a file of your own entries (repeatable; $TRIAGE_KNOWN_BUGS too)")
    p.add_argument("--json", action="store_true", help="the entries as JSON")
    p.set_defaults(func=_cmd_known_bugs)


def _cmd_known_bugs(ns: argparse.Namespace) -> int:
    index = load_index(ns.known_bugs or ())
    if ns.package and normal_name(ns.package) not in index.packages:
        raise BadInput(f"unknown package {ns.package!r}; the index knows: {', '.join(sorted(index.packages))}")
    bugs = index.for_package(ns.package)
    if ns.json:
        sys.stdout.write(json.dumps([b.row() for b in bugs], indent=2, ensure_ascii=False) + "\n")
        return 0
    from rich.console import Console
    from rich.table import Table

    title = f"Known bugs ({len(bugs)} of {len(index.bugs)} entries" + (f", package {ns.package}" if ns.package else "") + ")"
    table = Table(title=title, show_lines=True)
    table.add_column("id", no_wrap=True)
    for col in ("package", "affected", "fixed", "verdict", "thread"):
        table.add_column(col, overflow="fold")
    for b in bugs:
        affected = b.affected + "".join(f"\nwith {r.package} {r.affected}" for r in b.with_)
        table.add_row(b.id, b.package, affected, b.fixed or "-", b.verdict, b.thread)
    Console(file=sys.stdout, width=getattr(ns, "width", None)).print(table)
    return 0
