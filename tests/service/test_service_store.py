"""The store's state transitions: recorded before acknowledged, idempotent, resumable."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import service_graph
import service_runs as runs
from service_support import service_config
from triage.finding import Finding
from triage.service.metrics import ServiceMetrics
from triage.service.queue import WorkQueue
from triage.service.store import (
    ANCHOR,
    DUPLICATE,
    FILE,
    JOINED,
    NEW,
    QUEUE_FULL,
    REPORT,
    STORED,
    DatabaseBusy,
    NewRequest,
    SQLiteStore,
)


@pytest.fixture
def store(tmp_path: Path):
    s = SQLiteStore(tmp_path / "triage.db")
    yield s
    s.close()


def req(rid: str, run_dir: str = "/runs/a", **kw) -> NewRequest:
    kw.setdefault("channel", "C1")
    kw.setdefault("post", True)
    return NewRequest(id=rid, source=kw.pop("source", "slack"), run_ref=run_dir.rsplit("/", 1)[1], run_dir=run_dir, **kw)


def test_the_database_is_in_wal_mode_and_held_by_one_server(tmp_path, store):
    con = sqlite3.connect(tmp_path / "triage.db")
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    con.close()
    with pytest.raises(DatabaseBusy, match="in use by another triage server"):
        SQLiteStore(tmp_path / "triage.db")


def test_a_request_joins_the_live_triage_of_its_run_and_is_answered_in_the_same_thread(store):
    first = store.submit(req("r1", user="U1"), max_queued=10)
    second = store.submit(req("r2", user="U2"), max_queued=10)
    elsewhere = store.submit(req("r3", user="U3", channel="C2"), max_queued=10)
    assert (first.outcome, second.outcome, elsewhere.outcome) == (NEW, JOINED, JOINED)
    assert first.triage.id == second.triage.id == elsewhere.triage.id
    assert second.thread_of == "r1" and elsewhere.thread_of is None
    assert [p["kind"] for p in store.posts_of("r1")] == [ANCHOR, REPORT]
    assert store.posts_of("r2") == [] and [p["kind"] for p in store.posts_of("r3")] == [ANCHOR, REPORT]
    assert store.joined_users("r1") == ["U2"]
    assert store.counts().queued == 1


def test_the_same_delivery_twice_is_one_request(store):
    a = store.submit(req("r1", dedupe_key="slack:abc"), max_queued=10)
    b = store.submit(req("r2", dedupe_key="slack:abc"), max_queued=10)
    assert b.outcome == DUPLICATE and b.request_id == "r1" and b.triage.id == a.triage.id
    assert store.request("r2") is None


def test_finished_triages_are_served_from_the_store_unless_forced_or_partial(store):
    t = store.submit(req("r1"), 10).triage
    job = store.claim_triage()
    assert job.id == t.id and job.state == "running" and job.attempt == 1
    assert store.finish_triage(job.id, 1, report_json="{}", verdict="healthy", partial=False, error=None)
    assert not store.finish_triage(job.id, 1, report_json="{}", verdict="x", partial=False, error=None)  # done once
    assert store.triage(job.id).verdict == "healthy"
    cached = store.submit(req("r2"), 10)
    assert cached.outcome == STORED and cached.triage.id == t.id
    forced = store.submit(req("r3", force=True), 10)
    assert forced.outcome == NEW and forced.triage.id != t.id
    job = store.claim_triage()
    store.finish_triage(job.id, job.attempt, report_json="{}", verdict="inconclusive", partial=True, error=None)
    assert store.submit(req("r4"), 10).outcome == STORED  # the complete one, not the partial one
    assert store.submit(req("r5", active=True), 10).outcome == NEW  # active probes are another triage


def test_the_queue_is_bounded_and_reports_positions(store):
    subs = [store.submit(req(f"r{i}", f"/runs/{i}"), max_queued=3) for i in range(4)]
    assert [s.outcome for s in subs] == [NEW, NEW, NEW, QUEUE_FULL]
    assert [s.position for s in subs[:3]] == [1, 2, 3]
    assert store.request("r3") is None  # refused requests leave nothing behind
    store.claim_triage()
    assert store.position(subs[1].triage.id) == 1 and store.position(subs[0].triage.id) == 0


def test_a_restart_requeues_unfinished_triages_and_refuses_the_old_attempts_writes(store):
    store.submit(req("r1"), 10)
    job = store.claim_triage()
    assert store.record_finding(job.id, 1, "entry.hold", '{"x": 1}')
    store.submit(req("r2", "/runs/b"), 10)
    post = store.claim_post()
    assert post.kind == ANCHOR and post.request.id == "r1"
    assert store.recover() == (1, 1)  # one triage back in the queue, one post that may have gone out
    again = store.claim_triage()
    assert again.id == job.id and again.attempt == 2
    assert not store.record_finding(job.id, 1, "entry.oom", "{}")  # the killed attempt's late finding
    assert not store.finish_triage(job.id, 1, report_json="{}", verdict="x", partial=False, error=None)
    assert store.findings(job.id) == {"entry.hold": '{"x": 1}'}
    post2 = store.claim_post()
    assert post2.id == post.id and post2.was_unsure and post2.attempts == 2


def test_a_report_post_waits_for_its_thread_and_its_triage(store):
    store.submit(req("r1", attach_postmortem=True), 10)
    anchor = store.claim_post()
    assert anchor.kind == ANCHOR and store.claim_post() is None  # the report waits for the thread
    assert store.post_sent(anchor.id, "111.1")
    assert not store.post_sent(anchor.id, "222.2")  # sent once
    assert store.request("r1").thread_ts == "111.1"
    assert store.claim_post() is None  # and for the triage
    job = store.claim_triage()
    store.finish_triage(job.id, job.attempt, report_json="{}", verdict="healthy", partial=False, error=None)
    report = store.claim_post()
    assert report.kind == REPORT and report.request.thread_ts == "111.1"
    assert store.claim_post() is None  # the file follows the report
    store.post_sent(report.id, "111.2")
    assert store.claim_post().kind == FILE


def test_a_resumed_triage_reuses_the_findings_of_the_attempt_that_was_killed(tmp_path, runs_root, store):
    run = runs.slime_oom_run(runs_root / "oom7")
    (run / "hold.json").write_text('{"seconds": 30}')  # would time the test out if it ran again
    store.submit(req("r1", str(run)), 10)
    killed = store.claim_triage()
    held = Finding(node="entry.hold", probe="hold", outcome="done", summary="held 30 s", evidence={"held_s": 30.0},
                   confidence=0.9, duration_s=30.0)
    store.record_finding(killed.id, killed.attempt, "entry.hold", held.model_dump_json())
    store.recover()
    config = service_config(tmp_path, runs_root, slack=type("S", (), {"url": "http://127.0.0.1:9/api/"})())
    queue = WorkQueue(store, config, ServiceMetrics())
    queue.run_one(store.claim_triage())
    done = store.triage(killed.id)
    assert done.state == "done" and done.attempt == 2 and done.verdict == "memory.max_tokens_per_gpu"
    assert not (run / "hold.started").exists()  # the 30 s probe was not run again
    assert service_graph.calls(run) == 1
    assert '"summary":"held 30 s"' in done.report
