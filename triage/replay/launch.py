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

A run can be relaunched here when its program is the entry of a registered framework
(`triage.replay.frameworks`: slime's, miles' or Relax's `train.py`, the testbed's module)
that is installed here, with a GPU where the framework needs one. What starts is the
installed framework, never a file of the run directory; its environment is this
process's plus what the caller gives (`Run.relaunch_env`), never anything the run holds.
Nothing starts without consent (`triage.replay.consent`): without it, `job_spec` raises
`RelaunchRefused` with the exact command it would have run.
"""

from __future__ import annotations

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
from triage.replay.consent import RelaunchRefused, relaunch_permitted
from triage.replay.frameworks import Framework, framework_for, frameworks

if TYPE_CHECKING:
    from triage.run.run import Run

# Flags whose values write into the run directory or start what a replay must not start.
_DROPPED = ("--save", "--save-interval", "--dump-details", "--save-debug-rollout-data", "--save-debug-train-data",
            "--load-debug-rollout-data", "--debug-rollout-only", "--use-wandb", "--wandb-project", "--wandb-group",
            "--start-rollout-id", "--num-rollout")
PARALLEL_FLAGS = {
    "tp": "--tensor-model-parallel-size",
    "pp": "--pipeline-model-parallel-size",
    "cp": "--context-parallel-size",
    "ep": "--expert-model-parallel-size",
}
PARALLEL_ARGS = {"tp": "tensor_model_parallel_size", "pp": "pipeline_model_parallel_size",
                 "cp": "context_parallel_size", "ep": "expert_model_parallel_size"}


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

    program: tuple[str, ...]  # e.g. (python, "/opt/slime/train.py")
    argv: tuple[str, ...]  # the framework's flags
    cwd: Path
    env: dict[str, str]  # added to this process's environment: the caller's, never the run's
    framework: str  # a registered framework's name
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


def run_command(run: Run) -> tuple[list[str], list[str]]:
    """The run's (program, flags), from its command line; Unavailable when it left none."""
    text = _command_text(run)
    if not text:
        raise Unavailable("args", "the run left no command line to relaunch its job from",
                          "keep the job's command line (cmdline.txt) in the run directory")
    return _program_split(_tokens(text.strip().splitlines()[0] if "\\\n" not in text else text))


def _as_planned(program: list[str], flags: list[str], run: Run, framework: str) -> JobSpec:
    """The job as the run's command line names it, for showing the command (never started as such)."""
    return JobSpec(tuple(program), tuple(flags), run.root, {}, framework)


def planned_command(spec: JobSpec, run: Run, parallel: dict[str, int] | None = None,
                    scratch: str = "<scratch>") -> str:
    """The exact replay command `spec` would run for the run's first dumped rollout."""
    from triage.replay.logged import dumped_rollouts

    try:
        rid = min(dumped_rollouts(run))
        template = dump_template(run, rid)
    except (Unavailable, ValueError):
        rid, template = 0, "<dump>/rollout_data/{rollout_id}.pt"
    try:
        weights = weights_for_rollout(run, rid, rid)
    except TriageError:
        weights = None
    argv = replay_flags(list(spec.argv), template, rid, scratch, weights, parallel)
    if spec.log_flag:
        argv = set_flag(argv, spec.log_flag, f"{scratch}/job.log")
    return spec.command(argv)


def display_spec(run: Run) -> JobSpec:
    """The job as it would be started (the installed framework's entry), or as the run names it; never started."""
    program, flags = run_command(run)
    fw = framework_for(program, run.framework)
    spec = _installed_spec(fw, program, flags, run) if fw is not None else None
    return spec or _as_planned(program, flags, run, fw.name if fw else "?")


def job_spec(run: Run, parallel: dict[str, int] | None = None) -> JobSpec:
    """The run's job, ready to be relaunched here.

    Unavailable (with the reason) when it cannot be; `RelaunchRefused` (with the exact
    command) when it could be but the user did not consent to running the run's code.
    """
    program, flags = run_command(run)
    fw = framework_for(program, run.framework)
    where = next((t for t in program if t.endswith(".py")), None) or (program[-1] if program else "?")
    if fw is None:
        known = ", ".join(frameworks())
        raise Unavailable("framework", f"the run's program ({' '.join(program) or '?'}) is the entry of no framework "
                          f"this triage can relaunch ({known})",
                          _as_planned(program, flags, run, "?").command(
                              replay_flags(list(flags), "<dump>/rollout_data/{rollout_id}.pt", 0, "<scratch>")))
    spec = _installed_spec(fw, program, flags, run)
    if spec is None or not relaunch_permitted():
        shown = spec or _as_planned(program, flags, run, fw.name)
        command = planned_command(shown, run, parallel)
        if spec is None:
            raise Unavailable("framework", f"the run's job ({where}) cannot be relaunched here: "
                              f"{', '.join(_missing(fw, program))}", command)
        raise RelaunchRefused(f"relaunching the {fw.name} job ({where})", command)
    return spec


def _missing(fw: Framework, program: list[str]) -> list[str]:
    from triage.hardware import gpu_count

    out = []
    if not fw.installed():
        out.append(f"{fw.name} is not installed here")
    script = next((t for t in program if t.endswith(".py")), None)
    if script and fw.installed() and fw.script_path(script) is None:
        out.append(f"its entry script {Path(script).name} is not in the installed {fw.name}")
    if fw.needs_gpu and gpu_count() == 0:
        out.append("no GPU is available")
    return out


def _installed_spec(fw: Framework, program: list[str], flags: list[str], run: Run) -> JobSpec | None:
    """The installed framework's entry with the run's flags; None when it cannot start here."""
    if _missing(fw, program):
        return None
    module = program[-1] if len(program) >= 2 and program[-2] == "-m" else None
    if module is not None:
        prog: tuple[str, ...] = (sys.executable, "-m", module)
        cwd = run.root if fw.cwd == "run" else (fw.source_root() or run.root)
    else:
        script = fw.script_path(next(t for t in program if t.endswith(".py")))
        assert script is not None
        prog = (sys.executable, str(script))
        cwd = run.root if fw.cwd == "run" else script.parent
    argv = drop_flags(list(flags), [*fw.dropped_flags, *([fw.log_flag] if fw.log_flag else [])])
    return JobSpec(prog, tuple(argv), cwd, dict(run.relaunch_env), fw.name, log_flag=fw.log_flag)


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

    if not relaunch_permitted():  # the last guard: nothing of the run's starts without consent
        raise RelaunchRefused(f"relaunching the {spec.framework} job", spec.command(argv))
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
    if "-m" in spec.program:
        # `python -m` would put its working directory (the run directory, for the testbed) first on
        # sys.path: the job imports nothing from the run merely for starting there
        full_env["PYTHONSAFEPATH"] = "1"
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
    from triage import safe_io

    # what the replay wrote is read from its scratch directory, outside the run
    token = safe_io.confine((*(safe_io.confined_roots() or ()), Path(os.path.realpath(scratch))))
    try:
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
    finally:
        safe_io.reset(token)
    return result


def run_replay(run: Run, rollout_id: int, scratch: Path, *, spec: JobSpec | None = None,
               parallel: dict[str, int] | None = None, extra: dict[str, Any] | None = None,
               timeout_s: float = 300.0, first_rollout: int = 0) -> LaunchResult:
    """Relaunch the run's job to train rollout `rollout_id` alone; raises LaunchFailed without a step line."""
    spec = spec or job_spec(run, parallel)
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

