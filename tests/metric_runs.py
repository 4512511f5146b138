"""Small real run directories for probe tests: slime job logs and HF trainer_state.json files.

The writers produce the frameworks' own formats (slime's logging lines with Python dict
reprs, Megatron's arguments block, TRL's log_history rows); the series start from a
healthy GRPO run and a test changes the one thing its scenario is about.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from triage.run import open_run
from triage.run.run import Run


def healthy_series(n: int = 30, seed: int = 0) -> dict[str, np.ndarray]:
    """One value per rollout / step of a healthy GRPO run (one step per rollout)."""
    rng = np.random.default_rng(seed)
    i = np.arange(n, dtype=float)
    log_probs = -0.35 + 0.004 * i + 0.005 * rng.standard_normal(n)
    log_probs[0] = -0.35
    ref = log_probs - 0.0005 * i
    return {
        "grad_norm": 0.3 * np.exp(0.1 * rng.standard_normal(n)),
        "loss": 0.01 * rng.standard_normal(n),
        "pg_loss": 0.01 * rng.standard_normal(n),
        "entropy": 0.45 - 0.004 * i + 0.01 * rng.standard_normal(n),
        "kl_loss": np.concatenate([[0.0], 0.001 * i[1:] + 0.0002 * np.abs(rng.standard_normal(n - 1))]),
        "ppo_kl": np.zeros(n),
        "clipfrac": 0.02 + 0.005 * np.abs(rng.standard_normal(n)),
        "lr": np.full(n, 1e-6),
        "log_probs": log_probs,
        "ref_log_probs": ref,
        "raw_reward": 0.2 + 0.5 * i / n + 0.04 * rng.standard_normal(n),
        "truncated_ratio": 0.03 + 0.01 * np.abs(rng.standard_normal(n)),
        "resp_mean": 250 + 15 * rng.standard_normal(n),
        "resp_max": 700 + 50 * rng.standard_normal(n),
        "zero_std_0": np.full(n, 1.0),
        "zero_std_1": np.zeros(n),
        "rollout_time": 40 + 3 * rng.standard_normal(n),
    }


def ar1(rng: np.random.Generator, n: int, phi: float, sigma: float) -> np.ndarray:
    """A stationary AR(1) series with mean 0: x[t] = phi x[t-1] + sigma e[t] (training noise is correlated)."""
    x = np.empty(n)
    x[0] = rng.standard_normal() * sigma / math.sqrt(1 - phi * phi)
    for t in range(1, n):
        x[t] = phi * x[t - 1] + sigma * rng.standard_normal()
    return x


def grpo_groups(rng: np.random.Generator, n: int, prompts: int, per_prompt: int,
                start: float = 0.2, end: float = 0.65) -> dict[str, np.ndarray]:
    """Binary rewards of `prompts` groups of `per_prompt` samples per step, as GRPO scores them.

    Each prompt has its own difficulty (a success rate drawn around the run's level), and the
    level improves along a logistic curve from `start` to `end`: the reward mean is noisy, some
    groups are all 0 or all 1 (zero spread), as in a real run. Returns per-step raw reward,
    reward_std (mean within-group std, TRL's definition), the share of zero-spread groups and
    slime's per-value zero-std group counts.
    """
    mean = np.empty(n)
    std = np.empty(n)
    zero_frac = np.empty(n)
    count_0 = np.empty(n)
    count_1 = np.empty(n)
    t = np.arange(n) / max(n - 1, 1)
    level = start + (end - start) / (1 + np.exp(-8 * (t - 0.4)))
    for i in range(n):
        logit = np.log(level[i] / (1 - level[i])) + 1.2 * rng.standard_normal(prompts)
        p = 1 / (1 + np.exp(-logit))
        rewards = (rng.random((prompts, per_prompt)) < p[:, None]).astype(float)
        mean[i] = rewards.mean()
        std[i] = rewards.std(axis=1, ddof=1).mean() if per_prompt > 1 else math.nan
        all0, all1 = (rewards == 0).all(axis=1), (rewards == 1).all(axis=1)
        zero_frac[i] = (all0 | all1).mean()
        count_0[i], count_1[i] = all0.sum(), all1.sum()
    return {"raw_reward": mean, "reward_std": std, "frac_zero_std": zero_frac, "zero_std_0": count_0,
            "zero_std_1": count_1}


def noisy_series(n: int = 20, seed: int = 0, prompts: int = 8, per_prompt: int = 8,
                 grad_level: float = 0.3, logp_gap: float = 0.012) -> dict[str, np.ndarray]:
    """A healthy GRPO run as it looks in the field, one record per rollout (one step per rollout).

    - grad_norm: AR(1) on the log scale around `grad_level` (inside the axolotl guide's healthy
      0.001–1.0), with an occasional benign bump (x1.5–2.5, still inside the range) and an
      occasional 0.0 from the zero-advantage skip;
    - reward: binary rewards of `prompts` x `per_prompt` samples improving along a logistic
      curve, with per-prompt difficulty (so groups with zero spread come and go);
    - entropy slowly falling from ~0.45, KL to the reference slowly rising from 0, the
      train/rollout log-prob difference of a bf16 engine (~1e-2, the guide's healthy < 0.1);
    - log_probs equal to ref_log_probs at rollout 0 (the step-1 invariant).
    """
    rng = np.random.default_rng(seed)
    i = np.arange(n, dtype=float)
    grad = grad_level * np.exp(ar1(rng, n, 0.6, 0.15))
    bumps = rng.random(n) < 0.06
    grad[bumps] *= rng.uniform(1.5, 2.5, bumps.sum())
    grad = np.minimum(grad, 0.95)
    grad[(rng.random(n) < 0.03) & (i > 0)] = 0.0
    groups = grpo_groups(rng, n, prompts, per_prompt)
    log_probs = -0.35 + 0.003 * i + 0.01 * ar1(rng, n, 0.5, 0.5)
    log_probs[0] = -0.35
    ref = log_probs - 0.0004 * i
    entropy = 0.45 * np.exp(-0.01 * i) + 0.01 * ar1(rng, n, 0.5, 0.8)
    kl = np.maximum(0.0, 0.0015 * i + 0.0005 * ar1(rng, n, 0.5, 0.8))
    kl[0] = 0.0
    return {
        "grad_norm": grad,
        "loss": 0.01 * rng.standard_normal(n),
        "pg_loss": 0.01 * rng.standard_normal(n),
        "entropy": entropy,
        "kl_loss": kl,
        "kl": kl,
        "ppo_kl": np.concatenate([[0.0], np.abs(1e-4 * rng.standard_normal(n - 1))]),
        "clipfrac": 0.02 + 0.005 * np.abs(rng.standard_normal(n)),
        "lr": np.full(n, 1e-6),
        "log_probs": log_probs,
        "ref_log_probs": ref,
        "raw_reward": groups["raw_reward"],
        "reward_std": groups["reward_std"],
        "frac_zero_std": groups["frac_zero_std"],
        "zero_std_0": groups["zero_std_0"],
        "zero_std_1": groups["zero_std_1"],
        "truncated_ratio": np.clip(0.03 + 0.015 * ar1(rng, n, 0.5, 0.8), 0.0, 1.0),
        "resp_mean": 250 + 10 * i / max(n, 1) + 12 * ar1(rng, n, 0.5, 0.8),
        "resp_max": 700 + 40 * rng.standard_normal(n),
        "rollout_time": 40 + 3 * rng.standard_normal(n),
        "logp_diff": logp_gap * np.exp(ar1(rng, n, 0.5, 0.2)),
        "clip_ratio": 0.02 + 0.005 * np.abs(rng.standard_normal(n)),
        "is_ratio_min": np.clip(0.6 + 0.05 * rng.standard_normal(n), 0.0, 1.0),
    }


def noisy_extra(series: dict[str, np.ndarray]) -> dict[str, dict[str, np.ndarray]]:
    """The keys `slime_metrics_log` does not write by itself: the train/rollout log-prob difference
    (slime's `train/train_rollout_logprob_abs_diff`, logged by the trainer per step)."""
    return {"step": {"train/train_rollout_logprob_abs_diff": series["logp_diff"]}}


SLIME_ARGS = {
    "actor_num_gpus_per_node": 8,
    "global_batch_size": 64,
    "hf_checkpoint": "/mnt/models/Qwen2.5-0.5B-Instruct",
    "lr": 1e-06,
    "n_samples_per_prompt": 8,
    "rollout_batch_size": 8,
    "rollout_max_response_len": 1024,
}


def _num(v: Any) -> Any:
    """Plain Python numbers, so the dict repr reads `nan` / `inf` / `0.3` as slime prints them."""
    if isinstance(v, (np.floating, float)):
        return float(v)
    if isinstance(v, (np.integer, int)):
        return int(v)
    return v


class SlimeLog:
    """A slime driver log, line by line, in slime's logging format."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.seconds = 0

    def _ts(self) -> str:
        self.seconds += 1
        h, rest = divmod(self.seconds, 3600)
        m, s = divmod(rest, 60)
        return f"[2026-08-01 {10 + h:02d}:{m:02d}:{s:02d}]"

    def log(self, message: str, where: str = "train.py:88") -> SlimeLog:
        self.lines.append(f"{self._ts()} {where} - {message}")
        return self

    def raw(self, line: str) -> SlimeLog:
        self.lines.append(line)
        return self

    def arguments(self, args: dict[str, Any]) -> SlimeLog:
        self.lines.append("------------------------ arguments ------------------------")
        for name in sorted(args):
            self.lines.append(f"  {name} {'.' * max(3, 48 - len(name))} {args[name]}")
        self.lines.append("-------------------- end of arguments ---------------------")
        return self

    def record(self, kind: str, index: int, values: dict[str, Any], where: str) -> SlimeLog:
        clean = {k: _num(v) for k, v in values.items()}
        return self.log(f"{kind} {index}: {clean!r}", where)

    def step(self, index: int, values: dict[str, Any]) -> SlimeLog:
        return self.record("step", index, values, "model.py:512")

    def rollout(self, index: int, values: dict[str, Any]) -> SlimeLog:
        return self.record("rollout", index, values, "rollout.py:301")

    def perf(self, index: int, values: dict[str, Any]) -> SlimeLog:
        return self.record("perf", index, values, "rollout.py:340")

    def finish_rollout(self, prompt: str, response: str, label: str = "42", reward: float = 1.0) -> SlimeLog:
        return self.log(f"Finish rollout: {[prompt + response]!r}, label: {label}, reward: {reward}",
                        "sglang_rollout.py:420")

    def write(self, root: Path, name: str = "job.log") -> Path:
        root.mkdir(parents=True, exist_ok=True)
        path = root / name
        path.write_text("\n".join(self.lines) + "\n", encoding="utf-8")
        return path


def slime_metrics_log(series: dict[str, np.ndarray], args: dict[str, Any] | None = None,
                      first: int = 0, extra: dict[str, dict[str, np.ndarray]] | None = None) -> SlimeLog:
    """A slime log with a rollout, a perf and a step record per index, from `series`.

    `extra` adds keys per kind: {"step": {"train/train_rollout_logprob_abs_diff": array}, ...}.
    A series set to None (or absent) is not logged.
    """
    log = SlimeLog().arguments(args if args is not None else SLIME_ARGS)
    n = len(series["grad_norm"])
    extra = extra or {}

    def pick(mapping: dict[str, str], i: int) -> dict[str, Any]:
        return {key: series[name][i] for name, key in mapping.items() if series.get(name) is not None}

    for i in range(n):
        idx = first + i
        rollout = pick({"log_probs": "rollout/log_probs", "ref_log_probs": "rollout/ref_log_probs",
                        "raw_reward": "rollout/raw_reward", "resp_mean": "rollout/response_lengths",
                        "truncated_ratio": "rollout/truncated"}, i)
        if series.get("raw_reward") is not None:
            rollout["rollout/rewards"] = 0.0  # group-normalised: mean 0 by construction
        rollout.update({k: v[i] for k, v in extra.get("rollout", {}).items()})
        log.rollout(idx, rollout)
        perf = pick({"resp_mean": "rollout/response_len/mean", "resp_max": "rollout/response_len/max",
                     "truncated_ratio": "rollout/truncated_ratio", "rollout_time": "perf/rollout_time"}, i)
        for name, key in (("zero_std_0", "rollout/zero_std/count_0.0"), ("zero_std_1", "rollout/zero_std/count_1.0")):
            if series.get(name) is not None and series[name][i]:
                perf[key] = int(series[name][i])
        perf.update({k: v[i] for k, v in extra.get("perf", {}).items()})
        log.perf(idx, perf)
        step = pick({"loss": "train/loss", "pg_loss": "train/pg_loss", "entropy": "train/entropy_loss",
                     "clipfrac": "train/pg_clipfrac", "ppo_kl": "train/ppo_kl", "kl_loss": "train/kl_loss",
                     "grad_norm": "train/grad_norm", "lr": "train/lr-pg_0"}, i)
        step["train/step"] = idx
        step.update({k: v[i] for k, v in extra.get("step", {}).items()})
        log.step(idx, step)
    return log


def slime_run(root: Path, series: dict[str, np.ndarray], args: dict[str, Any] | None = None,
              first: int = 0, extra: dict[str, dict[str, np.ndarray]] | None = None) -> Run:
    slime_metrics_log(series, args, first, extra).write(root)
    return open_run(str(root))


HF_KEYS = {
    "loss": "loss",
    "grad_norm": "grad_norm",
    "lr": "learning_rate",
    "raw_reward": "reward",
    "reward_std": "reward_std",
    "frac_zero_std": "frac_reward_zero_std",
    "kl": "kl",
    "entropy": "entropy",
    "resp_mean": "completions/mean_length",
    "resp_max": "completions/max_length",
    "truncated_ratio": "completions/clipped_ratio",
    "clip_ratio": "clip_ratio/region_mean",
    "logp_diff": "sampling/sampling_logp_difference/mean",
    "is_ratio_min": "sampling/importance_sampling_ratio/min",
}


def healthy_hf_series(n: int = 30, seed: int = 1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    s = healthy_series(n, seed)
    i = np.arange(n, dtype=float)
    return {
        "loss": s["loss"],
        "grad_norm": s["grad_norm"],
        "lr": np.full(n, 1e-6),
        "raw_reward": s["raw_reward"],
        "reward_std": 0.3 + 0.02 * rng.standard_normal(n),
        "frac_zero_std": 0.2 + 0.05 * np.abs(rng.standard_normal(n)),
        "kl": 0.0 + 0.002 * i,
        "entropy": s["entropy"],
        "resp_mean": s["resp_mean"],
        "resp_max": s["resp_max"],
        "truncated_ratio": s["truncated_ratio"],
        "clip_ratio": s["clipfrac"],
        "logp_diff": 0.02 + 0.005 * np.abs(rng.standard_normal(n)),
        "is_ratio_min": 0.6 + 0.05 * rng.standard_normal(n),
    }


def hf_run(root: Path, series: dict[str, np.ndarray], manifest: dict[str, Any] | None = None,
           first_step: int = 1) -> Run:
    """A TRL GRPO output_dir: trainer_state.json with one log_history row per step (logging_steps=1)."""
    n = len(next(iter(series.values())))
    rows = []
    for i in range(n):
        row: dict[str, Any] = {"epoch": round((i + 1) / n, 4)}
        for name, key in HF_KEYS.items():
            if series.get(name) is not None:
                row[key] = float(series[name][i])
        row["step"] = first_step + i
        rows.append(row)
    state = {"global_step": first_step + n - 1, "max_steps": first_step + n - 1, "log_history": rows,
             "logging_steps": 1}
    root.mkdir(parents=True, exist_ok=True)
    (root / "trainer_state.json").write_text(json.dumps(state, allow_nan=True), encoding="utf-8")
    if manifest:
        (root / "triage.json").write_text(json.dumps(manifest), encoding="utf-8")
    return open_run(str(root))


def nan() -> float:
    return math.nan
