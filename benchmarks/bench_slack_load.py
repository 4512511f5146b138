"""Load benchmark of `triage serve`: signed slash commands, acknowledgement latency, triage throughput.

Starts a local stand-in for Slack's Web API and `triage serve` (its own process) on
127.0.0.1, writes small failed runs under a temporary runs root (slime jobs that died
of CUDA OOM and TRL runs whose reward stays at 0), then fires signed `/triage <run>`
commands over a fixed number of concurrent connections. Prints the acknowledgement
latency (p50 / p99 / max; Slack's limit is 3 s) and the throughput of the static
triages the commands started, measured until the last report was posted.

    python benchmarks/bench_slack_load.py                 # 200 commands, 50 connections
    python benchmarks/bench_slack_load.py --requests 400 --connections 100 --workers 4
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from triage.service.security import sign_slack  # noqa: E402
from triage.service.testing import free_port, serve_stand_in, slash_command_body, wait_for  # noqa: E402

SECRET = "bench-signing-secret"
CHANNEL = "C0BENCH"


def slime_oom_run(root: Path, steps: int) -> None:
    root.mkdir(parents=True)
    actor = "(MegatronTrainRayActor pid=2231) "
    lines = ["[2026-08-04 09:30:00] placement_group.py:125 - Creating placement group with 8 GPUs..."]
    for i in range(steps):
        ts = f"[2026-08-04 {9 + (30 + i) // 60:02d}:{(30 + i) % 60:02d}:10]"
        lines += [
            f"{ts} rollout.py:88 - rollout {i}: {{'rollout/log_probs': -0.41, 'rollout/ref_log_probs': -0.41, "
            f"'rollout/rewards': {0.1 + 0.001 * i:.4f}, 'rollout/response_lengths': {900 + i}}}",
            f"{actor}{ts} timer.py:24 - Timer actor_train start",
            f"{actor}{ts} timer.py:32 - Timer actor_train end (elapsed: 40.0s)",
            f"{actor}{ts} model.py:512 - step {i}: {{'train/loss': 0.5, 'train/pg_loss': 0.01, "
            f"'train/grad_norm': {0.9 + 0.001 * i:.4f}, 'train/ppo_kl': 0.0, 'train/lr-pg_0': 1e-06}}",
        ]
    lines += [
        f"{actor}Traceback (most recent call last):",
        f'{actor}  File "/root/slime/slime/backends/megatron_utils/model.py", line 402, in train_one_step',
        f"{actor}    losses_reduced = forward_backward_func(",
        f"{actor}torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 18.50 GiB. GPU 0 has a total "
        "capacity of 79.11 GiB of which 3.20 GiB is free.",
    ]
    (root / "job.log").write_text("\n".join(lines) + "\n")
    (root / "cmdline.txt").write_text(
        "python3 train.py --actor-num-nodes 1 --actor-num-gpus-per-node 8 --colocate --max-tokens-per-gpu 32768 "
        "--rollout-max-response-len 8192 --use-dynamic-batch-size --num-rollout 3000\n")


def trl_zero_reward_run(root: Path, steps: int) -> None:
    root.mkdir(parents=True)
    history = [{"step": i, "loss": 0.0, "grad_norm": 0.0, "learning_rate": 1e-6, "reward": 0.0, "reward_std": 0.0,
                "frac_reward_zero_std": 1.0, "kl": 0.0 if i == 1 else 1e-4 * i, "entropy": 0.9,
                "completions/mean_length": 180.0} for i in range(1, steps + 1)]
    (root / "trainer_state.json").write_text(json.dumps({"global_step": steps, "max_steps": 500, "log_history": history}))


async def fire(url: str, refs: list[str], connections: int) -> list[tuple[int, float, str]]:
    """One signed command per ref, at most `connections` in flight; (status, seconds, text) each."""
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    sem = asyncio.Semaphore(connections)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=30.0) as client:

        async def one(i: int, ref: str) -> tuple[int, float, str]:
            async with sem:
                body = slash_command_body(ref, user=f"U{i:05d}", channel=CHANNEL)
                headers = sign_slack(SECRET, body)
                t0 = time.perf_counter()
                try:
                    r = await client.post("/slack/commands", content=body, headers=headers)
                    return r.status_code, time.perf_counter() - t0, r.text
                except httpx.HTTPError as exc:
                    return 0, time.perf_counter() - t0, repr(exc)

        return await asyncio.gather(*(one(i, ref) for i, ref in enumerate(refs)))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, int(round(q / 100 * (len(ordered) - 1)))))
    return ordered[k]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--connections", type=int, default=50)
    ap.add_argument("--runs", type=int, default=None, help="distinct runs (default: one per request)")
    ap.add_argument("--workers", type=int, default=2, help="the server's --concurrency")
    ap.add_argument("--steps", type=int, default=60, help="logged steps per run")
    ap.add_argument("--triage-function", default=None, help="MODULE:FUNCTION for the server (default: the real triage)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for every triage")
    ns = ap.parse_args()
    n_runs = ns.runs or ns.requests

    work = Path(tempfile.mkdtemp(prefix="bench-slack-"))
    runs_root = work / "runs"
    refs = []
    for i in range(n_runs):
        ref = f"oom-{i:04d}" if i % 2 == 0 else f"grpo-zero-{i:04d}"
        (slime_oom_run if i % 2 == 0 else trl_zero_reward_run)(runs_root / ref, ns.steps)
        refs.append(ref)
    commands = [refs[i % n_runs] for i in range(ns.requests)]

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = None
    # Slack's stand-in in its own process: this one only sends commands and times them.
    ctx = multiprocessing.get_context("spawn")
    ready_recv, ready_send = ctx.Pipe(duplex=False)
    slack_proc = ctx.Process(target=serve_stand_in, args=(ready_send,), daemon=True)
    slack_proc.start()
    slack_url = ready_recv.recv()
    try:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "SLACK_SIGNING_SECRET": SECRET, "SLACK_BOT_TOKEN": "xoxb-test",
               "SLACK_API_URL": slack_url, "TRIAGE_ALLOWED_CHANNELS": CHANNEL}
        args = [sys.executable, "-m", "triage.service", "serve", "--host", "127.0.0.1", "--port", str(port),
                "--runs-root", str(runs_root), "--db", str(work / "triage.db"), "--concurrency", str(ns.workers),
                "--max-queued", str(ns.requests + 10)]
        if ns.triage_function:
            args += ["--triage-function", ns.triage_function]
        log = open(work / "serve.log", "wb")  # noqa: SIM115
        proc = subprocess.Popen(args, env=env, stdout=log, stderr=log, cwd=ROOT)
        wait_for(lambda: _up(url), timeout=60, interval=0.2)
        wait_for(lambda: _health(url).get("workers_ready") == ns.workers, timeout=120, interval=0.2)

        started = time.perf_counter()
        results = asyncio.run(fire(url, commands, ns.connections))
        fired = time.perf_counter() - started
        distinct = len(set(commands))
        wait_for(lambda: _health(url)["done"] >= distinct and _health(url)["posts_pending"] == 0,
                 timeout=ns.timeout, interval=0.25)
        finished = time.perf_counter() - started
        health = _health(url)
        metrics = httpx.get(url + "/metrics", timeout=10).text
        server_ms = _server_side_ms(work / "serve.log")
        slack = httpx.get(slack_url.replace("/api/", "/_stand_in/summary"), timeout=10).json()
    finally:
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
        slack_proc.kill()
        slack_proc.join(5)
        shutil.rmtree(work, ignore_errors=True)

    latencies = [t for status, t, _ in results if status == 200]
    failed = [(s, text[:120]) for s, _, text in results if s != 200]
    verdicts = {line.split('"')[1]: int(float(line.rsplit(" ", 1)[1]))
                for line in metrics.splitlines() if line.startswith("triage_triages_total{")}
    print(f"commands:        {len(results)} signed /triage over {ns.connections} connections "
          f"({distinct} distinct runs, server --concurrency {ns.workers}, cpu cores {os.cpu_count()})")
    print(f"acknowledged:    {len(latencies)} with 200 in {fired:.2f} s; failed: {len(failed)} {failed[:3]}")
    if latencies:
        print(f"ack latency:     p50 {1000 * statistics.median(latencies):.1f} ms, p99 {1000 * percentile(latencies, 99):.1f} ms, "
              f"max {1000 * max(latencies):.1f} ms; over 1 s: {sum(t > 1.0 for t in latencies)}, "
              f"over 3 s: {sum(t > 3.0 for t in latencies)}")
    if server_ms:
        print(f"in the server:   p50 {statistics.median(server_ms):.1f} ms, p99 {percentile(server_ms, 99):.1f} ms "
              "(from the request's first byte read to its response, per the server's log)")
    print(f"triages:         {health['done']} completed in {finished:.2f} s from the first command "
          f"-> {health['done'] / finished:.2f} static triages/s; Slack messages posted: {slack['messages']}")
    print(f"verdicts:        {verdicts}")
    return 0 if not failed and latencies and max(latencies) <= 3.0 else 1


def _server_side_ms(log: Path) -> list[float]:
    out = []
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("{") and '"/slack/commands"' in line:
            entry = json.loads(line)
            if entry.get("event") == "http_request":
                out.append(float(entry["duration_ms"]))
    return out


def _up(url: str) -> bool:
    try:
        return httpx.get(url + "/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def _health(url: str) -> dict:
    return httpx.get(url + "/healthz", timeout=10).json()


if __name__ == "__main__":
    sys.exit(main())
