"""One view of a run's metric series, whatever framework logged them.

slime / miles / Relax log `step N: {'train/grad_norm': …}` and `rollout N: {'rollout/log_probs': …}`;
TRL / axolotl log `grad_norm`, `kl`, `entropy`, `reward`… in trainer_state.json's log_history.
Probes ask for canonical names (`grad_norm`, `kl`, `entropy`, …) and get a `Series`
with the source key it came from, so evidence can quote the real metric name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from triage.formats.metric_table import MetricTable

if TYPE_CHECKING:
    from triage.run.run import Run

# canonical name -> candidate (kind, key) pairs, most specific first.
# kinds: step / rollout / perf / eval from slime-family logs, "hf" from trainer_state log_history.
CANONICAL: dict[str, tuple[tuple[str, str], ...]] = {
    "loss": (("step", "train/loss"), ("hf", "loss"), ("hf", "train/loss")),
    "pg_loss": (("step", "train/pg_loss"),),
    "grad_norm": (("step", "train/grad_norm"), ("hf", "grad_norm"), ("hf", "train/grad_norm")),
    "lr": (("step", "train/lr-pg_0"), ("hf", "learning_rate"), ("hf", "train/learning_rate")),
    "ppo_kl": (("step", "train/ppo_kl"),),
    "kl_loss": (("step", "train/kl_loss"),),
    "kl": (("hf", "kl"), ("rollout", "rollout/kl"), ("step", "train/kl_loss")),
    "entropy": (("hf", "entropy"), ("rollout", "rollout/entropy"), ("step", "train/entropy_loss")),
    "log_probs": (("rollout", "rollout/log_probs"),),
    "ref_log_probs": (("rollout", "rollout/ref_log_probs"),),
    "rollout_log_probs": (("rollout", "rollout/rollout_log_probs"),),
    # the reward's level: slime's `rollout/rewards` is group-normalised under GRPO (about 0 by
    # construction), so the raw reward comes first
    "reward": (
        ("rollout", "rollout/raw_reward"),
        ("hf", "reward"),
        ("hf", "rewards/mean"),
        ("rollout", "rollout/rewards"),
    ),
    "reward_std": (("hf", "reward_std"),),
    "frac_reward_zero_std": (("hf", "frac_reward_zero_std"),),
    "advantages": (("rollout", "rollout/advantages"),),
    "response_length": (
        ("perf", "rollout/response_len/mean"),
        ("rollout", "rollout/response_lengths"),
        ("hf", "completions/mean_length"),
    ),
    "truncated_ratio": (
        ("perf", "rollout/truncated_ratio"),
        ("rollout", "rollout/truncated"),
        ("hf", "completions/clipped_ratio"),
    ),
    "clip_ratio": (("hf", "clip_ratio/region_mean"), ("step", "train/pg_clipfrac")),
    "logp_diff": (
        ("step", "train/train_rollout_logprob_abs_diff"),
        ("hf", "sampling/sampling_logp_difference/mean"),
    ),
    "is_ratio_min": (("hf", "sampling/importance_sampling_ratio/min"),),
    "train_rollout_kl": (("step", "train/train_rollout_kl"),),
    "repetition_frac": (("perf", "rollout/repetition_frac"),),
    "rollout_time": (("perf", "perf/rollout_time"),),
    # The reward as the reward function returned it. slime's `rollout/rewards` is the
    # group-normalised reward under GRPO (mean ~0 by construction), so judging the
    # reward's level needs `rollout/raw_reward`; TRL's `reward` is already raw.
    "raw_reward": (("rollout", "rollout/raw_reward"), ("hf", "reward"), ("hf", "rewards/mean")),
    "response_length_max": (("perf", "rollout/response_len/max"), ("hf", "completions/max_length")),
}


@dataclass(frozen=True)
class Series:
    """One metric over steps: `steps[i]` is the record index (step / rollout id / HF global step)."""

    name: str
    source: str  # "kind:key", e.g. "step:train/grad_norm" or "hf:grad_norm"
    steps: np.ndarray
    values: np.ndarray

    def __len__(self) -> int:
        return int(self.values.shape[0])

    @property
    def key(self) -> str:
        return self.source.split(":", 1)[1]

    def finite(self) -> Series:
        ok = np.isfinite(self.values)
        return Series(self.name, self.source, self.steps[ok], self.values[ok])


class Metrics:
    """All metric records of a run: the log's and trainer_state.json's together."""

    def __init__(self, table: MetricTable) -> None:
        self.table = table

    @classmethod
    def from_run(cls, run: Run) -> Metrics:
        table = MetricTable()
        if run.artifacts.logs:
            table.merge(run.log.metrics)
        state = run.trainer_state
        if state is not None:
            table.merge(state.metrics)
        return cls(table)

    def empty(self) -> bool:
        return self.table.empty()

    def get(self, name: str) -> Series | None:
        """The canonical series `name`, or None when the run did not log it."""
        for kind, key in CANONICAL[name]:
            if self.table.has(kind, key):
                steps, values = self.table.series(kind, key)
                return Series(name, f"{kind}:{key}", steps, values)
        return None

    def raw(self, kind: str, key: str) -> Series | None:
        if not self.table.has(kind, key):
            return None
        steps, values = self.table.series(kind, key)
        return Series(key, f"{kind}:{key}", steps, values)

    def first(self, kind: str) -> tuple[int, dict[str, float]] | None:
        return self.table.first(kind)

    def available(self) -> list[str]:
        return [name for name in CANONICAL if self.get(name) is not None]


def number_arg(run: Run, *names: str) -> float | None:
    """The first of the run's arguments `names` that holds a number (args are often strings), else None.

    An argument source that cannot be read counts as absent: a metric probe must not fail
    because the command line is unreadable.
    """
    from triage.errors import TriageError

    for name in names:
        try:
            value = run.args.get(name)
        except TriageError:
            return None
        if isinstance(value, bool) or value is None:
            continue
        try:
            number = float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            continue
        if np.isfinite(number):
            return number
    return None


def flag_arg(run: Run, *names: str) -> bool | None:
    """Whether any of the boolean arguments `names` is on; None when none of them was given."""
    from triage.errors import TriageError

    seen = False
    for name in names:
        try:
            value = run.args.get(name)
        except TriageError:
            return None
        if value is None:
            continue
        seen = True
        if value is True or (isinstance(value, str) and value.strip().lower() in ("true", "1", "yes", "")):
            return True
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value != 0:
            return True
    return False if seen else None
