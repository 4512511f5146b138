"""slime's debug flags drive the testbed as they drive slime: rollout only, train only on saved rollouts."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

try:
    from tests.testbed._artifacts import lines_with, metric_lines
except ImportError:  # the tests directory itself is on sys.path (pytest's prepend import mode)
    from _artifacts import lines_with, metric_lines
from triage.testbed import train
from triage.testbed.scenarios import SCENARIOS, generate


def _rerun(src: Path, dest: Path, overrides: dict[str, object]) -> tuple[int, Path]:
    shutil.copytree(src, dest)
    flags = dict(SCENARIOS["healthy.qwen2"].flags)
    for k, v in overrides.items():
        if v is None:
            flags.pop(k, None)
        else:
            flags[k] = v
    argv = [t for k, v in flags.items() for t in ([k] if v is True else [k, str(v)])]
    log = dest / "replay.log"
    cwd = os.getcwd()
    os.chdir(dest)
    try:
        code = train.main(argv + ["--testbed-log", str(log)])
    finally:
        os.chdir(cwd)
    return code, log


def test_load_debug_rollout_data_trains_on_the_saved_rollouts(tmp_path):
    run = generate("healthy.qwen2")
    code, log = _rerun(run, tmp_path / "replay", {
        "--load-debug-rollout-data": "dump/rollout_data/{rollout_id}.pt", "--dump-details": None,
        "--save": "replay_ckpt", "--load": "replay_ckpt", "--num-rollout": "2"})
    assert code == 0
    assert lines_with(log, "will not instantiate sglang servers and will only run the training process.")
    assert not lines_with(log, "Finish rollout")
    original = metric_lines(run / "job.log", "rollout")
    replayed = metric_lines(log, "rollout")
    assert replayed[0]["rollout/log_probs"] == original[0]["rollout/log_probs"]
    assert replayed[0]["rollout/raw_reward"] == original[0]["rollout/raw_reward"]
    steps = metric_lines(log, "step")
    assert sorted(steps) == [0, 1] and steps[0]["train/ppo_kl"] == 0.0
    assert steps[0]["train/grad_norm"] == metric_lines(run / "job.log", "step")[0]["train/grad_norm"]
    assert (tmp_path / "replay" / "replay_ckpt" / "latest_checkpointed_iteration.txt").read_text() == "1"


def test_debug_rollout_only_generates_without_megatron(tmp_path):
    run = generate("healthy.qwen2")
    code, log = _rerun(run, tmp_path / "rollout_only", {
        "--debug-rollout-only": True, "--dump-details": None, "--save-debug-rollout-data": "only/{rollout_id}.pt",
        "--num-rollout": "2"})
    assert code == 0
    assert not lines_with(log, "------------------------ arguments ------------------------")
    assert not metric_lines(log, "step") and not metric_lines(log, "rollout")
    assert len(lines_with(log, "Finish rollout: ")) == 2
    assert sorted(p.name for p in (tmp_path / "rollout_only" / "only").iterdir()) == ["0.pt", "1.pt"]



@pytest.mark.slow
def test_rollouts_through_the_http_engine_match_the_in_process_engine(tmp_path):
    run = generate("healthy.qwen2")
    code, log = _rerun(run, tmp_path / "http", {"--use-http-engine": True, "--dump-details": None,
                                                "--save": "http_ckpt", "--load": "http_ckpt"})
    assert code == 0
    launch = lines_with(log, "Launch HttpServerEngineAdapter at: 127.0.0.1:")
    assert launch and "(SGLangEngine pid=" in launch[0]
    assert metric_lines(log, "rollout") == metric_lines(run / "job.log", "rollout")


def test_load_resumes_from_the_saved_iteration(tmp_path):
    run = generate("healthy.qwen2")
    code, log = _rerun(run, tmp_path / "resume", {"--num-rollout": "4", "--dump-details": None})
    assert code == 0
    assert lines_with(log, " loading distributed checkpoint from ckpt at iteration 2")
    assert lines_with(log, "  successfully loaded checkpoint from ckpt [ t 1/1, p 1/1 ] at iteration 2")
    assert sorted(metric_lines(log, "rollout")) == [3] and sorted(metric_lines(log, "step")) == [3]
    assert (tmp_path / "resume" / "ckpt" / "latest_checkpointed_iteration.txt").read_text() == "3"
