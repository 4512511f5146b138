"""A supervised run (SFT, pre-training) is judged by the checks that apply to it: a reward's signal and responses
cut at a length limit have no rollouts to read there, so they do not keep it from `healthy`
(probes/grad_norm_health.supervised_run, probes/health_checks.py). Anything RL-shaped keeps them required."""

from __future__ import annotations

import json

import pytest

from triage.cli import main


def _sft_records(n: int = 30, extra: str = "") -> str:
    # the HF Trainer's printed dicts of an SFT run (transformers trainer.py `_maybe_log_save_evaluate`)
    return "".join(f"{{'loss': {2.1 - 0.03 * i:.4f}, 'grad_norm': {0.9 + 0.01 * (i % 5):.4f}, "
                   f"'learning_rate': {2e-5 * (1 - i / n):.3e}, {extra}'epoch': {i / n:.3f}}}\n" for i in range(n))


def _report(tmp_path, capsys, log: str, cmdline: str | None = None):
    (tmp_path / "train.log").write_text(log, encoding="utf-8")
    if cmdline is not None:
        (tmp_path / "cmdline.txt").write_text(cmdline, encoding="utf-8")
    rc = main(["run", str(tmp_path), "--json"])
    return rc, json.loads(capsys.readouterr().out)


def test_a_long_healthy_sft_run_is_healthy(tmp_path, capsys):
    rc, report = _report(tmp_path, capsys, _sft_records())
    assert rc == 0 and report["root_cause"]["id"] == "healthy"
    gate = next(s for s in report["path"] if s["probe"] == "health_checks")
    assert "reward_signal and truncation do not apply: a supervised run" in gate["summary"]
    assert {c["name"]: c["required"] for c in gate["evidence"]["checks"]}["reward_signal"] is False


def test_a_long_healthy_dpo_run_is_healthy_and_said_to_be_one_on_fixed_pairs(tmp_path, capsys):
    # TRL's DPOTrainer's pair metrics (ms-swift's `--rlhf_type dpo` logs them alike: a committed ms-swift DPO log of
    # 30 of 30 steps, zhl-2022/x-algorithm): implicit rewards of fixed pairs, no rollout to read
    pairs = ("'rewards/chosen': 1.2, 'rewards/rejected': -3.1, 'rewards/accuracies': 1.0, 'rewards/margins': 4.3, "
             "'logps/chosen': -161.7, 'logps/rejected': -190.2, ")
    rc, report = _report(tmp_path, capsys, _sft_records(extra=pairs), "swift rlhf --rlhf_type dpo --model Qwen/Qwen3-1.7B")
    assert rc == 0 and report["root_cause"]["id"] == "healthy"
    gate = next(s for s in report["path"] if s["probe"] == "health_checks")
    assert "do not apply: a preference run on fixed pairs (DPO)" in gate["summary"]


@pytest.mark.parametrize("extra, cmdline", [
    ("'reward_margin_custom': 0.1, ", None),  # a reward under a name no adapter knows
    ("'rollout_seconds': 3.0, ", None),
    ("", "python train.py --num_generations 8 --learning_rate 1e-6"),  # an RL argument
    ("", "swift rlhf --rlhf_type grpo --model Qwen/Qwen3-8B"),
])
def test_anything_rl_shaped_keeps_the_reward_and_truncation_checks(tmp_path, capsys, extra, cmdline):
    _rc, report = _report(tmp_path, capsys, _sft_records(extra=extra), cmdline)
    assert report["root_cause"]["id"] == "inconclusive"
    gate = next(s for s in report["path"] if s["probe"] == "health_checks")
    assert gate["outcome"] == "insufficient" and "reward_signal" in gate["evidence"]["missing"]


def test_a_short_sft_paste_is_not_enough(tmp_path, capsys):
    _rc, report = _report(tmp_path, capsys, _sft_records(n=4))
    assert report["root_cause"]["id"] == "inconclusive"
