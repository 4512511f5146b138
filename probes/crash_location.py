"""Where an unrecognised crash happened: the first error of the causal chain, located.

When no known error explains a crash, an engineer reading the log still says which
component died, on which rank and node, with which exception, in which frame of the
framework's (or the user's) code, and at which step. This probe does the same from the
log's tracebacks (`triage/formats/tracebacks.py`):

- the first exception of the causal chain: through Ray's `RayTaskError(...)` envelope,
  Python's chained blocks and the rank-prefixed copies;
- the first error in log order decides, not the last: errors that report another
  process's failure (NCCL timeouts and aborts, Ray's `ActorDiedError`, torchrun's
  `ChildFailedError`, a `KeyboardInterrupt` or SIGTERM handler) are a cascade and decide
  only when nothing else crashed;
- copies on many ranks are one finding with a count (Sentry-style grouping);
- the component, from the printing actor's name and the frames' files: trainer,
  inference engine, rollout manager / driver, Ray, data loading, reward function, checkpoint conversion, or a
  script's main process.

`located` when a traceback (or, lacking any, a fatal line) was found; `cut_off` when the
traceback that decides ends before its exception line (a paste or a log cut mid-way: where
it crashed is known, what it crashed on is not, so nothing says that no known cause
explains it); `not_located` when the log holds none.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from probes.error_signatures import CONSEQUENCE_LINE, cut_traceback_line, node_of, quote, rank_of, scan, short
from probes.oom_context import COLOCATION_FRAME
from triage.finding import Observation
from triage.formats.tracebacks import (
    Chain,
    ChainGroup,
    Frame,
    first_app_frame,
    in_app,
    cut_traceback,
    package_of,
    read_tracebacks,
    went_on_after,
)
from triage.probe import Cost, Probe
from triage.thresholds import threshold

if TYPE_CHECKING:
    from triage.formats.log_index import LogLine
    from triage.run.run import Run

# Errors that report another process's failure rather than a cause of their own.
CASCADE_TYPES = re.compile(
    r"^(?:DistBackendError|DistStoreError|DistNetworkError|ActorDiedError|RayActorError|ActorUnavailableError|"
    r"WorkerCrashedError|OwnerDiedError|ChildFailedError|LocalRayletDiedError|KeyboardInterrupt|SignalException|SystemExit|"
    r"GetTimeoutError|CancelledError"
    # a child command's failure as the Python that ran it reports it: the command's own error is above (a build's
    # compiler or CMake error, NVIDIA/TransformerEngine#954, #1309)
    r"|CalledProcessError"
    # an exception group's own traceback ends on the group; each error it gathered follows with its own traceback
    # (Python 3.11+: asyncio / anyio task groups, Starlette under SGLang's server, sgl-project/sglang#19514)
    r"|ExceptionGroup|BaseExceptionGroup)$"
)
CASCADE_TEXT = re.compile(
    r"NCCL communicator was aborted|Watchdog caught collective operation timeout|ran for \d+ milliseconds before timing out"
    r"|Some NCCL operations have failed or timed out|NCCL (?:error|timeout)|ncclRemoteError|Connection closed by peer"
    r"|The actor died|actor died unexpectedly|Socket Timeout|Broken pipe"
    # slime's health wait for its SGLang server (slime/backends/sglang_utils/sglang_engine.py _wait_server_healthy):
    # the server's process died, and why is the server's own error (THUDM/slime#1998: its CUDA graph capture)
    r"|Server process terminated unexpectedly"
)

# Of those, Ray's and the launcher's reports that a worker process died (`_fatal_line_only`'s consequence lines)
# (and the raylet's own death as its task's driver hears of it, `LocalRayletDiedError`: ray-project/ray#36884, the raylet's
# `Check failed:` line printed after it)
_DEATH = (r"(?:ActorDiedError|RayActorError|ActorUnavailableError|WorkerCrashedError|OwnerDiedError|ChildFailedError"
          r"|LocalRayletDiedError)")
# (also wrapped by the task that called the dead actor: `RayTaskError(ActorDiedError)`, PeterGriffinJin/Search-R1#45)
DEATH_TYPES = re.compile(rf"^(?:{_DEATH}|RayTaskError\({_DEATH}\))$")
# Ray's envelope of a remote task that raised, with no death inside it (`ray.exceptions.RayTaskError: ray::Actor.method()
# (pid=…, ip=…)`; a wrapped death, `RayTaskError(ActorDiedError)`, is a death's report)
_TASK_RAISED = re.compile(r"\bRayTaskError(?!\(\w*(?:Died|Unavailable|Crashed)\w*\)): (ray::[\w.]+\(\))")
DIED_CLASS = re.compile(r"\bclass_name: (\w+)")
REWARD = re.compile(r"reward|rm_hub|compute_score|verif(?:y|ier)|grader|math_equal|judge", re.I)
# a function named for both its rollout and its reward is the rollout's (tinker_cookbook/rl/train.py's
# `do_group_rollout_and_filter_constant_reward`, whose sampling call raised in sushantmehta-code/tinker-cookbook's logs)
ROLLOUT_FUNCTION = re.compile(r"rollout|generat|sampl", re.I)
DATA = re.compile(r"dataset|dataloader|data_loader|[/\\]data(?:_utils)?[/\\]|[/\\]data\.py$|__getitem__|collate", re.I)
DATA_PACKAGES = ("datasets", "pyarrow", "pandas")
ENGINE_ACTOR = re.compile(
    r"SGLang|Sglang|sglang|vLLM|VLLM|vllm|LLMRayActor|EngineCore|Scheduler|TpModelWorker|DetokenizerManager|"
    # (vLLM's Ray executor runs each GPU worker in a `RayWorkerWrapper` actor: vllm/executor/ray_utils.py)
    r"RolloutServer|InferenceEngine|LLMServer|RayWorkerWrapper", re.I
)
ENGINE_PACKAGES = ("sglang", "vllm")
TRAIN_ACTOR = re.compile(
    r"Train|WorkerDict|ActorRolloutRef|ActorWorker|CriticWorker|RefWorker|PolicyModel|ReferenceModel|CriticModel|"
    # (NeMo-RL's `DTensorPolicyWorker` / `MegatronPolicyWorker`, NVIDIA-NeMo/RL#621)
    r"RewardModel|Megatron|FSDP|DeepSpeed|Learner|PolicyWorker", re.I
)
# (Megatron's FSDP, shipped apart as `megatron_fsdp`: NVIDIA-BioNeMo/bionemo-recipes#1399)
TRAIN_PACKAGES = ("megatron.core", "megatron", "megatron_fsdp", "deepspeed", "transformer_engine", "apex", "accelerate")
DRIVER_ACTOR = re.compile(r"RolloutManager|RolloutController|TaskRunner|Driver|Coordinator|Orchestrator", re.I)
RAY_ACTOR = re.compile(r"^(?:raylet|gcs_server|autoscaler|monitor|dashboard|log_monitor)$")
# (NeMo-RL's policy workers and their weight streaming live under nemo_rl/models/policy/: NVIDIA-NeMo/RL#1477)
TRAIN_FILE = re.compile(r"(?:^|[/\\])(?:train(?:er|ing)?(?:_\w+)?|actor|loss|model|megatron_utils|fsdp_utils|models[/\\]policy)"
                        r"[/\\.]", re.I)
# Megatron-LM's own tree (megatron/training.py, megatron/checkpointing.py before megatron.core) and its
# entry scripts (pretrain_gpt.py): training code wherever the frame is (intelligent-machine-learning/dlrover#977)
MEGATRON_FILE = re.compile(r"(?:^|[/\\])(?:megatron[/\\](?!core[/\\])\w+\.py$|pretrain_\w+\.py$)")
# a framework's own module that drives the engine (slime's backends/sglang_utils/sglang_engine.py, verl's
# workers/rollout/sglang_rollout/, OpenRLHF's trainer/ray/vllm_engine.py): the engine's side, where its
# innermost frame is (THUDM/slime#1741: the engine actor's launch reading a ServerArgs field)
ENGINE_FILE = re.compile(r"(?:^|[/\\])(?:sglang|vllm)_\w+(?:[/\\]|\.py$)")
# the HF Trainer's loop and the trainers built on it: transformers/trainer.py, trl/trainer/*, unsloth's compiled
# trainers (unsloth_compiled_cache/UnslothGRPOTrainer.py): a single-process run's training code, no driver's
# (huggingface/trl#3394, unslothai/unsloth#2354)
HF_TRAINER_FILE = re.compile(r"(?:^|[/\\])(?:transformers[/\\]trainer\.py$|trl[/\\]trainer[/\\]|Unsloth\w*Trainer\.py$)")
# the backward pass and FSDP's wrapping are training wherever they run (unslothai/unsloth#212: a LoRA kernel's
# `backward`; declare-lab/flan-alpaca#10: FSDP's flat parameters), a single process with no driver
TRAIN_FILE_PARTS = re.compile(r"[/\\]torch[/\\](?:autograd|distributed[/\\]fsdp)[/\\]")
# a checkpoint converter or adapter merger run on its own (alibaba/Pai-Megatron-Patch's
# toolkits/model_checkpoints_convertor/*/hf2mcore_*.py, #167; a LoRA merge script, huggingface/peft#297)
CONVERT_FILE = re.compile(r"(?:^|[/\\])[\w-]*(?:convert|merge_lora|merge_peft|merge_adapter|hf2mcore|mcore2hf|hf2mg|mg2hf)"
                          r"[\w-]*(?:[/\\]|\.py$)", re.I)
# (PEFT's merge of an adapter into its base model: `merge_and_unload`, `merge_adapter`; huggingface/peft#297)
CONVERT_FUNCTION = re.compile(r"merge_and_unload$|merge_adapter$|merge_lora\w*$|save_mgmodel$|convert_checkpoint\w*$")
# the RL frameworks whose driver runs rollouts: where one of them is in the frames, a process with no actor and no
# rank is its driver; elsewhere it is a script's own main process
DRIVER_FRAMEWORKS = frozenset({"slime", "miles", "relax", "verl", "openrlhf", "nemo_rl", "areal"})


IMPORT_ERRORS = ("ModuleNotFoundError", "ImportError")
# a test suite's own check: its innermost frame is unittest's `fail`, pytest's, or a test module's (SGLang's Ascend
# nightly `sglang/test/…/test_ascend_disaggregation_utils.py` failing its throughput bar through unittest/case.py in
# shun8686/for_debug's logs: the engine answered, the test's number was short)
TEST_FILE = re.compile(r"(?:^|[/\\])(?:tests?|_pytest)[/\\]|[/\\]unittest[/\\]case\.py$|(?:^|[/\\])test_\w+\.py$")


def _app_frames(chain: Chain) -> list[Frame]:
    return [f for f in chain.root.frames if in_app(f)]


def _tail(path: str) -> str:
    """A frame's file by its last directory and name (`dataset/rl_dataset.py`): the directories above
    are the user's mount points (`/mnt/…/dataset/rednote/…/swift/…/sft.py`, modelscope/ms-swift#9863),
    not the code's role."""
    parts = re.split(r"[/\\]", path)
    return "/" + "/".join(parts[-2:])


def component_of(chain: Chain) -> tuple[str, str]:
    """(component, why): decided from the actor that raised the root error and the frames' files."""
    root = chain.root
    proc = chain.process
    actor = proc.actor or chain.origin.actor or ""
    frames = root.frames
    app = _app_frames(chain)
    packages = {package_of(f.file) for f in frames}
    hit = next((f for f in reversed(app) if REWARD.search(f.file)
                or REWARD.search(f.function) and not ROLLOUT_FUNCTION.search(f.function)), None)
    if hit is not None:
        return "reward function", f"frame {hit} is reward code"
    if frames and TEST_FILE.search(frames[-1].file):
        return "test harness", f"the innermost frame {frames[-1]} is a test's own check, not the code it tests"
    if any(p in DATA_PACKAGES for p in packages) or any("torch/utils/data" in f.file for f in frames) \
            or "DataLoader worker" in root.message:
        return "data loading", "the error was raised in the data-loading path (DataLoader / datasets frames)"
    # (a `data.py` in a training backend's folder is the trainer's own batch handling: slime's
    # backends/megatron_utils/data.py logs rollout metrics in the Megatron actor, THUDM/slime#1784)
    hit = next((f for f in reversed(app) if DATA.search(_tail(f.file)) and not TRAIN_FILE.search(_tail(f.file))
                or DATA.search(f.function)), None)
    if hit is not None and not any(p in ENGINE_PACKAGES for p in packages):
        return "data loading", f"frame {hit} is data-loading code"
    if ENGINE_ACTOR.search(actor):
        return "inference engine", f"raised in actor {actor}"
    if any(p in ENGINE_PACKAGES for p in packages):
        pkg = next(p for p in packages if p in ENGINE_PACKAGES)
        return "inference engine", f"raised in {pkg} frames"
    # no actor named the process: the frames of the exceptions the root's raised in turn show whose
    # process it was (an SGLang server's warmup handling a timeout of its own request, sgl-project/sglang#6555)
    outer = {package_of(f.file) for b in chain.blocks for f in b.frames} - packages
    if not actor and not packages & set(TRAIN_PACKAGES) and any(p in ENGINE_PACKAGES for p in outer):
        pkg = next(p for p in ENGINE_PACKAGES if p in outer)
        return "inference engine", f"the exception it caused was raised in {pkg} frames"
    if RAY_ACTOR.match(actor) or root.type and root.type.startswith("ray.exceptions.") and not root.is_wrapper:
        return "Ray", f"a Ray error ({root.type})" if root.type else f"printed by {actor}"
    if frames and all(package_of(f.file) in ("ray", "python") for f in frames) and packages & {"ray"}:
        return "Ray", "every frame is Ray's own code"
    if TRAIN_ACTOR.search(actor):
        return "trainer", f"raised in actor {actor}"
    if DRIVER_ACTOR.search(actor):
        return "rollout manager / driver", f"raised in actor {actor}"
    # a converter run as its own script, under torchrun too: its entry frame is the converter (THUDM/slime's
    # tools/convert_hf_to_torch_dist.py, rank-prefixed, failing in mbridge's name mapping: THUDM/slime#1780)
    entry = next((f for f in frames if in_app(f)), None)
    if entry is not None and entry.function == "<module>" and CONVERT_FILE.search(entry.file):
        return "checkpoint conversion", f"the job's entry script {entry.file} converts a checkpoint"
    if proc.rank is not None or chain.origin.rank is not None:
        return "trainer", "printed by a torch rank (rank-prefixed lines)"
    if any(p in TRAIN_PACKAGES for p in packages) or any(TRAIN_FILE.search(f.file) for f in app[-3:]) \
            or any(MEGATRON_FILE.search(f.file) or HF_TRAINER_FILE.search(f.file) for f in frames):
        return "trainer", "training frames (Megatron / DeepSpeed / the HF Trainer / the trainer's files)"
    if app and ENGINE_FILE.search(app[-1].file):
        return "inference engine", f"frame {app[-1]} is the framework's engine code"
    if actor:  # a prefix none of the patterns knows: not the driver's, whose lines carry none
        return "unknown", f"printed by actor {actor}, which names no component the triage knows"
    # (the file names of the job's own code only: a library's `convert_slow_tokenizer.py` loads a tokenizer)
    if hit := next((f for f in frames if (in_app(f) and CONVERT_FILE.search(f.file)) or CONVERT_FUNCTION.match(f.function)),
                   None):
        return "checkpoint conversion", f"frame {hit} converts or merges a checkpoint"
    if hit := next((f for f in frames if TRAIN_FILE_PARTS.search(f.file) or f.function == "backward"), None):
        return "trainer", f"frame {hit} is training code (the backward pass, FSDP)"
    pid = proc.pid or chain.origin.pid
    if pid is not None:
        # Ray prefixes a worker's lines `(pid=N, ip=…)` before its actor has a name (the actor's constructor) and
        # for tasks; the driver's lines carry no prefix (THUDM/slime#1656: a plugin's model spec failing in
        # the training actor's set-up)
        return "Ray worker", f"printed by a Ray worker (pid={pid}) whose prefix names no actor: not the driver"
    if packages & DRIVER_FRAMEWORKS:
        return "rollout manager / driver", "printed by the driver (no actor prefix, no rank)"
    return "main process", "printed by the job's own process (no actor prefix, no rank, no framework's driver)"


def _the(component: str) -> str:
    """The component as a sentence's subject (`The trainer`; a process no pattern names is `The process`)."""
    return "The process" if component == "unknown" else f"The {component}"


def _component_of_printer(source: str | None) -> tuple[str, str]:
    """A fatal line printed with no traceback: the actor whose prefix it carries names the component where it is
    an engine's, a trainer's or the driver's (sgl-project/sglang#21460: a CUDA assert under `(SGLangEngine pid=…)`)."""
    actor = (source or "").split(" pid=")[0]
    for pattern, component in ((ENGINE_ACTOR, "inference engine"), (TRAIN_ACTOR, "trainer"),
                               (DRIVER_ACTOR, "rollout manager / driver")):
        if actor and pattern.search(actor):
            return component, f"no traceback: the error line was printed by actor {actor}"
    return "unknown", "no traceback: only the error line"


def _is_cascade(chain: Chain) -> bool:
    root = chain.root
    return bool(CASCADE_TYPES.match(root.short_type) or CASCADE_TEXT.search(root.message) or root.is_wrapper)


def _position(run: Run, path: str, line_no: int) -> tuple[int, int]:
    """Where a line stands among the run's logs: (its log's place, its line)."""
    files = [str(p) for p in run.artifacts.logs]
    return (files.index(path) if path in files else len(files)), line_no


def _order(run: Run, chain: Chain) -> tuple[int, int]:
    return _position(run, chain.path, chain.root.line_no)


def _own_error_lines(run: Run) -> list[tuple[LogLine, tuple[int, int], tuple[str, ...]]]:
    """The fatal lines that are a process's own error: not a traceback cut before its exception (which holds no
    error line of its own), not a report that another process died."""
    return [f for f in scan(run.log).fatal_lines if not cut_traceback_line(f[0]) and not CONSEQUENCE_LINE.search(f[0].text)]


def _group_evidence(g: ChainGroup) -> dict[str, Any]:
    root = g.first.root
    return {
        "exception": f"{root.type}: {short(root.message, 200)}" if root.message else root.type,
        "first_where": g.first.where,
        "count": g.count,
        "processes": len(g.processes),
    }


# How far above a traceback's first line the message logged with it may be: a logger's
# `logger.exception("… failed: %s", e)` line, then `Exception in thread …:`, then the traceback.
MESSAGE_LINES_ABOVE = 3
_NOT_THE_MESSAGE = re.compile(r"^\s*(?:Traceback \(most recent call last\)|Exception in thread\b|During handling of)"
                              r"|Unhandled error \(suppress with")  # Ray's wrapper of a remote error, not its words
# the message carries the error's own words: `warmup error: HTTPConnectionPool(…): Max retries exceeded …`,
# `load failed: [Errno 2] …`, `… ValueError: …` (a header such as `Invocation of collective_rpc method failed` does not)
_CARRIES_THE_ERROR = re.compile(r"(?:\b[A-Z]\w*(?:Error|Exception)\b|\b[Ee]rror|\b[Ff]ailed|\[Errno \d+\])\s*:\s*\S")


def _message_logged_with(run: Run, chain: Chain) -> LogLine | None:
    """The error line the program logged right above a traceback (the message `logging.exception` and
    `traceback.print_exc` callers print first), when the traceback itself lost its exception line."""
    above = [e for e in run.log.errors
             if str(e.path) == str(chain.path) and chain.start_line - MESSAGE_LINES_ABOVE <= e.line_no < chain.start_line
             and (e.level or "").upper() not in ("WARNING", "WARN", "INFO", "DEBUG") and not _NOT_THE_MESSAGE.search(e.text)
             and _CARRIES_THE_ERROR.search(e.text)]
    return min(above, key=lambda e: e.line_no) if above else None


def pasted_cut_traceback(run: Run, header_alone: bool = False) -> Chain | None:
    """The traceback a paste-sized log holds that was cut before its exception line, unless the job
    logged steps after it. A job's own log prints its exception line; only a paste is cut like this.
    One answer for the symptom, the signature check and the crash's place."""
    from pathlib import Path

    from triage.formats.pasted_table import PASTE_BYTES

    small = set()
    for path in run.artifacts.logs:
        try:
            if Path(path).stat().st_size <= PASTE_BYTES:
                small.add(str(path))
        except OSError:
            continue
    if not small:
        return None
    # a run made of pastes shares the run's reader; a large log beside a paste is not read for this
    reader = run.tracebacks if len(small) == len(run.artifacts.logs) else read_tracebacks([Path(p) for p in sorted(small)])
    return cut_traceback(reader, threshold("symptom.survived_after"), small, header_alone)


class CrashLocation(Probe):
    """Where an unrecognised crash happened: first exception, component, rank, node, frame, step, count."""

    name = "crash_location"
    outcomes = ("located", "cut_off", "not_located")
    needs = ("log",)
    cost = Cost.STATIC

    def examine(self, run: Run) -> Observation:
        reader = run.tracebacks
        groups = sorted(reader.groups.values(), key=lambda g: _order(run, g.first))
        base: dict[str, Any] = {"tracebacks": reader.chains, "distinct_errors": len(groups)}
        if not groups:
            return self._fatal_line_only(run, base)
        went_on = threshold("symptom.survived_after")

        def survived(g: ChainGroup) -> bool:
            """The job logged several more steps (or rollouts) after this error: it did not stop there."""
            return went_on_after(reader, g.first, went_on)

        fatal = [g for g in groups if not survived(g)] or groups
        causes = [g for g in fatal if not _is_cascade(g.first)]
        if not causes and self._first_error_line_before(run, fatal[0].first):
            # every traceback reports another's failure (Ray's RayTaskError around a remote error, an actor that died),
            # and a process's own error line, with no traceback, came first: the first error decides (OpenRLHF/
            # OpenRLHF#159: the critic's CUDA device-side assert, then the driver's `ray.get` re-raising it)
            return self._fatal_line_only(run, base)
        chosen = causes[0] if causes else fatal[0]
        base["survived_errors"] = [_group_evidence(g) for g in groups if g not in fatal][:5]
        hidden = [_group_evidence(g) for g in groups if g is not chosen and _order(run, g.first) > _order(run, chosen.first)
                  and _is_cascade(g.first)]
        chain = chosen.first
        root = chain.root
        proc = chain.process
        frame = first_app_frame(root)
        component, why = component_of(chain)
        rank = proc.rank if proc.rank is not None else chain.origin.rank
        node = proc.ip or chain.origin.ip
        ranks_hit = len(chosen.processes)
        exc = f"{root.type}: {root.message}" if root.message else (root.type or "a traceback cut before its exception")
        evidence: dict[str, Any] = {
            "exception": short(exc, 300),
            "exception_type": root.type,
            "where": chain.where,
            "traceback_starts": f"{chain.path}:{chain.start_line}",
            "component": component,
            "component_reason": why,
            "actor": proc.actor or chain.origin.actor,
            "pid": proc.pid,
            "rank": rank,
            "node": node,
            "frame": str(frame) if frame else None,
            "frame_package": (package_of(frame.file) or "user code") if frame else None,
            "innermost_frame": str(root.frames[-1]) if root.frames else None,
            "chain": [{"type": b.type, "link": b.link, "line": b.line_no} for b in chain.blocks],
            "step": chain.last_step,
            "rollout": chain.last_rollout,
            "count": chosen.count,
            "ranks_hit": ranks_hit,
            "ranks": sorted(chosen.ranks)[:64],
            "nodes": sorted(chosen.nodes)[:16],
            "last_where": chosen.last_where,
            "signature": chosen.signature,
            "cascade_after": hidden[:5],
            "other_errors": [_group_evidence(g) for g in groups if g is not chosen and not _is_cascade(g.first)][:5],
            "rule": "the first error in log order decides; NCCL timeouts, actor deaths and launcher summaries decide only when nothing else crashed",
            **base,
        }
        who = ", ".join(x for x in (f"rank {rank}" if rank is not None else None, f"node {node}" if node else None,
                                    proc.actor or chain.origin.actor) if x)
        when = (f"step {chain.last_step}" if chain.last_step is not None else
                f"rollout {chain.last_rollout}" if chain.last_rollout is not None else
                # records that carry no step (the HF Trainer's printed dicts) may stand before it: no step is named,
                # not "before the first" (Sunshine535/nips-grpo-dynamics: a crash after 65 records and the run's end)
                "with no step number in the log to place it" if not run.metrics.empty()
                else "before the first step record")
        if chain.last_step is not None and chain.last_rollout is not None:
            when = f"after step {chain.last_step} / rollout {chain.last_rollout}"
        copies = f"; {ranks_hit} processes hit the same error" if ranks_hit > 1 else ""
        hidden_note = f"; {len(hidden)} later error kind(s) are its cascade" if hidden else ""
        summary = (
            f"{_the(component)} crashed on `{short(exc, 140)}` at {chain.where}"
            + (f" ({who})" if who else "")
            + (f", in {frame.function} ({frame.file}:{frame.line})" if frame else "")
            + f", {when}{copies}{hidden_note}."
        )
        if not root.type:
            # the frames lost their exception line; an error line the log does hold says what it was
            cut = {"where": chain.where, "component": component, "frame": str(frame) if frame else None}
            alone = self._fatal_line_only(run, base)
            if alone.outcome == "located":
                return alone.model_copy(update={"evidence": {**alone.evidence, "cut_traceback": cut}})
            logged = _message_logged_with(run, chain)
            if logged is not None:
                return self.observe(
                    "located",
                    f"{_the(component)} logged `{short(logged.text, 140)}` at {logged.where()} right before a traceback "
                    f"that the paste cut before its exception line ({chain.where}): that message is the error"
                    + (f", in {frame.function} ({frame.file}:{frame.line})" if frame else "") + f", {when}.",
                    0.6,
                    **{**evidence, "exception": short(logged.text, 300), "exception_type": None, "where": logged.where(),
                       "line": quote(logged), "cut_traceback": cut},
                )
            frames = [str(f) for f in root.frames]
            wake = next((f for f in reversed(frames) if COLOCATION_FRAME.search(f)), None)
            if wake is not None:
                # not a verdict (the error's words are missing): a candidate the report ranks first
                evidence["suggests"] = [{
                    "verdict": "memory.colocate_second_step",
                    "because": f"the traceback was cut inside the engine's sleep / wake-up (`{wake}`), where a colocated "
                               "run hands GPU memory between training and rollout; an error there is most often that "
                               "switch running out of memory (verl-project/verl#575, #302)",
                }]
            evidence["frames"] = frames[-12:]
            # Ray's envelope above a remote traceback names the remote error's type, not its words
            envelope = next((b for b in chain.blocks if b.is_wrapper and "(" in b.short_type), None)
            remote = envelope.short_type.split("(", 1)[1].rstrip(")") if envelope is not None else None
            if remote:
                evidence["remote_error_type"] = remote
                if remote in IMPORT_ERRORS and "suggests" not in evidence:
                    # the catalog's signal for a version, without the module's name: a candidate, not a verdict
                    evidence["suggests"] = [{
                        "verdict": "deps.version_mismatch",
                        "because": f"Ray's envelope says the remote task raised a {remote}: most often a module the "
                                   "worker's installed packages do not have at that version (microsoft/agent-lightning"
                                   "#144, rllm-org/rllm#318); the message that names the module was cut",
                    }]
            return self.observe(
                "cut_off",
                f"{_the(component)}'s traceback at {chain.where} ends before its exception line (the log or the paste was "
                "cut)" + (f"; it was in {frame.function} ({frame.file}:{frame.line})" if frame else "")
                + f", {when}."
                + (f" Ray's envelope at {chain.path}:{envelope.line_no} says the remote task raised a {remote}, not why."
                   if remote and envelope is not None else "")
                + " What it crashed on is not in the log: paste the traceback's last lines.",
                0.6,
                **evidence,
            )
        if not causes and DEATH_TYPES.match(root.short_type):
            # only a report that another process died (the driver's ray.get on an actor that is gone): as for
            # the same report without frames, it locates nothing, unless an error line of the log's own does
            # (a worker's segfault banner); the actor it names is where the cause is
            alone = self._fatal_line_only(run, base)
            if alone.outcome == "located":
                return alone
            # (the class is in the death's own message, also when a task wrapped it: Search-R1#45)
            died = next((m for b in reversed(chain.blocks) if (m := DIED_CLASS.search(b.message))), None)
            return self.observe(
                "not_located",
                f"The log holds only the report of a process that died (`{short(exc, 140)}` at {chain.where}"
                + (f"; the actor that died: {died.group(1)}" if died else "") + "), not its own error: why it died is in "
                "that process's log or the node's kernel log (`dmesg -T`).",
                0.6,
                consequence={"where": chain.where, "text": short(exc, 300)},
                died_actor=died.group(1) if died else None,
                log_files=len(run.artifacts.logs),
                **base,
            )
        confidence = 0.8 if not _is_cascade(chain) else 0.6
        return self.observe("located", summary, confidence, **evidence)

    @staticmethod
    def _first_error_line_before(run: Run, chain: Chain) -> bool:
        """Whether a process's own error line comes before `chain`'s exception."""
        at = _order(run, chain)
        return any(_position(run, f[0].path, f[0].line_no) < at for f in _own_error_lines(run))

    def _fatal_line_only(self, run: Run, base: dict[str, Any]) -> Observation:
        # (a traceback cut before its exception line holds no error line of its own)
        every = [f for f in scan(run.log).fatal_lines if not cut_traceback_line(f[0])]
        fatal = _own_error_lines(run)
        if not fatal:
            if every:  # only a report that another process failed (a worker that died, a launcher's summary)
                line = min(every, key=lambda f: f[1])[0]
                task = _TASK_RAISED.search(line.text)
                return self.observe(
                    "not_located",
                    # Ray's envelope of a task that raised names the task, not a death: the process lived on
                    # (NVIDIA-NeMo/RL#1633: `RayTaskError: ray::MegatronPolicyWorker.generate() (pid=…)`, flashinfer's
                    # exception in the worker)
                    f"The log holds only Ray's report that the remote task {task.group(1)} raised (`{short(line.text, 140)}` "
                    f"at {line.where()}), not the task's own exception: it is printed under that report, or in the "
                    "actor's worker log (`/tmp/ray/session_latest/logs/worker-*`)." if task else
                    f"The log holds only the report of a process that died (`{short(line.text, 140)}` at {line.where()}), "
                    "not its own error: why it died is in that process's log or the node's kernel log (`dmesg -T`).",
                    0.6,
                    consequence=quote(line),
                    log_files=len(run.artifacts.logs),
                    **base,
                )
            return self.observe(
                "not_located",
                "No traceback and no fatal error line in the log: the crash cannot be located from it.",
                0.6,
                log_files=len(run.artifacts.logs),
                **base,
            )
        line, _order_, frames = min(fatal, key=lambda f: f[1])
        rank, node = rank_of(line), node_of(line)
        component, reason = _component_of_printer(line.source)
        return self.observe(
            "located",
            f"The job stopped on `{short(line.text, 140)}` at {line.where()}"
            + (f" on {line.source}" if line.source else "") + " (no traceback printed with it).",
            0.6,
            exception=short(line.text, 300),
            where=line.where(),
            line=quote(line),
            component=component,
            component_reason=reason,
            rank=rank,
            node=node,
            frame=frames[-1] if frames else None,
            count=len(fatal),
            ranks_hit=len({f[0].source for f in fatal}) or 1,
            **base,
        )
