"""Framework adapters: what each RL post-training framework's runs look like.

One module per framework family (`slime.py`, `verl.py`, `openrlhf.py`, `trl.py`,
`ms_swift.py`, `nemo_rl.py`), each declaring a `Framework`:

  - how its logs are recognised (`log_markers`: substrings only its logs print),
  - its metric-line grammars (names of the grammars in `triage.formats.metric_lines`),
  - its argument sources (`arg_sources`: flags, Hydra overrides, YAML, Python config),
  - its error wordings (`error_wordings`: catalog id, pattern, the framework file it
    comes from): the signature probe reads them after its own table (`probes/signatures.yaml`),
    each as the outcome that leads to its id, so a wording must be the failure's own words,
  - how a probe's missing artifact is produced there (`needs_help`: the flag or config
    key to name in the report, overriding `triage.run.run.NEEDS_HELP`).

The metric vocabulary (what `grad_norm`, `kl`, `reward`... are called in each framework)
is data: `metrics.yaml`, one row per canonical metric, one column per framework.
Argument names likewise: `args.yaml`. Adapters are registered through the
`triage.framework_adapters` entry-point group (`triage.frameworks` is the group of the
frameworks a replay relaunches, `triage/replay/frameworks.py`); adding a framework is one
module plus a column in each data file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import metadata
from pathlib import Path

import yaml

from triage import safe_io
from triage.errors import PlaybookError

HERE = Path(__file__).parent
ENTRY_POINT_GROUP = "triage.framework_adapters"


@dataclass(frozen=True)
class ErrorWording:
    """One way a framework words a failure: the catalog id it points to, the regex, where it comes from."""

    verdict: str
    pattern: str
    source: str  # the framework source file (repo path) that prints it

    def regex(self) -> re.Pattern[str]:
        return re.compile(self.pattern)


@dataclass(frozen=True)
class Framework:
    """What one framework family's runs look like (see the module docstring)."""

    name: str  # the column name in metrics.yaml / args.yaml
    title: str
    run_names: tuple[str, ...]  # values `Run.framework` takes for runs of this family
    log_markers: tuple[str, ...] = ()
    metric_grammars: tuple[str, ...] = ()
    arg_sources: tuple[str, ...] = ()
    error_wordings: tuple[ErrorWording, ...] = ()
    needs_help: dict[str, str] = field(default_factory=dict)
    # the family's members a log can be told apart by, each by its own package's paths and module
    # names (slime / miles / Relax; the HF Trainer and axolotl); empty: a run is always run_names[0]
    members: tuple[str, ...] = ()

    def recognise(self, text: str) -> int:
        """How many of this framework's log markers `text` holds (0: not this framework's)."""
        return sum(1 for marker in self.log_markers if marker in text)

    def member(self, text: str) -> str:
        """Which of the family's members `text` is of: the one whose package its paths and module names
        (`miles/backends/…`, `relax.components`, `axolotl.train`) name most, the first on a tie or none."""
        if not self.members:
            return self.run_names[0] if self.run_names else self.name
        # (whatever the case: a checkout's directory is often the project's own spelling, `Relax/scripts/`,
        # redai-studio/Relax#44)
        counts = [len(re.findall(rf"(?<![\w-]){re.escape(name)}[/.]", text, re.IGNORECASE)) for name in self.members]
        best = max(range(len(counts)), key=lambda i: (counts[i], -i))
        return self.members[best]

    def metric_names(self) -> dict[str, tuple[str, ...]]:
        """canonical metric -> this framework's keys ("kind:key" or bare key), most specific first."""
        out: dict[str, tuple[str, ...]] = {}
        for canonical, row in metric_vocabulary().items():
            cell = row.get(self.name)
            if cell:
                out[canonical] = tuple(cell["keys"])
        return out

    def arg_names(self, remedy: bool = False) -> dict[str, tuple[str, ...]]:
        """canonical argument -> this framework's names for it (dotted for Hydra / YAML keys); with
        `remedy`, the rows kept for naming a remedy's flags only (`remedy_only`) as well."""
        out: dict[str, tuple[str, ...]] = {}
        for canonical, row in arg_vocabulary().items():
            if not remedy and canonical in remedy_only_args():
                continue
            cell = row.get(self.name)
            if cell:
                out[canonical] = tuple(cell["names"])
        return out

    def own_flags(self, flags: list[str]) -> tuple[list[str], list[tuple[str, tuple[str, ...]]], list[str]]:
        """The catalog's remedy flags as this framework names them (args.yaml). The catalog writes slime's
        command-line flags (`--lr`) beside other frameworks' own keys (`num_generations`): a slime flag becomes
        this framework's names where args.yaml maps it, and another framework's key that this one does not
        take is dropped. Returns (flags, [(slime flag, own names)], [slime flags with no name here])."""
        own = self.arg_names(remedy=True)
        vocabulary = arg_vocabulary()
        canonical = canonical_arg_names(remedy=True)
        out: list[str] = []
        told: list[tuple[str, tuple[str, ...]]] = []
        unnamed: list[str] = []
        for flag in flags:
            if flag.startswith("--"):
                word = flag.split()[0]
                names = own.get(canonical.get(word[2:].replace("-", "_"), ""))
                if names:
                    told.append((word, names))
                    out.extend(n for n in names if n not in out)
                else:
                    unnamed.append(word)
                continue
            key = flag.replace("-", "_")
            row = vocabulary.get(canonical.get(key, ""), {})
            if row and not any(key in cell["names"] for fw, cell in row.items() if fw in (self.name, "slime")):
                continue  # another framework's own key (verl's `actor_rollout_ref.rollout.n` to a TRL run)
            if flag not in out:
                out.append(flag)
        return out, told, unnamed


def _load_table(name: str, list_key: str) -> dict[str, dict[str, dict]]:
    path = HERE / name
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(raw, dict):
        raise PlaybookError(f"{path}: expected a mapping of canonical names to framework columns")
    table: dict[str, dict[str, dict]] = {}
    for canonical, row in raw.items():
        if not isinstance(row, dict):
            raise PlaybookError(f"{path}: {canonical}: expected a mapping of framework -> cell")
        cells: dict[str, dict] = {}
        for fw, cell in row.items():
            if fw in ("note", "remedy_only"):
                continue
            if not isinstance(cell, dict) or not isinstance(cell.get(list_key), list) or not cell.get("source"):
                raise PlaybookError(f"{path}: {canonical}.{fw}: expected {{{list_key}: [...], source: ...}}")
            cells[fw] = cell
        table[str(canonical)] = cells
    return table


@lru_cache(maxsize=1)
def metric_vocabulary() -> dict[str, dict[str, dict]]:
    """metrics.yaml: canonical metric -> framework -> {keys: [...], source: file}."""
    return _load_table("metrics.yaml", "keys")


@lru_cache(maxsize=1)
def arg_vocabulary() -> dict[str, dict[str, dict]]:
    """args.yaml: canonical argument -> framework -> {names: [...], source: file}."""
    return _load_table("args.yaml", "names")


@lru_cache(maxsize=1)
def registry() -> dict[str, Framework]:
    """Every registered framework adapter, by name (entry-point group `triage.framework_adapters`).

    The built-ins are registered in pyproject.toml exactly like a third-party package's;
    when the package metadata is missing (a source checkout never installed), they are
    loaded directly. An adapter whose module cannot be imported is skipped with a warning on
    stderr: the others still read the run.
    """
    found: dict[str, Framework] = {}
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            fw = ep.load()
        except Exception as exc:  # noqa: BLE001 - an adapter that cannot be imported is skipped, the others read
            # (an installed package's entry points naming a module its checkout lacks, or a plugin's own bug)
            import structlog

            structlog.get_logger("triage.frameworks").warning(
                "framework_adapter_skipped", adapter=ep.name, entry_point=ep.value, error=f"{type(exc).__name__}: {exc}")
            continue
        if not isinstance(fw, Framework):
            raise PlaybookError(f"entry point {ep.name} ({ep.value}) is not a triage.frameworks.Framework")
        found[fw.name] = fw
    if not found:
        from triage.frameworks import ms_swift, nemo_rl, openrlhf, slime, trl, verl

        for mod in (slime, verl, openrlhf, trl, ms_swift, nemo_rl):
            found[mod.FRAMEWORK.name] = mod.FRAMEWORK
    return found


def for_run(run_framework: str | None) -> Framework | None:
    """The adapter for a `Run.framework` value (slime, miles, relax, verl, hf_trainer, ...)."""
    if not run_framework:
        return None
    for fw in registry().values():
        if run_framework == fw.name or run_framework in fw.run_names:
            return fw
    return None


def detect(text: str) -> Framework | None:
    """The framework whose log markers `text` holds most of; None when no marker is seen."""
    best, score = None, 0
    for fw in registry().values():
        s = fw.recognise(text)
        if s > score:
            best, score = fw, s
    return best


def error_wordings() -> list[tuple[str, ErrorWording]]:
    """(framework name, wording) for every registered framework: for the signature probe."""
    return [(fw.name, w) for fw in registry().values() for w in fw.error_wordings]


@lru_cache(maxsize=1)
def remedy_only_args() -> frozenset[str]:
    """args.yaml's rows marked `remedy_only: true`: names a remedy may tell a run, never added to its
    arguments (a slime rule reading them would misread a framework where they mean something else)."""
    raw = yaml.safe_load((HERE / "args.yaml").read_text(encoding="utf-8"))
    return frozenset(str(k) for k, row in raw.items() if isinstance(row, dict) and row.get("remedy_only") is True)


def canonical_arg_names(remedy: bool = False) -> dict[str, str]:
    """Every framework's argument name (normalised: dots kept, dashes as underscores) -> canonical name;
    with `remedy`, the remedy-only rows' names as well."""
    out: dict[str, str] = {}
    for canonical, row in arg_vocabulary().items():
        if not remedy and canonical in remedy_only_args():
            continue
        for cell in row.values():
            for name in cell["names"]:
                out.setdefault(name.replace("-", "_"), canonical)
    return out


def framework_of_sources(run) -> str | None:  # noqa: ANN001 - a triage.run.Run
    """A run's framework from its argument sources when its logs do not say: a TRL / HF
    config script means the HF Trainer, a Hydra config with verl's keys verl, a launch
    script's command the adapter whose markers it holds."""
    a = run.artifacts
    if getattr(a, "python_configs", None):
        return "hf_trainer"
    texts: list[str] = []
    command_file = [a.command_line] if getattr(a, "command_line", None) else []
    for path in command_file + list(getattr(a, "launch_scripts", []) or [])[:5] + list(getattr(a, "configs", []) or [])[:5]:
        try:
            with safe_io.open_regular(path) as fh:
                texts.append(fh.read(256 << 10).decode("utf-8", "replace"))
        except OSError:
            continue
    if a.command:
        texts.append(a.command)
    text = "\n".join(texts)
    fw = detect(text) if texts else None
    if fw is None:
        return None
    return fw.member(text)


def needs_help(run_framework: str | None, need: str, default: str | None = None) -> str | None:
    """How a missing artifact is produced in the run's framework (the flag or config key to
    name), falling back to `default` (the slime-worded `triage.run.run.NEEDS_HELP` entry)."""
    fw = for_run(run_framework)
    if fw is not None and need in fw.needs_help:
        return fw.needs_help[need]
    return default
