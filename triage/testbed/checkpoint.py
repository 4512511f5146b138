"""Megatron checkpoints as Megatron writes them, and loading them back with Megatron's messages.

    <dir>/latest_checkpointed_iteration.txt      "N" or "release"
    <dir>/iter_{N:07d}/  (or <dir>/release/)
        torch_dist:  __0_0.distcp  .metadata  common.pt  metadata.json
        torch:       mp_rank_{tp:02d}[_{pp:03d}]/model_optim_rng.pt

torch_dist goes through `torch.distributed.checkpoint` with Megatron's sharded keys:
transformer layers stacked along a leading dimension of size num_layers
(`decoder.layers.self_attention.linear_qkv.weight` [L, ...]), full (TP-merged) tensors,
optimizer moments under `optimizer.state.exp_avg.<key>`; `common.pt` holds
`{"args": argparse.Namespace, "iteration", "checkpoint_version", ...}`. The legacy
format keeps each rank's own shard under its local (stage-relative) layer names.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import warnings
from pathlib import Path
from typing import Any

import torch

from triage.testbed.convert import LAYER, gather_tp, shard_for_tp, to_global_name, to_local_name

TRACKER = "latest_checkpointed_iteration.txt"
STACKED = re.compile(r"^decoder\.layers\.(\d+)\.(.+)$")
CHECKPOINT_VERSION = 3.0


def iteration_dir(root: Path, iteration: int | str) -> Path:
    return root / ("release" if iteration == "release" else f"iter_{int(iteration):07d}")


def legacy_rank_dir(tp_rank: int, pp_rank: int, pp_size: int) -> str:
    return f"mp_rank_{tp_rank:02d}" if pp_size == 1 else f"mp_rank_{tp_rank:02d}_{pp_rank:03d}"


def read_tracker(root: Path) -> int | str | None:
    path = root / TRACKER
    if not path.is_file():
        return None
    text = path.read_text().strip()
    return "release" if text == "release" else int(text)


def _plain_args(args: argparse.Namespace) -> argparse.Namespace:
    """The saved arguments: plain values only (what weights_only loading accepts), testbed flags dropped."""
    out = {}
    for k, v in vars(args).items():
        if k.startswith("testbed_"):
            continue
        if isinstance(v, (str, int, float, bool)) or v is None:
            out[k] = v
        elif isinstance(v, (list, tuple)) and all(isinstance(x, (str, int, float, bool)) for x in v):
            out[k] = list(v)
        else:
            out[k] = str(v)
    return argparse.Namespace(**out)


# -- global (TP-merged, PP-merged) state <-> per-rank local state --------------------------

def merge_local_states(local: dict[tuple[int, int], dict[str, torch.Tensor]], num_layers: int, tp: int,
                       pp: int) -> dict[str, torch.Tensor]:
    """Global full tensors from every (tp_rank, pp_rank)'s local state dict."""
    out: dict[str, torch.Tensor] = {}
    per_stage = num_layers // pp
    for pp_rank in range(pp):
        names = local[(0, pp_rank)].keys()
        for name in names:
            full = gather_tp(name, [local[(t, pp_rank)][name] for t in range(tp)])
            out[to_global_name(name, pp_rank * per_stage)] = full
    return out


def local_state(global_state: dict[str, torch.Tensor], num_layers: int, tp: int, tp_rank: int, pp: int,
                pp_rank: int) -> dict[str, torch.Tensor]:
    """One (TP rank, PP stage)'s shard of a global state, under the stage's local layer ids."""
    per_stage = num_layers // pp
    start, end = pp_rank * per_stage, (pp_rank + 1) * per_stage
    out = {}
    first, last = pp_rank == 0, pp_rank == pp - 1
    for name, tensor in global_state.items():
        if name.startswith("embedding.") and not first:
            continue
        if (name.startswith("output_layer.") or name.startswith("decoder.final_layernorm.")) and not last:
            continue
        local = to_local_name(name, start, end)
        if local is None:
            continue
        out[local] = shard_for_tp(name, tensor, tp, tp_rank)
    return out


def _stack(state: dict[str, torch.Tensor], num_layers: int) -> dict[str, torch.Tensor]:
    stacked: dict[str, list[torch.Tensor | None]] = {}
    out: dict[str, torch.Tensor] = {}
    for name, tensor in state.items():
        m = STACKED.match(name)
        if m:
            stacked.setdefault(f"decoder.layers.{m.group(2)}", [None] * num_layers)[int(m.group(1))] = tensor
        else:
            out[name] = tensor
    for key, layers in stacked.items():
        if any(t is None for t in layers):
            raise ValueError(f"{key}: missing layers in the state to save")
        out[key] = torch.stack(layers)
    return out


def _unstack(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    out = {}
    for key, tensor in state.items():
        if key.startswith("decoder.layers."):
            rest = key[len("decoder.layers."):]
            for i in range(tensor.shape[0]):
                out[f"decoder.layers.{i}.{rest}"] = tensor[i].clone()
        else:
            out[key] = tensor
    return out


# -- saving --------------------------------------------------------------------------------

def save_torch_dist(root: Path, iteration: int | str, args: argparse.Namespace, model: dict[str, torch.Tensor],
                    optimizer: dict[str, dict[str, torch.Tensor]] | None, num_layers: int,
                    scheduler_state: dict[str, Any] | None = None) -> Path:
    import torch.distributed.checkpoint as dcp

    out = iteration_dir(root, iteration)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    sharded = {k: v.detach().contiguous().clone() for k, v in _stack(model, num_layers).items()}
    if optimizer:
        for moment, states in optimizer.items():
            for k, v in _stack(states, num_layers).items():
                sharded[f"optimizer.state.{moment}.{k}"] = v.detach().contiguous().clone()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        dcp.save(sharded, checkpoint_id=str(out), no_dist=True)
    torch.save({"args": _plain_args(args), "checkpoint_version": CHECKPOINT_VERSION,
                "iteration": 0 if iteration == "release" else int(iteration),
                "num_floating_point_operations_so_far": 0, "opt_param_scheduler": scheduler_state or {}},
               out / "common.pt")
    (out / "metadata.json").write_text(json.dumps({"sharded_backend": "torch_dist", "sharded_backend_version": 1,
                                                    "common_backend": "torch", "common_backend_version": 1}))
    return out


def save_legacy_rank(root: Path, iteration: int | str, args: argparse.Namespace, model: dict[str, torch.Tensor],
                     optimizer: dict[str, dict[str, torch.Tensor]] | None, tp_rank: int, pp_rank: int, pp_size: int,
                     scheduler_state: dict[str, Any] | None = None) -> Path:
    out = iteration_dir(root, iteration) / legacy_rank_dir(tp_rank, pp_rank, pp_size)
    out.mkdir(parents=True, exist_ok=True)
    payload = {
        "args": _plain_args(args),
        "checkpoint_version": CHECKPOINT_VERSION,
        "iteration": 0 if iteration == "release" else int(iteration),
        "model": {k: v.detach().clone() for k, v in model.items()},
        "optimizer": {"state": optimizer or {}},
        "opt_param_scheduler": scheduler_state or {},
        "rng_state": [{"random_rng_state": random.getstate(), "torch_rng_state": torch.get_rng_state()}],
        "num_floating_point_operations_so_far": 0,
    }
    torch.save(payload, out / "model_optim_rng.pt")
    return out / "model_optim_rng.pt"


def write_tracker(root: Path, iteration: int | str) -> None:
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / (TRACKER + ".tmp")
    tmp.write_text(str(iteration))
    os.replace(tmp, root / TRACKER)


# -- loading -------------------------------------------------------------------------------

def checkpoint_format(path: Path) -> str:
    return "torch_dist" if (path / "metadata.json").exists() or (path / ".metadata").exists() else "torch"


def load_torch_dist(path: Path, shapes: dict[str, torch.Size], num_layers: int,
                    with_optimizer: bool = False) -> tuple[dict[str, torch.Tensor], dict[str, dict[str, torch.Tensor]]]:
    """Full global tensors from a torch_dist iteration directory; `shapes` are the global (unstacked) shapes."""
    import torch.distributed.checkpoint as dcp

    template: dict[str, torch.Tensor] = {}
    for key, t in _stack({k: torch.empty(s) for k, s in shapes.items()}, num_layers).items():
        template[key] = torch.empty_like(t)
        if with_optimizer:
            for moment in ("exp_avg", "exp_avg_sq"):
                template[f"optimizer.state.{moment}.{key}"] = torch.empty_like(t)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        dcp.load(template, checkpoint_id=str(path), no_dist=True)
    model = _unstack({k: v for k, v in template.items() if not k.startswith("optimizer.")})
    optim: dict[str, dict[str, torch.Tensor]] = {}
    if with_optimizer:
        for moment in ("exp_avg", "exp_avg_sq"):
            prefix = f"optimizer.state.{moment}."
            optim[moment] = _unstack({k[len(prefix):]: v for k, v in template.items() if k.startswith(prefix)})
    return model, optim


def load_legacy_rank(path: Path, tp_rank: int, pp_rank: int, pp_size: int) -> dict[str, Any]:
    file = path / legacy_rank_dir(tp_rank, pp_rank, pp_size) / "model_optim_rng.pt"
    with torch.serialization.safe_globals([argparse.Namespace]):
        return torch.load(file, weights_only=True)


def unstacked_layer_name(name: str) -> bool:
    return bool(LAYER.match(name))


def read_torch_dist(path: Path, unstack: bool = True) -> dict[str, torch.Tensor]:
    """Every tensor of a torch_dist iteration directory, by its sharded key (layers unstacked to
    `decoder.layers.N.*` when `unstack`); shapes come from the `.metadata` file."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata

    meta = dcp.FileSystemReader(str(path)).read_metadata()
    template = {k: torch.empty(m.size, dtype=m.properties.dtype)
                for k, m in meta.state_dict_metadata.items() if isinstance(m, TensorStorageMetadata)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        dcp.load(template, checkpoint_id=str(path), no_dist=True)
    if not unstack:
        return template
    model = {k: v for k, v in template.items() if not k.startswith("optimizer.")}
    return _unstack(model)
