"""Streaming checkpoint readers: safetensors, Megatron torch_dist and legacy, torch state dicts.

The module-level builders write tiny synthetic checkpoints in the real layouts (they are
imported by the convert and compare tests too): an HF state dict, its Megatron
equivalent (per-group fused QKV, GLU fc1 = [gate; up], layer norms fused into linear
layers), Megatron legacy shards split by TP / PP, and a torch_dist directory with
Megatron's stacked layer axis and per-layer / per-TP-rank chunks.
"""

from __future__ import annotations

import argparse
import contextlib
import enum
import io
import json
import os
import pickle
import subprocess
import sys
import textwrap
import types
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import safetensors.torch
import torch

from triage.errors import BadInput, CorruptArtifact, UnsafeArtifact
from triage.weights.readers import (
    LegacyMegatronReader,
    SafetensorsReader,
    TorchDistReader,
    TorchStateDictReader,
    open_checkpoint,
    open_weights,
    resolve_iteration_dir,
)

ROOT = Path(__file__).resolve().parent.parent


# --- builders (shared with the other weights tests) -------------------------------------------


def hf_config(model_type: str = "llama", layers: int = 2, tie: bool = False, hidden: int = 16, heads: int = 4,
              groups: int = 2, ffn: int = 24, vocab: int = 40, theta: float = 10000.0) -> dict:
    return {
        "model_type": model_type, "architectures": ["X"], "hidden_size": hidden, "num_attention_heads": heads,
        "num_key_value_heads": groups, "head_dim": hidden // heads, "intermediate_size": ffn,
        "num_hidden_layers": layers, "vocab_size": vocab, "tie_word_embeddings": tie, "rope_theta": theta,
        "max_position_embeddings": 64, "rms_norm_eps": 1e-6,
    }


def make_hf_state(cfg: dict, seed: int = 0, dtype: torch.dtype = torch.float32) -> dict[str, torch.Tensor]:
    """Random HF-named weights of a Llama / Qwen2 (qkv bias) / Qwen3 (q_norm, k_norm) model."""
    g = torch.Generator().manual_seed(seed)
    h, hd = cfg["hidden_size"], cfg["head_dim"]
    nq, nkv, f, v = cfg["num_attention_heads"] * hd, cfg["num_key_value_heads"] * hd, cfg["intermediate_size"], cfg["vocab_size"]

    def r(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g).to(dtype)

    def norm(n: int) -> torch.Tensor:
        return (1 + 0.1 * torch.randn(n, generator=g)).to(dtype)

    sd = {"model.embed_tokens.weight": r(v, h)}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        sd |= {p + "self_attn.q_proj.weight": r(nq, h), p + "self_attn.k_proj.weight": r(nkv, h),
               p + "self_attn.v_proj.weight": r(nkv, h), p + "self_attn.o_proj.weight": r(h, nq),
               p + "mlp.gate_proj.weight": r(f, h), p + "mlp.up_proj.weight": r(f, h),
               p + "mlp.down_proj.weight": r(h, f), p + "input_layernorm.weight": norm(h),
               p + "post_attention_layernorm.weight": norm(h)}
        if cfg["model_type"] == "qwen2":
            sd |= {p + "self_attn.q_proj.bias": r(nq), p + "self_attn.k_proj.bias": r(nkv),
                   p + "self_attn.v_proj.bias": r(nkv)}
        if cfg["model_type"] == "qwen3":
            sd |= {p + "self_attn.q_norm.weight": norm(hd), p + "self_attn.k_norm.weight": norm(hd)}
    sd["model.norm.weight"] = norm(h)
    if not cfg["tie_word_embeddings"]:
        sd["lm_head.weight"] = r(v, h)
    return sd


def to_megatron(hf: dict[str, torch.Tensor], cfg: dict, padded_vocab: int | None = None) -> dict[str, torch.Tensor]:
    """The global Megatron state dict holding the same weights (what the trainer would save)."""
    groups, hd = cfg["num_key_value_heads"], cfg["head_dim"]
    qpg = cfg["num_attention_heads"] // groups

    def fuse_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        rest = q.shape[1:]
        q = q.reshape(groups, qpg * hd, *rest)
        k = k.reshape(groups, hd, *rest)
        v = v.reshape(groups, hd, *rest)
        return torch.cat([q, k, v], dim=1).reshape(-1, *rest).contiguous()

    def pad(t: torch.Tensor) -> torch.Tensor:
        if padded_vocab and padded_vocab > t.shape[0]:
            return torch.cat([t, torch.zeros(padded_vocab - t.shape[0], t.shape[1], dtype=t.dtype)])
        return t

    m = {"embedding.word_embeddings.weight": pad(hf["model.embed_tokens.weight"])}
    for i in range(cfg["num_hidden_layers"]):
        p, d = f"model.layers.{i}.", f"decoder.layers.{i}."
        m[d + "self_attention.linear_qkv.weight"] = fuse_qkv(
            hf[p + "self_attn.q_proj.weight"], hf[p + "self_attn.k_proj.weight"], hf[p + "self_attn.v_proj.weight"])
        if p + "self_attn.q_proj.bias" in hf:
            m[d + "self_attention.linear_qkv.bias"] = fuse_qkv(
                hf[p + "self_attn.q_proj.bias"], hf[p + "self_attn.k_proj.bias"], hf[p + "self_attn.v_proj.bias"])
        m[d + "self_attention.linear_qkv.layer_norm_weight"] = hf[p + "input_layernorm.weight"]
        m[d + "self_attention.linear_proj.weight"] = hf[p + "self_attn.o_proj.weight"]
        if p + "self_attn.q_norm.weight" in hf:
            m[d + "self_attention.q_layernorm.weight"] = hf[p + "self_attn.q_norm.weight"]
            m[d + "self_attention.k_layernorm.weight"] = hf[p + "self_attn.k_norm.weight"]
        m[d + "mlp.linear_fc1.weight"] = torch.cat([hf[p + "mlp.gate_proj.weight"], hf[p + "mlp.up_proj.weight"]])
        m[d + "mlp.linear_fc1.layer_norm_weight"] = hf[p + "post_attention_layernorm.weight"]
        m[d + "mlp.linear_fc2.weight"] = hf[p + "mlp.down_proj.weight"]
    m["decoder.final_layernorm.weight"] = hf["model.norm.weight"]
    if "lm_head.weight" in hf:
        m["output_layer.weight"] = pad(hf["lm_head.weight"])
    return m


def megatron_args(cfg: dict, tp: int = 1, pp: int = 1, **extra: object) -> argparse.Namespace:
    return argparse.Namespace(
        hidden_size=cfg["hidden_size"], num_attention_heads=cfg["num_attention_heads"],
        num_query_groups=cfg["num_key_value_heads"], group_query_attention=True, kv_channels=cfg["head_dim"],
        num_layers=cfg["num_hidden_layers"], ffn_hidden_size=cfg["intermediate_size"], swiglu=True,
        tensor_model_parallel_size=tp, pipeline_model_parallel_size=pp, expert_model_parallel_size=1,
        untie_embeddings_and_output_weights=not cfg["tie_word_embeddings"], rotary_base=cfg["rope_theta"],
        add_qkv_bias=cfg["model_type"] == "qwen2", qk_layernorm=cfg["model_type"] == "qwen3", **extra)


def _tp_shard(name: str, t: torch.Tensor, tp: int, rank: int) -> torch.Tensor:
    """One TP rank's shard, cut the way Megatron's parallel layers hold it."""
    if tp == 1:
        return t
    if name.endswith("linear_fc1.weight"):  # GLU: each rank holds [gate_i; up_i]
        gate, up = t.chunk(2)
        return torch.cat([gate.chunk(tp)[rank], up.chunk(tp)[rank]]).clone()
    if name.endswith(("linear_qkv.weight", "linear_qkv.bias", "word_embeddings.weight", "output_layer.weight")):
        return t.chunk(tp, dim=0)[rank].clone()
    if name.endswith(("linear_proj.weight", "linear_fc2.weight")):
        return t.chunk(tp, dim=1)[rank].clone()
    return t.clone()


def write_legacy(root: Path, meg: dict[str, torch.Tensor], cfg: dict, tp: int = 1, pp: int = 1,
                 iteration: int = 7, args: argparse.Namespace | None = None) -> Path:
    """A legacy Megatron checkpoint: <root>/iter_XXXXXXX/mp_rank_TT[_PPP]/model_optim_rng.pt + tracker."""
    layers = cfg["num_hidden_layers"]
    per = layers // pp
    it = root / f"iter_{iteration:07d}"
    args = args or megatron_args(cfg, tp, pp)
    for s in range(pp):
        local: dict[str, torch.Tensor] = {}
        for name, t in meg.items():
            if name.startswith("decoder.layers."):
                layer = int(name.split(".")[2])
                if s * per <= layer < (s + 1) * per:
                    local[name.replace(f"layers.{layer}.", f"layers.{layer - s * per}.", 1)] = t
            elif name.startswith("embedding.") and s == 0 or not name.startswith("embedding.") and s == pp - 1:
                local[name] = t
        for r in range(tp):
            d = it / (f"mp_rank_{r:02d}" + (f"_{s:03d}" if pp > 1 else ""))
            d.mkdir(parents=True)
            model = {n: _tp_shard(n, t, tp, r) for n, t in local.items()}
            model |= {n.replace(".weight", "._extra_state"): None for n in local if "linear_qkv.weight" in n}
            torch.save({"args": args, "iteration": iteration, "checkpoint_version": 3.0, "model": model,
                        "rng_state": [{"np_rng_state": np.random.get_state(), "torch_rng_state": torch.get_rng_state()}]},
                       d / "model_optim_rng.pt")
    (root / "latest_checkpointed_iteration.txt").write_text(str(iteration))
    return root


@contextlib.contextmanager
def single_process_group() -> Iterator[None]:
    """A world of one (gloo over an in-memory store, loopback only) for torch's ShardedTensor."""
    import torch.distributed as dist

    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def write_torch_dist(root: Path, meg: dict[str, torch.Tensor], cfg: dict, tp: int = 2, iteration: int = 7,
                     stacked: bool = True) -> Path:
    """A torch_dist checkpoint as Megatron writes it: layers stacked on a leading axis, one chunk per layer and TP rank."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed._shard.sharded_tensor import Shard, ShardMetadata, init_from_local_shards

    it = root / f"iter_{iteration:07d}"
    layers = cfg["num_hidden_layers"]
    stacks: dict[str, list[torch.Tensor]] = {}
    flat: dict[str, torch.Tensor] = {}
    for name, t in meg.items():
        if stacked and name.startswith("decoder.layers."):
            parts = name.split(".")
            stacks.setdefault(".".join(parts[:2] + parts[3:]), []).append(t)
        else:
            flat[name] = t
    if not stacked:  # a plain DCP save, no process group: one chunk per tensor
        state = dict(flat)
        state["optimizer.state.exp_avg.decoder.final_layernorm.weight"] = torch.zeros(cfg["hidden_size"])
        dcp.save(state, checkpoint_id=str(it), no_dist=True)
        (root / "latest_checkpointed_iteration.txt").write_text(str(iteration))
        return root
    with single_process_group():
        state: dict[str, object] = {}
        for key, ts in stacks.items():
            assert len(ts) == layers
            full = torch.stack(ts)
            split_dim = 1 if key.endswith(("linear_qkv.weight", "linear_fc1.weight", "linear_qkv.bias")) else (
                2 if key.endswith(("linear_proj.weight", "linear_fc2.weight")) else None)
            n = 2 * tp if key.endswith("linear_fc1.weight") else tp
            shards = []
            for layer in range(layers):
                pieces = [full[layer:layer + 1]] if split_dim is None else list(full[layer:layer + 1].chunk(n, dim=split_dim))
                start = 0
                for piece in pieces:
                    offsets = [layer] + [0] * (full.dim() - 1)
                    if split_dim is not None:
                        offsets[split_dim] = start
                        start += piece.shape[split_dim]
                    shards.append(Shard(piece.clone(), ShardMetadata(offsets, list(piece.shape), "rank:0/cpu")))
            state[key] = init_from_local_shards(shards, list(full.shape))
        state.update(flat)
        state["optimizer.state.exp_avg.decoder.final_layernorm.weight"] = torch.zeros(cfg["hidden_size"])
        state["rng_state"] = io.BytesIO(pickle.dumps({"seed": 1}))
        dcp.save(state, checkpoint_id=str(it))
    torch.save({"args": megatron_args(cfg, tp)}, it / "common.pt")
    (it / "metadata.json").write_text(json.dumps({"sharded_backend": "torch_dist"}))
    (root / "latest_checkpointed_iteration.txt").write_text(str(iteration))
    return root


def write_safetensors(d: Path, sd: dict[str, torch.Tensor], cfg: dict | None = None, shards: int = 1) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    names = list(sd)
    if shards == 1:
        safetensors.torch.save_file({n: sd[n].contiguous() for n in names}, d / "model.safetensors")
    else:
        weight_map = {}
        for i in range(shards):
            part = names[i::shards]
            fname = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
            safetensors.torch.save_file({n: sd[n].contiguous() for n in part}, d / fname)
            weight_map |= {n: fname for n in part}
        (d / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    if cfg is not None:
        (d / "config.json").write_text(json.dumps(cfg))
    return d


# --- tests -------------------------------------------------------------------------------------

CFG = hf_config("qwen2", layers=4)


@pytest.fixture(scope="module")
def hf_state() -> dict[str, torch.Tensor]:
    return make_hf_state(CFG, seed=1)


@pytest.fixture(scope="module")
def meg_state(hf_state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return to_megatron(hf_state, CFG)


def _assert_same(got: dict[str, torch.Tensor], want: dict[str, torch.Tensor]) -> None:
    assert sorted(got) == sorted(want)
    bad = [n for n in want if not torch.equal(got[n], want[n])]
    assert not bad, f"differ: {bad[:5]}"


@pytest.mark.parametrize("shards", [1, 3])
def test_safetensors_lists_without_reading_and_streams_every_tensor(tmp_path, hf_state, shards):
    d = write_safetensors(tmp_path / "hf", hf_state, CFG, shards=shards)
    reader = open_weights(d)
    assert isinstance(reader, SafetensorsReader)
    listing = {i.name: i for i in reader.listing()}
    assert reader.bytes_read == 0
    assert listing["model.layers.3.mlp.gate_proj.weight"].shape == (24, 16)
    assert listing["model.layers.3.mlp.gate_proj.weight"].dtype == torch.float32
    _assert_same(dict(reader.tensors()), hf_state)
    assert reader.bytes_read == sum(t.numel() * 4 for t in hf_state.values())


def test_truncated_safetensors_is_corrupt_artifact_naming_the_file(tmp_path, hf_state):
    d = write_safetensors(tmp_path / "hf", hf_state, shards=2)
    victim = d / "model-00002-of-00002.safetensors"
    data = victim.read_bytes()
    victim.write_bytes(data[: len(data) - 100])
    with pytest.raises(CorruptArtifact) as exc:
        open_weights(d)
    assert str(victim) in str(exc.value) and "truncated" in str(exc.value)


def test_torch_dist_unstacks_layers_and_assembles_tp_chunks(tmp_path, meg_state):
    root = write_torch_dist(tmp_path / "ckpt", meg_state, CFG, tp=2)
    reader = open_checkpoint(root)
    assert isinstance(reader, TorchDistReader)
    assert reader.iteration == 7 and reader.tracker_used and reader.naming == "megatron"
    names = [i.name for i in reader.listing()]
    assert "decoder.layers.3.self_attention.linear_qkv.bias" in names
    assert not any("optimizer" in n or "rng_state" in n for n in names)  # model weights only
    assert reader.saved_args["num_layers"] == 4  # from common.pt
    _assert_same(dict(reader.tensors()), meg_state)
    # every stored chunk read once: layers x TP pieces of each stacked tensor, plus the flat ones
    assert reader.bytes_read >= sum(t.numel() * 4 for t in meg_state.values())


@pytest.mark.filterwarnings("ignore:torch.distributed is disabled")
def test_torch_dist_without_stacking_reads_plain_dcp(tmp_path, meg_state):
    root = write_torch_dist(tmp_path / "ckpt", meg_state, CFG, stacked=False)
    _assert_same(dict(open_checkpoint(root).tensors()), meg_state)


def test_torch_dist_truncated_shard_names_the_distcp_file(tmp_path, meg_state):
    root = write_torch_dist(tmp_path / "ckpt", meg_state, CFG)
    shard = next((root / "iter_0000007").glob("*.distcp"))
    shard.write_bytes(shard.read_bytes()[:-500])
    with pytest.raises(CorruptArtifact) as exc:
        list(open_checkpoint(root).tensors())
    assert str(shard) in str(exc.value) and "truncated" in str(exc.value)


def test_torch_dist_garbled_bytes_name_the_file_and_tensor(tmp_path, meg_state):
    root = write_torch_dist(tmp_path / "ckpt", meg_state, CFG)
    shard = next((root / "iter_0000007").glob("*.distcp"))
    data = bytearray(shard.read_bytes())
    data[0:len(data):97] = b"\x00" * len(data[0:len(data):97])  # same size, content destroyed
    shard.write_bytes(bytes(data))
    with pytest.raises(CorruptArtifact) as exc:
        list(open_checkpoint(root).tensors())
    assert str(shard) in str(exc.value) and "tensor" in str(exc.value)


def test_torch_dist_without_metadata_says_the_save_did_not_finish(tmp_path, meg_state):
    root = write_torch_dist(tmp_path / "ckpt", meg_state, CFG)
    (root / "iter_0000007" / ".metadata").unlink()
    with pytest.raises(CorruptArtifact) as exc:
        open_checkpoint(root)
    assert ".metadata" in str(exc.value) and "did not finish" in str(exc.value)


def test_torch_dist_chunks_read_the_same_through_torch_load(tmp_path, meg_state, monkeypatch):
    import triage.weights.readers as readers

    root = write_torch_dist(tmp_path / "ckpt", meg_state, CFG, tp=2)
    monkeypatch.setattr(readers, "_saved_tensor_layout", lambda pkl: None)  # no memory-mapped views
    _assert_same(dict(open_checkpoint(root).tensors()), meg_state)


def test_saved_tensor_layout_reads_a_pickle_without_running_it(tmp_path):
    from triage.weights.readers import _saved_tensor_layout

    buf = io.BytesIO()
    torch.save(torch.zeros(3, 4, dtype=torch.bfloat16), buf)
    import zipfile

    z = zipfile.ZipFile(io.BytesIO(buf.getvalue()))
    pkl = z.read(next(n for n in z.namelist() if n.endswith("data.pkl")))
    assert _saved_tensor_layout(pkl) == (torch.bfloat16, "0", 12, 0, (3, 4), (4, 1))
    marker = tmp_path / "pwned"
    assert _saved_tensor_layout(pickle.dumps(_Mkdir(str(marker)))) is None
    assert not marker.exists()


def test_torch_dist_moe_experts_unstack_per_layer_and_expert(tmp_path):
    import torch.distributed.checkpoint as dcp
    from torch.distributed._shard.sharded_tensor import Shard, ShardMetadata, init_from_local_shards

    layers, experts = 2, 4
    fc1 = torch.randn(layers, experts, 6, 4)
    router = torch.randn(layers, experts, 4)
    with single_process_group():
        shards = [Shard(fc1[i:i + 1, e:e + 1].clone(), ShardMetadata([i, e, 0, 0], [1, 1, 6, 4], "rank:0/cpu"))
                  for i in range(layers) for e in range(experts)]
        state = {"decoder.layers.mlp.experts.experts.linear_fc1.weight": init_from_local_shards(shards, list(fc1.shape)),
                 "decoder.layers.mlp.router.weight": init_from_local_shards(
                     [Shard(router[i:i + 1].clone(), ShardMetadata([i, 0, 0], [1, experts, 4], "rank:0/cpu"))
                      for i in range(layers)], list(router.shape))}
        dcp.save(state, checkpoint_id=str(tmp_path / "iter_0000002"))
    got = dict(open_checkpoint(tmp_path).tensors())
    assert torch.equal(got["decoder.layers.1.mlp.experts.local_experts.3.linear_fc1.weight"], fc1[1, 3])
    assert torch.equal(got["decoder.layers.0.mlp.router.weight"], router[0])
    assert len(got) == layers * experts + layers


def test_legacy_expert_parallel_ranks_get_global_expert_ids(tmp_path):
    experts, ep = 4, 2
    w = {e: torch.randn(6, 4) for e in range(experts)}
    dense = torch.randn(4)
    for rank in range(ep):
        d = tmp_path / "iter_0000003" / f"mp_rank_00_{rank:03d}"
        d.mkdir(parents=True)
        local = {f"decoder.layers.0.mlp.experts.local_experts.{i}.linear_fc1.weight": w[rank * 2 + i] for i in range(2)}
        args = argparse.Namespace(tensor_model_parallel_size=1, pipeline_model_parallel_size=1,
                                  expert_model_parallel_size=ep, num_experts=experts, swiglu=True)
        torch.save({"args": args, "model": local | {"decoder.final_layernorm.weight": dense}}, d / "model_optim_rng.pt")
    got = dict(open_checkpoint(tmp_path).tensors())
    assert sorted(got) == sorted([f"decoder.layers.0.mlp.experts.local_experts.{e}.linear_fc1.weight"
                                  for e in range(experts)] + ["decoder.final_layernorm.weight"])
    assert all(torch.equal(got[f"decoder.layers.0.mlp.experts.local_experts.{e}.linear_fc1.weight"], w[e])
               for e in range(experts))


class _Mkdir:
    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (os.mkdir, (self.path,))


def test_hostile_dcp_metadata_is_refused_without_running_it(tmp_path):
    it = tmp_path / "iter_0000001"
    it.mkdir()
    marker = tmp_path / "pwned"
    (it / ".metadata").write_bytes(pickle.dumps({"state_dict_metadata": _Mkdir(str(marker))}))
    (it / "__0_0.distcp").write_bytes(b"")
    with pytest.raises(UnsafeArtifact) as exc:
        TorchDistReader(it)
    assert "posix.mkdir" in str(exc.value) or "os.mkdir" in str(exc.value)
    assert not marker.exists()


def _fake_megatron_enum():
    """Pickle args holding a Megatron enum, as real checkpoints do, without Megatron installed."""
    mod = types.ModuleType("megatron.core.transformer.enums")

    class AttnBackend(enum.Enum):
        flash = 1

    AttnBackend.__module__ = mod.__name__
    AttnBackend.__qualname__ = "AttnBackend"
    mod.AttnBackend = AttnBackend
    return mod, AttnBackend


def test_legacy_merges_tp_shards_and_pp_stages_into_global_names(tmp_path, meg_state, monkeypatch):
    mod, backend = _fake_megatron_enum()
    for name in ("megatron", "megatron.core", "megatron.core.transformer"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, mod.__name__, mod)
    args = megatron_args(CFG, tp=2, pp=2, attention_backend=backend.flash)
    root = write_legacy(tmp_path / "ckpt", meg_state, CFG, tp=2, pp=2, args=args)
    for name in ("megatron", "megatron.core", "megatron.core.transformer", mod.__name__):
        monkeypatch.delitem(sys.modules, name)  # reading must not need Megatron
    reader = open_checkpoint(root)
    assert isinstance(reader, LegacyMegatronReader)
    assert (reader.tp_size, reader.pp_size) == (2, 2)
    assert reader.layer_offsets() == {(0, 0): 0, (0, 1): 2}
    listing = {i.name: i.shape for i in reader.listing()}
    assert listing["decoder.layers.3.mlp.linear_fc1.weight"] == (48, 16)  # merged, global layer id
    _assert_same(dict(reader.tensors()), meg_state)


def test_legacy_missing_rank_names_the_directory(tmp_path, meg_state):
    root = write_legacy(tmp_path / "ckpt", meg_state, CFG, tp=2, pp=2)
    victim = root / "iter_0000007" / "mp_rank_01_001"
    for f in victim.iterdir():
        f.unlink()
    victim.rmdir()
    with pytest.raises(CorruptArtifact) as exc:
        open_checkpoint(root)
    assert "mp_rank_01_001" in str(exc.value)


def test_legacy_truncated_file_names_it(tmp_path, meg_state):
    root = write_legacy(tmp_path / "ckpt", meg_state, CFG, tp=2)
    victim = root / "iter_0000007" / "mp_rank_01" / "model_optim_rng.pt"
    victim.write_bytes(victim.read_bytes()[:3000])
    with pytest.raises(CorruptArtifact) as exc:
        list(open_checkpoint(root).tensors())
    assert str(victim) in str(exc.value)


def test_legacy_hostile_pickle_is_unsafe(tmp_path):
    d = tmp_path / "iter_0000001" / "mp_rank_00"
    d.mkdir(parents=True)
    marker = tmp_path / "pwned"
    torch.save({"model": {}, "args": _Mkdir(str(marker))}, d / "model_optim_rng.pt")
    with pytest.raises(UnsafeArtifact):
        open_checkpoint(tmp_path)
    assert not marker.exists()


def test_tracker_resolution(tmp_path):
    for it in (3, 9):
        (tmp_path / f"iter_{it:07d}").mkdir()
    assert resolve_iteration_dir(tmp_path)[1:] == (9, False)  # no tracker: the newest
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("3\n")
    assert resolve_iteration_dir(tmp_path) == (tmp_path / "iter_0000003", 3, True)
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("release")
    (tmp_path / "release").mkdir()
    assert resolve_iteration_dir(tmp_path)[0] == tmp_path / "release"
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("12")
    with pytest.raises(CorruptArtifact) as exc:
        resolve_iteration_dir(tmp_path)
    assert "latest_checkpointed_iteration.txt" in str(exc.value) and "iter_0000012" in str(exc.value)
    with pytest.raises(BadInput):
        resolve_iteration_dir(tmp_path, iteration=4)


def test_torch_state_dict_dump_under_a_wrapper_key(tmp_path, hf_state):
    torch.save({"state_dict": {"module." + k: v for k, v in hf_state.items()}}, tmp_path / "dump.pt")
    reader = open_weights(tmp_path / "dump.pt")
    assert isinstance(reader, TorchStateDictReader)
    _assert_same({n: reader.get(n) for n in reader.names()}, hf_state)


# --- memory ------------------------------------------------------------------------------------

MEMORY_PROBE = textwrap.dedent("""
    import json, re, sys
    sys.path.insert(0, {root!r})
    import torch
    import triage.weights.readers as readers
    readers.MAPPED_WINDOW = {window}

    def status(key):
        return int(re.search(key + r":\\s+(\\d+) kB", open("/proc/self/status").read()).group(1)) * 1024

    out = {{}}
    for layout, path in {paths!r}.items():
        reader = readers.open_checkpoint(path)
        listing = reader.listing()
        open("/proc/self/clear_refs", "w").write("5")  # restart the peak-RSS mark (VmHWM) from here
        base = status("VmRSS")
        for name, t in reader.tensors():
            assert bool(torch.isfinite(t.float().sum()))  # touch every element
        del reader, t
        out[layout] = [status("VmHWM") - base, len(listing), max(i.nbytes for i in listing),
                       sum(i.nbytes for i in listing)]
    print(json.dumps(out))
""")
WINDOW = 8 * 2**20


@pytest.fixture(scope="module")
def peak_growth(tmp_path_factory) -> dict[str, list[int]]:
    """Peak RSS growth while streaming a ~190 MB model (2-9 MB tensors) in each layout, in a fresh process."""
    base = tmp_path_factory.mktemp("many")
    cfg = hf_config("llama", layers=8, hidden=768, heads=12, groups=12, ffn=1536, vocab=1024)
    hf = make_hf_state(cfg, seed=3)
    meg = to_megatron(hf, cfg)
    paths = {"safetensors": str(write_safetensors(base / "safetensors", hf)),
             "torch_dist": str(write_torch_dist(base / "torch_dist", meg, cfg, tp=1)),
             "legacy": str(write_legacy(base / "legacy", meg, cfg, tp=2))}
    del hf, meg
    code = MEMORY_PROBE.format(root=str(ROOT), paths=paths, window=WINDOW)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env=os.environ | {"OMP_NUM_THREADS": "1"})
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


@pytest.mark.parametrize("layout", ["safetensors", "torch_dist", "legacy"])
def test_peak_memory_is_bounded_by_the_largest_tensor_not_the_model(peak_growth, layout):
    growth, count, largest, total = peak_growth[layout]
    assert count >= 50 and total > 180e6
    # the tensor, a merge / copy of it, one more in flight, the mapping window, and allocator slack
    bound = 3 * largest + WINDOW + 24 * 2**20
    assert growth < bound, f"{layout}: peak grew {growth / 2**20:.0f} MB, bound {bound / 2**20:.0f} MB, model {total / 2**20:.0f} MB"
