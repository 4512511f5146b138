"""The replayed train step: in-process on tiny HF models, and launched through the testbed."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
import torch

from triage.errors import Unavailable
from triage.run.source import open_run

VOCAB = 64


# --- a tiny run, built in tmp_path --------------------------------------------------------------


def tiny_model(arch: str = "qwen2", seed: int = 0):
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    cls_cfg, cls = (Qwen2Config, Qwen2ForCausalLM) if arch == "qwen2" else (LlamaConfig, LlamaForCausalLM)
    cfg = cls_cfg(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=64, tie_word_embeddings=False)
    torch.manual_seed(seed)
    return cls(cfg).eval()


def rollout_samples(n_prompts: int = 2, n: int = 4, seed: int = 0, empty: int | None = None) -> list[dict]:
    g = torch.Generator().manual_seed(seed)
    out = []
    for k in range(n_prompts * n):
        prompt = torch.randint(3, VOCAB, (6,), generator=g).tolist()
        r = 0 if k == empty else 3 + int(torch.randint(0, 4, (1,), generator=g))
        response = torch.randint(3, VOCAB, (r,), generator=g).tolist()
        out.append({"index": 100 + k, "group_index": k // n, "tokens": prompt + response, "response_length": r,
                    "loss_mask": [1] * r, "rollout_log_probs": [-1.0] * r, "reward": float(k % 2),
                    "status": "completed" if r else "aborted", "response": "x" * r})
    return out


def make_tiny_run(root: Path, model=None, *, flags: str = "", log: str = "", samples: list[dict] | None = None,
                  ref_model=None, program: str = "python3 train.py") -> Path:
    """A run directory as slime leaves it: cmdline.txt, hf/, a rollout dump, optionally a log and a ref."""
    root.mkdir(parents=True, exist_ok=True)
    (model or tiny_model()).save_pretrained(root / "hf")
    ref = "hf"
    if ref_model is not None:
        ref_model.save_pretrained(root / "ref_hf")
        ref = "ref_hf"
    (root / "dump" / "rollout_data").mkdir(parents=True)
    torch.save({"rollout_id": 0, "samples": samples if samples is not None else rollout_samples()},
               root / "dump" / "rollout_data" / "0.pt")
    (root / "cmdline.txt").write_text(
        f"{program} --hf-checkpoint hf --ref-load {ref} --rollout-batch-size 2 --n-samples-per-prompt 4 "
        f"--micro-batch-size 4 --num-steps-per-rollout 1 --use-kl-loss --kl-loss-coef 0.01 --kl-loss-type low_var_kl "
        f"--eps-clip 0.2 --eps-clip-high 0.28 --dump-details dump {flags}\n")
    if log:
        (root / "job.log").write_text(log)
    return root


# --- the step's pieces ------------------------------------------------------------------------


def test_in_process_replay_is_bitwise_reproducible_on_cpu():
    from triage.formats.dumps import RolloutDump
    from triage.replay import step as rstep

    model = tiny_model()
    samples = rstep.samples_of(RolloutDump(Path("0.pt"), 0, rollout_samples()))
    cfg = rstep.LossConfig(n_samples_per_prompt=4, micro_batch_size=3, use_kl_loss=True, kl_loss_coef=0.1,
                           kl_loss_type="low_var_kl")
    a, b = rstep.log_probs(model, samples, cfg), rstep.log_probs(model, samples, cfg)
    assert rstep.bitwise_equal(a, b)
    assert [len(x) for x in a] == [s.response_length for s in samples]
    adv = rstep.advantages(samples, cfg)
    s1 = rstep.train_step(model, samples, list(range(len(samples))), a, a, adv, cfg)
    s2 = rstep.train_step(model, samples, list(range(len(samples))), a, a, adv, cfg)
    assert s1.grad_norm == s2.grad_norm and s1.loss == s2.loss
    assert s1.grad_norm > 0
    # at step 1 old == new log-probs: ratio 1, no clipping, no KL, so the loss is -mean(advantage)
    assert s1.ppo_kl == 0.0 and s1.kl_loss == 0.0
    assert s1.pg_loss == pytest.approx(-sum(adv) / len(adv), abs=1e-6)


def test_grpo_advantages_are_normalised_within_each_group():
    from triage.replay.step import LossConfig, ReplaySample, advantages

    samples = [ReplaySample(i, i, (1, 2, 3), 1, (1.0,), r) for i, r in enumerate([1.0, 0.0, 1.0, 1.0, 5.0, 5.0])]
    adv = advantages(samples, LossConfig(n_samples_per_prompt=3))
    assert sum(adv[:3]) == pytest.approx(0, abs=1e-6)
    assert adv[0] > 0 > adv[1]
    assert adv[3] < 0 and adv[4] == pytest.approx(adv[5])


def test_empty_response_makes_its_per_sample_mean_nan():
    from triage.replay.step import sample_mean

    assert math.isnan(float(sample_mean(torch.zeros(0), torch.zeros(0))))
    assert float(sample_mean(torch.tensor([1.0, 3.0]), torch.tensor([1.0, 1.0]))) == 2.0


def test_megatron_checkpoint_loads_into_the_hf_model(tmp_path):
    """The testbed's release checkpoint (Megatron names, fused QKV / gate-up) rebuilds the HF model exactly."""
    from triage.replay.model import WeightSource, load_model

    pytest.importorskip("triage.testbed.prepare")
    from triage.testbed.prepare import convert_hf_to_torch_dist

    model = tiny_model()
    model.save_pretrained(tmp_path / "hf")
    convert_hf_to_torch_dist(tmp_path / "hf", tmp_path / "ref")
    loaded = load_model(tmp_path / "hf", WeightSource(tmp_path / "ref", None, "ref"))
    assert loaded.converted_from_megatron
    assert "decoder.layers.1.mlp.linear_fc1.weight" in loaded.hf_to_megatron["model.layers.1.mlp.up_proj.weight"]
    for name, p in model.state_dict().items():
        assert torch.equal(p, loaded.model.state_dict()[name]), name


# --- the probe on tiny runs ---------------------------------------------------------------------


def _examine(run_dir: Path, scenario: str | None = None, **params):
    """The probe on the run; for a testbed `scenario`, with consent to relaunch its job in its environment."""
    from probes.replay_step import ReplayStep
    from triage.replay.consent import relaunch_permission

    run = open_run(str(run_dir))
    if scenario is not None:
        from triage.testbed.scenarios import job_environment

        run.relaunch_allowed, run.relaunch_env = True, job_environment(scenario)
    with relaunch_permission(run.relaunch_allowed):
        return ReplayStep(ReplayStep.Params(**params)).examine(run)


def test_in_process_replay_without_the_framework_is_deterministic(tmp_path):
    obs = _examine(make_tiny_run(tmp_path / "run"))
    assert obs.outcome == "deterministic_match"
    assert obs.evidence["replay"] == "in_process"
    assert "slime is not installed" in obs.evidence["not_launched_because"]
    assert "Qwen2ForCausalLM" in obs.evidence["how"]


def test_policy_and_reference_weights_that_differ_are_kl_nonzero(tmp_path):
    ref = tiny_model()
    with torch.no_grad():
        ref.model.layers[0].mlp.down_proj.weight.mul_(1.5)
    log = ("[2026-01-01 00:00:00] checkpoint.py:10 - Load checkpoint from HuggingFace model into Megatron (path=hf)\n")
    obs = _examine(make_tiny_run(tmp_path / "run", ref_model=ref, log=log))
    assert obs.outcome == "kl_nonzero"
    assert obs.evidence["log_probs_vs_ref_max_abs_diff"] > 1e-4
    assert obs.evidence["weights_differ"][0]["name"] == "model.layers.0.mlp.down_proj.weight"
    assert "model.layers.0.mlp.down_proj.weight" in obs.summary


def test_a_replay_that_does_not_reproduce_the_log_differs_from_log(tmp_path):
    log = ("[2026-01-01 00:00:00] train_metric_utils.py:135 - rollout 0: "
           "{'rollout/log_probs': -9.5, 'rollout/ref_log_probs': -9.5}\n")
    obs = _examine(make_tiny_run(tmp_path / "run", log=log))
    assert obs.outcome == "differs_from_log"
    bad = {m["what"]: m for m in obs.evidence["mismatches"]}
    assert bad["rollout/log_probs"]["logged"] == -9.5
    assert -6 < bad["rollout/log_probs"]["replay"] < -1  # what a random 64-token model gives: about -ln 64


def test_two_replays_that_differ_are_nondeterministic():
    from probes.replay_step import Replay, ReplayStep

    a = [torch.tensor([-0.5, -1.25]), torch.tensor([-2.0])]
    b = [torch.tensor([-0.5, -1.2578125]), torch.tensor([-2.0])]
    replay = Replay("launched", "python3 -m x", "ref")
    replay.log_probs, replay.step = [a, b], [{"train/grad_norm": 1.0}, {"train/grad_norm": 1.0}]
    replay.rollout = [{}, {}]
    replay.ref_log_probs = a
    probe = ReplayStep()
    obs = probe._judge(None, replay, 0, 0, probe.params, {})  # type: ignore[arg-type]
    assert obs.outcome == "nondeterministic"
    assert obs.evidence["replay_log_prob_max_abs_diff"] == pytest.approx(0.0078125)


def test_no_rollout_dump_is_unavailable_with_the_command(tmp_path):
    run_dir = make_tiny_run(tmp_path / "run")
    shutil.rmtree(run_dir / "dump")
    with pytest.raises(Unavailable) as exc:
        _examine(run_dir)
    assert exc.value.artifact == "rollout_dump"
    assert "--dump-details" in exc.value.command


def test_launch_mode_for_a_slime_run_says_what_is_missing(tmp_path):
    with pytest.raises(Unavailable) as exc:
        _examine(make_tiny_run(tmp_path / "run"), mode="launch")
    assert "slime is not installed here" in exc.value.reason
    assert "--load-debug-rollout-data" in exc.value.command and "--start-rollout-id 0" in exc.value.command


def test_replay_flags_never_write_into_the_run():
    from triage.replay.launch import LaunchWeights, flag_value, replay_flags

    argv = ["--load", "ckpt", "--save", "ckpt", "--save-interval", "2", "--dump-details", "dump", "--num-rollout", "3",
            "--rollout-top-k", "-1", "--tensor-model-parallel-size", "2", "--colocate"]
    out = replay_flags(argv, "/r/dump/rollout_data/{rollout_id}.pt", 1, "/tmp/x",
                       LaunchWeights("/r/ckpt", 0, "save"), parallel={"tp": 1, "pp": 1})
    assert flag_value(out, "--save") is None and flag_value(out, "--save-interval") is None
    assert flag_value(out, "--dump-details") == ["/tmp/x/dump"]
    assert flag_value(out, "--load") == ["/r/ckpt"] and flag_value(out, "--ckpt-step") == ["0"]
    assert flag_value(out, "--start-rollout-id") == ["1"] and flag_value(out, "--num-rollout") == ["2"]
    assert flag_value(out, "--rollout-top-k") == ["-1"]
    assert flag_value(out, "--tensor-model-parallel-size") == ["1"]
    assert flag_value(out, "--actor-num-gpus-per-node") == ["1"]
    assert "--colocate" in out


# --- through the testbed (the framework's own code) ---------------------------------------------


def _scenario(name: str, tmp_path: Path) -> Path:
    scenarios = pytest.importorskip("triage.testbed.scenarios")
    if name not in scenarios.SCENARIOS:
        pytest.skip(f"the testbed has no scenario {name!r}")
    run_dir = scenarios.generate(name, tmp_path)
    if scenarios.scenario_meta(run_dir).get("exit_code") not in (0, None) and name.startswith("healthy"):
        pytest.fail(f"the healthy scenario {name} failed: see {run_dir / 'job.log'}")
    return run_dir


@pytest.mark.slow
def test_healthy_scenario_replays_deterministically_and_matches_its_log(tmp_path):
    run_dir = _scenario("healthy.qwen2", tmp_path)
    before = sorted(p.relative_to(run_dir) for p in run_dir.rglob("*"))
    obs = _examine(run_dir, "healthy.qwen2")
    assert obs.outcome == "deterministic_match", obs.summary
    assert obs.evidence["replay"] == "launched"
    assert "--load-debug-rollout-data" in obs.evidence["how"]
    assert {"per-token log_probs", "train/grad_norm"} <= set(obs.evidence["compared_with_log"])
    assert sorted(p.relative_to(run_dir) for p in run_dir.rglob("*")) == before  # the replay wrote nothing there


@pytest.mark.slow
def test_nondeterministic_kernel_scenario_is_nondeterministic(tmp_path):
    from triage.formats.dumps import load_train_dump

    run_dir = _scenario("kernel.nondeterministic", tmp_path)
    dump = load_train_dump(run_dir / "dump" / "train_data" / "0.pt")
    if all(a == b for a, b in zip(dump.log_probs, dump.ref_log_probs)):
        pytest.skip("the scenario's own train dump shows log_probs == ref_log_probs bitwise: no symptom to find")
    obs = _examine(run_dir, "kernel.nondeterministic")
    assert obs.outcome == "nondeterministic", obs.summary
    assert obs.evidence["replay"] == "launched"
    assert obs.evidence["replay_log_prob_max_abs_diff"] > 0
    print(json.dumps(obs.evidence, default=str)[:500])
