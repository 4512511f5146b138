"""Is the learning rate behind the instability (or the plateau)?

The guides' signs of a learning rate too high: grad-norm spikes or growth that begin
when the warmup ends and the LR reaches its peak, loss spikes that track the LR
schedule, divergence after good early steps. And of one too low: "loss stops
decreasing early in training, well above expected values" with tiny updates.
Typical values: full fine-tuning 1e-5 to 5e-5 for SFT, around 1e-6 for RL
post-training (slime's and TRL's GRPO defaults); LoRA 1e-4 to 3e-4.

Outcomes, first that applies:
- `too_high`: instability (grad_norm sustained growth or spikes, loss spikes, NaN/Inf)
  after at least `min_good_records` good records, and either it begins within the
  window around the end of warmup, or the grad norm tracks the LR (rank correlation),
  or the peak LR is above what is typical for the run's kind of fine-tuning. Where the
  run's own grad-norm level is above the guide's absolute range from its first step (a
  small model, or per-token sums), the onset is read relative to the run: the first
  record at least `growth_ratio` times the level of its first `min_good_records` non-zero
  records;
- `too_low`: the peak LR is below typical and the run plateaus (the reward does not
  improve / the loss does not fall) while the policy barely moves (KL stays ~0);
- `plausible`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, ConfigDict

from triage.anomaly import evidence_number, head, median_mad, tail, trend
from triage.errors import Unavailable
from triage.finding import Observation
from triage.metrics import Series, flag_arg, number_arg
from triage.probe import Cost, Probe
from triage.health import CheckResult, unavailable
from triage.run.run import NEEDS_HELP
from triage.thresholds import count, threshold

from probes.grad_norm_health import GradNormParams, assess_grad_norm, loss_spikes, loss_with_level, rl_run
from probes.nonfinite_onset import training_nonfinite
from probes.reward_signal import RewardParams, assess_reward

if TYPE_CHECKING:
    from triage.run.run import Run


class LrParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # sources and units: triage/thresholds.yaml
    high_lr: float = threshold("lr.high_full")  # far above typical for full-parameter RL (~1e-6)
    high_lr_lora: float = threshold("lr.high_lora")
    low_lr: float = threshold("lr.low_full")  # below this, full-parameter RL updates are tiny
    low_lr_lora: float = threshold("lr.low_lora")
    min_good_records: int = count("lr.min_good_records")  # records of healthy training before the instability
    peak_window: float = threshold("lr.peak_window")  # share of the warmup around the peak: "at the peak"
    peak_steps: int = count("lr.peak_steps")  # ... and at least this many steps either side
    peak_share: float = threshold("lr.peak_share")  # the first LR this close to the peak reaches it
    warmup_share: float = threshold("lr.warmup_share")  # a first LR below this share of the peak: warmup
    track_correlation: float = threshold("lr.track_correlation")  # Spearman rho of grad_norm vs LR
    tiny_kl: float = threshold("lr.tiny_kl")  # KL to the reference that never exceeds this: barely moved
    growth_ratio: float = threshold("lr.growth_ratio")  # this many times the run's early level: the onset
    loss_flat: float = threshold("lr.loss_flat")  # relative loss change that is "stops decreasing"
    loss_min_records: int = count("lr.loss_min_records")
    loss_alpha: float = threshold("reward.trend_alpha")
    min_records: int = count("health.lr_schedule.min_records")  # grad-norm records the check needs


def relative_onset(steps: np.ndarray, values: np.ndarray, baseline_records: int, ratio: float) -> tuple[int, float] | None:
    """(step, early level) of the first grad_norm at least `ratio` x the run's early level.

    The early level is the median of the first `baseline_records` non-zero finite records
    (zeros are the zero-advantage skip). None when there are too few records or no such jump.
    """
    ok = np.isfinite(values) & (values > 0)
    v, st = values[ok], steps[ok]
    if v.size <= baseline_records:
        return None
    level = float(np.median(v[:baseline_records]))
    if level <= 0:
        return None
    later = np.nonzero(v[baseline_records:] >= ratio * level)[0]
    if not later.size:
        return None
    return int(st[baseline_records + later[0]]), level


RANK_MIN = count("recent.min_records")  # pairs a rank correlation needs


def _ranks(x: np.ndarray) -> np.ndarray:
    """Ranks with ties averaged (a constant LR after warmup must not look like a rising one)."""
    _values, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    average = ends - (counts - 1) / 2.0
    return average[inverse]


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    if a.size < RANK_MIN or np.all(a == a[0]) or np.all(b == b[0]):
        return 0.0
    return float(np.corrcoef(_ranks(a), _ranks(b))[0, 1])


def recovery(run: Run, onset: int, growth_ratio: float, at: str = "step") -> str:
    """How the run came back after an instability at `onset`, or "" where it did not (or cannot be told).

    Divergence is later steps that stay degraded (the Relax guide: "the first step produces normal
    responses but later steps degrade"); a loss that "jumps by 2-10x then (possibly) recovers"
    (the axolotl guide) or a grad-norm spike followed by the run's own level is an episode, not the LR.
    Recovered: nothing non-finite, a reward (where one is logged) that does not end below where it
    began by more than its spread (the larger MAD of its first and last fifth), and the last records (the final
    fifth, at least 3) back within `growth_ratio` x the grad-norm level before the onset, or, without a grad
    norm, an SFT-style loss at or below its level before the onset.
    """
    if training_nonfinite(run):
        return ""
    reward = run.metrics.get("reward")
    if reward is not None and len(reward.finite()) >= 2:
        r = reward.finite().values.astype(np.float64)
        first, last = head(r, minimum=1), tail(r, minimum=1)
        noise = max(median_mad(first)[1], median_mad(last)[1])
        if float(np.median(last)) < float(np.median(first)) - noise:
            return ""  # the reward ends below where it began, by more than its spread: the later steps degraded
    def before_after(s: Series | None, positive: bool) -> tuple[float, float] | None:
        if s is None:
            return None
        ok = np.isfinite(s.values) & ((s.values > 0) if positive else True)
        v, st = s.values[ok].astype(np.float64), s.steps[ok]
        pre, post = v[st < onset], v[st > onset]
        if pre.size < 1 or post.size < 3:
            return None
        return float(np.median(pre)), float(np.median(post[-max(3, post.size // 5):]))

    g = before_after(run.metrics.get("grad_norm"), positive=True)
    if g is not None:
        pre, final = g
        if final <= growth_ratio * pre:
            # (above the level before, within the bar, is said so: a median that ends 2.5x higher is no recovery to
            # a reader unless the bar is named; raja17021998/LLM-AIL-821-Project's W&B runs)
            if final <= pre:
                return f"grad_norm ends at a median of {final:.3g}, no higher than its {pre:.3g} before {at} {onset}"
            return (f"grad_norm ends at a median of {final:.3g}, {final / pre:.1f}x its {pre:.3g} before {at} {onset}, "
                    f"within the {growth_ratio:g}x a lasting rise needs (lr.growth_ratio)")
        return ""
    loss = loss_with_level(run)
    if loss is None or loss_spikes(loss) is None:  # not a loss with a level (policy-gradient losses sit near 0)
        return ""
    lo = before_after(loss, positive=False)
    if lo is not None and lo[1] <= lo[0]:
        return f"the loss ends at a median of {lo[1]:.3g}, below its {lo[0]:.3g} before {at} {onset}"
    return ""


def is_lora(run: Run) -> bool:
    rank = number_arg(run, "lora_rank", "lora_r")
    return bool((rank is not None and rank > 0) or flag_arg(run, "use_lora", "lora", "use_peft"))


class LrSchedule(Probe):
    """Learning rate vs instability: instability starting at the LR peak / tracking it (too high), plateau (too low)."""

    name = "lr_schedule"
    outcomes = ("too_high", "too_low", "plausible")
    needs = ("metrics",)
    cost = Cost.STATIC
    Params = LrParams

    def examine(self, run: Run) -> Observation:
        p: LrParams = self.params  # type: ignore[assignment]
        m = run.metrics
        lr = m.get("lr")
        lr_arg = number_arg(run, "lr", "learning_rate")
        lr = lr.finite() if lr is not None else None
        if lr is not None and len(lr) and not np.any(lr.values):
            # 0 on every record is a rounded print, not a learning rate: verl's console formats every value to three
            # decimals (`actor/lr:0.000` for 1e-06, Bihan/dstack-configs:verl_demo.log); the argument decides, if any
            lr = None
        if (lr is None or len(lr) == 0) and lr_arg is None:
            raise Unavailable(
                "metrics",
                "no learning-rate series (train/lr-pg_0, learning_rate; one logged as 0 on every record is a rounded "
                "print) and no --lr argument",
                NEEDS_HELP["metrics"],
            )
        ev: dict[str, Any] = {}
        if lr is not None and len(lr):
            peak = float(lr.values.max())
            peak_step = int(lr.steps[np.argmax(lr.values >= p.peak_share * peak)])
            warmup = bool(lr.values[0] < p.warmup_share * peak)
            ev["lr"] = {"metric": lr.source, "peak": evidence_number(peak), "peak_step": peak_step,
                        "first": evidence_number(float(lr.values[0])), "last": evidence_number(float(lr.values[-1])),
                        "warmup": warmup}
        else:
            peak, peak_step, warmup = float(lr_arg), None, False
            ev["lr"] = {"arg": "lr", "peak": evidence_number(peak)}
        lora = is_lora(run)
        high = p.high_lr_lora if lora else p.high_lr
        low = p.low_lr_lora if lora else p.low_lr
        # the typical LRs are the RL guides' (and TRL's GRPO default): an SFT or pre-training run has others
        rl = rl_run(run)
        ev["typical"] = {"kind": "lora" if lora else "full", "high": high, "low": low, "rl_run": rl}

        onset, what = self._instability(run, ev)
        at = self._step_word(run)  # ("record N" where the log numbered its records itself: the Trainer's dicts)
        if onset is not None:
            first_step = self._first_step(run)
            good = self._records_before(run, onset)
            ev["instability"] = {"onset_step": onset, "signal": what, "good_records_before": good}
            came_back = recovery(run, onset, p.growth_ratio, at) if good >= p.min_good_records else ""
            if came_back:
                ev["instability"]["recovered"] = came_back
                return self.observe(
                    "plausible",
                    f"The instability at {at} {onset} ({what}) did not last: {came_back}. The run did not "
                    "diverge, so the learning rate does not explain it.",
                    0.6,
                    **ev,
                )
            if good >= p.min_good_records:
                reasons = []
                if peak_step is not None and warmup:
                    span = max(float(p.peak_steps), p.peak_window * max(peak_step - (first_step or 0), 1))
                    if peak_step - span <= onset <= peak_step + span:
                        reasons.append(f"it begins at {at} {onset}, when the LR reaches its peak {peak:.3g} "
                                       f"({at} {peak_step}) after warmup")
                rho = self._tracking(run, lr)
                if rho is not None:
                    ev["grad_norm_lr_spearman"] = evidence_number(rho)
                    if rho >= p.track_correlation:
                        reasons.append(f"grad_norm tracks the LR schedule (Spearman {rho:.2f})")
                # the LR the instability began under: a peak passed long before, under another phase's schedule
                # (an SFT stage at 2.4e-05, then a GRPO stage at 4e-06 whose grad norm spiked: a tutorial's log of
                # both), says nothing of it
                at_onset = peak
                if lr is not None and len(lr):
                    before = lr.values[lr.steps <= onset]
                    at_onset = float(before[-1]) if before.size else float(lr.values[0])
                    ev["lr"]["at_onset"] = evidence_number(at_onset)
                if rl and peak > high and at_onset > high:
                    reasons.append(f"the peak LR {peak:.3g} is above the {high:.0e} typical for "
                                   f"{'LoRA' if lora else 'full-parameter'} RL fine-tuning"
                                   + (f" (still {at_onset:.3g} at the onset)" if at_onset != peak else ""))
                if reasons:
                    # the onset this verdict rests on, where postmortems and plots look for it
                    ev["onset_step"] = onset
                    ev["onset_metric"] = (ev.get("grad_norm") or {}).get("metric")
                    return self.observe(
                        "too_high",
                        f"Training was healthy for {good} records, then became unstable ({what}); "
                        + "; ".join(reasons) + ".",
                        0.75 if len(reasons) > 1 else 0.65,
                        **ev,
                    )
        if rl and peak < low:
            plateau = self._plateau(run, ev)
            if plateau:
                return self.observe(
                    "too_low",
                    f"The peak LR {peak:.3g} is below the {low:.0e} typical for "
                    f"{'LoRA' if lora else 'full-parameter'} RL fine-tuning and the run plateaus ({plateau}).",
                    0.65,
                    **ev,
                )
        return self.observe(
            "plausible",
            f"The learning rate (peak {peak:.3g}) does not explain the run: "
            + ("no instability follows its schedule." if onset is None else
               f"the instability at {at} {onset} ({what}) does not line up with the LR schedule."),
            0.6,
            **ev,
        )

    def _instability(self, run: Run, ev: dict[str, Any]) -> tuple[int | None, str]:
        candidates: list[tuple[int, str]] = []
        g = run.metrics.get("grad_norm")
        if g is not None:
            a = assess_grad_norm(g, GradNormParams(), rl=rl_run(run), loss=loss_with_level(run))
            if a is not None and a.status != "healthy" and a.onset_step is not None:
                p: LrParams = self.params  # type: ignore[assignment]
                onset = a.onset_step
                ev["grad_norm"] = {"metric": a.source, "status": a.status, "median": evidence_number(a.median),
                                   "onset_step": a.onset_step}
                if self._records_before(run, onset) < p.min_good_records:
                    rel = relative_onset(g.steps, g.values.astype(np.float64), p.min_good_records, p.growth_ratio)
                    if rel is not None:
                        onset = rel[0]
                        ev["grad_norm"]["relative_onset"] = {"step": rel[0], "early_level": evidence_number(rel[1]),
                                                             "ratio": p.growth_ratio}
                candidates.append((onset, f"grad_norm {a.status.replace('_', ' ')}"))
        loss = loss_with_level(run)
        if loss is not None:
            ls = loss_spikes(loss)
            if ls is not None and ls.spikes:
                candidates.append((ls.spikes[0].step, "loss spikes"))
                ev["loss_spikes"] = {"metric": ls.source, "spikes": [s.as_evidence() for s in ls.spikes[:5]]}
        nonfinite = training_nonfinite(run)
        if nonfinite:
            s, nf = nonfinite[0]
            candidates.append((nf.onset_step, f"NaN/Inf in {s.key}"))
        if not candidates:
            return None, ""
        return min(candidates)

    @staticmethod
    def _progress(run: Run) -> Series | None:
        """The series the instability's steps are counted on: the grad norm, else the loss."""
        return run.metrics.get("grad_norm") or run.metrics.get("loss")

    @staticmethod
    def _step_word(run: Run) -> str:
        g = LrSchedule._progress(run)
        return g.step_word if g is not None else "step"

    @staticmethod
    def _first_step(run: Run) -> int | None:
        g = LrSchedule._progress(run)
        return int(g.steps[0]) if g is not None and len(g) else None

    @staticmethod
    def _records_before(run: Run, step: int) -> int:
        g = LrSchedule._progress(run)
        if g is None:
            return 0
        return int(np.sum((g.steps < step) & np.isfinite(g.values)))

    @staticmethod
    def _tracking(run: Run, lr: Any) -> float | None:
        g = run.metrics.get("grad_norm")
        if g is None or lr is None or len(lr) < RANK_MIN:
            return None
        lr_at = dict(zip(lr.steps.tolist(), lr.values.tolist()))
        pairs = [(lr_at[s], v) for s, v in zip(g.steps.tolist(), g.values.tolist()) if s in lr_at and np.isfinite(v)]
        if len(pairs) < RANK_MIN:
            return None
        a = np.asarray(pairs)
        return _spearman(a[:, 0], a[:, 1])

    def _plateau(self, run: Run, ev: dict[str, Any]) -> str:
        p: LrParams = self.params  # type: ignore[assignment]
        signs = []
        try:
            reward = assess_reward(run, RewardParams())
        except Unavailable:
            reward = None
        if reward is not None and reward.status == "flat":
            signs.append("the reward never improves")
        loss = run.metrics.get("loss")
        if loss is not None and len(loss.finite()) >= p.loss_min_records:
            lf = loss.finite()
            t = trend(lf.values, lf.steps)
            first, final = float(np.median(head(lf.values))), float(np.median(tail(lf.values)))
            ev["loss"] = {"metric": lf.source, "first_median": evidence_number(first),
                          "final_median": evidence_number(final), "trend": t.as_evidence()}
            if not t.falling(alpha=p.loss_alpha) and abs(final - first) <= p.loss_flat * abs(first):
                signs.append(f"the loss stays at {final:.3g}")
        kl = run.metrics.get("kl") or run.metrics.get("ppo_kl")
        tiny = False
        if kl is not None and len(kl.finite()):
            kmax = float(np.max(np.abs(kl.finite().values)))
            ev["kl_max"] = {"metric": kl.source, "value": evidence_number(kmax)}
            tiny = kmax <= p.tiny_kl
            if tiny:
                signs.append(f"KL never exceeds {kmax:.2g}: the policy barely moves")
        if not signs or (len(signs) == 1 and tiny):
            return ""
        return ", ".join(signs)


def check(run: Run, params: LrParams | None = None) -> CheckResult:
    """Does the learning rate explain no instability or plateau, over enough grad-norm records?"""
    p = params or LrParams()
    g = run.metrics.get("grad_norm")
    n = int(np.sum(np.isfinite(g.values) & (g.values > 0))) if g is not None else 0
    if n < p.min_records:
        what = "no grad_norm series" if g is None else f"only {n} usable grad_norm records"
        return unavailable("lr_schedule", n, p.min_records, f"{what} to judge the schedule by; {p.min_records} are needed")
    try:
        obs = LrSchedule(p).examine(run)
    except Unavailable as exc:
        return unavailable("lr_schedule", n, p.min_records, exc.reason)
    return CheckResult("lr_schedule", True, obs.outcome == "plausible", n, p.min_records, obs.summary)
