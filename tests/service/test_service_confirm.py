"""Confirmed causes from Slack: the report's "Confirm" and "It was something else…" buttons.

The payloads are Slack's `block_actions` and `view_submission` interaction payloads
(api.slack.com/reference/interaction-payloads), form-encoded and signed as Slack signs them.
"""

from __future__ import annotations

import json
import time
from urllib.parse import urlencode

import service_runs as runs
from service_support import ADMIN, CHANNEL, TEAM, block_text, message_meta
from triage.memory.store import MemoryStore
from triage.service.testing import slash_command_body, wait_for



def _report(slack, run_ref: str) -> dict:
    def find():
        for anchor in slack.top_level(CHANNEL):
            if f"`{run_ref}`" in (anchor.get("text") or ""):
                return next((m for m in slack.thread(anchor["ts"]) if message_meta(m).get("kind") == "report"), None)
        return None
    return wait_for(find, 15)



def _memory_buttons(report: dict) -> dict[str, dict]:
    block = next(b for b in report["blocks"] if b.get("block_id") == "triage_memory")
    return {b["text"]["text"]: b for b in block["elements"]}


def _press(button: dict, user: str, thread: str) -> bytes:
    payload = {
        "type": "block_actions", "team": {"id": TEAM}, "user": {"id": user}, "channel": {"id": CHANNEL},
        "trigger_id": f"{int(time.time())}.1.{user}",
        "container": {"type": "message", "channel_id": CHANNEL, "message_ts": "1", "thread_ts": thread},
        "message": {"ts": "1", "thread_ts": thread},
        "actions": [{"action_id": button["action_id"], "type": "button", "value": button["value"]}],
    }
    return urlencode({"payload": json.dumps(payload)}).encode()


def _submit(view: dict, user: str, verdict: str, note: str) -> bytes:
    payload = {
        "type": "view_submission", "team": {"id": TEAM}, "user": {"id": user},
        "view": {"id": "V1", "callback_id": view["callback_id"], "private_metadata": view["private_metadata"],
                 "state": {"values": {
                     "cause": {"verdict": {"type": "static_select", "selected_option": {"value": verdict}}},
                     "note": {"note": {"type": "plain_text_input", "value": note}}}}},
    }
    return urlencode({"payload": json.dumps(payload)}).encode()


def _ephemeral(slack, user: str, count: int) -> str:
    mine = wait_for(lambda: [e for e in slack.ephemerals if e.get("user") == user][count - 1:] or None, 10)
    return mine[0]["text"]


def test_confirm_in_slack_is_stored_once_refused_off_the_allow_list_and_shown_on_the_next_run(live, slack, runs_root):
    runs.slime_oom_run(runs_root / "oom7")
    # The last good run of the same job: the same command with half the token budget, no crash.
    good = runs.slime_oom_run(runs_root / "good")
    (good / "job.log").write_text((good / "job.log").read_text().split("Traceback")[0].rsplit("\n", 1)[0] + "\n")
    (good / "cmdline.txt").write_text((good / "cmdline.txt").read_text().replace("32768", "16384"))
    (good / "triage.yaml").write_text("status: succeeded\n")
    server = live()
    assert server.command(slash_command_body("oom7")).status_code == 200
    report = _report(slack, "oom7")
    thread = report["thread_ts"]
    changed = next(b["text"]["text"] for b in report["blocks"]
                   if b.get("text", {}).get("text", "").startswith("*Changed since the last good run*"))
    assert "(baseline good (its manifest says it succeeded; found in the runs root))" in changed
    assert changed.splitlines()[1] == "• argument: max_tokens_per_gpu: 16384 → 32768 (×2) — bears on " \
        "memory.max_tokens_per_gpu, memory.sequence_too_long, memory.logits_tensor, memory.colocate_second_step"
    buttons = _memory_buttons(report)
    assert list(buttons) == ["Confirm", "It was something else…"]
    value = json.loads(buttons["Confirm"]["value"])
    tid, verdict = value["triage"], value["verdict"]
    assert verdict == "memory.max_tokens_per_gpu"

    # Off the allow-list: refused, nothing stored.
    assert server.button(_press(buttons["Confirm"], "U0ALICE", thread)).status_code == 200
    assert _ephemeral(slack, "U0ALICE", 1).startswith("Sorry — only the users allowed to run active probes")
    # An allowed user, twice (a repeated click): stored once.
    for n in (1, 2):
        assert server.button(_press(buttons["Confirm"], ADMIN, thread)).status_code == 200
        text = _ephemeral(slack, ADMIN, n)
        assert text.startswith("Recorded:" if n == 1 else "Already recorded:"), text
    with MemoryStore(server.config.db_path) as store:
        records = store.confirmations()
    assert len(records) == 1
    assert (records[0]["triage_id"], records[0]["verdict"], records[0]["by"]) == (tid, verdict, ADMIN)
    assert records[0]["signature"].startswith("OutOfMemoryError | CUDA out of memory")

    # The next run that dies the same way says so in its report.
    runs.slime_oom_run(runs_root / "oom8", steps=5)
    assert server.command(slash_command_body("oom8")).status_code == 200
    text = block_text(_report(slack, "oom8")["blocks"])
    assert f":brain: seen before: 1 run(s), confirmed as {verdict} by {ADMIN} on " in text

    metrics = server.http.get("/metrics").text
    assert f'triage_verdict_given{{verdict="{verdict}"}} 2' in metrics
    assert f'triage_verdict_confirmed{{verdict="{verdict}"}} 1' in metrics


def test_it_was_something_else_opens_a_picker_and_records_the_choice(live, slack, runs_root):
    runs.slime_oom_run(runs_root / "oom9")
    server = live()
    server.command(slash_command_body("oom9"))
    report = _report(slack, "oom9")
    button = _memory_buttons(report)["It was something else…"]
    tid = json.loads(button["value"])["triage"]
    assert server.button(_press(button, ADMIN, report["thread_ts"])).status_code == 200
    opened = wait_for(lambda: slack.views[0] if slack.views else None, 10)
    view = opened["view"]
    select = view["blocks"][0]["element"]
    assert select["type"] == "static_select"
    ids = [o["value"] for o in select["options"]]
    assert "host.ram_exhausted" in ids and "healthy" in ids and "inconclusive" not in ids

    # A pick that is not a catalog id (a forged payload): nothing stored.
    r = server.button(_submit(view, ADMIN, "no.such_verdict", ""))
    assert r.status_code == 200
    assert "is not a verdict id of the catalog; nothing recorded" in _ephemeral(slack, ADMIN, 1)
    r = server.button(_submit(view, ADMIN, "host.ram_exhausted", "the node's page cache"))
    assert r.status_code == 200
    assert _ephemeral(slack, ADMIN, 2).startswith(
        f"Recorded: triage `{tid}` corrected from `memory.max_tokens_per_gpu` to `host.ram_exhausted`")
    with MemoryStore(server.config.db_path) as store:
        records = store.confirmations()
    assert [(r["verdict"], r["given"], r["note"]) for r in records] == [
        ("host.ram_exhausted", "memory.max_tokens_per_gpu", "the node's page cache")]
    metrics = server.http.get("/metrics").text
    assert 'triage_verdict_corrected{to="host.ram_exhausted",verdict="memory.max_tokens_per_gpu"} 1' in metrics
