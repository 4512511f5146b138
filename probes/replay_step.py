"""Replay one training step on the saved rollout, twice, and hold it against the run's own numbers.

The slime / Relax guides' step-1 checks: at the first step `log_probs` must equal
`ref_log_probs` exactly (KL = 0), and when they do not "it is usually caused by certain
non-deterministic kernels". Their tool is separate debugging of the training side:
`--load-debug-rollout-data` fixes the step's inputs to a saved rollout. This probe
replays that step twice and answers:

- `nondeterministic`: the two replays of the same step differ bitwise (the evidence
  gives the largest per-token log-prob difference between them);
- `kl_nonzero`: each replay is reproducible, but the actor's log-probs differ from the
  reference's at step 1: the policy and the reference hold different weights
  (the evidence names the tensors that differ when the checkpoints are small enough
  to compare);
- `differs_from_log`: the replay is self-consistent but does not reproduce what the
  run logged (per-token log-probs of its train dump, `rollout R` and `step N` lines);
- `deterministic_match`: reproducible, KL = 0, and the run's numbers reproduced.

Two ways to replay, the evidence says which ran:
- launched: the run's own job restarted with `--load-debug-rollout-data` (preferred
  whenever the job can be relaunched here, because a fault inside the framework's
  trainer, a kernel say, only shows when the framework's own code runs);
- in-process: the HF model rebuilt from the run's config and weights, on CPU (or a GPU
  for models too big for a CPU replay), recomputing log-probs, reference log-probs,
  the GRPO loss and its gradient norm with the run's loss settings.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict

from triage.errors import BadInput, TriageError, Unavailable
from triage.finding import Observation
from triage.probe import Cost, Probe
from triage.replay import launch as launching
from triage.replay.logged import Logged, close, dumped_rollouts, logged_for
from triage.replay.step import bitwise_equal, max_abs_diff

if TYPE_CHECKING:
    import torch

    from triage.run.run import Run

STEP_KEYS = ("train/loss", "train/pg_loss", "train/grad_norm", "train/kl_loss", "train/entropy_loss", "train/ppo_kl")
ROLLOUT_KEYS = ("rollout/log_probs", "rollout/ref_log_probs")


class ReplayStepParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: Literal["auto", "launch", "in_process"] = "auto"
    rollout_id: int | None = None  # default: the first rollout the run dumped (its step 1)
    timeout_s: float = 300.0  # per launched replay
    rel_tol: float | None = None  # against the logged values; default by replay kind and dtype
    abs_tol: float | None = None
    compare_weights_max_bytes: int = 2 << 30  # name differing tensors only when both checkpoints are this small


def tolerance(kind: str, dtype_bits: int, p: ReplayStepParams) -> tuple[float, float]:
    """(rel, abs) tolerance against the run's logged numbers.

    A launched replay runs the run's code on the run's inputs: anything beyond float
    formatting noise is a difference. An in-process replay runs other kernels (HF
    attention, another reduction order), so it is held to the dtype's round-off.
    """
    if kind == "launched":
        rel, abs_ = 1e-5, 1e-6
    elif dtype_bits >= 32:
        rel, abs_ = 2e-3, 2e-3
    else:
        rel, abs_ = 5e-2, 5e-2
    return (p.rel_tol if p.rel_tol is not None else rel, p.abs_tol if p.abs_tol is not None else abs_)


def _fmt(x: float) -> float:
    return float(f"{x:.6g}") if math.isfinite(x) else x


class Replay:
    """The two replays of one step, whichever way they ran."""

    def __init__(self, kind: str, how: str, weights: str) -> None:
        self.kind = kind  # "launched" | "in_process"
        self.how = how
        self.weights = weights
        self.log_probs: list[list[torch.Tensor] | None] = []
        self.ref_log_probs: list[torch.Tensor] | None = None
        self.rollout: list[dict[str, float]] = []
        self.step: list[dict[str, float]] = []
        self.wall_s: list[float] = []
        self.dtype_bits = 32


class ReplayStep(Probe):
    """Replay the first training step on the saved rollout twice: determinism, KL at step 1, the logged values."""

    name = "replay_step"
    outcomes = ("deterministic_match", "nondeterministic", "kl_nonzero", "differs_from_log")
    needs = ("rollout_dump",)
    cost = Cost.CPU
    Params = ReplayStepParams
    # relaunches the run's job (mode launch/auto) only with --allow-relaunch; the in-process replay runs no
    # code from the run (safetensors / weights_only, trust_remote_code=False), so `auto` falls back to it
    executes_run_code = True
    how_to_get = {"rollout_dump": "rerun with `--dump-details <dir>`: the replay trains on the saved rollout"}

    def examine(self, run: Run) -> Observation:
        p: ReplayStepParams = self.params  # type: ignore[assignment]
        dumps = dumped_rollouts(run)
        first = min(dumps)
        rid = p.rollout_id if p.rollout_id is not None else first
        if rid not in dumps:
            raise Unavailable("rollout_dump", f"no rollout dump for rollout {rid} (dumped: {sorted(dumps)})",
                              "rerun with `--dump-details <dir>`")
        why_not_launched = not_launched_command = None
        replay: Replay | None = None
        if p.mode in ("auto", "launch"):
            try:
                spec = launching.job_spec(run)
            except Unavailable as exc:
                if p.mode == "launch":
                    raise
                why_not_launched = exc.reason
                not_launched_command = exc.command
            else:
                replay = self._launched(run, spec, rid, first, p)
        if replay is None:
            replay = self._in_process(run, rid, dumps[rid], first)
        evidence: dict[str, Any] = {"replay": replay.kind, "how": replay.how, "rollout_id": rid,
                                    "weights": replay.weights, "replay_wall_s": [round(w, 2) for w in replay.wall_s]}
        if why_not_launched:
            evidence["not_launched_because"] = why_not_launched
            if not_launched_command:
                evidence["not_launched_command"] = not_launched_command
        return self._judge(run, replay, rid, first, p, evidence)

    # -- the two ways to replay ----------------------------------------------------------------
    def _launched(self, run: Run, spec: launching.JobSpec, rid: int, first: int, p: ReplayStepParams) -> Replay:
        weights = launching.weights_for_rollout(run, rid, first)
        with launching.scratch_dir("replay") as tmp:
            results = []
            for tag in ("a", "b"):
                try:
                    results.append(launching.run_replay(run, rid, Path(tmp) / tag, spec=spec,
                                                        timeout_s=p.timeout_s, first_rollout=first))
                except launching.LaunchFailed as exc:
                    raise TriageError(f"the launched replay failed: {exc}") from None
        replay = Replay("launched", results[0].command, weights.label)
        for r in results:
            replay.log_probs.append(r.log_probs)
            replay.rollout.append(r.rollout)
            replay.step.append(r.first_step or {})
            replay.wall_s.append(r.wall_s)
        replay.ref_log_probs = results[0].ref_log_probs
        import torch

        from triage.replay.model import run_dtype

        replay.dtype_bits = torch.finfo(run_dtype(run)).bits
        return replay

    def _in_process(self, run: Run, rid: int, dump_path: Path, first: int) -> Replay:
        import torch
        from triage.replay import model as rmodel
        from triage.replay import step as rstep

        config_dir = rmodel.hf_config_dir(run)
        dtype = rmodel.run_dtype(run)
        device = rmodel.choose_device(rmodel.parameter_count(config_dir), dtype)
        dump = run.rollout_dump(dump_path)
        cfg = rstep.LossConfig.from_run(run)
        samples = rstep.samples_of(dump, cfg.reward_key)
        if not samples:
            raise Unavailable("rollout_dump", f"{dump_path.name} holds no samples", "rerun with `--dump-details <dir>`")
        positions = rstep.step_indices(len(samples), cfg, 0)
        adv = rstep.advantages(samples, cfg)
        try:
            ref_model = rmodel.load_model(config_dir, rmodel.reference_source(run), dtype, device)
            ref_lp = rstep.log_probs(ref_model.model, samples, cfg)
            del ref_model
            actor = rmodel.load_model(config_dir, rmodel.source_for_rollout(run, rid, first), dtype, device)
        except BadInput as exc:
            raise Unavailable("checkpoint", str(exc),
                              "keep the run's --ref-load / --save checkpoints reachable") from None
        replay = Replay("in_process", actor.describe(), actor.source.describe())
        replay.dtype_bits = torch.finfo(dtype).bits
        replay.ref_log_probs = ref_lp
        for _ in range(2):
            t0 = time.monotonic()
            lp = rstep.log_probs(actor.model, samples, cfg)
            result = rstep.train_step(actor.model, samples, positions, lp, ref_lp, adv, cfg)
            replay.wall_s.append(time.monotonic() - t0)
            replay.log_probs.append(lp)
            replay.step.append(result.metrics())
            replay.rollout.append({"rollout/log_probs": rstep.rollout_means(lp, samples),
                                   "rollout/ref_log_probs": rstep.rollout_means(ref_lp, samples)})
        return replay

    # -- the verdict ------------------------------------------------------------------------------
    def _judge(self, run: Run, replay: Replay, rid: int, first: int, p: ReplayStepParams,
               evidence: dict[str, Any]) -> Observation:
        (lp_a, lp_b), (step_a, step_b) = replay.log_probs, replay.step
        differs = []
        if lp_a is not None and lp_b is not None:
            if not bitwise_equal(lp_a, lp_b):
                differs.append("log_probs")
                evidence["replay_log_prob_max_abs_diff"] = max_abs_diff(lp_a, lp_b)
        for key in STEP_KEYS:
            a, b = step_a.get(key), step_b.get(key)
            if a is not None and b is not None and not (a == b or (math.isnan(a) and math.isnan(b))):
                differs.append(key)
                evidence.setdefault("replay_step_values", {})[key] = [a, b]
        for key in ROLLOUT_KEYS:
            a, b = replay.rollout[0].get(key), replay.rollout[1].get(key)
            if a is not None and b is not None and a != b and not (math.isnan(a) and math.isnan(b)):
                differs.append(key)
                evidence.setdefault("replay_rollout_values", {})[key] = [a, b]
        if differs:
            evidence["differs_between_replays"] = differs
            diff = evidence.get("replay_log_prob_max_abs_diff")
            tail = f" (largest per-token log-prob difference {diff:.3g})" if diff is not None else ""
            return self.observe(
                "nondeterministic",
                f"Two {replay.kind.replace('_', '-')} replays of rollout {rid}'s first step differ bitwise in "
                f"{', '.join(differs[:3])}{tail}: the step runs non-deterministic kernels.",
                0.9, **evidence)

        step1 = rid == first
        if step1 and lp_a is not None and replay.ref_log_probs is not None:
            if not bitwise_equal(lp_a, replay.ref_log_probs):
                d = max_abs_diff(lp_a, replay.ref_log_probs)
                evidence["log_probs_vs_ref_max_abs_diff"] = d
                evidence["rollout_log_probs"] = replay.rollout[0].get("rollout/log_probs")
                evidence["rollout_ref_log_probs"] = replay.rollout[0].get("rollout/ref_log_probs")
                tensors = self._differing_weights(run, first, p)
                if tensors:
                    evidence["weights_differ"] = tensors
                who = f"; tensors that differ: {', '.join(t['name'] for t in tensors[:3])}" if tensors else ""
                return self.observe(
                    "kl_nonzero",
                    f"The replay is reproducible, but at step 1 the actor's log-probs differ from the reference's "
                    f"(largest per-token difference {d:.3g}): the policy and reference weights differ{who}.",
                    0.85, **evidence)

        rel, abs_ = tolerance(replay.kind, replay.dtype_bits, p)
        evidence["tolerance"] = {"rel": rel, "abs": abs_}
        logged = logged_for(run, rid)
        mismatches, compared = self._against_log(replay, logged, rel, abs_)
        evidence["compared_with_log"] = compared
        if mismatches:
            evidence["mismatches"] = mismatches
            first_m = mismatches[0]
            return self.observe(
                "differs_from_log",
                f"The replay of rollout {rid} is reproducible but does not reproduce the run's logged "
                f"{first_m['what']} (replay {first_m['replay']}, logged {first_m['logged']}).",
                0.75, **evidence)
        if not compared:
            evidence["note"] = "the run logged no values for this step to compare with"
        return self.observe(
            "deterministic_match",
            f"Two replays of rollout {rid}'s first step are bitwise equal"
            + (", log_probs equal ref_log_probs" if step1 else "")
            + (f" and they reproduce the run's logged {', '.join(compared[:3])}" if compared else "")
            + ".",
            0.85 if compared else 0.6, **evidence)

    def _against_log(self, replay: Replay, logged: Logged, rel: float, abs_: float
                     ) -> tuple[list[dict[str, Any]], list[str]]:
        mismatches: list[dict[str, Any]] = []
        compared: list[str] = []
        lp = replay.log_probs[0]
        for what, mine, theirs in (("per-token log_probs", lp, logged.log_probs),
                                   ("per-token ref_log_probs", replay.ref_log_probs, logged.ref_log_probs)):
            if mine is None or theirs is None or len(mine) != len(theirs):
                continue
            compared.append(what)
            d = max_abs_diff(mine, theirs)
            scale = max((float(t.abs().max()) for t in theirs if t.numel()), default=0.0)
            if not d <= abs_ + rel * scale:
                mismatches.append({"what": what, "max_abs_diff": d, "replay": f"max abs diff {d:.3g}",
                                   "logged": logged.train_dump, "tolerance": abs_ + rel * scale})
        for source, mine, theirs in (("rollout", replay.rollout[0], logged.rollout),
                                     ("step", replay.step[0], logged.step)):
            keys = ROLLOUT_KEYS if source == "rollout" else STEP_KEYS
            for key in keys:
                a, b = mine.get(key), theirs.get(key)
                if a is None or b is None:
                    continue
                compared.append(key)
                if not close(a, b, rel, abs_):
                    line = f"{source} {logged.rollout_id if source == 'rollout' else logged.step_index}"
                    mismatches.append({"what": key, "replay": _fmt(a), "logged": _fmt(b), "line": line})
        return mismatches, compared

    def _differing_weights(self, run: Run, first: int, p: ReplayStepParams) -> list[dict[str, Any]]:
        """Which tensors differ between the actor's initial weights and the reference, when cheap."""
        from triage.replay.model import initial_source, reference_source, weight_differences

        try:
            return weight_differences(initial_source(run), reference_source(run), p.compare_weights_max_bytes)
        except (TriageError, OSError, ValueError, RuntimeError):
            return []
