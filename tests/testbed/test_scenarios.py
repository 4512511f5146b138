"""Each scenario shows its fault's symptom in its own artifacts; each healthy one passes slime's step-1 checks.

Assertions read what the job left (log lines, dumps, checkpoints, the engine's weights,
flight-recorder dumps), never the scenario's name. The default set runs a few
single-process scenarios; the rest are `slow`.
"""

from __future__ import annotations

import json
import math
import pickle
import re
from pathlib import Path

import pytest
import torch

try:
    from tests.testbed._artifacts import engine_weights, hf_weights, lines_with, metric_lines, rollout_dump
except ImportError:  # the tests directory itself is on sys.path (pytest's prepend import mode)
    from _artifacts import engine_weights, hf_weights, lines_with, metric_lines, rollout_dump
from triage.testbed import checkpoint as ckpt
from triage.testbed import task
from triage.testbed.scenarios import LOG_NAME, SCENARIOS, generate, scenario_meta

FAST = {"healthy.qwen2", "ckpt.not_loaded", "weights.name_mapping", "rollout.missing_stop_token",
        "memory.max_tokens_per_gpu", "sched.insufficient_gpus"}


def _param(name: str):
    return pytest.param(name, marks=() if name in FAST else pytest.mark.slow, id=name)


_runs: dict[str, Path] = {}


def run_of(name: str) -> Path:
    if name not in _runs:
        _runs[name] = generate(name)
    return _runs[name]


def log_of(run: Path) -> Path:
    return run / LOG_NAME


def last_checkpoint(run: Path) -> dict[str, torch.Tensor]:
    root = run / "ckpt"
    iteration = ckpt.read_tracker(root)
    path = ckpt.iteration_dir(root, iteration)
    if ckpt.checkpoint_format(path) == "torch_dist":
        return ckpt.read_torch_dist(path)
    payload = ckpt.load_legacy_rank(path, 0, 0, 1)
    return payload["model"]


# -- healthy controls --------------------------------------------------------------------

HEALTHY = [n for n, s in SCENARIOS.items() if s.fault is None and s.trainer == "megatron"]


@pytest.mark.parametrize("name", [_param(n) for n in HEALTHY])
def test_healthy_run_passes_slime_step1_checks(name):
    run = run_of(name)
    assert scenario_meta(run)["exit_code"] == 0
    rollouts = metric_lines(log_of(run), "rollout")
    steps = metric_lines(log_of(run), "step")
    r0, s0 = rollouts[0], steps[0]
    assert abs(r0["rollout/log_probs"] - r0["rollout/ref_log_probs"]) < 1e-8
    assert s0["train/ppo_kl"] < 1e-8 and s0["train/kl_loss"] < 1e-8
    assert -1 < r0["rollout/log_probs"] < 0 and 0 < r0["rollout/entropy"] < 1
    assert all(s["train/train_rollout_logprob_abs_diff"] < 1e-4 for s in steps.values())
    assert all(math.isfinite(s["train/grad_norm"]) for s in steps.values())
    assert max(metric_lines(log_of(run), "perf")[i]["rollout/truncated_ratio"] for i in rollouts) < 0.2
    assert ckpt.read_tracker(run / "ckpt") == len(rollouts) - 1
    samples = rollout_dump(run, 0)["samples"]
    for s in samples:
        assert len(s["loss_mask"]) == len(s["rollout_log_probs"]) == s["response_length"] > 0
        assert s["status"] in ("completed", "truncated") and isinstance(s["reward"], float)


def test_log_starts_with_the_job_and_megatron_arguments():
    log = log_of(run_of("healthy.qwen2")).read_text().splitlines()
    start = next(i for i, line in enumerate(log) if line.endswith("------------------------ arguments ------------------------"))
    end = next(i for i, line in enumerate(log) if line.endswith("-------------------- end of arguments ---------------------"))
    block = [line.split(") ", 1)[1] for line in log[start + 1: end]]
    assert block == sorted(block, key=str.lower)
    row = next(line for line in block if line.startswith("  rollout_batch_size "))
    assert re.fullmatch(r"  rollout_batch_size \.+ 4", row) and row.index(" 4") == 51  # value at column 2 + 48 + 2
    assert not any(line.startswith("  testbed_") for line in block)  # the testbed's own flags are not the job's
    step = next(line for line in log if " - step 0: {" in line)
    assert re.match(r"^\(MegatronTrainRayActor pid=\d+\) \[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] "
                    r"model\.py:918 - step 0: \{'train/loss'", step)
    assert lines_with(log_of(run_of("healthy.qwen2")), "Timer actor_train end (elapsed: ")
    finish = lines_with(log_of(run_of("healthy.qwen2")), "Finish rollout: ['<|im_start|>user")
    assert finish and "label: " in finish[0] and "reward: " in finish[0]
    cmd = (run_of("healthy.qwen2") / "cmdline.txt").read_text()
    assert cmd.startswith("python3 -m triage.testbed.train --actor-num-nodes 1") and "--testbed" not in cmd


@pytest.mark.slow
def test_hf_trainer_variant_writes_trainer_state():
    run = run_of("healthy.hf_trainer")
    state = json.loads((run / "output" / "trainer_state.json").read_text())
    steps = [e for e in state["log_history"] if "loss" in e]
    assert len(steps) == state["global_step"] == 3
    for key in ("loss", "grad_norm", "learning_rate", "reward", "reward_std", "frac_reward_zero_std", "kl", "entropy",
                "completions/mean_length", "completions/clipped_ratio", "clip_ratio/region_mean"):
        assert key in steps[0], key
    assert (run / "output" / "checkpoint-2" / "trainer_state.json").is_file()
    assert (run / "cmdline.txt").read_text().startswith("trl grpo ")


# -- faults ------------------------------------------------------------------------------

def _expect_ckpt_not_loaded(run: Path) -> None:
    log = log_of(run)
    assert lines_with(log, "WARNING: could not find the metadata file ref/latest_checkpointed_iteration.txt")
    assert lines_with(log, "will not load any checkpoints and will start from random")
    assert not (run / "ref" / "latest_checkpointed_iteration.txt").exists()
    assert metric_lines(log, "rollout")[0]["rollout/log_probs"] < -3  # garbled from the first rollout
    engine, hf = engine_weights(run), hf_weights(run)
    assert not torch.allclose(engine["model.embed_tokens.weight"], hf["model.embed_tokens.weight"], atol=1e-3)


def _expect_name_mapping(run: Path) -> None:
    engine, trained = engine_weights(run), last_checkpoint(run)
    gate, up = trained["decoder.layers.0.mlp.linear_fc1.weight"].chunk(2)
    assert torch.equal(engine["model.layers.0.mlp.gate_proj.weight"], up)
    assert torch.equal(engine["model.layers.0.mlp.up_proj.weight"], gate)
    assert metric_lines(log_of(run), "step")[0]["train/train_rollout_logprob_abs_diff"] > 0.1


def _expect_pp_layer_offset(run: Path) -> None:
    engine, trained, hf = engine_weights(run), last_checkpoint(run), hf_weights(run)
    half = 1  # num_layers / pp_size
    assert torch.equal(engine["model.layers.0.mlp.down_proj.weight"], trained[f"decoder.layers.{half}.mlp.linear_fc2.weight"])
    assert torch.equal(engine["model.layers.1.mlp.down_proj.weight"], hf["model.layers.1.mlp.down_proj.weight"])
    assert metric_lines(log_of(run), "perf")[0]["rollout/truncated_ratio"] > 0.5


def _expect_missing(run: Path) -> None:
    engine, trained, hf = engine_weights(run), last_checkpoint(run), hf_weights(run)
    for i in range(2):
        assert torch.equal(engine[f"model.layers.{i}.mlp.down_proj.weight"], hf[f"model.layers.{i}.mlp.down_proj.weight"])
        down = engine[f"model.layers.{i}.mlp.down_proj.weight"]
        assert not torch.equal(down, trained[f"decoder.layers.{i}.mlp.linear_fc2.weight"])
    gate, _ = trained["decoder.layers.0.mlp.linear_fc1.weight"].chunk(2)
    assert torch.equal(engine["model.layers.0.mlp.gate_proj.weight"], gate)


def _expect_buffers_released(run: Path) -> None:
    engine = engine_weights(run)
    assert torch.count_nonzero(engine["model.rotary_emb.inv_freq"]) == 0
    trained = last_checkpoint(run)
    gate, _ = trained["decoder.layers.0.mlp.linear_fc1.weight"].chunk(2)
    assert torch.equal(engine["model.layers.0.mlp.gate_proj.weight"], gate)  # parameters are right
    perf = metric_lines(log_of(run), "perf")
    assert perf[0]["rollout/truncated_ratio"] == 0 and perf[1]["rollout/truncated_ratio"] > 0.3
    steps = metric_lines(log_of(run), "step")
    assert steps[0]["train/train_rollout_logprob_abs_diff"] < 1e-4 < 1 < steps[1]["train/train_rollout_logprob_abs_diff"]


def _expect_base_not_instruct(run: Path) -> None:
    gen = json.loads((run / "hf" / "generation_config.json").read_text())
    assert gen["eos_token_id"] == 0  # <|endoftext|>: a base model's
    samples = rollout_dump(run, 0)["samples"]
    assert not any(s["response"].endswith("<|im_end|>") for s in samples)
    assert sum(s["reward"] for s in samples) == 0


def _expect_template_mismatch(run: Path) -> None:
    samples = rollout_dump(run, 0)["samples"]
    assert all(s["prompt"].startswith("### Instruction:") and "<|im_start|>" not in s["prompt"] for s in samples)
    healthy = metric_lines(log_of(run_of("healthy.qwen2")), "rollout")[0]["rollout/log_probs"]
    mismatched = metric_lines(log_of(run), "rollout")[0]["rollout/log_probs"]
    assert -2 < mismatched < healthy - 0.1  # worse than the template it was trained on, but not garbage


def _expect_nondeterministic(run: Path) -> None:
    r0 = metric_lines(log_of(run), "rollout")[0]
    assert r0["rollout/log_probs"] != r0["rollout/ref_log_probs"] or metric_lines(log_of(run), "step")[0]["train/ppo_kl"] != 0
    train = torch.load(run / "dump" / "train_data" / "0.pt", weights_only=True)
    diffs = [float((s["log_probs"] - s["ref_log_probs"]).abs().max()) for s in train["samples"]]
    assert max(diffs) > 1e-6  # the same weights, different numbers
    assert abs(metric_lines(log_of(run), "step")[0]["train/ppo_kl"]) > 1e-8


def _expect_lr_too_high(run: Path) -> None:
    steps = metric_lines(log_of(run), "step")
    norms = [steps[i]["train/grad_norm"] for i in sorted(steps)]
    assert max(norms[2:]) > 2.5 * norms[0]  # spikes once the warmup reaches the full rate
    rollouts = metric_lines(log_of(run), "rollout")
    assert rollouts[max(rollouts)]["rollout/raw_reward"] < rollouts[0]["rollout/raw_reward"] / 2


def _expect_bad_sample(run: Path) -> None:
    steps = metric_lines(log_of(run), "step")
    bad = [i for i, s in steps.items() if math.isnan(s["train/loss"])]
    assert len(bad) == 1 and len(steps) >= 6
    samples = rollout_dump(run, 1)["samples"]
    empty = [s for s in samples if s["response_length"] == 0]
    assert empty and len({s["group_index"] for s in empty}) == 1  # one malformed prompt, its whole group
    assert all(s["status"] == "truncated" and len(s["tokens"]) > 64 for s in empty)


def _expect_overflow(run: Path) -> None:
    assert scenario_meta(run)["exit_code"] == 1
    assert lines_with(log_of(run), "found NaN in local")
    assert "--fp16" in (run / "cmdline.txt").read_text().split()
    hf = hf_weights(run)
    assert hf["model.layers.1.mlp.up_proj.weight"].abs().max() > 65504 / 64  # a channel fp16 cannot carry


def _expect_missing_stop_token(run: Path) -> None:
    perf = metric_lines(log_of(run), "perf")
    assert all(perf[i]["rollout/truncated_ratio"] > 0.8 for i in perf if "rollout/truncated_ratio" in perf[i])
    assert "--rollout-stop-token-ids" not in (run / "cmdline.txt").read_text()
    assert json.loads((run / "hf" / "generation_config.json").read_text())["eos_token_id"] == 0
    samples = rollout_dump(run, 0)["samples"]
    assert all(s["response_length"] == 8 for s in samples if s["status"] == "truncated")


def _expect_broken_fn(run: Path) -> None:
    samples = [s for r in range(3) for s in rollout_dump(run, r)["samples"]]
    assert all(s["reward"] == 0.0 for s in samples)
    right = [s for s in samples if task.extract_answer(s["response"]) == s["label"]]
    assert right  # correct answers scored 0


def _expect_no_signal(run: Path) -> None:
    perf = metric_lines(log_of(run), "perf")
    for i in range(3):
        assert perf[i]["rollout/zero_std/count_0.0"] == 4  # every group, all samples equal
    samples = rollout_dump(run, 0)["samples"]
    assert all(task.extract_answer(s["response"]) != s["label"] for s in samples)


def _expect_entropy_collapse(run: Path) -> None:
    rollouts = metric_lines(log_of(run), "rollout")
    assert all(r["rollout/entropy"] < 0.01 for r in rollouts.values())


def _expect_oom(run: Path) -> None:
    assert scenario_meta(run)["exit_code"] == 1
    line = lines_with(log_of(run), "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate ")
    assert line and "GPU 0 has a total capacity of 80.00 GiB" in line[0]
    assert not metric_lines(log_of(run), "step")


def _expect_insufficient_gpus(run: Path) -> None:
    assert scenario_meta(run)["exit_code"] == 124
    waits = lines_with(log_of(run), "Waiting for placement group of 16 GPUs (elapsed ")
    assert len(waits) >= 3 and waits[0].endswith("8 GPUs registered with Ray, 8 available.")
    assert not lines_with(log_of(run), "arguments ----")


def _expect_sharding_bug(run: Path) -> None:
    r0, s0 = metric_lines(log_of(run), "rollout")[0], metric_lines(log_of(run), "step")[0]
    assert r0["rollout/log_probs"] == r0["rollout/ref_log_probs"] and s0["train/ppo_kl"] == 0
    assert s0["train/train_rollout_logprob_abs_diff"] > 0.1


def _expect_collective_mismatch(run: Path) -> None:
    assert scenario_meta(run)["exit_code"] == 1
    assert lines_with(log_of(run), "Timed out waiting")
    dumps = sorted((run / "flight_recorder").glob("nccl_trace_rank_*"))
    assert [p.name for p in dumps] == ["nccl_trace_rank_0", "nccl_trace_rank_1"]
    last = []
    for p in dumps:
        dump = pickle.loads(p.read_bytes())
        assert {"version", "pg_config", "entries"} <= set(dump)
        entry = dump["entries"][-1]
        assert {"record_id", "pg_id", "collective_seq_id", "profiling_name", "state"} <= set(entry)
        last.append((entry["process_group"], entry["profiling_name"], entry["collective_seq_id"]))
    assert last[0] != last[1]  # the ranks stopped at different collectives


def _expect_train_inference(run: Path) -> None:
    assert json.loads((run / "hf" / "config.json").read_text())["dtype"] == "bfloat16"
    r0 = metric_lines(log_of(run), "rollout")[0]
    assert r0["rollout/log_probs"] == r0["rollout/ref_log_probs"]
    assert all(s["train/train_rollout_logprob_abs_diff"] > 1e-3 for s in metric_lines(log_of(run), "step").values())


SYMPTOMS = {
    "ckpt.not_loaded": _expect_ckpt_not_loaded,
    "weights.name_mapping": _expect_name_mapping,
    "weights.pp_layer_offset": _expect_pp_layer_offset,
    "weights.missing": _expect_missing,
    "engine.buffers_released": _expect_buffers_released,
    "model.base_not_instruct": _expect_base_not_instruct,
    "data.chat_template_mismatch": _expect_template_mismatch,
    "kernel.nondeterministic": _expect_nondeterministic,
    "optim.lr_too_high": _expect_lr_too_high,
    "data.bad_sample": _expect_bad_sample,
    "numerics.overflow": _expect_overflow,
    "rollout.missing_stop_token": _expect_missing_stop_token,
    "reward.broken_fn": _expect_broken_fn,
    "reward.no_signal": _expect_no_signal,
    "policy.entropy_collapse": _expect_entropy_collapse,
    "memory.max_tokens_per_gpu": _expect_oom,
    "sched.insufficient_gpus": _expect_insufficient_gpus,
    "parallel.sharding_bug": _expect_sharding_bug,
    "dist.collective_mismatch": _expect_collective_mismatch,
    "mismatch.train_inference": _expect_train_inference,
}


def test_every_fault_has_a_scenario_and_a_symptom_check():
    faults = {s.fault for s in SCENARIOS.values() if s.fault}
    assert faults == set(SYMPTOMS)
    assert sum(1 for s in SCENARIOS.values() if s.fault is None) >= 3


@pytest.mark.parametrize("name", [_param(n) for n in SYMPTOMS])
def test_fault_shows_its_symptom(name):
    SYMPTOMS[name](run_of(name))


@pytest.mark.parametrize("name", [_param(n) for n in ("healthy.tp2", "healthy.pp2")])
def test_parallel_run_matches_the_single_process_run(name):
    single = metric_lines(log_of(run_of("healthy.qwen2")), "step")
    parallel = metric_lines(log_of(run_of(name)), "step")
    assert len(parallel) == 2
    for i in parallel:
        assert parallel[i]["train/grad_norm"] == pytest.approx(single[i]["train/grad_norm"], rel=1e-4)
