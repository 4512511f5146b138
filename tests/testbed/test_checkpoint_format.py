"""Megatron checkpoints written as Megatron lays them out, readable with weights_only=True."""

from __future__ import annotations

import argparse
import json

import pytest
import torch

from triage.testbed import checkpoint as ckpt
from triage.testbed.hf_models import ModelShape
from triage.testbed.megatron_model import GPTModel


@pytest.fixture()
def model_state():
    model = GPTModel(ModelShape(arch="qwen2"), 384)
    model.init_weights(5)
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_torch_dist_layout_and_round_trip(tmp_path, model_state):
    args = argparse.Namespace(lr=1e-5, hf_checkpoint="hf", tensor_model_parallel_size=1, testbed_fault="x")
    ckpt.save_torch_dist(tmp_path, 3, args, model_state, None, num_layers=2)
    ckpt.write_tracker(tmp_path, 3)
    it = tmp_path / "iter_0000003"
    assert (tmp_path / "latest_checkpointed_iteration.txt").read_text() == "3"
    assert sorted(p.name for p in it.iterdir()) == [".metadata", "__0_0.distcp", "common.pt", "metadata.json"]
    assert json.loads((it / "metadata.json").read_text())["sharded_backend"] == "torch_dist"
    with torch.serialization.safe_globals([argparse.Namespace]):
        common = torch.load(it / "common.pt", weights_only=True)
    assert common["iteration"] == 3 and common["args"].lr == 1e-5
    assert not hasattr(common["args"], "testbed_fault")  # the testbed's own flags are not the job's
    stacked = ckpt.read_torch_dist(it, unstack=False)
    assert stacked["decoder.layers.self_attention.linear_qkv.weight"].shape == (2, 128, 64)
    back = ckpt.read_torch_dist(it)
    assert set(back) == set(model_state)
    for name, tensor in model_state.items():
        assert torch.equal(back[name], tensor), name


def test_legacy_tp_shards_merge_back(tmp_path, model_state):
    args = argparse.Namespace(tensor_model_parallel_size=2, pipeline_model_parallel_size=1)
    for tp_rank in range(2):
        local = ckpt.local_state(model_state, 2, 2, tp_rank, 1, 0)
        ckpt.save_legacy_rank(tmp_path, 7, args, local, None, tp_rank, 0, 1)
    assert sorted(p.name for p in (tmp_path / "iter_0000007").iterdir()) == ["mp_rank_00", "mp_rank_01"]
    payloads = {(t, 0): ckpt.load_legacy_rank(tmp_path / "iter_0000007", t, 0, 1)["model"] for t in range(2)}
    assert payloads[(1, 0)]["decoder.layers.0.mlp.linear_fc1.weight"].shape == (128, 64)
    merged = ckpt.merge_local_states(payloads, 2, 2, 1)
    for name, tensor in model_state.items():
        assert torch.equal(merged[name], tensor), name


def test_legacy_pipeline_stages_use_local_layer_ids(tmp_path, model_state):
    args = argparse.Namespace(tensor_model_parallel_size=1, pipeline_model_parallel_size=2)
    for pp_rank in range(2):
        ckpt.save_legacy_rank(tmp_path, 1, args, ckpt.local_state(model_state, 2, 1, 0, 2, pp_rank), None, 0, pp_rank, 2)
    stage2 = ckpt.load_legacy_rank(tmp_path / "iter_0000001", 0, 1, 2)["model"]
    assert "output_layer.weight" in stage2 and "embedding.word_embeddings.weight" not in stage2
    assert torch.equal(stage2["decoder.layers.0.mlp.linear_fc2.weight"], model_state["decoder.layers.1.mlp.linear_fc2.weight"])
    assert (tmp_path / "iter_0000001" / "mp_rank_00_001" / "model_optim_rng.pt").is_file()
