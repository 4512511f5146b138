"""Python tracebacks in job logs, read back into causal chains and grouped by signature.

A crashed job's log holds the same failure many times over: every rank prints its own
copy (`[rank3]: Traceback …`, `(WorkerDict pid=123, ip=10.0.0.1) Traceback …`, or one copy
with Ray's `[repeated 63x across cluster]`), the driver prints it again wrapped in Ray's
`ray.exceptions.RayTaskError(ValueError): ray::Actor.method() (pid=…, ip=…)`, and Python
prints chained exceptions as several blocks joined by `During handling of the above
exception, another exception occurred:` or `The above exception was the direct cause of
the following exception:`. This module reads those lines back:

- lines are split by the stream that printed them (the Ray actor prefix, the `[rankN]:`
  prefix), so interleaved ranks do not mix; ANSI codes and their leftovers (`[36m`
  without the escape byte) are removed first;
- each traceback becomes a `Chain` of `Block`s in print order; the first block of a
  Python chain is the original error, and a Ray wrapper block is only the envelope of
  the remote error printed after it, so the root is the first block that is not a
  wrapper;
- chains are grouped by a normalised signature (numbers, addresses, paths and ranks
  masked; library frames left out, as Sentry's grouping does with "in-app" frames), so
  64 ranks printing the same traceback are one `ChainGroup` with a count of 64.

Files are read in binary chunks; only the stretches from a `Traceback` marker on are
decoded line by line, and what is kept is bounded (one chain per group, at most
`MAX_GROUPS` groups), whatever the log's size. The step/rollout records (`step N: {`,
`rollout N: {`, verl's `step:N - `) met on the way give each chain the last record
before it.
"""

from __future__ import annotations

import gzip
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from triage import safe_io
from triage.formats.slime_log import (
    BARE_EXCEPTION,
    TYPED_EXCEPTION,
    VLLM_FMT,
    slurm_launcher_line,
    split_line,
    strip_bracket_timestamp,
    strip_carrier,
    strip_nested_processes,
)

CHUNK_BYTES = 8 << 20
MAX_LINE_CHARS = 4000
MAX_FRAMES = 60  # frames kept per block: the outermost 20 and the innermost 40
MAX_GROUPS = 500
MAX_MESSAGE_LINES = 3  # continuation lines of an exception message kept with it
MAX_CHAIN_LINES = 5000  # a "traceback" longer than this is not one: it is closed as cut

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")
# (a bare `[m` is the reset code too, but not the start of a word: `[multiproc_executor.py:597]`)
_ANSI_LEFTOVER = re.compile(r"\[(?:\d{1,3}(?:;\d{1,3})*m|m(?![A-Za-z0-9_]))")
_REPEATED = re.compile(r"\s*\[repeated (\d+)x across cluster\]\s*$")
_RAY_PREFIX = re.compile(
    # (vLLM's multiprocessing workers put their rank before the pid, `(VllmWorker rank=5 pid=9469)`: two workers' lines
    # are two processes, vllm-project/vllm#16150)
    r"^\((?P<actor>(?!pid=)[A-Za-z_][\w.:-]*(?:\([\w.:-]*\))?)?,?\s?(?:rank=\d+,?\s?)?(?:pid=(?P<pid>\d+))?(?:,\s?ip=(?P<ip>[^)\s,]+))?[^)]*\)\s?"
)
# (or torchrun's `--tee` prefix alone, `[${role_name}${local_rank}]:`, each local rank's lines behind their own:
# `[default0]:AttributeError: …`, huggingface/nanotron#303; the local rank is the rank on one node)
_RANK_PREFIX = re.compile(r"^(?:(?:\[default\d+\]:)?\[(?:default)?rank(?P<rank>\d+)\]:|\[default(?P<local>\d+)\]:)\s?")
# (`, in` with no function name: a `<module>` that a Markdown renderer took for an HTML tag)
_FRAME = re.compile(r'^\s+File "(?P<file>[^"]+)", line (?P<line>\d+)(?:, in(?: (?P<fn>.+))?)?\s*$')
# the start of an indented frame line, whole or cut short by a terminal's width
_FRAME_START = re.compile(r'^\s+File "')
MAX_WRAPPED_FRAME_CHARS = 1000
# a frame line that lost its indentation, as the first line of a paste copied from inside a traceback
_CARETS = re.compile(r"^[\^~]+$")
_BARE_FRAME = re.compile(r'^File "(?P<file>[^"]+)", line (?P<line>\d+), in(?: (?P<fn>[\w<>.]+))?\s*$')
# a frame line whose start the paste cut off (the paste begins mid-line: `/trl/trainer/grpo_trainer.py",
# line 269, in __init__`, shibing624/MedicalGPT#444)
_CUT_FRAME = re.compile(r'^(?P<file>[^"\s]*\.py)", line (?P<line>\d+), in (?P<fn>[\w<>.]+)\s*$')
# IPython's (Jupyter, Colab, VS Code notebooks) traceback: a header `TypeError      Traceback (most recent
# call last)`, then per frame `Cell In[6], line 14` (a cell) or `File PATH:LINE, in FUNC(ARGS)` (IPython >= 8),
# `<ipython-input-6-…> in <module>` / `PATH in FUNC(ARGS)` (IPython 7), each over its numbered code lines
# with the failing one marked (`---> 14`, and in VS Code `--> [512](file:///…)`); `(...)` elides lines
# (ipython/ipython IPython/core/ultratb.py; unslothai/notebooks#16, unslothai/unsloth#4360)
# (Colab links each file: `[<ipython-input-7-…>](https://localhost:8080/#) in <cell line: 0>()`,
# `[/usr/…/llm_engine.py](https://localhost:8080/#) in __reduce__(self)`, and folds frames: `13 frames`)
_IPY_FRAME = re.compile(
    r"^(?:Cell In ?\[(?P<cell>\d*)\], line (?P<cline>\d+)"
    r"|File (?P<file>\S.*?):(?P<line>\d+), in (?P<fn>[\w<>.]+)\("
    r"|\[?(?P<input><ipython-input-[\w-]+>)(?:\]\([^)\s]*\))? in (?P<ifn><[^>]*>|[\w.]+)"
    r"|\[?(?P<file7>(?:/|~|[A-Za-z]:\\)\S*?\.py)(?:\]\([^)\s]*\))? in (?P<fn7><[^>]*>|[\w.]+)\()")
_IPY_CODE = re.compile(r"^(?:-*> ?)?(?:\[\d+\]\([^)\s]*\)|\d+)(?:\s|$)|^\(\.\.\.\)|^-{20,}$|^\d+ frames$")
_IPY_HEADER = re.compile(r"^[A-Za-z_][\w.]*\s{2,}Traceback \(most recent call last\)")
_EXCEPTION = re.compile(r"^(?P<type>[A-Za-z_][\w.]*(?:\([\w.]+\))?)(?::\s?(?P<msg>.*))?$")
# rich's traceback (`rich.traceback`, installed by typer and many CLIs): the header drawn into a box's top
# border, per frame a `PATH:LINE in FUNC` line inside the box over numbered code lines (`❱` marks the failing
# one), nested `locals` boxes, `[... N frames hidden ...]`, then the exception line under the box. A frame line
# longer than the box wraps: at its last space (`…/trainer.py:2 in` / `step`) or, a path with no space, at the
# box's width (Textualize/rich rich/traceback.py _render_stack)
_RICH_TOP = "─ Traceback (most recent call last) ─"
_RICH_SIDES = "│┃|"
_RICH_BOTTOM = "╰└┗"
_RICH_FRAME = re.compile(r"^(?P<file>(?:/|~|\.{1,2}/|[A-Za-z]:\\|<)\S*?|\S+\.py):(?P<line>\d+) in (?P<fn>[\w<>.]+)$")
_RICH_HEAD = re.compile(r"^(?:(?:/|~|\.{1,2}/|[A-Za-z]:\\|<)\S*|\S+:\d+(?: in)?)$")
RICH_WRAP_LINES = 3  # lines a wrapped frame line may take beyond its first
def _exception_line(text: str) -> re.Match[str] | None:
    """An exception line (`Type: message`), or a bare name when it is named like an exception."""
    m = _EXCEPTION.match(text)
    if m is None or m.group("msg") is not None or BARE_EXCEPTION.fullmatch(m.group("type")):
        return m
    return None
_RAY_WRAP = re.compile(r"^(?:ray\.exceptions\.)?(?P<kind>RayTaskError|RayActorError|ActorDiedError)(?:\((?P<inner>[\w.]+)\))?:?\s?(?P<msg>.*)$")
_RAY_HEADER = re.compile(
    r"ray::(?P<actor>[\w.-]+?)(?:\.(?P<method>[\w<>]+))?\(\)\s*\(pid=(?P<pid>\d+), ip=(?P<ip>[^,)\s]+)"
)
_RAY_TASK_NAME = re.compile(r"ray::[\w.]+\(\)$")
_CLASS_NAME = re.compile(r"(?:^|\.)[A-Z]\w*(?:\([\w.]+\))?$")
# a tqdm bar redrawn under the exception (`  0%|          | 0/6931 [00:01<?, ?it/s]`): the job's next line, never
# the message's (mark1879/Baichuan-13B-Finetuning#21)
_PROGRESS_BAR = re.compile(r"^(?:[^|\n]{0,80}:\s*)?\d{1,3}%\|")
# a test runner's lines under the exception are no message: unittest's result marks (`E`, `F`, `.`, `s`, `x`, one
# per test) and its separators (`=====…`, `-----…`; pytest's `_____ test_x _____` and `===== short test summary`):
# SGLang's Ascend nightly test in shun8686/for_debug, whose `AssertionError: 445.51 not greater than or equal to
# 496.32` had its `E`, its separator and the `ERROR: test_throughput (…)` under it glued on
_TEST_RUNNER_LINE = re.compile(r"[.EFsx]{1,80}|[=_~-]{8,}.*")
# ... nor are another program's lines: glog's and c10's stamped lines (`[W626 11:33:32.292598340 ProcessGroupNCCL.cpp:
# 1569] Warning: …`, another rank's, 962 lines under a bare `AssertionError` in elena-lyulina/Megatron-LM-Attention-
# Benchmark's 2624217.out) and a shell's errors (`cat: '': No such file or directory`, `/var/spool/slurmd/job2339785/
# slurm_script: line 374: python: command not found`, under a job script's helper's ModuleNotFoundError there)
_OTHER_PROGRAM_LINE = re.compile(r"\[?[IWEF]\d{3,4} \d\d:\d\d:\d\d|[\w./-]+: line \d+: "
                                 r"|[\w.-]+: .*(?:No such file or directory|command not found|Permission denied)$"
                                 # ... nor the header of another thread's traceback (CPython Lib/threading.py's excepthook:
                                 # `Exception in thread Thread-9 (runner):`, under rllm's `Exception: Trajectory 34 cannot
                                 # complete. Please check the log message`, rllm-org/rllm#176)
                                 r"|Exception in thread \S.*:$")
LOOSE_REACH = 8  # lines from a loose exception line to the cause line that ties it to a chain
_CAUSE = "The above exception was the direct cause of the following exception:"
_CONTEXT = "During handling of the above exception, another exception occurred:"
# What starts a traceback: its header, Ray's wrapper, or (in a paste cut above its header, or
# printed under a header another tool reworded) a frame line itself.
# (`", line ` also: a frame line a paste cut before its `File "`)
_HOT = (b"Traceback", b"RayTaskError", b"File ", b'", line ', b"Fatal Python error", b"(most recent call first)",
        b"Exception ignored ", b"exception was the direct cause", b"another exception occurred")
_HOT_LINKS = 7  # the markers from here on are a chain's cause and context lines
_HOT_FRAMES = tuple(k for k, marker in enumerate(_HOT) if marker in (b"File ", b'", line '))  # a frame line's
RAY_UNHANDLED_REACH = 4  # lines from Ray's `Unhandled error … ray::A.m() (pid=…)` header to the first frame under it
# Python's faulthandler after a fatal signal or abort: `Fatal Python error: Aborted`, then the crashing
# thread's stack, most recent call first, frames without the comma (`  File "x.py", line 169 in resume`)
# (cpython Python/traceback.c dump_traceback; fzyzcjy/torch_memory_saver#87, THUDM/slime#1886)
_FATAL_PY = re.compile(r"Fatal Python error: (?P<msg>.*)$")
# (the crashing thread alone is dumped under `Stack (most recent call first):`, faulthandler's all_threads=False and
# the form PeterGriffinJin/Search-R1#134's vLLM worker printed; every thread under `Current thread 0x… (most recent
# call first):` and `Thread 0x…`)
_FAULT_HEADER = re.compile(r"^(?:Current thread\b.*|Stack \(most recent call first\)):\s*$")
_FAULT_FRAME = re.compile(r'^\s+File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<fn>\S+)\s*$')
FAULT_REACH = 20  # lines between the fatal error and the stack faulthandler prints under it
# step / rollout records: slime's `step 3: {`, `rollout 3: {`, verl's `step:3 - `, and the HF Trainer's
# progress bar `| 37/1250 [05:12<2:50:51,  8.45s/it]` (its unit tells it from a datasets `Map` bar)
# a step or rollout record: slime's `step 3: {…}`, verl's `step:3 - …` (a message's `step 0 - extract action failed`,
# a space and a dash, is not one: yuzhaouoe/GUI-Cursor-Moving:verl_demo.log), or a progress bar's count
_RECORD = re.compile(rb"(?:^|[\s\]\)|>-])(step|rollout)(?: (?=\d{1,18}:\s*\{)|:)(\d{1,18})(?::\s*\{| - )|\|\s*()(\d{1,18})/\d+ \[[^\]\n]*?(?:s/it|it/s)(?:, [^\]\n]*)?\]", re.M)
# a progress bar whose description names other work than training steps counts no step: loading checkpoint shards or
# weights (`Loading weights: 100%|…| 760/760`, Sustella/qwen_sapiens's W&B output.log), building or mapping a data
# set (`| 0/1000000`, YuanWind/transformers_wind's pretrain.log), evaluating or generating, or the micro-batches of one
# step (`forward: 100%|…| 32/32` under OpenRLHF's `Steps [Episode 1]: … 16/150`, TideDra/lmm-r1#84; OpenRLHF's
# `make_experience` bar)
_OTHER_WORK_BAR = re.compile(r"(?i)(?:load|download|fetch|map|filter|tokeni[sz]|convert|sav(?:e|ing)|build|prepar|"
                             r"process|generat|shard|eval|test|infer|predict|valid|forward|backward|experience)")


def _bar_counts_steps(prefix: str) -> bool:
    """Whether the progress bar that ends `prefix` (the line up to the bar's closing `|`) counts training steps: its
    description (the text before `NN%|`, in the line's last carriage-return frame) names no other work."""
    frame = prefix.rsplit("\r", 1)[-1]
    at = frame.rfind("%|")
    if at < 0:
        return True
    return _OTHER_WORK_BAR.search(frame[:at]) is None


_RECORD_STR = re.compile(r"(?:^|[\s\]\)|>-])(step|rollout)(?: (?=\d{1,18}:\s*\{)|:)(\d{1,18})(?::\s*\{| - )|\|\s*()(\d{1,18})/\d+ \[[^\]]*?(?:s/it|it/s)(?:, [^\]]*)?\]")

_RANK_MENTION = re.compile(r"\[Rank (\d+)\]")
# an actor's line that names its rank: the prefix at the line's start, the first `[Rank N]` on the line after it.
# Found from each `[Rank ` back to its line's start (a regex tried at every line start costs 5 s per 128 MB of
# Ray-prefixed lines, the most of a static triage's time on such a log)
_RANK_PREFIX_B = re.compile(rb"\([\w.:-]+ pid=(\d+)[^)\n]*\) ")
_RANK_AT_B = re.compile(rb"\[Rank (\d+)\]")
_HEAD_RANK = re.compile(r"\[(?:default)?rank(\d+)\]|\bTP(\d+)(?: [A-Z]{2}\d+)*\]")

# Ray exceptions that wrap another process's error or report its death: envelopes, not causes.
# (and torch.multiprocessing.spawn's ProcessRaisedException, the parent's report of a child's traceback printed under it)
WRAPPERS = ("RayTaskError", "RayActorError", "ActorDiedError", "ChildFailedError", "ProcessRaisedException")


@dataclass(frozen=True)
class Origin:
    """Who printed a line: the Ray actor prefix and/or the torch rank prefix."""

    actor: str | None = None
    pid: int | None = None
    ip: str | None = None
    rank: int | None = None

    @property
    def label(self) -> str | None:
        parts = [p for p in (self.actor, f"pid={self.pid}" if self.pid else None,
                             f"ip={self.ip}" if self.ip else None, f"rank{self.rank}" if self.rank is not None else None) if p]
        return " ".join(parts) or None


@dataclass(frozen=True)
class Frame:
    file: str
    line: int
    function: str

    def __str__(self) -> str:
        return f'File "{self.file}", line {self.line}, in {self.function}'


@dataclass(frozen=True)
class Block:
    """One printed exception: its frames (outermost first) and its final line."""

    type: str | None  # None when the traceback was cut before its exception line
    message: str
    frames: tuple[Frame, ...]
    line_no: int  # the exception line (or the last line read, when cut)
    link: str | None = None  # how it follows the block before it: "cause", "context", "ray"
    origin: Origin | None = None  # for a Ray remote block: the actor the header names

    @property
    def short_type(self) -> str:
        return (self.type or "").rsplit(".", 1)[-1]

    @property
    def is_wrapper(self) -> bool:
        t = self.short_type
        return any(t == w or t.startswith(w + "(") for w in WRAPPERS)


@dataclass(frozen=True)
class Chain:
    """One printed traceback with its chained blocks, where it is in the log, and who printed it."""

    path: str
    start_line: int
    blocks: tuple[Block, ...]
    origin: Origin
    repeated: int = 1  # Ray's `[repeated Nx across cluster]` on its exception line, plus this copy
    last_step: int | None = None
    last_rollout: int | None = None

    @property
    def root(self) -> Block:
        """The first exception of the causal chain: the first block that is not a wrapper. When only
        wrappers name a type, a remote traceback cut under its envelope (`RayTaskError(X): ray::…`,
        then frames, and no exception line) is the root: the error's own words are not in the log."""
        typed = next((b for b in self.blocks if not b.is_wrapper and b.type), None)
        if typed is not None:
            return typed
        return next((b for b in self.blocks[1:] if b.type is None and b.link == "ray"), self.blocks[0])

    @property
    def where(self) -> str:
        return f"{self.path}:{self.root.line_no}"

    @property
    def process(self) -> Origin:
        """Who raised the root: the Ray header's actor/pid/ip where it names one, else the printer."""
        remote = next((b.origin for b in self.blocks if b.origin is not None), None)
        if remote is None:
            return self.origin
        return Origin(remote.actor or self.origin.actor, remote.pid, remote.ip or self.origin.ip,
                      self.origin.rank)


@dataclass
class ChainGroup:
    """Chains with the same normalised signature: the first one kept whole, the rest counted."""

    signature: str
    first: Chain
    count: int = 0  # copies, Ray's repeat counts included
    processes: set[str] = field(default_factory=set)  # distinct ranks / actor pids that printed it
    ranks: set[int] = field(default_factory=set)
    nodes: set[str] = field(default_factory=set)
    last_where: str = ""


# --- frames: library or in-app ---------------------------------------------------------

FRAMEWORKS = ("slime", "miles", "relax", "verl", "openrlhf", "trl", "axolotl", "swift", "nemo_rl", "areal")
LIBRARIES = (
    "torch", "ray", "transformers", "megatron/core", "transformer_engine", "sglang", "vllm", "deepspeed",
    "flash_attn", "accelerate", "datasets", "numpy", "peft", "triton", "safetensors", "tokenizers", "requests",
    "urllib3", "aiohttp", "httpx", "uvicorn", "fastapi", "zmq", "pyarrow", "pandas", "tqdm", "wandb", "hydra",
    "omegaconf", "packaging", "setproctitle", "cloudpickle", "grpc", "apex", "torch_memory_saver",
)
# (an egg install puts the package one directory down: `site-packages/ms_swift-2.5.2-py3.9.egg/swift/…`)
_SITE = re.compile(r"[/\\](?:site|dist)-packages[/\\](?:[\w.-]+\.egg[/\\])?(?P<pkg>[\w.-]+)")
_STDLIB = re.compile(r"[/\\]lib[/\\]python3\.\d+[/\\](?!site-packages|dist-packages)|^<frozen |^<string>$|^<stdin>$|^<[\w ]+>$")
_LIB_DIR = re.compile(r"(?:^|[/\\])(?P<pkg>" + "|".join(re.escape(x) for x in LIBRARIES) + r")[/\\]")
# (the deepest one names the file: a framework checked out inside another's folder, `/workspace/verl/…/AReaL/areal/
# engine/sglang_remote.py`, areal-project/AReaL#240)
_FW_DIR = re.compile(r"(?:(?<=[/\\])|^)(?P<pkg>" + "|".join(FRAMEWORKS) + r")(?=[/\\])")


# a compiled extension's Cython source, as its frames name it (`python/tvm_ffi/cython/function.pxi`, `grpc/_cython/
# _cygrpc/aio/call.pyx.pxi`, `uvloop/loop.pyx`): a library's binding layer, never the user's code; its package is the
# first directory that is not a source tree's (`python`, `src`, `cython`) (flashinfer-ai/flashinfer#2034)
_CYTHON_FILE = re.compile(r"\.(?:pyx|pxi|pxd)$")
_SOURCE_TREE_DIRS = frozenset(("", ".", "..", "python", "src", "lib", "cython", "_cython"))


def package_of(frame_file: str) -> str | None:
    """The package a frame's file belongs to, where the path says (None for the user's own files)."""
    m = _SITE.search(frame_file)
    if m:
        return m.group("pkg").split(".")[0]
    *_, m = (None, *_FW_DIR.finditer(frame_file))
    if m:
        return m.group("pkg")
    m = _LIB_DIR.search(frame_file)
    if m:
        return m.group("pkg").replace("/", ".")
    if _STDLIB.search(frame_file):
        return "python"
    if _CYTHON_FILE.search(frame_file):
        if frame_file.startswith(("/", "\\")) or frame_file[1:3] in (":\\", ":/"):
            return "a compiled extension"  # (an absolute build path names the machine's folders, not the package)
        dirs = re.split(r"[/\\]", frame_file)[:-1]
        return next((d for d in dirs if d not in _SOURCE_TREE_DIRS), "a compiled extension")
    return None


def in_app(frame: Frame) -> bool:
    """A frame in framework or user code: not the standard library, not a library's internals."""
    pkg = package_of(frame.file)
    return pkg is None or pkg in FRAMEWORKS


# Never "the frame that failed": the runtime under everything.
INTERNALS = ("python", "torch", "ray", "triton", "numpy", "cloudpickle", "concurrent", "asyncio")


def first_app_frame(block: Block) -> Frame | None:
    """The in-app frame nearest to where the error was raised (the innermost one). When every
    frame is a package's (an engine crashing in its own code), the innermost frame outside
    the runtime's internals (torch, Ray, the standard library)."""
    frame = next((f for f in reversed(block.frames) if in_app(f)), None)
    if frame is None:
        # (a Cython binding's dispatch, `core.Function.__call__`, is the runtime between the package and its kernel)
        frame = next((f for f in reversed(block.frames)
                      if package_of(f.file) not in INTERNALS and not _CYTHON_FILE.search(f.file)), None)
    return frame


# --- the normalised signature ----------------------------------------------------------

_MASKS = (
    (re.compile(r"0x[0-9a-fA-F]+"), "0x?"),
    (re.compile(r"(?:[A-Za-z]:)?(?:[/\\][\w.@+~-]+){2,}[/\\]?"), "<path>"),
    (re.compile(r"\b[0-9a-f]{16,}\b"), "<id>"),
    (re.compile(r"\b\d+(?:\.\d+)?\b"), "N"),
)


# torch's advice appended to every CUDA error's message (c10/cuda/CUDAException.cpp): the same error
# read from pastes cut at different points of it is one error (verl-project/verl#4032, #4145, #6690)
_CUDA_ADVICE = re.compile(r"\s*(?:CUDA kernel errors might be asynchronously reported|For debugging consider passing "
                          r"CUDA_LAUNCH_BLOCKING|Compile with `TORCH_USE_CUDA_DSA`|Search for `cudaErrorIllegalAddress`).*$")


def normalise(text: str) -> str:
    """A message with its numbers, addresses, paths, ids and ranks masked, and torch's CUDA advice left out."""
    if "CUDA" in text:
        text = _CUDA_ADVICE.sub("", text)
    for rx, repl in _MASKS:
        text = rx.sub(repl, text)
    return " ".join(text.split())[:300]


def signature_of(chain: Chain) -> str:
    """What makes two copies of a traceback the same error: the root's type, its masked
    message, and its in-app frames (file name and function; library frames left out)."""
    root = chain.root
    frames = [f"{Path(f.file).name}:{f.function}" for f in root.frames if in_app(f)]
    if not frames:
        frames = [f"{Path(f.file).name}:{f.function}" for f in root.frames[-3:]]
    return " | ".join([root.short_type or "?", normalise(root.message), *frames[-8:]])


# --- reading ---------------------------------------------------------------------------


def split_origin(raw: str) -> tuple[str, Origin, int]:
    """A raw log line without ANSI codes and prefixes: (the rest, who printed it, Ray's repeat count)."""
    if "\x1b" in raw:
        raw = _ANSI.sub("", raw)
    if "m" in raw and "[" in raw:
        raw = _ANSI_LEFTOVER.sub("", raw)
    raw = raw.rstrip("\r\n")
    raw = strip_carrier(raw)
    repeated = 1
    if raw.endswith("cluster]"):
        m = _REPEATED.search(raw)
        if m:
            repeated += int(m.group(1))
            raw = raw[: m.start()]
    actor = ip = None
    pid = rank = None
    text = raw
    if text.startswith("("):
        m = _RAY_PREFIX.match(text)
        if m and (m.group("actor") or m.group("pid")):
            actor, ip = m.group("actor"), m.group("ip")
            pid = int(m.group("pid")) if m.group("pid") else None
            text = strip_nested_processes(text[m.end():])
    if text.startswith("[rank") or text.startswith("[default"):
        m = _RANK_PREFIX.match(text)
        if m:
            rank = int(m.group("rank") or m.group("local"))
            text = text[m.end():]
    if text[:1] == "[":  # a logger's timestamp before every line of the traceback it printed
        text = strip_bracket_timestamp(text)
    if text[:1] in "DIWEC":  # vLLM's logger writes a traceback line by line behind its prefix
        m = VLLM_FMT.match(text)
        if m:
            text = text[m.end():]
    return text, Origin(actor, pid, ip, rank), repeated


_VLLM_HEAD = re.compile(r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[?(?P<where>[^\]\s]+:\d+)\] ")


def _record_head(raw: str) -> tuple[str, str] | None:
    """The level and `file:line` of the vLLM logger record a line is printed in (VLLM_FMT), wherever its prefixes end."""
    m = _VLLM_HEAD.search(raw, 0, 300)
    return (m.group("level"), m.group("where")) if m else None


class _Open:
    """A traceback being read on one stream."""

    def __init__(self, line_no: int, origin: Origin, step: int | None, rollout: int | None) -> None:
        self.start = line_no
        self.origin = origin
        self.blocks: list[Block] = []
        self.frames: list[Frame] = []
        self.dropped_frames = 0
        self.link: str | None = None
        self.remote: Origin | None = None
        self.state = "frames"  # "frames": reading a block; "after": its exception line was read
        self.pending_link: str | None = None
        self.blank = 0
        self.message_lines = 0
        self.repeated = 1
        self.step, self.rollout = step, rollout
        self.last_line = line_no
        self.code_next = False  # an unindented frame was read: its code line may be unindented too
        self.wrapped: str | None = None  # a frame line cut short, waiting for the rest a terminal wrapped
        self.fault: tuple[int, str] | None = None  # faulthandler's stack: the fatal error's (line, message)
        self.ipython = False  # IPython's format: `File PATH:LINE, in FUNC(…)` frames over numbered code lines
        self.ignored = False  # under `Exception ignored in: <…>`: an error the process reported and went on from
        self.head: tuple[str, str] | None = None  # the logger record its lines are printed in (vLLM's level, file:line)
        self.frame_indent = 2  # Python's; a paste shifted as a whole shifts the exception line with it
        self.code_indent: int | None = None  # the indentation of the code line just read under a frame
        self.rich = False  # rich's boxed format: frames inside `│ … │`, the exception under the box
        self.rich_head: list[str] = []  # the parts of a boxed frame line wrapped at the box's width

    def add_frame(self, frame: Frame) -> None:
        if len(self.frames) >= MAX_FRAMES:
            del self.frames[20]  # keep the outermost 20 and the innermost ones
            self.dropped_frames += 1
        self.frames.append(frame)
        self.code_indent = None

    def close_block(self, type_: str | None, message: str, line_no: int) -> None:
        self.blocks.append(Block(type_, message, tuple(self.frames), line_no, self.link, self.remote))
        self.frames, self.link, self.remote = [], None, None


class TracebackReader:
    """Feed it a file's lines in order (`feed`), then `finish`; the groups are in `groups`."""

    def __init__(self, want: set[tuple[str, int]] | None = None) -> None:
        # exception lines (path, line) whose own frames a caller asks for: `found` gets them
        self.want = want or set()
        self.found: dict[tuple[str, int], tuple[str, ...]] = {}
        self.groups: dict[str, ChainGroup] = {}
        self.chains = 0  # every chain closed, grouped or not
        self.dropped_groups = 0
        self.path = ""
        self.open: dict[tuple[str | None, int | None, int | None], _Open] = {}
        self.step: int | None = None
        self.step_from_bar = False  # the step last seen was a progress bar's count, not a step record
        self.rollout: int | None = None
        self.pid_ranks: dict[int, int] = {}  # an actor's rank, from its own `[Rank N]` lines
        self.fatal: tuple[int, str] | None = None  # the last `Fatal Python error: …` (line, message)
        self.ignored_at: dict[tuple[str | None, int | None, int | None], int] = {}  # `Exception ignored …` lines
        self.final_records: dict[str, tuple[int | None, int | None]] = {}  # per file: the last step and rollout
        # per file: whether its last step was a step record (`step:N - …`, `step N: {…}`), not a progress bar's count
        self.final_step_records: dict[str, bool] = {}
        # per process: the last exception line seen outside any traceback (line, type, message), the first block
        # of a chain whose own frames the paste left out when Python's cause or context line follows it
        self.loose: dict[tuple[str | None, int | None, int | None], tuple[int, str, str]] = {}

    # -- files ------------------------------------------------------------------------

    def read_file(self, path: Path) -> None:
        """Read one log file (plain or gzip) in chunks; only stretches after a marker are parsed."""
        self.path = str(path)
        self.step = self.rollout = None
        self.step_from_bar = False
        self.ignored_at.clear()
        self.loose.clear()
        with _open(path) as fh:
            line_no = 0
            rest = b""
            while True:
                try:
                    chunk = fh.read(CHUNK_BYTES)
                except (EOFError, OSError):
                    chunk = b""
                data = rest + chunk
                if not chunk:
                    if data:
                        line_no = self._region(data, line_no, final=True)
                    break
                cut = data.rfind(b"\n") + 1
                if cut == 0:
                    rest = data if len(data) < (CHUNK_BYTES << 1) else b""
                    continue
                line_no = self._region(data, line_no, end=cut)
                rest = data[cut:]
        self.finish()
        self.final_records[self.path] = (self.step, self.rollout)
        self.final_step_records[self.path] = not self.step_from_bar

    def _region(self, data: bytes, line_no: int, final: bool = False, end: int | None = None) -> int:
        pos, end = 0, len(data) if end is None else end
        # where each marker is next found (-1: not before `end`; -2: not searched yet): searched again
        # only once the reading passed it, so a marker the stretch does not hold is not searched for
        # again at every traceback
        nxt = [-2] * len(_HOT)
        until = 0  # lines before this offset are read one by one (the lines above a chain's cause line)
        while pos < end:
            if not self.open and pos >= until:
                hot, hot_k = -1, -1
                for k, marker in enumerate(_HOT):
                    i = nxt[k]
                    if i != -1 and i < pos:
                        i = nxt[k] = data.find(marker, pos, end)
                    if i >= 0 and (hot < 0 or i < hot):
                        hot, hot_k = i, k
                if hot < 0:
                    self._records(data, pos, end)
                    return line_no + data.count(b"\n", pos, end) + (1 if final and not data.endswith(b"\n") else 0)
                start = data.rfind(b"\n", pos, hot) + 1
                if hot_k in _HOT_FRAMES and start > pos:
                    # frames printed under Ray's `Unhandled error … ray::A.m() (pid=…)` a few lines above (its `^^^`
                    # markers between): the header names the process that raised them
                    above = start
                    for _ in range(RAY_UNHANDLED_REACH):
                        if above <= pos:
                            break
                        above = data.rfind(b"\n", pos, above - 1) + 1
                        if data.find(b"Unhandled error (suppress with", above, start) >= 0:
                            start = above
                            break
                if hot_k >= _HOT_LINKS:  # a chain's cause or context line: its first exception may stand above
                    until = start
                    for _ in range(LOOSE_REACH):
                        if start <= pos:
                            break
                        start = data.rfind(b"\n", pos, start - 1) + 1
                if start > pos:
                    self._records(data, pos, start)
                    line_no += data.count(b"\n", pos, start)
                    pos = start
            le = data.find(b"\n", pos)
            if le < 0:
                le = end
            line_no += 1
            self.feed(line_no, data[pos:min(le, pos + MAX_LINE_CHARS)].decode("utf-8", "replace"))
            pos = le + 1
        return line_no

    def _records(self, data: bytes, start: int, end: int) -> None:
        """The last step and rollout records of a stretch, found from its end backwards (the
        stretch may be hundreds of MB of records; only its last one of each kind matters)."""
        step = last_step_in(data, start, end)
        if step is not None:
            self.step, self.step_from_bar = step
        rollout = _last_record(data, start, end, (b"rollout ",), b"step")
        if rollout is not None:
            self.rollout = rollout[0]
        for pid, rank in rank_mentions(data, start, end):
            self.pid_ranks[pid] = rank

    # -- lines ------------------------------------------------------------------------

    def feed(self, line_no: int, raw: str) -> None:
        text, origin, repeated = split_origin(raw)
        rich = _RICH_TOP in text
        if rich:
            text = "Traceback (most recent call last):"
        key = (origin.actor, origin.pid, origin.rank)
        tb = self.open.get(key)
        if tb is None and key != (None, None, None) and (None, None, None) in self.open:
            # a traceback whose first lines were pasted without the prefix the rest carries (a header, or
            # a frame, above `[rank0]:` lines: AkaliKong/MiniOneRec#15, shibing624/MedicalGPT#444): one
            # traceback, the prefixed process's, when its lines follow on
            bare = self.open[(None, None, None)]
            if bare.state == "frames" and bare.last_line == line_no - 1 and key not in self.open and (
                    text[:1] in (" ", "\t") or _exception_line(text.strip())):
                del self.open[(None, None, None)]
                bare.origin = origin
                tb = self.open[key] = bare
        if tb is None and key == (None, None, None) and self.open:
            # an exception line printed (or pasted) without the prefix its frames carried, right
            # below them: the one traceback whose frames end on the line above is its owner
            above = [k for k, t in self.open.items() if t.state == "frames" and t.last_line == line_no - 1]
            if len(above) == 1 and _exception_line(text.strip()) and split_line(text).fmt is None:
                key = above[0]
                tb = self.open[key]
        if tb is None:
            if ("step" in text or "rollout" in text or "/it" in text or "it/s" in text) and (m := _RECORD_STR.search(text)):
                if m.group(1) == "rollout":
                    self.rollout = int(m.group(2))
                elif m.group(2) is not None or _bar_counts_steps(text[:m.start()]):
                    self.step, self.step_from_bar = int(m.group(2) or m.group(4)), m.group(2) is None
            if "ank " in text and origin.pid is not None and (r := _RANK_MENTION.search(text)):
                self.pid_ranks[origin.pid] = int(r.group(1))
            body = split_line(text).text if not text.startswith("Traceback") else text
            if "Fatal Python error: " in body and (f := _FATAL_PY.search(body)):
                self.fatal = (line_no, f.group("msg").strip())
                return
            if body[:14] in ("Current thread", "Stack (most re") and _FAULT_HEADER.match(body):
                tb = self.open[key] = _Open(line_no, origin, self.step, self.rollout)
                fatal = self.fatal if self.fatal and line_no - self.fatal[0] <= FAULT_REACH else None
                tb.fault = fatal or (line_no, "")
                return
            if body.startswith("Exception ignored "):  # sys.unraisablehook's header (huggingface/open-r1#658)
                self.ignored_at[key] = line_no
                return
            stripped = body.strip()
            if stripped in (_CAUSE, _CONTEXT):
                loose = self.loose.pop(key, None)
                if loose is not None and line_no - loose[0] <= LOOSE_REACH:
                    # a chain pasted from its first exception line, without that exception's traceback
                    # (pettingllms-ai/PettingLLMs#8: `omegaconf.errors.ConfigAttributeError: …`, then the cause
                    # line, then the wrapper's frames): that exception opens the chain
                    tb = self.open[key] = _Open(loose[0], origin, self.step, self.rollout)
                    tb.close_block(loose[1], loose[2], loose[0])
                    tb.state, tb.pending_link = "after", "cause" if stripped == _CAUSE else "context"
                    tb.last_line = line_no
                return
            if (m := TYPED_EXCEPTION.match(stripped)) and split_line(text).fmt is None:
                self.loose[key] = (line_no, m.group("type"), m.group("msg").strip())
            if "Traceback (most recent call last)" in body:
                self.loose.pop(key, None)
                # `[ts TP0] Scheduler hit an exception: Traceback (most recent call last):` starts one too
                if origin.rank is None and (r := _HEAD_RANK.search(text)):
                    origin = Origin(origin.actor, origin.pid, origin.ip, int(r.group(1) or r.group(2)))
                self.open[key] = _Open(line_no, origin, self.step, self.rollout)
                self.open[key].ipython = bool(_IPY_HEADER.match(body.strip()))
                self.open[key].rich = rich
                self.open[key].ignored = self.ignored_at.get(key) == line_no - 1
            elif (f := _FRAME.match(text) if text[:1] in (" ", "\t") else _BARE_FRAME.match(text)):
                # a traceback whose header was cut off or reworded: its frames start it
                tb = self.open[key] = _Open(line_no, origin, self.step, self.rollout)
                tb.add_frame(Frame(f.group("file"), int(f.group("line")), (f.group("fn") or "?").strip()))
                tb.code_next = text[:1] not in (" ", "\t")
            elif '", line ' in text and (f := _CUT_FRAME.match(text)):
                tb = self.open[key] = _Open(line_no, origin, self.step, self.rollout)
                tb.add_frame(Frame(f.group("file"), int(f.group("line")), f.group("fn")))
            elif text[:5] == "File " and (f := _IPY_FRAME.match(text)):
                # a notebook's traceback pasted from below its header (unslothai/unsloth#4360)
                tb = self.open[key] = _Open(line_no, origin, self.step, self.rollout)
                tb.ipython = True
                tb.add_frame(_ipython_frame(f))
            elif "Unhandled error (suppress with" in body and (remote := _header_origin(body)) is not None:
                # Ray's report, in the process that held the task's result, of a remote error no one waited for
                # (`Unhandled error (suppress with 'RAY_IGNORE_UNHANDLED_ERRORS=1'): ray::LLMRayActor.init_process_group()
                # (pid=700386, ip=…)`, python/ray/_private/worker.py): the frames and the exception that follow are that
                # actor's, printed under the printer's prefix (OpenRLHF/OpenRLHF#922)
                tb = self.open[key] = _Open(line_no, origin, self.step, self.rollout)
                tb.remote = remote
            elif (w := _RAY_WRAP.match(body.strip())) and w.group("kind") == "RayTaskError" and _RAY_HEADER.search(body):
                # a wrapped remote error printed without the driver's own traceback
                tb = self.open[key] = _Open(line_no, origin, self.step, self.rollout)
                self._wrap(tb, body.strip(), line_no)
            return
        tb.last_line = line_no
        tb.rich = tb.rich or rich
        if line_no - tb.start > MAX_CHAIN_LINES:
            self._close(key, cut=True)
            return
        head = _record_head(raw) if "] " in raw else None
        if tb.state == "frames":
            tb.head = head
            self._in_block(key, tb, text, line_no, repeated)
        elif head is not None and tb.head is not None and head != tb.head:
            # another record of the logger that printed the traceback line by line (vLLM's `INFO … [executor.py:127]`
            # after `ERROR … [core.py:398] ModuleNotFoundError: …`, vllm-project/vllm#16259): not its message
            self._close(key)
            self.feed(line_no, raw)
        else:
            self._after(key, tb, text, line_no, origin, raw)

    def _in_block(self, key: tuple, tb: _Open, text: str, line_no: int, repeated: int) -> None:
        if not text.strip():
            return
        if slurm_launcher_line(text):
            return
        if tb.rich and _rich_box_line(tb, text.strip()):
            return
        if tb.fault is not None:
            if f := _FAULT_FRAME.match(text):
                tb.add_frame(Frame(f.group("file"), int(f.group("line")), f.group("fn")))
                return
            if text.strip() in ("...", "…"):
                return
            self._close(key)  # the stack ended: the fatal error is its exception
            self.feed(line_no, text)
            return
        if tb.wrapped is not None:
            # a frame line a terminal wrapped at its width (alibaba/ROLL#348): the rest follows unindented
            # (the rest starts at the line's first column; an indented line is the frame's code line)
            head, tb.wrapped = tb.wrapped, None
            if text[:1] not in (" ", "\t") and not _exception_line(text.strip()):
                joined = head + (" " if head.endswith(", in") else "") + text.strip()
                m = _FRAME.match(joined)
                if m and m.group("fn"):
                    tb.add_frame(Frame(m.group("file"), int(m.group("line")), m.group("fn").strip()))
                    return
                if len(joined) < MAX_WRAPPED_FRAME_CHARS and not m:
                    tb.wrapped = joined  # wrapped more than once
                    return
            self._flush_wrapped(tb, head)  # not wrapped after all: the frame as it was, then this line
        if text[:1] in (" ", "\t"):
            m = _FRAME.match(text)
            indent = len(text) - len(text.lstrip())
            if (not m or not m.group("fn")) and _FRAME_START.match(text):
                tb.wrapped = text.rstrip()  # a frame line cut short: the terminal may have wrapped it
                if not tb.frames:
                    tb.frame_indent = indent
                return
            if m:
                if not tb.frames:
                    tb.frame_indent = indent
                tb.add_frame(Frame(m.group("file"), int(m.group("line")), (m.group("fn") or "?").strip()))
                # its code line may have lost its indentation where the frame kept some (a paste whose lines
                # were trimmed unevenly: THUDM/slime#1741)
                tb.code_next = True
                return
            exception = _exception_line(text.strip())
            if exception and tb.code_indent is not None and indent < tb.code_indent:
                pass  # less indented than the code line above it: the exception line of a paste whose frame
                # lost its indentation and whose code kept it (verl-project/verl#7610: the frame at 0 spaces,
                # its code at 6, the exception at 2); read below
            elif indent >= tb.frame_indent or not exception:
                if tb.frames and not _CARETS.match(text.strip()):
                    tb.code_indent, tb.code_next = indent, False
                return  # a code line or a `^^^^` marker
            # less indented than the frames: the exception line of a traceback pasted with every line
            # shifted (verl-project/verl#4676: frames at 3 spaces, the exception at 1); read below
        stripped = text.strip()
        if tb.ipython:
            if f := _IPY_FRAME.match(stripped):
                tb.add_frame(_ipython_frame(f))
                return
            if _IPY_CODE.match(stripped):
                return  # a numbered code line, the marked one, an elision, or the rule above the header
        # a traceback that lost its indentation (a paste, or a prefix that ate it): bare frames,
        # the code line right under each, and `^^^^` markers
        if m := _BARE_FRAME.match(stripped):
            tb.add_frame(Frame(m.group("file"), int(m.group("line")), m.group("fn") or "?"))
            tb.code_next = True
            return
        if _CARETS.match(stripped):
            return
        if tb.code_next:
            tb.code_next = False
            # (the code line right under an unindented frame reads like `name: …` when it annotates an attribute:
            # `self.comm: ncclComm_t = self.nccl.ncclCommInitRank(`, sgl-project/sglang#8974; an exception's type is
            # a class, its last dotted name capitalised)
            m = _exception_line(stripped)
            if m is None or not _CLASS_NAME.search(m.group("type")):
                return
        if stripped.startswith("Traceback (most recent call last)"):
            if tb.frames or tb.blocks:
                tb.close_block(None, "", line_no - 1)  # the previous block was cut: a new one starts
            return
        if _RAY_HEADER.match(stripped):
            tb.remote = _header_origin(stripped)
            return
        w = _RAY_WRAP.match(stripped)
        if w and _RAY_HEADER.search(stripped):
            self._wrap(tb, stripped, line_no)
            return
        m = _exception_line(stripped)
        if m and split_line(text).fmt is None:
            tb.close_block(m.group("type"), (m.group("msg") or "").strip(), line_no)
            tb.repeated = max(tb.repeated, repeated)
            tb.state, tb.blank, tb.message_lines, tb.pending_link = "after", 0, 0, None
            return
        self._close(key, cut=True)  # a log line: the traceback ended without its exception line

    def _wrap(self, tb: _Open, text: str, line_no: int) -> None:
        """`ray.exceptions.RayTaskError(X): ray::A.m() (pid=…, ip=…)`: the envelope; the remote
        frames and the remote error follow."""
        w = _RAY_WRAP.match(text)
        inner = w.group("inner") if w else None
        kind = w.group("kind") if w else "RayTaskError"
        tb.close_block(f"ray.exceptions.{kind}" + (f"({inner})" if inner else ""), (w.group("msg") if w else text), line_no)
        tb.link, tb.remote = "ray", _header_origin(text)
        tb.state = "frames"

    def _after(self, key: tuple, tb: _Open, text: str, line_no: int, origin: Origin, raw: str) -> None:
        stripped = text.strip()
        if not stripped:
            tb.blank += 1
            if tb.blank > 3 and tb.pending_link is None:
                self._close(key)
            return
        if stripped == _CAUSE or stripped == _CONTEXT:
            tb.pending_link = "cause" if stripped == _CAUSE else "context"
            return
        if tb.pending_link is not None:
            if stripped.startswith("Traceback (most recent call last)"):
                tb.link, tb.state, tb.pending_link = tb.pending_link, "frames", None
                return
            if _RAY_HEADER.match(stripped):
                tb.link, tb.remote, tb.state, tb.pending_link = tb.pending_link, _header_origin(stripped), "frames", None
                return
            if _RAY_TASK_NAME.match(stripped):  # `ray::train()`, the task's name without its process
                tb.link, tb.state, tb.pending_link = tb.pending_link, "frames", None
                return
            if text[:1] in (" ", "\t") and _FRAME.match(text):  # the next traceback pasted without its header
                tb.link, tb.state, tb.pending_link = tb.pending_link, "frames", None
                self._in_block(key, tb, text, line_no, 1)
                return
        if stripped == '"""':
            # multiprocessing's RemoteTraceback quotes the worker's traceback between triple quotes: the closing
            # quotes end the message, they are not part of it (BunsenFeng/model_collaboration#76)
            self._close(key)
            return
        # (a line a logger stamped is its next record, not the message's: `[2025-08-08 09:09:09] Received sigquit …`
        # under SGLang's exception, sgl-project/sglang#8974)
        if tb.blank == 0 and tb.pending_link is None and tb.message_lines < 20 \
                and split_line(text).fmt is None and split_line(raw).timestamp is None \
                and not stripped.startswith("Traceback (most recent call last)") and not _PROGRESS_BAR.match(stripped) \
                and not _TEST_RUNNER_LINE.fullmatch(stripped) and not _OTHER_PROGRAM_LINE.match(stripped):
            tb.message_lines += 1
            if tb.message_lines <= MAX_MESSAGE_LINES and tb.blocks:
                last = tb.blocks[-1]
                tb.blocks[-1] = Block(last.type, (last.message + " " + stripped).strip()[:1000], last.frames,
                                      last.line_no, last.link, last.origin)
            return
        self._close(key)
        self.feed(line_no, raw)  # the line starts something else: read it afresh

    @staticmethod
    def _flush_wrapped(tb: _Open, head: str) -> None:
        if m := _FRAME.match(head):
            tb.add_frame(Frame(m.group("file"), int(m.group("line")), (m.group("fn") or "?").strip()))

    def _close(self, key: tuple, cut: bool = False, at_end: bool = False) -> None:
        tb = self.open.pop(key)
        if tb.fault is not None and tb.state == "frames":
            # faulthandler's stack, most recent call first: outermost first, under the fatal error's line
            tb.frames.reverse()
            fault_line, message = tb.fault
            tb.close_block("Fatal Python error", message, fault_line)
            tb.state = "after"
        if tb.wrapped is not None:
            self._flush_wrapped(tb, tb.wrapped)
            tb.wrapped = None
        if cut and tb.state == "frames" and (tb.frames or not tb.blocks):
            tb.close_block(None, "", tb.last_line)
        elif at_end and tb.state == "frames" and tb.link == "ray":
            # the file ends right under Ray's envelope: the remote traceback it announces was cut off
            tb.close_block(None, "", tb.last_line)
        if not tb.blocks or tb.ignored:
            return  # (an error Python reported from a finalizer and went on from is no crash of the job)
        if self.want:
            for b in tb.blocks:
                if (self.path, b.line_no) in self.want:
                    self.found[(self.path, b.line_no)] = tuple(str(f) for f in b.frames)
        chain = Chain(self.path, tb.start, tuple(tb.blocks), tb.origin, tb.repeated, tb.step, tb.rollout)
        self._group(chain)

    def _group(self, chain: Chain) -> None:
        self.chains += 1
        sig = signature_of(chain)
        group = self.groups.get(sig)
        if group is None:
            if len(self.groups) >= MAX_GROUPS:
                self.dropped_groups += 1
                return
            group = self.groups[sig] = ChainGroup(sig, chain)
        proc = chain.process
        if proc.rank is None and proc.pid is not None and proc.pid in self.pid_ranks:
            chain = Chain(chain.path, chain.start_line, chain.blocks,
                          Origin(chain.origin.actor, chain.origin.pid, chain.origin.ip, self.pid_ranks[proc.pid]),
                          chain.repeated, chain.last_step, chain.last_rollout)
            proc = chain.process
            if group.first.process.pid == proc.pid and group.first.process.rank is None:
                group.first = chain
        group.count += chain.repeated
        group.processes.add(process_key(proc))
        if chain.repeated > 1:
            for i in range(1, chain.repeated):
                group.processes.add(f"{chain.where}#repeat{i}")
        if proc.rank is not None:
            group.ranks.add(proc.rank)
        if proc.ip:
            group.nodes.add(proc.ip)
        group.last_where = chain.where

    def finish(self) -> None:
        for key in list(self.open):
            self._close(key, cut=True, at_end=True)


def _rich_box_line(tb: _Open, stripped: str) -> bool:
    """Read one line of rich's box: a frame line (whole, or the parts a narrow box wrapped) is kept; code
    lines, nested boxes and borders are passed over. False for a line outside the box (the exception's)."""
    if stripped[:1] in _RICH_BOTTOM:
        tb.rich_head = []
        return True
    if stripped[:1] not in _RICH_SIDES:
        return False
    inner = stripped[1:]
    if inner[-1:] in _RICH_SIDES:
        inner = inner[:-1]
    inner = inner.strip()
    if tb.rich_head:
        head = "".join(tb.rich_head)
        for joined in (head + inner, head + " " + inner):
            if m := _RICH_FRAME.match(joined):
                tb.add_frame(Frame(m.group("file"), int(m.group("line")), m.group("fn")))
                tb.rich_head = []
                return True
        if inner and len(tb.rich_head) <= RICH_WRAP_LINES and _RICH_HEAD.match(head + inner):
            tb.rich_head.append(inner)
            return True
        tb.rich_head = []
    if m := _RICH_FRAME.match(inner):
        tb.add_frame(Frame(m.group("file"), int(m.group("line")), m.group("fn")))
    elif _RICH_HEAD.match(inner) and ("/" in inner or "\\" in inner or inner[:1] == "<"):
        tb.rich_head = [inner]
    return True


def _ipython_frame(m: re.Match[str]) -> Frame:
    """A frame of IPython's traceback (a cell's, a file's, or IPython 7's without a line number: 0)."""
    if m.group("cline") is not None:
        return Frame(f"Cell In[{m.group('cell')}]", int(m.group("cline")), "<cell>")
    if m.group("file") is not None:
        return Frame(m.group("file"), int(m.group("line")), m.group("fn"))
    if m.group("input") is not None:
        return Frame(m.group("input"), 0, m.group("ifn"))
    return Frame(m.group("file7"), 0, m.group("fn7"))


def went_on_after(reader: TracebackReader, chain: Chain, records: float, recorded_before: bool = False) -> bool:
    """Whether the job logged more than `records` further steps (or rollouts) after this traceback in
    its file: an error it survived, or a stack it printed and went on from, not where it stopped. With
    `recorded_before`, counted only from a step (or rollout) the log recorded before the traceback: a
    progress bar's `8/120` printed after a crash says where the bar stood (modelscope/ms-swift#7228). Step records
    after it count from the start: `step:1 - …` logged after a worker's caught traceback at the first rollout
    (yuzhaouoe/GUI-Cursor-Moving:verl_demo.log) is the job going on."""
    last_step, last_rollout = reader.final_records.get(chain.path, (None, None))
    step_record = reader.final_step_records.get(chain.path, False)
    return any(final is not None and (at is not None or not recorded_before or record)
               and final - (at if at is not None else -1) > records
               for final, at, record in ((last_step, chain.last_step, step_record),
                                         (last_rollout, chain.last_rollout, True)))


def cut_traceback(reader: TracebackReader, went_on: float, paths: set[str] | None = None,
                  header_alone: bool = False) -> Chain | None:
    """The first traceback the reader holds that was cut before its exception line (a paste that
    stops inside the frames, often above its header too), in `paths` when given, unless the job
    logged more than `went_on` steps after it (a stack it printed and went on from). With
    `header_alone`, also one cut right under its header, before any frame. A remote traceback cut right
    under Ray's envelope is cut whatever `header_alone` says: the envelope names the task, not the error."""
    found = [g.first for g in reader.groups.values()
             if not g.first.root.type and (g.first.root.frames or header_alone or g.first.root.link == "ray")
             and (paths is None or g.first.path in paths) and not went_on_after(reader, g.first, went_on)]
    return min(found, key=lambda c: (c.path, c.start_line)) if found else None


def last_step_in(data: bytes, start: int = 0, end: int | None = None) -> tuple[int, bool] | None:
    """The last training step data[start:end] names (a `step N:` record, or the count of a progress bar that counts
    steps), and whether a bar's count gave it."""
    # (a bar with tqdm's postfix after its rate: OpenRLHF's `| 16/150 [3:38:05<30:26:30, 817.84s/it, policy_loss=…]`)
    return _last_record(data, start, len(data) if end is None else end,
                        (b"step ", b"step:", b"s/it]", b"it/s]", b"s/it, ", b"it/s, "), b"rollout")


def _last_record(data: bytes, start: int, end: int, needles: tuple[bytes, ...], other: bytes) -> tuple[int, bool] | None:
    """The number of the last record line in data[start:end] holding one of `needles` (and
    being a record of this kind, not of `other`), and whether a progress bar's count gave it."""
    best_pos, best = -1, None  # type: int, tuple[int, bool] | None
    for needle in needles:
        hi = end
        while True:
            pos = data.rfind(needle, max(start, best_pos + 1), hi)  # only later than the best so far can win
            if pos < 0:
                break
            ls = data.rfind(b"\n", start, pos) + 1
            le = data.find(b"\n", pos, end)
            line = data[ls: le if le >= 0 else end]
            m = None
            for m in _RECORD.finditer(line):
                pass
            if m is not None and m.group(2) is None \
                    and not _bar_counts_steps(line[:m.start()].decode("utf-8", "replace")):
                m = None  # (a loading or data bar's count is no step)
            if m is not None and (m.group(1) or b"step") != other:
                best_pos, best = pos, (int(m.group(2) or m.group(4)), m.group(2) is None)
                break
            hi = ls
    return best


def process_key(proc: Origin) -> str:
    """One process, however it is named: a Ray driver copy and the actor's own print of the
    same error carry the same actor pid; torchrun ranks carry their rank."""
    if proc.pid is not None:
        return f"{proc.actor or ''}/pid={proc.pid}"
    if proc.rank is not None:
        return f"rank{proc.rank}@{proc.ip or ''}"
    return f"stream:{proc.actor or ''}"


def _header_origin(text: str) -> Origin | None:
    m = _RAY_HEADER.search(text)
    if not m:
        return None
    return Origin(m.group("actor"), int(m.group("pid")), m.group("ip"), None)


def _open(path: Path) -> BinaryIO:
    fh, _written_end = safe_io.open_written(path)  # regular files only; a sparse tail is not read
    if fh.read(2) == b"\x1f\x8b":
        fh.close()
        return gzip.open(path, "rb")  # type: ignore[return-value]
    fh.seek(0)
    return fh


def rank_mentions(data: bytes, start: int, end: int) -> list[tuple[int, int]]:
    """(pid, rank) of each line in data[start:end] that an actor's prefix (`(Actor pid=N) `) opens and a `[Rank M]`
    follows, the first on its line; in line order."""
    out: list[tuple[int, int]] = []
    i = data.find(b"[Rank ", start, end)
    while i >= 0:
        line_start = data.rfind(b"\n", start, i) + 1
        line_end = data.find(b"\n", i, end)
        line_end = end if line_end < 0 else line_end
        prefix = _RANK_PREFIX_B.match(data, line_start, line_end)
        if prefix is not None:
            rank = _RANK_AT_B.search(data, max(i, prefix.end()), line_end)
            if rank is not None:
                out.append((int(prefix.group(1)), int(rank.group(1))))
        i = data.find(b"[Rank ", line_end, end)
    return out


def read_tracebacks(paths: list[Path], want: set[tuple[str, int]] | None = None) -> TracebackReader:
    """Every traceback of the given log files, grouped; files in the order given. `want`:
    exception lines whose frames to return in `found` (e.g. the remote frames Ray prints
    after its `RayTaskError` line, which a line-by-line index does not tie to the error)."""
    reader = TracebackReader(want)
    for path in paths:
        reader.read_file(path)
    return reader


def read_text(text: str, path: str = "<text>") -> TracebackReader:
    """The same from text already in memory (a pasted fragment, a test)."""
    reader = TracebackReader()
    reader.path = path
    for i, line in enumerate(text.splitlines(), 1):
        reader.feed(i, line)
    reader.finish()
    reader.final_records[path] = (reader.step, reader.rollout)
    reader.final_step_records[path] = not reader.step_from_bar
    return reader
