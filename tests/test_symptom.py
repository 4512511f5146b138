"""The symptom classifier: every outcome on a real run directory, and the precedence between them."""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from metric_runs import (SLIME_ARGS, SlimeLog, healthy_hf_series, healthy_series, hf_run, noisy_extra, noisy_series,
                         slime_metrics_log)
from probes.symptom import PRECEDENCE, Symptom
from triage.errors import Unavailable
from triage.run import open_run

OOM = """\
(MegatronTrainRayActor pid=2345) Traceback (most recent call last):
(MegatronTrainRayActor pid=2345)   File "/root/slime/slime/backends/megatron_utils/model.py", line 680, in train_one_step
(MegatronTrainRayActor pid=2345)     losses_reduced = forward_backward_func(
(MegatronTrainRayActor pid=2345) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 9.27 GiB. GPU 0 has a total capacity of 79.11 GiB of which 3.20 GiB is free.
"""

GARBLED = [
    "нафтаξλ大学 vergütung ماهي สวัสดี Привет 的 αβγ abcдежfgh",
    "<unk><unk><unk><unk><unk><unk>",
    "ysicsOrg\ufffd\ufffd DRM\x03 cosponsoredNexus мosqu ξλ",
]
PROMPT = "<|im_start|>user\nWhat is 6*7?<|im_end|>\n<|im_start|>assistant\n"


def classify(run, **params):
    probe = Symptom(Symptom.Params(**params)) if params else Symptom()
    obs = probe.examine(run)
    json.dumps(obs.evidence)
    return obs


def write(root, log: SlimeLog, tail: str = ""):
    path = log.write(root)
    if tail:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(tail)
    return open_run(str(root))


def test_outcomes_are_the_precedence_plus_no_symptom():
    assert Symptom.outcomes == (*PRECEDENCE, "no_symptom")


def test_healthy_slime_and_hf_runs_have_no_symptom(tmp_path):
    log = slime_metrics_log(healthy_series())
    log.finish_rollout(PROMPT, "6 * 7 = 42. The answer is 42.<|im_end|>")
    obs = classify(write(tmp_path / "s", log))
    assert obs.outcome == "no_symptom", obs.evidence["details"]
    assert obs.evidence["symptoms_seen"] == []
    assert classify(hf_run(tmp_path / "h", healthy_hf_series())).outcome == "no_symptom"
    assert "the metrics stay in the guides' healthy ranges" in obs.summary


def test_a_log_without_metrics_is_never_said_to_have_healthy_metrics(tmp_path):
    (tmp_path / "job.log").write_text(
        "(main_task pid=1748945) [2025-03-01 10:00:00] main_ppo.py:54 - Training Progress: 0/100\n", encoding="utf-8")
    obs = classify(open_run(str(tmp_path)))
    assert obs.outcome == "no_symptom"
    assert "there are no metrics to check" in obs.summary
    assert "healthy ranges" not in obs.summary


def test_a_pasted_traceback_cut_before_its_exception_is_an_error_exit(tmp_path):
    (tmp_path / "job.log").write_text(  # verl-project/verl#302's paste, cut inside its traceback
        "(main_task pid=1748945) Unhandled error (suppress with 'RAY_IGNORE_UNHANDLED_ERRORS=1'): "
        "ray::WorkerDict.actor_rollout_generate_sequences() (pid=1751030, ip=10.65.194.91)\n"
        "(main_task pid=1748945)   File \"/verl/verl/workers/fsdp_workers.py\", line 463, in generate_sequences\n"
        "(main_task pid=1748945)     with self.rollout_sharding_manager:\n"
        "(main_task pid=1748945)   File \"/verl/verl/workers/sharding_manager/fsdp_vllm.py\", line 79, in __enter__\n"
        "(main_task pid=1748945)     self.inference_engine.wake_up()\n", encoding="utf-8")
    obs = classify(open_run(str(tmp_path)))
    assert obs.outcome == "error_exit"
    assert obs.evidence["details"]["error_exit"]["error"] == "cut_traceback"
    assert "cut before its exception" in obs.summary and "__enter__" in obs.summary


def _verl_log(error_after_step: int, steps: int = 12) -> str:
    lines = []
    for i in range(1, steps + 1):
        lines.append(f"(TaskRunner pid=700) step:{i} - actor/entropy:0.5 - actor/pg_loss:0.01 - actor/grad_norm:0.3\n")
        if i == error_after_step:
            lines += ["(WorkerDict pid=812) Traceback (most recent call last):\n",
                      '(WorkerDict pid=812)   File "/workspace/verl/verl/utils/reward_score/math.py", line 30, in compute_score\n',
                      "(WorkerDict pid=812)     return float(x)\n",
                      "(WorkerDict pid=812) ValueError: could not convert string to float: 'abc'\n"]
    return "".join(lines)


def test_an_error_verl_logged_steps_after_is_not_where_the_job_stopped(tmp_path):
    # verl's `step:N` records after a traceback show the job went on from it: not an error exit
    (tmp_path / "job.log").write_text(_verl_log(error_after_step=1), encoding="utf-8")
    assert classify(open_run(str(tmp_path))).outcome != "error_exit"
    # the same error after the last step is where it stopped
    (tmp_path / "job.log").write_text(_verl_log(error_after_step=12), encoding="utf-8")
    obs = classify(open_run(str(tmp_path)))
    assert obs.outcome == "error_exit" and "could not convert" in obs.summary
    # modelscope/ms-swift#7228: a progress bar's `8/120` printed after the error, with no record before it, says where
    # the bar stood, not that the job went on
    (tmp_path / "job.log").write_text(
        "[rank0]:   File \"/opt/ms-swift/swift/trainers/rlhf_trainer/vllm_client.py\", line 179, in infer\n"
        "[rank0]:     raise RuntimeError(f'Multiple errors: {all_errors}')\n"
        "[rank0]: RuntimeError: Multiple errors: [Exception('Server 1 failed: 500, Internal Server Error')]\n"
        "Train:   7%|▋         | 8/120 [11:30:34<161:08:04, 5179.32s/it]\n", encoding="utf-8")
    assert classify(open_run(str(tmp_path))).outcome == "error_exit"


NCCL_RETRIES = "".join(  # hiyouga/LlamaFactory#8045: NCCL's socket connect, retried at INFO
    f"zgiot:1183664:1184669 [0] NCCL INFO socketPollConnect: connect returned No route to host, retrying ({i}/34) "
    f"after sleep for {i}00 msec\n" for i in range(31, 35))


def test_the_last_of_the_retries_is_an_error_exit_and_the_ones_before_it_are_not(tmp_path):
    (tmp_path / "job.log").write_text(NCCL_RETRIES, encoding="utf-8")
    obs = classify(open_run(str(tmp_path)))
    assert obs.outcome == "error_exit"
    assert obs.evidence["details"]["error_exit"]["error"] == "network_failure"
    assert obs.evidence["details"]["error_exit"]["where"].endswith("job.log:4")
    # the same connect failing while NCCL still retries: nothing ended there yet
    (tmp_path / "job.log").write_text("".join(NCCL_RETRIES.splitlines(keepends=True)[:3]), encoding="utf-8")
    assert open_run(str(tmp_path)).log.errors == []


def test_hydras_report_with_its_exception_cut_off_is_an_error_exit_that_names_no_error(tmp_path):
    # verl-project/verl#1929 pasted Hydra's line and not the exception printed under it
    (tmp_path / "job.log").write_text(
        "Error executing job with overrides: ['algorithm.adv_estimator=grpo', 'data.train_batch_size=128']\n",
        encoding="utf-8")
    obs = classify(open_run(str(tmp_path)))
    assert obs.outcome == "error_exit"
    assert obs.evidence["details"]["error_exit"]["error"] == "cut_traceback"
    assert "exception cut off" in obs.summary and "job.log:1" in obs.summary


def test_rays_own_report_of_a_request_it_cannot_schedule_is_stuck_at_submission(tmp_path):
    # OpenRLHF/OpenRLHF#516: a cluster started with 4 CPUs; Ray's autoscaler says the actor waits, no record follows
    (tmp_path / "job.log").write_text(
        "ray start --head --num-cpus=4 --num-gpus=4\n"
        "(autoscaler +13s) Warning: The following resource request cannot be scheduled right now: {'GPU': 1.0, "
        "'CPU': 1.0}. This is likely due to all cluster resources being claimed by actors. Consider creating fewer "
        "actors or adding more nodes to this Ray cluster.\n", encoding="utf-8")
    obs = classify(open_run(str(tmp_path)))
    assert obs.outcome == "stuck_at_submission", obs.summary
    assert "1 GPU, 1 CPU" in obs.summary and "job.log:2" in obs.summary
    # the same warning in a job that logs records is a request that waited a while, not a stuck job
    with open(tmp_path / "job.log", "a", encoding="utf-8") as fh:
        fh.write("(TaskRunner pid=2601) step:1 - actor/grad_norm:0.4 - actor/entropy:0.6 - critic/score/mean:0.1\n")
    assert classify(open_run(str(tmp_path))).outcome != "stuck_at_submission"


def test_crash_with_nan_is_an_error_exit_and_ignore_errors_falls_through_to_nonfinite(tmp_path):
    s = healthy_series()
    s["grad_norm"][20:] = math.nan
    s["loss"][20:] = math.nan
    run = write(tmp_path, slime_metrics_log(s), OOM)
    obs = classify(run)
    assert obs.outcome == "error_exit"
    assert obs.evidence["symptoms_seen"][:2] == ["error_exit", "nonfinite"]
    crash = obs.evidence["details"]["error_exit"]
    assert crash["error"] == "cuda_oom" and "CUDA out of memory" in crash["text"]
    assert crash["where"].endswith(f"job.log:{len(slime_metrics_log(s).lines) + 4}")
    assert "also seen: nonfinite" in obs.summary

    obs = classify(run, ignore_errors=True)
    assert obs.outcome == "nonfinite"
    assert obs.evidence["ignored"] == ["error_exit"]
    assert obs.evidence["details"]["nonfinite"]["onset_step"] == 20


def test_retried_http_errors_and_warnings_are_not_a_crash(tmp_path):
    log = slime_metrics_log(healthy_series())
    for k in range(1, 4):
        log.log(f"Error: HTTPConnectionPool(host='10.0.0.3', port=30000): Read timed out., retrying... "
                f"(attempt {k}/60, url=http://10.0.0.3:30000/generate)", "http_utils.py:77")
    log.log("UserWarning: the default value of use_reentrant will change", "warnings.py:109")
    obs = classify(write(tmp_path, log))
    assert obs.outcome == "no_symptom", obs.evidence["details"]


def test_an_error_the_job_survived_is_not_its_exit(tmp_path):
    log = SlimeLog().arguments(SLIME_ARGS)
    log.raw("Traceback (most recent call last):")
    log.raw('  File "/root/slime/reward.py", line 12, in score')
    log.raw("ValueError: could not parse answer")
    for _ in range(4):
        log.finish_rollout(PROMPT, "6 * 7 = 42. The answer is 42.")
    obs = classify(write(tmp_path, log))
    assert obs.outcome != "error_exit"
    assert "error_exit" not in obs.evidence["symptoms_seen"]


def test_stuck_at_submission(tmp_path):
    log = SlimeLog().arguments({**SLIME_ARGS, "actor_num_nodes": 2})
    for elapsed in (10, 610, 1210):
        log.log(f"Waiting for placement group of 16 GPUs (elapsed {elapsed}s): 8 GPUs registered with Ray, "
                "8 available.", "placement_group.py:61")
    obs = classify(write(tmp_path, log))
    assert obs.outcome == "stuck_at_submission"
    detail = obs.evidence["details"]["stuck_at_submission"]
    assert detail["gpus_needed"] == 16 and detail["gpus_available"] == 8 and detail["waited_s"] == 1210
    assert detail["wait_lines"] == 3


def test_hang_from_flight_recorder_dumps(tmp_path):
    write(tmp_path, slime_metrics_log(healthy_series(5)))
    fr = tmp_path / "fr_dumps"
    fr.mkdir()
    for rank in range(2):
        (fr / f"nccl_trace_rank_{rank}").write_bytes(b"\x80\x04}\x94.")
    obs = classify(open_run(str(tmp_path)))
    assert obs.outcome == "hang"
    assert obs.evidence["details"]["hang"]["flight_recorder"] == ["nccl_trace_rank_0", "nccl_trace_rank_1"]


def test_hang_from_open_timer_and_nccl_watchdog_is_not_a_crash(tmp_path):
    log = slime_metrics_log(healthy_series(5))
    log.log("Timer train start", "timer.py:24")
    log.raw("(MegatronTrainRayActor pid=2346) [rank1]:[E801 10:42:03.551 ProcessGroupNCCL.cpp:632] [Rank 1] "
            "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=4211, OpType=ALLREDUCE, NumelIn=1, "
            "Timeout(ms)=600000) ran for 600042 milliseconds before timing out.")
    log.raw("(MegatronTrainRayActor pid=2346) terminate called after throwing an instance of 'c10::DistBackendError'")
    obs = classify(write(tmp_path, log))
    assert obs.outcome == "hang", obs.evidence["details"]
    assert obs.evidence["details"]["hang"]["open_timers"] == {"train": 1}
    assert "error_exit" not in obs.evidence["symptoms_seen"]


def test_a_printed_configurations_timeout_settings_are_no_timeout(tmp_path):
    # LLM360/miles:logs/cp2_ep8.log: SGLang's ServerArgs dump (nccl_port, watchdog_timeout) and a timer a log cut short
    log = slime_metrics_log(healthy_series(5))
    log.raw("(SGLangEngine pid=77) [2026-04-04 07:20:11] server_args=ServerArgs(model_path='/root/Qwen3.5-35B-A3B', "
            "tokenizer_mode='auto', tp_size=4, dp_size=1, mem_fraction_static=0.7, nccl_port=15001, dist_timeout=None, "
            "watchdog_timeout=300, enable_metrics=False, random_seed=1234, log_level='info')")
    log.log("Timer train_wait start", "timer.py:24")
    obs = classify(write(tmp_path, log))
    assert obs.outcome != "hang", obs.summary
    assert "hang" not in obs.evidence["symptoms_seen"]


def test_watchdog_timeouts_without_hang_evidence_are_an_error_exit(tmp_path):
    log = slime_metrics_log(healthy_series(5))
    log.raw("(MegatronTrainRayActor pid=2346) RuntimeError: NCCL communicator was aborted on rank 1.")
    obs = classify(write(tmp_path, log))
    assert obs.outcome == "error_exit"
    assert obs.evidence["details"]["error_exit"]["error"] == "nccl_abort"


def test_hang_of_a_running_job_whose_log_went_quiet(tmp_path):
    path = slime_metrics_log(healthy_series(5)).write(tmp_path)
    (tmp_path / "triage.json").write_text(json.dumps({"status": "running"}))
    old = time.time() - 3 * 3600
    os.utime(path, (old, old))
    obs = classify(open_run(str(tmp_path)))
    assert obs.outcome == "hang"
    assert obs.evidence["details"]["hang"]["idle_s"] >= 3 * 3600 - 5


def test_garbled_first_rollout_from_the_log(tmp_path):
    log = slime_metrics_log(healthy_series(3))
    for text in GARBLED:
        log.finish_rollout(PROMPT, text)
    obs = classify(write(tmp_path, log))
    assert obs.outcome == "garbled_rollouts"
    detail = obs.evidence["details"]["garbled_rollouts"]
    assert detail["scores"][0] >= 0.5 and len(detail["scores"]) == 3
    n = len(slime_metrics_log(healthy_series(3)).lines)
    assert {e["where"].rsplit("/", 1)[-1] for e in detail["examples"]} == {f"job.log:{n + k}" for k in (1, 2, 3)}


def test_garbled_rollouts_from_the_first_dump_win_over_a_step1_anomaly(tmp_path):
    s = healthy_series(5)
    s["ref_log_probs"][0] = -0.34
    slime_metrics_log(s).write(tmp_path)
    d = tmp_path / "dump" / "rollout_data"
    d.mkdir(parents=True)
    samples = [{"index": i, "prompt": PROMPT, "response": GARBLED[i % 3], "response_length": 12, "reward": 0.0,
                "status": "completed", "tokens": list(range(20)), "loss_mask": [1] * 12,
                "rollout_log_probs": [-5.0] * 12} for i in range(6)]
    torch.save({"rollout_id": 0, "samples": samples}, d / "0.pt")
    obs = classify(open_run(str(tmp_path)))
    assert obs.outcome == "garbled_rollouts"
    assert obs.evidence["symptoms_seen"][:2] == ["garbled_rollouts", "step1_anomaly"]
    assert obs.evidence["details"]["garbled_rollouts"]["garbled_fraction"] == 1.0


def test_step1_anomaly_kl_and_large_log_probs(tmp_path):
    s = healthy_series()
    s["ref_log_probs"][0] = -0.35 + 1e-4
    obs = classify(write(tmp_path / "kl", slime_metrics_log(s)))
    assert obs.outcome == "step1_anomaly"
    assert obs.evidence["details"]["step1_anomaly"]["probe_outcome"] == "kl_nonzero"
    assert obs.evidence["details"]["step1_anomaly"]["log_prob_difference"] == pytest.approx(1e-4)

    # the symptom uses step1_invariants' own pair of bars (the guides' 0.8; 2.0)
    s = healthy_series()
    s["log_probs"][0] = s["ref_log_probs"][0] = -0.75  # below the guides' 0.8
    assert classify(write(tmp_path / "mild", slime_metrics_log(s))).outcome == "no_symptom"
    s["log_probs"][0] = s["ref_log_probs"][0] = -0.85
    obs = classify(write(tmp_path / "elevated", slime_metrics_log(s)))
    assert obs.outcome == "step1_anomaly"
    assert obs.evidence["details"]["step1_anomaly"]["probe_outcome"] == "logprob_elevated"
    s["log_probs"][0] = s["ref_log_probs"][0] = -2.5
    obs = classify(write(tmp_path / "extreme", slime_metrics_log(s)))
    assert obs.evidence["details"]["step1_anomaly"]["probe_outcome"] == "logprob_extreme"


def test_nonfinite_before_grad_explosion(tmp_path):
    s = healthy_series()
    s["grad_norm"][12] = math.nan
    s["grad_norm"][20] = 300.0
    obs = classify(write(tmp_path, slime_metrics_log(s)))
    assert obs.outcome == "nonfinite"
    assert obs.evidence["symptoms_seen"] == ["nonfinite", "grad_explosion"]
    assert obs.evidence["details"]["nonfinite"]["probe_outcome"] == "isolated"
    assert obs.evidence["details"]["grad_explosion"]["onset_step"] == 20


def test_grad_explosion_from_grad_norm_and_from_loss_spikes(tmp_path):
    s = healthy_hf_series()
    s["grad_norm"][15:] = 40.0
    obs = classify(hf_run(tmp_path / "g", s))
    assert obs.outcome == "grad_explosion"
    assert obs.evidence["details"]["grad_explosion"]["probe_outcome"] == "sustained_growth"

    s = {k: v for k, v in healthy_hf_series().items() if k in ("loss", "grad_norm", "lr")}  # an SFT run's records
    s["loss"] = 1.2 - 0.01 * np.arange(30) + 0.02 * np.random.default_rng(2).standard_normal(30)
    s["loss"][18] = 5.5  # an SFT-style loss jumping ~5x
    obs = classify(hf_run(tmp_path / "l", s))
    assert obs.outcome == "grad_explosion"
    detail = obs.evidence["details"]["grad_explosion"]
    assert detail["probe_outcome"] == "loss_spikes" and detail["loss_spikes"][0]["step"] == 19

    # an RL run's loss (a policy-gradient objective plus beta x KL) has no level to jump over
    s = healthy_hf_series()
    s["loss"] = 0.04 * np.concatenate([np.geomspace(1e-4, 0.16, 10), np.full(20, 0.04)])
    obs = classify(hf_run(tmp_path / "rl", s))
    assert obs.outcome != "grad_explosion", obs.summary


def test_truncation(tmp_path):
    s = healthy_hf_series()
    s["truncated_ratio"] = np.full(30, 0.92)
    obs = classify(hf_run(tmp_path, s))
    assert obs.outcome == "truncation"
    assert obs.evidence["details"]["truncation"]["ratio"] == 0.92


def test_reward_flat(tmp_path):
    s = healthy_hf_series(25)
    s["raw_reward"] = np.zeros(25)
    s["reward_std"] = np.zeros(25)
    s["frac_zero_std"] = np.ones(25)
    obs = classify(hf_run(tmp_path, s))
    assert obs.outcome == "reward_flat"
    assert obs.evidence["details"]["reward_flat"]["probe_outcome"] == "constant_zero"


def test_policy_drift(tmp_path):
    s = healthy_hf_series()
    s["entropy"] = np.geomspace(0.4, 0.002, 30)
    obs = classify(hf_run(tmp_path, s))
    assert obs.outcome == "policy_drift"
    assert obs.evidence["details"]["policy_drift"]["probe_outcome"] == "entropy_collapse"


def test_unavailable_only_when_nothing_to_classify(tmp_path):
    (tmp_path / "cmdline.txt").write_text("python3 train.py --actor-num-nodes 1\n")
    with pytest.raises(Unavailable) as exc:
        Symptom().examine(open_run(str(tmp_path)))
    assert exc.value.artifact == "log"


SHORT_FP32_ARGS = {**SLIME_ARGS, "rollout_batch_size": 4, "n_samples_per_prompt": 8, "bf16": False, "fp16": False}


def test_reward_flat_on_three_all_zero_rollouts(tmp_path):
    # 3 rollouts x 32 samples, every one scored 0: decisive without 5 records
    s = healthy_series(3)
    s["raw_reward"] = np.zeros(3)
    s["zero_std_0"] = np.full(3, 4.0)
    slime_metrics_log(s, SHORT_FP32_ARGS).write(tmp_path)
    obs = classify(open_run(str(tmp_path)))
    assert obs.outcome == "reward_flat"
    assert obs.evidence["details"]["reward_flat"]["probe_outcome"] == "constant_zero"
    assert "96 samples" in obs.summary


def test_policy_drift_from_a_bf16_engine_under_an_fp32_trainer(tmp_path):
    # a bf16 engine's per-token difference sits around bf16 rounding (~1e-2); an fp32 one's at ~1e-7
    s = noisy_series(6, seed=21, logp_gap=0.01)
    slime_metrics_log(s, SHORT_FP32_ARGS, extra=noisy_extra(s)).write(tmp_path / "bad")
    obs = classify(open_run(str(tmp_path / "bad")))
    assert obs.outcome == "policy_drift"
    assert obs.evidence["details"]["policy_drift"]["probe_outcome"] == "logprob_mismatch"

    s = noisy_series(6, seed=21, logp_gap=2e-7)
    slime_metrics_log(s, SHORT_FP32_ARGS, extra=noisy_extra(s)).write(tmp_path / "ok")
    assert classify(open_run(str(tmp_path / "ok"))).outcome == "no_symptom"


def test_a_log_holding_only_a_package_list_has_nothing_to_classify(tmp_path):
    # a pasted `pip freeze` is about the environment, not a record of the job
    (tmp_path / "job.log").write_text("trl==0.15.2\nvllm==0.8.1\n", encoding="utf-8")
    with pytest.raises(Unavailable) as exc:
        classify(open_run(str(tmp_path)))
    assert "no log record of the job" in exc.value.reason


def test_a_printed_stack_the_job_went_on_from_is_not_an_exit(tmp_path):
    # frames with no exception line (a warning's stack), then many more steps: the job did not stop there
    log = slime_metrics_log(healthy_series())
    job = Path(log.write(tmp_path / "s"))
    lines = job.read_text(encoding="utf-8").splitlines()
    stack = ['  File "/usr/lib/python3.11/threading.py", line 995, in _bootstrap', "    self._bootstrap_inner()"]
    job.write_text("\n".join(lines[:5] + stack + lines[5:]) + "\n", encoding="utf-8")
    obs = classify(open_run(str(tmp_path / "s")))
    assert obs.outcome == "no_symptom", obs.evidence["details"]


def test_a_few_quiet_metric_records_are_not_called_healthy_ranges(tmp_path):
    from metric_runs import healthy_hf_series, hf_run
    from probes.symptom import Symptom

    obs = Symptom().examine(hf_run(tmp_path / "two", healthy_hf_series(2)))
    assert obs.outcome == "no_symptom"
    assert "its 2 metric records show no metric symptom (too few to call the metrics healthy)" in obs.summary
    assert "healthy ranges" not in obs.summary
    obs = Symptom().examine(hf_run(tmp_path / "thirty", healthy_hf_series(30)))
    assert obs.outcome == "no_symptom" and "healthy ranges" in obs.summary


def test_a_grad_norm_of_zero_on_every_record_is_no_update_and_the_reward_says_why(tmp_path, capsys):
    from metric_runs import healthy_hf_series, hf_run
    from probes.symptom import Symptom
    from triage.cli import main

    # every group scored alike: zero advantages, so zero gradients (the guide's zero-advantage skip, on every step)
    s = healthy_hf_series(30)
    s["grad_norm"] = np.zeros(30)
    s["loss"] = np.zeros(30)
    s["reward_std"] = np.zeros(30)
    s["frac_zero_std"] = np.ones(30)
    run = hf_run(tmp_path / "flat", s)
    obs = Symptom().examine(run)
    assert obs.outcome == "no_update", obs.summary
    assert "grad_norm is exactly 0 on all 30 records" in obs.summary
    main(["run", str(tmp_path / "flat"), "--json", "--no-cache"])
    assert json.loads(capsys.readouterr().out)["root_cause"]["id"] == "reward.no_signal"
    # rewards that differ within groups, and still no gradient: nothing in the metrics decides
    s = healthy_hf_series(30)
    s["grad_norm"] = np.zeros(30)
    hf_run(tmp_path / "varied", s)
    main(["run", str(tmp_path / "varied"), "--json", "--no-cache"])
    report = json.loads(capsys.readouterr().out)
    assert report["root_cause"]["id"] == "inconclusive"
    assert report["path"][0]["outcome"] == "no_update"
    # an occasional 0.0 is the zero-advantage skip, not this
    s = healthy_hf_series(30)
    s["grad_norm"] = s["grad_norm"].copy()
    s["grad_norm"][::5] = 0.0
    assert Symptom().examine(hf_run(tmp_path / "some", s)).outcome != "no_update"


def test_every_completion_cut_at_the_limit_comes_before_the_zero_gradient_it_causes(tmp_path, capsys):
    # huggingface/trl#5697: clipped_ratio 1.0, grad_norm 0 and reward 0 on every step; a cut completion never
    # reaches its answer, so the flat reward is the truncation's doing, not a task too hard (reward.no_signal)
    from metric_runs import healthy_hf_series, hf_run
    from probes.symptom import Symptom
    from triage.cli import main

    s = healthy_hf_series(30)
    s["grad_norm"] = np.zeros(30)
    s["loss"] = np.zeros(30)
    s["raw_reward"] = np.zeros(30)
    s["reward_std"] = np.zeros(30)
    s["frac_zero_std"] = np.ones(30)
    s["truncated_ratio"] = np.ones(30)
    obs = Symptom().examine(hf_run(tmp_path / "cut", s))
    assert obs.outcome == "truncation", obs.summary
    assert "no update" in obs.summary and "100%" in obs.summary
    code = main(["run", str(tmp_path / "cut"), "--json", "--no-cache"])
    report = json.loads(capsys.readouterr().out)
    assert code == 3 and report["root_cause"]["id"] == "inconclusive"
    # both causes of a run cut at its limit lead, the truncation finding behind each
    top = report["candidates"][:2]
    assert {c["id"] for c in top} == {"rollout.missing_stop_token", "rollout.max_len_too_small"}
    assert all("cut at the length limit" in c["supports"][0] for c in top)
    assert not any(c["supports"] for c in report["candidates"][2:])


def test_a_paste_cut_right_under_a_traceback_header_is_an_error_exit(tmp_path):
    # OpenRLHF/OpenRLHF#762 as pasted: the header, then a frame line cut mid-path
    (tmp_path / "job.log").write_text(
        "Train epoch [1/1]:  11%|█ | 28/256 [01:16<05:31,  1.45s/it, pg=0.164, rm=0.0908, kl=0]\n"
        "Traceback (most recent call last):\n"
        '  File "/home/user/miniconda3/envs/openrlhf/lib\n', encoding="utf-8")
    obs = classify(open_run(str(tmp_path)))
    assert obs.outcome == "error_exit"
    assert obs.evidence["details"]["error_exit"]["error"] == "cut_traceback"
    assert "cut before its exception" in obs.summary


def test_a_supervised_loss_of_zero_on_every_record_after_the_first_is_no_update(tmp_path):
    # AolinGuo/graduate_agent:trainer_log.jsonl (LLaMA-Factory): 122.14 at the first record, then `"loss": 0.0` to the end
    lines = [{"current_steps": 10 * (i + 1), "total_steps": 370, "loss": 122.1416 if i == 0 else 0.0,
              "lr": 5e-05, "epoch": 0.1 * (i + 1)} for i in range(37)]
    (tmp_path / "trainer_log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    obs = classify(open_run(str(tmp_path)))
    assert obs.outcome == "no_update", obs.summary
    assert "The loss is exactly 0 on all 36 records from step 20 on" in obs.summary
    assert "healthy ranges" not in obs.summary


def test_a_lone_error_line_the_log_goes_on_from_quietly_is_not_the_stop(tmp_path):
    # linskybing/LLM:logs/nv/zero_3.out: the job script's conda message at line 2, then 519 lines of DeepSpeed training
    steps = "".join(f"[2025-10-28 20:50:{i % 60:02d},616] [INFO] [logging.py:107:log_dist] [Rank 0] step={i}, skipped=0, "
                    f"lr=[1e-05], mom=[[0.8, 0.999]]\n[Step {i}/600] Loss: 5.05 | Global Tokens/s: 1376.92\n"
                    for i in range(1, 260))
    log = "Lmod is automatically replacing modules\nCondaError: Run 'conda init' before 'conda deactivate'\n" + steps
    (tmp_path / "zero_3.log").write_text(log)
    obs = classify(open_run(str(tmp_path)))
    assert obs.outcome != "error_exit", obs.summary
    # the same line with an error after it is still read
    (tmp_path / "zero_3.log").write_text(log + "RuntimeError: CUDA error: an illegal memory access was encountered\n")
    obs = classify(open_run(str(tmp_path)))
    assert obs.outcome == "error_exit", obs.summary


def test_lone_errors_followed_only_by_lone_errors_the_log_goes_on_quietly_from_are_not_the_stop(tmp_path):
    # tsrrodrigues/Wizard_QLoRA_Finetuning:finetune.log: a script's logged `ERROR - Erro ao carregar …` lines of attempts
    # over four days, then 1,878 lines of a run that ended `Treinamento concluído com sucesso`
    head = ("2025-01-04 17:18:04,389 - INFO - Iniciando processo de fine-tuning...\n"
            "2025-01-04 17:18:06,410 - ERROR - Erro ao carregar o tokenizer: Can't load tokenizer for 'meta-llama/x'.\n"
            "2025-01-07 19:37:55,194 - ERROR - Erro ao carregar o modelo: You are trying to access a gated repo.\n"
            "2025-01-07 20:38:50,388 - ERROR - Erro ao carregar o modelo: Calling `to()` is not supported for `4-bit`\n")
    body = "".join(f"2025-01-08 16:{i // 60 % 60:02d}:{i % 60:02d},000 - INFO - Iniciando processamento de exemplo...\n"
                   for i in range(450))
    tail = "2025-01-08 16:30:31,730 - INFO - Treinamento concluído com sucesso\n"
    (tmp_path / "finetune.log").write_text(head + body + tail)
    obs = classify(open_run(str(tmp_path)))
    assert obs.outcome != "error_exit", obs.summary
    # a traceback's error after the lone lines keeps them: the job is read up to that traceback
    framed = ('Traceback (most recent call last):\n  File "train.py", line 3, in <module>\n    main()\n'
              "ValueError: bad value\n")
    (tmp_path / "finetune.log").write_text(head + framed + body + tail)
    obs = classify(open_run(str(tmp_path)))
    assert obs.outcome == "error_exit", obs.summary
    # and a log that ends on an error keeps every error before it
    (tmp_path / "finetune.log").write_text(head + body + tail + "2025-01-08 16:31:00,000 - ERROR - Erro: CUDA out of memory\n")
    obs = classify(open_run(str(tmp_path)))
    assert obs.outcome == "error_exit", obs.summary


def test_the_trainers_printed_dicts_are_quoted_by_record_not_by_step(tmp_path):
    # raja17021998/LLM-AIL-821-Project's W&B output.log: the Trainer prints a dict every 10 steps and no step in it;
    # "the largest 2.75e+06 at step 169" was the 169th record, trainer step ~1690
    rows = [f"{{'loss': {2.0 - 0.01 * i:.4f}, 'grad_norm': {400.0 if i == 30 else 0.5 + 0.001 * i}, "
            f"'learning_rate': 2e-05, 'epoch': {i / 10:.2f}}}\n" for i in range(1, 41)]
    (tmp_path / "train.log").write_text("".join(rows))
    obs = classify(open_run(str(tmp_path)))
    assert obs.outcome == "grad_explosion", obs.summary
    assert "at record 30" in obs.summary and "step 30" not in obs.summary
    # records that carry their step keep "step"
    (tmp_path / "train.log").unlink()
    lines = [f"step:{10 * i} - actor/grad_norm:{400.0 if i == 30 else 0.5 + 0.001 * i} - critic/score/mean:0.5\n"
             for i in range(1, 41)]
    (tmp_path / "job.log").write_text("".join(lines))
    obs = classify(open_run(str(tmp_path)))
    assert "at step 300" in obs.summary, obs.summary


def test_the_metrics_question_after_a_crash_does_not_deny_the_crash(tmp_path, capsys):
    # THUDM/slime#656 as pasted: a crash the catalog does not name, then "what do the metrics show?"; its answer
    # had read "no fatal error" right under the located crash
    import json

    from triage.cli import main

    (tmp_path / "job.log").write_text(  # the paste cut before the exception's line: where it is, not what
        "ray.exceptions.RayTaskError(RuntimeError): ray::FSDPTrainRayActor.init() (pid=182194, ip=172.17.0.3)\n"
        '  File "/root/slime/slime/backends/fsdp_utils/actor.py", line 88, in init\n'
        "    self.load_ref_model(args.ref_load)\n"
        '  File "/root/slime/slime/backends/fsdp_utils/actor.py", line 140, in load_ref_model\n'
        "    model.load_state_dict(state)\n", encoding="utf-8")
    main(["run", str(tmp_path), "--json"])
    report = json.loads(capsys.readouterr().out)
    after = [s for s in report["path"] if s["probe"] == "symptom"][-1]
    assert after["outcome"] == "no_symptom"
    assert after["summary"].startswith("Apart from the crash set aside, no symptom")
    assert "no fatal error" not in after["summary"]


# huggingface/trl#3857 as pasted: one record, every group scoring alike, loss and grad norm 0
TRL_NO_SPREAD = ("{'loss': 0.0, 'grad_norm': 0.0, 'learning_rate': 1.7050844078611056e-06, 'num_tokens': 1751675.0, "
                 "'completions/mean_length': 701.8125, 'completions/clipped_ratio': 0.0, 'rewards/if_rewrite_reward/mean': "
                 "2.5, 'rewards/if_rewrite_reward/std': 5.08, 'reward': 2.5, 'reward_std': 0.0, 'frac_reward_zero_std': 1.0, "
                 "'kl': 0.0, 'entropy': 0.61, 'clip_ratio/region_mean': 0.0, 'epoch': 0.12}\n")


def _report(tmp_path, text, capsys):
    import json

    from triage.cli import main

    (tmp_path / "job.log").write_text(text, encoding="utf-8")
    rc = main(["run", str(tmp_path), "--json"])
    return rc, json.loads(capsys.readouterr().out)


def test_too_few_records_leave_the_trend_causes_open_and_a_record_without_spread_points_at_the_reward(
        tmp_path, capsys):
    rc, report = _report(tmp_path, TRL_NO_SPREAD, capsys)
    assert rc == 3 and report["root_cause"]["id"] == "inconclusive"
    first = report["path"][0]
    assert first["outcome"] == "no_symptom"
    assert set(first["evidence"]["unseen_outcomes"]) == {"grad_explosion", "no_update", "policy_drift", "reward_flat"}
    assert "reward.no_signal" not in {r["verdict"] for r in report["ruled_out"]}
    top = report["candidates"][0]
    assert top["id"] == "reward.no_signal"
    assert "100% or more of the prompt groups had no reward spread" in top["supports"][0]


def test_verls_advantages_of_zero_on_every_record_point_at_the_reward(tmp_path, capsys):
    # rllm-org/rllm#54: every score 0, the advantages' range 0 (verl/trainer/ppo/metric_utils.py)
    line = ("(TaskRunner pid=9) step:1 - critic/score/mean:0.000 - critic/score/max:0.000 - critic/score/min:0.000 - "
            "critic/advantages/mean:0.000 - critic/advantages/max:0.000 - critic/advantages/min:0.000 - "
            "actor/pg_loss:0.000 - actor/grad_norm:0.000 - response_length/mean:512.0\n")
    _rc, report = _report(tmp_path, line, capsys)
    assert report["candidates"][0]["id"] == "reward.no_signal"
    assert "advantages are 0" in report["candidates"][0]["supports"][0]


def test_a_few_records_with_a_spread_point_nowhere(tmp_path, capsys):
    text = (TRL_NO_SPREAD.replace("'reward_std': 0.0, 'frac_reward_zero_std': 1.0", "'reward_std': 0.4, 'frac_reward_zero_std': 0.25")
            .replace("'loss': 0.0, 'grad_norm': 0.0", "'loss': 0.01, 'grad_norm': 0.21"))
    _rc, report = _report(tmp_path, text, capsys)
    assert report["candidates"][0]["id"] != "reward.no_signal"
    assert not any("no reward spread" in s for c in report["candidates"] for s in c["supports"])


def test_a_record_cut_at_the_limit_points_at_the_cut_not_at_the_groups_it_made_alike(tmp_path):
    from probes.symptom import _few_records_hints
    from triage.run import open_run

    text = TRL_NO_SPREAD.replace("'completions/clipped_ratio': 0.0", "'completions/clipped_ratio': 0.95")
    (tmp_path / "job.log").write_text(text, encoding="utf-8")
    hints = _few_records_hints(open_run(str(tmp_path)))
    assert [h["verdict"] for h in hints] == ["rollout.max_len_too_small", "rollout.missing_stop_token"]
    assert "95% or more of the responses were cut" in hints[0]["because"]


def _grpo_records(rows: list[dict]) -> str:
    return "".join(repr(r) + "\n" for r in rows)


def test_few_records_under_a_truncation_wall_leave_the_entropys_cause_open(tmp_path, capsys):
    # JuncyLu/trl_DAPO's run_terminal.md: three records, every response cut, the entropy falling to 0.0085
    rows = [{"loss": 0.01, "grad_norm": 0.5, "learning_rate": 1e-6, "reward": 0.2, "reward_std": 0.1,
             "completions/mean_length": 1024.0, "completions/clipped_ratio": clip, "entropy": ent, "epoch": e}
            for clip, ent, e in ((0.96, 1.03, 0.01), (0.97, 0.11, 0.02), (0.995, 0.0085, 0.03))]
    _rc, report = _report(tmp_path, _grpo_records(rows), capsys)
    first = report["path"][0]
    assert first["outcome"] == "truncation"
    assert "policy_drift" in first["evidence"]["unjudged_outcomes"]
    assert "policy.entropy_collapse" not in {r["verdict"] for r in report["ruled_out"]}


def test_an_entropy_falling_below_the_collapse_bar_in_few_records_points_at_the_collapse(tmp_path):
    from probes.symptom import _few_records_hints
    from triage.run import open_run

    rows = [{"loss": 0.01, "grad_norm": 0.5, "learning_rate": 1e-6, "reward": 0.2, "reward_std": 0.1,
             "frac_reward_zero_std": 0.2, "entropy": ent, "epoch": e} for ent, e in ((1.03, 0.01), (0.11, 0.02), (0.0085, 0.03))]
    (tmp_path / "job.log").write_text(_grpo_records(rows), encoding="utf-8")
    hints = _few_records_hints(open_run(str(tmp_path)))
    assert [h["verdict"] for h in hints] == ["policy.entropy_collapse"]
    assert "fell from 1.03 to 0.0085 within the 3 records logged, below the guide's collapse bar 0.01" in hints[0]["because"]
    # low from the first record on is not a fall seen: no hint
    (tmp_path / "job.log").write_text(_grpo_records([dict(r, entropy=0.005) for r in rows]), encoding="utf-8")
    assert _few_records_hints(open_run(str(tmp_path))) == []


def test_a_latest_record_with_no_spread_and_no_gradient_points_at_the_reward(tmp_path, capsys):
    # bingreeky/MemGen#33: the second record scores 0 in every group and updates nothing
    rows = [{"loss": -0.2874, "grad_norm": 6.23, "learning_rate": 1.9e-06, "reward": 0.375, "reward_std": 0.52,
             "frac_reward_zero_std": 0.0, "epoch": 0.01},
            {"loss": 0.0, "grad_norm": 0.0, "learning_rate": 1.96e-06, "reward": 0.0, "reward_std": 0.0,
             "frac_reward_zero_std": 1.0, "epoch": 0.02}]
    _rc, report = _report(tmp_path, _grpo_records(rows), capsys)
    assert [c["id"] for c in report["candidates"]][:2] == ["reward.no_signal", "reward.broken_fn"]
    assert "on the latest record logged 100% of the prompt groups had no reward spread" in \
        report["candidates"][0]["supports"][0]


def test_a_reward_functions_caught_failure_on_samples_points_at_the_reward_function(tmp_path, capsys):
    # verl-project/verl#3150: verl's prime reward manager prints the caught error and scores the sample as nothing
    text = ("(TaskRunner pid=4411) [Error] Task failed: Can't pickle <function reward_fn at 0x7ed7c556c4c0>: it's not "
            "the same object as custom_module.reward_fn, completion: <think>\n")
    rc, report = _report(tmp_path, text, capsys)
    assert rc == 3 and report["path"][0]["outcome"] == "no_symptom"
    top = report["candidates"][0]
    assert top["id"] == "reward.broken_fn" and "the reward function failed on a sample" in top["supports"][0]


def test_an_rl_gradient_of_zero_on_every_record_points_at_the_no_update_causes(tmp_path, capsys):
    rows = [{"loss": 0.0, "grad_norm": 0.0, "learning_rate": 1e-6, "reward": 0.5, "reward_std": 0.3,
             "frac_reward_zero_std": 0.4, "completions/mean_length": n, "epoch": e}
            for n, e in ((15.05, 0.01), (2.0, 0.02), (2.0, 0.03))]
    _rc, report = _report(tmp_path, _grpo_records(rows), capsys)
    ids = [c["id"] for c in report["candidates"]]
    assert ids[:3] == ["reward.no_signal", "algo.degenerate_groups", "reward.broken_fn"]
    assert "grad_norm is exactly 0 on every one of the 3 records" in report["candidates"][0]["supports"][0]
