"""A second triage of the same run (every finding from the cache) against the first.

    PYTHONPATH=. python benchmarks/bench_cache.py
    PYTHONPATH=. python benchmarks/bench_cache.py --repeat 5 --examples oom-max-tokens-per-gpu lr-too-high

For each shipped example run (examples/*/expected.json), with a fresh findings cache:
the first triage (open the run, walk, every probe runs) and the second (the run opened
again, a new Run object, so nothing parsed is reused in memory; every finding is
answered from the SQLite cache). Each is timed end to end, as `triage run` does it
after start-up: open_run + triage_run, median of `--repeat` rounds, each round on a
new cache file. Prints one row per run (first ms, second ms, second/first, probes run
on the second pass) and the totals. Probes that talk to a live engine are never cached
and pass through on every triage; without `--engine` they end `unavailable` at once,
and they are the only probes counted on a second pass.

What a cache hit still costs: opening the run, fingerprinting its artifacts (stat of
every file, a hash of those under 1 MB), and building the report, which reads the log
for the run's framework and to say whether its last line was cut.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from triage.api import triage_run  # noqa: E402
from triage.cache import CachingExecutor, FindingsCache  # noqa: E402
from triage.executor import LocalExecutor  # noqa: E402
from triage.graph import load_graph  # noqa: E402
from triage.logging import configure  # noqa: E402
from triage.run import open_run  # noqa: E402


class Counting(LocalExecutor):
    def __init__(self) -> None:
        self.runs = 0

    def run_probe(self, node, probe_cls, run):
        self.runs += 1
        return super().run_probe(node, probe_cls, run)


def one_round(path: Path, graph, db: Path) -> tuple[float, float, int, str, str]:
    cache = FindingsCache.open(db)
    try:
        inner = Counting()
        t0 = time.perf_counter()
        first = triage_run(open_run(str(path)), graph, CachingExecutor(inner, cache))
        t1 = time.perf_counter()
        inner.runs = 0
        second = triage_run(open_run(str(path)), graph, CachingExecutor(inner, cache))
        t2 = time.perf_counter()
    finally:
        cache.close()
    return t1 - t0, t2 - t1, inner.runs, first.root_cause.id, second.root_cause.id


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--examples", nargs="*", default=None, help="example names (default: all)")
    ns = ap.parse_args(argv)
    configure(0)
    graph = load_graph()
    names = ns.examples or sorted(p.parent.name for p in (REPO / "examples").glob("*/expected.json"))
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_cache") as tmp:
        for name in names:
            path = REPO / "examples" / name
            firsts, seconds, reruns = [], [], []
            for i in range(ns.repeat):
                a, b, n, v1, v2 = one_round(path, graph, Path(tmp) / f"{name}-{i}.db")
                assert v1 == v2, f"{name}: the cached triage says {v2}, the first {v1}"
                firsts.append(a)
                seconds.append(b)
                reruns.append(n)
            rows.append((name, statistics.median(firsts), statistics.median(seconds), max(reruns), v1))

    print(f"{'run':32} {'first ms':>9} {'second ms':>10} {'second/first':>13} {'probes rerun':>13}  verdict")
    for name, a, b, n, verdict in rows:
        print(f"{name:32} {a * 1e3:9.1f} {b * 1e3:10.1f} {b / a:13.3f} {n:13d}  {verdict}")
    total_a = sum(r[1] for r in rows)
    total_b = sum(r[2] for r in rows)
    ratios = [r[2] / r[1] for r in rows]
    print(f"{'total':32} {total_a * 1e3:9.1f} {total_b * 1e3:10.1f} {total_b / total_a:13.3f} "
          f"{max(r[3] for r in rows):13d}")
    print(json.dumps({
        "runs": len(rows), "first_total_ms": round(total_a * 1e3, 1), "second_total_ms": round(total_b * 1e3, 1),
        "second_over_first": round(total_b / total_a, 3), "median_ratio": round(statistics.median(ratios), 3),
        "speedup": round(total_a / total_b, 2), "probes_rerun_on_hit": max(r[3] for r in rows),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
