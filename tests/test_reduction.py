"""Single-device reduction: the same step at world size 1 and in the run's layout, and the bisection."""

from __future__ import annotations

import pytest
import torch
from test_replay import make_tiny_run

from triage.errors import Unavailable
from triage.run.source import open_run


def _probe(**params):
    from probes.single_device_reduction import SingleDeviceReduction

    return SingleDeviceReduction(SingleDeviceReduction.Params(**params))


def test_a_run_that_is_not_parallel_has_nothing_to_reduce(tmp_path):
    with pytest.raises(Unavailable) as exc:
        _probe().examine(open_run(str(make_tiny_run(tmp_path / "run"))))
    assert "not parallel" in exc.value.reason


def test_a_slime_run_that_cannot_be_relaunched_gets_the_commands_to_run(tmp_path):
    run_dir = make_tiny_run(tmp_path / "run", flags="--tensor-model-parallel-size 2 --actor-num-gpus-per-node 2")
    with pytest.raises(Unavailable) as exc:
        _probe().examine(open_run(str(run_dir)))
    assert "slime is not installed here" in exc.value.reason
    single, parallel = exc.value.command.split("  and  ")
    assert "--tensor-model-parallel-size 1" in single and "--actor-num-gpus-per-node 1" in single
    assert "--tensor-model-parallel-size 2" in parallel and "--actor-num-gpus-per-node 2" in parallel
    assert "--load-debug-rollout-data" in single and "--load-debug-rollout-data" in parallel


def test_tolerance_comes_from_the_two_references_and_the_dtype():
    from probes.single_device_reduction import ReductionParams, compare, tolerances

    eps = float(torch.finfo(torch.float32).eps)
    ref = {"log_probs": [torch.tensor([-2.0, -0.5])], "train/grad_norm": 4.0}
    alt = {"log_probs": [torch.tensor([-2.0, -0.5001])], "train/grad_norm": 4.0}
    tol = tolerances(ref, alt, eps, ReductionParams(safety=10, eps_factor=32))
    assert tol["log_probs"] == pytest.approx(10 * 1e-4, rel=1e-2)  # 10 x the references' spread
    assert tol["train/grad_norm"] == pytest.approx(32 * eps * 4.0)  # no spread: the dtype's floor
    assert compare(ref, {"log_probs": [torch.tensor([-2.0, -0.5005])], "train/grad_norm": 4.0}, tol) == {}
    off = compare(ref, {"log_probs": [torch.tensor([-2.0, -0.6])], "train/grad_norm": 2.0}, tol)
    assert set(off) == {"log_probs", "train/grad_norm"}
    assert off["train/grad_norm"]["max_abs_diff"] == 2.0


@pytest.mark.parametrize("broken, expected", [({"pp"}, ["pp"]), ({"tp"}, ["tp"]), ({"cp"}, ["cp"]),
                                              ({"tp", "cp"}, ["tp", "pp", "cp"])])
def test_bisection_names_the_dimension_that_breaks(broken, expected):
    from probes.single_device_reduction import compare

    layout = {"tp": 2, "pp": 2, "cp": 2, "ep": 1}
    single = {d: 1 for d in layout}
    ref = {"train/grad_norm": 1.0}
    tol = {"train/grad_norm": 1e-6}
    tried = []

    def replay(tag, sizes, extra=None):
        tried.append(tag)
        on = {d for d, s in sizes.items() if s > 1}
        # a bug in one dimension shows whenever it is on; two dimensions that only break together need both
        bad = bool(on & broken) if len(broken) == 1 else broken <= on
        return {"train/grad_norm": 2.0 if bad else 1.0}

    assert compare(ref, replay("full", layout), tol)
    found = _probe()._bisect(["tp", "pp", "cp"], layout, single, ref, tol, replay)
    assert found == expected
    assert len(tried) <= 4


# --- through the testbed: real two-process gloo jobs -------------------------------------------------


def _scenario(name, tmp_path):
    scenarios = pytest.importorskip("triage.testbed.scenarios")
    if name not in scenarios.SCENARIOS:
        pytest.skip(f"the testbed has no scenario {name!r}")
    return scenarios.generate(name, tmp_path)


def _relaunched(name, tmp_path):
    """The probe on scenario `name`, with consent to relaunch its job in the scenario's environment."""
    from triage.replay.consent import relaunch_permission
    from triage.testbed.scenarios import job_environment

    run = open_run(str(_scenario(name, tmp_path)))
    run.relaunch_allowed, run.relaunch_env = True, job_environment(name)
    with relaunch_permission(True):
        return _probe().examine(run)


@pytest.mark.slow
def test_sharding_bug_scenario_differs_in_tp(tmp_path):
    obs = _relaunched("parallel.sharding_bug", tmp_path)
    assert obs.outcome == "parallel_differs", obs.summary
    assert obs.evidence["dimension"] == "tp" and obs.evidence["layout"] == {"tp": 2}
    diff = obs.evidence["differences"]
    assert diff["log_probs"]["max_abs_diff"] > 100 * diff["log_probs"]["tolerance"]
    assert [r["layout"] for r in obs.evidence["replays"]] == ["single device", "single device", {"tp": 2}]


@pytest.mark.slow
@pytest.mark.parametrize("name, layout", [("healthy.tp2", {"tp": 2}), ("healthy.pp2", {"pp": 2})])
def test_healthy_parallel_scenarios_are_consistent(tmp_path, name, layout):
    obs = _relaunched(name, tmp_path)
    assert obs.outcome == "consistent", obs.summary
    assert obs.evidence["layout"] == layout
    for q, d in obs.evidence["largest_differences"].items():
        assert d <= obs.evidence["tolerances"][q], q
