"""Checkpoint layouts: Megatron trackers, torch_dist and legacy shards, HF safetensors, read without tensor data."""

from __future__ import annotations

import argparse
import enum
import json
import os
import warnings

import pytest
import torch
from safetensors.torch import save_file

from triage.errors import UnsafeArtifact
from triage.formats.checkpoints import (
    inspect_hf_checkpoint,
    inspect_megatron_checkpoint,
    read_safetensors_header,
    saved_args,
)

TRACKER = "latest_checkpointed_iteration.txt"


def torch_dist_iteration(root, iteration=100, args=None, thread_count=2):
    """A torch_dist iteration as Megatron writes it: real DCP shards, .metadata, common.pt, metadata.json."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint import FileSystemWriter

    d = root / f"iter_{iteration:07d}"
    state = {
        "decoder.layers.0.self_attention.linear_qkv.weight": torch.randn(48, 16),
        "decoder.layers.0.mlp.linear_fc1.weight": torch.randn(64, 16),
        "embedding.word_embeddings.weight": torch.randn(100, 16),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dcp.save(state, storage_writer=FileSystemWriter(str(d), thread_count=thread_count))
    torch.save({"args": args or argparse.Namespace(hidden_size=16, num_layers=1), "checkpoint_version": 3.0,
                "iteration": iteration}, d / "common.pt")
    (d / "metadata.json").write_text(json.dumps({"sharded_backend": "torch_dist", "sharded_backend_version": 1,
                                                 "common_backend": "torch", "common_backend_version": 1}))
    return d


def legacy_iteration(root, iteration=50, tp=2, pp=2, skip=()):
    d = root / f"iter_{iteration:07d}"
    for t in range(tp):
        for p in range(pp):
            name = f"mp_rank_{t:02d}" + (f"_{p:03d}" if pp > 1 else "")
            if name in skip:
                continue
            (d / name).mkdir(parents=True)
            torch.save({"model": {"w": torch.full((2,), float(t * 10 + p))}, "iteration": iteration},
                       d / name / "model_optim_rng.pt")
    return d


def tracker(root, text):
    root.mkdir(parents=True, exist_ok=True)
    (root / TRACKER).write_text(text)


# --- Megatron: tracker ---------------------------------------------------------------


def test_complete_torch_dist_checkpoint_is_intact(tmp_path):
    torch_dist_iteration(tmp_path, 100)
    tracker(tmp_path, "100\n")

    ckpt = inspect_megatron_checkpoint(tmp_path)

    assert ckpt.problems == []
    assert (ckpt.tracker_iteration, ckpt.named_dir, ckpt.named_exists) == (100, "iter_0000100", True)
    layout = ckpt.loaded_iteration
    assert layout.format == "torch_dist"
    assert layout.distcp_files == ["__0_0.distcp", "__0_1.distcp"]
    assert layout.has_dcp_metadata and layout.has_common
    assert layout.metadata_json["sharded_backend"] == "torch_dist"


def test_missing_tracker_is_a_problem_that_hides_saved_iterations(tmp_path):
    torch_dist_iteration(tmp_path, 100)

    ckpt = inspect_megatron_checkpoint(tmp_path)

    assert not ckpt.tracker_exists and not ckpt.tracker_usable
    assert ckpt.iteration_names == ["iter_0000100"]
    assert any(TRACKER in p for p in ckpt.problems)
    assert any("none of them is loaded" in p for p in ckpt.problems)


@pytest.mark.parametrize(
    ("text", "message"),
    [("", "is empty"), ("   \n", "is empty"), ("iter_100", "neither an iteration number nor 'release'"),
     ("-3", "negative")],
)
def test_unusable_tracker_is_reported_not_raised(tmp_path, text, message):
    torch_dist_iteration(tmp_path, 100)
    tracker(tmp_path, text)
    ckpt = inspect_megatron_checkpoint(tmp_path)
    assert ckpt.tracker_exists and not ckpt.tracker_usable
    assert message in ckpt.tracker_problem
    assert ckpt.problems[0] == ckpt.tracker_problem


def test_tracker_naming_a_missing_iteration(tmp_path):
    torch_dist_iteration(tmp_path, 100)
    tracker(tmp_path, "200")

    ckpt = inspect_megatron_checkpoint(tmp_path)

    assert ckpt.named_dir == "iter_0000200" and not ckpt.named_exists
    assert ckpt.loaded_iteration is None
    assert ckpt.problems == [f"{TRACKER} names iter_0000200, which is not in {tmp_path} (iterations present: iter_0000100)"]


def test_release_tracker_and_missing_directory(tmp_path):
    legacy_iteration(tmp_path, tp=1, pp=1).rename(tmp_path / "release")
    tracker(tmp_path, "release")
    ckpt = inspect_megatron_checkpoint(tmp_path)
    assert ckpt.tracker_release and ckpt.named_exists and ckpt.problems == []

    gone = inspect_megatron_checkpoint(tmp_path / "nope")
    assert not gone.exists and "does not exist" in gone.problems[0]


def test_only_the_iteration_a_loader_opens_is_inspected(tmp_path):
    (tmp_path / "iter_0000050").mkdir()  # an older, broken save the tracker no longer names
    torch_dist_iteration(tmp_path, 100)
    tracker(tmp_path, "100")

    ckpt = inspect_megatron_checkpoint(tmp_path)

    assert ckpt.problems == []
    assert ckpt.iteration_names == ["iter_0000050", "iter_0000100"]
    assert not ckpt.iterations["iter_0000050"].inspected
    assert ckpt.iterations["iter_0000050"].format == "empty"
    assert inspect_megatron_checkpoint(tmp_path, also="iter_0000050").iterations["iter_0000050"].problems


# --- Megatron: torch_dist shards -------------------------------------------------------


def test_missing_distcp_shard_named_by_metadata(tmp_path):
    d = torch_dist_iteration(tmp_path, 100)
    tracker(tmp_path, "100")
    (d / "__0_1.distcp").unlink()

    ckpt = inspect_megatron_checkpoint(tmp_path)

    assert ckpt.loaded_iteration.missing_files == ["__0_1.distcp"]
    assert any("missing shard file(s): __0_1.distcp" in p for p in ckpt.problems)


def test_truncated_and_zero_byte_distcp_shards(tmp_path):
    d = torch_dist_iteration(tmp_path, 100)
    tracker(tmp_path, "100")
    data = (d / "__0_0.distcp").read_bytes()
    (d / "__0_0.distcp").write_bytes(data[:100])
    (d / "__0_1.distcp").write_bytes(b"")

    layout = inspect_megatron_checkpoint(tmp_path).loaded_iteration

    assert layout.truncated == [f"__0_0.distcp (100 of {len(data)} bytes)"]
    assert layout.zero_byte == ["__0_1.distcp"]
    assert not layout.intact


def test_torch_dist_without_metadata_or_common_is_incomplete(tmp_path):
    d = torch_dist_iteration(tmp_path, 100)
    tracker(tmp_path, "100")
    (d / ".metadata").unlink()
    (d / "common.pt").unlink()

    problems = inspect_megatron_checkpoint(tmp_path).problems

    assert any("no .metadata" in p for p in problems)
    assert any("no common.pt" in p for p in problems)


def test_rank_gap_without_readable_metadata(tmp_path):
    d = tmp_path / "iter_0000001"
    d.mkdir()
    for name in ("__0_0.distcp", "__1_0.distcp", "__3_0.distcp", "common.pt", "metadata.json"):
        (d / name).write_bytes(b"x" * 10)
    (d / ".metadata").write_bytes(b"not a pickle")
    (d / "metadata.json").write_text("{}")
    tracker(tmp_path, "1")
    problems = inspect_megatron_checkpoint(tmp_path).problems
    assert any("no shard files from rank(s) 2 of 4" in p for p in problems)


def test_empty_iteration_directory(tmp_path):
    (tmp_path / "iter_0000005").mkdir()
    tracker(tmp_path, "5")
    ckpt = inspect_megatron_checkpoint(tmp_path)
    assert ckpt.loaded_iteration.format == "empty"
    assert "iter_0000005 is empty" in ckpt.problems[0]


# --- Megatron: legacy shards -----------------------------------------------------------


def test_legacy_grid_complete(tmp_path):
    legacy_iteration(tmp_path, 50, tp=2, pp=2)
    tracker(tmp_path, "50")
    layout = inspect_megatron_checkpoint(tmp_path).loaded_iteration
    assert layout.format == "legacy"
    assert (len(layout.tp_ranks), len(layout.pp_ranks)) == (2, 2)
    assert layout.grid_complete and layout.problems == []


def test_legacy_grid_with_a_missing_tp_pp_cell(tmp_path):
    legacy_iteration(tmp_path, 50, tp=2, pp=2, skip=("mp_rank_01_001",))
    tracker(tmp_path, "50")
    layout = inspect_megatron_checkpoint(tmp_path).loaded_iteration
    assert not layout.grid_complete
    assert layout.missing_cells == ["tp=1, pp=1"]
    assert "the 2 TP x 2 PP grid is incomplete" in layout.problems[0]


def test_legacy_zero_byte_and_truncated_shards(tmp_path):
    d = legacy_iteration(tmp_path, 50, tp=2, pp=1)
    tracker(tmp_path, "50")
    (d / "mp_rank_00" / "model_optim_rng.pt").write_bytes(b"")
    data = (d / "mp_rank_01" / "model_optim_rng.pt").read_bytes()
    (d / "mp_rank_01" / "model_optim_rng.pt").write_bytes(data[: len(data) // 2])

    layout = inspect_megatron_checkpoint(tmp_path).loaded_iteration

    assert layout.zero_byte == ["mp_rank_00/model_optim_rng.pt"]
    assert layout.truncated == ["mp_rank_01/model_optim_rng.pt"]


def test_legacy_tp_ep_names_with_ep_hint(tmp_path):
    d = tmp_path / "iter_0000001"
    for name in ("mp_rank_00_000", "mp_rank_00_001", "mp_rank_01_000", "mp_rank_01_001"):
        (d / name).mkdir(parents=True)
        torch.save({"w": torch.zeros(1)}, d / name / "model_optim_rng.pt")
    tracker(tmp_path, "1")
    layout = inspect_megatron_checkpoint(tmp_path, ep_hint=True).loaded_iteration
    assert (len(layout.tp_ranks), len(layout.pp_ranks), len(layout.ep_ranks)) == (2, 1, 2)
    assert layout.grid_complete


# --- saved args ------------------------------------------------------------------------


def test_saved_args_from_common_pt(tmp_path):
    torch_dist_iteration(tmp_path, 100, args=argparse.Namespace(hidden_size=16, num_layers=1, rotary_base=10000,
                                                                params_dtype=torch.bfloat16))
    tracker(tmp_path, "100")
    args = saved_args(tmp_path)
    assert args["hidden_size"] == 16 and args["rotary_base"] == 10000
    assert args["params_dtype"] == torch.bfloat16
    assert saved_args(tmp_path / "iter_0000100")["num_layers"] == 1


def test_saved_args_none_without_common_pt(tmp_path):
    legacy_iteration(tmp_path, 50, tp=1, pp=1)
    tracker(tmp_path, "50")
    assert saved_args(tmp_path) is None


class _Backend(enum.Enum):
    auto = 1


class _Touch:
    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_saved_args_refuses_anything_but_namespace(tmp_path):
    marker = tmp_path / "pwned"
    d = tmp_path / "iter_0000001"
    d.mkdir()
    torch.save({"args": argparse.Namespace(hidden_size=16, hook=_Touch(marker))}, d / "common.pt")
    with pytest.raises(UnsafeArtifact, match="system"):
        saved_args(d)
    assert not marker.exists()

    torch.save({"args": argparse.Namespace(attention_backend=_Backend.auto)}, d / "common.pt")
    with pytest.raises(UnsafeArtifact, match="_Backend"):
        saved_args(d)


# --- Hugging Face ----------------------------------------------------------------------


CONFIG = {
    "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 16, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 32, "vocab_size": 100,
    "rope_theta": 1000000.0, "rms_norm_eps": 1e-6, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
}


def hf_checkpoint(d, sharded=True):
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_text(json.dumps(CONFIG))
    (d / "generation_config.json").write_text(json.dumps({"eos_token_id": [7, 8], "bos_token_id": 1}))
    (d / "tokenizer_config.json").write_text(json.dumps({
        "chat_template": "{% for m in messages %}{{ m['content'] }}{% endfor %}",
        "eos_token": "<|im_end|>", "pad_token": {"content": "<|endoftext|>"},
    }))
    a = {"model.embed_tokens.weight": torch.zeros(100, 16), "model.norm.weight": torch.ones(16)}
    b = {"model.layers.0.mlp.up_proj.weight": torch.zeros(32, 16, dtype=torch.bfloat16)}
    if sharded:
        save_file(a, str(d / "model-00001-of-00002.safetensors"))
        save_file(b, str(d / "model-00002-of-00002.safetensors"))
        weight_map = {k: "model-00001-of-00002.safetensors" for k in a} | {k: "model-00002-of-00002.safetensors" for k in b}
        (d / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 0}, "weight_map": weight_map}))
    else:
        save_file(a | b, str(d / "model.safetensors"))
    return d


def test_complete_hf_checkpoint(tmp_path):
    hf = inspect_hf_checkpoint(hf_checkpoint(tmp_path / "hf"))
    assert hf.problems == []
    assert hf.get("num_key_value_heads") == 2 and hf.get("rope_theta") == 1e6
    assert hf.eos_token_ids == [7, 8]
    assert hf.has_chat_template and hf.eos_token == "<|im_end|>" and hf.pad_token == "<|endoftext|>"
    assert hf.tensor("model.layers.0.mlp.up_proj.weight") == ("BF16", (32, 16))
    assert len(hf.tensor_names()) == 3


def test_index_naming_a_missing_shard(tmp_path):
    d = hf_checkpoint(tmp_path / "hf")
    (d / "model-00002-of-00002.safetensors").unlink()
    hf = inspect_hf_checkpoint(d)
    assert hf.problems == ["the index names shard model-00002-of-00002.safetensors (1 tensor(s)), which is missing"]


def test_zero_byte_and_truncated_safetensors(tmp_path):
    d = hf_checkpoint(tmp_path / "hf")
    (d / "model-00002-of-00002.safetensors").write_bytes(b"")
    shard = d / "model-00001-of-00002.safetensors"
    data = shard.read_bytes()
    shard.write_bytes(data[:-100])

    hf = inspect_hf_checkpoint(d)

    assert "model-00002-of-00002.safetensors is empty (0 bytes)" in hf.problems
    assert any(p.startswith("model-00001-of-00002.safetensors is truncated") for p in hf.problems)


def test_safetensors_header_garbage(tmp_path):
    path = tmp_path / "model.safetensors"
    path.write_bytes((10**12).to_bytes(8, "little") + b"{}")
    assert "does not fit in the file" in read_safetensors_header(path).problem


def test_index_placing_a_tensor_in_the_wrong_shard(tmp_path):
    d = hf_checkpoint(tmp_path / "hf")
    index = json.loads((d / "model.safetensors.index.json").read_text())
    index["weight_map"]["model.norm.weight"] = "model-00002-of-00002.safetensors"
    (d / "model.safetensors.index.json").write_text(json.dumps(index))
    hf = inspect_hf_checkpoint(d)
    assert hf.problems == ["1 tensor(s) the index places in a shard are not in it, e.g. model.norm.weight"]


def test_hf_without_config_or_weights(tmp_path):
    d = tmp_path / "hf"
    d.mkdir()
    (d / "config.json").write_text("{\"hidden_size\": 16,")
    hf = inspect_hf_checkpoint(d)
    assert any(p.startswith("config.json is not valid JSON") for p in hf.problems)
    assert any("no weights" in p for p in hf.problems)
    assert inspect_hf_checkpoint(tmp_path / "missing").problems[0].endswith("does not exist")


# --- the checkpoint_integrity probe ----------------------------------------------------

from probes.checkpoint_integrity import CheckpointIntegrity  # noqa: E402
from triage.errors import Unavailable  # noqa: E402
from triage.run import open_run  # noqa: E402

MODEL_ARGS = {"hidden_size": 16, "num_layers": 2, "num_attention_heads": 4, "group_query_attention": True,
              "num_query_groups": 2, "ffn_hidden_size": 32, "rotary_base": 1000000, "norm_epsilon": 1e-6,
              "vocab_size": 100}


def make_run(tmp_path, args):
    import yaml

    run_dir = tmp_path / "run"
    run_dir.mkdir(exist_ok=True)
    (run_dir / "triage.yaml").write_text(yaml.safe_dump({"framework": "slime", "args": args}))
    return run_dir


def examine(run_dir):
    return CheckpointIntegrity().examine(open_run(str(run_dir)))


def test_probe_ref_load_without_tracker(tmp_path):
    run_dir = make_run(tmp_path, {"ref_load": "/mnt/cluster/models/qwen_torch_dist", **MODEL_ARGS})
    torch_dist_iteration(run_dir / "qwen_torch_dist", 0)

    obs = examine(run_dir)

    assert obs.outcome == "tracker_missing"
    assert obs.evidence["arg"] == "--ref-load"
    assert obs.evidence["path"] == str(run_dir / "qwen_torch_dist")
    assert obs.evidence["iterations_present"] == ["iter_0000000"]
    assert obs.evidence["tracker"] is None
    assert TRACKER in obs.summary and "random" in obs.summary
    assert obs.confidence >= 0.9


def test_probe_path_that_exists_nowhere(tmp_path):
    run_dir = make_run(tmp_path, {"ref_load": "/mnt/cluster/nowhere/ckpt"})
    (run_dir / "job.log").write_text("[2026-08-01 10:00:00] train.py:1 - start\n")
    obs = examine(run_dir)
    assert obs.outcome == "tracker_missing"
    assert obs.evidence["value"] == "/mnt/cluster/nowhere/ckpt"
    assert obs.evidence["checked"][0]["exists"] is False
    assert "does not exist" in obs.summary
    assert obs.confidence < 0.9  # it may exist on the cluster the job ran on


def test_probe_fresh_run_with_empty_load_dir_is_intact(tmp_path):
    run_dir = make_run(tmp_path, {"load": "/mnt/cluster/save/actor", "ref_load": "/mnt/cluster/models/base"})
    (run_dir / "actor").mkdir()
    torch_dist_iteration(run_dir / "base", 0)
    tracker(run_dir / "base", "0")

    obs = examine(run_dir)

    assert obs.outcome == "intact"
    assert "starts from --ref-load" in obs.evidence["notes"][0]


def test_probe_load_with_saved_iterations_but_no_tracker(tmp_path):
    run_dir = make_run(tmp_path, {"load": str(tmp_path / "save"), "ref_load": str(tmp_path / "base")})
    torch_dist_iteration(tmp_path / "base", 0)
    tracker(tmp_path / "base", "0")
    torch_dist_iteration(tmp_path / "save", 49)

    obs = examine(run_dir)

    assert obs.outcome == "tracker_missing"
    assert obs.evidence["arg"] == "--load"
    assert "starts again from --ref-load" in obs.summary
    assert "1 saved iteration(s) are never loaded" in obs.summary


def test_probe_tracker_naming_a_missing_iteration(tmp_path):
    run_dir = make_run(tmp_path, {"load": str(tmp_path / "save")})
    torch_dist_iteration(tmp_path / "save", 99)
    tracker(tmp_path / "save", "199")

    obs = examine(run_dir)

    assert obs.outcome == "iteration_missing"
    assert obs.evidence["iteration"] == "iter_0000199"
    assert obs.evidence["tracker"] == "199"
    assert "iter_0000099" in obs.summary


def test_probe_requested_ckpt_step_missing(tmp_path):
    run_dir = make_run(tmp_path, {"load": str(tmp_path / "save"), "ckpt_step": 5})
    torch_dist_iteration(tmp_path / "save", 9)
    tracker(tmp_path / "save", "9")
    obs = examine(run_dir)
    assert obs.outcome == "iteration_missing"
    assert obs.evidence["iteration"] == "iter_0000005"


def test_probe_missing_shard_in_loaded_iteration(tmp_path):
    run_dir = make_run(tmp_path, {"ref_load": str(tmp_path / "base")})
    d = torch_dist_iteration(tmp_path / "base", 0)
    tracker(tmp_path / "base", "0")
    (d / "__0_1.distcp").unlink()

    obs = examine(run_dir)

    assert obs.outcome == "shards_incomplete"
    assert any("__0_1.distcp" in p for p in obs.evidence["problems"])


def test_probe_discovered_checkpoint_without_args(tmp_path):
    run_dir = tmp_path / "run"
    legacy_iteration(run_dir / "ckpt", 50, tp=2, pp=2, skip=("mp_rank_00_001",))
    tracker(run_dir / "ckpt", "50")
    obs = examine(run_dir)
    assert obs.outcome == "shards_incomplete"
    assert "tp=0, pp=1" in obs.summary


def test_probe_hf_index_naming_a_missing_shard(tmp_path):
    run_dir = make_run(tmp_path, {"hf_checkpoint": "/mnt/cluster/hf/Qwen-tiny", **MODEL_ARGS})
    d = hf_checkpoint(run_dir / "Qwen-tiny")
    (d / "model-00002-of-00002.safetensors").unlink()
    obs = examine(run_dir)
    assert obs.outcome == "shards_incomplete"
    assert "model-00002-of-00002.safetensors" in obs.summary


def test_probe_hf_config_disagrees_with_model_args(tmp_path):
    wrong = MODEL_ARGS | {"num_query_groups": 4, "rotary_base": 10000}
    run_dir = make_run(tmp_path, {"hf_checkpoint": str(tmp_path / "hf"), **wrong})
    hf_checkpoint(tmp_path / "hf")

    obs = examine(run_dir)

    assert obs.outcome == "hf_mismatch"
    found = {m["arg"]: (m["run"], m["hf_key"], m["hf"]) for m in obs.evidence["mismatches"]}
    assert found == {"--num-query-groups": (4, "num_key_value_heads", 2),
                     "--rotary-base": (10000, "rope_theta", 1000000.0)}


def test_probe_everything_intact_and_matching(tmp_path):
    run_dir = make_run(tmp_path, {"ref_load": str(tmp_path / "base"), "hf_checkpoint": str(tmp_path / "hf"),
                                  **MODEL_ARGS, "padded_vocab_size": 128})
    torch_dist_iteration(tmp_path / "base", 0)
    tracker(tmp_path / "base", "0")
    hf_checkpoint(tmp_path / "hf")

    obs = examine(run_dir)

    assert obs.outcome == "intact"
    assert "loads iter_0000000 (torch_dist), complete" in obs.summary
    assert "config matches the model args" in obs.summary


def test_probe_unavailable_without_any_checkpoint(tmp_path):
    run_dir = make_run(tmp_path, {"save": "/mnt/cluster/save"})
    with pytest.raises(Unavailable) as err:
        examine(run_dir)
    assert err.value.artifact == "checkpoint"


def test_probe_quotes_megatron_saying_it_found_no_checkpoint(tmp_path):
    run_dir = make_run(tmp_path, {"ref_load": "/mnt/cluster/nowhere/ckpt"})
    (run_dir / "job.log").write_text(
        "[2026-08-01 10:00:00] checkpointing.py:1101 - WARNING: could not find the metadata file "
        "/mnt/cluster/nowhere/ckpt/latest_checkpointed_iteration.txt \n"
        "[2026-08-01 10:00:00] checkpointing.py:1102 -     will not load any checkpoints and will start from random\n"
    )
    obs = examine(run_dir)
    assert obs.outcome == "tracker_missing"
    assert obs.confidence >= 0.9
    assert "could not find the metadata file" in obs.evidence["log_lines"][0]
    assert obs.evidence["log_lines"][0].startswith(str(run_dir / "job.log") + ":1")


def test_probe_empty_tracker_is_tracker_missing(tmp_path):
    run_dir = make_run(tmp_path, {"load": str(tmp_path / "save")})
    torch_dist_iteration(tmp_path / "save", 10)
    tracker(tmp_path / "save", "")
    obs = examine(run_dir)
    assert obs.outcome == "tracker_missing"
    assert obs.evidence["tracker"] == ""
    assert "is empty" in obs.summary and "starts from random weights" in obs.summary


def test_probe_what_the_run_loads_outranks_other_directories(tmp_path):
    run_dir = make_run(tmp_path, {"ref_load": "/mnt/cluster/base", "save": "/mnt/cluster/save"})
    d = torch_dist_iteration(run_dir / "base", 0)
    tracker(run_dir / "base", "0")
    (d / "__0_0.distcp").write_bytes(b"")
    torch_dist_iteration(run_dir / "save", 20)  # saved, but its tracker is gone

    obs = examine(run_dir)

    assert obs.outcome == "shards_incomplete"
    assert obs.evidence["arg"] == "--ref-load"
    save = next(c for c in obs.evidence["checked"] if c.get("arg") == "--save")
    assert save["tracker"] is None and save["iterations_present"] == ["iter_0000020"]



def test_probe_save_dir_without_tracker_is_reported_when_nothing_else_is_wrong(tmp_path):
    run_dir = make_run(tmp_path, {"ref_load": "/mnt/cluster/base", "save": "/mnt/cluster/save"})
    torch_dist_iteration(run_dir / "base", 0)
    tracker(run_dir / "base", "0")
    torch_dist_iteration(run_dir / "save", 20)

    obs = examine(run_dir)

    assert obs.outcome == "tracker_missing"
    assert obs.evidence["arg"] == "--save"
    assert "Megatron would load nothing from it" in obs.summary


def test_probe_unreachable_path_that_the_log_shows_loading_is_fine(tmp_path):
    run_dir = make_run(tmp_path, {"ref_load": "/mnt/cluster/models/base_torch_dist"})
    (run_dir / "job.log").write_text(
        "[2026-08-01 10:00:00] checkpointing.py:1200 -  loading distributed checkpoint from "
        "/mnt/cluster/models/base_torch_dist at iteration 0\n"
        "[2026-08-01 10:00:09] checkpointing.py:1300 -   successfully loaded checkpoint from "
        "/mnt/cluster/models/base_torch_dist [ t 1/1, p 1/1 ] at iteration 0\n"
    )
    obs = examine(run_dir)
    assert obs.outcome == "intact"
    assert "job.log:1" in obs.evidence["notes"][0]


def test_probe_kv_groups_follow_group_query_attention(tmp_path):
    hf_checkpoint(tmp_path / "hf")  # num_key_value_heads 2, num_attention_heads 4
    # GQA off: Megatron uses one group per head whatever --num-query-groups says (its default is 1)
    run_dir = make_run(tmp_path, {"hf_checkpoint": str(tmp_path / "hf"), **MODEL_ARGS,
                                  "group_query_attention": False, "num_query_groups": 1})
    obs = examine(run_dir)
    assert obs.outcome == "hf_mismatch"
    (m,) = obs.evidence["mismatches"]
    assert (m["arg"], m["run"], m["hf_key"], m["hf"]) == ("--num-query-groups", 4, "num_key_value_heads", 2)
    assert "one key/value group per head" in m["note"]

    run_dir = make_run(tmp_path, {"hf_checkpoint": str(tmp_path / "hf"), **MODEL_ARGS,
                                  "group_query_attention": True, "num_query_groups": 2})
    assert examine(run_dir).outcome == "intact"


def test_probe_hf_checkpoint_given_as_ref_load_is_loadable(tmp_path):
    run_dir = make_run(tmp_path, {"ref_load": str(tmp_path / "Qwen-tiny")})
    hf_checkpoint(tmp_path / "Qwen-tiny")
    obs = examine(run_dir)
    assert obs.outcome == "intact"
    assert obs.evidence["checked"][0]["format"] == "hf"

    (tmp_path / "Qwen-tiny" / "model-00001-of-00002.safetensors").write_bytes(b"")
    obs = examine(run_dir)
    assert obs.outcome == "shards_incomplete"
    assert "model-00001-of-00002.safetensors is empty" in obs.summary


def test_probe_iteration_directory_given_as_ref_load(tmp_path):
    torch_dist_iteration(tmp_path / "base", 3)
    run_dir = make_run(tmp_path, {"ref_load": str(tmp_path / "base" / "iter_0000003")})
    obs = examine(run_dir)
    assert obs.outcome == "intact"
    assert "iteration iter_0000003 (torch_dist), complete" in obs.summary


def test_probe_iteration_directory_inside_the_run_is_not_reported_twice(tmp_path):
    run_dir = make_run(tmp_path, {"ref_load": "/mnt/cluster/base/iter_0000003"})
    torch_dist_iteration(run_dir / "base", 3)
    obs = examine(run_dir)
    assert obs.outcome == "intact"
    assert len(obs.evidence["checked"]) == 1
