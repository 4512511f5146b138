"""The isolated rollout on a real engine, checked against a local transformers engine on the same weights.

The kit's models are random-init, so their text is garbage whatever the engine: the
check is that the live engine and the local engine, given the run's prompts and sampling
settings, produce the same tokens and the same judgement, and that the engine's
log-probs of the run's own responses match those the run recorded while it holds the
same weights, and move away when it holds others.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import sglang_scenarios as sc

from probes.isolated_rollout import IsolatedRollout
from triage.engines.sglang import SGLangEngine
from triage.run import open_run


@pytest.fixture
def rollout_run(servers, weights, tmp_path: Path):
    qwen = servers.get("model")
    with SGLangEngine(qwen.url, allow_writes=True) as e:
        e.update_weights_from_disk(weights["qwen2/base"])
    root = sc.garbled_run(tmp_path / "run", checkpoint=weights["qwen2/megatron"], base_dir=weights["qwen2/base"],
                          dump=weights["qwen2/dump"])
    return qwen, root


def test_live_and_local_engines_agree(rollout_run):
    qwen, root = rollout_run
    live_run = open_run(str(root))
    live_run.engines.append(qwen.url)
    live = IsolatedRollout().examine(live_run)
    local = IsolatedRollout(IsolatedRollout.Params(engine="local")).examine(open_run(str(root)))
    assert live.outcome == local.outcome  # the same judgement of the same text
    assert live.outcome in ("garbled", "truncated", "coherent")
    assert [x["text"] for x in live.evidence["examples"]] == [x["text"] for x in local.evidence["examples"]]
    assert live.evidence["finish_reasons"] == local.evidence["finish_reasons"]
    assert live.evidence["sampling"] == {"max_new_tokens": 12, "temperature": 0.0, "top_p": 1.0, "top_k": -1}
    # the engine scores the run's responses as the run recorded them (same weights)
    lp = live.evidence["logprobs"]
    assert lp["samples"] == 4 and lp["max_abs_diff"] < 1e-3, lp
    paths = [r["path"] for r in live.evidence["requests"]]
    assert paths.count("/generate") == 2 and live.evidence["request_count"] == len(paths)
    assert live.evidence["engine"]["address"] == qwen.url and local.evidence["engine"]["kind"] == "local transformers"


def test_wrong_weights_in_the_engine_show_in_the_logprobs(rollout_run, weights):
    qwen, root = rollout_run
    with SGLangEngine(qwen.url, allow_writes=True) as e:
        e.update_weights_from_disk(weights["qwen2/pp_offset"])
    run = open_run(str(root))
    run.engines.append(qwen.url)
    obs = IsolatedRollout().examine(run)
    assert obs.evidence["logprobs"]["mean_abs_diff"] > 0.05, obs.evidence["logprobs"]
