"""Does the reward carry a learning signal, and does it improve?

From the axolotl guide's GRPO table: the reward mean should pass 0.15 within 20 steps
("stays at 0 – reward function is broken or task is too hard"); `reward_std` "> 0 on
most steps" ("always 0 – no learning signal"); `frac_reward_zero_std` < 0.8 ("1.0 on
every step – zero-advantage skip fires constantly, no gradient updates"). GRPO's
advantage is the reward minus its group mean: a group whose samples all score the
same contributes nothing, whatever that score is.

Outcomes, first that applies:
- `degenerate_groups`: the group is too small for group-normalised advantages. One sample
  per prompt (`n_samples_per_prompt` / `num_generations` / `actor_rollout_ref.rollout.n`
  = 1) makes the group std NaN (Bessel's correction divides by 0), so reward_std and the
  gradients are NaN from the first step (om-ai-lab/VLM-R1#71, StarsfieldAI/R1-V#69). Two
  samples per prompt leave most groups with equal rewards: with a 0/1 reward
  P(equal) = p² + (1-p)² ≥ 0.5 for any success rate (jsboige/CoursIA#10603), so a
  zero-std fraction at or above one half with groups of 2 is the group size's doing;
- `constant_zero`: every record's mean reward is exactly 0 and nothing varies — the
  reward function returns 0 for everything (or cannot read its inputs). A slime-family
  record aggregates a whole rollout (`--rollout-batch-size` x `--n-samples-per-prompt`
  samples), so records covering `constant_zero_samples` samples are decisive (with the
  guide's healthy mean 0.15 as a success rate, 0.85^29 < 0.01); HF Trainer rows, whose
  sample count is unknown, need the guide's 20 steps. Where rollout dumps keep each
  sample's `response` and `label`, they tell the two causes of an all-zero reward apart:
  responses that contain the label and still scored 0 mean the reward function is broken
  (`constant_zero`); responses that never contain it mean the policy never answers
  correctly, and the all-zero reward is the no-signal case below (`zero_variance`);
- `zero_variance`: most groups have zero reward spread (frac_reward_zero_std, slime's
  `rollout/zero_std/count_*`, reward_std ≈ 0) while the reward is not constantly 0 —
  the task is too easy or too hard for the policy;
- `flat`: the reward moves but shows no upward trend over at least `min_records`;
- `improving`: a significant upward trend (Mann-Kendall).

slime's `rollout/rewards` is the group-normalised reward (mean 0 by construction under
GRPO), so the level is read from `rollout/raw_reward`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, ConfigDict

from triage.anomaly import evidence_number, head, tail, trend
from triage.errors import Unavailable
from triage.finding import Observation
from triage.formats.log_index import LogLine
from triage.formats.dumps import reward_value
from triage.health import CheckResult, unavailable
from triage.metrics import Series, number_arg
from triage.probe import Cost, Probe
from triage.run.run import NEEDS_HELP
from triage.thresholds import count, threshold

from probes.truncation import own_name

if TYPE_CHECKING:
    from triage.run.run import Run

ZERO_STD_PREFIX = "rollout/zero_std/count_"
# a std / var warning raised at a line of a GRPO trainer or of OpenRLHF's experience maker
_GROUP_STD_WARNING = re.compile(r"(?:grpo\w*|experience_maker)\.py:\d+: UserWarning: (?:std|var)(?:_mean)?\(\): "
                                r"degrees of freedom is <= 0", re.I)
# Samples per prompt (the GRPO group size): slime / OpenRLHF, TRL, verl.
GROUP_SIZE_ARGS = ("n_samples_per_prompt", "num_generations", "actor_rollout_ref.rollout.n")
# Advantage estimators that do not normalise a reward within its prompt's group, so a group of one is no fault:
# PPO's GAE with a critic, REINFORCE++ (batch-wide whitening), ReMax (a greedy baseline), OpenRLHF's plain REINFORCE
# (volcengine/verl verl/trainer/ppo/core_algos.py AdvantageEstimator; THUDM/slime slime/utils/arguments.py;
# OpenRLHF/OpenRLHF openrlhf/cli/train_ppo_ray.py). A verl PPO run with rollout.n=1 under `gae` (Bihan/dstack-configs'
# verl_demo.log) is the estimator working as designed.
UNGROUPED_ESTIMATORS = frozenset({"gae", "ppo", "reinforce_plus_plus", "remax", "reinforce"})
# Chat / end-of-sequence markers a response carries after the answer (`<|im_end|>`, `</s>`).
SPECIAL_TOKEN = re.compile(r"<\|[^|<>]{1,40}\|>|</s>|<s>|<eos>|<pad>")


class RewardParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # sources and units: triage/thresholds.yaml
    zero_tol: float = threshold("reward.zero_tol")  # a reward mean / std this close to 0 is 0
    zero_std_fraction: float = threshold("reward.zero_std_fraction")  # the guide: < 0.8 is healthy
    min_spread_records: int = count("reward.min_spread_records")  # records before "never varies" is claimed
    constant_zero_samples: int = count("reward.constant_zero_samples")  # all-0 samples that decide "always 0"
    min_answered: int = count("reward.min_answered")  # dumped responses with the label yet scored 0
    dump_samples: int = 512  # samples read from the rollout dumps (a bound on work, not a threshold)
    max_dumps: int = 8
    min_records: int = count("reward.min_records")  # the guide's 20 steps before "never improves" is claimed
    trend_alpha: float = threshold("reward.trend_alpha")
    min_group_size: int = count("groups.min_size")  # fewer samples per prompt: the group std is NaN
    small_group_size: int = count("groups.small_size")  # groups this small: most have equal rewards
    small_zero_std_fraction: float = threshold("groups.small_zero_std_fraction")  # p² + (1-p)² ≥ 0.5


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


def samples_per_rollout(run: Run) -> int | None:
    """Samples one slime-family rollout record aggregates: prompts per rollout x samples per prompt."""
    prompts = number_arg(run, "rollout_batch_size")
    per_prompt = number_arg(run, "n_samples_per_prompt")
    if prompts is None or per_prompt is None or prompts <= 0 or per_prompt <= 0:
        return None
    return int(prompts) * int(per_prompt)


# Per-sample values a slime rollout record averages as `sum(val) / len(val)` on each data-parallel rank,
# then over the ranks, each holding as many samples (slime/backends/megatron_utils/data.py,
# log_rollout_data): token counts, whole numbers, and the 0/1 truncation flag. Such a mean is a fraction
# whose denominator is the number of samples, so the fewest-sample fraction that prints as the mean is a
# lower bound on the samples the record covers.
WHOLE_NUMBER_MEANS = ("rollout/response_lengths", "rollout/total_lengths", "rollout/truncated")
_MEAN_TOL = threshold("reward.mean_fraction_tol")  # relative (triage/thresholds.yaml)


def _simplest_between(lo: Fraction, hi: Fraction) -> Fraction:
    """The fraction with the smallest denominator in [lo, hi] (0 <= lo <= hi): continued fractions."""
    whole = math.floor(lo)
    if whole == lo:
        return Fraction(whole)
    if whole + 1 <= hi:
        return Fraction(whole + 1)
    return whole + 1 / _simplest_between(1 / (hi - whole), 1 / (lo - whole))


def fewest_samples(mean: float) -> int:
    """The fewest whole numbers whose mean prints as `mean` (to `_MEAN_TOL`): 21/128 -> 128."""
    if not math.isfinite(mean) or mean < 0:
        return 1
    x = Fraction(mean)
    tol = Fraction(_MEAN_TOL) * max(1, x)
    return _simplest_between(max(Fraction(0), x - tol), x + tol).denominator


def samples_seen_per_record(run: Run, r: Series) -> int | None:
    """The fewest samples every rollout record of `r` covers, read from the whole-number means beside it
    (`WHOLE_NUMBER_MEANS`); None when no record has one that says more than 1."""
    if not r.source.startswith("rollout:"):
        return None
    table = run.metrics.table
    bounds = dict.fromkeys((int(i) for i in r.steps), 1)
    for key in WHOLE_NUMBER_MEANS:
        if not table.has("rollout", key):
            continue
        idx, vals = table.series("rollout", key)
        for i, v in zip(idx, vals):
            if int(i) in bounds:
                bounds[int(i)] = max(bounds[int(i)], fewest_samples(float(v)))
    least = min(bounds.values(), default=1)
    return least if least > 1 else None


def constant_zero_bar(run: Run, r: Series, p: RewardParams) -> tuple[int, int | None, str | None]:
    """(records needed to claim "always 0", samples each record covers or None, how that count is known).

    A slime-family rollout record averages every sample of the rollout; when the run's
    arguments say how many, records covering `constant_zero_samples` samples suffice. Without
    them, the record's own whole-number means give a lower bound on its samples
    (`samples_seen_per_record`). Otherwise (HF Trainer rows, unknown batch) the guide's
    `min_records` steps hold.
    """
    if not r.source.startswith(("rollout:", "perf:")):
        return p.min_records, None, None
    per = samples_per_rollout(run)
    how = "rollout_batch_size x n_samples_per_prompt"
    if per is None:
        per = samples_seen_per_record(run, r)
        how = "at least, from the whole-number means the records hold (" + ", ".join(WHOLE_NUMBER_MEANS) + ")"
    if per is None:
        return p.min_records, None, None
    return min(-(-p.constant_zero_samples // per), p.min_records), per, how


def group_size(run: Run) -> tuple[str, int] | None:
    """(argument, samples per prompt) from the run's arguments, when they say."""
    for name in GROUP_SIZE_ARGS:
        value = number_arg(run, name)
        if value is not None and value >= 1:
            return own_name(run, name), int(value)
    return None


def single_sample_warning(run: Run) -> LogLine | None:
    """torch's warning that a GRPO trainer's group std had no degrees of freedom: a group of one sample.

    `std()` with Bessel's correction over one element warns `std(): degrees of freedom is <= 0` (aten
    ReduceOps.cpp) at the caller's line; raised in a GRPO trainer (TRL's `grpo_trainer.py` and the many
    copies of it, ms-swift's) or OpenRLHF's `experience_maker.py`, it is the group std, `rewards.view(-1,
    num_generations).std(dim=1)` (FanqingM/MM-Eureka-V0#14, lzhxmu/CPPO#3; om-ai-lab/VLM-R1#71 for the
    NaN that follows)."""
    for line in run.log.notable:
        if line.tag == "std_no_dof" and _GROUP_STD_WARNING.search(line.text):
            return line
    return None


def _nonfinite_from_first(series: Series | None) -> dict[str, Any] | None:
    if series is None or not len(series):
        return None
    bad = ~np.isfinite(series.values)
    return {"metric": series.source, "records": len(series), "nonfinite": int(bad.sum()),
            "first_step": int(series.steps[0]), "nonfinite_at_first_step": bool(bad[0])}


def degenerate_groups(run: Run, p: RewardParams, zero_frac: Series | None) -> RewardAssessment | None:
    """Groups too small for group-normalised advantages: 1 sample per prompt, or 2 with most groups equal."""
    from probes.config_rule import arg_str

    estimator = arg_str(run, "advantage_estimator", "algorithm.adv_estimator")
    if estimator is not None and estimator.strip().lower() in UNGROUPED_ESTIMATORS:
        return None  # no group normalisation: one sample per prompt is how the estimator works
    size = group_size(run)
    warned = single_sample_warning(run) if size is None else None
    if warned is not None:
        size = (f"torch's `std(): degrees of freedom is <= 0` at {warned.where()}", 1)
    if size is None or size[1] > p.small_group_size:
        return None
    arg, g = size
    ev: dict[str, Any] = {"group_size": {"arg": arg, "value": g} if warned is None else
                          {"warning": warned.text[:300], "where": warned.where(), "value": 1}}
    std = _nonfinite_from_first(run.metrics.get("reward_std"))
    grad = _nonfinite_from_first(run.metrics.get("grad_norm"))
    if std is not None:
        ev["reward_std"] = std
    if grad is not None:
        ev["grad_norm"] = grad
    if g < p.min_group_size:
        nan_seen = [f"{d['metric']} non-finite on {d['nonfinite']} of {d['records']} records"
                    + (" from the first step" if d["nonfinite_at_first_step"] else "")
                    for d in (std, grad) if d is not None and d["nonfinite"]]
        if not nan_seen and warned is None and (std is not None or grad is not None):
            # the group std and the gradients were logged and stayed finite: this framework does not divide by a
            # group of one's std (verl's GRPO takes such a group's mean as 0 and its std as 1, volcengine/verl
            # verl/trainer/ppo/core_algos.py compute_grpo_outcome_advantage; Chrisytz/verl's output.txt, rollout.n 1)
            return None
        said = f"{arg}={g}" if warned is None else arg
        return RewardAssessment(
            "degenerate_groups",
            f"Each prompt gets a single sample ({said}): a group of one has no standard deviation (NaN with "
            "Bessel's correction), so the group-normalised advantages and the gradients are NaN"
            + (f" ({'; '.join(nan_seen)})" if nan_seen else "") + ".",
            0.9 if nan_seen else 0.8,
            ev,
        )
    z = zero_frac.finite() if zero_frac is not None else None
    if z is None or len(z) < p.min_spread_records:
        return None
    med = float(np.median(z.values))
    ev["zero_std_fraction"] = {"metric": z.source, "median": evidence_number(med), "records": len(z),
                               "floor_for_groups_of_2": p.small_zero_std_fraction}
    if med < p.small_zero_std_fraction:
        return None
    return RewardAssessment(
        "degenerate_groups",
        f"Each prompt gets only {g} samples ({arg}={g}) and {med:.0%} of the groups have equal rewards "
        f"({z.source}, median of {len(z)} records): with two samples and a 0/1 reward at least half the groups "
        "are equal whatever the success rate, so most groups carry no advantage.",
        0.8,
        ev,
    )


def _plain(text: str) -> str:
    return SPECIAL_TOKEN.sub(" ", text)


def contains_answer(response: str, label: str) -> bool:
    """Whether the response states the label as a whole token (`41` in "= 41", not in "141" or "41.5")."""
    pattern = r"(?<![0-9A-Za-z.\-])" + re.escape(label) + r"(?!\.?[0-9A-Za-z])"
    return re.search(pattern, _plain(response)) is not None


def _label_text(label: Any) -> str | None:
    if isinstance(label, bool) or label is None:
        return None
    if isinstance(label, (int, float)):
        return f"{label:g}" if isinstance(label, float) else str(label)
    if isinstance(label, str) and 0 < len(label.strip()) <= 200:
        return label.strip()
    return None


def dump_answers(run: Run, p: RewardParams) -> dict[str, Any] | None:
    """How many dumped responses scored 0 although they contain their sample's label.

    None when the run has no rollout dumps with both a text response and a label. A dump
    that cannot be read is listed and skipped: the metrics alone still decide.
    """
    checked = answered = answered_zero = 0
    examples: list[dict[str, Any]] = []
    problems: list[str] = []
    dumps: list[str] = []
    for path, dump in run.rollout_dumps(problems, limit=p.max_dumps):
        if checked >= p.dump_samples:
            break
        used = False
        for i, sample in enumerate(dump.samples):
            if checked >= p.dump_samples:
                break
            response, label = sample.get("response"), _label_text(sample.get("label"))
            reward = reward_value(sample.get("reward"))
            if not isinstance(response, str) or label is None or reward is None:
                continue
            checked += 1
            used = True
            if contains_answer(response, label):
                answered += 1
                if abs(reward) <= p.zero_tol:
                    answered_zero += 1
                    if len(examples) < 3:
                        examples.append({"where": f"{path.parent.name}/{path.name}#{i}", "label": label[:80],
                                         "response": response[:200], "reward": reward})
        if used:
            dumps.append(f"{path.parent.name}/{path.name}")
    if not checked:
        return None
    out: dict[str, Any] = {"dumps": dumps, "samples_checked": checked, "contain_label": answered,
                           "contain_label_scored_0": answered_zero, "examples": examples}
    if problems:
        out["unreadable"] = [problem[:200] for problem in problems]
    return out


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

    degenerate = degenerate_groups(run, p, zero_frac)
    if degenerate is not None:
        return degenerate
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
    zero_frac_all_one = z is not None and len(z) > 0 and bool(np.all(z.values >= 1.0 - p.zero_tol))
    bar, per_record, how = constant_zero_bar(run, r, p) if r is not None else (p.min_records, None, None)
    if r is not None and len(r) >= bar and bool(np.all(np.abs(r.values) <= p.zero_tol)):
        covered = ""
        if per_record:
            covered = f", {'at least ' if how and how.startswith('at least') else ''}{len(r) * per_record} samples"
        ev["reward"]["samples_per_record"] = per_record
        if how:
            ev["reward"]["samples_per_record_from"] = how
        spread = "reward_std is 0 on every record" if std_all_zero else (
            "every group has zero spread" if zero_frac_all_one else "no sample scored anything but 0")
        answers = dump_answers(run, p)
        if answers is not None:
            ev["dump_check"] = answers
        where = f"{len(r)} records ({r.source}, {r.step_word}s {int(r.steps[0])}–{int(r.steps[-1])}{covered})"
        if answers is not None and answers["contain_label_scored_0"] >= p.min_answered:
            return RewardAssessment(
                "constant_zero",
                f"The reward mean is exactly 0 on all {where} and {spread}, although "
                f"{answers['contain_label_scored_0']} of {answers['samples_checked']} dumped responses contain their "
                "label: the reward function returns 0 even for correct answers.",
                0.9,
                ev,
            )
        if answers is not None and answers["contain_label"] < p.min_answered:
            return RewardAssessment(
                "zero_variance",
                f"The reward is exactly 0 on all {where} and {spread}, and "
                f"{'none' if answers['contain_label'] == 0 else 'only ' + str(answers['contain_label'])} of "
                f"{answers['samples_checked']} dumped responses contain their label: the policy never answers "
                "correctly, so every group scores the same and there is no learning signal (the task is too hard "
                "for it, or the answer format is never met).",
                0.8,
                ev,
            )
        return RewardAssessment(
            "constant_zero",
            f"The reward mean is exactly 0 on all {where} and {spread}: the reward function returns 0 for "
            "everything.",
            0.85 if (std_all_zero or zero_frac_all_one) else 0.7,
            ev,
        )
    saturated = _saturating(r, z, p)
    if saturated is not None:
        # groups that came to score alike as the reward rose: the policy solves them now, the early groups had the
        # spread it learned from (a TRL GRPO run of Sunshine535/nips-grpo-dynamics: reward 0.14 to 0.9, zero-spread
        # groups 45-55% while it climbed and 85-100% after)
        return RewardAssessment(
            "improving",
            f"The reward rose from a median of {saturated[0]:.3g} to {saturated[1]:.3g} over {len(r)} records "
            f"({r.source}) while the groups kept a spread ({saturated[2]:.0%} with zero spread early on); most groups "
            "now score alike because the policy solves them, not for want of a signal.",
            0.7,
            ev,
        )
    if z is not None and len(z) >= p.min_spread_records and float(np.median(z.values)) > p.zero_std_fraction:
        return RewardAssessment(
            "zero_variance",
            f"On most records {float(np.median(z.values)):.0%} of prompt groups have zero reward spread "
            f"({z.source}; healthy < {p.zero_std_fraction:.0%}): every sample of a group scores the same, so the "
            "advantages are 0 and there is no learning signal.",
            0.8,
            ev,
        )
    if s is not None and len(s) >= p.min_spread_records and float(np.median(s.values)) <= p.zero_tol:
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


def _saturating(r: Series | None, z: Series | None, p: RewardParams) -> tuple[float, float, float] | None:
    """(first, final reward medians, early zero-spread share) where most groups score alike only late, after the
    reward rose: early groups under the zero-spread bar, the late ones over it, the final reward above the first."""
    if r is None or z is None or len(r) < p.min_records or len(z) < p.min_spread_records:
        return None
    early_z, late_z = float(np.median(head(z.values))), float(np.median(tail(z.values)))
    first, final = float(np.median(head(r.values))), float(np.median(tail(r.values)))
    if early_z <= p.zero_std_fraction < late_z and final > first:
        return first, final, early_z
    return None


PASSING = ("improving", "flat")


def check(run: Run, params: RewardParams | None = None) -> CheckResult:
    """Does the reward carry a signal, over the guide's 20 records?

    A failure found on fewer records (a reward always 0, groups with no spread) is still a
    check that ran and failed; a run too short to tell flat from improving could not be checked.
    """
    p = params or RewardParams()
    reward = run.metrics.get("raw_reward")
    records = len(reward.finite()) if reward is not None else 0
    try:
        a = assess_reward(run, p)
    except Unavailable as exc:
        return unavailable("reward", records, p.min_records, exc.reason)
    # a reward that varies without a trend still carries a signal (a run near its ceiling looks flat)
    return CheckResult("reward", True, a.status in PASSING, records, p.min_records, a.summary)


class RewardSignal(Probe):
    """Reward mean and spread: groups too small, broken (constant 0), no signal (zero std), flat, or improving."""

    name = "reward_signal"
    outcomes = ("degenerate_groups", "constant_zero", "zero_variance", "flat", "improving")
    needs = ("metrics",)
    cost = Cost.STATIC
    Params = RewardParams

    def examine(self, run: Run) -> Observation:
        a = assess_reward(run, self.params)  # type: ignore[arg-type]
        return self.observe(a.status, a.summary, a.confidence, **a.evidence)
