"""`triage watch` against a real head: each failed job triaged exactly once, across a restart
of the watcher and a restart of the Ray head; unhealthy running jobs with --unhealthy."""

from __future__ import annotations

import argparse
import io
import math
import threading
import time

import pytest

from ray_support import ROOT, entrypoint, example_flags, slime_job_script
from triage.ray.jobs_api import JobsClient
from triage.ray.watch import GAVE_UP, NOTIFIED, JobWatcher, WatchStore, add_watch_parser

EXAMPLES = ROOT / "examples"


class Recorder:
    """A notifier that remembers what it was handed."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str, str]] = []

    def notify(self, job, report) -> None:
        self.seen.append((job.submission_id, job.key, job.status, report.root_cause.id))


def failing_job(ray_head, tmp_path, name: str, submission_id: str | None = None, tag: str = "") -> str:
    example = EXAMPLES / name
    script = slime_job_script(tmp_path, (example / "job.log").read_text(), name=f"train_{name}{tag}.py")
    return ray_head.submit(entrypoint(script, example_flags(example)), submission_id=submission_id)


def watcher(ray_head, db, notifier, **kw) -> JobWatcher:
    store = WatchStore.open(db)
    store.lock()
    client = JobsClient(ray_head.dashboard, retries=0, timeout_s=5)
    return JobWatcher(client, store, notifier, interval_s=0.5, backoff_max_s=2.0, err=kw.pop("err", io.StringIO()), **kw)


def close(w: JobWatcher) -> None:
    w.client.close()
    w.store.close()


def wait_for(predicate, timeout_s: float = 90, what: str = "") -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)


@pytest.mark.slow
def test_each_failed_job_is_triaged_once_across_watcher_and_head_restarts(ray_head, tmp_path, capsys):
    db = tmp_path / "triage.db"
    t0 = time.time()
    oom = failing_job(ray_head, tmp_path, "oom-max-tokens-per-gpu")
    ok = ray_head.submit(entrypoint(slime_job_script(tmp_path, "done\n", exit_code=0, name="ok.py"), []))
    assert ray_head.wait(oom) == "FAILED" and ray_head.wait(ok) == "SUCCEEDED"

    # 1. the command, once: the failed job is triaged and printed, the succeeded one is not
    parser = argparse.ArgumentParser(prog="triage")
    add_watch_parser(parser.add_subparsers(dest="command"))
    # the first watch of this dashboard looks back to this test's start, not before it: the job of
    # the test before may have ended a fraction of a second earlier, and it is history
    backfill = f"{math.floor((time.time() - t0) / 3600 * 1e6) / 1e6:.6f}"
    ns = parser.parse_args(["watch", "--once", "--ray-address", ray_head.dashboard, "--db", str(db),
                            "--backfill-hours", backfill])
    assert ns.func(ns) == 0
    out = capsys.readouterr().out
    assert f"{oom} FAILED -> memory.max_tokens_per_gpu" in out and ok not in out
    assert out.count(" FAILED -> ") == 1, out  # nothing from before the test's start
    assert "fix: " in out

    # 2. the watcher is down while a job fails (under a name the user chose); it comes back
    named = failing_job(ray_head, tmp_path, "sglang-port-conflict", submission_id="slime-run-7")
    assert ray_head.wait(named) == "FAILED"
    rec = Recorder()
    w = watcher(ray_head, db, rec)
    assert w.poll_once() == ["slime-run-7"]
    assert w.poll_once() == []
    assert [(s, v) for s, _, _, v in rec.seen] == [("slime-run-7", "engine.port_conflict")]

    # 3. the head restarts under a running watcher: it waits, and triages what fails afterwards
    err = io.StringIO()
    w.err = err
    stop = threading.Event()
    loop = threading.Thread(target=w.run, args=(stop,), daemon=True)
    loop.start()
    try:
        ray_head.restart()
        # the new head has forgotten every job; the same name is a new job
        again = failing_job(ray_head, tmp_path, "sglang-port-conflict", submission_id="slime-run-7", tag="2")
        fresh = failing_job(ray_head, tmp_path, "batch-size-mismatch")
        wait_for(lambda: len(rec.seen) == 3, what="the jobs of the restarted head")
        time.sleep(1.5)  # a few more polls: nothing is triaged twice
    finally:
        stop.set()
        loop.join(10)
    assert again == "slime-run-7"
    assert sorted((s, v) for s, _, _, v in rec.seen[1:]) == sorted(
        [("slime-run-7", "engine.port_conflict"), (fresh, "config.batch_size_mismatch")])
    # two distinct jobs named slime-run-7: one per head
    assert len({key for sid, key, _, _ in rec.seen if sid == "slime-run-7"}) == 2
    log = err.getvalue()
    assert "is not answering" in log and "retrying in" in log and "is back" in log
    close(w)

    # 4. a new watcher on the same records: nothing left to do
    rec2 = Recorder()
    w2 = watcher(ray_head, db, rec2)
    try:
        assert w2.poll_once() == [] and rec2.seen == []
        rows = w2.store.rows()
        seen = [(r.submission_id, r.job_key, r.status, r.state, r.verdict, r.error) for r in rows]
        assert len(rows) == 4 and all(r.state == NOTIFIED for r in rows), seen
        assert sorted(r.verdict for r in rows) == sorted(["memory.max_tokens_per_gpu", "engine.port_conflict",
                                                          "engine.port_conflict", "config.batch_size_mismatch"])
        # ...and a second watcher on the same file is refused
        with pytest.raises(Exception, match="another `triage watch`"):
            WatchStore.open(db).lock()
    finally:
        close(w2)


def test_a_running_job_with_a_symptom_is_triaged_once_with_unhealthy(ray_head, tmp_path):
    sick = ray_head.submit(entrypoint(slime_job_script(
        tmp_path, (EXAMPLES / "lr-too-high" / "job.log").read_text(), hold_s=120, name="sick.py"),
        example_flags(EXAMPLES / "lr-too-high")))
    well = ray_head.submit(entrypoint(slime_job_script(
        tmp_path, (EXAMPLES / "healthy-slime" / "job.log").read_text(), hold_s=120, name="well.py"),
        example_flags(EXAMPLES / "healthy-slime")))
    rec = Recorder()
    # a first watch with no backfill: the failed jobs of earlier tests are history
    w = watcher(ray_head, tmp_path / "triage.db", rec, unhealthy=True, unhealthy_every_s=0.0, backfill_s=0.0)
    try:
        ray_head.wait(sick, ("RUNNING",))
        ray_head.wait(well, ("RUNNING",))
        wait_for(lambda: w.poll_once() or rec.seen, 60, "the unhealthy job")
        for _ in range(3):
            w.poll_once()
        assert [(s, status, v) for s, _, status, v in rec.seen] == [(sick, "RUNNING", "optim.lr_too_high")]
        (row,) = [r for r in w.store.rows() if r.state != GAVE_UP]
        assert row.kind == "unhealthy" and row.submission_id == sick
    finally:
        ray_head.stop_job(sick)
        ray_head.stop_job(well)
        close(w)
