"""Robust statistics on metric series: what a probe quotes as evidence must be right."""

from __future__ import annotations

import math

import numpy as np
import pytest

from triage.anomaly import (
    change_point,
    change_points,
    evidence_number,
    find_spikes,
    median_mad,
    nonfinite_onset,
    robust_z,
    rolling_median_mad,
    trend,
)


def noisy(n: int, level: float, spread: float, seed: int = 0) -> np.ndarray:
    return level + spread * np.random.default_rng(seed).standard_normal(n)


def test_median_mad_ignores_one_outlier_that_ruins_mean_and_std():
    x = np.array([1.0, 1.1, 0.9, 1.0, 1.05, 0.95, 1000.0])
    med, mad = median_mad(x)
    assert med == pytest.approx(1.0)
    assert mad == pytest.approx(1.4826 * 0.05, rel=1e-6)
    assert np.std(x) > 300  # what a non-robust z would have divided by
    assert robust_z(x)[-1] > 10_000


def test_median_mad_skips_nan_and_reports_nan_when_empty():
    assert median_mad([math.nan, 2.0, 4.0])[0] == 3.0
    med, mad = median_mad([math.nan, math.inf])
    assert math.isnan(med) and math.isnan(mad)


def test_rolling_median_uses_only_the_points_before():
    med, _mad = rolling_median_mad([1, 2, 3, 100, 5], window=3)
    assert math.isnan(med[0])
    assert med[1] == 1 and med[2] == 1.5 and med[3] == 2 and med[4] == 3


def test_find_spikes_reports_step_value_and_ratio():
    values = noisy(40, 0.3, 0.02, seed=1)
    values[25] = 4.5
    steps = np.arange(100, 140)
    spikes = find_spikes(values, steps, window=10, z_threshold=6, min_ratio=5)
    assert [s.step for s in spikes] == [125]
    assert spikes[0].value == pytest.approx(4.5)
    assert spikes[0].ratio == pytest.approx(4.5 / spikes[0].baseline)
    assert 14 < spikes[0].ratio < 16


def test_find_spikes_needs_the_ratio_not_only_z_on_a_flat_series():
    values = np.full(30, 0.5)
    values[20] = 0.56  # z is huge against a zero MAD, but 12% is not a spike
    assert find_spikes(values, window=10, z_threshold=6, min_ratio=2) == []


def test_find_spikes_absolute_ceiling_flags_even_a_steady_high_level():
    values = np.full(10, 150.0)
    spikes = find_spikes(values, abs_threshold=100.0)
    assert len(spikes) == 10


def test_find_spikes_skips_nonfinite_points():
    values = np.array([0.3, 0.31, 0.29, 0.3, math.nan, 0.3, 0.3, 3.0, 0.3])
    spikes = find_spikes(values, window=5, z_threshold=6, min_ratio=5)
    assert [s.index for s in spikes] == [7]


def test_change_point_finds_level_shift_step():
    values = np.concatenate([noisy(30, 0.3, 0.03, 2), noisy(20, 5.0, 0.5, 3)])
    steps = np.arange(50) * 2
    cp = change_point(values, steps)
    assert cp is not None
    assert cp.step == 60
    assert cp.before == pytest.approx(0.3, abs=0.05)
    assert cp.after == pytest.approx(5.0, abs=0.5)
    assert cp.gain > 0.8


def test_change_point_none_on_stationary_noise():
    assert change_point(noisy(60, 1.0, 0.1, 4)) is None


def test_change_point_is_not_fooled_by_one_outlier():
    values = noisy(40, 1.0, 0.05, 5)
    values[20] = 50.0
    assert change_point(values) is None


def test_change_points_binary_segmentation_finds_both_shifts_in_order():
    values = np.concatenate([noisy(20, 1.0, 0.05, 6), noisy(20, 4.0, 0.1, 7), noisy(20, 0.5, 0.05, 8)])
    cps = change_points(values, np.arange(60))
    assert [c.step for c in cps] == [20, 40]


def test_change_points_finds_nothing_in_noise():
    assert change_points(noisy(60, 1.0, 0.1, 14), np.arange(60)) == []


def test_change_point_on_long_series_uses_block_medians():
    values = np.concatenate([noisy(3000, 1.0, 0.05, 9), noisy(2000, 3.0, 0.05, 10)])
    cp = change_point(values, np.arange(5000))
    assert cp is not None and abs(cp.step - 3000) <= 10


def test_trend_rising_falling_and_flat():
    up = trend(np.arange(30) + noisy(30, 0, 2, 11))
    assert up.rising(alpha=0.05) and up.tau > 0.5 and up.slope == pytest.approx(1.0, abs=0.2)
    down = trend(-np.arange(30.0))
    assert down.falling(alpha=0.05) and down.tau == pytest.approx(-1.0)
    flat = trend(noisy(40, 0.5, 0.1, 12))
    assert not flat.rising(alpha=0.05) and not flat.falling(alpha=0.05)


def test_trend_counts_a_huge_value_once():
    values = noisy(30, 1.0, 0.1, 13)
    values[-1] = 1e9
    assert not trend(values).rising(alpha=0.05)


def test_trend_constant_series_has_no_trend():
    t = trend(np.ones(20))
    assert t.tau == 0 and t.p_value == 1.0


def test_nonfinite_onset_isolated_and_persistent():
    steps = np.arange(10, 20)
    isolated = np.array([1, 1, 1, math.nan, 1, 1, 1, 1, 1, 1], dtype=float)
    nf = nonfinite_onset(isolated, steps)
    assert nf is not None
    assert nf.onset_step == 13 and nf.steps == (13,)
    assert not nf.persistent and nf.runs[0].recovered
    assert nf.finite_before == (1.0, 1.0, 1.0)

    persistent = np.array([0.5, 0.6, 0.7, 2.0, 9.0, math.inf, math.nan, math.nan, math.nan, math.nan])
    nf = nonfinite_onset(persistent, steps)
    assert nf.onset_step == 15 and nf.persistent
    assert nf.runs[-1].start_step == 15 and nf.runs[-1].length == 5
    assert nf.runs[-1].values == ("inf", "nan")
    assert nf.finite_before[-2:] == (2.0, 9.0)


def test_nonfinite_onset_none_when_all_finite():
    assert nonfinite_onset([1.0, 2.0]) is None


def test_evidence_number_is_json_safe():
    assert evidence_number(math.nan) == "nan"
    assert evidence_number(-math.inf) == "-inf"
    assert evidence_number(0.123456789) == 0.123457


def test_a_spike_must_also_leave_the_healthy_range_when_a_floor_is_given():
    values = np.concatenate([noisy(30, 0.01, 0.0005, 21), [0.4], noisy(10, 0.01, 0.0005, 22)])
    assert [s.index for s in find_spikes(values, window=10, z_threshold=6, min_ratio=5)] == [30]
    assert find_spikes(values, window=10, z_threshold=6, min_ratio=5, floor=1.0) == []
    values[30] = 4.0
    assert [s.index for s in find_spikes(values, window=10, z_threshold=6, min_ratio=5, floor=1.0)] == [30]
