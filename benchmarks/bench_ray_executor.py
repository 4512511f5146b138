"""The overhead of `--executor ray` against in-process probes, on the shipped static example runs.

    PYTHONPATH=. python benchmarks/bench_ray_executor.py
    PYTHONPATH=. python benchmarks/bench_ray_executor.py --repeat 5 --num-cpus 2

Starts a private local Ray instance on 127.0.0.1 (`ray.init`, no dashboard; stopped at
the end), then triages each example run (examples/*/expected.json) in-process and with
`RayExecutor`, with and without probes started ahead of the walk, no findings cache.
The first Ray pass is reported on its own (workers boot); the rows are medians of
`--repeat` warm passes. Checks that every verdict matches the in-process one.

Prints per run: probes on the path, in-process ms, Ray ms, the overhead per probe, and
the Ray/in-process ratio; then the totals.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
# a private instance on loopback only: Ray must not swap 127.0.0.1 for the machine's address
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
# token authentication with a token of this run's own: a new local instance would otherwise
# write ~/.ray/auth_token, and every Ray head started on the machine after it would require it
if "RAY_AUTH_TOKEN" not in os.environ:
    os.environ["RAY_AUTH_MODE"] = "token"
    os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(16)

from triage.api import triage_run  # noqa: E402
from triage.executor import LocalExecutor  # noqa: E402
from triage.graph import load_graph  # noqa: E402
from triage.logging import configure  # noqa: E402
from triage.run import open_run  # noqa: E402


def timed(path: Path, graph, executor) -> tuple[float, str, int]:
    t0 = time.perf_counter()
    report = triage_run(open_run(str(path)), graph, executor)
    elapsed = time.perf_counter() - t0
    close = getattr(executor, "close", None)
    if close:
        close()
    return elapsed, report.root_cause.id, len(report.path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--num-cpus", type=int, default=2)
    ap.add_argument("--examples", nargs="*", default=None)
    ns = ap.parse_args(argv)
    configure(0)
    import ray

    from triage.ray.executor import RayExecutor

    graph = load_graph()
    names = ns.examples or sorted(p.parent.name for p in (REPO / "examples").glob("*/expected.json"))
    env = {"env_vars": {"PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}}
    t0 = time.perf_counter()
    ray.init(num_cpus=ns.num_cpus, num_gpus=0, include_dashboard=False, _node_ip_address="127.0.0.1",
             log_to_driver=False, logging_level="ERROR", runtime_env=env)
    boot = time.perf_counter() - t0
    try:
        spec = RayExecutor(speculate=True)
        plain = RayExecutor(speculate=False)
        spec.attach(graph)
        plain.attach(graph)
        cold = sum(timed(REPO / "examples" / n, graph, plain)[0] for n in names[:1])
        rows = []
        for name in names:
            path = REPO / "examples" / name
            local = [timed(path, graph, LocalExecutor()) for _ in range(ns.repeat)]
            on_ray = [timed(path, graph, plain) for _ in range(ns.repeat)]
            ahead = [timed(path, graph, spec) for _ in range(ns.repeat)]
            verdicts = {r[1] for r in local + on_ray + ahead}
            assert len(verdicts) == 1, (f"{name}: verdicts differ: in-process {[r[1] for r in local]}, "
                                        f"ray {[r[1] for r in on_ray]}, ray+ahead {[r[1] for r in ahead]}")
            rows.append((name, local[0][2], statistics.median(r[0] for r in local),
                         statistics.median(r[0] for r in on_ray), statistics.median(r[0] for r in ahead),
                         verdicts.pop()))
    finally:
        ray.shutdown()

    print(f"ray.init (private local instance): {boot:.1f} s; first Ray triage (workers boot): {cold * 1e3:.0f} ms")
    print(f"{'run':32} {'probes':>6} {'local ms':>9} {'ray ms':>8} {'ray+ahead ms':>13} {'ms/probe':>9} {'ray/local':>9}")
    for name, n, lo, ry, ah, _ in rows:
        print(f"{name:32} {n:6d} {lo * 1e3:9.1f} {ry * 1e3:8.1f} {ah * 1e3:13.1f} {(ry - lo) * 1e3 / n:9.1f} {ry / lo:9.1f}")
    probes = sum(r[1] for r in rows)
    tl, tr, ta = (sum(r[i] for r in rows) for i in (2, 3, 4))
    print(f"{'total':32} {probes:6d} {tl * 1e3:9.1f} {tr * 1e3:8.1f} {ta * 1e3:13.1f} {(tr - tl) * 1e3 / probes:9.1f} "
          f"{tr / tl:9.1f}")
    print(json.dumps({
        "runs": len(rows), "probes": probes, "local_total_ms": round(tl * 1e3, 1), "ray_total_ms": round(tr * 1e3, 1),
        "ray_ahead_total_ms": round(ta * 1e3, 1), "overhead_ms_per_probe": round((tr - tl) * 1e3 / probes, 1),
        "ray_over_local": round(tr / tl, 2), "ray_ahead_over_local": round(ta / tl, 2),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
