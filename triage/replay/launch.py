"""Replay a training step by launching the framework itself on a saved rollout.

The slime / Relax guides' "separate debugging for training and inference": rerun the job
with `--load-debug-rollout-data <dump>` (which sets `--debug-train-only`, so no engine
starts) and the training side consumes exactly the rollout the run saved. Whatever the
framework does wrong on that rollout (a kernel, a parallel layout, a loss) happens
again, which an in-process recomputation with other code would miss.

The replay's command is the run's own command line with:
- `--load-debug-rollout-data` pointing at the run's rollout dumps,
  `--start-rollout-id R --num-rollout R+1` so exactly rollout R is trained;
- the weights rollout R started from (`--load` dropped for a fresh run, so slime falls
  back to `--ref-load`; else `--load <save> --ckpt-step <R-1>`);
- `--dump-details` redirected to a scratch directory (the replay's per-token
  log-probs come back in its train dump), `--save` / `--save-interval` dropped: a
  replay never writes into the run;
- for a reduction, the parallel sizes changed (`--tensor-model-parallel-size` ...).

It runs as a subprocess with a timeout, in its own process group (killed whole on
timeout), and its `rollout R: {...}` / `step N: {...}` lines are read back with the
same log parser the triage uses on the run.

A run can be relaunched here when its program is: the testbed (`python -m
triage.testbed.train`, relaunched with the environment the job ran in), or a framework
entry script that exists here with the framework importable and a GPU present.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from triage.errors import TriageError, Unavailable

if TYPE_CHECKING:
    from triage.run.run import Run

TESTBED_MODULE = "triage.testbed.train"
# Flags whose values write into the run directory or start what a replay must not start.
_DROPPED = ("--save", "--save-interval", "--dump-details", "--save-debug-rollout-data", "--save-debug-train-data",
            "--load-debug-rollout-data", "--debug-rollout-only", "--use-wandb", "--wandb-project", "--wandb-group",
            "--start-rollout-id", "--num-rollout", "--testbed-log", "--testbed-engine-dump")
PARALLEL_FLAGS = {
    "tp": "--tensor-model-parallel-size",
    "pp": "--pipeline-model-parallel-size",
    "cp": "--context-parallel-size",
    "ep": "--expert-model-parallel-size",
}
PARALLEL_ARGS = {"tp": "tensor_model_parallel_size", "pp": "pipeline_model_parallel_size",
                 "cp": "context_parallel_size", "ep": "expert_model_parallel_size"}
_FRAMEWORK_PACKAGES = {"slime": "slime", "miles": "miles", "relax": "relax"}


class LaunchFailed(TriageError):
    """The relaunched job did not produce the step it was asked to replay."""


# --- the job's command line ------------------------------------------------------------------


def _is_flag(tok: str) -> bool:
    return tok.startswith("--") and len(tok) > 2


def flag_spans(argv: list[str]) -> list[tuple[str, int, int]]:
    """(flag, start, end) of every `--flag [values...]` in an argv (values run to the next flag)."""
    out: list[tuple[str, int, int]] = []
    i = 0
    while i < len(argv):
        tok = argv[i]
        if _is_flag(tok):
            j = i + 1
            if "=" not in tok:
                while j < len(argv) and not _is_flag(argv[j]):
                    j += 1
            out.append((tok.split("=", 1)[0], i, j))
            i = j
        else:
            i += 1
    return out


def drop_flags(argv: list[str], flags: Iterable[str]) -> list[str]:
    names = set(flags)
    spans = [(s, e) for f, s, e in flag_spans(argv) if f in names]
    keep = [True] * len(argv)
    for s, e in spans:
        for k in range(s, e):
            keep[k] = False
    return [t for t, k in zip(argv, keep) if k]


def set_flag(argv: list[str], flag: str, *values: Any) -> list[str]:
    """argv with `flag` set to `values` (a switch when no value), replacing any earlier setting."""
    return drop_flags(argv, [flag]) + [flag, *(str(v) for v in values)]


def flag_value(argv: list[str], flag: str) -> list[str] | None:
    found = None
    for f, s, e in flag_spans(argv):
        if f == flag:
            tok = argv[s]
            found = [tok.split("=", 1)[1]] if "=" in tok else argv[s + 1: e]
    return found


@dataclass(frozen=True)
class JobSpec:
    """How to start the run's job again: program, flags, directory and environment."""

    program: tuple[str, ...]  # e.g. (python, "-m", "triage.testbed.train")
    argv: tuple[str, ...]  # the framework's flags
    cwd: Path
    env: dict[str, str]
    framework: str  # testbed | slime | miles | relax
    log_flag: str | None = None  # a flag that sends the job log to a file (the testbed's)

    def command(self, argv: Iterable[str] | None = None) -> str:
        prog = ["python3" if p == sys.executable else p for p in self.program]
        return " ".join(shlex.quote(t) for t in [*prog, *(self.argv if argv is None else argv)])


def _command_text(run: Run) -> str | None:
    a = run.artifacts
    if a.command_line is not None:
        try:
            return a.command_line.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
    if a.command:
        return a.command
    if a.logs and run.log.command_line:
        return run.log.command_line
    return None


def _tokens(text: str) -> list[str]:
    import re

    joined = re.sub(r"\\\r?\n", " ", text)
    try:
        return shlex.split(joined)
    except ValueError:
        return joined.split()


def _program_split(tokens: list[str]) -> tuple[list[str], list[str]]:
    """(program tokens up to the script / module, flags after it)."""
    for i, tok in enumerate(tokens):
        if tok == "-m" and i + 1 < len(tokens):
            return tokens[: i + 2], tokens[i + 2:]
        if tok.endswith(".py"):
            return tokens[: i + 1], tokens[i + 1:]
    first = next((i for i, t in enumerate(tokens) if t.startswith("--")), len(tokens))
    return tokens[:first], tokens[first:]


def is_testbed_run(run: Run) -> bool:
    text = _command_text(run)
    return bool(text) and TESTBED_MODULE in text


def job_spec(run: Run) -> JobSpec:
    """The run's job, ready to be relaunched here; Unavailable (with the reason) when it cannot be."""
    text = _command_text(run)
    if not text:
        raise Unavailable("args", "the run left no command line to relaunch its job from",
                          "keep the job's command line (cmdline.txt) in the run directory")
    tokens = _tokens(text.strip().splitlines()[0] if "\\\n" not in text else text)
    program, flags = _program_split(tokens)
    if TESTBED_MODULE in program:
        return _testbed_spec(run, flags)
    script = next((t for t in program if t.endswith(".py")), None)
    module = program[-1] if len(program) >= 2 and program[-2] == "-m" else None
    where = (script or module or " ".join(program) or "?")
    framework = next((f for f in _FRAMEWORK_PACKAGES if f in (where + " " + run.framework).lower()), "slime")
    package = _FRAMEWORK_PACKAGES[framework]
    script_path = None
    if script:
        script_path = next((p for p in (run.resolve_path(script), Path(script)) if p is not None and p.is_file()), None)
    from triage.hardware import gpu_count

    missing = []
    if importlib.util.find_spec(package) is None:
        missing.append(f"{framework} is not installed here")
    if script and script_path is None:
        missing.append(f"its entry script {script} is not here")
    if gpu_count() == 0:
        missing.append("no GPU is available")
    if missing:
        replay = JobSpec(tuple(program), tuple(flags), run.root, {}, framework)
        raise Unavailable(
            "framework",
            f"the run's job ({where}) cannot be relaunched here: {', '.join(missing)}",
            replay.command(replay_flags(list(flags), "<dump>/rollout_data/{rollout_id}.pt", 0, "<scratch>")),
        )
    prog = [sys.executable, *([str(script_path)] if script_path else ["-m", module] if module else [])]
    return JobSpec(tuple(prog), tuple(flags), (script_path.parent if script_path else run.root), {}, framework)


def _testbed_spec(run: Run, flags: list[str]) -> JobSpec:
    """The testbed's job: its environment (the installed code of the cluster it ran on) comes with it."""
    env: dict[str, str] = {}
    argv = list(flags)
    if (run.root / ".testbed" / "scenario.json").is_file():
        from triage.testbed.scenarios import job_environment

        job = job_environment(run.root)
        raw = list(job["argv"])
        if raw[:2] == ["-m", TESTBED_MODULE]:
            raw = raw[2:]
        argv = raw
        env = {str(k): str(v) for k, v in job.get("env", {}).items()}
    return JobSpec((sys.executable, "-m", TESTBED_MODULE), tuple(argv), run.root, env, "testbed",
                   log_flag="--testbed-log")


# --- the replay's flags -----------------------------------------------------------------------


@dataclass(frozen=True)
class LaunchWeights:
    """Which weights the replayed rollout starts from, as flags."""

    load: str | None = None  # None: drop --load (slime falls back to --ref-load)
    ckpt_step: int | None = None
    label: str = "the run's initial weights (--ref-load)"


def replay_flags(argv: list[str], dump_template: str, rollout_id: int, scratch: str | Path,
                 weights: LaunchWeights | None = None, parallel: dict[str, int] | None = None,
                 extra: dict[str, Any] | None = None) -> list[str]:
    """The run's flags turned into a train-only replay of one rollout, writing only under `scratch`."""
    out = drop_flags(list(argv), _DROPPED)
    weights = weights or LaunchWeights()
    out = drop_flags(out, ["--load", "--ckpt-step"])
    if weights.load is not None:
        out += ["--load", weights.load]
        if weights.ckpt_step is not None:
            out += ["--ckpt-step", str(weights.ckpt_step)]
    out += ["--load-debug-rollout-data", str(dump_template), "--dump-details", f"{scratch}/dump",
            "--start-rollout-id", str(rollout_id), "--num-rollout", str(rollout_id + 1)]
    if parallel is not None:
        world = 1
        for dim, size in parallel.items():
            out = set_flag(out, PARALLEL_FLAGS[dim], size)
            world *= size
        out = set_flag(out, "--actor-num-nodes", 1)
        out = set_flag(out, "--actor-num-gpus-per-node", world)
    for flag, value in (extra or {}).items():
        if value is None:
            out = drop_flags(out, [flag])
        elif value is True:
            out = set_flag(out, flag)
        else:
            out = set_flag(out, flag, *(value if isinstance(value, (list, tuple)) else [value]))
    return out


def dump_template(run: Run, rollout_id: int) -> str:
    """The `{rollout_id}` template of the run's rollout dumps (absolute), checked for rollout `rollout_id`."""
    for p in run.rollout_dump_paths():
        if p.stem == str(rollout_id) or p.stem.endswith(f"_{rollout_id}"):
            stem = p.stem[: len(p.stem) - len(str(rollout_id))]
            return str(p.resolve().parent / f"{stem}{{rollout_id}}{p.suffix}")
    raise Unavailable("rollout_dump", f"no rollout dump for rollout {rollout_id}",
                      "rerun with `--dump-details <dir>` (or --save-debug-rollout-data <dir>/{rollout_id}.pt)")


def weights_for_rollout(run: Run, rollout_id: int, first_rollout: int = 0) -> LaunchWeights:
    """The flags that make the replay start rollout `rollout_id` from the weights the run had then."""
    from triage.replay.model import initial_source, saved_iterations

    if rollout_id > first_rollout:
        save = run.resolve_path(run.args.get("save"))
        if save is not None:
            before = [i for i in saved_iterations(save) if i < rollout_id]
            if before:
                return LaunchWeights(str(save.resolve()), before[-1], f"--save iteration {before[-1]}")
    try:
        src = initial_source(run)
    except Unavailable:
        return LaunchWeights()
    ref = run.resolve_path(run.args.get("ref_load"))
    if ref is not None and src.path.resolve() == ref.resolve():
        return LaunchWeights()
    if (src.path / "latest_checkpointed_iteration.txt").is_file() or src.iteration is not None:
        return LaunchWeights(str(src.path.resolve()), src.iteration, src.describe())
    return LaunchWeights(str(src.path.resolve()), None, src.describe())


# --- running it --------------------------------------------------------------------------------


@dataclass
class LaunchResult:
    """What one relaunched replay produced."""

    command: str
    returncode: int | None
    wall_s: float
    scratch: Path
    rollout: dict[str, float] = field(default_factory=dict)  # `rollout R: {...}`
    steps: dict[int, dict[str, float]] = field(default_factory=dict)  # `step N: {...}` by N
    log_probs: list[torch.Tensor] | None = None  # per sample, from the replay's train dump
    ref_log_probs: list[torch.Tensor] | None = None
    error: str | None = None
    timed_out: bool = False

    @property
    def first_step(self) -> dict[str, float] | None:
        return self.steps[min(self.steps)] if self.steps else None

    def describe(self) -> str:
        return f"{self.command} ({self.wall_s:.1f}s)"


def _records(table, kind: str) -> dict[int, dict[str, float]]:
    out: dict[int, dict[str, float]] = {}
    for key in table.keys(kind):
        idx, vals = table.series(kind, key)
        for i, v in zip(idx.tolist(), vals.tolist()):
            out.setdefault(int(i), {})[key] = float(v)
    return out


def _train_dump_columns(scratch: Path, rollout_id: int) -> tuple[list[torch.Tensor] | None, list[torch.Tensor] | None]:
    from triage.formats.dumps import load_train_dump

    d = scratch / "dump" / "train_data"
    files = sorted(d.glob(f"{rollout_id}.pt")) or sorted(d.glob(f"{rollout_id}_*.pt"))
    lps: list[torch.Tensor] = []
    refs: list[torch.Tensor] = []
    have_ref = True
    for f in files:
        dump = load_train_dump(f)
        if dump.log_probs is None:
            return None, None
        lps += [torch.tensor(x if x is not None else [], dtype=torch.float32) for x in dump.log_probs]
        if dump.ref_log_probs is None:
            have_ref = False
        else:
            refs += [torch.tensor(x if x is not None else [], dtype=torch.float32) for x in dump.ref_log_probs]
    if not files:
        return None, None
    return lps, (refs if have_ref else None)


def launch(spec: JobSpec, argv: list[str], scratch: Path, rollout_id: int, timeout_s: float,
           env: dict[str, str] | None = None) -> LaunchResult:
    """Run the job with `argv` in its directory; read back its rollout / step lines and train dump."""
    from triage.formats.slime_log import scan_logs

    scratch.mkdir(parents=True, exist_ok=True)
    args = list(argv)
    log_file = scratch / "job.log"
    if spec.log_flag:
        args = set_flag(args, spec.log_flag, str(log_file))
    stdout_file = scratch / "stdout.log"
    full_env = dict(os.environ)
    full_env.update(spec.env)
    full_env.update(env or {})
    root = str(Path(__file__).resolve().parents[2])
    full_env["PYTHONPATH"] = os.pathsep.join(p for p in (root, full_env.get("PYTHONPATH", "")) if p)
    if "TORCH_FR_DUMP_TEMP_FILE" in full_env:  # a collective timeout's dumps land in the scratch dir, not the run
        full_env["TORCH_FR_DUMP_TEMP_FILE"] = str(scratch / "flight_recorder" / "nccl_trace_rank_")
    command = spec.command(argv).replace(str(scratch.parent), "<scratch>")
    t0 = time.monotonic()
    timed_out = False
    with open(stdout_file, "wb") as out:
        proc = subprocess.Popen([*spec.program, *args], cwd=str(spec.cwd), env=full_env, stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            code: int | None = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
            code = None
    wall = time.monotonic() - t0
    logs = [p for p in (log_file, stdout_file) if p.is_file() and p.stat().st_size > 0]
    result = LaunchResult(command, code, wall, scratch, timed_out=timed_out)
    if logs:
        index = scan_logs(logs)
        result.rollout = _records(index.metrics, "rollout").get(rollout_id, {})
        result.steps = _records(index.metrics, "step")
        if index.tracebacks:
            result.error = index.tracebacks[-1].exception
    try:
        result.log_probs, result.ref_log_probs = _train_dump_columns(scratch, rollout_id)
    except TriageError as exc:
        result.error = result.error or str(exc)
    return result


def run_replay(run: Run, rollout_id: int, scratch: Path, *, spec: JobSpec | None = None,
               parallel: dict[str, int] | None = None, extra: dict[str, Any] | None = None,
               timeout_s: float = 300.0, first_rollout: int = 0) -> LaunchResult:
    """Relaunch the run's job to train rollout `rollout_id` alone; raises LaunchFailed without a step line."""
    spec = spec or job_spec(run)
    template = dump_template(run, rollout_id)
    weights = weights_for_rollout(run, rollout_id, first_rollout)
    argv = replay_flags(list(spec.argv), template, rollout_id, scratch, weights, parallel, extra)
    result = launch(spec, argv, scratch, rollout_id, timeout_s)
    if result.timed_out:
        raise LaunchFailed(f"the replay did not finish within {timeout_s:.0f}s: {result.command}")
    if not result.steps:
        why = result.error or f"exit code {result.returncode}"
        raise LaunchFailed(f"the replay wrote no `step` line ({why}): {result.command}")
    return result


def scratch_dir(prefix: str) -> tempfile.TemporaryDirectory:
    return tempfile.TemporaryDirectory(prefix=f"triage-{prefix}-")


def parallel_layout(run: Run) -> dict[str, int]:
    """The run's parallel sizes (tp, pp, cp, ep), 1 where unset."""
    out = {}
    for dim, key in PARALLEL_ARGS.items():
        v = run.args.get(key)
        try:
            out[dim] = int(v) if v is not None and not isinstance(v, bool) else 1
        except (TypeError, ValueError):
            out[dim] = 1
    return out

