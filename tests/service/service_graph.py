"""A small decision graph for the service tests: the real walker and report, four tiny probes.

The service must not depend on which probes are registered, so its tests triage with this
graph: a probe that takes as long as the run's `hold.json` asks (a slow probe, for the
time budget and crash tests), an OOM signature in the log, a GPU-cost replay (an active
probe) and a reward that stays at zero. `triage(...)` has `triage.api.triage`'s signature
and appends one line per call to the run's `triage.calls`, so tests can count triages.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import tempfile
import time
from functools import lru_cache
from pathlib import Path

import numpy as np

from triage.api import triage_run
from triage.errors import Unavailable
from triage.finding import Observation
from graph_support import write_catalog
from triage.graph import DEFAULT_DIR, DecisionGraph, load_graph
from triage.probe import Cost, Probe
from triage.run import Run, open_run

OOM = re.compile(r"CUDA out of memory\. Tried to allocate ([\d.]+) (GiB|MiB)")

PLAYBOOK = """
playbook: entry
title: Service test graph
entry: hold
nodes:
  hold:
    probe: hold
    ask: Does the run ask the triage to wait?
    on: {done: oom, unavailable: oom, error: oom}
  oom:
    probe: oom_in_log
    ask: Did the job run out of GPU memory?
    on: {oom: replay, clean: reward, unavailable: reward, error: reward}
  replay:
    probe: replay_step
    ask: Does replaying the step on one GPU reproduce the OOM?
    on:
      reproduced: verdict:memory.max_tokens_per_gpu
      not_reproduced: verdict:memory.sequence_too_long
      unavailable: verdict:memory.max_tokens_per_gpu
      error: verdict:memory.max_tokens_per_gpu
  reward:
    probe: constant_reward
    ask: Does the reward stay at zero?
    on:
      constant_zero: verdict:reward.broken_fn
      varies: verdict:healthy
      unavailable: verdict:inconclusive
      error: verdict:inconclusive
"""


class Hold(Probe):
    """Waits as long as the run's hold.json asks: a stand-in for a slow probe."""

    name = "hold"
    outcomes = ("done",)

    def examine(self, run: Run) -> Observation:
        spec = run.root / "hold.json"
        seconds = float(json.loads(spec.read_text())["seconds"]) if spec.is_file() else 0.0
        if seconds:
            with open(run.root / "hold.started", "a") as fh:
                fh.write(f"{os.getpid()} {time.time()}\n")
            time.sleep(seconds)
            with open(run.root / "hold.finished", "a") as fh:
                fh.write(f"{os.getpid()} {time.time()}\n")
        return self.observe("done", f"held {seconds:g} s", 0.9, held_s=seconds)


class OomInLog(Probe):
    """A CUDA out-of-memory error in the job log."""

    name = "oom_in_log"
    outcomes = ("oom", "clean")
    needs = ("log",)

    def examine(self, run: Run) -> Observation:
        for path in run.artifacts.logs:
            for no, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                m = OOM.search(line)
                if m:
                    gib = float(m.group(1)) / (1024 if m.group(2) == "MiB" else 1)
                    return self.observe("oom", f"CUDA out of memory at {path.name}:{no} (tried to allocate {gib:g} GiB)",
                                        0.85, where=f"{path.name}:{no}", tried_to_allocate_gib=gib)
        return self.observe("clean", "no CUDA out-of-memory error in the log", 0.8)


class ReplayStep(Probe):
    """Replays the failing step on one device (an active probe: it relaunches the run's job)."""

    name = "replay_step"
    outcomes = ("reproduced", "not_reproduced")
    cost = Cost.GPU
    executes_run_code = True

    def examine(self, run: Run) -> Observation:
        from triage.replay.consent import RelaunchRefused, relaunch_permitted

        if not relaunch_permitted():  # what triage.replay.launch does before it starts anything
            raise RelaunchRefused("replaying the step", "python3 train.py --load-debug-rollout-data ...")
        return self.observe("reproduced", "the replayed step runs out of memory again at max_tokens_per_gpu=32768",
                            0.9, replayed_tokens=32768)


class ConstantReward(Probe):
    """The reward stays at exactly zero."""

    name = "constant_reward"
    outcomes = ("constant_zero", "varies")
    needs = ("metrics",)

    def examine(self, run: Run) -> Observation:
        reward = run.metrics.get("reward")
        if reward is None or len(reward) < 3:
            raise Unavailable("metrics", "the run logged no reward series")
        v, st = reward.values, reward.steps
        nonzero = np.flatnonzero(v != 0)
        onset = int(st[nonzero[-1] + 1]) if nonzero.size and nonzero[-1] + 1 < v.size else (int(st[0]) if not nonzero.size else None)
        if onset is None:
            return self.observe("varies", f"{reward.key} moves (last value {v[-1]:.3g})", 0.7, metric=reward.source)
        zeros = int((st >= onset).sum())
        return self.observe("constant_zero", f"{reward.key} is 0.0 at every step from step {onset} on ({zeros} steps)",
                            0.9, metric=reward.source, onset_step=onset, steps_at_zero=zeros)


PROBES = {p.name: p for p in (Hold, OomInLog, ReplayStep, ConstantReward)}


@lru_cache(maxsize=1)
def graph() -> DecisionGraph:
    where = Path(tempfile.mkdtemp(prefix="triage-service-graph-"))
    atexit.register(shutil.rmtree, where, True)
    (where / "entry.yaml").write_text(PLAYBOOK)
    catalog = write_catalog(where)
    # The OOM in the log is this graph's evidence for max_tokens_per_gpu (the replay only confirms it):
    # a static triage, whose replay is not run, still reaches the verdict through it.
    import yaml

    raw = yaml.safe_load(catalog.read_text())
    for verdict in raw["verdicts"]:
        if verdict["id"] == "memory.max_tokens_per_gpu":
            verdict["evidence"] = sorted({*verdict.get("evidence", []), "oom_in_log:oom"})
    catalog.write_text(yaml.safe_dump(raw, sort_keys=False, allow_unicode=True))
    return load_graph(where, probes=PROBES)


def triage(ref: str, runs_root: str | None = None, playbooks: Path | None = None, executor=None):
    """`triage.api.triage` over the test graph; counts its calls in the run's triage.calls."""
    run = open_run(ref, runs_root)
    with open(run.root / "triage.calls", "a") as fh:
        fh.write(f"{os.getpid()} {time.time()}\n")
    return triage_run(run, graph(), executor)


def calls(run_dir: Path) -> int:
    f = run_dir / "triage.calls"
    return len(f.read_text().splitlines()) if f.is_file() else 0
