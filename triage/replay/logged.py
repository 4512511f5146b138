"""What the run itself logged and dumped for a rollout, to hold a replay against.

slime logs `rollout R: {...}` once per rollout (the means of the log-prob passes:
`rollout/log_probs`, `rollout/ref_log_probs`) and `step N: {...}` per optimizer step,
N = R * num_steps_per_rollout + k; `--dump-details` keeps the per-token log-probs of
each rollout in `train_data/`. A replay of rollout R is compared with all three.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from triage.errors import TriageError, Unavailable

if TYPE_CHECKING:
    from triage.run.run import Run

_TRAILING_INT = re.compile(r"(\d+)$")
NEED_DUMP = "rerun with `--dump-details <dir>` (or --save-debug-rollout-data <dir>/{rollout_id}.pt)"


def rollout_id_of(path: Path) -> int | None:
    m = _TRAILING_INT.search(path.stem)
    return int(m.group(1)) if m and not path.stem.startswith("eval_") else None


def dumped_rollouts(run: Run) -> dict[int, Path]:
    """Rollout id -> its rollout dump."""
    out: dict[int, Path] = {}
    for p in run.rollout_dump_paths():
        rid = rollout_id_of(p)
        if rid is not None:
            out.setdefault(rid, p)
    if not out:
        raise Unavailable("rollout_dump", "the run saved no rollout dump to replay a step on", NEED_DUMP)
    return dict(sorted(out.items()))


def steps_per_rollout(run: Run) -> int:
    v = run.args.get("num_steps_per_rollout")
    return int(v) if isinstance(v, int) and v > 0 else 1


def records(run: Run, kind: str) -> dict[int, dict[str, float]]:
    """The run's logged `kind N: {...}` records by N (numeric values only)."""
    if not run.artifacts.logs:
        return {}
    table = run.log.metrics
    out: dict[int, dict[str, float]] = {}
    for key in table.keys(kind):
        idx, vals = table.series(kind, key)
        for i, v in zip(idx.tolist(), vals.tolist()):
            out.setdefault(int(i), {})[key] = float(v)
    return out


def nonfinite_onset_rollout(run: Run) -> int | None:
    """The rollout whose step first logged a non-finite loss or grad norm, if any."""
    spr = steps_per_rollout(run)
    for n, rec in sorted(records(run, "step").items()):
        for key in ("train/loss", "train/grad_norm", "train/pg_loss", "train/kl_loss"):
            v = rec.get(key)
            if v is not None and not math.isfinite(v):
                return n // spr
    for n, rec in sorted(records(run, "rollout").items()):
        for key in ("rollout/log_probs", "rollout/ref_log_probs", "rollout/advantages"):
            v = rec.get(key)
            if v is not None and not math.isfinite(v):
                return n
    return None


@dataclass
class Logged:
    """The run's own numbers for one rollout and its first step."""

    rollout_id: int
    rollout: dict[str, float]
    step_index: int
    step: dict[str, float]
    log_probs: list[torch.Tensor] | None = None  # per token, from the run's train dump
    ref_log_probs: list[torch.Tensor] | None = None
    train_dump: str | None = None


def logged_for(run: Run, rollout_id: int) -> Logged:
    from triage.formats.dumps import load_train_dump

    spr = steps_per_rollout(run)
    index = rollout_id * spr
    logged = Logged(rollout_id, records(run, "rollout").get(rollout_id, {}), index,
                    records(run, "step").get(index, {}))
    files = [p for p in run.artifacts.train_dumps
             if p.stem == str(rollout_id) or p.stem.startswith(f"{rollout_id}_")]
    lps: list[torch.Tensor] = []
    refs: list[torch.Tensor] = []
    for f in sorted(files):
        try:
            dump = load_train_dump(f)
        except TriageError:
            return logged
        if dump.log_probs is None:
            return logged
        lps += [torch.tensor(x if x is not None else [], dtype=torch.float32) for x in dump.log_probs]
        if dump.ref_log_probs is not None:
            refs += [torch.tensor(x if x is not None else [], dtype=torch.float32) for x in dump.ref_log_probs]
    if lps:
        logged.log_probs = lps
        logged.ref_log_probs = refs or None
        logged.train_dump = ", ".join(str(f.relative_to(run.root)) if f.is_relative_to(run.root) else str(f)
                                      for f in sorted(files))
    return logged


def close(a: float, b: float, rel: float, abs_: float) -> bool:
    if math.isnan(a) and math.isnan(b):
        return True
    if not (math.isfinite(a) and math.isfinite(b)):
        return a == b
    return abs(a - b) <= abs_ + rel * abs(b)
