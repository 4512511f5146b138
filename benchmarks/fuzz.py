"""Fuzz `triage run` with damaged and hostile copies of the shipped example runs.

Each case copies one example (`examples/*`) to a temporary directory, applies one
mutation, and runs `triage run DIR --no-cache --json` in a child process with a deadline:
by default a fork of this process, which imported the triage once (the CLI's `main`, so
the same code path as the command), or with `--exec` a fresh `python -m triage`. Per case it records the exit code, whether stderr holds a traceback, whether
the run hung past the deadline, the wall time, the child's peak RSS (`os.wait4`), whether
a planted secret (outside the run, or in the environment) reached stdout or stderr, and
whether a hostile pickle's marker file appeared. It prints one row per mutation class.

The target: 0 tracebacks, 0 hangs, 0 exit 1, 0 leaks, 0 executed pickles, and peak RSS
below 1 GB on the sparse 20 GB log.

    .venv/bin/python benchmarks/fuzz.py                       # every class, 20 cases each
    .venv/bin/python benchmarks/fuzz.py --classes fifo,sparse_log --cases 5
    .venv/bin/python benchmarks/fuzz.py --list

Not part of `make test`: it takes a while (about 5 s per case on two cores).
`no_read_permission` runs its children without CAP_DAC_OVERRIDE / CAP_DAC_READ_SEARCH when
started as root, since root otherwise reads a file whatever its permission bits say.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import queue
import random
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
SECRET = "FUZZ-CANARY-outside-7d1e"
SLACK_TOKEN = "xoxb-FUZZ-CANARY-bot-token"
SLACK_SECRET = "FUZZ-CANARY-signing-secret"
SECRETS = (SECRET, SLACK_TOKEN, SLACK_SECRET)
PR_CAPBSET_DROP, CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH = 24, 1, 2  # linux/prctl.h, linux/capability.h


# --- a case ------------------------------------------------------------------------------------


@dataclass
class Case:
    run: Path  # the mutated copy
    outside: Path  # a directory beside it holding the planted secret
    marker: Path  # a hostile pickle would create this
    rng: random.Random
    drop_root_override: bool = False
    note: str = ""


@dataclass
class Result:
    code: int | None
    traceback: bool
    hung: bool
    wall_s: float
    rss_mb: float
    leaked: bool
    executed: bool


@dataclass
class Row:
    cls: str
    results: list[Result] = field(default_factory=list)


def files_of(run: Path) -> list[Path]:
    return sorted(p for p in run.rglob("*") if p.is_file() and not p.is_symlink())


def dirs_of(run: Path) -> list[Path]:
    return sorted(p for p in run.rglob("*") if p.is_dir() and not p.is_symlink())


def pick_file(case: Case, suffixes: tuple[str, ...] = ()) -> Path | None:
    files = [p for p in files_of(case.run) if p.name != "expected.json"]
    if suffixes:
        preferred = [p for p in files if p.name.endswith(suffixes)]
        files = preferred or files
    return case.rng.choice(files) if files else None


def text_files(case: Case) -> list[Path]:
    return [p for p in files_of(case.run) if p.suffix in (".log", ".txt", ".json", ".yaml", ".out")
            and p.name != "expected.json"]


# --- mutations ---------------------------------------------------------------------------------


def truncate(case: Case) -> None:
    p = pick_file(case)
    if p:
        size = p.stat().st_size
        with open(p, "r+b") as fh:
            fh.truncate(case.rng.randrange(0, max(1, size)))
        case.note = str(p.relative_to(case.run))


def byte_flips(case: Case) -> None:
    p = pick_file(case)
    if p and p.stat().st_size:
        data = bytearray(p.read_bytes())
        for _ in range(case.rng.randint(1, 64)):
            i = case.rng.randrange(len(data))
            data[i] ^= 1 << case.rng.randrange(8)
        p.write_bytes(bytes(data))
        case.note = str(p.relative_to(case.run))


def random_binary(case: Case) -> None:
    p = pick_file(case, (".log", ".pt", ".json", ".safetensors", ".txt", ".metadata", ".distcp"))
    if p:
        p.write_bytes(case.rng.randbytes(case.rng.choice([1, 16, 4096, 1 << 16, 1 << 20])))
        case.note = str(p.relative_to(case.run))


def empty(case: Case) -> None:
    p = pick_file(case)
    if p:
        p.write_bytes(b"")
        case.note = str(p.relative_to(case.run))


def delete(case: Case) -> None:
    victims = [p for p in files_of(case.run) + dirs_of(case.run) if p.name != "expected.json"]
    if victims:
        p = case.rng.choice(victims)
        shutil.rmtree(p) if p.is_dir() else p.unlink()
        case.note = str(p.relative_to(case.run))


def huge_line(case: Case) -> None:
    logs = [p for p in files_of(case.run) if p.suffix in (".log", ".txt")] or [case.run / "job.log"]
    p = case.rng.choice(logs)
    size = case.rng.choice([2 << 20, 8 << 20, 33 << 20])
    chunk = case.rng.choice([b"x", b"step 1: {'a': 1, ", b"\x1b[31m", b"Traceback "])
    with open(p, "ab") as fh:
        fh.write(b"[2026-08-01 10:00:00] train.py:1 - " + chunk * (size // len(chunk)))
        if case.rng.random() < 0.5:
            fh.write(b"\n")
    case.note = f"{p.relative_to(case.run)} +{size >> 20} MB line"


def regex_bait(case: Case) -> None:
    """Lines of near-misses for the line readers' patterns, each as long as a line is read (4000 characters):
    a CJK character before every `Error` (the prose-before-exception rule), rich's box sides around path-like
    text, unclosed parentheses after an exception's type, frame starts that never end."""
    logs = [p for p in files_of(case.run) if p.suffix in (".log", ".txt")] or [case.run / "job.log"]
    p = case.rng.choice(logs)
    unit = case.rng.choice(["\u4e2dError", "\u4e2dValueError(", "\u2502 /a/b.py:1 in", 'File "x", line 1, in ',
                            "\u4e2d\uff1aa.b.", "Traceback (most recent call last) \u2500"])
    line = (unit * (4000 // len(unit) + 1))[:4000]
    count = case.rng.choice([200, 2000])
    header = "\u256d\u2500 Traceback (most recent call last) \u2500\u256e\n" if case.rng.random() < 0.5 else ""
    with open(p, "a", encoding="utf-8") as fh:
        fh.write(header + (line + "\n") * count)
    case.note = f"{p.relative_to(case.run)} +{count} lines of {unit!r}"


def non_utf8(case: Case) -> None:
    files = text_files(case)
    if files:
        p = case.rng.choice(files)
        data = bytearray(p.read_bytes())
        for _ in range(case.rng.randint(1, 2000)):
            i = case.rng.randrange(len(data) + 1)
            data[i:i] = case.rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xe9t\xe9", b"\x80\x80"])
        p.write_bytes(bytes(data))
        case.note = str(p.relative_to(case.run))


def ansi_only(case: Case) -> None:
    logs = [p for p in files_of(case.run) if p.suffix in (".log", ".txt", ".out")] or [case.run / "job.log"]
    p = case.rng.choice(logs)
    codes = [b"\x1b[0m", b"\x1b[31;1m", b"\x1b[2K", b"\x1b[?25l", b"\r", b"\x1b]0;title\x07", b"[36m", b"\n"]
    p.write_bytes(b"".join(case.rng.choice(codes) for _ in range(case.rng.randint(1, 200_000))))
    case.note = str(p.relative_to(case.run))


def dir_file_swap(case: Case) -> None:
    if case.rng.random() < 0.5:
        p = pick_file(case)
        if p:
            p.unlink()
            p.mkdir()
            (p / "inner.log").write_text("hello\n")
            case.note = f"file {p.relative_to(case.run)} -> dir"
            return
    dirs = dirs_of(case.run)
    if dirs:
        d = case.rng.choice(dirs)
        shutil.rmtree(d)
        d.write_text("not a directory\n")
        case.note = f"dir {d.relative_to(case.run)} -> file"


def symlink_loop(case: Case) -> None:
    kind = case.rng.randrange(3)
    if kind == 0:
        p = pick_file(case) or case.run / "job.log"
        p.unlink(missing_ok=True)
        p.symlink_to(p.name)  # itself
    elif kind == 1:
        p = pick_file(case) or case.run / "job.log"
        p.unlink(missing_ok=True)
        other = p.with_name(p.name + ".loop")
        p.symlink_to(other.name)
        other.symlink_to(p.name)
    else:
        d = case.rng.choice(dirs_of(case.run) or [case.run])
        (d / "again").symlink_to(case.run)
        p = d / "again"
    case.note = f"loop at {p.relative_to(case.run)}"


def symlink_escape(case: Case) -> None:
    target = case.rng.choice([case.outside / "secret.log", case.outside, case.outside / "secret_ckpt",
                              Path("/etc/passwd"), Path("/proc/self/environ"), Path("/proc/self/fd/0"),
                              Path("/dev/urandom"), Path("/dev/zero")])
    p = pick_file(case, (".log", "cmdline.txt", ".pt", "trainer_state.json", ".safetensors")) or case.run / "job.log"
    if case.rng.random() < 0.3:
        p = case.run / "logs"
        p.mkdir(exist_ok=True)
        p = p / "worker.log"
    if p.exists() or p.is_symlink():
        p.unlink()
    p.symlink_to(target)
    case.note = f"{p.relative_to(case.run)} -> {target}"


def fifo(case: Case) -> None:
    p = pick_file(case, ("job.log", "cmdline.txt", ".safetensors", ".pt", "trainer_state.json", ".metadata",
                         "latest_checkpointed_iteration.txt", "config.json", "triage.yaml"))
    if case.rng.random() < 0.2 or p is None:
        p = case.run / case.rng.choice(["job.log", "cmdline.txt", "triage.yaml"])
    if p.exists():
        p.unlink()
    os.mkfifo(p)
    case.note = str(p.relative_to(case.run))


def no_read_permission(case: Case) -> None:
    case.drop_root_override = os.geteuid() == 0
    if case.rng.random() < 0.2:
        case.run.chmod(0o311)  # the run directory itself: not listable
        case.note = "run dir"
        return
    p = pick_file(case) if case.rng.random() < 0.7 else case.rng.choice(dirs_of(case.run) or [case.run])
    if p:
        p.chmod(0)
        case.note = str(p.relative_to(case.run))


def _deep(depth: int, style: str) -> str:
    if style == "list":
        return "[" * depth + "]" * depth
    return '{"a": ' * depth + "1" + "}" * depth


def deep_nesting(case: Case) -> None:
    depth = case.rng.choice([1_000, 10_000, 100_000])
    style = case.rng.choice(["list", "dict"])
    where = case.rng.randrange(5)
    if where == 0:
        (case.run / "triage.json").write_text('{"args": {"x": ' + _deep(depth, style) + "}}")
        case.note = "triage.json"
    elif where == 1:
        (case.run / "triage.yaml").write_text("args: {x: " + "[" * depth + "]" * depth + "}\n")
        case.note = "triage.yaml"
    elif where == 2:
        (case.run / "trainer_state.json").write_text('{"log_history": [{"step": 1, "x": ' + _deep(depth, style) + "}]}")
        case.note = "trainer_state.json"
    elif where == 3:
        header = ('{"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4], "x": ' + _deep(depth, style) + "}}").encode()
        hf = case.run / "hf_model"
        hf.mkdir(exist_ok=True)
        (hf / "config.json").write_text('{"model_type": "qwen2"}')
        (hf / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 4)
        case.note = "hf_model/model.safetensors"
    else:
        with open(case.run / "job.log", "a") as fh:
            fh.write("[2026-08-01 10:00:00] train.py:1 - step 1: {'x': " + "[" * depth + "]" * depth + "}\n")
        case.note = "job.log metric line"
    case.note += f" {style} x{depth}"


def many_files(case: Case) -> None:
    where = case.run if case.rng.random() < 0.5 else case.run / case.rng.choice(["aaa_samples", "rollout_result", "zzz"])
    where.mkdir(exist_ok=True)
    suffix = case.rng.choice([".json", ".log", ".pt", ".bin"])
    flags = os.O_CREAT | os.O_WRONLY
    for i in range(100_000):
        os.close(os.open(where / f"f{i:06d}{suffix}", flags))
    case.note = f"{where.relative_to(case.run) if where != case.run else '.'} 100000 x {suffix}"


def sparse_log(case: Case) -> None:
    p = case.rng.choice([case.run / "huge.log", case.run / "job.log", pick_file(case) or case.run / "job.log"])
    if not p.exists():
        p.touch()
    with open(p, "r+b") as fh:
        fh.truncate(20 << 30)  # 20 GB, never written: holes read as zeros
    case.note = str(p.relative_to(case.run))


EXTREMES = ["9" * 5000, "-" + "9" * 5000, "1e308", "-1e308", "1e309", str(10**30), "123456789012345678901234567890",
            "nan", "inf", "-inf", "0", "-0", "18446744073709551616", "1" * 4301]


def extreme_numbers(case: Case) -> None:
    value = case.rng.choice(EXTREMES)
    where = case.rng.randrange(4)
    if where == 0:
        with open(case.run / "job.log", "a") as fh:
            for step in range(3):
                fh.write(f"[2026-08-01 10:00:0{step}] train.py:1 - step {value}: "
                         f"{{'train/loss': {value}, 'train/grad_norm': {value}, 'perf/step_time': {value}}}\n")
    elif where == 1:
        rows = ",".join(f'{{"step": {value if i else 1}, "loss": {value}, "reward": {value}}}' for i in range(3))
        (case.run / "trainer_state.json").write_text(
            f'{{"global_step": {value}, "max_steps": {value}, "log_history": [{rows}]}}')
    elif where == 2:
        cmd = case.run / "cmdline.txt"
        old = cmd.read_text(errors="replace").strip() if cmd.is_file() else "python3 train.py"
        cmd.write_text(f"{old} --global-batch-size {value} --rollout-batch-size {value} "
                       f"--max-tokens-per-gpu {value} --lr {value}\n")
    else:
        trackers = list(case.run.rglob("latest_checkpointed_iteration.txt"))
        target = trackers[0] if trackers else case.run / "ckpt" / "latest_checkpointed_iteration.txt"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(value)
    case.note = f"{['log', 'trainer_state', 'cmdline', 'tracker'][where]} {value[:12]}"


def malformed_manifest(case: Case) -> None:
    outside = case.outside / "secret.log"
    variants: list[str] = [
        "[1, 2, 3]", "logs: 5", "logs: [null]", "logs: [{a: 1}]", "nonsense_key: 1", "framework: tensorflow",
        "logs: [/etc/passwd]", f"logs: [{outside}]", "logs: [../../../../etc/shadow]", "logs: [/proc/self/environ]",
        "engines: [http://169.254.169.254/]", "args: [1, 2]", "args: {a: !!python/object/apply:os.system [id]}",
        "logs:\n" + "".join(f"  - l{i}.log\n" for i in range(200_000)),
        "a: &a [1, 2, 3]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
        "args: {x: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c], y: [*d, *d, *d, *d, *d, *d, *d, *d, *d]}",
        "\x00\x01\x02", "logs: [" + "x" * 100_000 + "]", "command: " + "y" * (3 << 20), "{" * 50_000,
        "status: failed\nlogs: [job.log, job.log, job.log]", "checkpoints: [/]", "logs: ['']", "logs: [.]",
    ]
    text = case.rng.choice(variants)
    name = case.rng.choice(["triage.yaml", "triage.yml", "triage.json"])
    if name == "triage.json" and case.rng.random() < 0.5:
        text = json.dumps(case.rng.choice([{"logs": [str(outside)]}, {"logs": "x"}, [1], {"args": {"a": 10**30}},
                                            {"logs": [f"l{i}" for i in range(200_000)]}]))
    (case.run / name).write_text(text, errors="surrogateescape")
    case.note = f"{name}: {text[:30]!r}"


class _Exploit:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _hostile_bytes(case: Case) -> bytes:
    exploit = _Exploit(case.marker)
    payload = case.rng.choice([exploit, {"tokens": [exploit]}, [1, 2, {"x": exploit}]])
    return pickle.dumps(payload, protocol=case.rng.choice([2, 4, 5]))


def hostile_pickles(case: Case) -> None:
    targets = [p for p in files_of(case.run) if p.suffix == ".pt" or p.name == ".metadata"
               or "nccl_trace" in p.name or p.parent.name in ("flight_recorder", "fr_dumps")]
    if not targets:
        targets = [case.run / "dump" / "rollout_data" / "0.pt"]
        targets[0].parent.mkdir(parents=True, exist_ok=True)
    for p in targets:
        p.write_bytes(_hostile_bytes(case))
    case.note = f"{len(targets)} file(s)"


def hostile_safetensors(case: Case) -> None:
    files = [p for p in files_of(case.run) if p.suffix == ".safetensors"]
    if not files:
        hf = case.run / "hf_model"
        hf.mkdir(exist_ok=True)
        (hf / "config.json").write_text('{"model_type": "qwen2", "num_hidden_layers": 1}')
        files = [hf / "model.safetensors"]
    p = case.rng.choice(files)
    kind = case.rng.randrange(9)
    if kind == 0:
        data = struct.pack("<Q", 2**63) + b"{}"
    elif kind == 1:
        data = struct.pack("<Q", 100 << 20) + b"{" * 1000
    elif kind == 2:
        h = json.dumps({"w": {"dtype": "F32", "shape": [10**30], "data_offsets": [0, 4]}}).encode()
        data = struct.pack("<Q", len(h)) + h + b"\0" * 4
    elif kind == 3:
        h = json.dumps({"w": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 2**70]}}).encode()
        data = struct.pack("<Q", len(h)) + h
    elif kind == 4:
        h = json.dumps({"w": {"dtype": "NOPE", "shape": "x", "data_offsets": "y"}, "__metadata__": [1]}).encode()
        data = struct.pack("<Q", len(h)) + h
    elif kind == 5:
        h = b"[1, 2, 3]"
        data = struct.pack("<Q", len(h)) + h
    elif kind == 6:
        h = ('{"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4], "x": ' + "[" * 100_000 + "]" * 100_000 + "}}").encode()
        data = struct.pack("<Q", len(h)) + h + b"\0" * 4
    elif kind == 7:
        h = json.dumps({f"t{i}": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]} for i in range(200_000)}).encode()
        data = struct.pack("<Q", len(h)) + h + b"\0" * 4
    else:
        h = json.dumps({"w": {"dtype": "F32", "shape": [1, 1, 1, 1], "data_offsets": [0, 4]}}).encode()
        data = struct.pack("<Q", len(h)) + h + b"\0" * 2  # truncated data
    p.write_bytes(data)
    case.note = f"{p.relative_to(case.run)} kind {kind}"


CLASSES: dict[str, Callable[[Case], None]] = {
    "truncate": truncate, "byte_flips": byte_flips, "random_binary": random_binary, "empty": empty,
    "delete": delete, "huge_line": huge_line, "regex_bait": regex_bait, "non_utf8": non_utf8, "ansi_only": ansi_only,
    "dir_file_swap": dir_file_swap, "symlink_loop": symlink_loop, "symlink_escape": symlink_escape,
    "fifo": fifo, "no_read_permission": no_read_permission, "deep_nesting": deep_nesting,
    "many_files": many_files, "sparse_log": sparse_log, "extreme_numbers": extreme_numbers,
    "malformed_manifest": malformed_manifest, "hostile_pickles": hostile_pickles,
    "hostile_safetensors": hostile_safetensors,
}


# --- running a case ----------------------------------------------------------------------------


def _without_dac_override() -> None:
    """In the child: drop CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH from the bounding set, so
    root, after exec, obeys permission bits like any user."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP) failed")


def case_env(scratch: Path) -> dict[str, str]:
    env = {**os.environ, "SLACK_BOT_TOKEN": SLACK_TOKEN, "SLACK_SIGNING_SECRET": SLACK_SECRET,
           "TRIAGE_DB": str(scratch / "triage.db"), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("TRIAGE_ALLOWED_ROOTS", None)
    return env


def _forked_triage(case: Case, scratch: Path, out_fd: int, err_fd: int) -> None:
    """In a forked child: `triage run RUN --no-cache --json` through the CLI's own entry point."""
    code = 1
    try:
        os.setsid()
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.environ.clear()
        os.environ.update(case_env(scratch))
        os.chdir(scratch)
        from triage.cli import main as triage_main

        code = triage_main(["run", str(case.run), "--no-cache", "--json"])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # what the interpreter would print for an exception escaping the CLI
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


@dataclass
class Running:
    cls: str
    index: int
    case: Case
    work: Path
    pid: int
    started: float
    example: str


def start_case(cls: str, index: int, case: Case, work: Path, example: str, fork: bool) -> Running:
    """The case's triage as a child process: forked from this one (the triage already imported),
    or a fresh interpreter (`--exec`, and always where root's permission override is dropped)."""
    out = os.open(work / "stdout", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    err = os.open(work / "stderr", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    started = time.monotonic()
    try:
        if fork and not case.drop_root_override:
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                _forked_triage(case, work, out, err)
        else:
            proc = subprocess.Popen([sys.executable, "-m", "triage", "run", str(case.run), "--no-cache", "--json"],
                                    stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=case_env(work),
                                    cwd=str(work), start_new_session=True,
                                    preexec_fn=_without_dac_override if case.drop_root_override else None)
            pid = proc.pid
    finally:
        os.close(out)
        os.close(err)
    return Running(cls, index, case, work, pid, started, example)


def finish_case(r: Running, status: int, usage, hung: bool, ended: float) -> Result:
    wall = ended - r.started
    code = os.waitstatus_to_exitcode(status)
    stdout = (r.work / "stdout").read_bytes()[:50 << 20].decode("utf-8", "replace")
    stderr = (r.work / "stderr").read_bytes()[:50 << 20].decode("utf-8", "replace")
    return Result(
        code=None if hung else code,
        traceback="Traceback (most recent call last)" in stderr,
        hung=hung,
        wall_s=wall,
        rss_mb=usage.ru_maxrss / 1024 if usage else 0.0,
        leaked=any(s in stdout or s in stderr for s in SECRETS),
        executed=r.case.marker.exists(),
    )


def make_case(example: Path, work: Path, seed: int) -> Case:
    run = work / "run"
    shutil.copytree(example, run, symlinks=True)
    outside = work / "outside"
    outside.mkdir()
    (outside / "secret.log").write_text(
        f"[2026-08-01 10:00:01] train.py:13 - RuntimeError: CUDA out of memory. {SECRET}\n"
        f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB {SECRET}\n")
    ckpt = outside / "secret_ckpt"
    (ckpt / "iter_0000001").mkdir(parents=True)
    (ckpt / "latest_checkpointed_iteration.txt").write_text(SECRET)
    return Case(run=run, outside=outside, marker=work / "PWNED", rng=random.Random(seed))


def _remove(path: Path) -> None:
    """Remove a case, giving back the permissions a `no_read_permission` case took away
    (root needs none of them; another user does)."""
    def retry(func, p, _exc):
        try:
            os.chmod(os.path.dirname(p), 0o700)
            if os.path.isdir(p) and not os.path.islink(p):
                os.chmod(p, 0o700)
                shutil.rmtree(p, ignore_errors=True)
            else:
                func(p)
        except OSError:
            pass

    shutil.rmtree(path, onerror=retry)


def _wait(r: Running, timeout: float, done: queue.Queue) -> None:
    """In a thread per case: wait for the child, killing its session at the deadline; the wall
    time is taken when the child ends, whatever the main thread is busy with."""
    killer = threading.Timer(timeout, _kill, (r.pid,))
    killer.start()
    _pid, status, usage = os.wait4(r.pid, 0)
    ended = time.monotonic()
    hung = ended - r.started >= timeout
    killer.cancel()
    done.put((r, status, usage, hung, ended))


def _kill(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def fuzz(names: list[str], cases: int, timeout: float, examples: list[Path], base_seed: int, jobs: int,
         fork: bool, verbose: bool) -> list[Row]:
    rows = {name: Row(name) for name in names}
    todo = [(name, i) for name in names for i in range(cases)]
    done: queue.Queue = queue.Queue()
    running = 0
    while todo or running:
        while todo and running < jobs:
            name, i = todo.pop(0)
            example = examples[i % len(examples)]
            work = Path(tempfile.mkdtemp(prefix=f"fuzz-{name}-"))
            case = make_case(example, work, base_seed * 1_000_003 + i)
            CLASSES[name](case)
            r = start_case(name, i, case, work, example.name, fork)
            threading.Thread(target=_wait, args=(r, timeout, done), daemon=True).start()
            running += 1
        r, status, usage, hung, ended = done.get()
        running -= 1
        result = finish_case(r, status, usage, hung, ended)
        _remove(r.work)
        row = rows[r.cls]
        row.results.append(result)
        if len(row.results) == cases:
            print(f"# {r.cls}: {cases} cases done", file=sys.stderr, flush=True)
        flags = [f for f, on in (("TRACEBACK", result.traceback), ("HUNG", result.hung), ("EXIT1", result.code == 1),
                                 ("LEAK", result.leaked), ("EXECUTED", result.executed)) if on]
        if verbose or flags:
            print(f"  {r.cls}[{r.index}] {r.example}: {r.case.note} -> exit {result.code} {result.wall_s:.1f}s "
                  f"{result.rss_mb:.0f}MB {' '.join(flags)}", file=sys.stderr, flush=True)
    return [rows[name] for name in names]


def print_table(rows: list[Row]) -> None:
    head = ("class", "cases", "exit codes", "tracebacks", "hangs", "exit 1", "leaks", "executed", "max wall s", "max RSS MB")
    lines = [head]
    for row in rows:
        rs = row.results
        codes = sorted({r.code for r in rs if r.code is not None})
        lines.append((row.cls, str(len(rs)), ",".join(map(str, codes)) or "-", str(sum(r.traceback for r in rs)),
                      str(sum(r.hung for r in rs)), str(sum(r.code == 1 for r in rs)), str(sum(r.leaked for r in rs)),
                      str(sum(r.executed for r in rs)), f"{max((r.wall_s for r in rs), default=0):.1f}",
                      f"{max((r.rss_mb for r in rs), default=0):.0f}"))
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    for n, line in enumerate(lines):
        print("| " + " | ".join(cell.ljust(w) for cell, w in zip(line, widths)) + " |")
        if n == 0:
            print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--classes", default="all", help="comma-separated mutation classes (default: all)")
    p.add_argument("--cases", type=int, default=20, help="cases per class (default 20)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds before a case counts as hung")
    p.add_argument("--examples", default="", help="comma-separated example names (default: every example)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--jobs", type=int, default=2, help="cases run at a time (default 2)")
    p.add_argument("--exec", action="store_true",
                   help="start each case as a fresh `python -m triage` instead of a fork of this process")
    p.add_argument("--list", action="store_true", help="list the mutation classes")
    p.add_argument("-v", "--verbose", action="store_true", help="one line per case on stderr")
    ns = p.parse_args(argv)
    if ns.list:
        print("\n".join(CLASSES))
        return 0
    names = list(CLASSES) if ns.classes == "all" else [c.strip() for c in ns.classes.split(",") if c.strip()]
    unknown = [n for n in names if n not in CLASSES]
    if unknown:
        p.error(f"unknown class(es) {', '.join(unknown)}; classes: {', '.join(CLASSES)}")
    examples = sorted(d for d in EXAMPLES.iterdir() if d.is_dir() and not d.name.startswith("_"))
    if ns.examples:
        wanted = set(ns.examples.split(","))
        examples = [d for d in examples if d.name in wanted]
    if not ns.exec:
        # imported once here; each forked case starts with the triage, torch and the probes loaded
        from triage.cli import main as _triage_main  # noqa: F401
        from triage.graph import load_graph
        from triage.probe import registry

        registry()
        load_graph()
    started = time.monotonic()
    rows = fuzz(names, ns.cases, ns.timeout, examples, ns.seed, max(1, ns.jobs), not ns.exec, ns.verbose)
    print(f"# {sum(len(r.results) for r in rows)} cases in {time.monotonic() - started:.0f} s, "
          f"{'fresh interpreters' if ns.exec else 'forked children'}, {ns.jobs} at a time", flush=True)
    print_table(rows)
    bad = sum(r.traceback or r.hung or r.code == 1 or r.leaked or r.executed for row in rows for r in row.results)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
