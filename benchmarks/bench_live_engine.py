"""Wall time and request count of the live-engine probes against a real (tiny) SGLang server.

    PYTHONPATH=. python benchmarks/bench_live_engine.py            # 3 repetitions
    PYTHONPATH=. python benchmarks/bench_live_engine.py --repeat 5

Starts one SGLang 0.5.23 server on CPU with the shared sglang-cpu kit (the Llama tiny
model, which answers both /weights_checker and /get_weights_by_name), loads the "trained"
weights into it (the kit's model-llama-alt, through
/update_weights_from_disk: the one write, allowed explicitly here), builds a run
directory with the trained weights as a Megatron torch_dist checkpoint, a rollout dump
and the base model as --hf-checkpoint, then times:

- live_weights (checksums): the checkpoint streamed, converted, fused and hashed, one
  /weights_checker request;
- live_weights (get_weights_by_name), on the same server: one request per HF tensor
  (what a GPU engine, whose checksums cannot be recomputed, costs);
- isolated_rollout: 4 prompts, one batched /generate and one batched scoring pass;
- the server's start-up, for scale.

Prints one row per probe: outcome, median / min wall time, requests made. The server is
stopped at the end, whatever happens. Prints "skipped: <reason>" when the kit is absent.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "sglang"))
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ns = ap.parse_args()

    import sglang_scenarios as sc
    from sglang_kit import Servers, model_dir, not_ready

    reason = not_ready()
    if reason:
        print(f"skipped: {reason}")
        return 0

    from probes.isolated_rollout import IsolatedRollout
    from probes.live_weights import LiveWeights
    from triage.engines.sglang import SGLangEngine
    from triage.run import open_run

    servers = Servers()
    try:
        with tempfile.TemporaryDirectory(prefix="bench_live_") as tmp:
            root = Path(tmp)
            t0 = time.perf_counter()
            ckpt = sc.megatron_checkpoint(model_dir("model-llama-alt"), root / "megatron")
            dump = sc.rollout_dump(root / "rollout_0.pt", model_dir("model-llama"))
            run_dir = sc.garbled_run(root / "run", checkpoint=ckpt, base_dir=model_dir("model-llama"), dump=dump)
            prep = time.perf_counter() - t0
            (server,) = servers.start("model-llama")
            with SGLangEngine(server.url, allow_writes=True) as e:
                e.update_weights_from_disk(model_dir("model-llama-alt"))

            cases = [
                ("live_weights (checksums)", lambda: LiveWeights()),
                ("live_weights (by_name)", lambda: LiveWeights(LiveWeights.Params(via="by_name"))),
                ("isolated_rollout", lambda: IsolatedRollout()),
            ]
            print(f"server: {server.url}, started in {server.startup_s:.1f} s; run prepared in {prep:.1f} s")
            print(f"{'probe':28} {'outcome':18} {'median s':>9} {'min s':>7} {'requests':>9}")
            for label, make in cases:
                times, outcome, requests = [], "", 0
                for _ in range(ns.repeat):
                    run = open_run(str(run_dir))
                    run.engines.append(server.url)
                    t = time.perf_counter()
                    obs = make().examine(run)
                    times.append(time.perf_counter() - t)
                    outcome, requests = obs.outcome, obs.evidence.get("request_count", 0)
                print(f"{label:28} {outcome:18} {statistics.median(times):9.3f} {min(times):7.3f} {requests:9d}")
    finally:
        servers.stop_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
