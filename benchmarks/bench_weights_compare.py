"""Benchmark: weights compare throughput and peak memory on a generated multi-GB checkpoint.

Generates a Llama-shaped model (TinyLlama-like dims; layers scaled to the requested
size, 2.2 GB per side by default) twice over: the engine side as sharded HF
safetensors, the trainer side as a Megatron torch_dist checkpoint (stacked layers, one
chunk per layer) or a legacy one. Then, in the same run, rounds of:

- a plain sequential read of the same files (16 MB chunks into one buffer);
- the weights compare (triage.weights.compare) in a fresh subprocess: MB/s over the
  bytes it read, peak RSS (ru_maxrss) and the RSS it had with its readers open (the constant);

each after evicting the files from the page cache (`--cache cold`, the default) or after
reading them once (`--cache warm`). Rounds alternate which of the two goes first (a
cloud disk with burst credits favours the first reader). Generation and the compare
run in child processes and this one never imports torch, so a child's ru_maxrss is its
own (Linux carries the parent's peak into a child across fork + exec).

Prints a table: compare MB/s vs plain MB/s (aim >= 0.7), peak memory vs
2 x the largest tensor + the constant. The temp dir is deleted unless --keep;
--reuse DIR measures a kept one again.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_weights_compare.py [--size-gb 2.2] [--trainer torch_dist|legacy]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHUNK = 16 * 1024 * 1024

# TinyLlama-1.1B-like: 2048 hidden, 32 heads, 4 KV groups, 5632 FFN, 32000 vocab
DIMS = {"hidden": 2048, "heads": 32, "groups": 4, "ffn": 5632, "vocab": 32000}


def hf_config(layers: int) -> dict:
    d = DIMS
    return {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": d["hidden"],
            "num_attention_heads": d["heads"], "num_key_value_heads": d["groups"], "head_dim": d["hidden"] // d["heads"],
            "intermediate_size": d["ffn"], "num_hidden_layers": layers, "vocab_size": d["vocab"],
            "tie_word_embeddings": False, "rope_theta": 10000.0, "max_position_embeddings": 2048}


def layer_params() -> int:
    d = DIMS
    hd = d["hidden"] // d["heads"]
    return 2 * d["hidden"] * d["heads"] * hd + 2 * d["hidden"] * d["groups"] * hd + 3 * d["hidden"] * d["ffn"] + 2 * d["hidden"]


def layers_for(size_gb: float, elem: int) -> int:
    fixed = (2 * DIMS["vocab"] * DIMS["hidden"] + DIMS["hidden"]) * elem
    return max(1, round((size_gb * 1e9 - fixed) / (layer_params() * elem)))


# --- generation ---------------------------------------------------------------------------------


def generate(out: Path, size_gb: float, dtype_name: str, trainer: str) -> tuple[list[Path], dict]:
    """Engine safetensors (HF names) + trainer Megatron checkpoint of the same weights; returns all files."""
    import safetensors.torch
    import torch

    dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[dtype_name]
    elem = torch.empty((), dtype=dtype).element_size()
    layers = layers_for(size_gb, elem)
    cfg = hf_config(layers)
    h, hd, g, f, v = DIMS["hidden"], DIMS["hidden"] // DIMS["heads"], DIMS["groups"], DIMS["ffn"], DIMS["vocab"]
    qpg = DIMS["heads"] // g
    gen = torch.Generator().manual_seed(0)

    def r(*shape: int) -> torch.Tensor:
        return torch.empty(shape, dtype=torch.float32).normal_(generator=gen).to(dtype)

    engine = out / "engine_weights"
    engine.mkdir(parents=True)
    (engine / "config.json").write_text(json.dumps(cfg))
    meg: dict[str, torch.Tensor] = {}
    shard: dict[str, torch.Tensor] = {}
    weight_map: dict[str, str] = {}
    shard_no = [0]

    def flush() -> None:
        if shard:
            name = f"model-{shard_no[0]:05d}.safetensors"
            safetensors.torch.save_file(shard, engine / name)
            weight_map.update({k: name for k in shard})
            shard.clear()
            shard_no[0] += 1

    def add(name: str, t: torch.Tensor) -> None:
        shard[name] = t
        if sum(x.numel() * x.element_size() for x in shard.values()) > 512 * 2**20:
            flush()

    emb = r(v, h)
    add("model.embed_tokens.weight", emb)
    meg["embedding.word_embeddings.weight"] = emb
    for i in range(layers):
        p, m = f"model.layers.{i}.", f"decoder.layers.{i}."
        q, k, vv = r(g * qpg * hd, h), r(g * hd, h), r(g * hd, h)
        gate, up = r(f, h), r(f, h)
        layer = {"self_attn.q_proj.weight": q, "self_attn.k_proj.weight": k, "self_attn.v_proj.weight": vv,
                 "self_attn.o_proj.weight": r(h, g * qpg * hd), "mlp.gate_proj.weight": gate, "mlp.up_proj.weight": up,
                 "mlp.down_proj.weight": r(h, f), "input_layernorm.weight": 1 + 0.1 * r(h),
                 "post_attention_layernorm.weight": 1 + 0.1 * r(h)}
        for name, t in layer.items():
            add(p + name, t)
        meg[m + "self_attention.linear_qkv.weight"] = torch.cat(
            [q.reshape(g, qpg * hd, h), k.reshape(g, hd, h), vv.reshape(g, hd, h)], dim=1).reshape(-1, h)
        meg[m + "self_attention.linear_qkv.layer_norm_weight"] = layer["input_layernorm.weight"]
        meg[m + "self_attention.linear_proj.weight"] = layer["self_attn.o_proj.weight"]
        meg[m + "mlp.linear_fc1.weight"] = torch.cat([gate, up])
        meg[m + "mlp.linear_fc1.layer_norm_weight"] = layer["post_attention_layernorm.weight"]
        meg[m + "mlp.linear_fc2.weight"] = layer["mlp.down_proj.weight"]
        del layer, q, k, vv, gate, up
    norm, head = 1 + 0.1 * r(h), r(v, h)
    add("model.norm.weight", norm)
    add("lm_head.weight", head)
    flush()
    (engine / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    meg["decoder.final_layernorm.weight"] = norm
    meg["output_layer.weight"] = head

    ckpt = out / "ckpt"
    if trainer == "torch_dist":
        write_torch_dist(ckpt / "iter_0000001", meg, layers)
    else:
        d = ckpt / "iter_0000001" / "mp_rank_00"
        d.mkdir(parents=True)
        torch.save({"args": argparse.Namespace(num_layers=layers, tensor_model_parallel_size=1,
                                               pipeline_model_parallel_size=1), "model": meg, "iteration": 1},
                   d / "model_optim_rng.pt")
    (ckpt / "latest_checkpointed_iteration.txt").write_text("1")
    del meg
    files = sorted(p for p in out.rglob("*") if p.is_file() and p.suffix in (".safetensors", ".distcp", ".pt"))
    return files, cfg


def write_torch_dist(it: Path, meg: dict, layers: int) -> None:
    """Megatron's layout: homogeneous layers stacked on a leading axis, stored one chunk per layer."""
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed._shard.sharded_tensor import Shard, ShardMetadata, init_from_local_shards

    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        state: dict = {}
        stacks: dict[str, list] = {}
        for name, t in meg.items():
            if name.startswith("decoder.layers."):
                parts = name.split(".")
                stacks.setdefault(".".join(parts[:2] + parts[3:]), []).append(t)
            else:
                state[name] = t
        for key, ts in stacks.items():
            shards = [Shard(t.unsqueeze(0), ShardMetadata([i] + [0] * t.dim(), [1, *t.shape], "rank:0/cpu"))
                      for i, t in enumerate(ts)]
            state[key] = init_from_local_shards(shards, [layers, *ts[0].shape])
        dcp.save(state, checkpoint_id=str(it))
    finally:
        dist.destroy_process_group()


# --- measuring ----------------------------------------------------------------------------------


def drop_cache(files: list[Path]) -> None:
    """Evict the files from the page cache (no root needed: clean pages of our own files)."""
    os.sync()
    for p in files:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def plain_read(files: list[Path]) -> tuple[int, float]:
    buf = bytearray(CHUNK)
    total = 0
    t0 = time.perf_counter()
    for p in files:
        with open(p, "rb", buffering=0) as fh:
            while n := fh.readinto(buf):
                total += n
    return total, time.perf_counter() - t0


CHILD = """
import json, resource, sys, time
sys.path.insert(0, {root!r})
import torch
from triage.weights.compare import compare_tensors, compare_weights, fingerprint, Tolerance
from triage.weights.convert import ModelDims, family_for, load_hf_config
from triage.weights.readers import open_checkpoint, open_weights

t_open = time.perf_counter()
dims = ModelDims.from_hf_config(load_hf_config({engine!r}))
checkpoint, engine = open_checkpoint({ckpt!r}), open_weights({engine!r})
largest = max(i.nbytes for i in engine.listing() + checkpoint.listing())
x = torch.randn(1 << 16)  # first use of the kernels the compare runs, so their set-up counts as constant
compare_tensors("warm-up", x, x.clone(), Tolerance(1e-2, 1e-6)), fingerprint(x)
del x
t_open = time.perf_counter() - t_open
base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
cpu0 = sum(getattr(resource.getrusage(resource.RUSAGE_SELF), k) for k in ("ru_utime", "ru_stime"))
t0 = time.perf_counter()
r = compare_weights(checkpoint, engine, dims=dims, family=family_for("llama"))
wall = time.perf_counter() - t0
use = resource.getrusage(resource.RUSAGE_SELF)
peak = use.ru_maxrss * 1024
print(json.dumps({{"outcome": r.outcome, "summary": r.summary, "bytes_read": r.evidence["bytes_read"],
                  "seconds": wall, "open_seconds": t_open, "peak_rss": peak, "base_rss": base_rss,
                  "largest": largest, "compared": r.evidence["tensors_compared"],
                  "cpu_seconds": use.ru_utime + use.ru_stime - cpu0}}))
"""


def run_generate(out: Path, size_gb: float, dtype: str, trainer: str) -> dict:
    """Generation in its own process: the parent stays small, so the compare child's ru_maxrss starts small."""
    proc = subprocess.run([sys.executable, __file__, "--child-generate", str(out), "--size-gb", str(size_gb),
                           "--dtype", dtype, "--trainer", trainer], capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        raise SystemExit(f"generation failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_compare(out: Path) -> dict:
    code = CHILD.format(root=str(ROOT), engine=str(out / "engine_weights"), ckpt=str(out / "ckpt"))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        raise SystemExit(f"compare failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-gb", type=float, default=2.2, help="size of each side's checkpoint (default 2.2)")
    ap.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16")
    ap.add_argument("--trainer", choices=["torch_dist", "legacy"], default="torch_dist")
    ap.add_argument("--rounds", type=int, default=3, help="plain read / compare pairs, interleaved")
    ap.add_argument("--cache", choices=["cold", "warm"], default="cold",
                    help="drop the files from the page cache before each measurement (cold), or read them once (warm)")
    ap.add_argument("--dir", default=None, help="parent of the temp dir (default: system temp)")
    ap.add_argument("--keep", action="store_true", help="keep the generated checkpoints")
    ap.add_argument("--pause", type=float, default=20.0,
                    help="seconds idle before each measurement, so a burst-credit disk starts each one alike")
    ap.add_argument("--reuse", default=None, help="measure a directory kept by an earlier --keep run (not deleted)")
    ap.add_argument("--child-generate", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child_generate:
        files, cfg = generate(Path(args.child_generate), args.size_gb, args.dtype, args.trainer)
        print(json.dumps({"files": [str(f) for f in files], "layers": cfg["num_hidden_layers"]}))
        return

    out = Path(args.reuse) if args.reuse else Path(tempfile.mkdtemp(prefix="bench_weights_", dir=args.dir))
    keep = args.keep or bool(args.reuse)
    try:
        t0 = time.perf_counter()
        if args.reuse:
            files = sorted(p for p in out.rglob("*") if p.is_file() and p.suffix in (".safetensors", ".distcp", ".pt"))
            cfg = json.loads((out / "engine_weights" / "config.json").read_text())
            args.trainer = "legacy" if any(p.suffix == ".pt" for p in files) else "torch_dist"
        else:
            gen = run_generate(out, args.size_gb, args.dtype, args.trainer)
            files = [Path(f) for f in gen["files"]]
            cfg = {"num_hidden_layers": gen["layers"]}
        sizes = {p: p.stat().st_size for p in files}
        engine_bytes = sum(s for p, s in sizes.items() if "engine_weights" in p.parts)
        trainer_bytes = sum(sizes.values()) - engine_bytes
        print(f"{'reused' if args.reuse else 'generated'} {cfg['num_hidden_layers']} layers ({args.dtype}): engine {engine_bytes / 1e9:.2f} GB "
              f"safetensors, trainer {trainer_bytes / 1e9:.2f} GB {args.trainer}, in {time.perf_counter() - t0:.0f} s")

        def same_cache() -> None:
            drop_cache(files)
            if args.cache == "warm":
                plain_read(files)

        plains, compares, ratios = [], [], []
        for i in range(args.rounds):
            # alternate which goes first: a disk with burst credits favours whoever reads first
            for step in (("plain", "compare") if i % 2 == 0 else ("compare", "plain")):
                same_cache()
                time.sleep(args.pause)
                if step == "plain":
                    nbytes, secs = plain_read(files)
                    plains.append(nbytes / 1e6 / secs)
                else:
                    res = run_compare(out)
                    compares.append(res)
            ratios.append(res["bytes_read"] / 1e6 / res["seconds"] / plains[-1])
            print(f"  round {i + 1} ({args.cache}, {'plain' if i % 2 == 0 else 'compare'} first): plain {plains[-1]:.0f} MB/s, compare "
                  f"{res['bytes_read'] / 1e6 / res['seconds']:.0f} MB/s, ratio {ratios[-1]:.2f} "
                  f"({res['outcome']}, {res['compared']} tensors, {res['seconds']:.1f} s wall, "
                  f"{res['cpu_seconds']:.1f} s CPU)")
        plain = statistics.median(plains)
        cmp_rates = [c["bytes_read"] / 1e6 / c["seconds"] for c in compares]
        rate = statistics.median(cmp_rates)
        largest = compares[-1]["largest"]
        peak = max(c["peak_rss"] for c in compares)
        base = min(c["base_rss"] for c in compares)
        mib = 2**20
        rows = [
            ("files (engine + trainer)", f"{sum(sizes.values()) / 1e9:.2f} GB in {len(files)} files"),
            ("plain sequential read", f"{plain:.0f} MB/s (median of {', '.join(f'{p:.0f}' for p in plains)})"),
            ("weights compare", f"{rate:.0f} MB/s (median of {', '.join(f'{c:.0f}' for c in cmp_rates)}); "
                                f"{compares[-1]['bytes_read'] / 1e9:.2f} GB read, outcome {compares[-1]['outcome']}"),
            ("ratio compare / plain", f"{statistics.median(ratios):.2f} median of the rounds' "
                                      f"({', '.join(f'{x:.2f}' for x in ratios)}; aim >= 0.70)"),
            ("largest tensor", f"{largest / mib:.0f} MiB"),
            ("peak RSS (ru_maxrss)", f"{peak / mib:.0f} MiB"),
            ("constant (RSS with readers open)", f"{base / mib:.0f} MiB"),
            ("peak - constant", f"{(peak - base) / mib:.0f} MiB = {(peak - base) / largest:.2f} x largest "
                                f"(aim <= 2 x largest + constant = {(2 * largest + base) / mib:.0f} MiB)"),
        ]
        width = max(len(k) for k, _ in rows)
        print()
        for k, v in rows:
            print(f"{k:<{width}}  {v}")
    finally:
        if keep:
            print(f"\nkept {out}")
        else:
            shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
