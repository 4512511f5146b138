"""Benchmark: wall time of a replayed train step and of a single-device reduction on the testbed model.

Generates (or reuses from the testbed's cache) the scenarios it measures, then times:

- `replay_step` launched: the testbed's job relaunched twice with `--load-debug-rollout-data`
  on a healthy run (each launch is a fresh process: interpreter, imports, checkpoint
  load, the step);
- `replay_step` in-process: the HF model rebuilt from the run's config and checkpoint,
  log-probs, reference log-probs, loss and grad norm, twice;
- `tensor_anomaly` on the fp16 overflow scenario (in-process, hooks on every module);
- `single_device_reduction` on a TP=2 run: two single-device replays and one
  two-process gloo replay (plus bisection when more than one dimension is parallel).

Each row prints the outcome and the wall time; `--repeat N` runs each N times and
prints the median. The machine's load average is printed too: launched replays are
dominated by process start-up, which a busy machine stretches.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_replay.py [--repeat 1] [--only replay|reduction|anomaly]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CASES = [
    # (label, probe module, class, scenario, params)
    ("replay (launched, 2 runs)", "probes.replay_step", "ReplayStep", "healthy.qwen2", {"mode": "launch"}),
    ("replay (in-process, 2 runs)", "probes.replay_step", "ReplayStep", "healthy.qwen2", {"mode": "in_process"}),
    ("tensor anomaly (fp16 overflow)", "probes.tensor_anomaly", "TensorAnomaly", "numerics.overflow", {}),
    ("reduction (tp=2 vs 1)", "probes.single_device_reduction", "SingleDeviceReduction", "healthy.tp2", {}),
    ("reduction (tp=2 sharding bug)", "probes.single_device_reduction", "SingleDeviceReduction",
     "parallel.sharding_bug", {}),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--only", choices=["replay", "reduction", "anomaly"], default=None)
    args = ap.parse_args()

    import importlib

    from triage.run.source import open_run
    from triage.replay.consent import relaunch_permission
    from triage.testbed.scenarios import generate, job_environment

    rows = []
    for label, module, cls_name, scenario, params in CASES:
        if args.only and args.only not in label:
            continue
        t0 = time.monotonic()
        run_dir = generate(scenario)
        gen_s = time.monotonic() - t0
        cls = getattr(importlib.import_module(module), cls_name)
        times, outcome, detail = [], "", ""
        for _ in range(args.repeat):
            run = open_run(str(run_dir))
            # these runs were generated here: their jobs may be relaunched, in the scenario's environment
            run.relaunch_allowed, run.relaunch_env = True, job_environment(scenario)
            t0 = time.monotonic()
            with relaunch_permission(cls.executes_run_code):
                obs = cls(cls.Params(**params)).examine(run)
            times.append(time.monotonic() - t0)
            outcome = obs.outcome
            ev = obs.evidence
            if "replay_wall_s" in ev:
                detail = "per replay " + ", ".join(f"{w:.1f}s" for w in ev["replay_wall_s"])
            elif "replays" in ev:
                detail = "; ".join(f"{r['replay']} {r['wall_s']:.1f}s" for r in ev["replays"])
            elif "module" in ev:
                detail = f"{ev['module']} ({ev.get('dtype')})"
        rows.append((label, scenario, outcome, statistics.median(times), gen_s, detail))
        wall = statistics.median(times)
        print(f"{label:32s} {scenario:24s} {outcome:20s} {wall:7.1f}s  {detail}", flush=True)

    print()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; "
          "scenario generation (cached) not timed above")
    print("| probe | scenario | outcome | wall s | detail |")
    print("|---|---|---|---:|---|")
    for label, scenario, outcome, wall, _gen, detail in rows:
        print(f"| {label} | {scenario} | {outcome} | {wall:.1f} | {detail} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
