"""A Run: the artifacts of one job, parsed lazily and at most once."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from triage.errors import BadInput, TriageError
from triage.run.discover import Artifacts
from triage.run.manifest import Manifest

if TYPE_CHECKING:
    from triage.formats.run_args import RunArgs
    from triage.formats.dumps import RolloutDump
    from triage.formats.slime_log import LogIndex
    from triage.formats.trainer_state import TrainerState
    from triage.formats.tracebacks import TracebackReader
    from triage.metrics import Metrics
    from triage.versions import RunVersions

# What a probe may declare in `needs`, and how a user produces each.
NEEDS_HELP: dict[str, str] = {
    "log": "keep the job's driver log (e.g. `ray job logs <id> > job.log`) in the run directory",
    "args": "keep the job's command line (cmdline.txt) or a log that starts with Megatron's arguments block",
    "metrics": "keep the job log with its `step N:` / `rollout N:` lines, or trainer_state.json",
    "trainer_state": "keep output_dir/trainer_state.json (HF Trainer writes it at every save)",
    "rollout_dump": "rerun with `--save-debug-rollout-data <dir>/rollout_data/{rollout_id}.pt` or `--dump-details <dir>`",
    "train_dump": "rerun with `--dump-details <dir>` (writes <dir>/train_data/)",
    "checkpoint": "point --load / --ref-load / --save at the run's Megatron checkpoint directory",
    "hf_checkpoint": "keep the --hf-checkpoint directory (config.json, *.safetensors) reachable from the run",
    "engine_weights": "dump the engine's loaded weights from its load_weights, or pass --engine http://HOST:PORT",
    "engine": "pass --engine http://HOST:PORT (a live SGLang server serving the run's weights)",
    "flight_recorder": "rerun with TORCH_NCCL_TRACE_BUFFER_SIZE=2000 TORCH_NCCL_DUMP_ON_TIMEOUT=1 to get per-rank dumps",
    "gpu": "run the triage where a GPU is available (--executor ray on a GPU cluster)",
}


class Run:
    """One job's artifacts. Properties parse on first use and keep the result."""

    def __init__(self, ref: str, root: Path, manifest: Manifest, artifacts: Artifacts,
                 allowed_roots: tuple[Path, ...] = ()) -> None:
        self.ref = ref
        self.root = root
        # where the run's paths may lead: its directory, --allow-path, $TRIAGE_ALLOWED_ROOTS
        self.allowed_roots: tuple[Path, ...] = allowed_roots or (root,)
        # what was not followed or read, and why (discovery, the manifest, the run's arguments)
        self.skipped: list[str] = artifacts.skipped
        self.manifest = manifest
        self.artifacts = artifacts
        # Engines the probes may contact: the user's (--engine) and the run's allow-listed ones, set by
        # `triage.engines.consent.consent_engines`. The run's own list is only a list of addresses.
        self.named_engines: list[str] = list(artifacts.engines)
        self.engines: list[str] = []
        self.engines_not_contacted: list[str] = list(self.named_engines)
        self.engine_writes_allowed = False  # engine probes send nothing that changes a live engine unless asked
        # Whether a probe that declares `executes_run_code` may start the run's job (--allow-relaunch), the
        # environment it adds to the relaunched job (the caller's, never the run's), how a refusal says to allow it
        self.relaunch_allowed = False
        self.relaunch_env: dict[str, str] = {}
        self.relaunch_hint: str | None = None
        self.notes: list[str] = []  # for the report: what the triage deliberately left alone
        self._rollout_dumps: dict[Path, RolloutDump] = {}
        self.status: str | None = manifest.status

    def report_notes(self) -> list[str]:
        """What the report says the triage left alone on purpose (engines it did not contact, ...)."""
        out = list(self.notes)
        if self.engines_not_contacted:
            from triage.engines.consent import not_contacted_note

            out.append(not_contacted_note(self.engines_not_contacted))
        return out

    def __repr__(self) -> str:
        return f"Run({self.ref!r}, root={str(self.root)!r})"

    @cached_property
    def log(self) -> LogIndex:
        from triage.formats.slime_log import scan_logs

        return scan_logs(self.artifacts.logs)

    @cached_property
    def tracebacks(self) -> TracebackReader:
        """Every traceback of the run's logs, grouped: read once for the probes that place a crash."""
        from triage.formats.tracebacks import read_tracebacks

        return read_tracebacks(list(self.artifacts.logs))

    @cached_property
    def paste_holds_traceback(self) -> bool:
        """Whether a paste-sized log holds a traceback only the traceback reader knows: a notebook's
        (IPython's format), pasted from below its header and cut above its exception (unslothai/unsloth#4360).
        A large log is not read for this: its own lines answer whether it holds a job."""
        return bool(self.pastes) and bool(self.tracebacks.groups)

    @cached_property
    def pastes(self) -> dict[str, str]:
        """The text of each log small enough to be a paste (`pasted_table.PASTE_BYTES`), read once for
        the readers that look at a paste as a whole (tables, a pasted command, frames around an OOM)."""
        from triage.formats.pasted_table import paste_texts

        return paste_texts(self.artifacts.logs)

    @cached_property
    def args(self) -> RunArgs:
        from triage.formats.run_args import collect_run_args

        return collect_run_args(self)

    @cached_property
    def trainer_state(self) -> TrainerState | None:
        from triage.formats.trainer_state import load_trainer_states

        return load_trainer_states(self.artifacts.trainer_states) if self.artifacts.trainer_states else None

    @cached_property
    def metrics(self) -> Metrics:
        from triage.metrics import Metrics

        return Metrics.from_run(self)

    @cached_property
    def versions(self) -> RunVersions:
        """The package versions the run names ({package: VersionRecord}; see triage/versions.py)."""
        from triage.versions import read_versions

        return read_versions(self)

    @cached_property
    def framework(self) -> str:
        if self.manifest.framework:
            return self.manifest.framework
        if self.artifacts.trainer_states and not self.artifacts.logs:
            return "hf_trainer"
        if self.artifacts.logs and self.log.framework != "unknown":
            return self.log.framework
        from triage.frameworks import framework_of_sources

        return framework_of_sources(self) or ("hf_trainer" if self.artifacts.trainer_states else "unknown")

    def needs_help(self, need: str) -> str:
        """How to produce a missing artifact, worded for the run's framework (triage/frameworks/)."""
        from triage.frameworks import needs_help

        return needs_help(self.framework, need, NEEDS_HELP.get(need, "")) or ""

    def has(self, need: str) -> bool:
        """Whether the run has what a probe declares it needs."""
        a = self.artifacts
        if need == "log":
            return bool(a.logs)
        if need == "args":
            return bool(self.args)
        if need == "metrics":
            return not self.metrics.empty()
        if need == "trainer_state":
            return bool(a.trainer_states)
        if need == "rollout_dump":
            return bool(self.rollout_dump_paths())
        if need == "train_dump":
            return bool(a.train_dumps)
        if need == "checkpoint":
            return bool(a.checkpoints) or any(self.args.get(k) for k in ("load", "ref_load", "save"))
        if need == "hf_checkpoint":
            return bool(a.hf_checkpoints) or bool(self.args.get("hf_checkpoint"))
        if need == "engine_weights":
            return bool(a.engine_weights) or bool(self.engines)
        if need == "engine":
            return bool(self.engines)
        if need == "flight_recorder":
            return bool(a.flight_recorder)
        if need == "gpu":
            from triage.hardware import gpu_count

            return gpu_count() > 0
        raise AssertionError(f"unknown need {need!r}")

    def resolve_path(self, value: Any) -> Path | None:
        """A path from the run's arguments, if it exists inside the run directory or an allowed root.

        A relative path is taken relative to the run directory (never the working directory).
        An absolute path is used where it exists inside the allowed roots; one from the cluster
        that is not here, or not allowed, is looked up by its trailing components under the run
        directory (`/mnt/ckpt/run7/actor` -> `<run>/actor`). A path that exists but resolves
        outside the allowed roots (`../../x`, a symlink out) is never used, and is named in
        `skipped`.
        """
        if not value or not isinstance(value, str) or "\x00" in value:
            return None
        p = Path(value)
        if not p.is_absolute():
            return self._confined(self.root / p, value)
        found = self._confined(p, value)
        if found is not None:
            return found
        parts = p.parts[1:]
        for i in range(len(parts)):
            q = self._confined(self.root.joinpath(*parts[i:]), value)
            if q is not None:
                return q
        return None

    def _confined(self, path: Path, value: str) -> Path | None:
        """`path` if it exists and resolves inside the allowed roots; a skip note if it exists outside."""
        from triage import safe_io
        from triage.errors import RefusedFile

        try:
            real = safe_io.resolve(path)
        except FileNotFoundError:
            return None
        except (RefusedFile, OSError) as exc:
            self._skip(f"argument path {value!r}: {getattr(exc, 'reason', None) or exc.strerror}: not used")
            return None
        reason = safe_io.why_refused(real, self.allowed_roots)
        if reason is not None:
            self._skip(f"argument path {value!r}: {reason}: not used")
            return None
        return path

    def _skip(self, note: str) -> None:
        if note not in self.skipped and len(self.skipped) < 50:
            self.skipped.append(note)

    def rollout_dump(self, path: str | Path) -> RolloutDump:
        """A rollout dump, loaded safely once per triage however many probes read it."""
        from triage.formats.dumps import load_rollout_dump

        key = Path(path).resolve()
        dump = self._rollout_dumps.get(key)
        if dump is None:
            dump = self._rollout_dumps[key] = load_rollout_dump(key)
        return dump

    def rollout_dumps(self, problems: list[str], *, limit: int | None = None,
                      with_eval: bool = False) -> Iterator[tuple[Path, RolloutDump]]:
        """The rollout dumps that load, lowest rollout id first (eval dumps last, or left out).

        Stops after `limit` loaded dumps. A dump that cannot be read is skipped and its
        reason appended to `problems`; a hostile or corrupt one (BadInput) stops the triage
        with its one-line error.
        """
        paths = sorted((p for p in self.rollout_dump_paths() if with_eval or not p.name.startswith("eval_")),
                       key=dump_order)
        read = 0
        for path in paths:
            if limit is not None and read >= limit:
                return
            try:
                dump = self.rollout_dump(path)
            except BadInput:
                raise
            except TriageError as exc:
                problems.append(str(exc))
                continue
            read += 1
            yield path, dump

    def rollout_dump_paths(self) -> list[Path]:
        paths = list(self.artifacts.rollout_dumps)
        if paths:
            return paths
        for key in ("save_debug_rollout_data", "load_debug_rollout_data"):
            template = self.args.get(key)
            if isinstance(template, str) and "{rollout_id}" in template:
                parent = self.resolve_path(str(Path(template).parent))
                if parent is not None:
                    pattern = Path(template).name.replace("{rollout_id}", "*")
                    paths.extend(sorted(parent.glob(pattern)))
        return paths


def dump_order(path: Path) -> tuple[bool, int, str]:
    """Sort key for rollout dump files: training dumps by rollout id (verl's `{step}.jsonl`, W&B's tables by
    their number), other names after, eval dumps last."""
    stem = path.stem
    digits = stem.removeprefix("eval_")
    if stem.startswith("completions_"):  # a W&B table's file, numbered by the table's logs: `completions_12_<hash>`
        digits = stem.split("_")[1]
    return stem.startswith("eval_"), int(digits) if digits.isdigit() else 1 << 30, stem
