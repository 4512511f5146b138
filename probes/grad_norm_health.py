"""Is the gradient norm in its healthy range, spiking, or growing?

The axolotl guide's table: `grad_norm` healthy 0.001–1.0 for GRPO (0.1–10 for SFT);
"> 10.0 is unstable"; "spikes above 100 indicate instability"; occasional 0.0 values
are the zero-advantage skip and are fine. Two different failures hide behind "grad norm
is high", and they have different causes:

- `spikes`: isolated jumps far above the running level (robust z over the trailing
  median / MAD) that also leave the guide's healthy range (above 1.0), or any value
  above 100. A bump inside 0.001–1.0 is never a spike. One batch at a time: a bad sample, a
  numerically fragile module, or a learning rate at the edge.
- `sustained_growth`: the level itself moves up and stays (a change point on the log
  scale, or an upward Mann-Kendall trend ending above 10, or values above 10 on a
  large share of steps): the optimisation is diverging, typically a learning rate too
  high for the run, or data off the model's distribution.

Zeros are left out (the zero-advantage skip logs 0.0); NaN / Inf are the
`nonfinite_onset` probe's business and are skipped here.
"""

from __future__ import annotations

import re

import math

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, ConfigDict

from triage.anomaly import ChangePoint, Spike, change_point, evidence_number, find_spikes, median_mad, trend
from triage.errors import Unavailable
from triage.finding import Observation
from triage.health import CheckResult, unavailable
from triage.metrics import Series
from triage.probe import Cost, Probe
from triage.run.run import NEEDS_HELP
from triage.thresholds import count, threshold

if TYPE_CHECKING:
    from triage.run.run import Run


class GradNormParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # sources and units: triage/thresholds.yaml
    window: int = count("grad_norm.window")  # trailing records forming the running level
    spike_z: float = threshold("grad_norm.spike_robust_z")  # robust z above the trailing median
    spike_ratio: float = threshold("grad_norm.spike_ratio")  # ... and this many times the trailing median
    healthy_max: float = threshold("grad_norm.healthy_max")  # ... and above the guide's healthy range
    spike_abs: float = threshold("grad_norm.spike_abs")  # the guide: "spikes above 100 indicate instability"
    unstable: float = threshold("grad_norm.unstable")  # the guide: "> 10.0 is unstable"
    unstable_fraction: float = threshold("grad_norm.unstable_fraction")  # "exceeds 10.0 regularly"
    growth_ratio: float = threshold("grad_norm.growth_ratio")  # a level shift this large counts as growth
    trend_alpha: float = threshold("grad_norm.trend_alpha")
    trend_min_tau: float = threshold("grad_norm.trend_min_tau")
    min_records: int = count("health.grad_norm.min_records")


@dataclass
class GradNormAssessment:
    """The verdict on one grad_norm series and the numbers behind it."""

    status: str  # healthy | spikes | sustained_growth
    source: str
    records: int
    median: float
    mad: float
    spikes: list[Spike] = field(default_factory=list)
    change: ChangePoint | None = None
    onset_step: int | None = None  # where the instability starts (growth or first spike)
    unstable_fraction: float = 0.0
    reason: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    def evidence(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "metric": self.source,
            "records": self.records,
            "median": evidence_number(self.median),
            "mad": evidence_number(self.mad),
            "unstable_fraction": evidence_number(self.unstable_fraction),
        }
        if self.spikes:
            out["spikes"] = [s.as_evidence() for s in self.spikes[:10]]
            out["spike_count"] = len(self.spikes)
        if self.change is not None:
            out["change_point"] = self.change.as_evidence()
        if self.onset_step is not None:
            out["onset_step"] = self.onset_step
        out.update(self.details)
        return out


def _spikes_reason(spikes: list[Spike], med: float, v: np.ndarray, st: np.ndarray, at: str, p: GradNormParams) -> str:
    """The spikes found, the largest with how far over its running level (or over the guide's absolute bar), and the
    series' highest value where that is no spike (reached once the running level had risen to it), so that "the
    largest" is not read as the series' maximum (jianghoucheng/Agent_On_Policy_Distillation's verl run: spikes to 13.6
    at step 39, then 15.3 at step 43 against a level already near it)."""
    top = max(spikes, key=lambda s: s.value)
    reason = (f"{len(spikes)} grad_norm spike{'s' if len(spikes) > 1 else ''} over a median of {med:.3g}; "
              f"the largest {top.value:.3g} at {at} {top.step}"
              + (f" ({top.ratio:.1f}x the running level)" if math.isfinite(top.ratio) else
                 f" (above the guide's absolute bar of {p.spike_abs:g})"))
    peak = int(np.argmax(v))
    if float(v[peak]) > top.value:
        reason += f"; the series peaks at {float(v[peak]):.3g} at {at} {int(st[peak])}, by then no spike over its running level"
    return reason


def _loss_falls_across(loss: Series | None, step: int) -> bool:
    """The loss logged beside the grad norm is lower after `step` than before it: the model is learning through the
    shift (a reward model's grad norm rising from 0.27 to 1.2 in its first records while its loss fell from 0.69 to
    0.15: YYT-t's DistilBERT reward-model run), which a divergence's grad growth never is."""
    if loss is None or not len(loss):
        return False
    ok = np.isfinite(loss.values)
    before, after = loss.values[ok & (loss.steps < step)], loss.values[ok & (loss.steps >= step)]
    return bool(before.size and after.size and float(np.median(after)) < float(np.median(before)))


def assess_grad_norm(series: Series, p: GradNormParams, rl: bool = True,
                     loss: Series | None = None) -> GradNormAssessment | None:
    """Classify a grad_norm series; None when it has fewer than `min_records` usable values.

    The absolute bars (healthy up to 1, unstable above 10, a spike above 100) are the axolotl guide's for GRPO;
    for a run that is not RL (`rl` False: SFT, pre-training, whose pre-clip norms of 5 to 50 are ordinary) only the
    run's own level counts: a shift to `growth_ratio` times it, a climb to that multiple, a spike over it; a shift or
    climb through which its `loss` (an SFT-style loss logged beside it) falls is learning, not growth.
    """
    values = series.values.astype(np.float64)
    steps = series.steps
    at = series.step_word  # (the HF Trainer's printed dicts are numbered by record: "record 169", not "step 169")
    usable = np.isfinite(values) & (values > 0)
    if int(usable.sum()) < p.min_records:
        return _beyond_the_absolute_bar(series, usable, p) if rl else None
    v, st = values[usable], steps[usable]
    med, mad = median_mad(v)
    unstable_frac = float(np.mean(v > p.unstable))
    a = GradNormAssessment("healthy", series.source, int(v.size), med, mad, unstable_fraction=unstable_frac)

    cp = change_point(np.log10(v), st)
    if cp is not None:
        cp = ChangePoint(cp.index, cp.step, 10 ** cp.before, 10 ** cp.after, cp.gain)
        a.change = cp
    t = trend(np.log10(v), st)
    a.details["trend"] = t.as_evidence()
    tail_median = float(np.median(v[-max(3, v.size // 5) :]))
    a.details["final_median"] = evidence_number(tail_median)

    if cp is not None and (cp.after > p.unstable or not rl) and cp.after >= p.growth_ratio * cp.before \
            and (rl or not _loss_falls_across(loss, cp.step)):
        a.status, a.onset_step = "sustained_growth", cp.step
        a.reason = (f"grad_norm shifts from a median of {cp.before:.3g} to {cp.after:.3g} at {at} {cp.step} "
                    f"and stays there" + (f" (above {p.unstable:g})" if rl else ""))
        return a
    if not rl:
        first_median = float(np.median(v[: max(3, v.size // 5)]))
        if t.rising(alpha=p.trend_alpha, min_tau=p.trend_min_tau) and tail_median >= p.growth_ratio * first_median \
                and not _loss_falls_across(loss, int(st[min(v.size - 1, max(3, v.size // 5))])):
            a.status, a.onset_step = "sustained_growth", int(st[0])
            a.reason = (f"grad_norm climbs steadily (Kendall tau {t.tau:.2f}) from a median of {first_median:.3g} to "
                        f"{tail_median:.3g}")
            return a
        spikes = find_spikes(v, st, window=p.window, z_threshold=p.spike_z, min_ratio=p.spike_ratio)
        if spikes:
            a.status, a.spikes, a.onset_step = "spikes", spikes, spikes[0].step
            a.reason = _spikes_reason(spikes, med, v, st, at, p)
            return a
        a.reason = (f"grad_norm stays at a median of {med:.3g} (max {float(v.max()):.3g}) with no spike or upward "
                    "shift over its own level")
        return a
    if unstable_frac >= p.unstable_fraction:
        first = int(st[np.argmax(v > p.unstable)])
        a.status, a.onset_step = "sustained_growth", first
        zeros = int(np.sum(np.isfinite(values) & (values == 0)))
        # (the share is of the records with a gradient: JuncyLu/trl_DAPO's 7 non-zero of 49, the other 42 exactly 0)
        a.reason = (f"grad_norm exceeds {p.unstable:g} on {unstable_frac:.0%} of {v.size} records "
                    f"(median {med:.3g}), first at {at} {first}"
                    + (f"; {zeros} more records are exactly 0, no update on those steps" if zeros else ""))
        return a
    if t.rising(alpha=p.trend_alpha, min_tau=p.trend_min_tau) and tail_median > p.unstable:
        a.status = "sustained_growth"
        a.onset_step = int(st[np.argmax(v > p.unstable)]) if (v > p.unstable).any() else int(st[0])
        a.reason = (f"grad_norm climbs steadily (Kendall tau {t.tau:.2f}) to a final median of {tail_median:.3g}, "
                    f"above {p.unstable:g}")
        return a

    spikes = find_spikes(v, st, window=p.window, z_threshold=p.spike_z, min_ratio=p.spike_ratio,
                         abs_threshold=p.spike_abs, floor=p.healthy_max)
    if spikes:
        a.status, a.spikes, a.onset_step = "spikes", spikes, spikes[0].step
        a.reason = _spikes_reason(spikes, med, v, st, at, p)
        return a
    a.reason = f"grad_norm stays at a median of {med:.3g} (max {float(v.max()):.3g}) with no spike or upward shift"
    return a


def _beyond_the_absolute_bar(series: Series, usable: np.ndarray, p: GradNormParams) -> GradNormAssessment | None:
    """Too few records for a level or a trend; a value above the guide's absolute bar ("spikes above 100
    indicate instability") needs neither, so a short paste with one is still a spike. None otherwise."""
    v, st = series.values[usable].astype(np.float64), series.steps[usable]
    over = v > p.spike_abs
    if not over.any():
        return None
    med = float(np.median(v))
    spikes = [Spike(int(i), int(st[i]), float(v[i]), med, float("nan"), float(v[i]) / med if med > 0 else float("inf"))
              for i in np.flatnonzero(over)]
    a = GradNormAssessment("spikes", series.source, int(v.size), med, 0.0, unstable_fraction=float(np.mean(v > p.unstable)))
    a.spikes, a.onset_step = spikes, spikes[0].step
    top = max(spikes, key=lambda x: x.value)
    a.reason = (f"grad_norm reaches {top.value:.3g} at {series.step_word} {top.step}, above the guide's absolute bar of {p.spike_abs:g} "
                f"({len(spikes)} of {v.size} records; too few records to judge its level or trend)")
    return a


def usable_records(series: Series) -> int:
    """Finite, non-zero grad_norm records (0.0 is the zero-advantage skip)."""
    return int(np.sum(np.isfinite(series.values) & (series.values > 0)))


def evaluate(run: Run, p: GradNormParams) -> tuple[CheckResult, GradNormAssessment | None]:
    """The grad-norm health check and the assessment behind it (None when it could not run)."""
    series = run.metrics.get("grad_norm")
    if series is None:
        return unavailable("grad_norm", 0, p.min_records,
                           "the run logged no grad_norm (train/grad_norm, actor/grad_norm or grad_norm)"), None
    a = assess_grad_norm(series, p, rl=rl_run(run), loss=loss_with_level(run))
    if a is None:
        n = usable_records(series)
        return unavailable("grad_norm", n, p.min_records,
                           f"only {n} usable grad_norm records ({series.source}); {p.min_records} are needed"), None
    return CheckResult("grad_norm", True, a.status == "healthy", a.records, p.min_records, a.reason), a


def check(run: Run, params: GradNormParams | None = None) -> CheckResult:
    """Is the grad norm free of spikes and growth, over enough records to tell?"""
    return evaluate(run, params or GradNormParams())[0]


@dataclass
class LossSpikes:
    source: str
    spikes: list[Spike]
    median: float


# metrics only a reinforcement-learning run logs (a reward, a KL, a policy-gradient loss)
RL_METRICS = ("reward", "raw_reward", "reward_std", "kl", "ppo_kl", "kl_loss", "pg_loss", "rollout_log_probs",
              "advantages", "frac_reward_zero_std", "clip_ratio")


# frameworks that only do RL post-training (triage/frameworks/)
RL_FRAMEWORKS = ("slime", "miles", "relax", "verl", "openrlhf")


def rl_run(run: Run) -> bool:
    """The run is RL post-training (an RL framework's, or it logs what only RL logs): the guides' RL ranges apply
    to it; an SFT or pre-training run's grad norms and learning rates have others."""
    return run.framework in RL_FRAMEWORKS or any(run.metrics.get(name) is not None for name in RL_METRICS)


# what an RL run logs under any name, and what its arguments name: the words a supervised run's records and
# arguments never hold (a reward, a rollout, a completion, an advantage, a KL, a number of generations per prompt)
_RL_WORDS = re.compile(r"reward|rollout|completion|advantage|(?:^|[/_])kl(?:$|[/_])|generation|critic|ppo|grpo", re.I)
_RL_TRAINERS = re.compile(r"grpo|ppo|rloo|reinforce|gkd|dapo|gspo|remax", re.I)
# offline preference training's own records (TRL's DPOTrainer, and the ORPO / CPO / KTO trainers after it; ms-swift's
# `--rlhf_type dpo` logs them as TRL does): the implicit rewards and log-probs of fixed chosen / rejected pairs, no rollout
PREFERENCE_KEYS = re.compile(r"^(?:rewards|logps|logits)/(?:chosen|rejected|margins|accuracies)$")


def preference_run(run: Run) -> bool:
    """The run trains on fixed preference pairs (DPO and its kin): its records hold TRL's pair metrics."""
    table = run.metrics.table
    return any(PREFERENCE_KEYS.match(key) for kind in table.kinds() for key in table.keys(kind))


def supervised_run(run: Run) -> bool:
    """The run trains on fixed targets (SFT, pre-training) or fixed preference pairs (DPO: `rewards/chosen` is an
    implicit reward of a pair, not a rollout's): no RL framework, no RL metric under any name, no RL
    argument, and a loss read over enough records. A reward or truncation check has nothing to read there, so it
    is no health check of the run (a completed SFT run of ms-swift could never be `healthy`:
    modelscope/ms-swift#4509's 4900 of 4900 steps). Anything RL-shaped keeps the RL checks required: a reward the
    triage cannot name must not pass for its absence."""
    if rl_run(run) or run.framework in ("nemo_rl", "areal"):
        return False
    table = run.metrics.table
    if any(_RL_WORDS.search(key) and not PREFERENCE_KEYS.match(key) for kind in table.kinds() for key in table.keys(kind)):
        return False
    args = run.args if run.has("args") else {}
    if any(_RL_WORDS.search(name) for name in args) or _RL_TRAINERS.search(str(args.get("rlhf_type") or "")):
        return False
    loss = run.metrics.get("loss")
    return loss is not None and len(loss.finite()) >= count("loss.min_records")


def loss_with_level(run: Run) -> Series | None:
    """The run's loss where a multiple of it means something: an SFT-style cross-entropy. An RL run's loss is a
    policy-gradient objective plus a KL penalty that rises from 0 as the policy moves (TRL's GRPO loss is beta x KL:
    0.04 x 0.1636 = 0.006544 at step 10 of Sunshine535/nips-grpo-dynamics' exact_seed46.log, read as a 102x jump)."""
    return None if rl_run(run) else run.metrics.get("loss")


def loss_spikes(series: Series, window: int = count("grad_norm.window"), min_ratio: float = threshold("loss.spike_ratio"),
                z: float = threshold("loss.spike_robust_z")) -> LossSpikes | None:
    """Loss jumps of 2x or more over its running level (the axolotl guide's "2–10x").

    Only for a loss that is a positive level (SFT-style cross-entropy); a policy-gradient
    loss centred on zero has no level to be a multiple of, so it yields None.
    """
    v = series.values[np.isfinite(series.values)]
    if (v.size < count("loss.min_records") or float(np.mean(v > 0)) < threshold("loss.positive_share")
            or float(np.median(v)) < threshold("loss.min_level")):
        return None
    ok = np.isfinite(series.values)
    spikes = find_spikes(series.values[ok], series.steps[ok], window=window, z_threshold=z, min_ratio=min_ratio)
    return LossSpikes(series.source, spikes, float(np.median(v)))


class GradNormHealth(Probe):
    """grad_norm against the guides' healthy range: spikes (robust z, > 100) or sustained growth (> 10)."""

    name = "grad_norm_health"
    outcomes = ("healthy", "spikes", "sustained_growth")
    needs = ("metrics",)
    cost = Cost.STATIC
    Params = GradNormParams

    def examine(self, run: Run) -> Observation:
        p: GradNormParams = self.params  # type: ignore[assignment]
        result, a = evaluate(run, p)
        if a is None:
            raise Unavailable("metrics", result.detail, NEEDS_HELP["metrics"])
        confidence = {"healthy": 0.8, "spikes": 0.75, "sustained_growth": 0.85}[a.status]
        summary = a.reason + "."
        return self.observe(a.status, summary, confidence, check=result.as_evidence(), **a.evidence())
