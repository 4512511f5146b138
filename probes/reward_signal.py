"""Does the reward carry a learning signal, and does it improve?

From the axolotl guide's GRPO table: the reward mean should pass 0.15 within 20 steps
("stays at 0 – reward function is broken or task is too hard"); `reward_std` "> 0 on
most steps" ("always 0 – no learning signal"); `frac_reward_zero_std` < 0.8 ("1.0 on
every step – zero-advantage skip fires constantly, no gradient updates"). GRPO's
advantage is the reward minus its group mean: a group whose samples all score the
same contributes nothing, whatever that score is.

Outcomes, first that applies:
- `constant_zero`: every record's mean reward is exactly 0 and nothing varies — the
  reward function returns 0 for everything (or cannot read its inputs);
- `zero_variance`: most groups have zero reward spread (frac_reward_zero_std, slime's
  `rollout/zero_std/count_*`, reward_std ≈ 0) while the reward is not constantly 0 —
  the task is too easy or too hard for the policy;
- `flat`: the reward moves but shows no upward trend over at least `min_records`;
- `improving`: a significant upward trend (Mann-Kendall).

slime's `rollout/rewards` is the group-normalised reward (mean 0 by construction under
GRPO), so the level is read from `rollout/raw_reward`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, ConfigDict

from triage.anomaly import evidence_number, head, tail, trend
from triage.errors import Unavailable
from triage.finding import Observation
from triage.metrics import Series, number_arg
from triage.probe import Cost, Probe
from triage.run.run import NEEDS_HELP

if TYPE_CHECKING:
    from triage.run.run import Run

ZERO_STD_PREFIX = "rollout/zero_std/count_"


class RewardParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    zero_tol: float = 1e-9  # a reward mean / std this close to 0 is 0
    zero_std_fraction: float = 0.8  # the guide: frac_reward_zero_std < 0.8 is healthy
    min_constant: int = 5  # records needed before "always 0" / "never varies" is claimed
    min_records: int = 20  # the guide's "more than 20 steps" before "never improves" is claimed
    trend_alpha: float = 0.05


@dataclass
class RewardAssessment:
    status: str  # constant_zero | zero_variance | flat | improving
    summary: str
    confidence: float
    evidence: dict[str, Any] = field(default_factory=dict)


def zero_std_fraction(run: Run) -> Series | None:
    """Share of prompt groups whose samples all got the same reward, per record.

    TRL logs it (`frac_reward_zero_std`); slime logs counts per reward value in its perf
    record (`rollout/zero_std/count_<r>`), divided here by `--rollout-batch-size` (groups
    per rollout). A perf record without any count key had no such group.
    """
    direct = run.metrics.get("frac_reward_zero_std")
    if direct is not None:
        return direct
    table = run.metrics.table
    keys = [k for k in table.keys("perf") if k.startswith(ZERO_STD_PREFIX)]
    if not keys:
        return None
    groups = number_arg(run, "rollout_batch_size")
    if groups is None or groups <= 0:
        return None
    groups = int(groups)
    indices: set[int] = set()
    for key in table.keys("perf"):
        idx, _vals = table.series("perf", key)
        indices.update(int(i) for i in idx)
    order = sorted(indices)
    pos = {i: n for n, i in enumerate(order)}
    counts = np.zeros(len(order))
    for key in keys:
        idx, vals = table.series("perf", key)
        for i, v in zip(idx, vals):
            if np.isfinite(v):
                counts[pos[int(i)]] += v
    src = f"perf:{ZERO_STD_PREFIX}* / rollout_batch_size={groups}"
    return Series("frac_reward_zero_std", src, np.asarray(order, dtype=np.int64), counts / groups)


def assess_reward(run: Run, p: RewardParams) -> RewardAssessment:
    """Classify the run's reward signal; `Unavailable` when it logged no reward at all."""
    reward = run.metrics.get("raw_reward")
    std = run.metrics.get("reward_std")
    zero_frac = zero_std_fraction(run)
    if reward is None and zero_frac is None:
        normalised = run.metrics.raw("rollout", "rollout/rewards")
        reason = "the run logged no raw reward (rollout/raw_reward, reward) and no zero-std group counts"
        if normalised is not None:
            reason += "; rollout/rewards is group-normalised and says nothing about the reward's level"
        raise Unavailable("metrics", reason, NEEDS_HELP["metrics"])

    ev: dict[str, Any] = {}
    r = reward.finite() if reward is not None else None
    if r is not None and len(r):
        ev["reward"] = {
            "metric": r.source,
            "records": len(r),
            "first_step": int(r.steps[0]),
            "last_step": int(r.steps[-1]),
            "first_median": evidence_number(float(np.median(head(r.values)))),
            "final_median": evidence_number(float(np.median(tail(r.values)))),
            "max": evidence_number(float(r.values.max())),
        }
    s = std.finite() if std is not None else None
    if s is not None and len(s):
        ev["reward_std"] = {"metric": s.source, "median": evidence_number(float(np.median(s.values))),
                            "max": evidence_number(float(s.values.max()))}
    z = zero_frac.finite() if zero_frac is not None else None
    if z is not None and len(z):
        ev["zero_std_fraction"] = {"metric": z.source, "median": evidence_number(float(np.median(z.values))),
                                   "min": evidence_number(float(z.values.min())), "records": len(z)}

    std_all_zero = s is not None and len(s) > 0 and bool(np.all(np.abs(s.values) <= p.zero_tol))
    zero_frac_all_one = z is not None and len(z) > 0 and bool(np.all(z.values >= 1.0 - 1e-9))
    if r is not None and len(r) >= p.min_constant and bool(np.all(np.abs(r.values) <= p.zero_tol)):
        spread = "reward_std is 0 on every record" if std_all_zero else (
            "every group has zero spread" if zero_frac_all_one else "no sample scored anything but 0")
        return RewardAssessment(
            "constant_zero",
            f"The reward mean is exactly 0 on all {len(r)} records ({r.source}, steps {int(r.steps[0])}–"
            f"{int(r.steps[-1])}) and {spread}: the reward function returns 0 for everything.",
            0.85 if (std_all_zero or zero_frac_all_one) else 0.7,
            ev,
        )
    if z is not None and len(z) >= p.min_constant and float(np.median(z.values)) > p.zero_std_fraction:
        return RewardAssessment(
            "zero_variance",
            f"On most records {float(np.median(z.values)):.0%} of prompt groups have zero reward spread "
            f"({z.source}; healthy < {p.zero_std_fraction:.0%}): every sample of a group scores the same, so the "
            "advantages are 0 and there is no learning signal.",
            0.8,
            ev,
        )
    if s is not None and len(s) >= p.min_constant and float(np.median(s.values)) <= p.zero_tol:
        return RewardAssessment(
            "zero_variance",
            f"reward_std is 0 on most of {len(s)} records ({s.source}): all completions of a prompt get the same "
            "reward, so GRPO's advantages are 0.",
            0.75,
            ev,
        )
    if r is None or len(r) == 0:
        raise Unavailable("metrics", "zero-std counts are healthy but the run logged no reward mean to trend",
                          NEEDS_HELP["metrics"])
    if len(r) < p.min_records:
        raise Unavailable(
            "metrics",
            f"only {len(r)} reward records ({r.source}); {p.min_records} are needed to tell flat from improving",
            "let the run go on for more steps, or keep the full log",
        )
    t = trend(r.values, r.steps)
    ev["trend"] = t.as_evidence()
    first, final = float(np.median(head(r.values))), float(np.median(tail(r.values)))
    if t.rising(alpha=p.trend_alpha) and final > first:
        return RewardAssessment(
            "improving",
            f"The reward rises from a median of {first:.3g} to {final:.3g} over {len(r)} records "
            f"({r.source}; Kendall tau {t.tau:.2f}, p = {t.p_value:.2g}).",
            0.8,
            ev,
        )
    return RewardAssessment(
        "flat",
        f"The reward varies but never improves: median {first:.3g} at the start, {final:.3g} at the end of "
        f"{len(r)} records ({r.source}; no upward trend, p = {t.p_value:.2g}).",
        0.7,
        ev,
    )


class RewardSignal(Probe):
    """Reward mean and spread: broken (constant 0), no signal (zero std), flat, or improving."""

    name = "reward_signal"
    outcomes = ("constant_zero", "zero_variance", "flat", "improving")
    needs = ("metrics",)
    cost = Cost.STATIC
    Params = RewardParams

    def examine(self, run: Run) -> Observation:
        a = assess_reward(run, self.params)  # type: ignore[arg-type]
        return self.observe(a.status, a.summary, a.confidence, **a.evidence)
