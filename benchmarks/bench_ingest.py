"""How fast the log scan ingests a large slime job log (and verl / TRL console logs), against `grep -c`.

    PYTHONPATH=. python benchmarks/bench_ingest.py                 # 1024 MB and 128 MB logs
    PYTHONPATH=. python benchmarks/bench_ingest.py --size-mb 256
    PYTHONPATH=. python benchmarks/bench_ingest.py --path driver.log

Writes a realistic slime-format driver log (Megatron's arguments block, SGLang and
Ray actor chatter, `step N` / `rollout N` / `perf N` metric lines every 50-100
lines, timers, weight updates, a few error lines and a traceback), or reuses
`--path`, plus a file 1/8 of its size, then for each file measures, in the same run:

- `grep -c 'step '` wall time (the page cache warmed first, best of `--repeat`);
- `scan_logs` wall time and peak RSS, each run in a fresh interpreter so the
  generator's memory does not count. A large log is scanned in parts by worker
  processes (triage.formats.log_parts): the CPU time counts theirs too, and the
  peak RSS is the larger of the scanning process's and its largest worker's.

Prints one row per file: size, grep MB/s, scan MB/s, scan/grep ratio, peak RSS.
The RSS of the two files should be about the same: the scan's memory does not
grow with the log, only its metric table does (8 bytes a value).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

_ARGUMENTS = {
    "accumulate_allreduce_grads_in_fp32": "False", "actor_num_gpus_per_node": "8", "actor_num_nodes": "1",
    "attention_backend": "AttnBackend.flash", "bf16": "True", "colocate": "True", "context_parallel_size": "1",
    "global_batch_size": "256", "hidden_size": "2560", "lr": "1e-06", "max_tokens_per_gpu": "9216",
    "micro_batch_size": "1", "num_attention_heads": "32", "num_layers": "36", "n_samples_per_prompt": "8",
    "pipeline_model_parallel_size": "1", "rollout_batch_size": "32", "rollout_max_response_len": "8192",
    "tensor_model_parallel_size": "2", "use_dynamic_batch_size": "True", "vocab_size": "151936",
}
_COMMAND = ("python3 train.py --actor-num-nodes 1 --actor-num-gpus-per-node 8 --colocate "
            "--hf-checkpoint /root/Qwen3-4B --ref-load /root/Qwen3-4B_torch_dist --load /root/ckpt "
            "--rollout-batch-size 32 --n-samples-per-prompt 8 --global-batch-size 256 --lr 1e-6 "
            "--max-tokens-per-gpu 9216 --use-dynamic-batch-size --rollout-max-response-len 8192")


def _ts(t: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(1785571200 + t))


def _metric_dict(rng: random.Random, keys: list[str]) -> str:
    parts = []
    for k in keys:
        r = rng.random()
        v = "nan" if r < 0.002 else repr(round(rng.uniform(-2, 2), rng.choice((4, 6, 9))))
        parts.append(f"'{k}': {v}")
    return "{" + ", ".join(parts) + "}"


_STEP_KEYS = ["train/loss", "train/pg_loss", "train/entropy_loss", "train/pg_clipfrac", "train/ppo_kl",
              "train/grad_norm", "train/lr-pg_0", "train/train_rollout_logprob_abs_diff", "train/kl_loss", "train/step"]
_ROLLOUT_KEYS = ["rollout/response_lengths", "rollout/rewards", "rollout/raw_reward", "rollout/truncated",
                 "rollout/total_lengths", "rollout/log_probs", "rollout/ref_log_probs", "rollout/rollout_log_probs",
                 "rollout/entropy", "rollout/advantages", "rollout/returns", "rollout/step"]
_PERF_KEYS = ["rollout/response_len/mean", "rollout/response_len/median", "rollout/response_len/max",
              "rollout/response_len/min", "rollout/repetition_frac", "rollout/truncated_ratio",
              "perf/rollout_time", "perf/tokens_per_gpu_per_sec", "perf/actor_train_time", "perf/step_time",
              "perf/actor_train_tflops", "perf/wait_time_ratio", "perf/update_weights_time", "perf/log_probs_time"]


def _chatter(rng: random.Random, t: int) -> str:
    ts = _ts(t)
    pid = rng.choice((2211, 2212, 2213, 2214))
    engine = f"(SGLangEngine pid={pid}, ip=10.0.0.{pid - 2208})"
    k = rng.random()
    if k < 0.40:
        return (f"{engine} [{ts} TP0] Decode batch. #running-req: {rng.randint(1, 256)}, #token: {rng.randint(1000, 200000)}, "
                f"token usage: {rng.random():.2f}, cuda graph: True, gen throughput (token/s): {rng.uniform(100, 9000):.2f}, "
                f"#queue-req: {rng.randint(0, 40)}, ")
    if k < 0.55:
        return (f"{engine} [{ts} TP0] Prefill batch. #new-seq: {rng.randint(1, 16)}, #new-token: {rng.randint(64, 8192)}, "
                f"#cached-token: {rng.randint(0, 4096)}, token usage: {rng.random():.2f}, #running-req: {rng.randint(0, 256)}, "
                f"#queue-req: {rng.randint(0, 40)}, ")
    if k < 0.80:
        return (f"{engine} [{ts}] INFO:     127.0.0.1:{rng.randint(30000, 60000)} - \"POST /generate HTTP/1.1\" 200 OK")
    if k < 0.88:
        rank = rng.randint(0, 7)
        return (f"(MegatronTrainRayActor pid={1230 + rank}) [{ts}] memory_utils.py:49 - [Rank {rank}] Memory-Usage "
                f"before train: {{'gpu': '{rank}', 'total_GB': 79.11, 'free_GB': {rng.uniform(5, 60):.2f}, "
                f"'used_GB': {rng.uniform(10, 70):.2f}, 'allocated_GB': {rng.uniform(5, 40):.2f}}}")
    if k < 0.95:
        return (f"(RolloutManager pid=3456) [{ts}] sglang_rollout.py:388 - generation progress: "
                f"{rng.randint(0, 256)}/256 groups, {rng.randint(0, 2048)} samples")
    return (f"(MegatronTrainRayActor pid=1230) [{ts}] data.py:208 - loaded batch of {rng.randint(1, 64)} samples "
            f"with {rng.randint(1000, 90000)} tokens for micro batch {rng.randint(0, 31)}")


def write_log(path: Path, size_mb: int, seed: int = 0) -> int:
    """A slime driver log of about `size_mb` MB; returns its size in bytes."""
    rng = random.Random(seed)
    target = size_mb << 20
    written = 0
    t = 0
    with open(path, "w", encoding="utf-8") as fh:
        head = ["+ ray job submit --address=http://127.0.0.1:8265 -- " + _COMMAND,
                "(MegatronTrainRayActor pid=1230) ------------------------ arguments ------------------------"]
        head += [f"(MegatronTrainRayActor pid=1230)   {k} {'.' * (48 - len(k))} {v}" for k, v in sorted(_ARGUMENTS.items())]
        head += ["(MegatronTrainRayActor pid=1230) -------------------- end of arguments ---------------------",
                 "(MegatronTrainRayActor pid=1230)   successfully loaded checkpoint from /root/ckpt [ t 1/2, p 1/1 ] at iteration 10"]
        text = "\n".join(head) + "\n"
        fh.write(text)
        written += len(text)
        step = 0
        while written < target:
            buf: list[str] = []
            ts = _ts(t)
            buf.append(f"(RolloutManager pid=3456) [{ts}] timer.py:24 - Timer generate start")
            for _ in range(3):
                for _ in range(rng.randint(50, 100)):
                    t += rng.randint(0, 1)
                    buf.append(_chatter(rng, t))
                kind, keys, src = rng.choice((("step", _STEP_KEYS, "model.py:918"),
                                              ("rollout", _ROLLOUT_KEYS, "train_metric_utils.py:135"),
                                              ("perf", _PERF_KEYS, "train_metric_utils.py:401")))
                buf.append(f"(MegatronTrainRayActor pid=1230) [{_ts(t)}] {src} - {kind} {step}: {_metric_dict(rng, keys)}")
            buf.append(f"(RolloutManager pid=3456) [{_ts(t)}] timer.py:32 - Timer generate end (elapsed: {rng.uniform(30, 90):.1f}s)")
            buf.append(f"(RolloutManager pid=3456) [{_ts(t)}] sglang_rollout.py:447 - Finish rollout: "
                       f"['<|im_start|>user\\nSolve {step} + 1.<|im_end|>\\n<|im_start|>assistant\\nThe answer is {step + 1}.'], "
                       f"label: {step + 1}, reward: 1.0")
            buf.append(f"(MegatronTrainRayActor pid=1230) [{_ts(t)}] timer.py:24 - Timer update_weights start")
            buf.append(f"(MegatronTrainRayActor pid=1230) [{_ts(t)}] timer.py:32 - Timer update_weights end (elapsed: 3.2s)")
            if rng.random() < 0.02:
                buf.append(f"(RolloutManager pid=3456) [{_ts(t)}] http_utils.py:80 - Error: ReadTimeout('timed out'), "
                           f"retrying... (attempt 1/60, url=http://10.0.0.3:30000/generate)")
            step += 1
            text = "\n".join(buf) + "\n"
            fh.write(text)
            written += len(text)
        tail = ["(MegatronTrainRayActor pid=1230) Traceback (most recent call last):",
                '(MegatronTrainRayActor pid=1230)   File "/root/slime/train.py", line 88, in <module>',
                "(MegatronTrainRayActor pid=1230)     train(args)",
                "(MegatronTrainRayActor pid=1230) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"]
        text = "\n".join(tail) + "\n"
        fh.write(text)
        written += len(text)
    return written


# verl's console metric line (verl/utils/tracking.py, console logger: `step:N - key:value - ...`)
# and the HF Trainer's printed dict as TRL prints it on the console (transformers trainer `log`).
_VERL_KEYS = ["actor/entropy", "actor/pg_loss", "actor/pg_clipfrac", "actor/ppo_kl", "actor/grad_norm", "actor/lr",
              "critic/score/mean", "critic/rewards/mean", "critic/advantages/mean", "response_length/mean",
              "response_length/clip_ratio", "timing_s/gen", "timing_s/update_actor", "perf/throughput"]
_TRL_KEYS = ["loss", "grad_norm", "learning_rate", "num_tokens", "completions/mean_length",
             "completions/clipped_ratio", "rewards/accuracy_reward/mean", "reward", "reward_std",
             "frac_reward_zero_std", "kl", "entropy", "clip_ratio/region_mean"]


def write_framework_log(path: Path, size_mb: int, framework: str, seed: int = 0) -> int:
    """A verl or TRL console log of about `size_mb` MB at the slime log's metric density; its size in bytes."""
    rng = random.Random(seed)
    target = size_mb << 20
    written = step = t = 0
    with open(path, "w", encoding="utf-8") as fh:
        while written < target:
            buf = []
            for _ in range(rng.randint(50, 100)):
                t += rng.randint(0, 1)
                buf.append(_chatter(rng, t).replace("SGLangEngine", "WorkerDict").replace("MegatronTrainRayActor",
                                                                                           "WorkerDict"))
            if framework == "verl":
                pairs = " - ".join(f"{k}:{rng.uniform(-1, 100):.6f}" for k in _VERL_KEYS)
                buf.append(f"(TaskRunner pid=3456) step:{step} - {pairs}")
            else:
                values = ", ".join(f"'{k}': {rng.uniform(-1, 100)!r}" for k in _TRL_KEYS)
                buf.append(f"{{{values}, 'epoch': {step / 1000:.4f}}}")
            step += 1
            text = "\n".join(buf) + "\n"
            fh.write(text)
            written += len(text)
    return written


def cut_log(src: Path, dst: Path, size: int) -> int:
    """The first `size` bytes of src, cut at a line end."""
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        left = size
        while left > 0:
            data = fin.read(min(left, 8 << 20))
            if not data:
                break
            left -= len(data)
            if left <= 0:
                data = data[: data.rfind(b"\n") + 1]
            fout.write(data)
    return dst.stat().st_size


def time_grep(path: Path, repeat: int, pattern: str = "step ") -> tuple[float, float, int]:
    """Best wall and CPU seconds of `grep -c PATTERN` (default 'step '), and its count."""
    best_wall = best_cpu = float("inf")
    count = 0
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        out = subprocess.run(["grep", "-c", pattern, str(path)], capture_output=True, text=True, check=False)
        best_wall = min(best_wall, time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        best_cpu = min(best_cpu, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
        count = int(out.stdout.strip() or 0)
    return best_wall, best_cpu, count


_SCAN = r"""
import json, resource, sys, time
from pathlib import Path
from triage.formats.slime_log import scan_logs, _ahocorasick
use = {"auto": None, "on": True, "off": False}[sys.argv[2]]
def children_cpu():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime
t0, c0, k0 = time.perf_counter(), time.process_time(), children_cpu()
ix = scan_logs([Path(sys.argv[1])], use_automaton=use)
dt, cpu = time.perf_counter() - t0, time.process_time() - c0 + children_cpu() - k0
rss_kb = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
print(json.dumps({"seconds": dt, "cpu": cpu, "rss_kb": rss_kb,
                  "lines": ix.lines, "records": sum(ix.metrics.count(k) for k in ix.metrics.kinds()),
                  "errors": len(ix.errors) + ix.dropped_errors, "tracebacks": len(ix.tracebacks),
                  "metric_bytes": ix.metrics.nbytes(),
                  "automaton": (use is not False) and _ahocorasick is not None}))
"""


def time_scan(path: Path, repeat: int, automaton: str) -> dict:
    best: dict | None = None
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for _ in range(repeat):
        out = subprocess.run([sys.executable, "-c", _SCAN, str(path), automaton], capture_output=True, text=True,
                             env=env, check=True)
        result = json.loads(out.stdout.strip().splitlines()[-1])
        if best is None:
            best = result
        else:  # the best wall and the best CPU time may come from different runs
            best["cpu"] = min(best["cpu"], result["cpu"])
            if result["seconds"] < best["seconds"]:
                best.update({k: v for k, v in result.items() if k != "cpu"})
            best["rss_kb"] = max(best["rss_kb"], result["rss_kb"])
    assert best is not None
    return best


def time_triage(log: Path) -> dict:
    """`triage run` end to end on a run directory holding only this log (no cache)."""
    run_dir = log.parent / "run"
    run_dir.mkdir(exist_ok=True)
    target = run_dir / "job.log"
    if not target.exists():
        os.link(log, target)
    code = (
        "import json, resource, sys, time, io, contextlib\n"
        "from triage.cli import main\n"
        "buf = io.StringIO(); t0 = time.perf_counter()\n"
        "with contextlib.redirect_stdout(buf):\n"
        "    rc = main(['run', sys.argv[1], '--json', '--no-cache'])\n"
        "report = json.loads(buf.getvalue())\n"
        "print(json.dumps({'seconds': time.perf_counter() - t0, 'rc': rc, 'verdict': report['root_cause']['id'],\n"
        "                  'probes': len(report['path']), 'rss_kb': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", code, str(run_dir)], capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def warm(path: Path) -> None:
    with open(path, "rb") as fh:
        while fh.read(16 << 20):
            pass


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mb", type=int, default=1024, help="size of the generated log (default 1024)")
    ap.add_argument("--path", type=Path, help="use this log instead of generating one")
    ap.add_argument("--repeat", type=int, default=2, help="timed runs per measurement; the best counts")
    ap.add_argument("--automaton", choices=("auto", "on", "off"), default="auto",
                    help="the multi-pattern search (ahocorasick_rs): use when installed, force, or refuse")
    ap.add_argument("--keep", action="store_true", help="keep the generated files")
    ap.add_argument("--frameworks", default="verl,trl",
                    help="other console formats measured at the same size, comma-separated (verl, trl; '' for none)")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="bench_ingest_"))
    try:
        if args.path:
            big = args.path
            size = big.stat().st_size
        else:
            big = tmp / f"slime_{args.size_mb}mb.log"
            t0 = time.perf_counter()
            size = write_log(big, args.size_mb)
            print(f"wrote {big} ({size / 2**20:.0f} MB) in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
        small = tmp / "slime_eighth.log"
        cut_log(big, small, size // 8)

        rows = []
        for path in (small, big):
            warm(path)
            grep_wall, grep_cpu, _count = time_grep(path, args.repeat)
            scan = time_scan(path, args.repeat, args.automaton)
            rows.append((path.stat().st_size / 2**20, grep_wall, grep_cpu, scan))
        finder = "ahocorasick_rs" if rows[-1][3]["automaton"] else "bytes.find per marker"
        print(f"\nscan_logs ingest vs grep -c 'step ' (best of {args.repeat}; search: {finder}; load average "
              f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")
        print(f"{'size MB':>8} {'grep MB/s':>10} {'scan MB/s':>10} {'ratio':>6}   {'grep CPU MB/s':>13} {'scan CPU MB/s':>13} "
              f"{'ratio':>6}   {'peak RSS MB':>11} {'of it metrics MB':>16} {'lines':>10} {'records':>8} {'errors':>7}")
        for mb, grep_wall, grep_cpu, scan in rows:
            metrics = scan["records"]
            print(f"{mb:8.0f} {mb / grep_wall:10.0f} {mb / scan['seconds']:10.0f} {grep_wall / scan['seconds']:6.2f}   "
                  f"{mb / grep_cpu:13.0f} {mb / scan['cpu']:13.0f} {grep_cpu / scan['cpu']:6.2f}   "
                  f"{scan['rss_kb'] / 1024:11.0f} {scan['metric_bytes'] / 2**20:16.1f} {scan['lines']:10d} {metrics:8d} "
                  f"{scan['errors']:7d}")
        others = [f for f in args.frameworks.split(",") if f.strip()]
        if others:
            print(f"\nother frameworks' console logs, {args.size_mb} MB each, scan vs grep -c of their metric marker")
            print(f"{'format':>8} {'grep MB/s':>10} {'scan MB/s':>10} {'ratio':>6}   {'grep CPU MB/s':>13} {'scan CPU MB/s':>13} "
                  f"{'ratio':>6}   {'peak RSS MB':>11} {'records':>8}")
        for fw in others:
            log = tmp / f"{fw}_{args.size_mb}mb.log"
            mb = write_framework_log(log, args.size_mb, fw) / 2**20
            warm(log)
            grep_wall, grep_cpu, _count = time_grep(log, args.repeat, "step:" if fw == "verl" else "'loss'")
            scan = time_scan(log, args.repeat, args.automaton)
            print(f"{fw:>8} {mb / grep_wall:10.0f} {mb / scan['seconds']:10.0f} {grep_wall / scan['seconds']:6.2f}   "
                  f"{mb / grep_cpu:13.0f} {mb / scan['cpu']:13.0f} {grep_cpu / scan['cpu']:6.2f}   "
                  f"{scan['rss_kb'] / 1024:11.0f} {scan['records']:8d}")
            log.unlink()
        tri = time_triage(big)
        mb = rows[-1][0]
        print(f"\nstatic triage end to end (`triage run --json --no-cache`) on the {mb:.0f} MB log: "
              f"{tri['seconds']:.1f} s ({mb / tri['seconds']:.0f} MB/s), verdict {tri['verdict']} after "
              f"{tri['probes']} probes, exit {tri['rc']}, peak RSS {tri['rss_kb'] / 1024:.0f} MB")
        return 0
    finally:
        if args.keep:
            print(f"kept {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
