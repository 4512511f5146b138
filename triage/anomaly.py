"""Robust statistics for metric series: spikes, change points, trends, non-finite onsets.

Training metrics are noisy and heavy-tailed: one bad batch moves a mean and a standard
deviation for good, so everything here is built on the median and the median absolute
deviation (MAD). A spike is a point far above the median of the points just before it,
measured in MADs (a robust z-score). A change point is the split that best explains a
series as two levels, each summarised by its median (an L1 cost, which one outlier
cannot drag). A trend is the Mann-Kendall test: the sign of every later-minus-earlier
pair, so a single huge value counts once, like any other. All functions take plain
arrays and return small frozen records a probe can quote as evidence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from triage.thresholds import count, threshold

# MAD of a normal distribution times this is its standard deviation.
MAD_TO_SIGMA = 1.4826
# Series longer than this are reduced to block medians before O(n^2) work.
MAX_POINTS_QUADRATIC = 600


def _array(values: object) -> np.ndarray:
    return np.asarray(values, dtype=np.float64).reshape(-1)


def median_mad(values: object) -> tuple[float, float]:
    """(median, MAD) of the finite values; MAD is scaled to a normal's sigma. NaN, NaN when empty."""
    x = _array(values)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return math.nan, math.nan
    med = float(np.median(x))
    return med, float(MAD_TO_SIGMA * np.median(np.abs(x - med)))


SCALE_FLOOR = threshold("anomaly.scale_floor")
SPIKE_MIN_HISTORY = count("anomaly.spike_min_history")
SPIKE_WINDOW = count("grad_norm.window")
SPIKE_Z = threshold("grad_norm.spike_robust_z")
SPIKE_MIN_RATIO = threshold("loss.spike_ratio")  # the guides' smallest jump called a spike (2x)
CHANGE_MIN_GAIN = threshold("anomaly.change_min_gain")
CHANGE_MIN_SHIFT = threshold("anomaly.change_min_shift")
CHANGE_MIN_SEGMENT = count("anomaly.change_min_segment")
NOISE_FLOOR = threshold("anomaly.noise_floor")
RECENT_FRACTION = threshold("recent.fraction")
RECENT_MIN = count("recent.min_records")
# Numerical guards, not thresholds: the smallest scale a division may use.
TINY = 1e-12


def _scale_floor(median: float, mad: float, rel: float = SCALE_FLOOR, tiny: float = TINY) -> float:
    """A MAD of zero (a flat stretch) would make every change infinitely significant.

    The floor is a fraction of the level itself: a 5% wobble on a flat series is one sigma.
    """
    return max(mad, rel * abs(median), tiny)


def robust_z(values: object, center: float | None = None, scale: float | None = None) -> np.ndarray:
    """(x - median) / MAD-sigma for every value, against the whole series or a given center/scale."""
    x = _array(values)
    med, mad = median_mad(x)
    c = med if center is None else center
    s = _scale_floor(c, mad if scale is None else scale)
    return (x - c) / s


def rolling_median_mad(values: object, window: int) -> tuple[np.ndarray, np.ndarray]:
    """Median and MAD of the `window` finite values strictly before each point (NaN where none precede)."""
    x = _array(values)
    med = np.full(x.shape, np.nan)
    mad = np.full(x.shape, np.nan)
    history: list[float] = []
    for i, v in enumerate(x):
        if history:
            h = np.asarray(history[-window:])
            m = float(np.median(h))
            med[i] = m
            mad[i] = float(MAD_TO_SIGMA * np.median(np.abs(h - m)))
        if math.isfinite(v):
            history.append(float(v))
    return med, mad


@dataclass(frozen=True)
class Spike:
    """A point far above the level of the points just before it."""

    index: int  # position in the series
    step: int  # the step / rollout id it was logged at
    value: float
    baseline: float  # rolling median before it
    z: float  # robust z against the rolling median / MAD
    ratio: float  # value / baseline (inf when the baseline is 0)

    def as_evidence(self) -> dict[str, float | int]:
        return {"step": self.step, "value": evidence_number(self.value), "baseline": evidence_number(self.baseline),
                "z": evidence_number(self.z), "ratio": evidence_number(self.ratio)}


def find_spikes(
    values: object,
    steps: object | None = None,
    *,
    window: int = SPIKE_WINDOW,
    z_threshold: float = SPIKE_Z,
    min_ratio: float = SPIKE_MIN_RATIO,
    abs_threshold: float | None = None,
    floor: float | None = None,
    min_history: int = SPIKE_MIN_HISTORY,
) -> list[Spike]:
    """Upward spikes: robust z over the trailing window above `z_threshold` and `min_ratio` x the
    trailing median, and above `floor` (the top of the healthy range, so a bump inside it is never
    a spike); or any value above `abs_threshold` (a hard ceiling from the guides).

    The ratio condition keeps a series with a near-zero MAD from flagging every wobble.
    Only the first `min_history` points are exempt from the relative test (nothing precedes them).
    """
    x = _array(values)
    st = np.arange(x.size) if steps is None else np.asarray(steps).reshape(-1)
    med, mad = rolling_median_mad(x, window)
    out: list[Spike] = []
    finite_seen = 0
    for i, v in enumerate(x):
        if not math.isfinite(v):
            continue
        base = float(med[i]) if math.isfinite(med[i]) else math.nan
        z = math.nan
        ratio = math.nan
        relative = False
        if finite_seen >= min_history and math.isfinite(base):
            scale = _scale_floor(base, float(mad[i]))
            z = (v - base) / scale
            ratio = v / base if base > 0 else (math.inf if v > 0 else math.nan)
            # a level of 0 (a loss or a grad norm not yet moving, a zero-advantage skip) has no multiple
            relative = z >= z_threshold and base > 0 and ratio >= min_ratio and (floor is None or v > floor)
        absolute = abs_threshold is not None and v > abs_threshold
        if relative or absolute:
            out.append(Spike(i, int(st[i]), float(v), base, float(z), float(ratio)))
        finite_seen += 1
    return out


@dataclass(frozen=True)
class ChangePoint:
    """The split that best explains a series as two levels (medians)."""

    index: int  # first position of the second segment
    step: int
    before: float  # median before
    after: float  # median after
    gain: float  # fraction of the one-level L1 cost the split removes (0..1)

    @property
    def ratio(self) -> float:
        return self.after / self.before if self.before != 0 else math.inf

    def as_evidence(self) -> dict[str, float | int]:
        return {"step": self.step, "median_before": evidence_number(self.before), "median_after": evidence_number(self.after),
                "cost_reduction": evidence_number(self.gain)}


def _block_medians(x: np.ndarray, st: np.ndarray, limit: int) -> tuple[np.ndarray, np.ndarray]:
    if x.size <= limit:
        return x, st
    blocks = math.ceil(x.size / limit)
    n = x.size // blocks * blocks
    xm = np.median(x[:n].reshape(-1, blocks), axis=1)
    sm = st[:n].reshape(-1, blocks)[:, 0]
    return xm, sm


def _l1_cost(x: np.ndarray) -> float:
    return float(np.abs(x - np.median(x)).sum()) if x.size else 0.0


def change_point(
    values: object,
    steps: object | None = None,
    *,
    min_segment: int = CHANGE_MIN_SEGMENT,
    min_gain: float = CHANGE_MIN_GAIN,
    min_shift: float = CHANGE_MIN_SHIFT,
) -> ChangePoint | None:
    """The single best level shift in the finite values, or None when no split removes at least
    `min_gain` of the one-level L1 cost (deviations from the median), or when the two levels
    are less than `min_shift` noise sigmas apart (noise always has some best split)."""
    x = _array(values)
    st = np.arange(x.size) if steps is None else np.asarray(steps).reshape(-1)
    ok = np.isfinite(x)
    x, st = x[ok], st[ok]
    x, st = _block_medians(x, st, MAX_POINTS_QUADRATIC)
    if x.size < 2 * min_segment:
        return None
    total = _l1_cost(x)
    if total <= 0:
        return None
    best_k, best_cost = -1, math.inf
    for k in range(min_segment, x.size - min_segment + 1):
        cost = _l1_cost(x[:k]) + _l1_cost(x[k:])
        if cost < best_cost:
            best_k, best_cost = k, cost
    gain = 1.0 - best_cost / total
    if best_k < 0 or gain < min_gain:
        return None
    before, after = float(np.median(x[:best_k])), float(np.median(x[best_k:]))
    if not _significant(x[:best_k], x[best_k:], min_shift):
        return None
    return ChangePoint(best_k, int(st[best_k]), before, after, gain)


def _significant(a: np.ndarray, b: np.ndarray, min_shift: float) -> bool:
    """The two levels differ by at least `min_shift` sigmas of the noise around them (MAD of residuals)."""
    ma, mb = float(np.median(a)), float(np.median(b))
    residuals = np.concatenate([a - ma, b - mb])
    sigma = MAD_TO_SIGMA * float(np.median(np.abs(residuals)))
    scale = max(sigma, NOISE_FLOOR * max(abs(ma), abs(mb)), TINY)
    return abs(mb - ma) / scale >= min_shift


def _best_bump(x: np.ndarray, min_segment: int, min_shift: float) -> tuple[int, int, float] | None:
    """Circular binary segmentation's step: the stretch [i, j) whose level differs from the rest.

    One split cannot explain a bump (low, high, low): each half still mixes two levels.
    Returns (i, j, gain) for the best such stretch, or None.
    """
    n = x.size
    total = _l1_cost(x)
    if total <= 0 or n < 3 * min_segment:
        return None
    best: tuple[int, int, float] | None = None
    for i in range(min_segment, n - 2 * min_segment + 1):
        for j in range(i + min_segment, n - min_segment + 1):
            cost = _l1_cost(x[i:j]) + _l1_cost(np.concatenate([x[:i], x[j:]]))
            gain = 1.0 - cost / total
            if best is None or gain > best[2]:
                best = (i, j, gain)
    if best is None or not _significant(x[best[0] : best[1]], np.concatenate([x[: best[0]], x[best[1] :]]), min_shift):
        return None
    return best


def change_points(
    values: object,
    steps: object | None = None,
    *,
    min_segment: int = CHANGE_MIN_SEGMENT,
    min_gain: float = CHANGE_MIN_GAIN,
    min_shift: float = CHANGE_MIN_SHIFT,
    max_points: int = 4,
) -> list[ChangePoint]:
    """Binary segmentation in step order: split at the best change point, then look inside each part.

    Where no single split is good enough, a stretch that differs from its surroundings (a
    bump) is tried, as circular binary segmentation does; series are reduced to at most
    120 block medians for that search.
    """
    x = _array(values)
    st = np.arange(x.size) if steps is None else np.asarray(steps).reshape(-1)
    ok = np.isfinite(x)
    x, st = _block_medians(x[ok], st[ok], 120)
    cuts: set[int] = set()
    pending = [(0, x.size)]
    while pending and len(cuts) < max_points:
        lo, hi = pending.pop(0)
        seg = x[lo:hi]
        cp = change_point(seg, min_segment=min_segment, min_gain=min_gain, min_shift=min_shift)
        if cp is not None:
            cut = lo + cp.index
            cuts.add(cut)
            pending += [(lo, cut), (cut, hi)]
            continue
        bump = _best_bump(seg, min_segment, min_shift)
        if bump is not None and bump[2] >= min_gain:
            a, b = lo + bump[0], lo + bump[1]
            cuts.update((a, b))
            pending += [(lo, a), (a, b), (b, hi)]
    out = []
    bounds = [0, *sorted(cuts), x.size]
    for left, cut, right in zip(bounds, bounds[1:], bounds[2:]):
        before, after = x[left:cut], x[cut:right]
        gain = 1.0 - (_l1_cost(before) + _l1_cost(after)) / max(_l1_cost(x[left:right]), TINY)
        out.append(ChangePoint(cut, int(st[cut]), float(np.median(before)), float(np.median(after)), gain))
    return out


@dataclass(frozen=True)
class Trend:
    """Mann-Kendall trend test with Sen's slope."""

    n: int
    tau: float  # Kendall's tau in [-1, 1]: +1 every later value is larger
    z: float
    p_value: float  # two-sided, normal approximation
    slope: float  # Sen's slope: median of pairwise slopes, per step

    def rising(self, alpha: float, min_tau: float = 0.0) -> bool:
        return self.tau > min_tau and self.p_value < alpha

    def falling(self, alpha: float, min_tau: float = 0.0) -> bool:
        return self.tau < -min_tau and self.p_value < alpha

    def as_evidence(self) -> dict[str, float | int]:
        return {"n": self.n, "kendall_tau": evidence_number(self.tau), "p_value": evidence_number(self.p_value),
                "sen_slope": evidence_number(self.slope)}


def trend(values: object, steps: object | None = None) -> Trend:
    """Monotone-trend test on the finite values (ties count as neither up nor down)."""
    x = _array(values)
    st = np.arange(x.size, dtype=np.float64) if steps is None else np.asarray(steps, dtype=np.float64).reshape(-1)
    ok = np.isfinite(x)
    x, st = x[ok], st[ok]
    x, st = _block_medians(x, st, MAX_POINTS_QUADRATIC)
    n = x.size
    if n < 3:
        return Trend(n, 0.0, 0.0, 1.0, 0.0)
    diff = x[None, :] - x[:, None]
    upper = np.triu_indices(n, k=1)
    signs = np.sign(diff[upper])
    s = float(signs.sum())
    pairs = n * (n - 1) / 2
    _, counts = np.unique(x, return_counts=True)
    var = (n * (n - 1) * (2 * n + 5) - float(np.sum(counts * (counts - 1) * (2 * counts + 5)))) / 18.0
    if var <= 0:
        z = 0.0
    elif s > 0:
        z = (s - 1) / math.sqrt(var)
    elif s < 0:
        z = (s + 1) / math.sqrt(var)
    else:
        z = 0.0
    p = math.erfc(abs(z) / math.sqrt(2))
    dx = (st[None, :] - st[:, None])[upper]
    good = dx != 0
    slope = float(np.median(diff[upper][good] / dx[good])) if good.any() else 0.0
    return Trend(n, s / pairs, z, p, slope)


@dataclass(frozen=True)
class NonFiniteRun:
    """A stretch of consecutive non-finite records in one series."""

    start_step: int
    end_step: int
    length: int
    recovered: bool  # a finite value follows
    values: tuple[str, ...]  # "nan", "inf", "-inf" as logged


@dataclass(frozen=True)
class NonFinite:
    """Where a series stops being finite."""

    onset_index: int
    onset_step: int
    steps: tuple[int, ...]  # every non-finite step
    runs: tuple[NonFiniteRun, ...]
    finite_before: tuple[float, ...]  # up to 5 finite values just before the onset
    total: int  # records in the series

    @property
    def persistent(self) -> bool:
        """The series ends non-finite: nothing after its last bad stretch was finite."""
        return bool(self.runs) and not self.runs[-1].recovered


def _kind(v: float) -> str:
    return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")


def nonfinite_onset(values: object, steps: object | None = None) -> NonFinite | None:
    """The first NaN / Inf of a series and every stretch of them, or None when all values are finite."""
    x = _array(values)
    st = np.arange(x.size) if steps is None else np.asarray(steps).reshape(-1)
    bad = ~np.isfinite(x)
    if not bad.any():
        return None
    runs: list[NonFiniteRun] = []
    i = 0
    while i < x.size:
        if not bad[i]:
            i += 1
            continue
        j = i
        while j + 1 < x.size and bad[j + 1]:
            j += 1
        kinds = tuple(dict.fromkeys(_kind(float(v)) for v in x[i : j + 1]))
        runs.append(NonFiniteRun(int(st[i]), int(st[j]), j - i + 1, j + 1 < x.size, kinds))
        i = j + 1
    onset = int(np.argmax(bad))
    before = x[:onset][np.isfinite(x[:onset])][-5:]
    return NonFinite(
        onset_index=onset,
        onset_step=int(st[onset]),
        steps=tuple(int(s) for s in st[bad]),
        runs=tuple(runs),
        finite_before=tuple(float(v) for v in before),
        total=int(x.size),
    )


def tail(values: object, fraction: float = RECENT_FRACTION, minimum: int = RECENT_MIN) -> np.ndarray:
    """The last `fraction` of a series (at least `minimum` points, at most all)."""
    x = _array(values)
    k = min(x.size, max(minimum, int(math.ceil(fraction * x.size))))
    return x[x.size - k :]


def head(values: object, fraction: float = RECENT_FRACTION, minimum: int = RECENT_MIN) -> np.ndarray:
    """The first `fraction` of a series (at least `minimum` points, at most all)."""
    x = _array(values)
    k = min(x.size, max(minimum, int(math.ceil(fraction * x.size))))
    return x[:k]


def evidence_number(v: float, digits: int = 6) -> float | str:
    """A float for JSON evidence: `digits` significant digits, non-finite values as "nan" / "inf" / "-inf"."""
    v = float(v)
    if not math.isfinite(v):
        return _kind(v)
    if v == 0:
        return 0.0
    return float(f"{v:.{digits}g}")
