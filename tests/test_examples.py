"""Every shipped example run gets its verdict, for the reason a human would give.

Each `examples/<name>/expected.json` names the verdict; the test runs the CLI in-process
(`triage run <dir> --json`), checks the exit code and `root_cause.id`, and then checks one
deciding piece of evidence in the walked path (the GPU arithmetic, the OOM line, the
layer offset, ...), read from the report the user would see. `expected.json` is never
read by the triage itself: it is JSON, not a log, so discovery skips it.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from triage.cli import main

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
EXPECTED = sorted(EXAMPLES.glob("*/expected.json"))
KB = 1024
MAX_EXAMPLE_BYTES = 200 * KB
# Examples that must carry checkpoint tensors (tiny, but real layouts) may be larger.
TENSOR_EXAMPLES = {"ckpt-not-loaded", "base-model-garbled", "pp-offset-garbled", "garbled-no-engine-dump",
                   "garbled-sglang-known-bug", "garbled-sglang-weight-update"}
MAX_TENSOR_EXAMPLE_BYTES = 512 * KB


# --- reading the report ----------------------------------------------------------------------


def step(report: dict[str, Any], probe: str, outcome: str | None = None) -> dict[str, Any]:
    """The first step of the walked path where `probe` ran (with `outcome`, when given)."""
    for s in report["path"]:
        if s["probe"] == probe and (outcome is None or s["outcome"] == outcome):
            return s
    walked = [(s["probe"], s["outcome"]) for s in report["path"]]
    raise AssertionError(f"no {probe} step{' with outcome ' + outcome if outcome else ''} in the path: {walked}")


def line_number(path: Path, needle: str) -> int:
    """1-based number of the first line of `path` containing `needle`."""
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if needle in line:
                return n
    raise AssertionError(f"{needle!r} not in {path}")


# --- the deciding evidence, per example ------------------------------------------------------


def healthy_slime(r: dict[str, Any], d: Path) -> None:
    s = step(r, "step1_invariants", "hold")["evidence"]
    assert s["log_prob_difference"] == 0.0
    assert -1.0 < s["log_probs"]["value"] < 0.0
    assert all(k["value"] == 0.0 for k in s["kl"])


def healthy_trl(r: dict[str, Any], d: Path) -> None:
    s = step(r, "symptom", "no_symptom")
    assert s["evidence"]["inputs"]["metrics"] is True
    assert s["evidence"]["symptoms_seen"] == []


def ckpt_not_loaded(r: dict[str, Any], d: Path) -> None:
    e = step(r, "checkpoint_integrity", "tracker_missing")["evidence"]
    ref = next(c for c in e["checked"] if c.get("arg") == "--ref-load")
    assert ref["exists"] is True and ref["tracker"] is None
    assert ref["iterations_present"] == ["iter_0000000"]
    assert any("will start from random" in line for line in e["log_lines"])


def oom_max_tokens(r: dict[str, Any], d: Path) -> None:
    where = step(r, "oom_context", "training_step")["evidence"]["line"]["where"]
    assert where.endswith(f"job.log:{line_number(d / 'job.log', 'OutOfMemoryError')}")
    e = step(r, "memory_budget", "max_tokens_too_high")["evidence"]
    assert (e["max_tokens_per_gpu"], e["rollout_max_response_len"], e["context_parallel_size"]) == (32768, 8192, 1)
    assert e["safe_max_tokens_per_gpu"] == 8192


def stuck_at_submission(r: dict[str, Any], d: Path) -> None:
    e = step(r, "config_rule", "violated")["evidence"]
    assert e["gpus_needed"] == 2 * 8 + 8 == 24
    assert e["cluster_gpus"] == 16
    assert e["colocate"] is False


def port_conflict(r: dict[str, Any], d: Path) -> None:
    e = step(r, "error_signatures", "engine_port_conflict")["evidence"]
    assert "15500" in e["line"]["text"]
    assert e["line"]["source"].startswith("SGLangEngine")


def inductor_cache(r: dict[str, Any], d: Path) -> None:
    e = step(r, "error_signatures", "inductor_cache")["evidence"]
    assert "JSONDecodeError" in e["line"]["text"]


def host_ram(r: dict[str, Any], d: Path) -> None:
    e = step(r, "error_signatures", "host_oom_killed")["evidence"]
    # memory named by the kernel, not the bare SIGKILL (which is only seen beside it)
    assert e["signature"] == "kernel_oom_killer" and "oom-killer" in e["line"]["text"]
    assert e["line"]["where"].endswith("dmesg.txt:1")
    assert any(s["outcome"] == "killed" for s in e["also_seen"])


def network(r: dict[str, Any], d: Path) -> None:
    e = step(r, "error_signatures", "network_failure")["evidence"]
    assert "socketStartConnect: Connect to 10.0.0.11<43211> failed" in e["line"]["text"]
    assert e["line"]["where"].endswith(f"job.log:{line_number(d / 'job.log', 'socketStartConnect')}")
    assert e["node"] == "10.0.0.12" and "nccl" in e["pattern_source"].lower()
    assert any(s["outcome"] == "nccl_abort" for s in e["also_seen"])  # the cascade, seen and set aside


def gpu_fault(r: dict[str, Any], d: Path) -> None:
    e = step(r, "error_signatures", "gpu_fault")["evidence"]
    assert "uncorrectable ECC error" in e["line"]["text"]
    assert e["nodes"] == ["10.0.0.12"]


def disk_full(r: dict[str, Any], d: Path) -> None:
    e = step(r, "error_signatures", "disk_full")["evidence"]
    assert "No space left on device" in e["line"]["text"]
    assert e["path"].startswith("/mnt/ckpt/qwen2.5-7b-grpo/iter_0000005/")


def time_limit(r: dict[str, Any], d: Path) -> None:
    e = step(r, "error_signatures", "sched_ended")["evidence"]
    assert "DUE TO TIME LIMIT" in e["line"]["text"]
    assert e["nodes"] == ["gpu-node-07"]


def version_mismatch(r: dict[str, Any], d: Path) -> None:
    e = step(r, "error_signatures", "version_mismatch")["evidence"]
    assert "unexpected keyword argument 'enable_sleep_mode'" in e["line"]["text"]
    assert "vllm" in e["packages"]
    assert any("vllm/entrypoints/llm.py" in f for f in e["frames"])  # the remote frames Ray printed after its envelope


def sample_budget(r: dict[str, Any], d: Path) -> None:
    e = step(r, "error_signatures", "sample_too_long")["evidence"]
    assert "This should never happen" in e["line"]["text"]
    assert any("_get_capped_partitions" in f for f in e["frames"])


def release_leak(r: dict[str, Any], d: Path) -> None:
    e = step(r, "oom_context", "release_leak")["evidence"]["memory_trend"]
    assert e["phase"] == "after offload model (rank 0)"
    assert e["used_gb"] == [14.21, 17.68, 21.13, 24.62, 28.05, 31.52]
    assert e["cycles"] == 6 and math.isclose(e["growth_gb"], 17.31)


def crash_unrecognized(r: dict[str, Any], d: Path) -> None:
    e = step(r, "crash_location", "located")["evidence"]
    assert e["exception_type"] == "IndexError" and e["component"] == "trainer"
    assert e["count"] == 64 and e["ranks_hit"] == 64 and e["distinct_errors"] == 1
    assert e["frame"].endswith("in _generate_and_score_completions") and "trl/trainer/grpo_trainer.py" in e["frame"]
    assert e["step"] == 37 and e["rank"] == 0
    assert e["where"].endswith(f"train.log:{line_number(d / 'train.log', '[rank0]: IndexError')}")


def missing_stop(r: dict[str, Any], d: Path) -> None:
    symptom = step(r, "symptom", "truncation")["evidence"]["details"]["truncation"]
    assert symptom["ratio"] > 0.95
    e = step(r, "config_rule", "violated")["evidence"]
    assert e["generation_config"] is True
    assert e["generation_eos_token_id"] is None and e["config_eos_token_id"] is None


def batch_mismatch(r: dict[str, Any], d: Path) -> None:
    e = step(r, "config_rule", "violated")["evidence"]
    assert e["expected_global_batch_size"] == 32 * 8 // 2 == 128
    assert e["global_batch_size"] == 256


def no_pad_token(r: dict[str, Any], d: Path) -> None:
    e = step(r, "error_signatures", "no_pad_token")["evidence"]
    assert "Asking to pad but the tokenizer does not have a padding token" in e["line"]["text"]


def reward_zero(r: dict[str, Any], d: Path) -> None:
    e = step(r, "reward_signal", "constant_zero")["evidence"]
    assert e["reward"]["max"] == 0.0 and e["reward"]["records"] == 50
    assert e["reward_std"]["max"] == 0.0


def entropy_collapse(r: dict[str, Any], d: Path) -> None:
    e = step(r, "policy_drift", "entropy_collapse")["evidence"]["entropy"]
    assert e["recent_median"] < 0.01 < e["first_median"]


def cp_nondeterministic(r: dict[str, Any], d: Path) -> None:
    gap = step(r, "step1_invariants", "kl_nonzero")["evidence"]["log_prob_difference"]
    assert 1e-5 < gap < 1e-3  # small: kernels, not a broken model
    e = step(r, "config_rule", "violated")["evidence"]
    assert e["context_parallel_size"] == 2 and e["attention_backend"] != "flash"


def moe_permute(r: dict[str, Any], d: Path) -> None:
    kl = step(r, "step1_invariants", "kl_nonzero")["evidence"]["kl"]
    assert any(k["metric"] == "step:train/ppo_kl" and k["value"] > 1e-4 for k in kl)
    e = step(r, "config_rule", "violated")["evidence"]
    assert e["num_experts"] == 128 and e["moe_permute_fusion"] is False


def chat_template(r: dict[str, Any], d: Path) -> None:
    e = step(r, "step1_invariants", "logprob_elevated")["evidence"]
    assert -0.95 < e["log_probs"]["value"] < -0.75
    assert e["log_prob_difference"] == 0.0


def lr_too_high(r: dict[str, Any], d: Path) -> None:
    e = step(r, "lr_schedule", "too_high")["evidence"]
    assert math.isclose(e["lr"]["peak"], 1e-4)
    assert e["lr"]["warmup"] is True
    assert e["instability"]["good_records_before"] >= 10  # healthy through the warmup


def bad_sample(r: dict[str, Any], d: Path) -> None:
    nan_steps = [int(m.group(1)) for m in re.finditer(r"step (\d+): \{[^\n]*'train/grad_norm': nan", (d / "job.log").read_text())]
    assert len(nan_steps) == 1
    e = step(r, "nonfinite_onset", "isolated")["evidence"]
    assert e["isolated_steps"] == nan_steps


def collective_mismatch(r: dict[str, Any], d: Path) -> None:
    e = step(r, "flight_recorder", "collective_mismatch")["evidence"]
    assert e["ranks_behind"] == [1]
    assert e["collective"] == "nccl:all_reduce"
    assert e["last_started"]["1"] == e["sequence_id"] - 1


def base_model(r: dict[str, Any], d: Path) -> None:
    e = step(r, "base_model", "base")["evidence"]
    assert "Qwen3-4B-Base" in e["names"]
    assert e["run_uses_chat_template"] is True
    assert step(r, "checkpoint_integrity")["outcome"] == "intact"


def pp_offset(r: dict[str, Any], d: Path) -> None:
    e = step(r, "weights_compare", "shifted_layers")["evidence"]
    assert e["offset"] == 2
    assert (e["engine_layers"], e["checkpoint_layers"]) == ([0, 1], [2, 3])
    assert e["stale_layers"] == [2, 3]


def stuck_on_cpus(r: dict[str, Any], d: Path) -> None:
    assert step(r, "config_rule", "satisfied")["evidence"]["gpus_needed"] == 8  # the GPUs fit
    e = step(r, "config_rule", "violated")["evidence"]
    assert e["shortfall"] == [{"resource": "CPU", "requested": 8.0, "cluster": 4.0}]
    assert e["cluster"]["CPU"]["from"].endswith(f"job.log:{line_number(d / 'job.log', ' 0.0/4.0 CPU')}")


def engine_version_regression(r: dict[str, Any], d: Path) -> None:
    assert step(r, "weights_compare", "match")
    m = step(r, "known_bugs", "match")["evidence"]["matches"][0]
    assert (m["package"], m["installed"], m["affected"], m["fixed"]) == ("sglang", "0.5.9", ">=0.5.9,<0.5.10", "0.5.10")
    assert m["url"] == "https://github.com/THUDM/slime/issues/1853"
    assert m["read_at"].endswith(f"job.log:{line_number(d / 'job.log', 'sglang==0.5.9')}")


def engine_weight_update(r: dict[str, Any], d: Path) -> None:
    w = step(r, "weights_compare", "value_mismatch")["evidence"]
    assert w["counts"]["misnamed"] == w["counts"]["shifted"] == w["counts"]["stale"] == 0  # every name right
    assert w["counts"]["mismatched"] == 12 and all(".mlp." in t["name"] for t in w["worst"])  # the update's tensors
    m = step(r, "known_bugs", "match")["evidence"]["matches"][0]
    assert (m["package"], m["installed"], m["affected"]) == ("sglang", "0.5.5.post3", ">=0.5.3,<=0.5.5.post3")
    assert m["url"] == "https://github.com/sgl-project/sglang/issues/14178"


def inconclusive(r: dict[str, Any], d: Path) -> None:
    assert step(r, "checkpoint_integrity")["outcome"] == "intact"
    missing = [n for n in r["not_checked"] if n["artifact"] == "engine_weights"]
    assert missing, r["not_checked"]
    command = missing[0]["command"] or ""
    assert "load_weights" in command and "--engine" in command  # how to produce the missing dump
    # the findings point at the weights: a ranked differential, each with the step that decides it
    assert r["candidates"] and r["candidates"][0]["id"].startswith("weights.")
    assert all(c["next_step"] for c in r["candidates"])


def single_generation(r: dict[str, Any], d: Path) -> None:
    e = step(r, "reward_signal", "degenerate_groups")["evidence"]
    assert e["group_size"] == {"arg": "num_generations", "value": 1}
    assert e["reward_std"]["nonfinite"] == e["reward_std"]["records"] == 30
    assert e["grad_norm"]["nonfinite_at_first_step"] is True
    assert step(r, "nonfinite_onset", "persistent")["evidence"]["onset_step"] == 1


def false_truncation(r: dict[str, Any], d: Path) -> None:
    e = step(r, "truncation", "false_truncation")["evidence"]
    assert e["limit"] == {"arg": "max_completion_length", "value": 2048}
    assert e["ratio"] > 0.95 and e["records"] == 40
    assert e["max_response_length"]["max"] < 1000 and e["longest_over_limit"] < 0.5


def growing_drift(r: dict[str, Any], d: Path) -> None:
    g = step(r, "policy_drift", "growing_drift")["evidence"]["growing_gap"]
    assert g["metric"] == "step:train/train_rollout_logprob_abs_diff" and g["records"] == 30
    assert g["growth"] >= 2.0 and g["recent_median"] < 0.1  # each value under the guide's bar
    assert g["trend"]["kendall_tau"] > 0.5 and g["trend"]["p_value"] < 0.01


CHECKS: dict[str, Callable[[dict[str, Any], Path], None]] = {
    "healthy-slime": healthy_slime,
    "healthy-trl-grpo": healthy_trl,
    "ckpt-not-loaded": ckpt_not_loaded,
    "oom-max-tokens-per-gpu": oom_max_tokens,
    "stuck-at-submission": stuck_at_submission,
    "sglang-port-conflict": port_conflict,
    "inductor-cache-jsondecode": inductor_cache,
    "host-ram-oom-killed": host_ram,
    "missing-stop-token": missing_stop,
    "batch-size-mismatch": batch_mismatch,
    "trl-no-pad-token": no_pad_token,
    "trl-reward-always-zero": reward_zero,
    "trl-entropy-collapse": entropy_collapse,
    "cp-nondeterministic-logprobs": cp_nondeterministic,
    "moe-permute-fusion": moe_permute,
    "chat-template-mismatch": chat_template,
    "lr-too-high": lr_too_high,
    "bad-sample-nan": bad_sample,
    "nccl-collective-mismatch": collective_mismatch,
    "base-model-garbled": base_model,
    "pp-offset-garbled": pp_offset,
    "garbled-no-engine-dump": inconclusive,
    "stuck-on-cpus": stuck_on_cpus,
    "garbled-sglang-known-bug": engine_version_regression,
    "garbled-sglang-weight-update": engine_weight_update,
    "nccl-network-connect-failed": network,
    "gpu-ecc-fault": gpu_fault,
    "disk-full-checkpoint": disk_full,
    "slurm-time-limit": time_limit,
    "verl-vllm-version-mismatch": version_mismatch,
    "sample-exceeds-token-budget": sample_budget,
    "memory-release-leak": release_leak,
    "crash-unrecognized-64-ranks": crash_unrecognized,
    "trl-single-generation-nan": single_generation,
    "trl-false-truncation": false_truncation,
    "slime-growing-drift": growing_drift,
}


def _expected(path: Path) -> dict[str, str]:
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("expected_path", EXPECTED, ids=[p.parent.name for p in EXPECTED])
def test_example_gets_its_verdict(expected_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = expected_path.parent
    want = _expected(expected_path)
    assert d.name in CHECKS, f"examples/{d.name} has no deciding-evidence check in {Path(__file__).name}"

    code = main(["run", str(d), "--json"])
    out = capsys.readouterr().out
    report = json.loads(out)
    assert report["root_cause"]["id"] == want["verdict"], (
        f"{d.name}: got {report['root_cause']['id']} via "
        f"{[(s['node'], s['outcome']) for s in report['path']]}"
    )
    assert code == (3 if want["verdict"] == "inconclusive" else 0)
    CHECKS[d.name](report, d)


def test_expected_files_are_not_artifacts() -> None:
    from triage.run import open_run

    for path in EXPECTED:
        run = open_run(str(path.parent))
        found = [str(p) for kind in ("logs", "trainer_states", "rollout_dumps", "train_dumps", "flight_recorder")
                 for p in getattr(run.artifacts, kind)]
        assert not any(p.endswith("expected.json") for p in found), found


def test_examples_are_small() -> None:
    sizes = {d.name: sum(p.stat().st_size for p in d.rglob("*") if p.is_file()) for d in (p.parent for p in EXPECTED)}
    too_big = {n: s for n, s in sizes.items()
               if s >= (MAX_TENSOR_EXAMPLE_BYTES if n in TENSOR_EXAMPLES else MAX_EXAMPLE_BYTES)}
    assert not too_big, {n: f"{s / KB:.0f} KB" for n, s in too_big.items()}
    assert TENSOR_EXAMPLES <= set(sizes), "a listed exception is no longer an example"


def test_examples_cover_the_catalog_broadly() -> None:
    verdicts = [_expected(p)["verdict"] for p in EXPECTED]
    assert len(set(verdicts) - {"healthy", "inconclusive"}) >= 12
    assert "healthy" in verdicts
    assert "inconclusive" in verdicts
    assert len(EXPECTED) >= 20
    catalog_ids = {v["id"] for v in _catalog()}
    assert set(verdicts) <= catalog_ids, set(verdicts) - catalog_ids


def _catalog() -> list[dict[str, Any]]:
    import yaml

    raw = yaml.safe_load((ROOT / "playbooks" / "verdicts.yaml").read_text(encoding="utf-8"))
    return raw["verdicts"] if isinstance(raw, dict) else raw


@pytest.mark.parametrize("script", ["pp_offset", "collective_mismatch", "engine_version_regression"])
def test_binary_artifacts_rebuild_byte_for_byte(script: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The committed .pt / .safetensors / dump files are exactly what examples/_make writes."""
    monkeypatch.syspath_prepend(str(EXAMPLES / "_make"))
    for name in ("common", "tensors", script):
        sys.modules.pop(name, None)
    import importlib

    common = importlib.import_module("common")
    monkeypatch.setattr(common, "EXAMPLES", tmp_path)
    module = importlib.import_module(script)
    module.build()
    built = tmp_path / module.NAME
    committed = EXAMPLES / module.NAME
    rel = sorted(str(p.relative_to(built)) for p in built.rglob("*") if p.is_file())
    assert rel == sorted(str(p.relative_to(committed)) for p in committed.rglob("*") if p.is_file())
    for name in rel:
        assert (built / name).read_bytes() == (committed / name).read_bytes(), name
    for name in ("common", "tensors", script):
        sys.modules.pop(name, None)
