"""Metric probes on small real runs: a slime job log and a TRL trainer_state.json per scenario."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
import torch

from metric_runs import SLIME_ARGS, healthy_hf_series, healthy_series, hf_run, noisy_extra, noisy_series, slime_run
from probes.base_model import BaseModelProbe
from probes.dump_samples import DumpSamples
from probes.grad_norm_health import GradNormHealth
from probes.lr_schedule import LrSchedule
from probes.nonfinite_onset import NonfiniteOnset
from probes.policy_drift import PolicyDrift
from probes.reward_signal import RewardSignal
from probes.step1_invariants import Step1Invariants
from probes.symptom import Symptom
from probes.truncation import Truncation
from triage.api import triage_run
from triage.errors import Unavailable
from triage.run import open_run


def examine(probe, run, **params):
    p = type(probe)(type(probe).Params(**params)) if params else probe
    obs = p.examine(run)
    json.dumps(obs.evidence)  # evidence must be JSON as the report writes it
    return obs


# --- step1_invariants ------------------------------------------------------------------


def test_step1_hold_on_a_healthy_slime_run(tmp_path):
    obs = examine(Step1Invariants(), slime_run(tmp_path, healthy_series()))
    assert obs.outcome == "hold"
    assert obs.evidence["log_probs"] == {"metric": "rollout:rollout/log_probs", "rollout": 0, "value": -0.35}
    assert obs.evidence["log_prob_difference"] == 0.0
    kls = {k["metric"]: k["value"] for k in obs.evidence["kl"]}
    assert kls == {"step:train/ppo_kl": 0.0, "step:train/kl_loss": 0.0}


def test_step1_kl_nonzero_when_log_probs_differ_from_ref(tmp_path):
    s = healthy_series()
    s["ref_log_probs"][0] = -0.35 + 3e-3
    obs = examine(Step1Invariants(), slime_run(tmp_path, s))
    assert obs.outcome == "kl_nonzero"
    assert obs.evidence["log_prob_difference"] == pytest.approx(3e-3)
    assert "rollout 0" in obs.summary


def test_step1_never_takes_the_engines_log_probs_for_the_trainers(tmp_path):
    # a slime rollout 0 logging only the engine's mean log-prob (a custom rollout's placeholder 0.0) beside the
    # reference's: their gap is the train-inference mismatch, not the invariant; the KL at 0 decides it holds
    (tmp_path / "job.log").write_text(
        "(MegatronTrainRayActor pid=10122) [2026-07-20 17:53:24] data.py:193 - rollout 0: {'rollout/rollout_log_probs': "
        "0.0, 'rollout/raw_reward': 0.2083, 'rollout/ref_log_probs': -0.09212045123179753, 'rollout/kl': 0.0}\n",
        encoding="utf-8")
    obs = examine(Step1Invariants(), open_run(str(tmp_path)))
    assert obs.outcome == "hold", obs.summary
    assert "log_probs" not in obs.evidence and "log_prob_difference" not in obs.evidence


def test_step1_kl_nonzero_from_ppo_kl_at_step_0(tmp_path):
    s = healthy_series()
    s["ppo_kl"][0] = 2e-5
    obs = examine(Step1Invariants(), slime_run(tmp_path, s))
    assert obs.outcome == "kl_nonzero"
    assert {"metric": "step:train/ppo_kl", "step": 0, "value": 2e-5} in obs.evidence["kl"]


def test_step1_logprob_extreme_and_elevated(tmp_path):
    s = healthy_series()
    s["log_probs"][0] = s["ref_log_probs"][0] = -7.9
    obs = examine(Step1Invariants(), slime_run(tmp_path / "extreme", s))
    assert obs.outcome == "logprob_extreme"
    assert obs.evidence["log_probs"]["value"] == -7.9
    assert "configuration error" in obs.summary

    s = healthy_series()
    s["log_probs"][0] = s["ref_log_probs"][0] = -0.8
    obs = examine(Step1Invariants(), slime_run(tmp_path / "elevated", s))
    assert obs.outcome == "logprob_elevated"
    assert obs.evidence["log_probs"]["value"] == -0.8
    assert "chat template" in obs.summary

    # the pair's edges: below the guides' 0.8 holds; 2.0 and above is extreme
    s["log_probs"][0] = s["ref_log_probs"][0] = -0.79
    assert examine(Step1Invariants(), slime_run(tmp_path / "below", s)).outcome == "hold"
    s["log_probs"][0] = s["ref_log_probs"][0] = -2.0
    assert examine(Step1Invariants(), slime_run(tmp_path / "edge", s)).outcome == "logprob_extreme"


def test_step1_extreme_log_probs_win_over_a_kl_difference(tmp_path):
    s = healthy_series()
    s["log_probs"][0], s["ref_log_probs"][0] = -9.0, -8.5
    assert examine(Step1Invariants(), slime_run(tmp_path, s)).outcome == "logprob_extreme"


def test_step1_thresholds_are_params(tmp_path):
    run = slime_run(tmp_path, healthy_series())
    assert examine(Step1Invariants(), run, logprob_elevated=0.3).outcome == "logprob_elevated"


def test_step1_resumed_run_is_unavailable(tmp_path):
    with pytest.raises(Unavailable) as exc:
        Step1Invariants().examine(slime_run(tmp_path, healthy_series(), first=37))
    assert "rollout 37" in exc.value.reason and exc.value.artifact == "metrics"


def test_step1_on_hf_kl_at_step_1(tmp_path):
    s = healthy_hf_series()
    obs = examine(Step1Invariants(), hf_run(tmp_path / "ok", s))
    assert obs.outcome == "hold"
    assert obs.evidence["kl"] == [{"metric": "hf:kl", "step": 1, "value": 0.0}]
    s["kl"][0] = 0.02
    obs = examine(Step1Invariants(), hf_run(tmp_path / "bad", s))
    assert obs.outcome == "kl_nonzero"
    assert obs.evidence["kl"][0]["value"] == 0.02


# --- nonfinite_onset -------------------------------------------------------------------


def test_nonfinite_none_on_healthy_runs(tmp_path):
    assert examine(NonfiniteOnset(), slime_run(tmp_path / "s", healthy_series())).outcome == "none"
    assert examine(NonfiniteOnset(), hf_run(tmp_path / "h", healthy_hf_series())).outcome == "none"


def test_nonfinite_isolated_bad_batch_in_slime_log(tmp_path):
    s = healthy_series()
    s["grad_norm"][12] = math.nan
    s["loss"][12] = math.nan
    obs = examine(NonfiniteOnset(), slime_run(tmp_path, s))
    assert obs.outcome == "isolated"
    assert obs.evidence["onset_step"] == 12
    assert obs.evidence["isolated_steps"] == [12]
    assert obs.evidence["onset_metric"] == "step:train/grad_norm"
    assert obs.evidence["first_pass"] == "backward"
    assert obs.evidence["finite_before"] == [pytest.approx(v, rel=1e-5) for v in s["grad_norm"][7:12]]
    assert {m["metric"] for m in obs.evidence["metrics"]} == {"step:train/grad_norm", "step:train/loss"}


def test_the_fp16_loss_scalers_skipped_updates_are_no_nan_in_training(tmp_path):
    # MemaSp/FT-Llama2-HRChatbot:outputs/trainer_state.json (fp16 LoRA): `'grad_norm': inf` at step 33 with a loss of
    # 0.3391 and step 32's LR, finite again at step 34; ChenguangYang96UCR/KG-LLM: nan at steps 1, 2 and 6
    s = {k: v for k, v in healthy_hf_series(40).items() if k in ("loss", "grad_norm", "lr")}
    s["grad_norm"][[0, 1, 5, 32]] = [math.nan, math.nan, math.nan, math.inf]
    obs = examine(NonfiniteOnset(), hf_run(tmp_path / "skips", s))
    assert obs.outcome == "none", obs.summary
    assert obs.evidence["scaler_skips"] == [1, 2, 6, 33]
    assert "loss scaler" in obs.summary
    # the loss NaN on the same record is a NaN in training
    s["loss"][32] = math.nan
    assert examine(NonfiniteOnset(), hf_run(tmp_path / "nan", s)).outcome != "none"


def test_a_nan_after_which_nothing_is_updated_is_no_bad_batch(tmp_path):
    # elena-lyulina/Megatron-LM-Attention-Benchmark:attn_bench/logs/1737333.out: `grad norm: nan` at iteration 1, then
    # `grad norm: 0.000` with the lm loss frozen at 1.040111E+01 to the end
    s = healthy_series(15)
    s["grad_norm"] = np.concatenate([[math.nan], np.zeros(14)])
    s["loss"] = np.full(15, 10.40111)
    obs = examine(NonfiniteOnset(), slime_run(tmp_path, s))
    assert obs.outcome == "persistent", obs.summary
    assert obs.evidence["no_update_after"] == 14
    assert "exactly 0 on all 14 records after it" in obs.summary


def test_nonfinite_persistent_after_grad_norm_climb(tmp_path):
    s = healthy_series()
    s["grad_norm"][14:20] = [1.0, 3.0, 9.0, 30.0, 120.0, 900.0]
    s["grad_norm"][20] = math.inf
    s["grad_norm"][21:] = math.nan
    s["loss"][21:] = math.nan
    obs = examine(NonfiniteOnset(), slime_run(tmp_path, s))
    assert obs.outcome == "persistent"
    assert obs.evidence["onset_step"] == 20
    assert obs.evidence["persistent_from_step"] == 20
    before = obs.evidence["grad_norm_before"]
    assert before["values"][-1] == 900.0 and before["rising"] is True
    grad = next(m for m in obs.evidence["metrics"] if m["metric"] == "step:train/grad_norm")
    assert grad["values"] == ["inf", "nan"] and grad["recovered"] is False


def test_nonfinite_persistent_in_trainer_state(tmp_path):
    s = healthy_hf_series()
    s["loss"][15:] = math.nan
    s["grad_norm"][15:] = math.nan
    obs = examine(NonfiniteOnset(), hf_run(tmp_path, s))
    assert obs.outcome == "persistent"
    assert obs.evidence["onset_step"] == 16  # HF steps are 1-based
    assert obs.evidence["onset_metric"] == "hf:grad_norm"


def test_nonfinite_isolated_in_trainer_state(tmp_path):
    s = healthy_hf_series()
    s["loss"][6] = math.inf
    obs = examine(NonfiniteOnset(), hf_run(tmp_path, s))
    assert obs.outcome == "isolated"
    assert obs.evidence["isolated_steps"] == [7] and obs.evidence["first_pass"] == "forward"
    assert obs.evidence["metrics"][0]["values"] == ["inf"]


def test_nonfinite_recurring_is_not_a_single_bad_batch(tmp_path):
    s = healthy_series()
    for i in (3, 8, 13, 18, 23):
        s["grad_norm"][i] = math.nan
    obs = examine(NonfiniteOnset(), slime_run(tmp_path, s))
    assert obs.outcome == "persistent" and obs.evidence["recurring"] is True
    assert examine(NonfiniteOnset(), open_run(str(tmp_path)), max_isolated=5).outcome == "isolated"


# --- grad_norm_health ------------------------------------------------------------------


def test_grad_norm_healthy(tmp_path):
    obs = examine(GradNormHealth(), slime_run(tmp_path, healthy_series()))
    assert obs.outcome == "healthy"
    assert obs.evidence["metric"] == "step:train/grad_norm"
    assert obs.evidence["median"] == pytest.approx(0.3, rel=0.1)


def test_grad_norm_spike_above_100(tmp_path):
    s = healthy_series()
    s["grad_norm"][17] = 250.0
    obs = examine(GradNormHealth(), slime_run(tmp_path, s))
    assert obs.outcome == "spikes"
    assert obs.evidence["spikes"][0]["step"] == 17
    assert obs.evidence["spikes"][0]["value"] == 250.0
    assert obs.evidence["onset_step"] == 17


def test_a_peak_past_the_largest_spike_is_named_beside_it(tmp_path):
    # jianghoucheng/Agent_On_Policy_Distillation (verl): spikes to 13.6 at step 39, then 15.3 at step 43 once the level
    # had risen; "the largest" spike is not the series' maximum, and the report says where that is
    s = healthy_series(40)
    s["grad_norm"][20] = 12.0
    s["grad_norm"][28:] = 10.0
    s["grad_norm"][37] = 15.0
    obs = examine(GradNormHealth(), slime_run(tmp_path, s))
    assert obs.outcome == "spikes", obs.summary
    assert "the largest 12 at step 20" in obs.summary
    assert "the series peaks at 15 at step 37, by then no spike over its running level" in obs.summary
    # where the largest spike is the maximum, nothing is added
    s["grad_norm"][37] = 10.0
    obs = examine(GradNormHealth(), slime_run(tmp_path, s))
    assert "the largest 12 at step 20" in obs.summary and "peaks" not in obs.summary


def test_grad_norm_robust_spike_below_the_ceiling(tmp_path):
    s = healthy_hf_series()
    s["grad_norm"][10] = 3.0  # 10x the running level, far below 100
    obs = examine(GradNormHealth(), hf_run(tmp_path, s))
    assert obs.outcome == "spikes"
    spike = obs.evidence["spikes"][0]
    assert spike["step"] == 11 and spike["ratio"] > 5 and spike["z"] > 6


def test_grad_norm_sustained_growth_change_point(tmp_path):
    s = healthy_hf_series(40)
    s["grad_norm"][20:] = 25.0 * np.exp(0.1 * np.random.default_rng(5).standard_normal(20))
    obs = examine(GradNormHealth(), hf_run(tmp_path, s))
    assert obs.outcome == "sustained_growth"
    assert obs.evidence["change_point"]["step"] == 21
    assert obs.evidence["change_point"]["median_after"] == pytest.approx(25, rel=0.15)
    assert obs.evidence["onset_step"] == 21


def test_grad_norm_regularly_above_10_in_slime_log(tmp_path):
    s = healthy_series()
    s["grad_norm"][::2] = 14.0  # oscillating: every other step above the guide's 10
    obs = examine(GradNormHealth(), slime_run(tmp_path, s))
    assert obs.outcome == "sustained_growth"
    assert obs.evidence["unstable_fraction"] == 0.5
    assert obs.evidence["onset_step"] == 0


def test_grad_norm_zero_skips_are_fine(tmp_path):
    s = healthy_series()
    s["grad_norm"][[4, 9, 15]] = 0.0
    assert examine(GradNormHealth(), slime_run(tmp_path, s)).outcome == "healthy"


def test_a_supervised_runs_grad_norm_is_judged_on_its_own_level(tmp_path):
    # fyh2001/megatron-sft-recipes (ms-swift full SFT, max_grad_norm 1.0): pre-clip norms of 50 in warm-up falling
    # to 7, above 10 on 45% of the records; the guide's "> 10 is unstable" is a GRPO bar
    s = {k: v for k, v in healthy_hf_series(60).items() if k in ("loss", "lr")}
    s["grad_norm"] = np.concatenate([np.geomspace(50.0, 12.0, 27), np.geomspace(9.0, 7.0, 33)])
    run = hf_run(tmp_path / "sft", s)
    obs = examine(GradNormHealth(), run)
    assert obs.outcome == "healthy", obs.summary
    # the same numbers beside a reward are an RL run's, and the guide's bar applies
    r = healthy_hf_series(60)
    r["grad_norm"] = s["grad_norm"]
    assert examine(GradNormHealth(), hf_run(tmp_path / "rl", r)).outcome == "sustained_growth"


def test_the_share_above_the_bar_says_how_many_records_had_no_update(tmp_path):
    # JuncyLu/trl_DAPO:training_logs/20251022_120531/run_terminal.md: 7 records with a gradient, all above 10, and 42
    # at exactly 0 (the zero-advantage skip)
    s = healthy_hf_series(49)
    s["grad_norm"] = np.zeros(49)
    s["grad_norm"][[0, 5, 11, 19, 26, 33, 40]] = [47.75, 404.0, 122.5, 218.0, 77.0, 63.0, 112.0]
    obs = examine(GradNormHealth(), hf_run(tmp_path, s), min_records=5)
    assert obs.outcome == "sustained_growth", obs.summary
    assert "on 100% of 7 records" in obs.summary and "42 more records are exactly 0" in obs.summary


def test_grad_norm_unavailable_without_series(tmp_path):
    s = healthy_hf_series()
    s["grad_norm"] = None
    with pytest.raises(Unavailable):
        GradNormHealth().examine(hf_run(tmp_path, s))


# --- lr_schedule -----------------------------------------------------------------------


def test_lr_too_high_instability_starts_at_the_warmup_peak(tmp_path):
    s = healthy_hf_series(40)
    s["lr"] = np.concatenate([np.linspace(5e-7, 5e-6, 10), np.full(30, 5e-6)])
    s["grad_norm"][12:] = np.geomspace(2.0, 80.0, 28)
    obs = examine(LrSchedule(), hf_run(tmp_path, s))
    assert obs.outcome == "too_high"
    assert obs.evidence["lr"]["peak_step"] == 10
    assert obs.evidence["lr"]["warmup"] is True
    assert 9 <= obs.evidence["instability"]["onset_step"] <= 14
    assert "peak" in obs.summary


def test_lr_too_high_far_above_typical(tmp_path):
    s = healthy_series(40)
    s["lr"] = np.full(40, 5e-5)
    s["grad_norm"][25] = 400.0
    s["raw_reward"][26:] = 0.05  # the later steps degrade: the reward falls after the spike and stays down
    obs = examine(LrSchedule(), slime_run(tmp_path, s))
    assert obs.outcome == "too_high"
    assert obs.evidence["lr"]["metric"] == "step:train/lr-pg_0"
    assert obs.evidence["instability"]["onset_step"] == 25
    assert "above the 1e-05" in obs.summary


def test_a_spike_the_run_recovers_from_is_not_the_lr(tmp_path):
    # the axolotl guide's loss spike "then (possibly) recovers": one grad-norm spike, the run's own level after
    # it and a reward still rising is an episode, not a divergence (a healthy GRPO LoRA run's step-50 spike)
    s = healthy_series(40)
    s["lr"] = np.full(40, 5e-5)
    s["grad_norm"][25] = 400.0
    obs = examine(LrSchedule(), slime_run(tmp_path, s))
    assert obs.outcome == "plausible", obs.summary
    assert "did not last" in obs.summary and "step 25" in obs.summary
    assert obs.evidence["instability"]["recovered"].startswith("grad_norm ends at a median of")


def test_a_recovery_above_the_level_before_says_how_far_above(tmp_path):
    # raja17021998/LLM-AIL-821-Project's W&B runs: "did not last: grad_norm ends at a median of 1.34e+06, against
    # 5.44e+05 before step 169" read as a contradiction; the ratio and the bar it stays within are said
    s = healthy_series(40)
    s["lr"] = np.full(40, 5e-5)
    s["grad_norm"][25] = 400.0
    s["grad_norm"][26:] *= 2.0
    obs = examine(LrSchedule(), slime_run(tmp_path, s))
    assert obs.outcome == "plausible", obs.summary
    recovered = obs.evidence["instability"]["recovered"]
    assert re.search(r"ends at a median of [\d.]+, 2\.\dx its [\d.]+ before step 25, within the 3x a lasting rise "
                     r"needs \(lr\.growth_ratio\)", recovered), recovered


def test_the_rl_guides_typical_lr_is_not_applied_to_a_supervised_run(tmp_path):
    # hsc748NLP/NSLLM:trainer_state.json: an SFT run (no reward, no KL) at 5e-5 whose grad norm keeps rising
    # would have been blamed on "the 1e-05 typical for full-parameter RL fine-tuning"
    s = healthy_hf_series(40)
    for key in ("raw_reward", "reward_std", "frac_zero_std", "kl", "entropy", "resp_mean", "resp_max",
                "truncated_ratio", "clip_ratio", "logp_diff", "is_ratio_min"):
        s.pop(key, None)
    s["lr"] = np.full(40, 5e-5)
    s["grad_norm"][20:] = np.geomspace(2.0, 80.0, 20)
    obs = examine(LrSchedule(), hf_run(tmp_path, s))
    assert obs.evidence["typical"]["rl_run"] is False
    assert "typical" not in obs.summary, obs.summary


def test_a_converged_loss_bumping_near_zero_is_not_the_lr(tmp_path):
    # AriesChen-UPC/GeoLLM:trainer_state.json: a loss down from 4.26 to ~0.008 bumps to 0.022 and falls on
    s = healthy_hf_series(60)
    for key in ("grad_norm", "raw_reward", "reward_std", "frac_zero_std", "kl", "entropy", "resp_mean",
                "resp_max", "truncated_ratio", "clip_ratio", "logp_diff", "is_ratio_min"):
        s.pop(key, None)
    s["loss"] = np.concatenate([np.geomspace(4.26, 0.0084, 40), np.full(20, 0.0084)])
    s["loss"][45] = 0.0221
    s["loss"][50:] = np.geomspace(0.006, 0.0028, 10)
    s["lr"] = np.linspace(0.02, 0.001, 60)
    obs = examine(LrSchedule(), hf_run(tmp_path, s))
    assert obs.outcome == "plausible", obs.summary
    assert "the loss ends at a median of" in obs.evidence["instability"]["recovered"]


def test_an_lr_logged_as_zero_on_every_record_is_a_rounded_print(tmp_path):
    # Bihan/dstack-configs:verl_demo.log: verl's console prints every value to three decimals, `actor/lr:0.000` for 1e-06
    s = healthy_hf_series(30)
    s["lr"] = np.zeros(30)
    s["raw_reward"] = np.full(30, 0.945) + 0.01 * np.random.default_rng(3).standard_normal(30)
    with pytest.raises(Unavailable, match="rounded print"):
        LrSchedule().examine(hf_run(tmp_path, s))


def test_an_rl_loss_rising_from_zero_with_the_kl_is_no_instability(tmp_path):
    # Sunshine535/nips-grpo-dynamics:results/wave8_exact_rho/logs/exact_seed46.log: TRL's GRPO loss is beta x KL,
    # 0.04 x 0.1636 = 0.006544 at step 10, read as a 102x jump over the near-zero KL of the first steps
    s = healthy_hf_series(60)
    s["kl"] = np.concatenate([np.geomspace(1e-4, 0.16, 10), np.full(50, 0.04)])
    s["loss"] = 0.04 * s["kl"]
    s["lr"] = np.full(60, 1e-4)
    run = hf_run(tmp_path, s)
    obs = examine(LrSchedule(), run)
    assert "loss_spikes" not in obs.evidence, obs.summary
    assert examine(Symptom(), run).outcome != "grad_explosion"


def test_a_noisy_reward_that_ends_a_little_lower_has_not_degraded(tmp_path):
    # the same run: 4 completions a step, a reward median of 0.5 over the first fifth and 0.375 over the last, the
    # means 0.46 and 0.44; a grad-norm spike at step 25 that the run came back from
    rng = np.random.default_rng(5)
    s = healthy_series(60)
    s["raw_reward"] = rng.choice([0.0, 0.25, 0.5, 0.75, 1.0], size=60)
    s["lr"] = np.full(60, 5e-5)
    s["grad_norm"][25] = 400.0
    obs = examine(LrSchedule(), slime_run(tmp_path, s))
    assert obs.outcome == "plausible", obs.summary


def test_lr_too_low_plateau(tmp_path):
    s = healthy_hf_series(30)
    s["lr"] = np.full(30, 1e-8)
    s["raw_reward"] = 0.3 + 0.03 * np.random.default_rng(8).standard_normal(30)
    s["kl"] = np.full(30, 1e-6)
    obs = examine(LrSchedule(), hf_run(tmp_path, s))
    assert obs.outcome == "too_low"
    assert obs.evidence["kl_max"]["value"] == 1e-6
    assert "reward never improves" in obs.summary


def test_lr_plausible_on_a_healthy_run(tmp_path):
    obs = examine(LrSchedule(), slime_run(tmp_path, healthy_series()))
    assert obs.outcome == "plausible"
    assert obs.evidence["lr"]["peak"] == 1e-6


def test_lr_unavailable_without_series_or_arg(tmp_path):
    s = healthy_hf_series()
    s["lr"] = None
    with pytest.raises(Unavailable):
        LrSchedule().examine(hf_run(tmp_path, s))


# --- reward_signal ---------------------------------------------------------------------


def test_reward_improving_on_healthy_runs(tmp_path):
    obs = examine(RewardSignal(), slime_run(tmp_path / "s", healthy_series()))
    assert obs.outcome == "improving"
    assert obs.evidence["reward"]["metric"] == "rollout:rollout/raw_reward"
    assert examine(RewardSignal(), hf_run(tmp_path / "h", healthy_hf_series())).outcome == "improving"


def test_groups_that_score_alike_once_the_policy_solves_them_are_no_missing_signal(tmp_path):
    # Sunshine535/nips-grpo-dynamics:results/qwen35/sweep_coarse/rho0.70_seed43/step_logs.json: the reward 0.14 to
    # 0.9, frac_reward_zero_std 0.45-0.55 while it climbed and 0.85-1.0 once most prompts were solved
    s = healthy_hf_series(40)
    s["raw_reward"] = np.concatenate([np.linspace(0.14, 0.9, 8), 0.88 + 0.04 * np.sin(np.arange(32))])
    s["frac_zero_std"] = np.concatenate([np.full(8, 0.5), np.full(32, 0.9)])
    obs = examine(RewardSignal(), hf_run(tmp_path / "solved", s))
    assert obs.outcome == "improving", obs.summary
    assert "solves them" in obs.summary
    # the same zero spread from the first record on is a task that gives no signal
    s["frac_zero_std"] = np.full(40, 0.9)
    assert examine(RewardSignal(), hf_run(tmp_path / "flat", s)).outcome == "zero_variance"


def test_reward_constant_zero_slime(tmp_path):
    s = healthy_series(25)
    s["raw_reward"] = np.zeros(25)
    s["zero_std_0"] = np.full(25, 8.0)  # all 8 groups: every sample scored 0
    obs = examine(RewardSignal(), slime_run(tmp_path, s))
    assert obs.outcome == "constant_zero"
    assert obs.evidence["zero_std_fraction"]["median"] == 1.0
    assert obs.evidence["reward"]["records"] == 25


def test_reward_constant_zero_hf(tmp_path):
    s = healthy_hf_series(25)
    s["raw_reward"] = np.zeros(25)
    s["reward_std"] = np.zeros(25)
    s["frac_zero_std"] = np.ones(25)
    obs = examine(RewardSignal(), hf_run(tmp_path, s))
    assert obs.outcome == "constant_zero"
    assert "reward_std is 0" in obs.summary


def test_reward_zero_variance_hf_and_slime(tmp_path):
    s = healthy_hf_series(25)
    s["frac_zero_std"] = np.full(25, 0.95)
    s["raw_reward"] = np.full(25, 0.96)
    obs = examine(RewardSignal(), hf_run(tmp_path / "h", s))
    assert obs.outcome == "zero_variance"
    assert obs.evidence["zero_std_fraction"] == {"metric": "hf:frac_reward_zero_std", "median": 0.95, "min": 0.95,
                                                 "records": 25}

    s = healthy_series(25)
    s["zero_std_0"] = np.zeros(25)
    s["zero_std_1"] = np.full(25, 7.0)  # 7 of 8 groups all correct: too easy
    s["raw_reward"] = np.full(25, 0.97)
    obs = examine(RewardSignal(), slime_run(tmp_path / "s", s))
    assert obs.outcome == "zero_variance"
    assert obs.evidence["zero_std_fraction"]["median"] == 0.875
    assert "rollout_batch_size=8" in obs.evidence["zero_std_fraction"]["metric"]


def test_reward_flat(tmp_path):
    s = healthy_hf_series(30)
    s["raw_reward"] = 0.3 + 0.05 * np.random.default_rng(9).standard_normal(30)
    obs = examine(RewardSignal(), hf_run(tmp_path, s))
    assert obs.outcome == "flat"
    assert obs.evidence["trend"]["p_value"] > 0.05


def test_reward_flat_slime(tmp_path):
    s = healthy_series(30)
    s["raw_reward"] = 0.25 + 0.05 * np.random.default_rng(10).standard_normal(30)
    obs = examine(RewardSignal(), slime_run(tmp_path, s))
    assert obs.outcome == "flat"
    assert obs.evidence["reward"]["metric"] == "rollout:rollout/raw_reward"


def test_reward_too_short_to_call_flat_is_unavailable(tmp_path):
    s = healthy_hf_series(10)
    with pytest.raises(Unavailable) as exc:
        RewardSignal().examine(hf_run(tmp_path, s))
    assert "10 reward records" in exc.value.reason


# --- truncation ------------------------------------------------------------------------


def test_truncation_mostly_truncated_slime(tmp_path):
    s = healthy_series()
    s["truncated_ratio"] = np.full(30, 0.95)
    s["resp_max"] = np.full(30, 1024.0)
    s["rollout_time"] = np.full(30, 900.0)
    obs = examine(Truncation(), slime_run(tmp_path, s))
    assert obs.outcome == "mostly_truncated"
    assert obs.evidence["metric"] == "perf:rollout/truncated_ratio"
    assert obs.evidence["ratio"] == 0.95
    assert obs.evidence["max_response_length"]["max"] == 1024
    assert obs.evidence["rollout_time_s"]["median"] == 900


def test_truncation_mostly_truncated_hf_and_normal(tmp_path):
    s = healthy_hf_series()
    s["truncated_ratio"] = np.full(30, 0.9)
    obs = examine(Truncation(), hf_run(tmp_path / "t", s))
    assert obs.outcome == "mostly_truncated"
    assert obs.evidence["metric"] == "hf:completions/clipped_ratio" and obs.evidence["ratio"] == 0.9
    obs = examine(Truncation(), hf_run(tmp_path / "n", healthy_hf_series()))
    assert obs.outcome == "normal" and obs.evidence["ratio"] < 0.1


def test_a_mean_length_pinned_at_its_highest_whole_number_is_truncation_without_a_known_limit(tmp_path):
    # Sunshine535/nips-grpo-dynamics:results/csd_pilot/pilot2_adq_collapse/log_adq_seed42.txt: TRL's completion_length
    # exactly 256 (its default max_completion_length) on 49 of 50 records, the reward 0 throughout
    s = healthy_hf_series()
    s.pop("truncated_ratio", None)
    s["resp_mean"] = np.full(30, 256.0)
    s["resp_mean"][3] = 251.5
    obs = examine(Truncation(), hf_run(tmp_path / "p", s))
    assert obs.outcome == "mostly_truncated", obs.summary
    assert obs.evidence["pinned_length"] == {"metric": "hf:completions/mean_length", "tokens": 256, "share": 0.966667,
                                             "records": 30}
    assert "exactly 256 tokens, its highest, on 97% of 30 records" in obs.summary
    # lengths that vary, as responses that stop on their own do, say nothing without the limit
    s["resp_mean"] = 200.0 + 10.0 * np.sin(np.arange(30))
    with pytest.raises(Unavailable):
        examine(Truncation(), hf_run(tmp_path / "v", s))


def test_a_reward_of_zero_on_responses_all_cut_at_a_cap_is_not_the_reward_functions(tmp_path):
    # the same run through the walk: not reward.broken_fn, but the length limit's question (huggingface/trl#5697)
    s = healthy_hf_series()
    s.pop("truncated_ratio", None)
    s["raw_reward"] = np.zeros(30)
    s["reward_std"] = np.zeros(30)
    s["grad_norm"] = np.zeros(30)
    s["resp_mean"] = np.full(30, 256.0)
    report = triage_run(hf_run(tmp_path / "cut", s))
    assert report.root_cause.id == "inconclusive"
    assert [c.id for c in report.candidates[:2]] == ["rollout.missing_stop_token", "rollout.max_len_too_small"]
    # with lengths that vary, a reward of 0 everywhere is the reward function's
    s["resp_mean"] = 200.0 + 10.0 * np.sin(np.arange(30))
    assert triage_run(hf_run(tmp_path / "fn", s)).root_cause.id == "reward.broken_fn"


def test_truncation_normal_slime_quotes_the_limit(tmp_path):
    obs = examine(Truncation(), slime_run(tmp_path, healthy_series()))
    assert obs.outcome == "normal"
    assert obs.evidence["limit"] == {"arg": "rollout_max_response_len", "value": 1024}


# --- policy_drift ----------------------------------------------------------------------


def test_drift_none_on_healthy_runs(tmp_path):
    assert examine(PolicyDrift(), hf_run(tmp_path / "h", healthy_hf_series())).outcome == "none"
    assert examine(PolicyDrift(), slime_run(tmp_path / "s", healthy_series())).outcome == "none"


def test_drift_offpolicy_stale(tmp_path):
    s = healthy_hf_series()
    s["is_ratio_min"][20:] = 0.02
    obs = examine(PolicyDrift(), hf_run(tmp_path, s))
    assert obs.outcome == "offpolicy_stale"
    assert obs.evidence["is_ratio_min"]["metric"] == "hf:sampling/importance_sampling_ratio/min"
    assert obs.evidence["is_ratio_min"]["recent_median"] == 0.02


def test_drift_logprob_mismatch_slime(tmp_path):
    s = healthy_series()
    diff = np.full(30, 0.3)
    obs = examine(PolicyDrift(), slime_run(tmp_path, s, extra={"step": {"train/train_rollout_logprob_abs_diff": diff}}))
    assert obs.outcome == "logprob_mismatch"
    assert obs.evidence["logp_diff"]["metric"] == "step:train/train_rollout_logprob_abs_diff"
    assert obs.evidence["logp_diff"]["recent_median"] == 0.3


def test_a_ppo_critic_gone_non_finite_is_training_gone_non_finite(tmp_path):
    # verl-project/verl#498: the critic's grad norm and value loss are NaN while the actor's are finite
    (tmp_path / "job.log").write_text(
        "(main_task pid=2601) step:1 - actor/pg_loss:0.01 - actor/grad_norm:0.4 - critic/vf_loss:nan - "
        "critic/grad_norm:nan - critic/score/mean:0.1\n", encoding="utf-8")
    obs = examine(NonfiniteOnset(), open_run(str(tmp_path)))
    assert obs.outcome == "persistent", obs.summary
    assert obs.evidence["onset_metric"] == "verl:critic/grad_norm"


def test_a_log_prob_gap_at_the_first_update_is_a_mismatch_not_staleness(tmp_path):
    # THUDM/slime#2073: `step 0` with a train-rollout log-prob difference of 9.2 (an incomplete model bridge);
    # no weight update came between the rollout and the step that trained on it
    (tmp_path / "job.log").write_text(
        "[2026-08-01 10:00:00] model.py:918 - step 0: {'train/loss': -1.03e-06, 'train/entropy_loss': 5.39, "
        "'train/ppo_kl': 0.0, 'train/train_rollout_logprob_abs_diff': 9.247343063354492, 'train/grad_norm': 0.5}\n",
        encoding="utf-8")
    obs = examine(PolicyDrift(), open_run(str(tmp_path)))
    assert obs.outcome == "logprob_mismatch", obs.summary
    assert "at the first update" in obs.summary and "first_update" in obs.evidence


def test_drift_entropy_collapse(tmp_path):
    s = healthy_hf_series()
    s["entropy"] = np.geomspace(0.4, 0.002, 30)
    obs = examine(PolicyDrift(), hf_run(tmp_path, s))
    assert obs.outcome == "entropy_collapse"
    assert obs.evidence["entropy"]["recent_median"] < 0.01


def test_an_entropy_below_the_bar_from_its_first_record_is_no_collapse(tmp_path):
    # huggingface/open-r1#704: TRL's notebook table shows entropy 0 at step 1 and "No log" after it
    s = healthy_hf_series()
    s["entropy"] = np.zeros(30)
    obs = examine(PolicyDrift(), hf_run(tmp_path, s))
    assert obs.outcome != "entropy_collapse", obs.summary


def _group_dump(root, responses_per_group):
    samples = [{"group_index": g, "index": i, "prompt": f"What is {g}+1?", "response": r, "reward": 0.0}
               for g, responses in enumerate(responses_per_group) for i, r in enumerate(responses)]
    (root / "dump" / "rollout_data").mkdir(parents=True)
    torch.save({"rollout_id": 0, "samples": samples}, root / "dump" / "rollout_data" / "0.pt")


def test_an_entropy_low_from_the_start_is_a_collapse_where_each_group_samples_one_completion(tmp_path):
    # a near-greedy sampler from the first rollout on: the entropy never fell, and every group is one answer
    s = healthy_series(30, 0)
    s["entropy"] = np.zeros(30)
    _group_dump(tmp_path, [[f"{g + 1}<|im_end|>"] * 8 for g in range(6)])
    obs = examine(PolicyDrift(), slime_run(tmp_path, s))
    assert obs.outcome == "entropy_collapse", obs.summary
    assert obs.evidence["identical_groups"]["single_completion_groups"] == 6
    assert "6 of 6 prompt groups sampled a single completion" in obs.summary


def test_an_entropy_low_from_the_start_with_varied_groups_is_no_collapse(tmp_path):
    # entropy logged 0 where it is not computed, while each group still samples several answers
    s = healthy_series(30, 0)
    s["entropy"] = np.zeros(30)
    _group_dump(tmp_path, [[f"{g + i % 3}<|im_end|>" for i in range(8)] for g in range(6)])
    obs = examine(PolicyDrift(), slime_run(tmp_path, s))
    assert obs.outcome != "entropy_collapse", obs.summary


def test_drift_kl_divergence(tmp_path):
    s = healthy_hf_series()
    s["kl"] = np.geomspace(0.01, 6.0, 30)
    obs = examine(PolicyDrift(), hf_run(tmp_path, s))
    assert obs.outcome == "kl_divergence"
    assert obs.evidence["kl"]["recent_median"] > 2


def test_drift_clip_aggressive(tmp_path):
    s = healthy_series()
    s["clipfrac"] = np.full(30, 0.45)
    obs = examine(PolicyDrift(), slime_run(tmp_path, s))
    assert obs.outcome == "clip_aggressive"
    assert obs.evidence["clip_ratio"] == {"metric": "step:train/pg_clipfrac", "recent_median": 0.45, "records": 30,
                                          "last_step": 29}


def test_drift_length_hacking_to_the_limit(tmp_path):
    s = healthy_series(30)
    s["resp_mean"] = np.linspace(200, 1010, 30)
    s["raw_reward"] = np.linspace(0.2, 0.8, 30)
    obs = examine(PolicyDrift(), slime_run(tmp_path, s))
    assert obs.outcome == "length_hacking"
    assert obs.evidence["response_length"]["limit"] == {"arg": "rollout_max_response_len", "value": 1024}
    assert obs.evidence["response_length"]["trend"]["kendall_tau"] == 1.0


def test_drift_length_hacking_hf_with_limit_from_manifest_args(tmp_path):
    s = healthy_hf_series(30)
    s["resp_mean"] = np.linspace(300, 2000, 30)
    s["raw_reward"] = np.linspace(0.1, 0.9, 30)
    obs = examine(PolicyDrift(), hf_run(tmp_path, s, manifest={"args": {"max_completion_length": 2048}}))
    assert obs.outcome == "length_hacking"
    assert obs.evidence["response_length"]["limit"] == {"arg": "max_completion_length", "value": 2048}
    assert obs.evidence["response_length"]["metric"] == "hf:completions/mean_length"


def test_drift_length_rising_without_reward_is_not_hacking(tmp_path):
    s = healthy_series(30)
    s["resp_mean"] = np.linspace(200, 1010, 30)
    s["raw_reward"] = 0.3 + 0.02 * np.random.default_rng(4).standard_normal(30)
    assert examine(PolicyDrift(), slime_run(tmp_path, s)).outcome == "none"


# --- base_model ------------------------------------------------------------------------


def _hf_dir(path, template: bool, name_or_path: str | None = None, gen: dict | None = None):
    path.mkdir(parents=True)
    config = {"model_type": "qwen2", "vocab_size": 1024, "hidden_size": 64}
    if name_or_path:
        config["_name_or_path"] = name_or_path
    (path / "config.json").write_text(json.dumps(config))
    tok = {"eos_token": "<|endoftext|>"}
    if template:
        tok["chat_template"] = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    (path / "tokenizer_config.json").write_text(json.dumps(tok))
    if gen is not None:
        (path / "generation_config.json").write_text(json.dumps(gen))


def _log_with_args(root, args, finish_prompt=None):
    from metric_runs import SlimeLog

    log = SlimeLog().arguments(args)
    if finish_prompt:
        log.finish_rollout(finish_prompt, "The answer is 42.")
    log.write(root)
    return open_run(str(root))


def test_base_model_by_name(tmp_path):
    _hf_dir(tmp_path / "models" / "Qwen2.5-0.5B-Base", template=True)
    run = _log_with_args(tmp_path, {**SLIME_ARGS, "hf_checkpoint": "/mnt/models/Qwen2.5-0.5B-Base"})
    obs = examine(BaseModelProbe(), run)
    assert obs.outcome == "base"
    assert "Qwen2.5-0.5B-Base" in obs.summary
    assert obs.evidence["directory"].endswith("models/Qwen2.5-0.5B-Base")


def test_base_model_no_template_while_run_uses_chatml(tmp_path):
    _hf_dir(tmp_path / "models" / "policy", template=False, gen={"bos_token_id": 0, "eos_token_id": 0})
    run = _log_with_args(tmp_path, {**SLIME_ARGS, "hf_checkpoint": "/mnt/models/policy"},
                         finish_prompt="<|im_start|>user\nWhat is 6*7?<|im_end|>\n<|im_start|>assistant\n")
    obs = examine(BaseModelProbe(), run)
    assert obs.outcome == "base"
    assert obs.evidence["chat_template"] == {"present": False, "where": "tokenizer_config.json has no chat_template"}
    assert obs.evidence["run_uses_chat_template"] is True
    assert obs.evidence["chat_template_use"].startswith("chat markers in the rollout printed at")


def test_instruct_model_by_name_and_by_template(tmp_path):
    _hf_dir(tmp_path / "a" / "models" / "Qwen2.5-0.5B-Instruct", template=True)
    obs = examine(BaseModelProbe(), _log_with_args(tmp_path / "a", SLIME_ARGS))
    assert obs.outcome == "instruct" and "Qwen2.5-0.5B-Instruct" in obs.summary

    _hf_dir(tmp_path / "b" / "models" / "policy", template=True,
            gen={"do_sample": True, "temperature": 0.7, "eos_token_id": [151645, 151643]})
    obs = examine(BaseModelProbe(), _log_with_args(tmp_path / "b", {**SLIME_ARGS, "hf_checkpoint": "/x/models/policy"}))
    assert obs.outcome == "instruct"
    assert obs.evidence["chat_template"]["where"] == "tokenizer_config.json:chat_template"
    assert obs.evidence["generation_config"]["temperature"] == 0.7


def test_base_model_unavailable_when_checkpoint_unreachable_and_name_silent(tmp_path):
    run = _log_with_args(tmp_path, {**SLIME_ARGS, "hf_checkpoint": "/mnt/nowhere/policy"})
    with pytest.raises(Unavailable) as exc:
        BaseModelProbe().examine(run)
    assert exc.value.artifact == "hf_checkpoint"


# --- dump_samples ----------------------------------------------------------------------


def _sample(i, response="6 * 7 = 42.", n=8, reward=1.0, tokens=None, logps=None, mask=None):
    return {"index": i, "group_index": i // 4, "prompt": "What is 6*7?", "response": response,
            "response_length": n, "reward": reward, "status": "completed",
            "tokens": tokens if tokens is not None else list(range(100, 110 + n)),
            "loss_mask": mask if mask is not None else [1] * n,
            "rollout_log_probs": logps if logps is not None else [-0.2] * n}


def _write_dump(root, rollout_id, samples):
    d = root / "dump" / "rollout_data"
    d.mkdir(parents=True, exist_ok=True)
    torch.save({"rollout_id": rollout_id, "samples": samples}, d / f"{rollout_id}.pt")


def test_dump_samples_clean(tmp_path):
    _write_dump(tmp_path, 0, [_sample(i) for i in range(8)])
    obs = examine(DumpSamples(), open_run(str(tmp_path)))
    assert obs.outcome == "clean"
    assert obs.evidence["samples_scanned"] == 8 and obs.evidence["dumps_scanned"] == 1


def test_dump_samples_finds_each_kind_of_bad_sample(tmp_path):
    _hf_dir(tmp_path / "hf" / "Qwen-tiny-Instruct", template=True)  # vocab_size 1024
    samples = [_sample(i) for i in range(12)]
    samples[2] = _sample(2, response="", n=0, tokens=list(range(100, 110)), logps=[], mask=[])
    samples[5] = _sample(5, reward=math.nan)
    samples[7] = _sample(7, tokens=[100, 101, 5000, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113, 114, 115, 116])
    samples[9] = _sample(9, n=300, tokens=list(range(100, 410)))
    samples[10] = _sample(10, logps=[-0.2, -math.inf, -0.1, -0.2, -0.2, -0.2, -0.2, -0.2])
    samples[11] = _sample(11, mask=[1] * 5)
    _write_dump(tmp_path, 3, samples)
    _write_dump(tmp_path, 4, [_sample(i) for i in range(4)])
    obs = examine(DumpSamples(), open_run(str(tmp_path)))
    assert obs.outcome == "bad_sample"
    assert obs.evidence["vocab_size"] == {"value": 1024, "from": "Qwen-tiny-Instruct/config.json:vocab_size"}
    by_index = {b["sample"]: b for b in obs.evidence["bad_samples"]}
    assert set(by_index) == {2, 5, 7, 9, 10, 11}
    assert all(b["rollout"] == 3 for b in by_index.values())
    assert by_index[2]["kinds"] == ["empty_response"]
    assert by_index[5]["kinds"] == ["nonfinite_reward"] and by_index[5]["reward"] == "nan"
    assert by_index[7]["kinds"] == ["token_out_of_vocab"] and "5000" in by_index[7]["why"][0]
    assert by_index[9]["kinds"] == ["extreme_length"]
    assert by_index[10]["kinds"] == ["nonfinite_log_prob"] and "rollout_log_probs[1]" in by_index[10]["why"][0]
    assert by_index[11]["why"] == ["len(loss_mask) = 5 but response_length = 8"]
    assert obs.evidence["reasons"]["empty_response"] == 1
    assert "rollout 3 sample 2" in obs.summary


def test_dump_samples_unavailable_without_dumps(tmp_path):
    (tmp_path / "job.log").write_text("[2026-08-01 10:00:00] train.py:1 - start\n")
    with pytest.raises(Unavailable) as exc:
        DumpSamples().examine(open_run(str(tmp_path)))
    assert exc.value.artifact == "rollout_dump"


# --- judgements on short runs (a few rollouts of many samples each) --------------------


SHORT_ARGS = {**SLIME_ARGS, "rollout_batch_size": 4, "n_samples_per_prompt": 8, "bf16": False, "fp16": False}


def _all_zero_short_run(n=3):
    s = healthy_series(n)
    s["raw_reward"] = np.zeros(n)
    s["zero_std_0"] = np.full(n, 4.0)  # all 4 groups of every rollout scored 0 throughout
    return s


def _addition_dump(root, rollout_id, correct):
    """32 samples of `a+b=` prompts: `correct` of them answer with the label; the reward is 0 for all."""
    samples = []
    for i in range(32):
        label = str(100 + 7 * (i // 8))
        response = (label if i % 8 < correct else str(5 + i % 3)) + "<|im_end|>"
        samples.append({"index": i, "group_index": i // 8, "prompt": "<|im_start|>user\nadd<|im_end|>",
                        "response": response, "label": label, "reward": 0.0, "status": "completed"})
    _write_dump(root, rollout_id, samples)


def test_reward_constant_zero_on_three_slime_rollouts(tmp_path):
    run = slime_run(tmp_path, _all_zero_short_run(), args=SHORT_ARGS)
    obs = examine(RewardSignal(), run)
    assert obs.outcome == "constant_zero"
    assert obs.evidence["reward"]["records"] == 3
    assert obs.evidence["reward"]["samples_per_record"] == 32
    assert "96 samples" in obs.summary
    assert "dump_check" not in obs.evidence


def test_reward_constant_zero_needs_more_rows_on_hf_trainer(tmp_path):
    s = healthy_hf_series(3)
    s["raw_reward"], s["reward_std"], s["frac_zero_std"] = np.zeros(3), np.zeros(3), np.ones(3)
    with pytest.raises(Unavailable):
        RewardSignal().examine(hf_run(tmp_path, s))


def test_reward_constant_zero_needs_enough_samples(tmp_path):
    # 3 rollouts of 2 samples each (6 samples) prove nothing
    args = {**SHORT_ARGS, "rollout_batch_size": 1, "n_samples_per_prompt": 2}
    s = _all_zero_short_run()
    s["zero_std_0"] = np.ones(3)
    with pytest.raises(Unavailable):
        RewardSignal().examine(slime_run(tmp_path, s, args=args))


def test_reward_broken_fn_told_by_dumped_correct_answers(tmp_path):
    for rid in range(3):
        _addition_dump(tmp_path, rid, correct=5)
    run = slime_run(tmp_path, _all_zero_short_run(), args=SHORT_ARGS)
    obs = examine(RewardSignal(), run)
    assert obs.outcome == "constant_zero"
    check = obs.evidence["dump_check"]
    assert check["samples_checked"] == 96 and check["contain_label_scored_0"] == 60
    assert check["examples"][0]["label"] == "100" and check["examples"][0]["reward"] == 0.0
    assert "60 of 96 dumped responses contain their label" in obs.summary
    assert obs.confidence == 0.9


def test_reward_no_signal_when_dumped_responses_never_answer(tmp_path):
    for rid in range(3):
        _addition_dump(tmp_path, rid, correct=0)
    run = slime_run(tmp_path, _all_zero_short_run(), args=SHORT_ARGS)
    obs = examine(RewardSignal(), run)
    assert obs.outcome == "zero_variance"
    assert obs.evidence["dump_check"]["contain_label"] == 0
    assert "none of 96 dumped responses contain their label" in obs.summary


def test_contains_answer_is_a_whole_token():
    from probes.reward_signal import contains_answer

    assert contains_answer("41<|im_end|>", "41")
    assert contains_answer("so the answer is 41.", "41")
    assert not contains_answer("141<|im_end|>", "41")
    assert not contains_answer("41.5", "41")
    assert not contains_answer("-41", "41")


def test_drift_bf16_engine_under_an_fp32_trainer(tmp_path):
    # a bf16 engine under an fp32 trainer: the per-token difference sits around bf16 rounding (~1e-2)
    s = noisy_series(6, seed=21, logp_gap=0.01)
    obs = examine(PolicyDrift(), slime_run(tmp_path / "fp32", s, args=SHORT_ARGS, extra=noisy_extra(s)))
    assert obs.outcome == "logprob_mismatch"
    recent = float(np.median(s["logp_diff"][-5:]))
    assert obs.evidence["logp_diff"]["recent_median"] == pytest.approx(recent, rel=1e-5)
    assert obs.evidence["logp_diff"]["threshold"] == 2.0**-8 and obs.evidence["logp_diff"]["trainer_fp32"] is True
    assert "fp32 trainer" in obs.summary

    # the same difference under bf16 training is bf16 rounding: the guide's 0.1 holds
    args = {**SHORT_ARGS, "bf16": True}
    obs = examine(PolicyDrift(), slime_run(tmp_path / "bf16", s, args=args, extra=noisy_extra(s)))
    assert obs.outcome == "none"
    assert obs.evidence["logp_diff"]["threshold"] == 0.1

    # an fp32 engine matching an fp32 trainer agrees to float32 rounding
    same = noisy_series(6, seed=21, logp_gap=2e-7)
    run = slime_run(tmp_path / "ok", same, args=SHORT_ARGS, extra=noisy_extra(same))
    assert examine(PolicyDrift(), run).outcome == "none"


def test_drift_growing_gap_across_rollouts(tmp_path):
    # the gap doubles and keeps rising (vllm-project/vime#64), still under the guide's 0.1 level bar
    s = noisy_series(30, seed=22, logp_gap=0.01)
    s["logp_diff"] = s["logp_diff"] * np.linspace(1.0, 5.0, 30)
    args = {**SHORT_ARGS, "bf16": True}
    obs = examine(PolicyDrift(), slime_run(tmp_path / "grow", s, args=args, extra=noisy_extra(s)))
    assert obs.outcome == "growing_drift"
    g = obs.evidence["growing_gap"]
    assert g["metric"] == "step:train/train_rollout_logprob_abs_diff" and g["records"] == 30
    assert g["growth"] >= 2.0 and g["trend"]["kendall_tau"] > 0.5
    # the same level without the rise is a constant precision gap: nothing to report
    flat = noisy_series(30, seed=22, logp_gap=0.01)
    assert examine(PolicyDrift(), slime_run(tmp_path / "flat", flat, args=args, extra=noisy_extra(flat))).outcome == "none"
    # a rise inside fp32 rounding (1e-7 to 5e-7) is not drift
    tiny = noisy_series(30, seed=22, logp_gap=1e-7)
    tiny["logp_diff"] = tiny["logp_diff"] * np.linspace(1.0, 5.0, 30)
    run = slime_run(tmp_path / "tiny", tiny, args=SHORT_ARGS, extra=noisy_extra(tiny))
    assert examine(PolicyDrift(), run).outcome == "none"


def test_drift_mean_logprob_gap_when_no_per_token_difference(tmp_path):
    s = healthy_series(6)
    engine = s["log_probs"] + np.array([0.0, 0.01, 0.02, 0.015, 0.02, 0.018])
    obs = examine(PolicyDrift(), slime_run(tmp_path, s, args=SHORT_ARGS,
                                           extra={"rollout": {"rollout/rollout_log_probs": engine}}))
    assert obs.outcome == "logprob_mismatch"
    assert obs.evidence["mean_logprob_gap"]["recent_median"] == pytest.approx(0.018, abs=1e-6)  # the last 5 rollouts
    assert "rollout/rollout_log_probs" in obs.evidence["mean_logprob_gap"]["metric"]


def test_lr_too_high_onset_relative_to_a_run_above_10_from_the_start(tmp_path):
    # a small model whose healthy grad norm is ~10; after a 4-step warmup to 1e-3 it grows
    n = 12
    s = healthy_series(n)
    s["lr"] = np.concatenate([[2.5e-4, 5e-4, 7.5e-4], np.full(n - 3, 1e-3)])
    s["grad_norm"] = np.array([10.2, 10.4, 9.8, 29.1, 0.0, 39.0, 35.5, 1.5, 19.5, 1.5, 12.8, 0.0])
    s["raw_reward"] = np.linspace(0.5, 0.1, n)  # and the later steps degrade
    obs = examine(LrSchedule(), slime_run(tmp_path, s, args={**SHORT_ARGS, "lr": 1e-3}))
    assert obs.outcome == "too_high"
    assert obs.evidence["grad_norm"]["onset_step"] == 0  # the guide's absolute "> 10" fires from the start
    assert obs.evidence["grad_norm"]["relative_onset"]["step"] == 5
    assert obs.evidence["grad_norm"]["relative_onset"]["early_level"] == 10.2
    assert obs.evidence["instability"]["onset_step"] == 5
    assert "reaches its peak" in obs.summary and "above the 1e-05" in obs.summary


def test_lr_plausible_when_a_run_above_10_never_jumps(tmp_path):
    s = healthy_series(10)
    s["grad_norm"] = np.array([10.7, 18.3, 7.7, 11.2, 13.9, 13.0, 10.1, 13.3, 12.1, 12.5])
    obs = examine(LrSchedule(), slime_run(tmp_path, s))
    assert obs.outcome == "plausible"
    assert "relative_onset" not in obs.evidence.get("grad_norm", {})


# --- field ids: groups too small, a truncation metric that miscounts ------------------------------


def test_reward_degenerate_groups_of_one_sample(tmp_path):
    # one completion per prompt (om-ai-lab/VLM-R1#71): reward_std and grad_norm NaN from step 1
    s = noisy_series(12, seed=31, per_prompt=1)
    s["grad_norm"] = np.full(12, math.nan)
    assert np.isnan(s["reward_std"]).all()  # what torch's unbiased std of one sample gives
    obs = examine(RewardSignal(), hf_run(tmp_path, s, manifest={"args": {"num_generations": 1}}))
    assert obs.outcome == "degenerate_groups"
    assert obs.evidence["group_size"] == {"arg": "num_generations", "value": 1}
    assert obs.evidence["reward_std"]["nonfinite"] == 12 and obs.evidence["reward_std"]["nonfinite_at_first_step"]
    assert obs.evidence["grad_norm"]["nonfinite_at_first_step"] is True
    assert "single sample" in obs.summary


@pytest.mark.parametrize("estimator, outcome", [("gae", None), ("reinforce_plus_plus", None), ("grpo", "degenerate_groups")])
def test_one_sample_per_prompt_is_no_fault_for_an_estimator_without_groups(tmp_path, estimator, outcome):
    # verl's PPO (algorithm.adv_estimator=gae) samples once per prompt by design (Bihan/dstack-configs' verl_demo.log:
    # actor_rollout_ref.rollout.n 1 under `gae`); GRPO normalises within the prompt's group and cannot
    s = noisy_series(12, seed=31, per_prompt=1)
    run = hf_run(tmp_path, s, manifest={"args": {"actor_rollout_ref.rollout.n": 1, "algorithm.adv_estimator": estimator}})
    obs = examine(RewardSignal(), run)
    assert (obs.outcome == "degenerate_groups") == (outcome == "degenerate_groups"), obs.summary


def test_one_sample_per_prompt_with_finite_gradients_is_no_fault(tmp_path):
    # verl's GRPO takes a group of one's mean as 0 and its std as 1 (core_algos.py): Chrisytz/verl's output.txt ran
    # rollout.n 1 with a finite actor/grad_norm; the NaN a group of one gives elsewhere was not there to see
    s = noisy_series(12, seed=31, per_prompt=1)
    s.pop("reward_std", None)
    s["grad_norm"] = np.full(12, 0.014)
    obs = examine(RewardSignal(), hf_run(tmp_path, s, manifest={"args": {"num_generations": 1}}))
    assert obs.outcome != "degenerate_groups", obs.summary


# FanqingM/MM-Eureka-V0#14 as pasted (a copy of TRL's GRPO trainer run with one generation per prompt)
EUREKA_ONE_SAMPLE = (
    "  0%|          | 0/19788 [00:00<?, ?it/s]/pcl_data/users/wyl/src/open_r1/trainer/grpo_trainer_vllm.py:552: "
    "UserWarning: std(): degrees of freedom is <= 0. Correction should be strictly less than the reduction factor "
    "(input numel divided by output numel). (Triggered internally at ../aten/src/ATen/native/ReduceOps.cpp:1823.)\n"
    "  std_grouped_rewards = rewards.view(-1, self.num_generations).std(dim=1)\n"
    "\n"
    "{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 9.999494643218111e-07, 'completion_length': 524.0, "
    "'rewards/accuracy_reward': 0.0, 'rewards/format_reward': 0.0, 'reward': 0.0, 'reward_std': nan, 'kl': 0.0, "
    "'epoch': 0.0}\n"
)


def test_reward_degenerate_groups_read_from_torchs_warning_in_a_grpo_trainer():
    from triage.run.fragment import open_text_run

    obs = examine(RewardSignal(), open_text_run(EUREKA_ONE_SAMPLE))
    assert obs.outcome == "degenerate_groups"
    assert obs.evidence["group_size"]["value"] == 1 and obs.evidence["group_size"]["where"].endswith(":1")
    assert obs.evidence["reward_std"]["nonfinite_at_first_step"] is True
    assert "single sample" in obs.summary and "degrees of freedom" in obs.summary
    # the same warning from any other code is a std over one element somewhere, not the group's
    elsewhere = EUREKA_ONE_SAMPLE.replace("open_r1/trainer/grpo_trainer_vllm.py", "myproj/metrics.py")
    with pytest.raises(Unavailable, match="20 are needed"):  # one record: nothing else to decide from
        examine(RewardSignal(), open_text_run(elsewhere))


def test_reward_degenerate_groups_of_two_samples(tmp_path):
    # two completions per prompt: with a 0/1 reward at least half the groups are equal, whatever p
    s = noisy_series(20, seed=32, prompts=16, per_prompt=2)
    assert np.median(s["frac_zero_std"]) >= 0.5
    obs = examine(RewardSignal(), hf_run(tmp_path / "g2", s, manifest={"args": {"num_generations": 2}}))
    assert obs.outcome == "degenerate_groups"
    assert obs.evidence["zero_std_fraction"]["median"] >= 0.5
    assert "only 2 samples" in obs.summary
    # the same groups with 8 samples each are an ordinary, improving run
    s8 = noisy_series(20, seed=32, prompts=16, per_prompt=8)
    obs = examine(RewardSignal(), hf_run(tmp_path / "g8", s8, manifest={"args": {"num_generations": 8}}))
    assert obs.outcome == "improving"


def _truncation_log(tmp_path, endings: list[str]):
    from metric_runs import slime_metrics_log

    s = noisy_series(20, seed=33)
    s["truncated_ratio"] = np.clip(s["truncated_ratio"] + 0.93, 0, 1)
    log = slime_metrics_log(s)
    for i, end in enumerate(endings):
        log.finish_rollout("<|user|>\nWhat is 6*7?<|end|>\n<|assistant|>\n", f"6*7 = 42. The answer is 42.{end}",
                           label="42", reward=1.0)
    log.write(tmp_path)
    return open_run(str(tmp_path))


def test_truncation_false_when_texts_end_on_the_turn_terminator(tmp_path):
    # huggingface/trl#7039: completions that ended on <|end|> counted as clipped
    obs = examine(Truncation(), _truncation_log(tmp_path / "end", ["<|end|>"] * 6))
    assert obs.outcome == "false_truncation"
    assert obs.evidence["text_endings"]["end_on_terminator"] == 6
    assert obs.evidence["text_endings"]["terminators"] == ["<|end|>"]
    assert "below rollout_max_response_len=1024" in obs.summary


def test_truncation_real_when_texts_run_on(tmp_path):
    obs = examine(Truncation(), _truncation_log(tmp_path / "cut", [" Let me also check"] * 6))
    assert obs.outcome == "mostly_truncated"
    assert obs.evidence["text_endings"]["end_on_terminator"] == 0


def test_a_nan_only_in_kl_while_loss_and_grad_norm_are_finite_is_not_training_gone_nan(tmp_path):
    # modelscope/ms-swift#4465: `"kl": NaN` on records whose loss and grad_norm are finite (a KL with nothing
    # to average), which did not reach the update
    s = healthy_hf_series(30)
    s["kl"] = np.full(30, math.nan)
    obs = examine(NonfiniteOnset(), hf_run(tmp_path / "kl", s))
    assert obs.outcome == "none", obs.summary
    # the same NaN with the loss and the grad norm NaN on those records is the training's
    s["loss"] = s["loss"].copy()
    s["loss"][20:] = math.nan
    s["grad_norm"] = s["grad_norm"].copy()
    s["grad_norm"][20:] = math.nan
    obs = examine(NonfiniteOnset(), hf_run(tmp_path / "loss", s))
    assert obs.outcome == "persistent", obs.summary
    assert obs.evidence["onset_step"] == 1 and obs.evidence["persistent_from_step"] == 1


def test_the_trainers_filtered_loss_does_not_hide_nan_log_probs(tmp_path):
    # huggingface/trl#1199 (DPO in fp16): `'loss': 0.0` beside `'logps/chosen': nan` and no grad_norm logged; the
    # Trainer leaves a NaN step's loss out of the logged one (logging_nan_inf_filter), so it says nothing
    log = ("{'loss': 0.6931, 'learning_rate': 6.7e-06, 'rewards/chosen': 0.0, 'logps/chosen': -103.93, 'epoch': 0.0}\n"
           "{'loss': 0.0, 'learning_rate': 6.7e-05, 'rewards/chosen': nan, 'logps/chosen': nan, 'epoch': 0.01}\n")
    (tmp_path / "job.log").write_text(log, encoding="utf-8")
    obs = examine(NonfiniteOnset(), open_run(str(tmp_path)))
    assert obs.outcome == "persistent", obs.summary
    assert obs.evidence["onset_metric"] == "hf_log:logps/chosen" and obs.evidence["onset_step"] == 2


def test_both_sides_of_a_preference_pair_non_finite_are_the_forward_pass_not_a_mean_over_nothing(tmp_path):
    # modelscope/ms-swift#5418 (DPO): `logps/chosen` and `logps/rejected` NaN on one record, grad_norm 1.0 beside them
    def rec(lc, lr, e):
        return (f"{{'loss': 0.0, 'grad_norm': 1.0, 'learning_rate': 1e-06, 'logps/chosen': {lc}, 'logps/rejected': {lr}, "
                f"'epoch': {e}}}\n")
    (tmp_path / "dpo").mkdir()
    (tmp_path / "dpo" / "job.log").write_text(rec(-160.1, -190.2, 0.01) + rec("nan", "nan", 0.02) + rec("nan", "nan", 0.03),
                                              encoding="utf-8")
    obs = examine(NonfiniteOnset(), open_run(str(tmp_path / "dpo")))
    assert obs.outcome == "finite_gradients", obs.summary
    assert "both sides of the preference pair non-finite" in obs.summary
    # KTO logs one side's mean over a batch that holds none of it as NaN: one side alone is set aside
    (tmp_path / "kto").mkdir()
    (tmp_path / "kto" / "job.log").write_text(rec(-160.1, -190.2, 0.01) + rec("nan", -188.0, 0.02) + rec("nan", -187.5, 0.03),
                                              encoding="utf-8")
    obs = examine(NonfiniteOnset(), open_run(str(tmp_path / "kto")))
    assert obs.outcome == "none", obs.summary
    assert "set aside" in obs.summary


def test_a_loss_nan_beside_a_finite_grad_norm_is_not_a_nan_gradient(tmp_path, capsys):
    # huggingface/trl#1447 (KTO): `'loss': nan` from the second record on while grad_norm stays 29-55; the
    # catalog's NaN gradient is read from the grad norm, which was observed finite
    s = healthy_hf_series(30)
    s["loss"] = s["loss"].copy()
    s["loss"][1:] = math.nan
    obs = examine(NonfiniteOnset(), hf_run(tmp_path / "run", s))
    assert obs.outcome == "finite_gradients", obs.summary
    assert obs.evidence["onset_step"] == 2
    assert obs.evidence["grad_norm_finite"]["metric"] == "hf:grad_norm"
    assert "grad_norm is finite on every one of those records" in obs.summary
    from triage.cli import main

    code = main(["run", str(tmp_path / "run"), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 3 and report["root_cause"]["id"] == "inconclusive"
    assert "numerics.nan_grad" not in [c["id"] for c in report["candidates"]]


def test_a_grad_norm_above_the_absolute_bar_is_a_spike_even_in_two_records(tmp_path):
    # NVIDIA-NeMo/ProRL-Agent-Server#40: two slime records with grad_norm ~3e9
    s = healthy_hf_series(2)
    s["grad_norm"] = np.array([2955012562.8, 2217390918.5])
    obs = examine(GradNormHealth(), hf_run(tmp_path / "big", s))
    assert obs.outcome == "spikes", obs.summary
    assert obs.evidence["spikes"][0]["value"] == pytest.approx(2955012562.8)
    assert "absolute bar of 100" in obs.summary
    # two ordinary records are still too few to judge
    with pytest.raises(Unavailable):
        examine(GradNormHealth(), hf_run(tmp_path / "small", healthy_hf_series(2)))


def test_a_nan_on_the_last_record_alone_is_not_said_to_never_recover(tmp_path):
    # verl-project/verl#1037 pasted one step with grad_norm nan: nothing after it says whether it recovered
    from probes.nonfinite_onset import NonfiniteOnset

    (tmp_path / "job.log").write_text(
        "(TaskRunner pid=362057) step:2 - actor/pg_loss:0.01 - actor/grad_norm:nan - critic/score/mean:0.1\n",
        encoding="utf-8")
    from triage.run import open_run

    obs = NonfiniteOnset().examine(open_run(str(tmp_path)))
    assert obs.outcome == "persistent" and obs.evidence["last_record_only"] is True
    assert "never recovers" not in obs.summary and "no later record shows" in obs.summary


def test_a_nan_in_step_less_records_is_placed_by_record_and_epoch_not_by_step(tmp_path):
    # hiyouga/LlamaFactory#5627: the Trainer's printed dicts carry no step; the fragment starts mid-epoch
    from probes.nonfinite_onset import NonfiniteOnset
    from triage.run import open_run

    (tmp_path / "job.log").write_text(
        "{'loss': 1.4596, 'grad_norm': nan, 'learning_rate': 4.55e-06, 'epoch': 0.66}\n"
        "{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 4.54e-06, 'epoch': 0.67}\n", encoding="utf-8")
    obs = NonfiniteOnset().examine(open_run(str(tmp_path)))
    assert obs.outcome == "persistent", obs.summary
    assert "from record 1 on" in obs.summary and "at epoch 0.66" in obs.summary and "step 1" not in obs.summary


def test_fewest_samples_a_whole_number_mean_can_come_from():
    from probes.reward_signal import fewest_samples

    assert fewest_samples(21 / 128) == 128  # a truncation share of 21 in 128
    assert fewest_samples(1029955 / 256) == 256  # 4023.29296875 tokens on average
    assert fewest_samples(1 / 3) == 3 and fewest_samples(0.5) == 2
    assert fewest_samples(4023.0) == 1 and fewest_samples(0.0) == 1  # a whole mean says nothing
    assert fewest_samples(float("nan")) == 1 and fewest_samples(-0.25) == 1


# THUDM/slime#1527 as pasted: Qwen3-30B-A3B with GSPO, "both the training rewards and AIME24 evaluation
# scores remain consistently at 0 ... from the very first rollout"; no arguments in the paste
SLIME_1527 = ("rollout 0: {'rollout/response_lengths': 4023.29296875, 'rollout/rewards': 0.0, 'rollout/truncated': "
              "0.1640625, 'rollout/rollout_log_probs': -0.21898368746042252, 'rollout/raw_reward': 0.0, "
              "'rollout/total_lengths': 4176.83984375, 'rollout/ref_log_probs': -0.22009427845478058, "
              "'rollout/log_probs': -0.22009427845478058, 'rollout/advantages': 0.0, 'rollout/returns': 0.0}\n")


def test_one_all_zero_rollout_is_decisive_when_its_own_means_show_enough_samples(tmp_path):
    (tmp_path / "job.log").write_text(SLIME_1527, encoding="utf-8")
    obs = examine(RewardSignal(), open_run(str(tmp_path)))
    assert obs.outcome == "constant_zero"
    assert obs.evidence["reward"]["samples_per_record"] == 256  # the mean lengths' denominator
    assert "at least 256 samples" in obs.summary


def test_one_all_zero_rollout_whose_means_are_whole_numbers_decides_nothing(tmp_path):
    text = SLIME_1527.replace("4023.29296875", "4023.0").replace("4176.83984375", "4176.0").replace(
        "'rollout/truncated': 0.1640625", "'rollout/truncated': 0.0")
    (tmp_path / "job.log").write_text(text, encoding="utf-8")
    with pytest.raises(Unavailable):
        RewardSignal().examine(open_run(str(tmp_path)))


def test_a_printed_trainer_dict_is_no_first_update(tmp_path):
    # huggingface/trl#5312: one record the Trainer printed at `'epoch': 10.0`; its place in the paste is not its step
    from probes.policy_drift import PolicyDrift

    (tmp_path / "job.log").write_text(
        "{'loss': 0.0, 'grad_norm': 4.9e-06, 'learning_rate': 1e-06, 'completions/mean_length': 52.75, "
        "'reward': 0.0066, 'reward_std': 0.0061, 'sampling/sampling_logp_difference/mean': 0.8090547323226929, "
        "'sampling/importance_sampling_ratio/min': 3.197867121484542e-21, 'entropy': 2.14, 'epoch': 10.0}\n",
        encoding="utf-8")
    obs = examine(PolicyDrift(), open_run(str(tmp_path)))
    assert "first update" not in obs.summary and "first_update" not in obs.evidence


def test_a_peak_lr_of_an_earlier_phase_does_not_explain_a_later_spike(tmp_path):
    # a tutorial's SFT stage at 2.4e-05 and its GRPO stage at 4e-06, one log: the GRPO stage's grad-norm spike came
    # under an LR below the RL bar, so the SFT stage's peak is no reason for it
    from triage.run import open_run

    sft = [f"{{'loss': {1.2 - 0.02 * i:.3f}, 'grad_norm': {3.0 + 0.3 * (i % 4):.2f}, 'learning_rate': "
           f"{2.43e-05 * (1 - i / 20):.4e}, 'epoch': {0.05 * i:.2f}}}" for i in range(13)]
    grpo = [f"{{'loss': 0.0, 'grad_norm': {g}, 'learning_rate': 4.083e-06, 'reward': 0.4, 'reward_std': 0.2, "
            f"'kl': 0.0, 'completions/mean_length': 120.0, 'epoch': 0.0{i + 1}}}" for i, g in enumerate((3.9, 21.15))]
    (tmp_path / "job.log").write_text("\n".join(sft + grpo) + "\n", encoding="utf-8")
    obs = LrSchedule().examine(open_run(str(tmp_path)))
    assert obs.outcome != "too_high", obs.summary
    assert obs.evidence["lr"]["at_onset"] < 1e-05
