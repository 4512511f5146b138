"""memory_budget: the Q&A's token budget, single-sample length, and the axolotl logits arithmetic."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from probes.memory_budget import MemoryBudget
from triage.errors import Unavailable
from triage.run import open_run


def make_run(tmp_path: Path, flags: str = "", log: str | None = None, manifest: str | None = None):
    if flags or manifest is None:
        (tmp_path / "cmdline.txt").write_text(f"python3 train.py --hf-checkpoint /root/Qwen3-4B {flags}\n", encoding="utf-8")
    if log is not None:
        (tmp_path / "job.log").write_text(log, encoding="utf-8")
    if manifest is not None:
        (tmp_path / "triage.yaml").write_text(manifest, encoding="utf-8")
    return open_run(str(tmp_path))


def examine(run, **params):
    return MemoryBudget(MemoryBudget.parse_params(params, "test")).examine(run)


def perf_log(response_max: int, total_mean: float | None = None) -> str:
    lines = [
        "[2026-08-01 10:00:00] train.py:12 - Start",
        f"(RolloutManager pid=2290) [2026-08-01 10:05:00] rollout.py:420 - perf 0: {{'rollout/response_len/mean': "
        f"{response_max / 2}, 'rollout/response_len/max': {response_max}, 'perf/rollout_time': 310.2}}",
    ]
    if total_mean is not None:
        lines.append(
            f"(MegatronTrainRayActor pid=2345) [2026-08-01 10:05:10] data.py:317 - rollout 0: {{'rollout/total_lengths': "
            f"{total_mean}, 'rollout/response_lengths': {total_mean - 900}, 'rollout/rewards': 0.4}}"
        )
    return "\n".join(lines) + "\n"


DYNAMIC = "--use-dynamic-batch-size --rollout-max-response-len 8192 --context-parallel-size 2"


def test_max_tokens_too_high(tmp_path):
    obs = examine(make_run(tmp_path, f"{DYNAMIC} --max-tokens-per-gpu 16384"))
    assert obs.outcome == "max_tokens_too_high"
    assert obs.evidence["arithmetic"] == "16384 > 8192/2 = 4096"
    assert "start at 4096" in obs.summary


def test_single_sample_longer_than_the_budget_from_logged_lengths(tmp_path):
    run = make_run(tmp_path, f"{DYNAMIC} --max-tokens-per-gpu 4096 --rollout-max-prompt-len 2048", log=perf_log(8192))
    obs = examine(run)
    assert obs.outcome == "sequence_too_long"
    assert obs.evidence["longest_sample_tokens"] == 8192 + 2048
    assert obs.evidence["arithmetic"] == "10240 > 4096*2 = 8192"
    assert "rollout/response_len/max" in obs.evidence["longest_sample_from"]
    assert "--context-parallel-size" in obs.summary


def test_single_sample_longer_than_the_budget_from_rollout_dumps(tmp_path):
    torch = pytest.importorskip("torch")
    (tmp_path / "dump" / "rollout_data").mkdir(parents=True)
    samples = [{"index": 0, "tokens": list(range(9000)), "response_length": 8000, "status": "truncated"},
               {"index": 1, "tokens": list(range(3000)), "response_length": 2000, "status": "completed"}]
    torch.save({"rollout_id": 0, "samples": samples}, tmp_path / "dump" / "rollout_data" / "0.pt")
    obs = examine(make_run(tmp_path, f"{DYNAMIC} --max-tokens-per-gpu 4096 --dump-details dump"))
    assert obs.outcome == "sequence_too_long"
    assert obs.evidence["longest_sample_tokens"] == 9000
    assert obs.evidence["longest_sample_from"].startswith("rollout dumps (1 read)")
    assert obs.evidence["arithmetic"] == "9000 > 4096*2 = 8192"


def test_multi_turn_totals_far_beyond_the_limits(tmp_path):
    run = make_run(
        tmp_path,
        "--rollout-max-prompt-len 1024 --rollout-max-response-len 4096 --micro-batch-size 1",
        log=perf_log(4096, total_mean=40000.0),
    )
    obs = examine(run)
    assert obs.outcome == "sequence_too_long"
    assert obs.evidence["longest_sample_tokens"] == 40000
    assert obs.evidence["arithmetic"] == "40000 > 1.5 * (1024 + 4096)"
    assert "multi-turn" in obs.summary


def test_logits_tensor_of_the_axolotl_example(tmp_path):
    manifest = "args:\n  micro_batch_size: 8\n  num_generations: 16\n  sequence_len: 2048\n  vocab_size: 151936\n"
    obs = examine(make_run(tmp_path, manifest=manifest))
    assert obs.outcome == "logits_too_large"
    ev = obs.evidence
    assert ev["logits_gb"] == pytest.approx(8 * 16 * 2048 * 151936 * 2 / 2**30, rel=1e-3)
    assert 74 < ev["logits_gb"] < 75  # the guide's "~75 GB"
    assert ev["arithmetic"] == "8 * 16 * 2048 * 151936 * 2 bytes = 74.2 GB"
    assert ev["gpu_memory_gb"] == 80.0
    assert ev["gpu_memory_from"] == "assumed"
    assert "its size assumed" in obs.summary


def test_the_gpu_size_the_log_prints_replaces_the_assumption(tmp_path):
    # 5 * 16 * 2048 * 151936 * 2 bytes = 46.4 GB: over half of an assumed 80 GB GPU, under half of the H200 the log names
    manifest = "args:\n  micro_batch_size: 5\n  num_generations: 16\n  sequence_len: 2048\n  vocab_size: 151936\n"
    log = ("(MegatronTrainRayActor pid=2345) [2026-08-01 10:00:00] memory_utils.py:41 - [Rank 0] Memory-Usage after "
           "offload model: {'gpu': '0', 'total_GB': 139.8, 'free_GB': 88.47, 'used_GB': 51.34}\n")
    (tmp_path / "job.log").write_text(log, encoding="utf-8")
    obs = examine(make_run(tmp_path, manifest=manifest))
    assert obs.outcome == "within_budget"
    assert obs.evidence["gpu_memory_gb"] == 139.8
    assert obs.evidence["gpu_memory_from"] == "as the log prints the device's total memory"
    (tmp_path / "job.log").unlink()
    assert examine(open_run(str(tmp_path))).outcome == "logits_too_large"


def test_logits_fit_with_a_small_micro_batch(tmp_path):
    manifest = "args:\n  micro_batch_size: 2\n  num_generations: 16\n  sequence_len: 2048\n  vocab_size: 151936\n"
    obs = examine(make_run(tmp_path, manifest=manifest))
    assert obs.outcome == "within_budget"
    assert obs.evidence["logits_gb"] == pytest.approx(18.55, abs=0.01)
    assert "logits" in obs.evidence["checked"]


def test_gpu_memory_parameter_changes_the_answer(tmp_path):
    manifest = "args:\n  micro_batch_size: 2\n  num_generations: 16\n  sequence_len: 2048\n  vocab_size: 151936\n"
    obs = examine(make_run(tmp_path, manifest=manifest), gpu_memory_gb=24)
    assert obs.outcome == "logits_too_large"
    assert obs.evidence["gpu_memory_gb"] == 24


def test_within_budget_with_vocab_from_the_hf_config(tmp_path):
    hf = tmp_path / "Qwen3-4B"
    hf.mkdir()
    (hf / "config.json").write_text(json.dumps({"model_type": "qwen3", "vocab_size": 151936}), encoding="utf-8")
    (hf / "model.safetensors").write_bytes(b"")
    run = make_run(tmp_path, f"{DYNAMIC} --max-tokens-per-gpu 4096 --rollout-max-prompt-len 1024", log=perf_log(3000))
    obs = examine(run)
    assert obs.outcome == "within_budget"
    ev = obs.evidence
    assert ev["longest_sample_tokens"] == 4024 and ev["micro_batch_token_cap"] == 8192
    assert ev["vocab_from"] == "HF config.json"
    assert ev["arithmetic"] == "4096 tokens * 151936 * 2 bytes = 1.2 GB"
    assert ev["checked"] == ["max_tokens_per_gpu", "sample_length", "logits"]


def test_nothing_to_compute_is_unavailable(tmp_path):
    with pytest.raises(Unavailable) as exc:
        examine(make_run(tmp_path, "--lr 1e-6 --num-rollout 100"))
    assert exc.value.artifact == "args"


# the failed allocation, when the arguments were not kept ---------------------------------

# A traceback pasted from its error line up (THUDM/slime#1951's shape): the frames sit below.
OOM_BOTTOM_UP = """torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {req} GiB. GPU 0 has a total capacity of 139.81 GiB of which 47.69 GiB is free. Of the allocated memory 82.55 GiB is allocated by PyTorch.
                               ^^^^^^^^^^^^^^
    log_prob = compute_log_probs(logits.clone(), tokens, tp_group)
   File "/root/slime/slime/utils/ppo_utils.py", line 672, in calculate_log_probs_and_entropy
"""


def logs_only_run(tmp_path: Path, log: str):
    (tmp_path / "job.log").write_text(log, encoding="utf-8")
    return open_run(str(tmp_path))


def test_failed_logits_sized_allocation_in_the_logprob_pass(tmp_path):
    obs = examine(logs_only_run(tmp_path, OOM_BOTTOM_UP.format(req="58.15")))
    assert obs.outcome == "logits_too_large"
    assert obs.evidence["requested_gb"] == 58.15
    assert obs.evidence["capacity_gb"] == 139.81
    assert obs.evidence["share_of_gpu"] == round(58.15 / 139.81, 3)
    assert "58.15 GiB" in obs.summary


def test_small_failed_allocation_decides_nothing(tmp_path):
    with pytest.raises(Unavailable) as info:
        examine(logs_only_run(tmp_path, OOM_BOTTOM_UP.format(req="2.00")))
    assert "too small to be the logits" in str(info.value)


def test_failed_allocation_outside_the_logprob_pass_decides_nothing(tmp_path):
    log = OOM_BOTTOM_UP.format(req="58.15").replace("compute_log_probs", "run_layer").replace(
        "calculate_log_probs_and_entropy", "forward"
    )
    with pytest.raises(Unavailable):
        examine(logs_only_run(tmp_path, log))


# skypilot-org/skypilot#10269 as pasted (a slime example): the failed request on the OOM line, the GPU's capacity
# on the next, the log-prob frame under them
SKYPILOT_LOGPROB_OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.84 GiB.\n"
    "GPU 0 has a total capacity of 79.19 GiB of which 3.79 GiB is free.\n"
    "  ...\n"
    '  File "slime/utils/ppo_utils.py", line 219, in vocab_parallel_softmax\n'
    "    normalized_logits = logits.sub_(logits_max) if inplace else logits - logits_max\n")


def test_an_oom_message_pasted_over_two_lines_still_names_the_gpus_size(tmp_path):
    # skypilot-org/skypilot#10269 as pasted: the failed request on the OOM line, the GPU's capacity on the next
    (tmp_path / "job.log").write_text(SKYPILOT_LOGPROB_OOM, encoding="utf-8")
    with pytest.raises(Unavailable, match=r"the failed allocation \(3.84 of 79.19 GiB\) is too small"):
        MemoryBudget().examine(open_run(str(tmp_path)))


def test_an_oom_in_the_log_prob_pass_without_arguments_ranks_the_logits_first(tmp_path, capsys):
    # skypilot-org/skypilot#10269 (a slime example): a 3.84 GiB request in slime's vocab_parallel_softmax, no
    # arguments kept; the OOM's phase is half the catalog's evidence for the logits, and it is named
    from triage.cli import main

    (tmp_path / "job.log").write_text(SKYPILOT_LOGPROB_OOM, encoding="utf-8")
    rc = main(["run", str(tmp_path), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert rc == 3 and report["root_cause"]["id"] == "inconclusive"
    first = report["candidates"][0]
    assert first["id"] == "memory.logits_tensor"
    assert any("log-prob pass" in s for s in first["supports"])
