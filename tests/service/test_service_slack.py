"""The live service on 127.0.0.1 against a local stand-in for Slack's Web API."""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
import service_graph
import service_runs as runs
from service_support import ADMIN, ALERTS, CHANNEL, HOOK_SECRET, SECRET, TEAM, block_text, message_meta
from triage.service.security import sign_hook, sign_slack
from triage.service.testing import button_body, slash_command_body, wait_for




def _report_in_thread(slack, anchor_ts: str, timeout: float = 10.0) -> dict:
    return wait_for(lambda: next((m for m in slack.thread(anchor_ts) if message_meta(m).get("kind") == "report"), None), timeout)


def test_signed_command_is_acked_within_3s_and_the_report_arrives_in_its_thread(live, slack, runs_root):
    runs.slime_oom_run(runs_root / "oom7")
    server = live()
    body = slash_command_body("oom7")
    started = time.perf_counter()
    r = server.command(body)
    ack_s = time.perf_counter() - started
    assert r.status_code == 200 and ack_s < 3.0
    assert r.json()["response_type"] == "ephemeral"
    assert "Triaging `oom7`" in r.json()["text"] and "thread" in r.json()["text"]

    anchor = wait_for(lambda: next(iter(slack.top_level(CHANNEL)), None))
    assert "<@U0ALICE> asked for a triage of `oom7`" in anchor["text"]
    report = _report_in_thread(slack, anchor["ts"])
    assert report["thread_ts"] == anchor["ts"]
    text = block_text(report["blocks"])
    assert "`memory.max_tokens_per_gpu`" in text
    assert "*Confidence*\n76%" in text  # 0.85 for the OOM finding, less the active probe it could not run
    assert "• CUDA out of memory at job.log:40 (tried to allocate 18.5 GiB)" in text
    assert "--max-tokens-per-gpu" in text.split("*Remedy*", 1)[1]
    buttons = next(b for b in report["blocks"] if b["type"] == "actions")["elements"]
    assert [b["text"]["text"] for b in buttons] == ["Run active probes", "Full postmortem"]
    assert json.loads(buttons[0]["value"])["run"] == "oom7"
    triage_id = json.loads(buttons[0]["value"])["triage"]
    assert buttons[1]["url"].startswith(f"https://triage.example.com/triages/{triage_id}/postmortem?expires=")
    state = server.triage(triage_id)
    assert state["state"] == "done" and state["report"]["root_cause"]["id"] == "memory.max_tokens_per_gpu"
    assert [s["probe"] for s in state["report"]["path"]] == ["hold", "oom_in_log", "replay_step"]
    # Every post went out once, with the bot token.
    assert len(slack.posts()) == 2 and all(c["auth"] == "Bearer xoxb-test" for c in slack.calls)


def test_unsigned_missigned_replayed_and_oversized_requests_are_rejected_and_do_no_work(live, slack, runs_root):
    run = runs.slime_oom_run(runs_root / "oom7")
    server = live()
    body = slash_command_body("oom7")
    old = int(time.time()) - 301
    cases = {
        "unsigned": (server.http.post("/slack/commands", content=body,
                                      headers={"Content-Type": "application/x-www-form-urlencoded"}), 401),
        "mis-signed": (server.command(body, secret="not-the-secret"), 401),
        "tampered": (server.http.post("/slack/commands", content=body.replace(b"oom7", b"oom8"),
                                      headers=sign_slack(SECRET, body)), 401),
        "replayed": (server.command(body, timestamp=old), 401),
        "oversized": (server.command(slash_command_body("oom7", padding="x" * 70_000)), 400),
        "hook unsigned": (server.http.post("/hooks/job-failed", content=b'{"run": "oom7"}'), 401),
        "hook mis-signed": (server.hook(b'{"run": "oom7"}', secret="wrong"), 401),
        "button mis-signed": (server.http.post("/slack/interactions", content=button_body("oom7"),
                                               headers=sign_slack("wrong", button_body("oom7"))), 401),
    }
    for name, (response, status) in cases.items():
        assert response.status_code == status, (name, response.text)
    assert "replayed" in cases["replayed"][0].json()["error"]
    assert "limit" in cases["oversized"][0].json()["error"]
    time.sleep(0.3)
    assert server.health() == {"ok": True, "queued": 0, "running": 0, "done": 0, "posts_pending": 0}
    assert service_graph.calls(run) == 0 and slack.calls == []
    metrics = server.http.get("/metrics").text
    assert 'triage_http_rejected_total{reason="replayed"} 1' in metrics
    assert 'triage_http_rejected_total{reason="oversized"} 1' in metrics
    assert "triage_requests_total{" not in metrics


def test_run_ids_with_dotdot_or_outside_the_runs_root_are_refused(live, slack, runs_root, tmp_path):
    runs.slime_oom_run(runs_root / "oom7")
    outside = runs.slime_oom_run(tmp_path / "elsewhere" / "secret-run")
    os.symlink(outside, runs_root / "link-out")
    server = live()
    answers = {ref: server.command(slash_command_body(ref)).json()["text"]
               for ref in ("../elsewhere/secret-run", "oom7/../../elsewhere/secret-run", str(outside), "link-out", "nope")}
    assert answers["../elsewhere/secret-run"] == (
        "`../elsewhere/secret-run` is not a run-id: run-ids are names under the runs root, without `..`.")
    assert "without `..`" in answers["oom7/../../elsewhere/secret-run"]
    assert answers[str(outside)].endswith("is outside the runs root: only runs under it can be triaged.")
    assert answers["link-out"].endswith("is outside the runs root: only runs under it can be triaged.")
    assert answers["nope"].startswith("No run `nope` under the runs root.")
    assert all(str(runs_root) not in a for a in answers.values())  # no server paths shown in Slack
    hook = server.hook(json.dumps({"run": "../elsewhere/secret-run"}).encode())
    assert hook.status_code == 400
    assert server.hook(json.dumps({"run": "nope"}).encode()).status_code == 404
    time.sleep(0.2)
    assert server.health()["done"] == 0 and slack.calls == [] and service_graph.calls(outside) == 0


def test_a_channel_or_workspace_not_allowed_gets_a_polite_refusal(live, slack, runs_root):
    run = runs.slime_oom_run(runs_root / "oom7")
    server = live(allowed_teams=frozenset({TEAM}))
    r = server.command(slash_command_body("oom7", channel="C0RANDOM"))
    assert r.status_code == 200
    assert r.json() == {"response_type": "ephemeral",
                        "text": f"Sorry — triage requests are not enabled in this channel. Please ask in <#{ALERTS}> <#{CHANNEL}>."}
    r = server.command(slash_command_body("oom7", team="T0OTHER"))
    assert r.json()["text"] == "Sorry — this workspace is not set up to request triages from this service."
    r = server.command(slash_command_body(""))
    assert r.json()["text"].startswith("Which run? Usage: `/triage <run-id> [--active] [--force]`")
    time.sleep(0.2)
    assert service_graph.calls(run) == 0 and slack.calls == []
    assert 'triage_requests_total{outcome="refused_channel",source="slack"} 1' in server.http.get("/metrics").text


def test_twenty_concurrent_requests_for_one_run_make_one_triage(live, slack, runs_root):
    run = runs.slime_oom_run(runs_root / "oom7")
    (run / "hold.json").write_text('{"seconds": 1.5}')
    server = live()
    users = [f"U{i:04d}" for i in range(20)]

    def ask(user: str) -> tuple[int, float, str]:
        body = slash_command_body("oom7", user=user)
        with httpx.Client(base_url=server.url, timeout=10) as c:
            t0 = time.perf_counter()
            r = c.post("/slack/commands", content=body, headers=sign_slack(SECRET, body))
            return r.status_code, time.perf_counter() - t0, r.json()["text"]

    with ThreadPoolExecutor(20) as pool:
        answers = list(pool.map(ask, users))
    assert all(status == 200 and took < 3.0 for status, took, _ in answers)
    assert sum("already being triaged" in text for _, _, text in answers) == 19
    anchor = wait_for(lambda: next(iter(slack.top_level(CHANNEL)), None))
    report = _report_in_thread(slack, anchor["ts"], timeout=15)
    assert service_graph.calls(run) == 1
    assert len(slack.posts()) == 2  # one thread, one report: the others are mentioned in it
    first = anchor["text"].split(">", 1)[0].removeprefix("<@")
    cc = block_text(report["blocks"]).rsplit("cc ", 1)[1]
    assert sorted(cc.replace("<@", "").replace(">", "").split()) == sorted(set(users) - {first})
    triage_id = json.loads(next(b for b in report["blocks"] if b["type"] == "actions")["elements"][0]["value"])["triage"]
    assert len(server.triage(triage_id)["requests"]) == 20


def test_a_finished_triage_is_served_from_the_store_unless_forced(live, slack, runs_root):
    run = runs.slime_oom_run(runs_root / "oom7")
    server = live()
    server.command(slash_command_body("oom7"))
    first = wait_for(lambda: next(iter(slack.top_level(CHANNEL)), None))
    _report_in_thread(slack, first["ts"])
    again = server.command(slash_command_body("oom7", user="U0BOB")).json()["text"]
    assert "was triaged" in again and "(memory.max_tokens_per_gpu)" in again and "--force" in again
    second = wait_for(lambda: len(slack.top_level(CHANNEL)) == 2 and slack.top_level(CHANNEL)[1])
    assert "answered from the store" in second["text"]
    _report_in_thread(slack, second["ts"])
    assert service_graph.calls(run) == 1
    forced = server.command(slash_command_body("oom7 --force", user="U0BOB")).json()["text"]
    assert forced.startswith("Triaging `oom7`")
    third = wait_for(lambda: len(slack.top_level(CHANNEL)) == 3 and slack.top_level(CHANNEL)[2])
    _report_in_thread(slack, third["ts"])
    assert service_graph.calls(run) == 2


def test_active_probes_run_for_allowed_users_only(live, slack, runs_root):
    run = runs.slime_oom_run(runs_root / "oom7")
    server = live(allow_relaunch=True)
    # An ordinary user asking for --active gets the static triage, and is told why.
    r = server.command(slash_command_body("oom7 --active", user="U0ALICE")).json()["text"]
    assert "Active probes (those that relaunch the run's job) are limited to allowed users" in r
    anchor = wait_for(lambda: next(iter(slack.top_level(CHANNEL)), None))
    static = _report_in_thread(slack, anchor["ts"])
    assert "replayed step" not in block_text(static["blocks"])
    # The button, pressed by someone not allowed: a note only they see, no triage.
    assert server.button(button_body("oom7", user="U0ALICE", thread_ts=anchor["ts"])).status_code == 200
    note = wait_for(lambda: slack.ephemerals and slack.ephemerals[0])
    assert note["user"] == "U0ALICE" and "only be run by the users allowed" in note["text"]
    assert service_graph.calls(run) == 1
    # Pressed by an allowed user: the active triage runs and answers in the same thread.
    assert server.button(button_body("oom7", user=ADMIN, thread_ts=anchor["ts"])).status_code == 200
    active = wait_for(lambda: [m for m in slack.thread(anchor["ts"]) if message_meta(m).get("kind") == "report"][1:])[0]
    text = block_text(active["blocks"])
    assert "• the replayed step runs out of memory again at max_tokens_per_gpu=32768" in text
    assert "*Confidence*\n90%" in text
    assert not any(b["type"] == "actions" and b["elements"][0]["action_id"] == "triage_active" for b in active["blocks"])
    assert service_graph.calls(run) == 2


def test_failed_job_hook_posts_the_report_and_the_postmortem_file(live, slack, runs_root):
    runs.reward_collapse_run(runs_root / "grpo-12")
    server = live()
    payload = json.dumps({"run": "grpo-12", "job_id": "raysubmit_Q1", "status": "FAILED"}).encode()
    signed = sign_hook(HOOK_SECRET, payload)
    r = server.hook(payload, headers=signed)
    assert r.status_code == 202 and r.json()["outcome"] == "new"
    # a re-delivery (the same signed bytes, even a second later) does no new work
    assert server.hook(payload, headers=signed).json()["outcome"] == "duplicate"
    anchor = wait_for(lambda: next(iter(slack.top_level(ALERTS)), None))
    assert anchor["text"].startswith(":rotating_light: Job `raysubmit_Q1` failed: triaging run `grpo-12`")
    report = _report_in_thread(slack, anchor["ts"])
    assert "`reward.broken_fn`" in block_text(report["blocks"])
    assert "• reward is 0.0 at every step from step 13 on (18 steps)" in block_text(report["blocks"])
    shared = wait_for(lambda: [f for f in slack.files.values() if f["shared"]], timeout=15)
    assert sorted(f["name"] for f in shared) == [
        "postmortem-completions_mean_length.png", "postmortem-frac_reward_zero_std.png", "postmortem-reward.png",
        "postmortem-reward_std.png", "postmortem.md"]
    assert all(f["shared"] == {"channel": ALERTS, "thread_ts": anchor["ts"],
                               "comment": "Postmortem of `grpo-12` (Markdown and plots)."} for f in shared)
    md = next(f for f in shared if f["name"] == "postmortem.md")["data"].decode()
    assert md.startswith("# Postmortem: `grpo-12` — ") and "![reward](postmortem-reward.png)" in md
    png = next(f for f in shared if f["name"] == "postmortem-reward.png")["data"]
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    # The same postmortem over HTTP, with its plots.
    triage_id = r.json()["triage_id"]
    assert server.read(triage_id, "/postmortem").text == md
    assert server.read(triage_id, "/files/postmortem-reward.png").content == png
    assert server.read(triage_id, "/files/..%2Ftriage.db").status_code == 404


def test_queue_position_is_reported_and_every_request_finishes(live, slack, runs_root):
    for name in ("a", "b", "c"):
        run = runs.slime_oom_run(runs_root / name)
        (run / "hold.json").write_text('{"seconds": 0.5}')
    server = live(concurrency=1)
    acks = [server.command(slash_command_body("a")).json()["text"]]
    assert "(starting now)" in acks[0]
    wait_for(lambda: server.health()["running"] == 1)
    acks += [server.command(slash_command_body(name)).json()["text"] for name in ("b", "c")]
    assert "(queued, position 1 (1 running))" in acks[1]
    assert "(queued, position 2 (1 running))" in acks[2]
    wait_for(lambda: server.health()["done"] == 3, timeout=15)
    wait_for(lambda: len(slack.posts()) == 6)


def test_a_triage_past_its_time_budget_ends_with_a_partial_report_that_says_so(live, slack, runs_root):
    slow = runs.slime_oom_run(runs_root / "slow")
    (slow / "hold.json").write_text('{"seconds": 1.0}')
    stuck = runs.slime_oom_run(runs_root / "stuck")
    (stuck / "hold.json").write_text('{"seconds": 8.0}')
    server = live(time_budget_s=0.5, grace_s=1.5)
    server.command(slash_command_body("slow"))
    anchor = wait_for(lambda: next(iter(slack.top_level(CHANNEL)), None))
    report = _report_in_thread(slack, anchor["ts"])
    text = block_text(report["blocks"])
    assert ":warning: The time budget of 0.5 s ran out: 2 probe(s) were not run; this report is partial." in text
    assert "`inconclusive`" in text
    # A probe still running after the budget and the grace: the report is built from what was found.
    started = time.monotonic()
    server.command(slash_command_body("stuck"))
    anchor2 = wait_for(lambda: len(slack.top_level(CHANNEL)) == 2 and slack.top_level(CHANNEL)[1])
    report2 = _report_in_thread(slack, anchor2["ts"])
    assert time.monotonic() - started < 6.0  # gave up after 0.5 + 1.5 s, did not wait for the 8 s probe
    assert ":warning: The time budget of 0.5 s ran out while hold was still running: this report is partial." in block_text(report2["blocks"])
    metrics = server.http.get("/metrics").text
    assert "triage_partial_total 2" in metrics and "triage_abandoned_total 1" in metrics


def test_a_post_whose_answer_was_lost_is_not_posted_twice(live, slack, runs_root):
    runs.slime_oom_run(runs_root / "oom7")
    slack.drop_answer["chat.postMessage"] = 1  # Slack takes the anchor, the answer never arrives
    server = live()
    server.command(slash_command_body("oom7"))
    anchor = wait_for(lambda: next(iter(slack.top_level(CHANNEL)), None))
    _report_in_thread(slack, anchor["ts"], timeout=15)
    assert len(slack.top_level(CHANNEL)) == 1
    assert [c["method"] for c in slack.calls] == ["chat.postMessage", "conversations.history", "chat.postMessage"]
    assert 'triage_posts_total{kind="anchor",outcome="recovered"} 1' in server.http.get("/metrics").text


def test_health_and_metrics(live, slack, runs_root):
    runs.slime_oom_run(runs_root / "oom7")
    server = live()
    server.command(slash_command_body("oom7"))
    wait_for(lambda: server.health()["done"] == 1 and server.health()["posts_pending"] == 0)
    metrics = server.http.get("/metrics")
    assert metrics.headers["content-type"].startswith("text/plain; version=0.0.4")
    text = metrics.text
    assert 'triage_requests_total{outcome="new",source="slack"} 1' in text
    assert 'triage_triages_total{verdict="memory.max_tokens_per_gpu"} 1' in text
    assert 'triage_probe_duration_seconds_count{probe="oom_in_log"} 1' in text
    assert "triage_queue_depth 0" in text and "triage_workers 2" in text
    assert server.read("0123456789abcdef").status_code == 404


@pytest.mark.parametrize("text,expected", [
    ("oom7 --bogus", "Unknown option `--bogus`."),
    ("a b", "One run at a time."),
    ("help", "Usage: `/triage <run-id> [--active] [--force]`"),
])
def test_command_usage_answers(live, slack, runs_root, text, expected):
    server = live()
    assert server.command(slash_command_body(text)).json()["text"].startswith(expected)
    assert slack.calls == []


def test_worker_processes_stop_a_stuck_probe_and_are_replaced(live, slack, runs_root):
    stuck = runs.slime_oom_run(runs_root / "stuck")
    (stuck / "hold.json").write_text('{"seconds": 30}')
    runs.slime_oom_run(runs_root / "after")
    # the budget leaves a fresh worker time for a whole static triage (the second request below)
    server = live(workers="process", concurrency=1, time_budget_s=3.0, grace_s=1.0)
    wait_for(lambda: server.health().get("workers_ready") == 1, timeout=60)
    first_pid = int(wait_for(lambda: server.service.queue.worker_pids())[0])
    server.command(slash_command_body("stuck"))
    anchor = wait_for(lambda: next(iter(slack.top_level(CHANNEL)), None))
    report = _report_in_thread(slack, anchor["ts"], timeout=15)
    assert ":warning: The time budget of 3 s ran out while hold was still running" in block_text(report["blocks"])
    started = (stuck / "hold.started").read_text().split()
    assert int(started[0]) == first_pid  # the probe ran in the worker process ...
    with pytest.raises(ProcessLookupError):
        os.kill(first_pid, 0)  # ... which was stopped with it
    assert not (stuck / "hold.finished").exists()
    # A new worker takes the next triage.
    server.command(slash_command_body("after"))
    anchor2 = wait_for(lambda: len(slack.top_level(CHANNEL)) == 2 and slack.top_level(CHANNEL)[1], timeout=60)
    assert "`memory.max_tokens_per_gpu`" in block_text(_report_in_thread(slack, anchor2["ts"], timeout=30)["blocks"])
    assert server.health()["workers_ready"] == 1
    assert server.service.queue.worker_pids()[0] != first_pid
