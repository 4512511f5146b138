"""slime's own first-step checks: at rollout 0 the policy *is* the reference.

Before the first update the actor and the reference model hold the same weights, so
the guides' first numeric check is exact: `rollout/log_probs == rollout/ref_log_probs`
(KL = 0), `train/ppo_kl` and `train/kl_loss` = 0 at step 0 (slime's CI asserts
`< 1e-8`), and the per-token log-probs are small (`-1 < log_probs < 0` in CI).

- A difference at all means the two forward passes disagree on identical weights:
  typically non-deterministic kernels (fused attention under context parallelism;
  `--attention-backend flash`), or an MoE run without `--moe-permute-fusion`.
- A per-token |log_prob| far above 1 means the model computes something else than it
  was trained to: "very large values usually indicate a training configuration error".
- A value only somewhat above the SFT-loss baseline (e.g. 0.8 for an instruct model)
  means the data does not follow the model's chat template or cold-start distribution.

The two bars are one pair (`step1.logprob_elevated` 0.8, the guides' example;
`step1.logprob_extreme` 2.0, above the guide's typical chat fine-tuning loss), and the
entry graph's step-1 symptom uses the same pair.

Precedence: `logprob_extreme` (a wrong configuration makes every other number
meaningless), then `kl_nonzero`, then `logprob_elevated`, else `hold`. HF Trainer runs
only log `kl`; for them the check is `kl` at logged step 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from triage.anomaly import evidence_number
from triage.errors import Unavailable
from triage.finding import UNSEEN_OUTCOMES, Observation
from triage.probe import Cost, Probe
from triage.run.run import NEEDS_HELP
from triage.thresholds import threshold

if TYPE_CHECKING:
    from triage.run.run import Run


class Step1Params(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # sources and units: triage/thresholds.yaml
    kl_tol: float = threshold("step1.kl_tol")  # slime CI: ppo_kl < 1e-8 at step 0
    logprob_elevated: float = threshold("step1.logprob_elevated")  # the guides' instruct model off its template: 0.8
    logprob_extreme: float = threshold("step1.logprob_extreme")  # "extremely large": a configuration error


@dataclass
class Step1Readings:
    """The first-step numbers found in a run, with the metric each came from."""

    log_probs: tuple[str, float] | None = None  # (source, value) at rollout 0
    ref_log_probs: tuple[str, float] | None = None
    kls: list[tuple[str, int, float]] = field(default_factory=list)  # (source, step, value)
    resumed_at: dict[str, int] = field(default_factory=dict)  # kind -> first index when not 0

    def empty(self) -> bool:
        return self.log_probs is None and self.ref_log_probs is None and not self.kls

    def logprob_magnitude(self) -> float | None:
        return abs(self.log_probs[1]) if self.log_probs is not None else None

    def log_prob_gap(self) -> float | None:
        if self.log_probs is None or self.ref_log_probs is None:
            return None
        return abs(self.log_probs[1] - self.ref_log_probs[1])


def read_step1(run: Run) -> Step1Readings:
    """Collect rollout 0's log-probs and step 0's KL numbers (HF: `kl` at step 1)."""
    found = Step1Readings()
    metrics = run.metrics
    first_rollout = metrics.first("rollout")
    if first_rollout is not None:
        index, record = first_rollout
        if index != 0:
            found.resumed_at["rollout"] = index
        else:
            # the trainer's own log-probs only: `rollout/rollout_log_probs` is the engine's (slime's data.py logs both),
            # whose gap to the reference at rollout 0 is the train-inference mismatch, never 0 (THUDM/slime#1527:
            # log_probs equal to ref_log_probs at -0.22009, the engine's -0.21898)
            if "rollout/log_probs" in record:
                found.log_probs = ("rollout:rollout/log_probs", record["rollout/log_probs"])
            if "rollout/ref_log_probs" in record:
                found.ref_log_probs = ("rollout:rollout/ref_log_probs", record["rollout/ref_log_probs"])
            if "rollout/kl" in record:
                found.kls.append(("rollout:rollout/kl", 0, record["rollout/kl"]))
    first_step = metrics.first("step")
    if first_step is not None:
        index, record = first_step
        if index != 0:
            found.resumed_at["step"] = index
        else:
            for key in ("train/ppo_kl", "train/kl_loss"):
                if key in record:
                    found.kls.append((f"step:{key}", 0, record[key]))
    if first_rollout is None and first_step is None:
        # the HF Trainer's records, and ms-swift's (its GRPO trainer is TRL's: modelscope/ms-swift
        # swift/trainers/rlhf_trainer/grpo_trainer.py logs the same `kl`)
        for kind in ("hf", "swift"):
            kl = metrics.raw(kind, "kl")
            if kl is not None and len(kl) and int(kl.steps[0]) <= 1:
                found.kls.append((kl.source, int(kl.steps[0]), float(kl.values[0])))
                break
    return found


# The frameworks whose records `read_step1` reads (a run not yet named may be one of them).
READ_FROM = frozenset({"slime", "miles", "relax", "hf_trainer", "axolotl", "trl", "ms_swift", "unknown"})


def _bad(value: float, tol: float) -> bool:
    return not math.isfinite(value) or abs(value) >= tol


class Step1Invariants(Probe):
    """At the first step log_probs must equal ref_log_probs, KL must be 0 and |log_probs| small."""

    name = "step1_invariants"
    outcomes = ("hold", "kl_nonzero", "logprob_extreme", "logprob_elevated")
    needs = ("metrics",)
    cost = Cost.STATIC
    Params = Step1Params

    def examine(self, run: Run) -> Observation:
        p: Step1Params = self.params  # type: ignore[assignment]
        if run.metrics.empty():
            raise Unavailable("metrics", "the run has no metric records", NEEDS_HELP["metrics"])
        r = read_step1(run)
        if r.empty():
            if r.resumed_at:
                where = ", ".join(f"{kind} {i}" for kind, i in r.resumed_at.items())
                raise Unavailable(
                    "metrics",
                    f"the metrics start at {where} (a resumed run, or a log that begins part-way); the step-1 "
                    "invariants hold only at the first rollout of a fresh run",
                    "keep the log of the job's first rollout (`rollout 0:` and `step 0:` lines)",
                )
            fw = run.framework
            if fw not in READ_FROM:
                # verl logs its first update as `step:1` and recomputes log-probs over other micro-batches, so
                # slime's exact-zero bar would blame healthy runs (NOTES.md, Known limits): not slime's advice
                raise Unavailable(
                    "metrics",
                    f"the step-1 invariants are checked on a slime-family job's first rollout and step (`rollout 0:`, "
                    f"`step 0:`) and on the HF Trainer's first `kl`; this {fw} run's first records are not held to "
                    "their exact-zero bar (a first update that recomputes log-probs over other micro-batches is not "
                    "zero on a healthy run)",
                    f"none in a {fw} run's records: this check reads slime's and the HF Trainer's",
                )
            raise Unavailable(
                "metrics",
                "no rollout 0 log_probs / ref_log_probs and no step 0 ppo_kl / kl_loss in the metrics",
                "keep the job log from its start: slime prints `rollout 0: {...}` and `step 0: {...}`",
            )

        evidence: dict[str, Any] = {}
        if r.log_probs is not None:
            evidence["log_probs"] = {"metric": r.log_probs[0], "rollout": 0, "value": evidence_number(r.log_probs[1])}
        if r.ref_log_probs is not None:
            evidence["ref_log_probs"] = {"metric": r.ref_log_probs[0], "rollout": 0,
                                         "value": evidence_number(r.ref_log_probs[1])}
        gap = r.log_prob_gap()
        if gap is not None:
            evidence["log_prob_difference"] = evidence_number(gap)
        if r.kls:
            evidence["kl"] = [{"metric": src, "step": step, "value": evidence_number(v)} for src, step, v in r.kls]
        evidence["thresholds"] = {"kl_tol": p.kl_tol, "logprob_elevated": p.logprob_elevated,
                                  "logprob_extreme": p.logprob_extreme}

        magnitude = r.logprob_magnitude()
        if magnitude is not None and (not math.isfinite(magnitude) or magnitude >= p.logprob_extreme):
            return self.observe(
                "logprob_extreme",
                f"At rollout 0 the per-token log-prob is {r.log_probs[1]:.4g} ({r.log_probs[0]}), far beyond "
                f"{p.logprob_extreme:g} in magnitude: very large values usually indicate a training configuration error.",
                0.85,
                **evidence,
            )
        offending = []
        if gap is not None and _bad(gap, p.kl_tol):
            offending.append(f"|log_probs - ref_log_probs| = {gap:.3g} at rollout 0")
        offending += [f"{src.split(':', 1)[1]} = {v:.3g} at step {step}" for src, step, v in r.kls if _bad(v, p.kl_tol)]
        if offending:
            return self.observe(
                "kl_nonzero",
                f"The policy already differs from the reference before any update ({'; '.join(offending)}; "
                f"must be < {p.kl_tol:g}): the two forward passes disagree on identical weights.",
                0.85,
                **evidence,
            )
        if magnitude is not None and magnitude >= p.logprob_elevated:
            return self.observe(
                "logprob_elevated",
                f"At rollout 0 the per-token log-prob is {r.log_probs[1]:.4g}, above the {p.logprob_elevated:g} an "
                "instruct model reaches on its own distribution: the data may not follow the model's chat template.",
                0.65,
                **evidence,
            )
        checked = []
        if gap is not None:
            checked.append(f"log_probs == ref_log_probs (difference {gap:.3g})")
        if r.kls:
            checked.append("KL = 0 (" + ", ".join(src.split(":", 1)[1] for src, _s, _v in r.kls) + ")")
        if magnitude is not None:
            checked.append(f"|log_probs| = {magnitude:.3g} per token")
        # what the readings could not show: without rollout 0's log-probs, neither their size nor their gap to the
        # reference (THUDM/slime#2073 pasted `step 0:` alone: its KL of 0 says nothing of the log-probs)
        unseen = []
        if magnitude is None:
            unseen += ["logprob_extreme", "logprob_elevated"]
        if gap is None and not r.kls:
            unseen.append("kl_nonzero")
        if unseen:
            evidence[UNSEEN_OUTCOMES] = unseen
        return self.observe("hold", "The first-step invariants hold: " + "; ".join(checked) + ".", 0.8, **evidence)
