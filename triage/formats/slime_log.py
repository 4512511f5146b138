"""One streaming pass over slime / miles / Relax job logs, into a small LogIndex.

A job's driver log is often gigabytes, almost all of it SGLang and Ray chatter.
The scan reads it in binary chunks and never holds more than a chunk and one line:
each chunk is searched once, in C, for every marker the triage cares about (metric
dicts, error words, checkpoint messages, timers, ...) and only the lines that hold
a marker are decoded and parsed in Python. Line numbers come from counting newlines
between those lines, so the user can be pointed at `driver.log:48213`.

Formats recognised (see shared/FORMATS.md):
  slime   `[2026-08-01 10:00:00] model.py:918 - step 3: {...}`
  miles   `[2026-08-01 10:00:00.123 actor_cell0_rank0] model.py:918 - ...`
  Relax   `2026-08-01 10:00:00 | INFO | relax.components.actor:185 ...` (colorlog, ANSI codes)
  SGLang  `[2026-08-01 10:00:00 TP0] Decode batch. ...`
  Ray     `2026-08-01 10:00:00,123	INFO worker.py:1841 -- ...`, actor prefixes
          `(MegatronTrainRayActor pid=1234) `, `(SGLangEngine pid=7, ip=10.0.0.3) `
  bare    `print()` output (slime v0.1.0), tracebacks, `[rank0]: ` prefixed lines.

Other frameworks' metric lines (verl `step:N - k:v`, the HF Trainer's printed dicts,
ms-swift's JSON lines, OpenRLHF's tqdm postfix) are read by the grammars of
`triage.formats.metric_lines` on the lines that hold their markers. Leftover ANSI
fragments whose ESC byte was lost (`[36m`) are stripped like whole codes.
"""

from __future__ import annotations

import gzip
import math
import os
import re
import zlib
from array import array
from collections import deque
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import BinaryIO, Generic, TypeVar

from triage import safe_io
from triage.errors import CorruptArtifact
from triage.formats.log_index import (
    MAX_ERROR_LINES,
    MAX_FINISH_ROLLOUTS,
    MAX_NOTABLE,
    MAX_TRACEBACKS,
    LogIndex,
    LogLine,
    PlacementGroupWait,
    TimerStats,
    Traceback,
)
from triage.formats import notebook_stream
from triage.formats.metric_lines import (
    GRAMMAR_FRAMEWORK,
    NEMO_RESULTS,
    MetricRecord,
    Unparsed,
    nemo_item,
    nemo_step,
    parse_framework_metric,
)
from triage.formats.pyrepr import parse_metric_record

try:  # optional: one multi-pattern pass per chunk instead of one pass per marker
    import ahocorasick_rs as _ahocorasick
except ImportError:  # pragma: no cover - depends on the environment
    _ahocorasick = None

__all__ = ["scan_logs", "LogIndex", "CHUNK_BYTES", "MAX_LINE_BYTES"]

CHUNK_BYTES = 8 << 20
MAX_LINE_BYTES = 1 << 20  # longer lines are counted and skipped, never decoded
WINDOW_BYTES = 256 << 10  # how much the marker search covers at a time
SNIFF_BYTES = 64 << 10  # how much of a file decides whether it is text at all
MAX_TEXT_CHARS = 2000  # LogLine.text cap
MAX_PLACEMENT_WAITS = 20
MAX_FRAMES = 40
MAX_OPEN_TRACEBACKS = 256
MAX_TIMERS = 1000
MAX_COMMAND_CHARS = 256 << 10
MAX_ARGUMENT_LINES = 5000
MAX_CONTINUATION_LINES = 1000
# Unmarked lines read in a row under a traceback line (its code lines, carets, and an exception line that holds no
# error word); past it the rest is left to the markers
MAX_TRACEBACK_WALK = 64
# A metric dict a terminal wrapped onto further lines (pasted from a console): at most this many
# lines and characters are joined to it before it counts as cut off
MAX_WRAPPED_DICT_LINES = 32
# A verl step line a terminal wrapped at its width: the physical lines after it are as wide as it, the last one
# shorter, each holding ` - key:value` items and no record of its own (verl-project/verl#1224, #1208: a 238-column
# terminal's copy of `step:1049 - global_seqlen/min:16832.000 - …`). A line narrower than this is never a wrap.
MIN_WRAP_WIDTH = 80
_VERL_WRAP_ITEMS = re.compile(r" - [\w/@.\-]+:\S")
# the last physical line of a wrap holding only the rest of the last item (`:0.0123`, `845.000`), no space in it
_WRAP_TAIL = re.compile(r"^[\w/@.:\-]{1,40}$")
# (a record of its own: verl's SFT trainer prints its step right after the progress bar, `…6.06s/it]step:247 - train/loss:…`;
# `training/global_step:12 - ` is an item, not a record)
_VERL_STEP_AGAIN = re.compile(r"(?:^|[^\w/])step:\d+ - |^\s*\(\w+ pid=\d+|^\s*\[rank\d+\]")
# A Megatron iteration line broken after its bars (`iteration 5/50 | elapsed time per iteration: 21392.5 ms |` over
# `learning rate: 1.350000E-04 | global batch size: 4096 |` over `loss scale: 1.0 | grad norm: nan |`:
# NVIDIA-NeMo/Megatron-Bridge#5306): each line after one ending on a bar goes on with `key: value` items
_BAR_WRAP_ITEMS = re.compile(r"^\s*[A-Za-z][\w .()/-]*:\s*\S")
_ITERATION_AGAIN = re.compile(r"^\s*(?:\[[^\]]*\]\s*)?iteration\s+\d+")
_MEGATRON_HEAD = re.compile(r"\biteration\s+\d+\s*/\s*\d+\s*\|")
MAX_WRAPPED_DICT_CHARS = 64 << 10
SAMPLE_LINES = 200  # lines read at the head and tail of each file for its format and timestamps
MAX_UNPARSED_SAMPLES = 3
HEAD_TEXT_CHARS = 64 << 10  # head-of-log text kept for recognising a framework by its markers
MAX_LIST_INDENT = 8  # a paste nested in a Markdown list item is shifted by a few spaces (THUDM/slime#1217)
# A callback's echo of the HF Trainer's record is printed beside it: on the line before or after, or one
# further when a progress bar's line comes between (hiyouga/LlamaFactory#6286)
ECHO_LINES = 2
# LLaMA-Factory's LogCallback prints the loss to 4 decimals, the learning rate to 5 significant digits and
# the epoch to 2 decimals (llamafactory/train/callbacks.py; llmtuner/extras/callbacks.py): values within
# these of the Trainer's own are the same number
ECHO_EPOCH_TOLERANCE = 0.005
ECHO_RELATIVE_TOLERANCE = 1e-4
ECHO_ABSOLUTE_TOLERANCE = 1e-4
# a logger's prefix left before a printed dict (a progress bar glued in front of the line hid it from
# the line's own format: `…6.74s/it][INFO|2024-12-08 01:10:34] llamafactory.train.callbacks:157 >> {`)
# OpenRLHF's progress-bar titles (openrlhf/trainer/ppo_trainer.py `Episode [i/n]`, `Train step of episode`; its SFT,
# DPO and reward-model trainers' `Train step of epoch`, `Train epoch [i/n]`)
_OPENRLHF_BAR = re.compile(r"Train step of (?:episode|epoch)|Train epoch \[|Episode \[\d+/\d+\]")
_LOGGER_BEFORE_DICT = re.compile(r"\] [\w.]+:\d+ >> $| - (?:INFO|DEBUG|WARNING) - [\w.]+ - $")

# Error wordings that hold none of the error words below, each both an error word and a marker of its own in
# the scan's first automaton (_SPILLED), where a marker that holds no shorter one costs a few ms per 128 MB
# of the benchmark log.
SPILLED_ERROR_WORDS: tuple[str, ...] = (
    # vLLM's scheduler refusing a prompt longer than max_model_len (core/scheduler.py, v1/core/sched/scheduler.py:
    # `Input prompt (N tokens) is too long and exceeds limit of M`, a warning; huggingface/trl#3180)
    "exceeds limit of",
    # bash's `Killed` in a Chinese locale (a job the OOM killer ended: danijar/dreamerv3#203)
    "已杀死",
    # TRL's batch refusal and NeMo-RL's GPU count, pasted without their exception type (modelscope/ms-swift#3980:
    # `The global train batch size (1 x 1) must be evenly divisible by the number of generations per prompt (1).`;
    # NVIDIA-NeMo/RL#271: `Not enough GPUs available. Requested 16 GPUs, but only 8 are available in the cluster.`)
    "must be evenly divisible", "Not enough GPUs available",
    # a constructor's refusal pasted without `TypeError:` (dongyh20/Insight-V#6: `DPOTrainer.__init__() got an
    # unexpected keyword argument 'gamma'`)
    "got an unexpected keyword argument",
    # torch elastic's agent receiving SIGTERM, printed as its number in some versions
    # (torch/distributed/elastic/agent/server/api.py: `Received 15 death signal, shutting down workers`)
    "15 death signal",
    # Ascend HCCL's port taken (CANN error EJ0003: `Failed to bind the IP port. Reason: The IP address and port have
    # been bound already.`, vllm-project/vllm-ascend#405), a line of torch_npu's multi-line RuntimeError
    "Failed to bind the IP port",
    # a ModuleNotFoundError pasted without its type (unslothai/unsloth#6385)
    "No module named '",
    # Hydra's short report of an override the config does not take, printed without an exception type unless
    # HYDRA_FULL_ERROR=1 (hydra/_internal/config_loader_impl.py: `Could not override 'a.b.n'.`; verl-project/verl#4262,
    # PRIME-RL/TTRL#24), its `Could not append to config. An item is already at 'a.b'.` (verl-project/verl#820) and
    # OmegaConf's `Key 'dim_x' is not in struct` (mll-lab-nu/RAGEN#49)
    "Could not override '", "Could not append to config", "is not in struct",
    # nvidia-smi's `Unable to determine the device handle for GPU 0000:02:00.0: GPU is lost. Reboot the system to
    # recover this GPU` (JosephKJ/OWOD#81), Colab's `Your session crashed after using all available RAM.`
    # (unslothai/unsloth#1860) and the kubelet's `The node had condition: [DiskPressure]. ` (operate-first/apps#1352).
    # The three cost 5 ms of the search per 128 MB of the benchmark log (0.036 s to 0.042 s)
    "GPU is lost", "Your session crashed", "Pressure].",
    # dlopen's `PATH.so: undefined symbol: _Z…` on the line under transformers' lazy-import wrapper (OpenRLHF/
    # OpenRLHF#355); vLLM V0's `The model's max seq len (29000) is larger than the maximum number of tokens that can be
    # stored in KV cache (23648).` logged without its ValueError (vllm-project/vllm#10517); setuptools' pkg_resources
    # refusing a requirement (`pkg_resources.DistributionNotFound: The 'transformers<4.45,>=4.33' distribution was not
    # found and is required by ms-swift`, QwenLM/Qwen3-VL#84; `VersionConflict`); torch's `Unexpected key(s) in
    # state_dict: "…_extra_state"` pasted without the RuntimeError above it (NVIDIA/Megatron-LM#900)
    "undefined symbol", "stored in KV cache", "DistributionNotFound", "VersionConflict", "key(s) in state_dict",
    # pyarrow's ArrowInvalid (policy-gradient/GRPO-Zero#1), NVML's `Failed to initialize NVML: Driver/library version
    # mismatch` (mozilla/translations#1167) and torch's `UserWarning: CUDA initialization: The NVIDIA driver on your
    # system is too old` (IEIT-Yuan/Yuan-2.0#65; older torch put it on the line under a bare `AssertionError:`)
    "ArrowInvalid", "library version mismatch", "driver on your system is too old",
    # torch's load_state_dict line for a tensor of another shape, pasted without the `RuntimeError: Error(s) in loading
    # state_dict` above it (OpenRLHF/OpenRLHF#651: `size mismatch for …lora_B.default.weight: copying a param with shape
    # torch.Size([0]) from checkpoint, …`)
    "copying a param with shape",
    # ROCm's HSA runtime aborting on a kernel's bad address (`Memory access fault by GPU node-2 (Agent handle: …) on
    # address …. Reason: Unknown.`, iree-org/wave#466), AMD's illegal memory access
    "Memory access fault by GPU",
    # dynamic sampling giving up, its ValueError's message on a line of its own (BytedTsinghua-SIA/DAPO#22)
    "Generated too many",
    # an ImportError's message pasted without its type (verl-project/verl#5690: `cannot import name
    # 'AutoModelForCausalLMWithValueHead' from 'trl'`)
    "cannot import name '",
    # verl's own check of the installed vLLM, pasted from the issue's title without its ValueError (MIT-MI/MEM1#6:
    # `vllm version 0.5.1 not supported. Currently supported versions are 0.3.1, 0.4.2, 0.5.4 and 0.6.3.`)
    "Currently supported versions are",
    # torch's warning that its build has no kernels for the GPU (`NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is
    # not compatible with the current PyTorch installation.`, pytorch/pytorch#152077)
    "is not compatible with the current PyTorch",
    # pkg_resources' refusal as the message under transformers' lazy-import wrapper, without its type
    # (hiyouga/LlamaFactory#6884: `The 'transformers!=4.46.*,…,>=4.41.2' distribution was not found and is required by
    # llamafactory` under `Failed to import transformers.modeling_utils because of the following error`)
    "distribution was not found",
    # Kubernetes' scheduler leaving a pod Pending on nodes without the GPUs it asks (the FailedScheduling event:
    # `0/4 nodes are available: 4 Insufficient nvidia.com/gpu.`, kubernetes/kubernetes noderesources/fit.go)
    "Insufficient nvidia.com/gpu",
    # torch's c10d store client giving up on its rendezvous address, logged by torch < 2.2 without an exception type
    # (`[E socket.cpp:610] [c10d] The client socket has failed to connect to any network address of (192.168.1.99,
    # 1234).`, pytorch/pytorch#85300; hiyouga/LlamaFactory#3715)
    "client socket has failed to connect to any",
)

# Error words, matched against a line's message. Broad on purpose: a probe decides
# what a line means, the scan only must not miss it.
ERROR_WORDS: tuple[str, ...] = (
    "Error", "error", "ERROR", "Exception", "exception", "Traceback",
    "exitcode", "exit code", "Killed", "killed", "SIGKILL", "SIGSEGV", "SIGABRT", "Segmentation fault",
    "core dumped", "out of memory", "OutOfMemory", "OOM", "oom-kill", "Not enough memory",
    "illegal memory access", "NCCL", "Watchdog", "timed out", "timing out", "Max retries",
    "already in use", "boundary", "padding token", "does not appear to have", "does not exist",
    # transformers' refusal of a model type it does not know, pasted without its `ValueError:` (filliptm/ComfyUI-FL-
    # AceStep-Training#3: `Failed to load LLM: The checkpoint … has model type qwen3 but Transformers does not recognize
    # this architecture`); the scan's `does not ` marker finds it
    "does not recognize this architecture",
    "SIGTERM", "Xid", "fallen off the bus",  # scheduler signals and GPU hardware faults (probes/signatures.yaml)
    # an interrupt ending a traceback on its bare name (probes/signatures.yaml keyboard_interrupt; the scan's
    # `Interrupt` traceback marker finds the line)
    "KeyboardInterrupt",
    # wordings of probes/signatures.yaml that hold none of the words above: Ray's disk monitor, an
    # engine's context-length refusal, NCCL's socket connect, a compiled kernel that does not load
    "% full", "context length", "Connect to", "Could not load",
    # SGLang's scheduler refusing an input (managers/utils.py validate_input_length) and NumPy's
    # ABI message, which hold none of the words above
    "allowed length", "compiled using NumPy",
    # Kubernetes' pod status and eviction lines, Ray's head-node connect failure and NCCL's InfiniBand
    # work-completion error (probes/signatures.yaml), which hold none of the words above either
    "Exit Code:", "low on resource", "ephemeral local storage", "ephemeral storage limit", "GCS at",
    "Got completion from peer",
    # an OSError's message printed without its type (`[Errno 2] No such file or directory: '…'`) and a
    # CUDA kernel's device-side assert (`… block: [37,0,0], thread: [92,0,0] Assertion `…` failed.`)
    "[Errno ", "Assertion `",
    # uv's resolver giving up on the requirements (a version conflict, probes/signatures.yaml)
    "No solution found",
    # a C++ exception no one caught (libstdc++'s verbose terminate handler: `terminate called after
    # throwing an instance of 'gloo::EnforceNotMet'`, then `  what():  <its message>`), glog's fatal
    # `Check failed: …` (Ray's core worker: THUDM/slime#72), and SGLang's refusal of a weight update
    # (model_runner.py: `Failed to update parameter online: …`; THUDM/slime#2280, sgl-project/sglang#26032)
    "terminate called", "what():", "Check failed", "Failed to update parameter online",
    # the fatal-signal banner of PyTorch's and vLLM's native handlers, before the native stack
    # (modelscope/ms-swift#8306: a segfault while a checkpoint was written)
    "Segfault encountered",
    # SGLang's launcher ending the engine when a child (scheduler, detokenizer) died: its SIGQUIT handler's
    # `Received sigquit from a child process. It usually means the child failed.` (entrypoints/engine.py,
    # sgl-project/sglang#3685), logged without a level word
    "sigquit from a child",
    # Megatron's exit on a --load with no checkpoint (`>> '--exit-on-missing-checkpoint' set ... exiting. <<`,
    # found by the `xit` marker)
    "exit-on-missing-checkpoint",
    # DeepSpeed's launcher reporting a rank's exit (launch.py sigkill_handler: `[ERROR] [launch.py:325:sigkill_handler]
    # [cmd…] exits with return code = -9`), its `[ERROR]` prefix lost when a paste starts inside the long command
    # (THUDM/GLM#60); found by the `xit` marker
    "exits with return code",
    # the wordings no error word above finds, each its own marker of the scan's first automaton (_SPILLED)
    *SPILLED_ERROR_WORDS,
)

# What the chunk search looks for (bytes, case-sensitive), and which checks a hit calls
# for. Every line the scan parses holds at least one marker; a line holding none is
# only counted. The error words are covered by shorter stems ("rror" for Error /
# error / *Error, which also covers the exception lines of HF / Ray / torch errors).
# Each marker costs search time, and past 64 the automaton loses its SIMD prefilter.
# The prefilter also slows 2.7x as soon as one marker is shorter than 4 bytes (measured
# on the benchmarks/bench_ingest.py log: 670 MB/s with them, 1840 MB/s without), so the
# 3-byte markers come first and are searched by an automaton of their own (4000 MB/s),
# together with the metric markers. urllib3's `Max retries exceeded with url: … (Caused by
# NewConnectionError(…))` always names the error that caused it, so `rror` marks it.
# A metric dict follows a step number (`step 3: {...}`), so its markers are `0: {` to
# `9: {`: a bare `: {` also marks every dict a job prints that is not a metric record
# (slime's `Memory-Usage ...: {...}` lines, six times as many as its metric lines in the
# benchmark log), and each such hit cost a step of the Python loop.
_METRIC_MARK, _ERROR_MARK, _TRACE_MARK, _OTHER_MARK, _FW_MARK, _NEMO_MARK = 1, 2, 4, 8, 16, 32
_SPILLED: tuple[tuple[bytes, int], ...] = (
    *((word.encode(), _ERROR_MARK) for word in SPILLED_ERROR_WORDS),
    # vLLM's own report of what a sleep left on the GPU (v1/worker/gpu_worker.py: `Sleep mode freed 43.82 GiB memory,
    # 4.11 GiB memory is still in use.`), one line per sleep of a colocated engine (NVIDIA-NeMo/RL#2619)
    (b"Sleep mode freed", _OTHER_MARK),
    # torch's warning for a std / var over one element (aten ReduceOps.cpp: `std(): degrees of freedom is <= 0`):
    # a GRPO group of a single sample (FanqingM/MM-Eureka-V0#14, lzhxmu/CPPO#3)
    (b"degrees of freedom is <= 0", _OTHER_MARK),
    # NeMo-RL's step blocks (triage.formats.metric_lines, `nemo_rl_block`): the step header, the line over a step's
    # results, and an item (`  • Loss: 0.0368`, U+2022 in UTF-8)
    (b"= Step ", _NEMO_MARK), (NEMO_RESULTS.encode(), _NEMO_MARK), ("\u2022 ".encode(), _NEMO_MARK),
    # NeMo 2.0's progress line (triage.formats.metric_lines, `nemo_progress`)
    (b"reduced_train_loss", _FW_MARK),
    # verl's actor and critic skipping a step whose gradient is not finite (verl/workers/actor/dp_actor.py:
    # `WARN: rank 0 grad_norm is not finite: inf`, then zero_grad; EvolvingLMMs-Lab/multimodal-search-r1#19)
    (b"is not finite", _OTHER_MARK),
)
_SPILLED_MARKERS: tuple[bytes, ...] = tuple(marker for marker, _ in _SPILLED)
_MARKERS: tuple[tuple[bytes, int], ...] = (
    *((b"%d: {" % digit, _METRIC_MARK) for digit in range(10)),  # must stay first (_METRIC_NEEDLES)
    # `xit` stands for `exit`, `exitcode` and Kubernetes' `Exit Code:` in one 3-byte marker
    # `Seg` stands for `Segmentation fault` and the native handler's `!!!!!!! Segfault encountered !!!!!!!`
    *((word, _ERROR_MARK) for word in (b"SIG", b"OOM", b"Xid", b"xit", b"Seg")),
    (b"NaN", _OTHER_MARK),
    # The second automaton holds 64 markers, past which it loses its SIMD prefilter (0.064 s against
    # 0.258 s a 128 MB log with a 65th, benchmarks/bench_ingest.py's). The first one's prefilter is
    # already the slow kind its 3-byte markers need, and a longer marker there cost nothing measurable
    # (0.0202 s against 0.0203 s), so the markers that find no room in the second one go here:
    # vLLM's scheduler refusing a prompt over max_model_len (`Input prompt (8128 tokens) is too long
    # and exceeds limit of 6000`, a warning; huggingface/trl#3180), and its report of each sleep.
    *_SPILLED,
    *((word, _ERROR_MARK) for word in (
        b"rror", b"RROR", b"xception", b"illed", b"core dumped",
        b"out of memory", b"OutOfMemory", b"oom-kill", b"Not enough memory", b"illegal memory access",
        b"NCCL", b"Watchdog", b"timed out", b"timing out", b"already in use", b"boundary",
        b"padding token", b"does not ", b"fallen off the bus",
        b"% full", b" length", b"Connect to", b"ould not load", b"using NumPy",  # ` length`: context / allowed
        b"low on resource", b"ephemeral ", b"GCS at", b"NET/IB", b"[Errno ", b"Assertion `",
        b"No solution found", b"terminate called", b"what():", b"Check failed", b"parameter online",
        b"sigquit",
    )),
    (b"Traceback", _ERROR_MARK | _TRACE_MARK),
    (b"File \"", _TRACE_MARK),  # frames
    (b"Interrupt", _TRACE_MARK | _ERROR_MARK),  # KeyboardInterrupt, an exception line and an error word
    *((word, _OTHER_MARK) for word in (
        b"Finish rollout", b"Start rollout", b"Actor training", b"Timer ", b"Waiting for placement group",
        b" arguments ---", b"python", b"checkpoint", b"metadata file", b"start from random",
        b"found Inf", b"kipping", b"weights", b"ffload", b"nload", b"_memory_occupation", b"wake_up",
        b"server_args=",
    )),
    # other frameworks' metric lines (triage.formats.metric_lines)
    # (the HF Trainer adds `epoch` to every dict it logs: transformers/trainer.py, Trainer.log)
    *((word, _FW_MARK) for word in (b"step:", b"epoch", b"{'loss': ", b'{"loss": ',
                                    b"it/s, ", b"s/it, ",
                                    # Megatron's training_log line, in every version (NVIDIA/Megatron-LM#60's
                                    # 2021 log has no `consumed samples:`)
                                    b"elapsed time per iteration")),
)
_NEEDLES: tuple[bytes, ...] = tuple(marker for marker, _ in _MARKERS)
_MARK_OF: tuple[int, ...] = tuple(mark for _, mark in _MARKERS)
_METRIC_NEEDLES = 10  # the first ten markers: `N: {`
# the first automaton's: those, the 3-byte ones and the spilled ones
_SHORT_NEEDLES = _METRIC_NEEDLES + sum(len(n) < 4 for n in _NEEDLES) + len(_SPILLED_MARKERS)
_SPILLED_AT = _SHORT_NEEDLES - len(_SPILLED_MARKERS)
assert all(len(n) < 4 for n in _NEEDLES[_METRIC_NEEDLES:_SPILLED_AT]), "3-byte markers follow the metric ones"
assert _NEEDLES[_SPILLED_AT:_SHORT_NEEDLES] == _SPILLED_MARKERS, "then the spilled ones"
# measured on the benchmark log: 64 long markers 0.085 s per 128 MB, 65 markers 0.29 s (no SIMD prefilter)
assert len(_NEEDLES) - _SHORT_NEEDLES <= 64, "more than 64 long markers: the automaton loses its SIMD prefilter"
_START = itemgetter(1)

# Line formats. The pieces: a Ray actor prefix `(MegatronTrainRayActor pid=1234) `, a
# timestamp, and slime's `[ts] file.py:12 - ` head (miles: `[ts.mmm process] file.py:12 - `).
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")
# an SGR code whose ESC byte was lost (`[36m`), or replaced by U+FFFD on the way (verl-project/verl#2106:
# `RayTaskError(RuntimeError): \ufffd[36mray::TaskRunner.run()\ufffd[39m`)
_BARE_ANSI = re.compile(r"\ufffd?\[\d{1,3}(?:;\d{1,3})*m")
# (an actor's name may hold one pair of parentheses of its own: ROLL's `(ActorWorker(actor_train-1) pid=18175, ip=…)`,
# alibaba/ROLL#193; vLLM's multiprocessing workers put their rank before the pid, `(VllmWorker rank=7 pid=240)`:
# vllm/v1/executor/multiproc_executor.py, vllm-project/vllm#18446), or after a comma: `(head, rank=0, pid=40184)`,
# THUDM/slime#1491)
_SRC = r"\((?P<src>[A-Za-z_][\w.-]*(?:\([\w.-]*\))?(?:,? rank=\d+)?(?:,? pid=\d+)?(?:, ip=[^)\s]+)?|pid=\d+(?:, ip=[^)\s]+)?)\) ?"
_TS = r"(?P<ts>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d)(?P<ms>[.,]\d{1,6})?"
_SLIME_HEAD = r"\[" + _TS + r"(?P<tag>[^\]]*)\] [^\s:\]]+:\d+ - "
_RAY_PREFIX = re.compile(_SRC)
# vLLM v1 prefixes the lines of the processes an engine starts with their name and pid
# (vllm/utils: `_add_prefix`, "(EngineCore_DP0 pid=2) ", "(Worker_TP1 pid=3) "), after Ray's own
# the CRI logging format (kubernetes/cri-api, kubelet's pod log files): `<RFC 3339 time> <stream> <P|F> <line>`
_CRI_PREFIX = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d) (?:stdout|stderr) [FP] ")
# `docker logs --timestamps` and `kubectl logs --timestamps`: RFC 3339 with nanoseconds before each line
# (`2024-12-23T10:09:14.717696906Z ValueError: …`, axolotl-ai-cloud/axolotl#2218); an application's own
# ISO timestamps rarely carry more than milliseconds
_TIMESTAMPS_PREFIX = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6,9}(?:Z|[+-]\d\d:\d\d) ")
# a cluster's log collector putting the time and the pod before each line it gathered, then ` >> `
# (`[2025-12-18T16:24:02+08:00] <pod name> >> (SGLangEngine pid=3111) …`, THUDM/slime#1177)
_COLLECTOR_PREFIX = re.compile(r"\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?\] [\w.:-]+ >> ")
# a CI runner's timestamp before each line of a job's output: `[2026-08-21T19:42:40Z] ` (Buildkite's
# timestamped log lines; vllm-project/vllm#43375). The zone marks the carrier's clock: the frameworks'
# own loggers print local time without one.
_CI_TIMESTAMP = re.compile(r"\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)\] ")
_GROUP_RULE = re.compile(r"\+-[+-]*(?: (?:\d+|\.\.\.) -+)?\s*$")
_MD_BULLET_CODE = re.compile(r" {0,6}(?:[-*+]|\d{1,2}\.) +`(?!`)")
_PLAIN_TIMESTAMP = re.compile(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] ")
# a log viewer's time in full-width lenticular brackets before each line it exported, Ray's prefix after it
# (`【2024-12-13 15:37:21】(VLLMPolicyInference pid=13628, ip=…) AttributeError: …`, alibaba/ChatLearn#179)
_LENTICULAR_TIMESTAMP = re.compile(r"【\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d{1,6})?】 ?")
# Docker Compose's prefix of a service's lines: `<service>-<n>  | ` (v2), `<project>_<service>_<n>  | ` (v1), and a
# service's `container_name` without a number, padded to the widest name (`openedai-images-flux  | `,
# matatonic/openedai-images-flux#7)
_COMPOSE_PREFIX = re.compile(r"[a-z0-9][\w.-]*(?:[-_]\d+\s+|\s{2,})\| ")
# Launchers that label each line with the task that printed it: Slurm's `srun --label` ("Prepend
# task number to lines of stdout/err": `0: `, right-aligned when there are ten tasks or more;
# sgl-project/sglang#4096) and Open MPI's `mpirun --tag-output` (`[1,0]<stdout>:`).
# (`mpirun --timestamp-output` puts a ctime-style date before the tag, with no space: `Tue May 20 21:16:06
# 2025[1,0]<stdout>:RuntimeError: …`, verl-project/verl#1657)
_TASK_LABEL = re.compile(r" {0,5}\d{1,6}: (?=\S| {2})"
                         r"|(?:[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4})?\[\d+,\d+\]<std(?:out|err|diag)>: ?")
# pdsh's `<host>: ` before each line of a remote command (DeepSpeed's multi-node launcher runs the ranks
# through it: StarsfieldAI/R1-V#44's `29.127.65.230: [rank0]: AttributeError: …`): an address, or a host name
# when a rank's prefix follows, or a traceback's line (a header, a frame, its code, an exception) follows a host name of
# a cluster's naming, words joined by hyphens and ending in a number (NVIDIA/nccl#1029: `rdma-gpu-train-worker-0:   File
# "…/distributed_c10d.py", line 3665, in barrier`)
_PDSH_PREFIX = re.compile(r"(?:\d{1,3}\.){3}\d{1,3}: (?=\S)|[A-Za-z][\w.-]*: (?=\[(?:default)?rank\d+\]:)"
                          r"|[A-Za-z][\w.]*-[\w.-]*\d: (?=Traceback \(most recent call last\):|\s+File \"|\s{3}"
                          r"|(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception): )"
                          # a log collector's `[<service>]: ` tag before a Ray / vLLM worker's prefix or a logger's level
                          # (akash-network/awesome-akash#543: `[vllm]: (VllmWorkerProcess pid=91) ERROR 07-28 …`); a
                          # rank's own `[rank3]: ` is read as the rank
                          r"|\[(?!(?:default)?rank\d|default\d)[A-Za-z][\w.-]*\]: "
                          r"(?=\([A-Za-z_][\w.-]* pid=\d+|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) )")
# `grep -n`'s line number before a matched line (`4918:(RolloutManager pid=6809) [2026-07-20 …] … perf 0: {…}`) and
# `grep -n -C`'s before a context line (`4917-(…`): users paste a grep of the log for its records and errors (a
# slime run's committed notes); a time (`12:30:01`) or an address is not one
# `cat -n`'s right-aligned number and tab (hiyouga/LlamaFactory#7986: `  1145\t[rank3]: RuntimeError: …`)
_GREP_LINE_NO = re.compile(r"\d{1,9}(?::(?=[(\[A-Za-z_])|-(?=[(\[]))| {0,8}\d{1,9}\t")
_NESTED_PROCESS = re.compile(r"\([A-Za-z_][\w.-]* pid=\d+\) ?")
_RAY_REPEATED = re.compile(r"\s*\[repeated \d+x across cluster\]\s*$")
# (torch elastic's `--log-line-prefix-template` default, `[${role_name}${local_rank}]:`, may stand before it:
# `[default7]:[rank7]: KeyError: 'state'`, NVIDIA/Megatron-LM#3885; or alone, torchrun's `--tee`:
# `[default0]:AttributeError: …`, huggingface/nanotron#303, the local rank standing for the rank)
_RANK_PREFIX = re.compile(r"(?:(?:\[default\d+\]:)?\[(?P<rank>(?:default)?rank\d+)\]:|\[default(?P<local>\d+)\]:)\s?")
_SLIME_FMT = re.compile(_SLIME_HEAD)
# slime's logger head without its `[time]` (a paste that trimmed it: `model.py:660 - step 1: {…}`, NovaSky-AI/SkyRL#1864),
# read only before a metric record
_BARE_SLIME_HEAD = re.compile(r"(?:(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) )?[\w.-]+\.py:\d+ - ")
_FAST_SLIME = re.compile(f"(?:{_SRC})?{_SLIME_HEAD}")
_BRACKET_TS = re.compile(r"\[" + _TS + r"(?P<tag>[^\]]*)\] ?")
_BRACKET_LEVEL = re.compile(r"\[(DEBUG|INFO|WARNING|ERROR|CRITICAL)\] ")
_GLOG_START = re.compile(r"\[?[IWEF](?:\d{4} | [\w.]+\.(?:cpp|cc|h|hpp):\d+\] )")
_GLOG = re.compile(  # `[E0817 12:31:05.340716529 ProcessGroupNCCL.cpp:632] ` or `W0810 08:14:01.322000 4123 run.py:792] `
    r"(?:\[(?P<sev>[IWEF])\d{4} \d\d:\d\d:\d\d\.\d+ [^\]]*\]"
    r"|(?P<sev2>[IWEF])\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ [^\]\s]+\]"
    # c10's logging before torch 2.2, without a time (`[E ProcessGroupNCCL.cpp:1414] `, vllm-project/vllm#6042)
    r"|\[(?P<sev3>[IWEF]) [\w.]+\.(?:cpp|cc|h|hpp):\d+\]) ?"
)
_GLOG_LEVELS = {"I": "INFO", "W": "WARNING", "E": "ERROR", "F": "CRITICAL"}
# NeMo's logging (nemo/utils/formatters/base.py: `[NeMo %(levelname)1.1s %(asctime)s %(module)s:%(lineno)d] `, the
# time `%Y-%m-%d %H:%M:%S`): NeMo, NeMo-Aligner and the Megatron stacks built on them (NVIDIA/NeMo#7647)
_NEMO_FMT = re.compile(r"\[NeMo (?P<level>[DIWEC]) (?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) [\w.]+:\d+\] ?")
_NEMO_LEVELS = {"D": "DEBUG", "I": "INFO", "W": "WARNING", "E": "ERROR", "C": "CRITICAL"}
# ms-swift's and modelscope's loggers: `[%(levelname)s:%(name)s] ` (`[INFO:swift] `, modelscope/ms-swift#1230;
# `[ERROR:modelscope] `, modelscope/ms-swift#3194)
_SWIFT_FMT = re.compile(r"\[(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL):[\w.]+\] ?")
_RELAX_FMT = re.compile(_TS + r" \| (?P<level>[A-Z]+)\s*\| (?P<where>[^\s|]+):\d+(?:\[[^\]]*\])? ?")
_RAY_FMT = re.compile(_TS + r"\s+(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) \S+:\d+ -- ")
_PY_FMT = re.compile(r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL):[\w.]*:")
_LEVEL = r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL)"
# Python logging's `%(asctime)s - %(levelname)s - %(name)s - %(message)s` (TRL's and open-r1's scripts,
# huggingface/open-r1#543: `2025-03-26 05:53:13 - INFO - trl.extras.vllm_client - Server is not up yet`)
_PYLOG_FMT = re.compile(_TS + r" - " + _LEVEL + r" - [\w.\-]+ - ")
# transformers' examples' `[%(levelname)s|%(filename)s:%(lineno)s] %(asctime)s >> %(message)s`
# (`[INFO|trainer.py:746] 2025-03-26 05:53:13,046 >> Using auto half precision backend`) and
# LLaMA-Factory's `[%(levelname)s|%(asctime)s] %(name)s:%(lineno)s >> %(message)s`
_HF_EXAMPLES_FMT = re.compile(r"\[" + _LEVEL + r"\|[^\]\s]+\] " + _TS + r" >> ")
_LLAMAFACTORY_FMT = re.compile(r"\[" + _LEVEL + r"\|" + _TS + r"\] [^\s>]+ >> ")
# vLLM's logger: `ERROR 10-28 16:21:14 [core.py:710] ...` (vllm/logger.py: "%(levelname)s
# %(asctime)s [%(filename)s:%(lineno)d] %(message)s", date "%m-%d %H:%M:%S"; no year); before
# vLLM 0.6 without the opening bracket: `ERROR 06-03 23:13:39 worker_base.py:148] ...`
# (OpenRLHF/OpenRLHF#313). Its traceback lines keep their indentation after it.
VLLM_FMT = _VLLM_FMT = re.compile(
    r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[?[^\]\s]+:\d+\] ")

# `step 3` right before `: {` (after a space, a bracket, the line start or an ANSI code's `m`)
_METRIC_HEAD = re.compile(
    rb"(?:^|[^A-Za-z0-9_]|m)(?:[A-Za-z_]+-)?(?:step|rollout|perf|eval|passrate|multi_turn) \d+$", re.M
)
_METRIC_HEAD_END = re.compile(rb"(?:step|rollout|perf|eval|passrate|multi_turn) \d+$", re.M)


def _after_metric_head(data: bytes | bytearray, start: int, end: int) -> bool:
    """`_METRIC_HEAD.search(data, start, end)`, 4x as fast on a metric line (it runs on each).

    The kind word the head ends with is found first (no kind ends another, so there is
    one place it can start); the head then matches exactly when the byte before the word
    is not a word byte, or is `m`, or is the `-` of a prefix. Only a word at `start`
    itself, where the line start decides, goes to the full pattern.
    """
    m = _METRIC_HEAD_END.search(data, start, end)
    if m is None:
        return False
    k = m.start()
    if k == start:
        return _METRIC_HEAD.search(data, start, end) is not None
    c = data[k - 1]
    return c == 0x6D or not (48 <= c <= 57 or 65 <= c <= 90 or 97 <= c <= 122 or c == 95)


def _first_dict_after_head(raw: str) -> bool:
    """Whether the line's first metric marker (`N: {`) follows a metric head, as `_after_metric_head` reads it."""
    data = raw.encode("utf-8", "replace")
    m = _METRIC_AT.search(data)
    return m is not None and _after_metric_head(data, max(0, m.start() - 63), m.start() + 1)


_METRIC_AT = re.compile(rb"\d: \{")

# slime / miles metric lines, prefix and all, in one match (the common case, kept cheap)
_FAST_METRIC = re.compile(
    f"(?:{_SRC})?{_SLIME_HEAD}"
    r"(?P<kind>(?:[A-Za-z_]+-)?step|rollout|perf|eval|passrate|multi_turn) (?P<n>\d+): (?P<dict>\{.*)"
)
_FAST_TIMER = re.compile(
    f"(?:{_SRC})?{_SLIME_HEAD}"
    r"(?P<msg>Timer (?P<name>\S+) (?P<what>start|end)(?: \(elapsed: (?P<s>[-+\d.eE]+|nan|inf)s\))?\s*$)"
)
_METRIC = re.compile(r"(?P<kind>(?:[A-Za-z_]+-)?step|rollout|perf|eval|passrate|multi_turn) (?P<n>\d+): (?P<dict>\{.*)")
# the last of the retries (`retrying (34/34)`, `attempt 60/60`): nothing is tried after it (NCCL's socket connect,
# hiyouga/LlamaFactory#8045); probes/symptom.py asks the same of a retry line
LAST_TRY = re.compile(r"\((\d+)/\1\)|\battempt (\d+)/\2\b", re.I)


def _last_retry(msg: str) -> bool:
    """NCCL's last connect retry, logged at INFO (misc/socket.cc: `connect returned No route to host, retrying
    (34/34)`), after which the connection fails: a paste may end there (hiyouga/LlamaFactory#8045)."""
    return "connect returned " in msg and "retrying (" in msg and LAST_TRY.search(msg) is not None


# a non-interactive bash's report of a child a signal ended (GNU bash jobs.c: `SCRIPT: line N: PID Killed   COMMAND`,
# the signal as strsignal names it, `(core dumped)` after it when one was written; modelscope/ms-swift#195)
_SHELL_JOB_REPORT = re.compile(r":\s*line \d+:\s+\d+ [A-Z][a-z]+(?: [a-z]+)*(?: \(core dumped\))?\s{2,}\S")
_ERROR_RE = re.compile("|".join(re.escape(w) for w in ERROR_WORDS))
# a frame line of a Python traceback (traceback.py's `  File "{}", line {}, in {}`); faulthandler's
# dump writes `line N in fn` without the comma
_FRAME_HEAD = re.compile(r'File "[^"]+", line \d+,? in ')
_TIMER = re.compile(r"Timer (?P<name>\S+) (?P<what>start|end)\b(?: \(elapsed: (?P<s>[-+\d.eE]+|nan|inf)s\))?")
_PLACEMENT = re.compile(
    r"Waiting for placement group of (?P<need>\d+) GPUs \(elapsed (?P<s>[\d.]+)s\): "
    r"(?P<reg>[\d.]+) GPUs registered with Ray, (?P<avail>[\d.]+) available"
)
_ARGS_BEGIN = re.compile(r"-{3,} arguments -{3,}\s*$")
_ARGS_END = re.compile(r"-{3,} end of arguments -{3,}\s*$")
_ARG_LINE = re.compile(r" {1,4}(?P<name>[A-Za-z_][\w.-]*) \.*(?: (?P<value>.*))?$")
_PYTHON_CMD = re.compile(
    r"(?:^|(?<=[\s;&|(`'\"=]))(?P<cmd>(?:[^\s;&|(`'\"=]*/)?python[\d.]*\s+(?:-[A-Za-z]\s+)*"
    r"(?:-m\s+(?P<module>[\w.]+)|(?P<script>[^\s;&|]+\.py))\b.*)"
)
# a Hydra override as verl's and other Hydra entry points take their arguments (`python3 -m
# verl.trainer.main_ppo algorithm.adv_estimator=grpo data.train_batch_size=128 …`, echoed by
# bash's `set -x` as `+ python3 …`): a dotted key, so a `python3 x.py a=1` is not taken for one
_HYDRA_OVERRIDE = re.compile(r"\s[+~]{0,2}[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+=")
_EXCEPTION_LINE = re.compile(r"[A-Za-z_][\w.]*(?:\([\w.]*\))?(?::(?:\s.*)?)?\s*$")
# Python prints an exception with an empty message as its name alone (`AssertionError`,
# `KeyboardInterrupt`, `StopIteration`): a bare name counts only when it is named like one, as
# Python's built-in exceptions all are, not a word or a call a paste was cut at (`tor`,
# `ray.e`, `run_ppo(config)`: volcengine/verl#2197, #2995, modelscope/ms-swift#3666).
BARE_EXCEPTION = re.compile(
    r"(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Interrupt|Exit|Iteration|Warning|Group)(?:\([\w.]+\))?")

# an exception line with its message, the type named like an exception (`RuntimeError: …`; a warning's
# `UserWarning: …` is not one): the question the traceback readers and the error scan ask of a line outside
# or under a traceback's frames
TYPED_EXCEPTION = re.compile(
    r"(?P<type>(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Interrupt|Exit)(?:\([\w.]+\))?): (?P<msg>\S.*)$")


# an exception line as Python prints it: a builtin's name (named like an exception) or a class with its module
# (`torch._dynamo.exc.FailOnRecompileLimitHit: …`), with its message or alone
_PRINTED_EXCEPTION = re.compile(r"(?:(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Interrupt|Exit|Iteration)"
                                r"|(?:[A-Za-z_]\w*\.)+[A-Z]\w*)(?:\([\w.]+\))?(?::\s|:?$)")
# an exception line's type as a class names it: its last dotted name capitalised (`RuntimeError`, `zmq.error.Again`)
_CLASS_TYPE = re.compile(r"(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:\([\w.]+\))?(?::|\s*$)")


def slurm_launcher_line(text: str) -> bool:
    """A line Slurm's launcher wrote into the job's terminal (`srun: error: node: task 0: Exited with exit code 1`,
    `slurmstepd: error: …`): between a task's traceback frames it is another process's line, not where the
    traceback ends (ray-project/ray#6978)."""
    return text[:5] == "srun:" or text[:11] == "slurmstepd:"


def exception_line(text: str) -> bool:
    """Whether a line under a traceback's frames is its exception line (`Type: message`, or a bare
    name named like an exception)."""
    stripped = text.strip()
    if not _EXCEPTION_LINE.match(stripped):
        return False
    return ":" in stripped or BARE_EXCEPTION.fullmatch(stripped) is not None
_PROGRESS = re.compile(r"\b(?P<what>Start|Finish) rollout (?P<i>\d+)/(?P<n>\d+)")
_TRAIN_PROGRESS = re.compile(r"\bActor training (?:completed )?step \d+/\d+")
_NAN_SKIP = re.compile(
    r"\b(?:found|detected|got|result)\s+(?:nan|inf)\b|\b(?:nan|inf)\b.{0,40}\b(?:grad|loss)|"
    r"\b(?:loss|grad\w*)\s+(?:is|was|are)\s+(?:nan|inf)\b|\bgrad\w*\s+is\s+not\s+finite\b|"
    r"\bskip(?:ping|ped)?\s+(?:this\s+|the\s+)?(?:optimizer\s+)?(?:step|iteration|update)",
    re.I,
)
_WEIGHTS_UPDATE = re.compile(r"update[_ ]weights", re.I)
_RELEASE = re.compile(r"release_memory_occupation|(?<![\w-])[Oo]ffload(?:ing|ed)?\b(?![_=-])")
_RESUME = re.compile(r"resume_memory_occupation|(?<![\w-])[Oo]nload(?:ing|ed)?\b(?![_=-])|\bwake_up\b")
_CKPT_LOADED = ("successfully loaded checkpoint", "loading checkpoint from", "loading distributed checkpoint from",
                "loading release checkpoint", "loading release distributed checkpoint", "Load checkpoint from")
_CKPT_MISSING = ("could not find the metadata file", "will not load any checkpoints", "start from random",
                 "no checkpoint found", "No checkpoint found")
_CKPT_SAVED = ("saving checkpoint at iteration", "successfully saved checkpoint")

NOTABLE_TAGS = (
    "ckpt_loaded", "ckpt_not_found", "ckpt_saved", "nan_skip", "rollout_progress",
    "train_progress", "weights_update", "release_memory", "resume_memory", "engine_launch", "std_no_dof",
)

T = TypeVar("T")


class _HeadTail(Generic[T]):
    """The first half and the last half of at most `limit` items, and how many were seen."""

    def __init__(self, limit: int) -> None:
        self.half = limit // 2
        self.head: list[T] = []
        self.tail: deque[T] = deque(maxlen=limit - self.half)
        self.seen = 0

    def add(self, item: T) -> None:
        self.seen += 1
        if len(self.head) < self.half:
            self.head.append(item)
        else:
            self.tail.append(item)

    def items(self) -> list[T]:
        return self.head + list(self.tail)


class _NeedleFinder:
    """Start offsets of every marker in a stretch of bytes, in order.

    With ahocorasick_rs installed this is two SIMD-assisted passes, one for the
    first `short` needles (the metric markers and those shorter than 4 bytes) and
    one for the rest; without it, one `bytes.find` pass per marker (same answer, slower).
    A line is marked by each marker it holds, as with `bytes.find`, also where
    two markers overlap.
    """

    def __init__(self, needles: tuple[bytes, ...], use_automaton: bool | None = None,
                 short: int = _SHORT_NEEDLES) -> None:
        self.needles = needles
        if use_automaton is None:
            use_automaton = _ahocorasick is not None
        self._ac = None
        self._long_ac = None
        if use_automaton:
            if _ahocorasick is None:
                raise RuntimeError("ahocorasick_rs is not installed")
            short = min(short, len(needles))
            self._short = short
            kind = _ahocorasick.MatchKind.LeftmostFirst
            self._ac = _ahocorasick.BytesAhoCorasick(list(needles[:short] or needles), matchkind=kind)
            if 0 < short < len(needles):
                self._long_ac = _ahocorasick.BytesAhoCorasick(list(needles[short:]), matchkind=kind)

    def hits(self, data: bytes, start: int, end: int) -> list[tuple[int, int, int]]:
        """(marker index, start, end) of the markers in data[start:end], offsets from `start`, in order."""
        if self._ac is not None:
            with memoryview(data) as view:
                found = self._ac.find_matches_as_indexes(view[start:end])
                if self._long_ac is None:
                    return found
                short = self._short
                more = [(k + short, s, e) for k, s, e in self._long_ac.find_matches_as_indexes(view[start:end])]
            if not found:
                return more
            if more:
                found += more
                found.sort(key=_START)  # two sorted runs: a merge
            return found
        found: list[tuple[int, int, int]] = []
        for k, needle in enumerate(self.needles):
            pos = data.find(needle, start, end)
            while pos >= 0:
                found.append((k, pos - start, pos - start + len(needle)))
                eol = data.find(b"\n", pos, end)
                if eol < 0:
                    break
                pos = data.find(needle, eol + 1, end)  # one hit per line is enough
        found.sort(key=lambda hit: hit[1])
        return found


@dataclass
class _OpenTraceback:
    line_no: int
    source: str | None
    head: list[str] = field(default_factory=list)
    tail: deque[str] = field(default_factory=lambda: deque(maxlen=MAX_FRAMES // 2))
    frame_indent: int = 2  # Python's; a paste shifted as a whole shifts the exception line with it
    # printed under `Exception ignored in: <…>` (sys.unraisablehook: an error in a finalizer or a `__del__`,
    # which the process went on from): its exception line is no error line of the job
    ignored: bool = False
    code_indent: int | None = None  # the indentation of the code line just read under a frame
    code_next: bool = False  # an unindented frame was just read: the next line is its code line, unindented too

    def add_frame(self, frame: str) -> None:
        if len(self.head) < MAX_FRAMES // 2:
            self.head.append(frame)
        else:
            self.tail.append(frame)

    def frames(self) -> tuple[str, ...]:
        return tuple(self.head) + tuple(self.tail)


@dataclass(slots=True)
class _Line:
    """A decoded line split into the parts the formats carry."""

    text: str  # the message
    source: str | None
    timestamp: str | None
    level: str | None
    fmt: str | None  # slime | miles | relax | sglang | ray | None


class _Index:
    """What the scan accumulates across files, bounded; turned into a LogIndex at the end."""

    def __init__(self) -> None:
        self.out = LogIndex()
        self.seq = 0
        self.errors: _HeadTail[LogLine] = _HeadTail(MAX_ERROR_LINES)
        self.finish: _HeadTail[tuple[str, int, str]] = _HeadTail(MAX_FINISH_ROLLOUTS)  # (path, line_no, raw)
        self.tracebacks: _HeadTail[Traceback] = _HeadTail(MAX_TRACEBACKS)
        per_tag = max(2, MAX_NOTABLE // len(NOTABLE_TAGS))
        # (seq, path, line_no, message, source, timestamp, level, tag): made a LogLine only if kept
        self.notable: dict[str, _HeadTail[tuple]] = {t: _HeadTail(per_tag) for t in NOTABLE_TAGS}
        self.waits: deque[PlacementGroupWait] = deque(maxlen=MAX_PLACEMENT_WAITS)
        self.timer_open: dict[str, int] = {}
        self.votes = {"slime": 0, "miles": 0, "relax": 0, "bare_metrics": 0}
        self.foreign_votes: dict[str, int] = {}  # framework -> records read by its grammars
        self.ordinals: dict[str, int] = {}  # kind -> records numbered so far (grammars with no step)
        self.head_text: list[str] = []
        self.head_chars = 0
        self.command_is_train = False
        # What a part of a file scanned on its own (triage.formats.log_parts) reports so that its
        # result can be joined after the part before it as if one pass had read both:
        self.saw_command = False  # a training command line was weighed (the choice depends on earlier ones)
        self.timers_refused = False  # a timer was dropped at MAX_TIMERS (which ones depends on earlier ones)
        self.timer_unmatched: dict[str, int] = {}  # timer -> ends met with no start open
        self.timer_elapsed: dict[str, array] | None = None  # timer -> each elapsed time, in order (parts only)

    def timestamp(self, ts: str) -> None:
        out = self.out
        if out.first_timestamp is None or ts < out.first_timestamp:
            out.first_timestamp = ts
        if out.last_timestamp is None or ts > out.last_timestamp:
            out.last_timestamp = ts

    def finish_index(self) -> LogIndex:
        out = self.out
        out.errors = self.errors.items()
        out.dropped_errors = self.errors.seen - len(out.errors)
        out.finish_rollouts = [_finish_line(*item) for item in self.finish.items()]
        out.tracebacks = self.tracebacks.items()
        kept = [item for tag in NOTABLE_TAGS for item in self.notable[tag].items()]
        out.notable = [_note_line(*item[1:]) for item in sorted(kept, key=itemgetter(0))]
        out.placement_group_waits = list(self.waits)
        for name, still_open in self.timer_open.items():
            out.timers[name].started_not_ended = still_open
        v = self.votes
        foreign = max(self.foreign_votes.items(), key=lambda kv: kv[1], default=(None, 0))
        slime_family = v["relax"] + v["miles"] + v["slime"] + v["bare_metrics"]
        if foreign[0] is not None and foreign[1] >= slime_family:
            out.framework = self._member_of(foreign[0])
            if foreign[0] == "hf_trainer":
                # the Trainer's printed dicts are also what a framework built on it prints: its own markers
                # name it (ms-swift's `[INFO:swift] ` over `{'loss': …, 'global_step': 1}`, modelscope/ms-swift#1230)
                out.framework = self._framework_printing("hf_dict") or out.framework
        elif v["relax"]:
            out.framework = "relax"
        elif v["miles"] and v["miles"] >= v["slime"]:
            out.framework = "miles"
        elif v["slime"] or v["bare_metrics"]:
            out.framework = "slime"
        else:
            out.framework = self._framework_by_markers()
        return out

    def _marker_text(self) -> str:
        out = self.out
        return "\n".join(self.head_text + [line.text for line in out.errors[:200]]
                          + [frame for tb in out.tracebacks[:10] for frame in tb.frames])

    def _framework_by_markers(self) -> str:
        """No format or grammar decided: the adapter whose log markers the head and the errors hold most of."""
        from triage.frameworks import detect

        text = self._marker_text()
        fw = detect(text)
        if fw is None:
            return "unknown"
        return fw.member(text)

    def _framework_printing(self, grammar: str) -> str | None:
        """The framework the log's markers name, other than the grammar's own, when it prints that grammar too."""
        from triage.frameworks import detect

        text = self._marker_text()
        fw = detect(text)
        if fw is None or GRAMMAR_FRAMEWORK.get(grammar) in fw.run_names or grammar not in fw.metric_grammars:
            return None
        return fw.member(text)

    def _member_of(self, name: str) -> str:
        """A grammar's framework, or the member of its family the log's paths name (axolotl's logger
        over the HF Trainer's printed dicts: axolotl-ai-cloud/axolotl#1613)."""
        from triage.frameworks import for_run

        fw = for_run(name)
        if fw is None or not fw.members or name not in fw.members:
            return name
        return fw.member(self._marker_text())


def scan_logs(paths: list[Path], *, use_automaton: bool | None = None) -> LogIndex:
    """Index the logs of one run, in the order given.

    Raises CorruptArtifact when a file cannot be read, or is binary rather than a log.
    `use_automaton` forces (True) or refuses (False) the multi-pattern search; the
    default uses it when ahocorasick_rs is installed; both find the same lines.
    """
    from triage.formats.log_parts import scan_file  # (it builds on this module)

    index = _Index()
    finder = _NeedleFinder(_NEEDLES, use_automaton)
    for path in paths:
        scan_file(_FileScan(Path(path), index, finder))  # a large file in parts at once, same answer
    return index.finish_index()


def _note_line(path: str, line_no: int, text: str, source: str | None, timestamp: str | None, level: str | None,
               tag: str) -> LogLine:
    return LogLine(path, line_no, _cap(text.strip()), source, timestamp, level, tag)


def _finish_line(path: str, line_no: int, raw: str) -> LogLine:
    line = split_line(raw)
    return LogLine(path, line_no, _cap(line.text.strip()), line.source, line.timestamp, line.level)


def _cap(text: str) -> str:
    """At most MAX_TEXT_CHARS: the head and the tail, where the useful parts of long lines sit."""
    if len(text) <= MAX_TEXT_CHARS:
        return text
    keep = MAX_TEXT_CHARS - 3
    return text[: keep // 2] + " … " + text[-(keep - keep // 2):]


def _normal_ts(ts: str, ms: str | None) -> str:
    """`2026-08-01 10:00:00` (+ `.mmm` where the format has it): comparable as strings."""
    if ts[10] == "T":
        ts = ts[:10] + " " + ts[11:]
    return ts + "." + ms[1:] if ms else ts


def _echoes(echo: dict[str, object], record: dict[str, object]) -> bool:
    """Whether `echo` repeats `record` as a logger rounds it: fewer keys, all of them in `record`,
    each value the same to the rounding (NaN matching NaN)."""
    if not echo.keys() < record.keys():
        return False
    for key, value in echo.items():
        other = record[key]
        if not isinstance(value, (int, float)) or not isinstance(other, (int, float)):
            if value != other:
                return False
            continue
        if math.isnan(value) or math.isnan(other):
            if not (math.isnan(value) and math.isnan(other)):
                return False
            continue
        tolerance = ECHO_EPOCH_TOLERANCE if key == "epoch" else \
            ECHO_ABSOLUTE_TOLERANCE + ECHO_RELATIVE_TOLERANCE * abs(other)
        if not abs(value - other) <= tolerance:
            return False
    return True


def strip_carrier(text: str) -> str:
    """What carried the line to the user, not what the job printed: the prefix a container runtime
    writes before each line of a pod's log file (CRI: `2025-07-25T07:53:08.217487+08:00 stdout F `) or
    `docker logs --timestamps` before each line it prints (`2024-12-23T10:09:14.717696906Z `),
    Docker Compose's service prefix (`outlines-server-1  | `), a launcher's task label (`srun
    --label`'s `0: `, `mpirun --tag-output`'s `[1,0]<stdout>:`), and a Markdown quote (`> `) or inline
    code's backticks a pasted comment keeps, and the indentation of a Markdown list item before Ray's
    prefix (THUDM/slime#1217: `   (SGLangEngine pid=32887) [ts TP7 EP7] …` under a numbered item), and
    W&B's `wandb: ERROR ` before each line of the traceback of a run its sweep agent ran (wandb/agents/
    pyagent.py logs the run's exception through its logger: unslothai/unsloth-zoo#127), the `  | ` that Python's
    exception groups draw before each line of a nested traceback, and a cluster's
    log collector's `[<ISO time>] <pod> >> ` (THUDM/slime#1177), a CI runner's `[<ISO time with zone>] `, a log
    viewer's `【<time>】` (alibaba/ChatLearn#179), and pdsh's `<host>: ` (DeepSpeed's multi-node launcher)."""
    first = text[:1]
    if (first.isdigit() or first == " " and "\t" in text[:18]) and (m := _GREP_LINE_NO.match(text)) is not None:
        text = text[m.end():]
        first = text[:1]
    if first == "w" and text.startswith("wandb: ERROR") and text[12:13] in ("", " ", "\r", "\n"):
        text = text[13:]
        first = text[:1]
    elif first == "[" and text[11:12] == "T":
        m = _COLLECTOR_PREFIX.match(text) if " >> " in text[:200] else None
        m = m or _CI_TIMESTAMP.match(text)
        if m:
            text = text[m.end():]
            first = text[:1]
    elif first == "[" and text[11:12] == " " and text[20:23] == "] (":
        # a timestamp before Ray's prefix was added after Ray forwarded the line to the driver: a collector's
        # (`[2025-05-10 00:18:21] (WorkerDict pid=1230, ip=…) [rank15]:…`, verl-project/verl#1309)
        m = _PLAIN_TIMESTAMP.match(text)
        if m and _RAY_PREFIX.match(text, m.end()):
            text = text[m.end():]
            first = "("
    elif first == "【":
        m = _LENTICULAR_TIMESTAMP.match(text)
        if m:
            text = text[m.end():]
            first = text[:1]
    if first == " ":
        body = text.lstrip(" ")
        if body[:1] == "(" and len(text) - len(body) <= MAX_LIST_INDENT and _RAY_PREFIX.match(body):
            text, first = body, "("
        elif body[:2] in ("| ", "+ ") and (len(text) - len(body)) % 2 == 0 and (
                body[0] == "|" and not body.rstrip().endswith("|") or body.startswith("+ Exception Group Traceback")):
            # Python's (3.11+) exception group: each nested traceback drawn behind `  | ` (two spaces a level), its
            # header behind `  + ` (asyncio / anyio task groups: Starlette under SGLang's and vLLM's HTTP servers,
            # sgl-project/sglang#19514); a Markdown table row indented in a list ends with its `|` and is kept
            text = body[2:]
            first = text[:1]
        elif body[:2] == "+-" and (len(text) - len(body)) % 2 == 0 and _GROUP_RULE.match(body):
            text = first = ""  # the group's rules between its tracebacks (`+-+---- 1 ----`, `+----`) end a message
    if first == ">":
        text = text[2:] if text[1:2] == " " else text[1:]
        first = text[:1]
    if (first in " -*+" or first.isdigit()) and "`" in text[:12]:
        # a Markdown list item quoting the line as code (`   - \`TypeError: …\``, THUDM/slime#1702)
        m = _MD_BULLET_CODE.match(text)
        if m:
            text = text[m.end() - 1:]
            first = "`"
    if first == "`" and text[1:2] != "`":  # Markdown's inline code around a pasted line (THUDM/slime#1076)
        text = text[1:]
        end = text.rstrip()
        if end.endswith("`"):
            text = end[:-1]
        first = text[:1]
    if first == "2" and text[10:11] == "T":
        m = _CRI_PREFIX.match(text) or _TIMESTAMPS_PREFIX.match(text)
        if m:
            text = text[m.end():]
    elif "| " in text[:80]:
        m = _COMPOSE_PREFIX.match(text)
        if m:
            text = text[m.end():]
    if ((first.isdigit() or first == " " or first == "[") and ": " in text[:32]) or \
            (first.isupper() and text[24:25] == "[" and "]<std" in text[24:48]):
        m = _TASK_LABEL.match(text)
        if m:
            text = text[m.end():]
    if ": " in text[:64] and (m := _PDSH_PREFIX.match(text)):
        text = text[m.end():]
    return text


def strip_bracket_timestamp(text: str) -> str:
    """A logger's bare `[YYYY-MM-DD HH:MM:SS] ` before each line, off a line a traceback reader reads
    (verl-project/verl#5558 prints every traceback line behind one). slime's own head (`[ts] file.py:12
    - `) is a log record, and SGLang's `[ts TP1] ` names the rank: both stay."""
    if text[:2] != "[2" and text[:2] != "[1":
        return text
    m = _BRACKET_TS.match(text)
    if m is None or m.group("tag").strip() or _SLIME_FMT.match(text):
        return text
    return text[m.end():]


def strip_nested_processes(text: str) -> str:
    """The processes an actor started, named after Ray's prefix: `(EngineCore_DP0 pid=2) ` (vLLM v1)."""
    while text[:1] == "(":
        m = _NESTED_PROCESS.match(text)
        if m is None:
            break
        text = text[m.end():]
    return text


def split_line(raw: str) -> _Line:
    """Strip ANSI codes, the Ray actor prefix and the format's prefix off one line."""
    if "\x1b" in raw:
        raw = _ANSI.sub("", raw)
    text = raw.rstrip("\r\n")
    text = strip_carrier(text)
    if ("m" in text[:12] or "\ufffd[" in text or "mray::" in text) and _BARE_ANSI.search(text):
        text = _BARE_ANSI.sub("", text)  # (at the start: Ray's coloured prefix; further on: Ray's task name)
    if text.endswith("cluster]"):
        text = _RAY_REPEATED.sub("", text)
    m = _FAST_SLIME.match(text)
    if m:  # the common case in one match: `(Actor pid=1) [ts] file.py:12 - message`
        tag = m.group("tag").strip()
        src = m.group("src")
        if m.group("ms") and tag:
            return _Line(text[m.end():], src or tag, _normal_ts(m.group("ts"), m.group("ms")), None, "miles")
        return _Line(text[m.end():], src, _normal_ts(m.group("ts"), m.group("ms")), None, "slime")
    source = None
    if text.startswith("("):
        m = _RAY_PREFIX.match(text)
        if m is None and text.startswith("(pid=") and text[5:6].isalpha():
            # Ray's prefix of its own system processes names the process where a worker's names its pid
            # (`(pid=gcs_server)`, `(pid=runtime_env, ip=…)`, ray-project/ray#38312): read as the process's name
            m = _RAY_PREFIX.match("(" + text[5:])
            text = "(" + text[5:] if m else text
        if m:
            source = m.group("src")
            text = strip_nested_processes(text[m.end():])
    if text.startswith("[rank") or text.startswith("[default"):
        m = _RANK_PREFIX.match(text)
        if m:
            # behind an actor's prefix the rank is the job's, which the actor's own name does not say
            # (`(WorkerDict pid=1230, ip=…) [rank15]:…`, verl-project/verl#1309)
            rank = m.group("rank") or f"rank{m.group('local')}"
            source = f"{source}, {rank}" if source else rank
            text = text[m.end():]
    first = text[:1]
    if first in "IWEF[" and _GLOG_START.match(text):
        m = _GLOG.match(text)
        if m:  # torch / NCCL C++ logging; its timestamps carry no year
            return _Line(text[m.end():], source, None, _GLOG_LEVELS[m.group("sev") or m.group("sev2") or m.group("sev3")],
                         None)
    if first == "[" and text[1:2] in "DIWEC" and ">> " in text[:64]:
        m = _HF_EXAMPLES_FMT.match(text) or _LLAMAFACTORY_FMT.match(text)
        if m:
            return _Line(text[m.end():], source, _normal_ts(m.group("ts"), m.group("ms")), m.group("level"), None)
    if first == "[" and text[1:2] in "DIWEC" and ":" in text[5:11]:
        m = _SWIFT_FMT.match(text)
        if m:
            return _Line(text[m.end():], source, None, m.group("level"), None)
    if first == "[" and text[1:6] == "NeMo ":
        m = _NEMO_FMT.match(text)
        if m:
            return _Line(text[m.end():], source, _normal_ts(m.group("ts"), None), _NEMO_LEVELS[m.group("level")], None)
    if first == "[":
        m = _SLIME_FMT.match(text)
        if m:
            tag = m.group("tag").strip()
            if m.group("ms") and tag:
                return _Line(text[m.end():], source or tag, _normal_ts(m.group("ts"), m.group("ms")), None, "miles")
            return _Line(text[m.end():], source, _normal_ts(m.group("ts"), m.group("ms")), None, "slime")
        m = _BRACKET_TS.match(text)
        if m:
            msg = text[m.end():]
            level = None
            lm = _BRACKET_LEVEL.match(msg)  # `[2026-08-10 08:14:10,137] [INFO] [axolotl...] ...`
            if lm:
                level, msg = lm.group(1), msg[lm.end():]
            return _Line(msg, source, _normal_ts(m.group("ts"), m.group("ms")), level, "sglang")
    elif first.isdigit():
        m = _RELAX_FMT.match(text)
        if m:
            # (loguru's default layout: Relax's own lines name its modules; other projects log the same way,
            # SkyRL's `skyrl_train.utils.utils:prepare_runtime_environment:523`, NovaSky-AI/SkyRL#542)
            fmt = "relax" if m.group("where").startswith("relax") else None
            return _Line(text[m.end():], source, _normal_ts(m.group("ts"), None), m.group("level"), fmt)
        m = _RAY_FMT.match(text)
        if m:
            return _Line(text[m.end():], source, _normal_ts(m.group("ts"), m.group("ms")), m.group("level"), "ray")
        m = _PYLOG_FMT.match(text)
        if m:
            return _Line(text[m.end():], source, _normal_ts(m.group("ts"), m.group("ms")), m.group("level"), None)
    elif first in "DIWEC":
        m = _PY_FMT.match(text) or _VLLM_FMT.match(text)
        if m:
            return _Line(text[m.end():], source, None, m.group("level"), None)
    return _Line(text, source, None, None, None)


class _FileScan:
    """One file, read once in chunks."""

    def __init__(self, path: Path, index: _Index, finder: _NeedleFinder) -> None:
        self.path = path
        self.where = str(path)
        self.ix = index
        self.out = index.out
        self.finder = finder
        self.lines = 0  # newlines consumed so far
        self.tracebacks: dict[str | None, _OpenTraceback] = {}
        self.ignored_at: dict[str | None, int] = {}  # per source, the line of its last `Exception ignored …`
        # a multi-line construct being read line by line: Megatron's arguments block,
        # or a command line continued with backslashes
        self.walk: str | None = None
        self.walk_source: str | None = None
        self.walk_budget = 0
        self.walk_head: tuple[int, int, str] | None = None  # a wrapped dict's first line: (line_no, marks, text)
        self.rejoining = False  # parsing a wrapped dict's joined lines (no second walk from it)
        self.walk_record: MetricRecord | None = None  # a verl step line held while its wrapped lines are read
        self.walk_message = ""  # that line from its message's first character
        self.wrap_mode = "width"  # how the held line goes on: cut at the terminal's width, or broken after its bars
        self.arguments: dict[str, str] = {}
        self.command_parts: list[str] = []
        self.tail_sample: bytes = b""  # the last bytes read, for the last timestamp
        self.head_left = SAMPLE_LINES  # head lines still to sample for the format and first timestamp
        self.grammar_counts: dict[str, int] = {}  # grammar -> records it read in this file
        # an HF Trainer record a logger printed, held until the next record says whether it repeats it,
        # and the last record the Trainer printed itself (`_hf_record`)
        self.hf_pending: tuple[MetricRecord, int] | None = None
        self.hf_last: tuple[dict[str, object], int] | None = None
        self.sniff = True  # the first chunk read is checked for binary data (not so for a later part)
        # NeMo-RL's step blocks: the step of the last header, the line the next result item must be on (the items
        # follow `Training Results:` line by line), the items read so far, and result lines before any header
        self.nemo_step: int | None = None
        self.nemo_at = -1
        self.nemo_values: dict[str, object] = {}
        self.nemo_orphans = 0

    # -- reading ---------------------------------------------------------------

    def _open(self) -> BinaryIO:
        try:
            if self.path.is_dir():
                raise CorruptArtifact(self.path, "is a directory, not a log file")
            # a FIFO, device or /proc file is refused; a sparse tail (never written) is not read
            fh, _written_end = safe_io.open_written(self.path)
        except OSError as exc:
            raise CorruptArtifact(self.path, f"cannot read log: {exc.strerror or exc}") from None
        try:
            magic = fh.read(len(notebook_stream.MAGIC) + 3)
            fh.seek(0)
        except OSError as exc:
            fh.close()
            raise CorruptArtifact(self.path, f"cannot read log: {exc.strerror or exc}") from None
        if magic[:2] == b"\x1f\x8b":
            fh.close()
            return gzip.open(self.path, "rb")  # type: ignore[return-value]
        if notebook_stream.is_notebook_stream(magic):
            self.out.notebook_output.append(self.where)
            return notebook_stream.NotebookStream(fh)  # type: ignore[return-value]
        return fh

    def _read(self, fh: BinaryIO, buf: bytearray) -> int:
        """Fill `buf` from the file; the number of bytes read, 0 at the end."""
        try:
            return fh.readinto(buf) or 0
        except EOFError:  # a .gz cut short: what was read stays, the tail is marked truncated
            self.out.truncated_tail = True
            return 0
        except (OSError, zlib.error) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise CorruptArtifact(self.path, f"cannot read log: {reason}") from None

    def _sniff(self, data: bytes) -> None:
        sample = data[:SNIFF_BYTES]
        if safe_io.holds_binary(sample, cut=len(data) > len(sample)):
            raise CorruptArtifact(self.path, "is not a text log: it contains NUL bytes (binary data)")
        sample = sample.replace(b"\x00", b"")  # (zero-filled stretches: safe_io.holds_binary)
        if not sample:
            return
        bad = sample.decode("utf-8", "replace").count("\ufffd")
        if bad > len(sample) * 0.3:
            share = round(100 * bad / len(sample))
            raise CorruptArtifact(
                self.path, f"is not a text log: {share}% of its first {SNIFF_BYTES >> 10} KB is not UTF-8 text")

    def run(self) -> None:
        """The whole file in one pass."""
        self.out.files.append(self.where)
        with self._open() as fh:
            self.read_to(fh, None)
        self.end_of_file()
        self.account()

    def read_to(self, fh: BinaryIO, stop: int | None) -> None:
        """Scan from the file's offset up to byte `stop` (None: to its end).

        A stop short of the end must sit right after a newline (a part's cut,
        `triage.formats.log_parts`): the part then ends on a whole line, as if the
        next part followed in the same pass.
        """
        out = self.out
        # One buffer for the whole file: memory stays the same whatever the log's size.
        size = CHUNK_BYTES if isinstance(fh, (gzip.GzipFile, notebook_stream.NotebookStream)) \
            else os.fstat(fh.fileno()).st_size - fh.tell() + 1
        data = bytearray(max(1, min(CHUNK_BYTES, size)))
        left = None if stop is None else stop - fh.tell()  # bytes still to read before `stop`
        carry = b""  # the start of a line that continues in the next chunk
        skipping = False  # inside a line longer than MAX_LINE_BYTES
        while True:
            if left is None or left >= len(data):
                end = self._read(fh, data)
            elif left > 0:
                with memoryview(data) as view:
                    end = self._read(fh, view[:left])
            else:  # at `stop`
                if skipping or carry:  # a cut that was not at a line end: never made so
                    raise ValueError(f"{self.where}: part ends inside a line at byte {stop}")
                return
            if not end:
                break
            if left is not None:
                left -= end
            out.bytes += end
            if self.sniff:
                self._sniff(bytes(data[:min(end, SNIFF_BYTES)]))
                self.sniff = False
            start = 0
            if skipping:
                nl = data.find(b"\n", 0, end)
                if nl < 0:
                    continue
                skipping = False
                self.lines += 1
                start = nl + 1
            elif carry:
                nl = data.find(b"\n", 0, end)
                if nl < 0:
                    if len(carry) + end > MAX_LINE_BYTES:
                        skipping, carry = True, b""
                        out.skipped_long_lines += 1
                    else:
                        carry += data[:end]
                    continue
                line = carry + data[: nl + 1]
                carry = b""
                if len(line) > MAX_LINE_BYTES + 1:
                    out.skipped_long_lines += 1
                    self.lines += 1
                else:
                    self._block(line, 0, len(line))
                start = nl + 1
            last_nl = data.rfind(b"\n", start, end)
            if last_nl < 0:
                if end - start > MAX_LINE_BYTES:
                    skipping = True
                    out.skipped_long_lines += 1
                else:
                    carry = bytes(data[start:end])
                continue
            self._block(data, start, last_nl + 1)
            if end - (last_nl + 1) > MAX_LINE_BYTES:
                skipping = True
                out.skipped_long_lines += 1
            elif last_nl + 1 < end:
                carry = bytes(data[last_nl + 1:end])
        if skipping:
            out.truncated_tail = True
            self.lines += 1
        elif carry:
            out.truncated_tail = True
            self._block(carry, 0, len(carry))  # counts and parses the unterminated last line

    def end_of_file(self) -> None:
        """What only the end of the file settles: the last timestamp, open tracebacks and blocks."""
        self.flush_hf_pending()
        self.flush_nemo()
        self._sample_tail()
        self._close_all_tracebacks()
        if self.walk == "dict" and self.walk_head is not None and self._salvage_cut_dict():
            return
        self._end_walk()

    def _salvage_cut_dict(self) -> bool:
        """A metric dict the file ends inside (a paste cut mid-record: modelscope/ms-swift#4800's
        `{"loss": 0.0054, …, "kl": 0.5355, … "epo`): its whole `key: value` items are read, up to the last
        separator before the cut, as the record; when nothing whole is left, it is one unparsed line. True:
        the walk is closed either way."""
        head = self.walk_head
        assert head is not None
        joined = "".join(self.command_parts).rstrip()
        self.walk, self.walk_head, self.command_parts = None, None, []
        for _ in range(3):  # the item before the cut may itself be cut (a string value): step back
            cut = max(joined.rfind(", '"), joined.rfind(', "'))
            if cut <= joined.find("{"):
                break
            joined = joined[:cut]
            self.rejoining = True
            out = self.out
            unparsed, samples = out.unparsed_metric_lines, len(out.unparsed_samples)
            try:
                self._line(joined + "}", head[0], head[1])
            finally:
                self.rejoining = False
            if out.unparsed_metric_lines == unparsed:
                return True
            out.unparsed_metric_lines = unparsed  # (a failed try is not a line of its own)
            del out.unparsed_samples[samples:]
        self._unparsed(head[2])
        return True

    def account(self) -> None:
        self.out.lines += self.lines
        self.out.parsed_by[self.where] = dict(self.grammar_counts)
        tail = self.tail_sample
        blank = tail[len(tail.rstrip()):].count(b"\n") - (1 if tail.endswith(b"\n") else 0)
        self.out.last_lines[self.where] = self.lines - max(blank, 0)

    # -- per chunk -------------------------------------------------------------

    def _block(self, data: bytes | bytearray, start: int, end: int) -> None:
        """Parse the marked lines of data[start:end], which ends at a line end (or at EOF).

        Searched a window of about WINDOW_BYTES at a time, so that even a stretch dense
        with markers yields a bounded list of hits; a line over MAX_LINE_BYTES is
        counted and stepped over without being searched.
        """
        if self.head_left > 0:
            self._sample_head(data, start, end)
        tail = bytes(data[max(start, end - SNIFF_BYTES):end])
        self.tail_sample = tail if len(tail) >= SNIFF_BYTES else (self.tail_sample + tail)[-SNIFF_BYTES:]
        w = start
        while w < end:
            we = w + WINDOW_BYTES
            if we >= end:
                we = end
            else:
                nl = data.rfind(b"\n", w, we)
                if nl >= 0:
                    we = nl + 1
                else:  # the line at `w` is longer than a window
                    nl = data.find(b"\n", we, end)
                    we = end if nl < 0 else nl + 1
                    if we - w > MAX_LINE_BYTES + 1:
                        self.out.skipped_long_lines += 1
                        self.lines += 1
                        w = we
                        continue
            self._window(data, w, we)
            w = we

    def _window(self, data: bytes | bytearray, start: int, end: int) -> None:
        hits = self.finder.hits(data, start, end)
        n = len(hits)
        i = 0
        pos = start  # a line start; newlines before it are in `line_no`
        line_no = self.lines
        if self.walk is not None:
            pos, line_no, i = self._walk_lines(data, start, pos, end, line_no, hits, i)
        while i < n:
            k, p, _ = hits[i]
            p += start
            i += 1
            if p < pos:
                continue
            ls = data.rfind(b"\n", pos, p) + 1 or pos
            if ls < pos:
                ls = pos
            le = data.find(b"\n", p, end)
            if le < 0:
                le = end
            marks = _MARK_OF[k]
            while i < n and hits[i][1] + start < le:
                marks |= _MARK_OF[hits[i][0]]
                i += 1
            line_no += data.count(b"\n", pos, ls) + 1
            pos = le + 1
            # (True: the line continued an open traceback, whose unmarked lines under it are read too; a return
            # value, not an attribute set on every line, which cost 5% of the scan)
            if self._line(data[ls:le].decode("utf-8", "replace"), line_no, marks) and self.walk is None:
                pos, line_no = self._traceback_lines(data, pos, end, line_no, hits[i][1] + start if i < n else end)
            if self.walk is not None:
                pos, line_no, i = self._walk_lines(data, start, pos, end, line_no, hits, i)
        if pos < end:  # (pos > end: the last line had no newline and was counted already)
            line_no += data.count(b"\n", pos, end)
            if data[end - 1] != 0x0A:
                line_no += 1  # an unterminated last line is a line too
        self.lines = line_no

    def _traceback_lines(self, data: bytes | bytearray, pos: int, end: int, line_no: int,
                         next_hit: int) -> tuple[int, int]:
        """The unmarked lines under a traceback line, read while they go on with it: its code lines and an
        exception line whose words hold no error word (`torch._dynamo.exc.FailOnRecompileLimitHit: …`,
        pytorch/pytorch#163329; `torch._dynamo.exc.Unsupported: …`), which the markers alone would skip. A
        marked line (at `next_hit` or after) is left to the main loop."""
        budget = MAX_TRACEBACK_WALK
        going_on = True
        while going_on and pos < end and budget > 0:
            le = data.find(b"\n", pos, end)
            if le < 0:
                le = end
            if next_hit <= le:
                break
            raw = data[pos:le].decode("utf-8", "replace")
            text = split_line(raw).text
            # (only what a traceback holds: an indented code or caret line, or an exception line as Python prints
            # one, a builtin's name or a module's class; a blank line is passed over and anything else, `Environment:
            # Ubuntu 22.04` under a cut traceback, is left unread, as the markers left it)
            if text.strip() and text[:1] not in (" ", "\t") and not _PRINTED_EXCEPTION.match(text.strip()):
                break
            budget -= 1
            line_no += 1
            pos = le + 1
            if text.strip():
                going_on = bool(self._line(raw, line_no, 0))
        return pos, line_no

    def _walk_lines(self, data: bytes | bytearray, start: int, pos: int, end: int, line_no: int,
                    hits: list[tuple[int, int, int]], i: int) -> tuple[int, int, int]:
        """Feed lines one by one to the open multi-line construct until it ends."""
        n = len(hits)
        while self.walk is not None and pos < end:
            le = data.find(b"\n", pos, end)
            if le < 0:
                le = end
            marks = 0
            while i < n and hits[i][1] + start < le:
                if hits[i][1] + start >= pos:
                    marks |= _MARK_OF[hits[i][0]]
                i += 1
            line_no += 1
            raw = data[pos:le].decode("utf-8", "replace")
            if not self._walk_feed(raw, marks) and marks:
                self._line(raw, line_no, marks)
            pos = le + 1
        return pos, line_no, i

    # -- per line ----------------------------------------------------------------

    def _logline(self, line: _Line, line_no: int, tag: str | None = None, text: str | None = None) -> LogLine:
        return LogLine(self.where, line_no, _cap((line.text if text is None else text).strip()), line.source,
                       line.timestamp, line.level, tag)

    def _line(self, raw: str, line_no: int, marks: int) -> bool | None:
        """Parse one marked line; `marks` says which kinds of marker it holds. True when the line opened or
        continued a traceback that is still open (the unmarked lines under it are its too)."""
        timer_done = False
        ix = self.ix
        if "\x1b" not in raw:  # fast paths for the lines every step prints, in slime / miles format
            if marks & _METRIC_MARK:
                m = _FAST_METRIC.match(raw)
                if m:
                    ts, ms, tag = m.group("ts", "ms", "tag")
                    ix.votes["miles" if ms and tag else "slime"] += 1
                    ix.timestamp(_normal_ts(ts, ms))
                    if not self._metric(m):
                        self._wrapped_or_unparsed(raw, m.group(0), line_no, marks)
                    return
            elif marks == _OTHER_MARK:
                if "Finish rollout: " in raw:
                    ix.finish.add((self.where, line_no, raw))  # made a LogLine only if kept
                    return
                if "Timer " in raw:
                    m = _FAST_TIMER.match(raw)
                    if m:
                        src, ts, ms, tag, msg, name, what, seconds = m.group(
                            "src", "ts", "ms", "tag", "msg", "name", "what", "s")
                        miles = bool(ms and tag)
                        ts = _normal_ts(ts, ms)
                        ix.votes["miles" if miles else "slime"] += 1
                        ix.timestamp(ts)
                        self._timer(name, what, seconds)
                        if not self.tracebacks:
                            # `Timer update_weights start` marks a weight update; a start line's message
                            # repeats every step, so its answer is kept
                            note = _timer_note(msg) if seconds is None else _timer_note(msg, name)
                            if note is not None:
                                source = src or (tag.strip() if miles else None)
                                line = _Line(msg, source, ts, None, "miles" if miles else "slime")
                                self._note(note, line, line_no)
                            return
                        timer_done = True
        if marks == _METRIC_MARK and not _first_dict_after_head(raw):
            return  # a dict after a number, but not after `step N` (say `{'gpu': 0: {...}}`)
        line = split_line(raw)
        if line.fmt is not None and line.fmt in ix.votes:
            ix.votes[line.fmt] += 1
        if line.timestamp is not None:
            ix.timestamp(line.timestamp)
        msg = line.text

        if marks & _METRIC_MARK and ": {" in msg:
            m = _METRIC.match(msg)
            if m is None and (head := _BARE_SLIME_HEAD.match(msg)):
                m = _METRIC.match(msg, head.end())  # slime's record with its time trimmed off the paste
            if m:
                if line.fmt is None:
                    ix.votes["bare_metrics"] += 1
                if not self._metric(m):
                    self._wrapped_or_unparsed(raw, m.group(0), line_no, marks)
                return
        if self.nemo_values and line_no > self.nemo_at:
            self.flush_nemo()  # the step's result items ended on the line before
        if marks & _NEMO_MARK and self._nemo(msg, line_no):
            return
        if marks & _FW_MARK and self._framework_metric(msg, raw, line_no, marks,
                                                          line.fmt is not None or line.level is not None):
            return
        if marks & _OTHER_MARK:
            if msg.startswith("Finish rollout:") or "Finish rollout: " in msg:
                ix.finish.add((self.where, line_no, raw))
                return
            if " arguments -" in msg and _ARGS_BEGIN.search(msg):
                self._start_walk("arguments", line.source)
                return
            if "python" in msg and self._command(msg, line):
                if marks & _ERROR_MARK and _SHELL_JOB_REPORT.search(msg):
                    self._error(line, line_no)  # bash's report of a job a signal ended quotes its command
                return
        if self._traceback(line, line_no):
            return line.source in self.tracebacks
        if marks & _OTHER_MARK:
            self._signals(line, line_no, timer_done)
        if marks & _ERROR_MARK or line.level in ("ERROR", "CRITICAL"):
            self._error(line, line_no)

    def _metric(self, m: re.Match[str]) -> bool:
        """Record a slime metric line; False when its dict does not parse (the caller decides what it was)."""
        kind, n, text = m.group("kind", "n", "dict")
        try:
            record = parse_metric_record(text)
        except ValueError:
            return False
        if len(n) > 18:  # past int64 it is not a step (the metric table indexes by int64)
            self._unparsed(m.group(0))
            return True
        self.out.metrics.add(kind, int(n), record)
        counts = self.grammar_counts
        counts["slime_dict"] = counts.get("slime_dict", 0) + 1
        return True

    def _wrapped_or_unparsed(self, raw: str, text: str, line_no: int, marks: int) -> None:
        """A metric line whose dict did not parse. When the line opens a dict it does not close, a
        terminal may have wrapped it onto the next lines (a console pasted into an issue): those are
        joined to it (`_walk_feed`); otherwise, or when they do not close it, it is an unparsed line."""
        line = raw.rstrip("\r\n")
        if not self.rejoining and "{" in line and not line.rstrip().endswith("}") and len(line) < MAX_WRAPPED_DICT_CHARS:
            self._start_walk("dict", None)
            self.command_parts = [line]
            self.walk_head = (line_no, marks, text)
            return
        self._unparsed(text)

    def _unparsed(self, text: str) -> None:
        out = self.out
        out.unparsed_metric_lines += 1
        if len(out.unparsed_samples) < MAX_UNPARSED_SAMPLES:
            out.unparsed_samples.append(f"{self.where}: {_cap(text.strip())[:300]}")

    def _framework_metric(self, msg: str, raw: str, line_no: int, marks: int, logged: bool = False) -> bool:
        """A verl / HF Trainer / ms-swift / OpenRLHF metric line; True when the line was one. `logged`:
        the line came through a logger's prefix (see `_hf_record`)."""
        try:
            rec = parse_framework_metric(msg)
        except Unparsed:
            line = raw.rstrip("\r\n")
            if self.walk is None and not self.rejoining and line.rstrip().endswith("|") and _MEGATRON_HEAD.search(msg):
                # its items are on the lines below (a record broken after its bars): read when they are joined
                self._start_walk("record_wrap", None)
                self.wrap_mode = "bar"
                self.command_parts = [line]
                self.walk_record = None
                at = line.find(msg[:40])
                self.walk_message = line[at:] if at >= 0 else msg
                return True
            self._wrapped_or_unparsed(raw, msg, line_no, marks)
            return True
        if rec is None:
            return False
        # (a progress bar's postfix is every tqdm loop's: it names OpenRLHF only under OpenRLHF's own bar titles, not
        # a LoRA trainer's `steps:  10%|…| 780/7800 [05:04<45:36,  2.57it/s, loss=0.117]`, Akegarasu/lora-scripts#107)
        self._count_grammar(rec, vote=rec.grammar != "tqdm_postfix" or _OPENRLHF_BAR.search(msg) is not None)
        if rec.kind == "hf_log" and rec.index is None:
            brace = msg.find("{")
            self._hf_record(rec, line_no, logged or _LOGGER_BEFORE_DICT.search(msg, 0, max(brace, 0)) is not None)
            return True
        if self.walk is None and not self.rejoining:
            line = raw.rstrip("\r\n")
            mode = ("width" if rec.grammar == "verl_console" and len(line) >= MIN_WRAP_WIDTH else
                    "bar" if rec.grammar in ("megatron_log", "megatron_swift") and line.rstrip().endswith("|") else None)
            if mode is not None:
                self._start_walk("record_wrap", None)
                self.wrap_mode = mode
                self.command_parts = [line]
                self.walk_record = rec
                at = line.find(msg[:40])
                self.walk_message = line[at:] if at >= 0 else msg
                return True
        self._add_record(rec)
        return True

    def _count_grammar(self, rec: MetricRecord, vote: bool = True) -> None:
        """A record of a framework's grammar read: counted for the coverage, and a vote for its framework."""
        self.grammar_counts[rec.grammar] = self.grammar_counts.get(rec.grammar, 0) + 1
        if vote:
            fw = GRAMMAR_FRAMEWORK[rec.grammar]
            self.ix.foreign_votes[fw] = self.ix.foreign_votes.get(fw, 0) + 1

    def _add_record(self, rec: MetricRecord) -> None:
        ix = self.ix
        index = rec.index
        if index is None:
            index = ix.ordinals[rec.kind] = ix.ordinals.get(rec.kind, 0) + 1
        self.out.metrics.add(rec.kind, index, rec.values)

    def _hf_record(self, rec: MetricRecord, line_no: int, logged: bool) -> None:
        """An HF Trainer step record, once. A callback that logs the Trainer's record again through a logger
        (LLaMA-Factory's LogCallback: `[INFO|ts] llamafactory.train.callbacks:157 >> {'loss': 0.0000, …}`
        beside the Trainer's own `{'loss': 0.0, 'grad_norm': nan, …}`, hiyouga/LlamaFactory#6286, #2810)
        printed one step twice, which numbered every step twice. A logged record is held until the next
        one: a record printed within ECHO_LINES of it whose keys include its own and whose values agree
        to its rounding makes it the echo, and it is dropped; otherwise it is a step of its own."""
        pending = self.hf_pending
        if logged:
            last = self.hf_last
            if last is not None and line_no - last[1] <= ECHO_LINES and _echoes(rec.values, last[0]):
                return  # the echo after the Trainer's own line
            self.flush_hf_pending()
            self.hf_pending = (rec, line_no)
            return
        if pending is not None and line_no - pending[1] <= ECHO_LINES and _echoes(pending[0].values, rec.values):
            self.hf_pending = None
        else:
            self.flush_hf_pending()
        self._add_record(rec)
        self.hf_last = (rec.values, line_no)

    def _nemo(self, msg: str, line_no: int) -> bool:
        """A line of NeMo-RL's step block (`metric_lines.nemo_rl_block`); True when it was one."""
        if line_no == self.nemo_at and "\u2022 " in msg:
            item = nemo_item(msg)
            if item is not None:
                self.nemo_values[item[0]] = item[1]
                self.nemo_at += 1
                return True
        if NEMO_RESULTS in msg and msg.strip().endswith(NEMO_RESULTS):
            self.flush_nemo()
            if self.nemo_step is None:
                self.nemo_orphans += 1  # no header yet: no step to put the results at
            else:
                self.nemo_at = line_no + 1
            return True
        if "= Step " in msg:
            step = nemo_step(msg)
            if step is not None:
                self.flush_nemo()
                self.nemo_step = step
                self.nemo_at = -1
                return True
        return False

    def flush_nemo(self) -> None:
        values = self.nemo_values
        if values and self.nemo_step is not None:
            self.nemo_values = {}
            self.nemo_at = -1
            grammar = "nemo_rl_block"
            self.grammar_counts[grammar] = self.grammar_counts.get(grammar, 0) + 1
            fw = GRAMMAR_FRAMEWORK[grammar]
            self.ix.foreign_votes[fw] = self.ix.foreign_votes.get(fw, 0) + 1
            self.out.metrics.add("nemo_rl", self.nemo_step, values)

    def flush_hf_pending(self) -> None:
        if self.hf_pending is not None:
            rec, line_no = self.hf_pending
            self.hf_pending = None
            self._add_record(rec)
            self.hf_last = None

    def _signals(self, line: _Line, line_no: int, timer_done: bool = False) -> None:
        """Timers, placement-group waits, notable lines."""
        msg = line.text
        ix = self.ix
        if "Timer " in msg and not timer_done:
            m = _TIMER.search(msg)
            if m:
                self._timer(*m.group("name", "what", "s"))
        if "Waiting for placement group" in msg:
            m = _PLACEMENT.search(msg)
            if m:
                ix.waits.append(PlacementGroupWait(
                    self._logline(line, line_no), int(m.group("need")), float(m.group("s")),
                    int(float(m.group("reg"))), int(float(m.group("avail")))))
        tag = _notable_tag(msg)
        if tag is not None:
            self._note(tag, line, line_no)

    def _note(self, tag: str, line: _Line, line_no: int) -> None:
        ix = self.ix
        if tag in ("rollout_progress", "train_progress"):
            ix.votes["relax"] += 1
        ix.seq += 1
        ix.notable[tag].add((ix.seq, self.where, line_no, line.text, line.source, line.timestamp, line.level, tag))

    def _error(self, line: _Line, line_no: int) -> None:
        msg = line.text
        if line.level in ("ERROR", "CRITICAL") or _ERROR_RE.search(msg):
            if "NCCL INFO" in msg and not _ERROR_RE.search(msg.replace("NCCL", "")) and not _last_retry(msg):
                return  # NCCL_DEBUG=INFO chatter
            self.ix.errors.add(self._logline(line, line_no))

    def _timer(self, name: str, what: str, seconds: str | None) -> None:
        ix = self.ix
        timer_open = ix.timer_open
        stats = self.out.timers.get(name)
        if stats is None:
            if len(self.out.timers) >= MAX_TIMERS:
                ix.timers_refused = True
                return
            stats = self.out.timers[name] = TimerStats()
            timer_open[name] = 0
        if what == "start":
            timer_open[name] += 1
            return
        if timer_open[name] > 0:
            timer_open[name] -= 1
        else:
            ix.timer_unmatched[name] = ix.timer_unmatched.get(name, 0) + 1
        if seconds is None:
            return
        try:
            elapsed = float(seconds)
        except ValueError:
            return
        stats.count += 1
        stats.total_s += elapsed
        stats.last_s = elapsed
        if elapsed > stats.max_s:
            stats.max_s = elapsed
        if ix.timer_elapsed is not None:
            ix.timer_elapsed.setdefault(name, array("d")).append(elapsed)

    # -- tracebacks ------------------------------------------------------------------

    def _traceback(self, line: _Line, line_no: int) -> bool:
        """Track tracebacks per source; True when the line was a traceback body line."""
        msg = line.text
        key = line.source
        if msg.startswith("Traceback (most recent call last)"):
            if key in self.tracebacks:
                self._close_traceback(key, "")
            ignored = self.ignored_at.get(key) == line_no - 1
            if len(self.tracebacks) < MAX_OPEN_TRACEBACKS:
                self.tracebacks[key] = _OpenTraceback(line_no, key, ignored=ignored)
            if not ignored:
                self.ix.errors.add(self._logline(line, line_no))
            return True
        if msg.startswith("Exception ignored "):  # sys.unraisablehook's header (huggingface/open-r1#658)
            self.ignored_at[key] = line_no
            return True
        tb = self.tracebacks.get(key)
        if tb is None:
            stripped = msg.lstrip()
            if stripped.startswith('File "') and _FRAME_HEAD.match(stripped) \
                    and len(self.tracebacks) < MAX_OPEN_TRACEBACKS:
                # a traceback whose header was cut off (a paste) or reworded: its first frame opens it
                # (OpenRLHF/OpenRLHF#271, NVIDIA/Megatron-LM#1301: frames pasted without header or exception)
                tb = self.tracebacks[key] = _OpenTraceback(line_no, key, frame_indent=len(msg) - len(stripped))
                tb.add_frame(stripped.rstrip())
                tb.code_next = msg[:1] == "F"
                return True
            return False
        if slurm_launcher_line(msg):
            return False  # its own line; the traceback goes on
        code_next, tb.code_next = tb.code_next, False
        if msg[:1] in (" ", "\t") or msg.startswith('File "'):
            stripped = msg.strip()
            if stripped.startswith('File "'):
                if not tb.head:
                    tb.frame_indent = len(msg) - len(msg.lstrip())
                tb.add_frame(stripped)
                tb.code_next = msg[:1] == "F"
                return True
            indent = len(msg) - len(msg.lstrip())
            shifted = tb.frame_indent == 0 and TYPED_EXCEPTION.match(stripped)
            # (less indented than the code line above it and named like an exception: the exception line of a
            # logger that indents the whole traceback, vLLM's worker `multiproc_worker_utils.py:240]   Type: …`
            # at the frames' indentation, vllm-project/vllm#12526; the reader's rule in tracebacks.py)
            under_code = tb.code_indent is not None and indent < tb.code_indent and TYPED_EXCEPTION.match(stripped)
            if not under_code and ((indent >= tb.frame_indent and not shifted)
                                   or not exception_line(stripped) or line.fmt is not None):
                if tb.head and stripped.strip("^~"):
                    tb.code_indent = indent
                return True  # a code line or a caret marker: part of the traceback, not a log message
            # (under frames that lost their indentation, an exception named like one, with its message, is the
            # exception line even indented: verl-project/verl#7610, the frame at 0 spaces, its code at 6, the
            # exception at 2; a code line is never `SomeError: words`)
            # less indented than the frames: the exception line of a traceback pasted with every line
            # shifted (verl-project/verl#4676: frames at 3 spaces, the exception at 1)
            self._close_traceback(key, stripped)
            return False
        if code_next and not _CLASS_TYPE.match(msg):
            # the code line under an unindented frame, unindented too: `self.comm: ncclComm_t = …` reads like
            # `name: message` (sgl-project/sglang#8974); an exception's type is a class, its last name capitalised
            return True
        if exception_line(msg) and line.fmt is None:
            self._close_traceback(key, msg.strip())
            return tb.ignored  # the exception line is an error line too, unless the process went on from it
        if tb.head:
            self._close_traceback(key, "")  # the traceback ended on a line the scan did not see
        return False

    def _close_traceback(self, key: str | None, exception: str) -> None:
        tb = self.tracebacks.pop(key, None)
        if tb is not None and not tb.ignored:
            self.ix.tracebacks.add(Traceback(self.where, tb.line_no, tb.frames(), _cap(exception), tb.source))

    def _close_all_tracebacks(self) -> None:
        for key in list(self.tracebacks):
            self._close_traceback(key, "")

    # -- multi-line constructs -------------------------------------------------------

    def _start_walk(self, kind: str, source: str | None) -> None:
        self.walk = kind
        self.walk_source = source
        if kind == "arguments":
            self.arguments = {}
            self.walk_budget = MAX_ARGUMENT_LINES
        elif kind == "dict":
            self.walk_budget = MAX_WRAPPED_DICT_LINES
        else:
            self.walk_budget = MAX_CONTINUATION_LINES

    def _walk_feed(self, raw: str, marks: int = 0) -> bool:
        """One line of an open arguments block / continued command / wrapped dict; False when it is not part of it."""
        if self.walk == "dict":
            return self._dict_feed(raw, marks)
        if self.walk == "record_wrap":
            return self._wrap_feed(raw, marks)
        line = split_line(raw)
        if line.source != self.walk_source:
            return False
        self.walk_budget -= 1
        msg = line.text
        if self.walk == "arguments":
            m = _ARG_LINE.match(msg)
            if m:
                self.arguments[m.group("name")] = (m.group("value") or "").strip()
                if self.walk_budget <= 0:
                    self._end_walk()
                return True
            complete = bool(_ARGS_END.search(msg))
            self._end_walk()  # a block cut short still names the arguments it printed
            return complete
        # a continued command line
        text = msg.strip()
        self.command_parts.append(text.rstrip("\\").strip())
        if not text.endswith("\\") or self.walk_budget <= 0 or sum(map(len, self.command_parts)) > MAX_COMMAND_CHARS:
            self._end_walk()
        return True

    def _dict_feed(self, raw: str, marks: int) -> bool:
        """One line a wrapped metric dict may continue on. A blank line, a new record (`{`), an error
        or traceback line, or running past the caps ends it unparsed, and the line is read as itself."""
        text = raw.rstrip("\r\n")
        stripped = text.strip()
        if (not stripped or stripped.startswith("{") or marks & (_ERROR_MARK | _TRACE_MARK) or self.walk_budget <= 0
                or sum(map(len, self.command_parts)) + len(text) > MAX_WRAPPED_DICT_CHARS):
            self._end_walk()
            return False
        self.walk_budget -= 1
        self.command_parts.append(text)
        if stripped.endswith("}"):
            head = self.walk_head
            joined = "".join(self.command_parts)
            self.walk, self.walk_head, self.command_parts = None, None, []
            assert head is not None
            self.rejoining = True
            try:
                self._line(joined, head[0], head[1])
            finally:
                self.rejoining = False
        return True

    def _wrap_feed(self, raw: str, marks: int) -> bool:
        """One physical line a record may go on in. A verl step line a terminal wrapped (`width`): as wide as its
        first line (the last one narrower), holding ` - key:value` items and no record or prefix of its own. A
        Megatron line broken after a bar (`bar`): `key: value` items, no iteration of its own, going on while the
        line before ended on a bar."""
        text = raw.rstrip("\r\n")
        if self.wrap_mode == "bar":
            if (not self.command_parts[-1].rstrip().endswith("|") or marks & _TRACE_MARK
                    or _BAR_WRAP_ITEMS.match(text) is None or _ITERATION_AGAIN.match(text)):
                self._end_walk()
                return False
            self.command_parts.append(" " + text.strip())
            if not text.rstrip().endswith("|") or len(self.command_parts) > MAX_WRAPPED_DICT_LINES:
                self._end_walk()
            return True
        width = len(self.command_parts[0])
        if len(text) < width and _WRAP_TAIL.match(text) and not marks & (_ERROR_MARK | _TRACE_MARK):
            self.command_parts.append(text)  # the tail of the last item, cut off alone (`:0.0123`)
            self._end_walk()
            return True
        if (len(text) > width or marks & (_ERROR_MARK | _TRACE_MARK) or _VERL_WRAP_ITEMS.search(text) is None
                or _VERL_STEP_AGAIN.search(text)):
            self._end_walk()
            return False
        self.command_parts.append(text)
        if len(text) < width or len(self.command_parts) > MAX_WRAPPED_DICT_LINES:
            self._end_walk()
        return True

    def _end_wrap(self) -> None:
        rec = self.walk_record
        self.walk_record = None
        joined = None
        if len(self.command_parts) > 1:
            try:
                joined = parse_framework_metric(self.walk_message + "".join(self.command_parts[1:]))
            except Unparsed:
                joined = None
        if rec is None:  # a head line that held no item of its own
            if joined is None:
                self._unparsed(self.walk_message)
                return
            rec = joined
            self._count_grammar(rec)
        elif (joined is not None and joined.grammar == rec.grammar and joined.index == rec.index
              and len(joined.values) >= len(rec.values)):  # (a line taken for the tail that was none spoils an item)
            rec = joined
        self._add_record(rec)

    def _end_walk(self) -> None:
        if self.walk == "record_wrap":
            self._end_wrap()
        if self.walk == "arguments" and self.arguments:
            self.out.arguments = dict(self.arguments)  # the last block wins: the run that failed
        elif self.walk == "command" and self.command_parts:
            self.out.command_line = " ".join(p for p in self.command_parts if p)[:MAX_COMMAND_CHARS]
        elif self.walk == "dict" and self.walk_head is not None:
            self._unparsed(self.walk_head[2])  # never closed: a dict cut off, as before
        self.walk = None
        self.walk_source = None
        self.walk_head = None
        self.arguments = {}
        self.command_parts = []

    def _command(self, msg: str, line: _Line) -> bool:
        """A training command line (`python3 train.py --actor-num-nodes 1 ...`): keep the first, prefer train*.py."""
        m = _PYTHON_CMD.search(msg)
        if m is None:
            return False
        cmd = m.group("cmd").strip()
        continued = cmd.endswith("\\")
        if " --" not in cmd and not continued and _HYDRA_OVERRIDE.search(cmd) is None:
            return False
        if m.group("module"):
            program = m.group("module").rsplit(".", 1)[-1]
        else:
            program = m.group("script").rsplit("/", 1)[-1]
        is_train = program.startswith("train")
        ix = self.ix
        ix.saw_command = True
        if self.out.command_line is not None and (ix.command_is_train or not is_train):
            return True
        ix.command_is_train = is_train
        if continued:
            self._start_walk("command", line.source)
            self.command_parts = [cmd.rstrip("\\").strip()]
        else:
            self.out.command_line = cmd[:MAX_COMMAND_CHARS]
        return True

    # -- head and tail samples ---------------------------------------------------------

    def _sample_head(self, data: bytes, pos: int, end: int) -> None:
        """The format and first timestamp from the first lines, which hold no marker as often as not."""
        while self.head_left > 0 and pos < end:
            self.head_left -= 1
            le = data.find(b"\n", pos, end)
            if le < 0:
                le = end
            if le - pos <= 4096:
                text = data[pos:le].decode("utf-8", "replace")
                line = split_line(text)
                if self.ix.head_chars < HEAD_TEXT_CHARS:
                    self.ix.head_text.append(text)
                    self.ix.head_chars += len(text)
                if line.fmt in self.ix.votes:
                    self.ix.votes[line.fmt] += 1
                if line.timestamp is not None:
                    self.ix.timestamp(line.timestamp)
            pos = le + 1

    def _sample_tail(self) -> None:
        """The last timestamp from the last lines."""
        lines = self.tail_sample.splitlines()[-SAMPLE_LINES:]
        for raw in reversed(lines):
            line = split_line(raw.decode("utf-8", "replace"))
            if line.timestamp is not None:
                self.ix.timestamp(line.timestamp)
                return


# `_notable_tag` of timer messages, remembered (a job has a few dozen timers): a start message by
# its text; an end message `Timer <name> end (elapsed: <s>s)` by its timer's name, as the tag depends
# on the name alone. The elapsed time (`[-+\\d.eE]+`, `nan`, `inf`) is always followed by `s)`, so
# no tag's pattern can end on it (`nan` / `inf` never stand as a word there), and it holds no space
# or `/` for the progress patterns.
_TIMER_NOTES: dict[tuple[str, str], str | None] = {}


def _timer_note(msg: str, name: str | None = None) -> str | None:
    """The notable tag of a timer's start message, or (`name` given) of that timer's end message."""
    key = ("end", name) if name is not None else ("start", msg)
    try:
        return _TIMER_NOTES[key]
    except KeyError:
        note = _notable_tag(msg)
        if len(_TIMER_NOTES) < 2 * MAX_TIMERS:
            _TIMER_NOTES[key] = note
        return note


def _notable_tag(msg: str) -> str | None:
    if "degrees of freedom is <= 0" in msg:  # torch's std / var over a single element
        return "std_no_dof"
    if "server_args=ServerArgs(" in msg:  # SGLang's launch line: which model the engine serves
        return "engine_launch"
    if "checkpoint" in msg or "metadata file" in msg or "start from random" in msg:
        if any(s in msg for s in _CKPT_MISSING):
            return "ckpt_not_found"
        if any(s in msg for s in _CKPT_LOADED):
            return "ckpt_loaded"
        if any(s in msg for s in _CKPT_SAVED):
            return "ckpt_saved"
    if ("NaN" in msg or "kipp" in msg or "Inf" in msg or "nan" in msg or "finite" in msg) and _NAN_SKIP.search(msg):
        return "nan_skip"
    if "rollout" in msg and _PROGRESS.search(msg):
        return "rollout_progress"
    if "step" in msg and _TRAIN_PROGRESS.search(msg):
        return "train_progress"
    if "eights" in msg and _WEIGHTS_UPDATE.search(msg):
        return "weights_update"
    if ("ffload" in msg or "release_memory" in msg) and _RELEASE.search(msg) or "Sleep mode freed" in msg:
        return "release_memory"
    if ("nload" in msg or "resume_memory" in msg or "wake_up" in msg) and _RESUME.search(msg):
        return "resume_memory"
    return None
