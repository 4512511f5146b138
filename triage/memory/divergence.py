"""The first metric that leaves the baseline's trajectory, and from which step.

The two runs' series are aligned by step (the steps both logged). At each aligned step
the baseline's own noise sets the tolerance: the median and the robust spread (1.4826 ×
the median absolute deviation, MAD) of the baseline's values in a window of steps
around it. The run's own median over the same window leaves that band when its robust
z-score |run median - baseline median| / spread exceeds `baseline.divergence_z` (3.5:
Iglewicz & Hoaglin's cut-off for outliers, "How to Detect and Handle Outliers", 1993),
and it diverges from the first such step
after which it stays out for `baseline.divergence_persist` aligned steps (a single stray
point is noise). A non-finite value where the baseline is finite diverges at once. A
flat baseline (spread 0, e.g. a constant learning rate) gets a floor of
`baseline.divergence_rel_floor` of its magnitude.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from triage.errors import TriageError
from triage.memory.models import Divergence
from triage.thresholds import count, threshold

if TYPE_CHECKING:
    from triage.run.run import Run

MAD_TO_SIGMA = 1.4826  # the MAD of a normal distribution times this is its standard deviation


def rule_text() -> str:
    return (f"aligned by step; tolerance = {threshold('baseline.divergence_z'):g} × the baseline's robust spread "
            f"(1.4826 × MAD over ±{count('baseline.divergence_window')} steps; each run's median over that window), out for "
            f"{count('baseline.divergence_persist')} step(s) in a row")


def _window(steps: np.ndarray, values: np.ndarray, at: int, half: int) -> np.ndarray:
    i = int(np.searchsorted(steps, at))
    window = values[max(0, i - half):min(len(values), i + half + 1)]
    return window[np.isfinite(window)]


def _band(steps: np.ndarray, values: np.ndarray, at: int, half: int) -> tuple[float, float]:
    """The baseline's local median around step `at`, and its robust spread there (1.4826 × MAD)."""
    window = _window(steps, values, at, half)
    if window.size == 0:
        return float("nan"), float("nan")
    med = float(np.median(window))
    spread = MAD_TO_SIGMA * float(np.median(np.abs(window - med)))
    floor = threshold("baseline.divergence_rel_floor") * max(abs(med), 1e-12)
    return med, max(spread, floor)


def first_divergence(run: Run, baseline: Run) -> tuple[list[Divergence], int]:
    """Every metric that diverged, earliest first, and the largest number of aligned steps seen."""
    try:
        ours, theirs = run.metrics, baseline.metrics
        names = [n for n in ours.available() if theirs.get(n) is not None]
    except TriageError:
        return [], 0
    z = threshold("baseline.divergence_z")
    half = count("baseline.divergence_window")
    persist = count("baseline.divergence_persist")
    found: list[Divergence] = []
    aligned_max = 0
    for name in names:
        a, b = ours.get(name), theirs.get(name)
        if a is None or b is None:
            continue
        order = np.argsort(b.steps, kind="stable")
        b_steps, b_values = b.steps[order], b.values[order]
        order = np.argsort(a.steps, kind="stable")
        a_steps, a_values = a.steps[order], a.values[order]
        common, ia, _ = np.intersect1d(a_steps, b_steps, return_indices=True)
        aligned_max = max(aligned_max, int(common.size))
        if common.size == 0:
            continue
        out_run = 0
        start: tuple[int, float | None, float, float] | None = None
        for step, idx in zip(common, ia):
            v = float(a_values[idx])
            med, tol = _band(b_steps, b_values, int(step), half)
            if np.isfinite(v):  # the run's own local median: one noisy record is not a departure
                local = _window(a_steps, a_values, int(step), half)
                v = float(np.median(local)) if local.size else v
            if not np.isfinite(med):
                out_run, start = 0, None
                continue
            if not np.isfinite(v):
                found.append(Divergence(metric=name, source=a.source, step=int(step), run_value=None,
                                        baseline_value=med, tolerance=z * tol))
                break
            if abs(v - med) > z * tol:
                if out_run == 0:
                    start = (int(step), v, med, tol)
                out_run += 1
                if out_run >= persist and start is not None:
                    found.append(Divergence(metric=name, source=a.source, step=start[0], run_value=start[1],
                                            baseline_value=start[2], tolerance=z * start[3]))
                    break
            else:
                out_run, start = 0, None
    found.sort(key=lambda d: d.step)
    return found, aligned_max
