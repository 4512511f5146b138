"""The training frameworks whose jobs a replay can relaunch, and how each is started.

A framework is found by what the run's command line starts: an entry script
(`python3 train.py ...`, slime's, miles' and Relax's) or an entry module (`python3 -m
...`). The program that is started is always the framework installed here, never a file
from the run directory: a script is looked up at the root of the installed package's
source tree, a module through the import system. Frameworks are registered through the
`triage.frameworks` entry-point group (see `pyproject.toml`), the built-ins too, each as
a `Framework` value.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata
from pathlib import Path

from triage.errors import TriageError

ENTRY_POINT_GROUP = "triage.frameworks"


@dataclass(frozen=True)
class Framework:
    """How a framework's job is started again."""

    name: str
    package: str  # the installed package its entry belongs to
    scripts: tuple[str, ...] = ()  # entry scripts at the root of the package's source tree
    modules: tuple[str, ...] = ()  # entry modules, started with `python -m`
    needs_gpu: bool = True  # relaunched only where a GPU is
    log_flag: str | None = None  # a flag that sends the job log to a file
    cwd: str = "source"  # "source": the installed source tree; "run": the run directory (its relative paths)
    dropped_flags: tuple[str, ...] = ()  # its own flags that write outside the replay's scratch directory

    def installed(self) -> bool:
        try:
            return importlib.util.find_spec(self.package) is not None
        except (ImportError, ValueError):
            return False

    def source_root(self) -> Path | None:
        """The directory that holds the package (a source checkout's root, where its entry scripts live)."""
        try:
            spec = importlib.util.find_spec(self.package)
        except (ImportError, ValueError):
            return None
        if spec is None or not spec.origin:
            return None
        return Path(spec.origin).resolve().parent.parent

    def script_path(self, script: str) -> Path | None:
        """The installed entry script named `script`; None when it is not one of this framework's."""
        name = Path(script).name
        if name not in self.scripts:
            return None
        root = self.source_root()
        if root is None:
            return None
        path = root / name
        return path if path.is_file() else None


SLIME = Framework("slime", "slime", scripts=("train.py", "train_async.py"))
MILES = Framework("miles", "miles", scripts=("train.py", "train_async.py"))
RELAX = Framework("relax", "relax", scripts=("train.py", "train_async.py"))


class FrameworkLoadError(TriageError):
    pass


@lru_cache(maxsize=1)
def frameworks() -> Mapping[str, Framework]:
    """Every registered framework, by name."""
    found: dict[str, Framework] = {}
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            value = ep.load()
        except Exception as exc:  # a broken plugin is reported, not fatal to the others
            raise FrameworkLoadError(f"framework {ep.name!r} ({ep.value}) failed to import: {exc}") from exc
        if not isinstance(value, Framework):
            raise FrameworkLoadError(f"entry point {ep.name!r} in group {ENTRY_POINT_GROUP} is not a Framework")
        found[value.name] = value
    for builtin in (SLIME, MILES, RELAX):  # present even in a checkout that was never installed
        found.setdefault(builtin.name, builtin)
    return dict(sorted(found.items()))


def framework_for(program: list[str], run_framework: str) -> Framework | None:
    """The framework whose entry `program` starts (a `-m` module, or a script's name)."""
    module = program[-1] if len(program) >= 2 and program[-2] == "-m" else None
    script = next((t for t in program if t.endswith(".py")), None)
    known = frameworks()
    if module is not None:
        return next((f for f in known.values() if module in f.modules), None)
    if script is not None:
        # slime's, miles' and Relax's entry scripts share names: the run's framework decides, else slime
        matches = sorted((f for f in known.values() if Path(script).name in f.scripts), key=lambda f: f.name != "slime")
        preferred = [f for f in matches if f.name in run_framework.lower() or f.name in script.lower()]
        return (preferred or matches or [None])[0]
    return None
