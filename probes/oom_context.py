"""Where a CUDA out-of-memory error happened: engine, log-prob pass, phase switch or train step.

The place decides the remedy: an SGLang engine OOM wants a smaller
`--sglang-mem-fraction-static`; an OOM at the first train/rollout switch of a
colocated run is memory not freed between phases (slime debugging guide, "second
training step"); an OOM in the log-prob pass is the logits tensor (axolotl guide);
one in the train step proper is the token budget (slime Q&A, `max_tokens_per_gpu`).

Four witnesses, most reliable first:
- slime's timers: `Timer X start` with no `end` when the job died is what was running
  (`log_probs` / `ref_log_probs` nested in `train`, `actor_train`, `update_weights`,
  `wake_up`, `sleep`, ...);
- the OOM traceback's frames (function names: `compute_log_prob`, `_get_per_token_logps`,
  `update_weights`, `backward`, SGLang's `sglang/srt/...` files);
- the last phase marker the log kept before the OOM (a weights update, a memory
  release / resume, Relax's `Actor training step i/N`);
- the printing actor (`SGLangEngine pid=…`) and the error text itself.

Before any of them: memory that is not returned across release/resume cycles. slime
prints the GPU's memory at each offload / wake-up (`[Rank 0] Memory-Usage after offload
model: {... 'used_GB': 21.4 ...}`, slime/utils/memory_utils.py `print_memory`) and verl
at each offload (`After offload actor model during update_actor, memory allocated (GB):
…, device memory used/total (GB): 21.4/79.1`, verl/utils/debug/performance.py). When the
same phase's usage rises cycle after cycle and the OOM comes several rollouts in, it is a
release leak (THUDM/slime#1022), not a first phase switch.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from probes.error_signatures import SignatureMatch, quote, scan
from triage.errors import TriageError, Unavailable
from triage.finding import Observation
from triage.formats.log_index import LogLine
from triage.formats.slime_log import split_line
from triage.probe import Cost, Probe
from triage.thresholds import count, threshold

if TYPE_CHECKING:
    from triage.run.run import Run

LOGPROB_TIMERS = ("log_probs", "ref_log_probs", "compute_log_prob", "compute_ref_log_prob", "actor_log_probs")
TRAIN_TIMERS = ("actor_train", "train_step", "critic_train")
SWITCH_TIMERS = ("update_weights", "wake_up", "sleep", "onload", "offload", "onload_weights", "ref_model_update")

# vLLM's engine processes as their prefixes name them: V1's engine core and its GPU workers
# (`(EngineCore pid=112)`, `(VllmWorker rank=7 pid=240)`: v1/engine/core.py, v1/executor/multiproc_executor.py),
# its Ray workers (`RayWorkerWrapper`) and OpenRLHF's actor holding one (`LLMRayActor`); vllm-project/vllm#18446
ENGINE_SOURCE = re.compile(r"sglang|SGLang|Scheduler|TpModelWorker|DetokenizerManager|EngineCore|VllmWorker|"
                           r"RayWorkerWrapper|LLMRayActor", re.I)
# (vLLM's sleep-mode allocator, csrc/cumem_allocator.cpp, failing when a colocated engine wakes up: modelscope/ms-swift#7324)
# (vLLM's sampler warm-up at start, v1/worker/gpu_worker.py: `CUDA out of memory occurred when warming up sampler
# with 1024 dummy requests`, vllm-project/vllm#14452; its engine loop dead of an OOM, vllm-project/vllm#15039)
ENGINE_TEXT = re.compile(r"mem[-_]fraction[-_]static|Scheduler hit an exception|KV cache|Prefill out of memory|"
                         r"Decode out of memory|cumem_allocator|warming up sampler|EngineDeadError")
ENGINE_FRAME = re.compile(r"sglang/srt/|sglang\\srt\\|vllm/(?:v1|worker|engine|model_executor)/")
# An engine that finds no memory left for its KV cache once its weights are loaded refuses to start,
# and says which way its memory fraction must go: up (SGLang model_runner.py init_memory_pool, vLLM
# v1 kv_cache_utils.py). The catalog's remedy for an engine OOM (lower the fraction, so that training
# keeps its share) is the other way: the finding names the engine's own (sgl-project/sglang#4330).
KV_NO_ROOM = {
    re.compile(r"Not enough memory\. Please try to increase --mem-fraction-static"): (
        "SGLang found no GPU memory left for its KV cache after loading the weights, and asks for a larger "
        "memory fraction: raise it where the GPU has room (SGLang's --mem-fraction-static: slime's "
        "--sglang-mem-fraction-static, verl's actor_rollout_ref.rollout.gpu_memory_utilization; in a colocated "
        "run the trainer's share bounds it), or spread the model over more GPUs per engine (tensor parallel: "
        "slime's --rollout-num-gpus-per-engine).",
        ["--sglang-mem-fraction-static"]),
    # (a vLLM engine has none of slime's flags)
    re.compile(r"No available memory for the cache blocks"): (
        "vLLM found no GPU memory left for its KV cache blocks after loading the weights: raise its "
        "gpu_memory_utilization where the GPU has room (in a colocated run the trainer's share bounds it), or "
        "spread the model over more GPUs (tensor_parallel_size).",
        []),
    # vLLM's KV cache too small for one sequence of max_model_len (V0 worker.py raise_if_cache_size_invalid, V1
    # kv_cache_utils.py _check_enough_kv_cache_memory: "Try increasing gpu_memory_utilization or decreasing
    # max_model_len"; vllm-project/vllm#10517, basalam/product-catalog-generator#10)
    re.compile(r"stored in KV cache|larger than the available KV cache memory|To serve at least one request with the "
               r"models?'s max seq len"): (
        "vLLM's KV cache, sized from its memory share once the weights are loaded, cannot hold one sequence of its "
        "max_model_len: lower max_model_len to what the prompts and responses need, raise gpu_memory_utilization "
        "where the GPU has room (in a colocated run the trainer's share bounds it), or spread the model over more "
        "GPUs (tensor_parallel_size).",
        []),
}
# SGLang's KV-cache pool full at run time: its scheduler admitted a batch whose tokens the pool could not then
# allocate (python/sglang/srt/mem_cache/common.py, alloc_token_slots: `Prefill out of memory. Try to lower your batch
# size.` / `Decode out of memory. …`, raised). A larger memory fraction is a larger pool, so the catalog's engine
# remedy (lower it) is the wrong way; SGLang's own message asks for a smaller batch, and where the pool had the
# tokens free or evictable, its admission overcommitted (sgl-project/sglang#34676: 8,062,720 evictable tokens for
# 8,192 asked; #30743: a chunk admitted past the budget; both fixed in SGLang)
KV_POOL_FULL = re.compile(r"\b(?:Prefill|Decode) out of memory(?! happened)")
KV_POOL_FULL_REMEDY = (
    "SGLang's KV-cache pool could not hold the tokens of a batch its scheduler had admitted: lower the batch, as "
    "SGLang's message asks (--max-running-requests, --chunked-prefill-size; slime passes them as "
    "--sglang-max-running-requests, --sglang-chunked-prefill-size), or give the pool more room (raise "
    "--mem-fraction-static where the GPU has it; lowering it shrinks the pool). Where the lines under the error "
    "show the pool's free and evictable tokens covering the tokens it tried to allocate, the pool was not short: "
    "the scheduler admitted more than it could allocate, an SGLang bug fixed in later releases "
    "(sgl-project/sglang#34676, #30743): update SGLang.")


# The log-prob pass as each framework names it: slime (`compute_log_prob`,
# `calculate_log_probs_and_entropy` / `compute_log_probs` in slime/utils/ppo_utils.py), verl
# (`compute_log_prob`, `logprobs_from_logits` in verl/utils/torch_functional.py,
# `entropy_from_logits`), OpenRLHF (`log_probs_from_logits` in openrlhf/models/utils.py), TRL
# (`_get_per_token_logps*`, `selective_log_softmax` in trl/trainer/utils.py); slime's vocabulary-parallel
# softmax under them (`vocab_parallel_softmax` in slime/utils/ppo_utils.py: skypilot-org/skypilot#10269);
# NeMo-RL's policy workers (`get_logprobs`, `get_reference_policy_logprobs` in
# nemo_rl/models/policy/dtensor_policy_worker*.py: NVIDIA-NeMo/RL#3793).
LOGPROB_FRAME = re.compile(
    r"in (compute_log_probs?|compute_ref_log_prob|_get_per_token_logps\w*|get_per_token_logps\w*|get_logprobs|"
    r"get_reference_policy_logprobs|"
    r"compute_logprobs?|ref_log_probs?|_compute_log_probs?|forward_only|calculate_log_probs\w*|vocab_parallel_softmax|"
    r"logprobs_from_logits\w*|log_probs_from_logits\w*|entropy_from_logits\w*|selective_log_softmax)\b"
    r"|^\s*(?:\[rank\d+\]:\s*)?[\w, ]+=\s*(?:\w+\.)*(?:compute_log_probs?|calculate_log_probs\w*|"
    r"logprobs_from_logits|log_probs_from_logits|selective_log_softmax)\("
)
SWITCH_FRAME = re.compile(
    r"in (update_weights\w*|wake_up|sleep|onload\w*|offload\w*|resume_memory_occupation|"
    r"release_memory_occupation|resume|update_weights_from_tensor)\b|torch_memory_saver"
)
# An inference engine put to sleep and woken up by the trainer shares its GPUs with training:
# vLLM's sleep mode (`LLM.sleep` / `LLM.wake_up`, "for RLHF ... colocate"), SGLang's
# release/resume_memory_occupation, called from verl's hybrid-engine sharding managers, slime's
# and OpenRLHF's colocated paths. An OOM inside such a call is at a phase switch of a colocated
# run, whatever the arguments say or leave out (verl-project/verl#575: "CUDA oom at vllm wake_up").
COLOCATION_FRAME = re.compile(r"in (wake_up|sleep|resume_memory_occupation|release_memory_occupation)\b")
# torch_memory_saver's own error names the call that failed (`[torch_memory_saver.cpp] cudaError error: 2 (out
# of memory)  file=csrc/core.cpp func=resume line=172`): a resume re-creates the memory a colocated engine
# released for training (fzyzcjy/torch_memory_saver#99)
SAVER_RESUME = re.compile(r"torch_memory_saver.*\bfunc=resume\b")
# (verl's worker updating the actor: fsdp_workers.py / megatron_workers.py `update_actor`, and the colocated
# WorkerDict's `actor_rollout_ref_update_actor`)
TRAIN_FRAME = re.compile(r"in (train_step|train_one_step|forward_backward\w*|backward|step|training_step|compute_loss|"
                         r"update_actor|update_policy|\w+_update_actor)\b")


def _open_timers(run: Run) -> list[str]:
    """Timers started and never ended: what the process was doing when it died."""
    return sorted(name for name, t in run.log.timers.items() if t.started_not_ended > 0)


def _last_index(run: Run, kind: str) -> int | None:
    if run.log.metrics.count(kind) == 0:
        return None
    keys = run.log.metrics.keys(kind)
    last = None
    for key in keys:
        idx, _ = run.log.metrics.series(kind, key)
        if idx.size:
            last = int(idx.max()) if last is None else max(last, int(idx.max()))
    return last


# The canonical training series whose steps are train steps in every framework's records (slime's `step` records,
# verl's `step:N`, the HF Trainer's dicts, OpenRLHF's training bar)
TRAIN_SERIES = ("grad_norm", "loss", "pg_loss")
# vLLM's sleep-mode allocator (csrc/cumem_allocator.cpp): every allocation of an engine started with sleep mode, which
# the frameworks turn on to share the GPUs with training (OpenRLHF's --vllm_enable_sleep, verl's and TRL's colocated
# engines); past the engine's start it allocates only when the engine wakes up (TideDra/lmm-r1#43, after epoch 1)
SLEEP_ALLOCATOR = re.compile(r"cumem_allocator")


# An inference server started on its own, its command in the paste (`vllm serve MODEL …`, vLLM's OpenAI server module,
# SGLang's launch_server): with no training framework in the run, its OOM is the engine's (vllm-project/vllm-ascend
# #1987, #5020: `--gpu-memory-utilization 0.85` over what the card had, "set to 0.8")
ENGINE_SERVER_COMMAND = re.compile(
    r"(?m)^\s*(?:\S*python[\d.]*\s+-m\s+)?(?:vllm\s+serve\b|vllm\.entrypoints\.openai\.api_server\b|sglang\.launch_server\b)")


# SGLang's launcher reporting that one of its processes died (python/sglang/srt/entrypoints/engine.py, the SIGQUIT
# handler its scheduler and detokenizer raise on a fatal error): the server's own log (opendatalab/MinerU#3418: a
# VLM's OOM in SGLang's scheduler, "Received sigquit from a child process" under it)
SGLANG_CHILD_FAILED = re.compile(r"Received sigquit from a child process\. It usually means the child failed")


def _engine_run_alone(run: Run) -> str | None:
    """The engine of an inference server launched alone (its command, or its launcher's report of a child that
    failed, in a paste; no training framework named)."""
    if run.framework != "unknown":
        return None
    m = next((m for t in run.pastes.values() if (m := ENGINE_SERVER_COMMAND.search(t))), None)
    if m is None:
        return "SGLang" if any(SGLANG_CHILD_FAILED.search(t) for t in run.pastes.values()) else None
    return "SGLang" if "sglang" in m.group(0) else "vLLM"


def _last_train_step(run: Run) -> int | None:
    """The last train step the metrics recorded: slime's step records, else any framework's training series."""
    last = _last_index(run, "step")
    if last is not None:
        return last
    steps = [int(s.steps.max()) for name in TRAIN_SERIES if (s := run.metrics.get(name)) is not None and len(s)]
    return max(steps) if steps else None


def _colocated(run: Run) -> bool | None:
    """Whether training and inference share GPUs (`--colocate`); None when the args are unknown."""
    try:
        args = run.args
        if not args:
            return None
        value = args.get("colocate")
    except TriageError:
        return None
    if value is None:
        return False if args.has("actor_num_nodes") or args.has("rollout_num_gpus") else None
    return value is True or str(value).lower() in ("true", "1", "yes")


def _phase_from_timers(timers: list[str]) -> str | None:
    if any(t in LOGPROB_TIMERS for t in timers):
        return "logprob_pass"
    if any(t in TRAIN_TIMERS for t in timers):
        return "training_step"
    if any(t in SWITCH_TIMERS for t in timers):
        return "phase_switch"
    if "train" in timers:
        return "training_step"
    return None


# A traceback line: a frame header, a code line under it, or the caret line under the code.
_TRACEBACK_SHAPED = re.compile(r'^\s*(?:\[rank\d+\]:\s*)?(?:File "[^"]+", line \d+|\s+\S|\^+\s*$)|^\s+\^+\s*$|^[\w, .]+= \S+\(')


def adjacent_frames(run: Run, oom: SignatureMatch) -> tuple[str, ...]:
    """Frames the index did not tie to the error line, in a pasted fragment.

    Users paste a traceback from its last line up, or cut the `Traceback (most recent call
    last):` header away, so the index ties no frames to the error. In a file the size of a
    paste, the traceback-shaped lines directly below the error line are its frames (a
    bottom-up paste); failing those, the frame lines directly above it (a traceback whose
    header was cut off). A Ray actor prefix on each line is read through.
    """
    if oom.frames:
        return oom.frames
    text = run.pastes.get(str(oom.line.path))
    if text is None:  # a job's own log (larger than a paste): the index's frames are all there is
        return ()
    lines = text.splitlines()
    at = oom.line.line_no  # 1-based: lines[at] is the line below the error, lines[at - 2] the one above
    below = _traceback_run(lines[at:at + 60])
    if below:
        return tuple(reversed(below))  # bottom-up paste: the innermost frame comes first
    # the rest of torch's OOM message wrapped onto its own lines, or a blank line, before the frames a user
    # pasted under it (skypilot-org/skypilot#10269, THUDM/slime#1523)
    skip = at
    # (and the header of the traceback a native allocator's message comes before: vLLM's `CUDA Error: out of memory at
    # /workspace/csrc/cumem_allocator.cpp:62` over Python's traceback of the wake-up that asked, unslothai/unsloth#3302)
    while skip < min(at + 4, len(lines)) and (not lines[skip].strip() or _OOM_MESSAGE_REST.search(lines[skip])
                                              or lines[skip].strip() == "Traceback (most recent call last):"):
        skip += 1
    below = _traceback_run(lines[skip:skip + 60]) if skip > at else []
    if any(line.startswith('File "') for line in below):
        return tuple(reversed(below))
    above = _traceback_run(reversed(lines[max(0, at - 1 - MAX_FRAME_LINES):max(0, at - 1)]))
    if any(line.startswith('File "') for line in above):
        return tuple(reversed(above))
    return ()


def _with_message_rest(run: Run, oom: SignatureMatch) -> str:
    """The OOM line with the rest of torch's message a paste put on the lines below it (the GPU's capacity:
    skypilot-org/skypilot#10269, `Tried to allocate 3.84 GiB.` over `GPU 0 has a total capacity of 79.19 GiB …`)."""
    text = run.pastes.get(str(oom.line.path))
    if text is None:
        return ""
    lines = text.splitlines()
    at = oom.line.line_no
    rest = [line.strip() for line in lines[at:at + 3] if _OOM_MESSAGE_REST.search(line)]
    return " ".join([oom.line.text, *rest]) if rest else ""


MAX_FRAME_LINES = 200
# torch's OOM message past its first sentence (c10/cuda/CUDACachingAllocator.cpp), when a paste puts it on lines of its own
_OOM_MESSAGE_REST = re.compile(r"GPU \d+ has a total capacity|Including non-PyTorch memory|Of the allocated memory|"
                               r"If reserved but unallocated|PYTORCH_CUDA_ALLOC_CONF|Process \d+ has [\d.]+ \w+ memory in use")


def _traceback_run(lines: Iterable[str]) -> list[str]:
    """The traceback-shaped lines at the start of `lines`, prefixes stripped, up to the first that is not."""
    run: list[str] = []
    for raw in lines:
        line = split_line(raw).text if raw.startswith("(") else raw
        if not _TRACEBACK_SHAPED.search(line):
            break
        run.append(line.strip())
    return run


def _engine_frame(frame: str) -> bool:
    """A frame of the engine's own work; a vLLM frame of its sleep or wake-up is the colocated switch, not
    generation (verl-project/verl#575)."""
    return bool(ENGINE_FRAME.search(frame)) and not ("vllm" in frame and SWITCH_FRAME.search(frame))


def _phase_from_frames(frames: tuple[str, ...]) -> str | None:
    # The innermost frame that names a phase decides: frames run outermost first.
    for frame in reversed(frames):
        if _engine_frame(frame):
            return "engine_side"
        if LOGPROB_FRAME.search(frame):
            return "logprob_pass"
        if SWITCH_FRAME.search(frame):
            return "phase_switch"
    if any(TRAIN_FRAME.search(f) for f in frames):
        return "training_step"
    return None


TIMER_END = re.compile(r"\bTimer \S+ end\b")
PHASE_OF_EVENT = {
    "weights_update": "phase_switch",
    "release_memory": "phase_switch",
    "resume_memory": "phase_switch",
    "train_progress": "training_step",
}


def oom_phase(run: Run, oom: SignatureMatch, frames: tuple[str, ...]) -> tuple[str | None, dict[str, Any]]:
    """The phase an OOM happened in, from its witnesses in order of trust: the timers still
    open, then the traceback's frames, then the last phase marker line before it. The one rule
    for `oom_context` and for the failed allocation `memory_budget` reads."""
    timers = _open_timers(run)
    by_timers = _phase_from_timers(timers)
    by_frames = _phase_from_frames(frames)
    event = _last_event(run, oom)
    by_event = PHASE_OF_EVENT[event.tag] if event is not None and event.tag else None
    return by_timers or by_frames or by_event, {
        "open_timers": timers, "by_timers": by_timers, "by_frames": by_frames, "event": event, "by_event": by_event,
    }


def _last_event(run: Run, oom: SignatureMatch) -> LogLine | None:
    """The last phase marker the log kept before the OOM line in the same file (weights update,
    memory release / resume, Relax's training-step line); failing one, a resume request that
    timed out in the lines after it (`pending_resume`)."""
    before = [
        line for line in run.log.notable
        if line.tag in PHASE_OF_EVENT and line.path == oom.line.path and line.line_no < oom.line.line_no
        and not TIMER_END.search(line.text)  # a phase that finished says nothing about the next one
    ]
    if before:
        return max(before, key=lambda line: line.line_no)
    return pending_resume(run, oom)


# The trainer's report that its request to wake the engine got no answer: verl's SGLang HTTP
# engine retries `resume_memory_occupation` and logs "Async request to resume_memory_occupation
# timed out (attempt N)" (sgl-project/sglang#14092, under torch_memory_saver's
# `CUresult error: 2 (out of memory) ... func=cu_mem_create`); SGLang's and vLLM's own wordings
# of the same wait name the request too.
RESUME_TIMED_OUT = re.compile(r"\b(?:resume_memory_occupation|wake_up)\b.{0,80}\btimed? ?out\b", re.I)


def pending_resume(run: Run, oom: SignatureMatch) -> LogLine | None:
    """A request to resume the engine that was under way when it ran out of memory.

    Processes write to one log through Ray without waiting for each other, so the trainer's
    timeout of its resume request is logged after the engine's OOM although the request came
    first: a timeout reports a request made before it. The first phase marker after the OOM
    counts when it is such a timeout; any other marker in between means the OOM came first.
    """
    after = sorted(
        (line for line in run.log.notable
         if line.tag in PHASE_OF_EVENT and line.path == oom.line.path and line.line_no > oom.line.line_no),
        key=lambda line: line.line_no)
    if after and after[0].tag == "resume_memory" and RESUME_TIMED_OUT.search(after[0].text):
        return after[0]
    return None


# slime's print_memory and verl's log_gpu_memory_usage, as each words the device memory in use, and vLLM's
# report of each sleep (v1/worker/gpu_worker.py: `Sleep mode freed 43.82 GiB memory, 4.11 GiB memory is still in use.`)
MEMORY_LINE = re.compile(
    r"Memory-Usage (?P<slime>[^:{]+?)(?: \(cleared before print\))?: \{.*?'used_GB': (?P<used>[\d.]+)"
    r"|(?P<verl>[A-Z][^,]*?(?:offload|onload|wake|sleep|release|resume)[^,]*), memory allocated \(GB\): [\d.]+, "
    r"memory reserved \(GB\): [\d.]+, device memory used/total \(GB\): (?P<vused>[\d.]+)/"
    r"|(?P<vllm>Sleep mode) freed [\d.]+ GiB memory, (?P<sused>[\d.]+) GiB memory is still in use",
    re.I,
)
VLLM_SLEEP_PHASE = "after sleep (vLLM)"
# The phases that measure what a release left behind (preferred over the busy phases).
AFTER_RELEASE = re.compile(r"after (?:offload|release|sleep)|before (?:wake|onload|resume)", re.I)
_RANK_IN = re.compile(r"\[Rank (\d+)\]")


def memory_series(run: Run, before: LogLine | None = None) -> dict[str, list[tuple[float, LogLine]]]:
    """Device memory in use at each release/resume phase line, per (rank, phase), in log order."""
    series: dict[str, list[tuple[float, LogLine]]] = {}
    for line in run.log.notable:
        if line.tag not in ("release_memory", "resume_memory"):
            continue
        if before is not None and (line.path != before.path or line.line_no > before.line_no):
            continue
        m = MEMORY_LINE.search(line.text)
        if not m:
            continue
        phase = VLLM_SLEEP_PHASE if m.group("vllm") else (m.group("slime") or m.group("verl") or "").strip()
        used = float(m.group("used") or m.group("vused") or m.group("sused"))
        rank = _RANK_IN.search(line.text)
        key = f"{phase} (rank {rank.group(1)})" if rank else phase
        if line.source and not rank:
            key += f" ({line.source})"
        series.setdefault(key, []).append((used, line))
    for points in series.values():
        points.sort(key=lambda p: (p[1].path, p[1].line_no))
    return series


def release_leak(run: Run, oom: SignatureMatch) -> dict[str, Any] | None:
    """The phase whose memory in use rises most steadily across cycles, when it is a leak."""
    min_cycles = count("memory.leak_min_cycles")
    min_growth = threshold("memory.leak_min_growth_gb")
    best: dict[str, Any] | None = None
    series = memory_series(run, oom.line)
    # what the releases left behind decides where it was measured: memory a busy phase holds more of, cycle after cycle,
    # while every release gives it back to a level that stopped rising, is a working set, not a leak (LLM360/miles's
    # cp2_ep4.log: `after wake_up model` 80.48, 86.29, 87.28 GB on rank 0, `before wake_up model` levelled at 22.69)
    released_measured = [[v for v, _ in pts] for key, pts in series.items()
                         if AFTER_RELEASE.search(key) and len(pts) >= min_cycles]
    busy_counts = not released_measured or any(v[-1] > v[-min_cycles] for v in released_measured)
    for key, points in series.items():
        if len(points) < min_cycles or not (busy_counts or AFTER_RELEASE.search(key)):
            continue
        values = [v for v, _ in points]
        falls = sum(1 for a, b in zip(values, values[1:]) if b < a)
        growth = values[-1] - values[0]
        if growth < min_growth or falls > 0:  # never given back, and grown past allocator noise
            continue
        # still growing when the OOM came ("grows rollout after rollout until an OOM", THUDM/slime#1022): a use that
        # levelled off over its last `min_cycles` cycles is a working set reached, not memory leaking (LLM360/miles's
        # logs/cp2_ep4.log: 20.45, 21.64, then 22.69 on four cycles before an OOM of the training forward pass)
        if values[-1] <= values[-min_cycles]:
            continue
        released = bool(AFTER_RELEASE.search(key))
        if best is None or (released, growth) > (best["after_release"], best["growth_gb"]):
            best = {
                "after_release": released,
                "phase": key,
                "used_gb": [round(v, 2) for v in values],
                "cycles": len(values),
                "growth_gb": round(growth, 2),
                "first": quote(points[0][1]),
                "last": quote(points[-1][1]),
                "min_cycles": min_cycles,
                "min_growth_gb": min_growth,
            }
    return best


# torch_memory_saver holds the engine's weights and KV cache under SGLang (`--enable-memory-saver`);
# verl's trainer offloads through FSDP instead, so outside the slime family, which also puts the
# trainer's memory under it, its out-of-memory is the engine's (fzyzcjy/torch_memory_saver#4: `CUresult
# error result=2 … func=cu_mem_create`, an SGLang engine launched with the memory saver).
MEMORY_SAVER = re.compile(r"torch_memory_saver")
TRAINER_MEMORY_SAVER = ("slime", "miles", "relax")


_VLLM = re.compile(r"vllm|VllmWorker|EngineCore|LLMRayActor|RayWorkerWrapper|warming up sampler|EngineDeadError|"
                   r"cumem_allocator", re.I)


def _engine_name(oom: SignatureMatch) -> str:
    """Which inference engine the OOM's line, prefix or frames name: vLLM's processes and paths, else SGLang."""
    if any("sglang" in f and ENGINE_FRAME.search(f) for f in oom.frames):
        return "SGLang"
    return "vLLM" if any(_VLLM.search(t) for t in (oom.line.text, oom.line.source or "", *oom.frames)) else "SGLang"


def _in_engine(oom: SignatureMatch, framework: str = "unknown") -> bool:
    line = oom.line
    if framework not in TRAINER_MEMORY_SAVER and MEMORY_SAVER.search(line.text):
        return True
    return bool(
        (line.source and ENGINE_SOURCE.search(line.source))
        or ENGINE_TEXT.search(line.text)
        or oom.signature.id == "sglang_kv_cache_oom"
        or any(_engine_frame(f) for f in oom.frames)
    )


# torch's message: "Tried to allocate 58.15 GiB. GPU 0 has a total capacity of 139.81 GiB ..."
ALLOCATION = re.compile(
    r"Tried to allocate (?P<req>[\d.]+) (?P<ru>[KMGT]i?B)\b.*?total capacity of (?P<cap>[\d.]+) (?P<cu>[KMGT]i?B)"
)
_UNIT_GIB = {"K": 1 / 2**20, "M": 1 / 2**10, "G": 1.0, "T": 2**10}


def failed_allocation(run: Run) -> dict[str, Any] | None:
    """The first CUDA OOM's failed request and the GPU's capacity (GiB), with the phase it failed in."""
    ooms = sorted(scan(run.log).of_outcome("cuda_oom"), key=lambda m: m.order)
    for oom in ooms:
        m = ALLOCATION.search(oom.line.text) or ALLOCATION.search(_with_message_rest(run, oom))
        if not m:
            continue
        frames = adjacent_frames(run, oom)
        phase = oom_phase(run, oom, frames)[0]
        return {
            "requested_gb": round(float(m.group("req")) * _UNIT_GIB[m.group("ru")[0]], 3),
            "capacity_gb": round(float(m.group("cap")) * _UNIT_GIB[m.group("cu")[0]], 3),
            "phase": phase,
            "where": oom.line.where(),
            "frames": list(frames[-4:]),
        }
    return None


class OomContext(Probe):
    """Where the CUDA OOM happened: inference engine, log-prob pass, first phase switch, or train step."""

    name = "oom_context"
    outcomes = ("release_leak", "engine_side", "logprob_pass", "phase_switch", "training_step")
    needs = ("log",)
    cost = Cost.STATIC

    def examine(self, run: Run) -> Observation:
        ooms = sorted(scan(run.log).of_outcome("cuda_oom"), key=lambda m: m.order)
        if not ooms:
            raise Unavailable("log", "no CUDA out-of-memory error in the log, so there is no OOM to place")
        oom = ooms[0]
        last_step = _last_train_step(run)
        last_rollout = _last_index(run, "rollout")
        colocated = _colocated(run)
        frames = adjacent_frames(run, oom)
        phase, why = oom_phase(run, oom, frames)
        timers, by_timers, by_frames, event = why["open_timers"], why["by_timers"], why["by_frames"], why["event"]
        alone = _engine_run_alone(run)
        in_engine = _in_engine(oom, run.framework) or alone is not None
        evidence: dict[str, Any] = {
            "line": quote(oom.line),
            "frames": list(frames[-8:]),
            "frames_below_error": not oom.frames and bool(frames),
            "open_timers": timers,
            "last_step": last_step,
            "last_rollout": last_rollout,
            "colocate": colocated,
            "phase_by_timers": by_timers,
            "phase_by_frames": by_frames,
            "last_phase_event": quote(event) if event is not None else None,
            "in_engine": in_engine,
            "oom_count": len(ooms),
        }
        where = f"{oom.line.where()}" + (f" on {oom.line.source}" if oom.line.source else "")
        # a pasted fragment holds what the user cut out: no step record in it says nothing of the steps before
        # (NVIDIA-NeMo/RL#3244: a paste of the OOM alone, from a run that failed at step 13)
        after = (
            f"after step {last_step}" if last_step is not None
            else "with no train step record in the fragment" if getattr(run, "is_fragment", False)
            # (what the log's records show, not what the job did: a script's own `Epoch 0, Loss: …` lines are no record
            # the triage reads, Ourboros-Alignment-Team/RWKV-RM-Copilot's W&B output.log)
            else "before any train step record in the log"
        )

        leak = release_leak(run, oom)
        evidence["memory_trend"] = leak
        if leak is not None:  # several cycles went by before the OOM: not the first switch
            return self.observe(
                "release_leak",
                f"GPU memory in use grew at every release/resume cycle before the OOM: {leak['phase']} went "
                f"{' → '.join(f'{v:g}' for v in leak['used_gb'])} GB over {leak['cycles']} cycles "
                f"(+{leak['growth_gb']:g} GB, {leak['first']['where']} … {leak['last']['where']}); the OOM came at {where}, "
                f"{after}" + (f" and rollout {last_rollout}" if last_rollout is not None else "") + ", not at the first switch.",
                0.8,
                **evidence,
            )

        stepped = last_step is not None
        # Witnesses in order of trust: timers, then frames, then the last phase marker line.
        switching = phase == "phase_switch"
        first_switch = last_rollout is None or last_rollout <= 0
        # the OOM's own frames inside the engine's sleep / wake-up: the switch itself, in a colocated run
        in_wake = by_frames == "phase_switch" and any(COLOCATION_FRAME.search(f) for f in frames)
        if SAVER_RESUME.search(oom.line.text):
            in_wake = switching = True
            evidence["oom_in_memory_saver_resume"] = True
        resuming = phase == "phase_switch" and event is not None and event.line_no > oom.line.line_no
        evidence["oom_in_engine_wake"] = in_wake or resuming
        if resuming:
            evidence["resume_request"] = quote(event)
        if colocated is None and (in_wake or resuming):
            colocated = True  # only an engine that shares its GPUs with training releases and resumes them
            evidence["colocate"] = (
                "shown by torch_memory_saver's resume" if evidence.get("oom_in_memory_saver_resume")
                else "shown by the engine's sleep / wake-up frames" if in_wake
                else "shown by the trainer's request to resume the engine's memory")
        in_wake = in_wake or resuming
        if colocated is None and SLEEP_ALLOCATOR.search(oom.line.text):
            colocated = True
            evidence["colocate"] = "shown by vLLM's sleep-mode allocator (cumem_allocator), which runs only with sleep mode"
        if colocated and (stepped or in_wake) and (switching or (in_engine and first_switch)):
            evidence["switch"] = "first" if first_switch else "later"
            what = "weights were being moved between training and the engine" if switching and not \
                (evidence.get("oom_in_memory_saver_resume") or in_wake) else "the engine resumed for the next rollout"
            return self.observe(
                "phase_switch",
                f"CUDA OOM at the {'first ' if first_switch else ''}switch from training back to rollout in a colocated run "
                f"({what}, {after}) at {where}: memory is not freed or restored between phases.",
                0.85 if first_switch else 0.7,
                **evidence,
            )
        startup = next((advice for pattern, advice in KV_NO_ROOM.items() if pattern.search(oom.line.text)), None)
        if startup is not None:
            return self.observe(
                "engine_side",
                f"The inference engine found no memory for its KV cache once its weights were loaded at {where}, "
                f"{after}: its memory fraction is too small for the model, not too large.",
                0.85,
                **evidence, remedy=startup[0], flags=startup[1],
            )
        if KV_POOL_FULL.search(oom.line.text):
            return self.observe(
                "engine_side",
                f"SGLang's KV-cache pool could not allocate the tokens of a batch its scheduler had admitted at {where}, "
                f"{after}: the pool was full for that batch, not the GPU for the engine.",
                0.85,
                **evidence, remedy=KV_POOL_FULL_REMEDY, flags=[],
            )
        if in_engine or by_frames == "engine_side":
            return self.observe(
                "engine_side",
                f"CUDA OOM inside the {alone or _engine_name(oom)} engine at {where}, {after}.",
                0.85,
                **evidence,
            )
        if phase == "logprob_pass":
            active = next((t for t in timers if t in LOGPROB_TIMERS), None)
            during = f"timer `{active}` running" if active else "log-prob frames in the traceback"
            return self.observe(
                "logprob_pass",
                f"CUDA OOM in the log-prob pass ({during}) at {where}, {after}: the logits of a whole micro-batch are materialised there.",
                0.85 if active else 0.75,
                **evidence,
            )
        if phase == "phase_switch":
            # Outside a colocated run the weight sync is the trainer's own work: no phases share GPUs.
            evidence["switch"] = "not colocated" if colocated is False else "unknown colocation"
            return self.observe(
                "training_step",
                f"CUDA OOM in the trainer while syncing weights at {where}, {after}; "
                f"{'the run is not colocated' if colocated is False else 'colocation is unknown'}, "
                "so no phase switch shares its GPUs.",
                0.55,
                **evidence,
            )
        confident = phase == "training_step"
        if not confident and last_step is None:
            # nothing says training had started: set-up (model load, conversion, worker init) is as likely
            # (NVIDIA-NeMo/RL#2702: an OOM in the workers' set-up was "in the training step")
            summary = (f"CUDA OOM on the training side at {where}, {after}; no timer or frame names its phase "
                       "(set-up or a training step).")
        else:
            summary = (f"CUDA OOM in the training step at {where}, {after}"
                       + ("." if confident else " (no timer or frame names a narrower phase)."))
        return self.observe("training_step", summary, 0.8 if confident else 0.5, **evidence)
