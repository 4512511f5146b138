"""`--executor ray` on a real local Ray head: the same verdicts as in-process, probes with
the resources they declare, timeouts, killed workers, and probes started ahead of the walk."""

from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import pytest

from ray_probes import PROBES
from ray_support import ROOT, disconnect_driver
from triage.api import triage_run
from triage.executor import LocalExecutor
from graph_support import write_catalog
from triage.graph import load_graph
from triage.ray.executor import RayExecutor
from triage.run import open_run

EXAMPLES = ROOT / "examples"
# a handful of the shipped runs, across playbooks: crash/OOM, checkpoint, hang, metrics, HF Trainer
SCENARIOS = ["oom-max-tokens-per-gpu", "ckpt-not-loaded", "nccl-collective-mismatch", "lr-too-high", "healthy-trl-grpo"]


@pytest.fixture(scope="module")
def executor(ray_head):
    ex = RayExecutor(address=ray_head.dashboard, timeout_s=60)
    yield ex
    ex.close()
    disconnect_driver()


def graph_of(tmp_path: Path, nodes: str):
    d = tmp_path / "books"
    d.mkdir()
    (d / "entry.yaml").write_text("playbook: entry\nentry: a\nnodes:\n" + textwrap.indent(textwrap.dedent(nodes), "  "))
    write_catalog(d)
    return load_graph(d, probes=PROBES)


def tiny_run(tmp_path: Path):
    d = tmp_path / "run"
    d.mkdir()
    (d / "job.log").write_text("[2026-08-01 10:00:00] train.py:1 - start\n")
    return open_run(str(d))


def markers(tmp_path: Path) -> Path:
    d = tmp_path / "markers"
    d.mkdir()
    return d


def started(markers_dir: Path, tag: str) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(markers_dir.glob(f"{tag}.*.start"))]


def in_thread(fn):
    box: dict = {}
    t = threading.Thread(target=lambda: box.setdefault("value", fn()), daemon=True)
    t.start()
    return t, box


def kill_attempts(markers_dir: Path, tag: str, count: int, timeout_s: float = 60) -> list[int]:
    """SIGKILL the worker of each of the first `count` attempts of probe `tag`, as they start."""
    killed: list[int] = []
    deadline = time.monotonic() + timeout_s
    while len(killed) < count and time.monotonic() < deadline:
        for info in started(markers_dir, tag)[len(killed):count]:
            os.kill(info["pid"], signal.SIGKILL)
            killed.append(info["pid"])
        time.sleep(0.05)
    assert len(killed) == count, f"only {len(killed)} attempts of {tag} started"
    return killed


def wait_idle(executor: RayExecutor, cpus: float = 2.0, timeout_s: float = 30) -> None:
    """Speculation starts probes only on idle CPUs: let the workers of earlier tests go first."""
    import ray

    executor._connect()
    deadline = time.monotonic() + timeout_s
    while ray.available_resources().get("CPU", 0) < cpus:
        assert time.monotonic() < deadline, f"the cluster is still busy: {ray.available_resources()}"
        time.sleep(0.2)


def warm_workers(executor: RayExecutor, count: int = 2) -> None:
    """Have `count` workers of the probes' environment up, so a probe started ahead waits for no
    worker to boot (which takes seconds on a loaded machine)."""
    import ray

    from ray_probes import Quick

    wait_idle(executor)

    @ray.remote
    def hold(rendezvous: str, count: int) -> int:
        Path(rendezvous, str(os.getpid())).touch()
        deadline = time.time() + 60
        while len(os.listdir(rendezvous)) < count and time.time() < deadline:
            time.sleep(0.05)
        return os.getpid()

    env = executor._runtime_env(Quick)
    rendezvous = tempfile.mkdtemp(prefix="warm")
    try:
        pids = ray.get([hold.options(runtime_env=env, num_cpus=1).remote(rendezvous, count) for _ in range(count)],
                       timeout=120)
    finally:
        shutil.rmtree(rendezvous, ignore_errors=True)
    assert len(set(pids)) == count
    wait_idle(executor)  # what Ray reports free lags behind


def pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow
def test_same_verdicts_as_in_process_on_the_example_runs(executor):
    for name in SCENARIOS:
        expected = json.loads((EXAMPLES / name / "expected.json").read_text())["verdict"]
        local = triage_run(open_run(str(EXAMPLES / name)), executor=LocalExecutor())
        on_ray = triage_run(open_run(str(EXAMPLES / name)), executor=executor)
        assert on_ray.root_cause.id == local.root_cause.id == expected, name
        assert [(s.node, s.outcome) for s in on_ray.path] == [(s.node, s.outcome) for s in local.path], name
        assert [s.summary for s in on_ray.path] == [s.summary for s in local.path], name
    assert executor.stats["submitted"] >= len(SCENARIOS)


RESOURCE_BOOK = """
    a:
      probe: quick
      params: {{tag: a, markers: "{m}"}}
      on: {{yes: g, no: g, unavailable: g, error: g}}
    g:
      probe: gpu_only
      params: {{tag: g, markers: "{m}"}}
      on: {{ok: verdict:healthy, bad: verdict:healthy, unavailable: verdict:inconclusive, error: verdict:inconclusive}}
"""


def test_each_probe_gets_the_resources_it_declares(tmp_path, executor):
    m = markers(tmp_path)
    graph = graph_of(tmp_path, RESOURCE_BOOK.format(m=m))
    report = triage_run(tiny_run(tmp_path), graph, executor)
    a, g = report.path
    assert a.outcome == "yes" and a.evidence["resources"] == {"CPU": 1.0}
    assert a.evidence["pid"] != os.getpid()  # it ran in a Ray worker
    assert g.outcome == "ok" and g.evidence["resources"] == {"GPU": 1.0}
    assert report.root_cause.id == "healthy"


def test_a_gpu_probe_on_a_cluster_without_gpus_is_unavailable_at_once(tmp_path, ray_head, monkeypatch):
    import ray

    m = markers(tmp_path)
    graph = graph_of(tmp_path, RESOURCE_BOOK.format(m=m))
    ex = RayExecutor(address=ray_head.dashboard, timeout_s=60, speculate=False)
    ex._connect()
    # the cluster as one without GPUs reports itself
    monkeypatch.setattr(ray, "cluster_resources", lambda: {k: v for k, v in ray.available_resources().items()
                                                           if k != "GPU"} | {"CPU": 2.0})
    t0 = time.monotonic()
    report = triage_run(tiny_run(tmp_path), graph, ex)
    a, g = report.path
    assert a.outcome == "yes"
    assert g.outcome == "unavailable" and "no GPU" in g.summary and g.missing.artifact == "gpu"
    assert started(m, "g") == []  # never submitted: it would have waited for a GPU forever
    assert time.monotonic() - t0 < 30
    assert report.root_cause.id == "inconclusive"


def test_a_probe_past_its_timeout_is_cancelled_and_the_walk_goes_on(tmp_path, ray_head):
    m = markers(tmp_path)
    graph = graph_of(tmp_path, f"""
        a:
          probe: sleeper
          params: {{tag: slow, markers: "{m}", seconds: 60}}
          on: {{done: verdict:healthy, never: verdict:healthy, unavailable: b, error: b}}
        b:
          probe: quick
          params: {{tag: b, markers: "{m}"}}
          on: {{yes: verdict:data.bad_sample, no: verdict:healthy, unavailable: verdict:inconclusive, error: verdict:inconclusive}}
    """)
    # the timeout covers waiting for a worker too: the next probe needs a new one (the old one was killed)
    ex = RayExecutor(address=ray_head.dashboard, timeout_s=12, speculate=False)
    t0 = time.monotonic()
    report = triage_run(tiny_run(tmp_path), graph, ex)
    elapsed = time.monotonic() - t0
    a, b = report.path
    assert a.outcome == "error"
    assert "no result within 12 s" in a.summary and "cancelled" in a.summary
    assert b.outcome == "yes" and report.root_cause.id == "data.bad_sample"
    assert elapsed < 40
    assert ex.stats["timeouts"] == 1
    pid = started(m, "slow")[0]["pid"]
    deadline = time.monotonic() + 15
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not pid_alive(pid), "the timed-out probe's worker is still running"
    assert not list(m.glob("slow.*.done"))


KILL_BOOK = """
    a:
      probe: sleeper
      params: {{tag: victim, markers: "{m}", seconds: 60, sleep_attempts: {sleeps}}}
      on: {{done: verdict:healthy, never: verdict:healthy, unavailable: b, error: b}}
    b:
      probe: quick
      params: {{tag: b, markers: "{m}"}}
      on: {{yes: verdict:data.bad_sample, no: verdict:healthy, unavailable: verdict:inconclusive, error: verdict:inconclusive}}
"""


def test_a_worker_killed_mid_probe_is_retried_once(tmp_path, ray_head):
    m = markers(tmp_path)
    graph = graph_of(tmp_path, KILL_BOOK.format(m=m, sleeps=1))
    ex = RayExecutor(address=ray_head.dashboard, timeout_s=90, retries=1, speculate=False)
    t, box = in_thread(lambda: triage_run(tiny_run(tmp_path), graph, ex))
    killed = kill_attempts(m, "victim", 1)
    t.join(90)
    report = box["value"]
    a = report.path[0]
    assert a.outcome == "done" and a.evidence["attempt"] == 2
    assert a.evidence["pid"] not in killed
    assert ex.stats["retries"] == 1
    assert report.root_cause.id == "healthy"


@pytest.mark.slow
def test_a_probe_whose_worker_keeps_dying_is_an_error_finding_and_the_walk_goes_on(tmp_path, ray_head):
    m = markers(tmp_path)
    graph = graph_of(tmp_path, KILL_BOOK.format(m=m, sleeps=99))
    ex = RayExecutor(address=ray_head.dashboard, timeout_s=90, retries=1, speculate=False)
    t, box = in_thread(lambda: triage_run(tiny_run(tmp_path), graph, ex))
    kill_attempts(m, "victim", 2)
    t.join(90)
    report = box["value"]
    a, b = report.path
    assert a.outcome == "error"
    assert "worker running probe sleeper died 2 times" in a.summary
    assert "WorkerCrashedError" in a.error
    assert b.outcome == "yes" and report.root_cause.id == "data.bad_sample"
    assert not list(m.glob("victim.*.done"))


def test_the_cheapest_next_probe_starts_while_the_current_one_runs(tmp_path, executor):
    m = markers(tmp_path)
    # the CPU-cost probe comes first on the node's edges; the static one is cheaper and goes first
    graph = graph_of(tmp_path, f"""
        a:
          probe: sleeper
          params: {{tag: a, markers: "{m}", seconds: 5}}
          on: {{error: x, unavailable: x, never: x, done: b}}
        x:
          probe: cpu_heavy
          params: {{tag: x, markers: "{m}"}}
          on: {{done: verdict:healthy, never: verdict:healthy, unavailable: verdict:inconclusive, error: verdict:inconclusive}}
        b:
          probe: quick
          params: {{tag: b, markers: "{m}"}}
          on: {{yes: verdict:data.bad_sample, no: verdict:healthy, unavailable: verdict:inconclusive, error: verdict:inconclusive}}
    """)
    before = dict(executor.stats)
    executor.attach(graph)
    warm_workers(executor)
    report = triage_run(tiny_run(tmp_path), graph, executor)
    assert [(s.probe, s.outcome) for s in report.path] == [("sleeper", "done"), ("quick", "yes")]
    a_done = json.loads((m / "a.1.done").read_text())["at"]
    (b_start,) = started(m, "b")
    assert b_start["at"] < a_done, f"b did not start before a finished ({dict(executor.stats)})"
    assert started(m, "x") == []  # one idle CPU: only the cheapest went ahead
    assert executor.stats["speculative_used"] - before.get("speculative_used", 0) == 1
    assert report.root_cause.id == "data.bad_sample"


def test_a_probe_started_ahead_is_cancelled_when_the_walk_goes_elsewhere(tmp_path, executor):
    m = markers(tmp_path)
    graph = graph_of(tmp_path, f"""
        a:
          probe: sleeper
          params: {{tag: a, markers: "{m}", seconds: 3}}
          on: {{error: w, unavailable: w, never: w, done: c}}
        w:
          probe: sleeper
          params: {{tag: w, markers: "{m}", seconds: 60}}
          on: {{done: verdict:healthy, never: verdict:healthy, unavailable: verdict:inconclusive, error: verdict:inconclusive}}
        c:
          probe: cpu_heavy
          params: {{tag: c, markers: "{m}"}}
          on: {{done: verdict:data.bad_sample, never: verdict:healthy, unavailable: verdict:inconclusive, error: verdict:inconclusive}}
    """)
    before = dict(executor.stats)
    executor.attach(graph)
    warm_workers(executor)
    report = triage_run(tiny_run(tmp_path), graph, executor)
    assert [(s.probe, s.outcome) for s in report.path] == [("sleeper", "done"), ("cpu_heavy", "done")]
    assert report.root_cause.id == "data.bad_sample"
    assert executor.stats["speculative_cancelled"] - before.get("speculative_cancelled", 0) == 1
    time.sleep(1.0)
    assert not list(m.glob("w.*.done")), "the cancelled probe ran to the end"
