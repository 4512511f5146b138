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
    from triage.metrics import Metrics

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

    def __init__(self, ref: str, root: Path, manifest: Manifest, artifacts: Artifacts) -> None:
        self.ref = ref
        self.root = root
        self.manifest = manifest
        self.artifacts = artifacts
        self.engines: list[str] = list(artifacts.engines)
        self.engine_writes_allowed = False  # engine probes send nothing that changes a live engine unless asked
        self._rollout_dumps: dict[Path, RolloutDump] = {}
        self.status: str | None = manifest.status

    def __repr__(self) -> str:
        return f"Run({self.ref!r}, root={str(self.root)!r})"

    @cached_property
    def log(self) -> LogIndex:
        from triage.formats.slime_log import scan_logs

        return scan_logs(self.artifacts.logs)

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
    def framework(self) -> str:
        if self.manifest.framework:
            return self.manifest.framework
        if self.artifacts.trainer_states and not self.artifacts.logs:
            return "hf_trainer"
        if self.artifacts.logs:
            return self.log.framework
        return "unknown"

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
        """A path from the run's arguments: as given if it exists, else relative to the run directory.

        Absolute paths from the cluster that do not exist here are looked up by their
        trailing components under the run directory (`/mnt/ckpt/run7/actor` -> `<run>/actor`).
        """
        if not value or not isinstance(value, str):
            return None
        p = Path(value)
        if p.exists():
            return p
        if not p.is_absolute():
            q = self.root / p
            return q if q.exists() else None
        parts = p.parts[1:]
        for i in range(len(parts)):
            q = self.root.joinpath(*parts[i:])
            if q.exists():
                return q
        return None

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
    """Sort key for rollout dump files: training dumps by rollout id, other names after, eval dumps last."""
    stem = path.stem
    digits = stem.removeprefix("eval_")
    return stem.startswith("eval_"), int(digits) if digits.isdigit() else 1 << 30, stem
