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
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from probes.error_signatures import SignatureMatch, quote, scan
from triage.errors import TriageError, Unavailable
from triage.finding import Observation
from triage.formats.log_index import LogLine
from triage.probe import Cost, Probe

if TYPE_CHECKING:
    from triage.run.run import Run

LOGPROB_TIMERS = ("log_probs", "ref_log_probs", "compute_log_prob", "compute_ref_log_prob", "actor_log_probs")
TRAIN_TIMERS = ("actor_train", "train_step", "critic_train")
SWITCH_TIMERS = ("update_weights", "wake_up", "sleep", "onload", "offload", "onload_weights", "ref_model_update")

ENGINE_SOURCE = re.compile(r"sglang|SGLang|Scheduler|TpModelWorker|DetokenizerManager", re.I)
ENGINE_TEXT = re.compile(r"mem[-_]fraction[-_]static|Scheduler hit an exception|KV cache|Prefill out of memory|Decode out of memory")
ENGINE_FRAME = re.compile(r"sglang/srt/|sglang\\srt\\")
LOGPROB_FRAME = re.compile(
    r"in (compute_log_prob|compute_ref_log_prob|_get_per_token_logps\w*|get_per_token_logps\w*|"
    r"compute_logprobs?|ref_log_probs?|_compute_log_probs?|forward_only)\b"
)
SWITCH_FRAME = re.compile(
    r"in (update_weights\w*|wake_up|sleep|onload\w*|offload\w*|resume_memory_occupation|"
    r"release_memory_occupation|resume|update_weights_from_tensor)\b|torch_memory_saver"
)
TRAIN_FRAME = re.compile(r"in (train_step|train_one_step|forward_backward\w*|backward|step|training_step|compute_loss)\b")


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


def _phase_from_frames(frames: tuple[str, ...]) -> str | None:
    # The innermost frame that names a phase decides: frames run outermost first.
    for frame in reversed(frames):
        if ENGINE_FRAME.search(frame):
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


def _last_event(run: Run, oom: SignatureMatch) -> LogLine | None:
    """The last phase marker the log kept before the OOM line in the same file (weights update,
    memory release / resume, Relax's training-step line)."""
    before = [
        line for line in run.log.notable
        if line.tag in PHASE_OF_EVENT and line.path == oom.line.path and line.line_no < oom.line.line_no
        and not TIMER_END.search(line.text)  # a phase that finished says nothing about the next one
    ]
    return max(before, key=lambda line: line.line_no) if before else None


def _in_engine(oom: SignatureMatch) -> bool:
    line = oom.line
    return bool(
        (line.source and ENGINE_SOURCE.search(line.source))
        or ENGINE_TEXT.search(line.text)
        or oom.signature.id == "sglang_kv_cache_oom"
        or any(ENGINE_FRAME.search(f) for f in oom.frames)
    )


class OomContext(Probe):
    """Where the CUDA OOM happened: inference engine, log-prob pass, first phase switch, or train step."""

    name = "oom_context"
    outcomes = ("engine_side", "logprob_pass", "phase_switch", "training_step")
    needs = ("log",)
    cost = Cost.STATIC

    def examine(self, run: Run) -> Observation:
        ooms = sorted(scan(run.log).of_outcome("cuda_oom"), key=lambda m: m.order)
        if not ooms:
            raise Unavailable("log", "no CUDA out-of-memory error in the log, so there is no OOM to place")
        oom = ooms[0]
        timers = _open_timers(run)
        last_step = _last_index(run, "step")
        last_rollout = _last_index(run, "rollout")
        colocated = _colocated(run)
        by_timers = _phase_from_timers(timers)
        by_frames = _phase_from_frames(oom.frames)
        event = _last_event(run, oom)
        by_event = PHASE_OF_EVENT[event.tag] if event is not None and event.tag else None
        in_engine = _in_engine(oom)
        evidence: dict[str, Any] = {
            "line": quote(oom.line),
            "frames": list(oom.frames[-8:]),
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
        after = (
            f"after step {last_step}" if last_step is not None else "before any train step finished"
        )

        stepped = last_step is not None
        # Witnesses in order of trust: timers, then frames, then the last phase marker line.
        switching = (by_timers or by_frames or by_event) == "phase_switch"
        first_switch = last_rollout is None or last_rollout <= 0
        if colocated and stepped and (switching or (in_engine and first_switch)):
            evidence["switch"] = "first" if first_switch else "later"
            what = "weights were being moved between training and the engine" if switching else "the engine resumed for the next rollout"
            return self.observe(
                "phase_switch",
                f"CUDA OOM at the {'first ' if first_switch else ''}switch from training back to rollout in a colocated run "
                f"({what}, {after}) at {where}: memory is not freed or restored between phases.",
                0.85 if first_switch else 0.7,
                **evidence,
            )
        if in_engine or by_frames == "engine_side":
            return self.observe(
                "engine_side",
                f"CUDA OOM inside the SGLang engine during generation at {where}, {after}.",
                0.85,
                **evidence,
            )
        phase = by_timers or by_frames or by_event
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
        return self.observe(
            "training_step",
            f"CUDA OOM in the training step at {where}, {after}"
            + ("." if confident else " (no timer or frame names a narrower phase)."),
            0.8 if confident else 0.5,
            **evidence,
        )
