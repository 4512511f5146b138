"""Tensor anomaly detection: hooks that find the first overflowing module, and the bad-sample replay."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from test_replay import make_tiny_run, rollout_samples, tiny_model
from torch import nn

from triage.replay.hooks import TensorWatch
from triage.run.source import open_run


def massive_channel(model, layer: int = 1, channel: int = 3, scale: float = 1e6):
    """The same function in exact arithmetic, but one SwiGLU channel's intermediate value is huge."""
    with torch.no_grad():
        model.model.layers[layer].mlp.up_proj.weight[channel] *= scale
        model.model.layers[layer].mlp.down_proj.weight[:, channel] /= scale
    return model


def test_watch_names_the_linear_that_overflows_fp16():
    model = massive_channel(tiny_model("llama")).half()
    ids = torch.randint(0, 64, (3, 10), generator=torch.Generator().manual_seed(0))
    with TensorWatch(model) as watch:
        watch.step, watch.samples = 4, [10, 11, 12]
        model(input_ids=ids).logits.float().logsumexp(-1).mean().backward()
    a = watch.found
    assert a is not None and a.phase == "forward" and a.kind == "nonfinite"
    assert a.module == "model.layers.1.mlp.up_proj" and a.module_type == "Linear"
    assert a.dtype == "float16" and a.step == 4
    assert a.sample_indices == (10, 11, 12)
    assert a.weight_abs_max > 1e4  # the scaled row
    assert 0 < a.input_abs_max < 100  # RMS-normed inputs are small: the weights overflow it
    assert watch.found_backward is not None  # the NaN reaches the gradients too


def test_watch_stays_quiet_on_a_healthy_fp32_model():
    model = tiny_model()
    with TensorWatch(model) as watch:
        model(input_ids=torch.randint(0, 64, (2, 8))).logits.logsumexp(-1).mean().backward()
    assert watch.found is None


class FunctionalMLP(nn.Module):
    """Like Megatron's fused layers: weights held here, computed with functional calls, no child modules."""

    def __init__(self) -> None:
        super().__init__()
        self.linear_fc1 = nn.Module()
        self.linear_fc1.weight = nn.Parameter(torch.randn(8, 4))
        self.linear_fc2 = nn.Module()
        self.linear_fc2.weight = nn.Parameter(torch.randn(4, 4) * 0.01)

    def forward(self, x):
        h = F.linear(x, self.linear_fc1.weight.to(torch.float16))
        gate, up = h.chunk(2, dim=-1)
        return F.linear(F.silu(gate) * up, self.linear_fc2.weight.to(torch.float16))


def test_watch_names_the_parameter_an_overflowing_functional_op_read():
    layer = nn.Sequential(FunctionalMLP())
    with torch.no_grad():
        layer[0].linear_fc1.weight[5] *= 1e5  # an "up" row
    x = torch.ones(2, 3, 4, dtype=torch.float16)
    with TensorWatch(layer) as watch:
        watch.samples = [7, 9]
        layer(x).float().sum().backward()
    a = watch.found_forward
    assert a.module == "0.linear_fc1" and a.op == "linear" and a.module_type == "FunctionalMLP"
    assert a.weights == ("0.linear_fc1.weight",)
    assert a.sample_indices == (7, 9)


def test_watch_sees_a_gradient_that_goes_non_finite_only_in_backward():
    class Root(nn.Module):
        def forward(self, x):
            return torch.sqrt(x)  # finite at 0, its derivative is not

    model = nn.Sequential(nn.Linear(2, 2), Root())
    with torch.no_grad():
        model[0].weight.zero_()
        model[0].bias.zero_()
    with TensorWatch(model) as watch:
        model(torch.ones(1, 2)).sum().backward()
    assert watch.found_forward is None
    b = watch.found_backward
    assert b is not None and b.phase == "backward" and b.kind == "nonfinite"
    assert b.module == "0"  # the gradient of the linear layer's output is the first to go infinite


def test_values_beyond_the_safe_range_are_reported_before_they_overflow():
    layer = nn.Linear(4, 2).half()
    with torch.no_grad():
        layer.weight.fill_(10000.0)  # 4 x 10000 = 40000: finite in fp16, but beyond half of 65504
    with TensorWatch(layer, safe_fraction=0.5) as watch:
        layer(torch.ones(1, 4, dtype=torch.float16))
    a = watch.found
    assert a.kind == "beyond_range" and a.finite_abs_max == pytest.approx(40000, rel=1e-2)
    assert a.safe_limit == pytest.approx(65504 / 2)


# --- the probe ------------------------------------------------------------------------------------


def _examine(run_dir, **params):
    from probes.tensor_anomaly import TensorAnomaly

    return TensorAnomaly(TensorAnomaly.Params(**params)).examine(open_run(str(run_dir)))


def test_probe_finds_the_overflowing_module_of_an_fp16_run(tmp_path):
    run_dir = make_tiny_run(tmp_path / "run", massive_channel(tiny_model()), flags="--fp16")
    obs = _examine(run_dir)
    assert obs.outcome == "overflow_module"
    assert obs.evidence["module"] == "model.layers.1.mlp.up_proj"
    assert obs.evidence["phase"] == "forward" and obs.evidence["dtype"] == "float16"
    assert obs.evidence["rollout_id"] == 0 and obs.evidence["step"] == 0
    # every micro-batch overflows: the module, not the data
    assert obs.evidence["micro_batches_nonfinite"] == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_probe_finds_the_one_empty_sample(tmp_path):
    run_dir = make_tiny_run(tmp_path / "run", samples=rollout_samples(empty=5))
    obs = _examine(run_dir)
    assert obs.outcome == "bad_sample"
    assert obs.evidence["sample_index"] == 5 and obs.evidence["sample_id"] == 105
    assert obs.evidence["bad_samples"] == [5]
    assert obs.evidence["response_length"] == 0
    assert any("empty response" in why for why in obs.evidence["why"])


def test_probe_is_clean_on_a_healthy_run(tmp_path):
    obs = _examine(make_tiny_run(tmp_path / "run"))
    assert obs.outcome == "clean"
    assert obs.evidence["rollouts_replayed"] == [0]


def test_out_of_vocabulary_tokens_are_a_bad_sample_without_a_forward_pass(tmp_path):
    samples = rollout_samples()
    samples[2]["tokens"][1] = 999
    obs = _examine(make_tiny_run(tmp_path / "run", samples=samples))
    assert obs.outcome == "bad_sample" and obs.evidence["sample_index"] == 2
    assert "token id 999 outside the vocabulary [0, 64)" in obs.evidence["why"]


# --- the testbed's planted faults ------------------------------------------------------------------


def _scenario(name, tmp_path):
    scenarios = pytest.importorskip("triage.testbed.scenarios")
    if name not in scenarios.SCENARIOS:
        pytest.skip(f"the testbed has no scenario {name!r}")
    return scenarios.generate(name, tmp_path)


@pytest.mark.slow
def test_overflow_scenario_names_the_massive_activation_module(tmp_path):
    run_dir = _scenario("numerics.overflow", tmp_path)
    obs = _examine(run_dir)
    assert obs.outcome == "overflow_module", obs.summary
    ev = obs.evidence
    assert ev["module"].endswith("mlp.up_proj") and ev["megatron_module"].endswith("mlp.linear_fc1")
    assert ev["dtype"] == "float16" and ev["phase"] == "forward"
    assert ev["weight_abs_max"] > 1e4


@pytest.mark.slow
def test_bad_sample_scenario_names_the_empty_overlong_sample(tmp_path):
    from triage.formats.dumps import load_rollout_dump

    run_dir = _scenario("data.bad_sample", tmp_path)
    obs = _examine(run_dir)
    assert obs.outcome == "bad_sample", obs.summary
    dump = load_rollout_dump(run_dir / "dump" / "rollout_data" / f"{obs.evidence['rollout_id']}.pt")
    empty = [i for i, n in enumerate(dump.response_lengths()) if n == 0]
    assert empty and obs.evidence["sample_index"] == empty[0]
    assert obs.evidence["bad_samples"] == empty
    assert any("--rollout-max-context-len" in w or "longer than the context window" in w for w in obs.evidence["why"])
