"""A log handed over in Slack: the "Triage this log" message shortcut and `/triage file:F…`, against the stand-in.

Uploads are triaged with the real playbooks (not the service tests' small graph): the
verdicts asserted are the ones `triage run - < fragment.txt` gives for the same text.
"""

from __future__ import annotations

import json
import time

import httpx
import pytest
from service_support import CHANNEL, SECRET, block_text, message_meta
from triage.service import uploads
from triage.service.security import sign_slack
from triage.service.testing import SlackStandIn, message_shortcut_body, slash_command_body, wait_for

# The error transformers raises when a tokenizer without a pad token is asked to pad
# (huggingface/transformers, src/transformers/tokenization_utils_base.py, _get_padding_truncation_strategies),
# as TRL users paste it (huggingface/trl issue threads on GRPOTrainer with Llama tokenizers).
PAD_LOG = """\
Traceback (most recent call last):
  File "/workspace/train_grpo.py", line 88, in <module>
    trainer.train()
  File "/usr/local/lib/python3.11/site-packages/transformers/tokenization_utils_base.py", line 2687, in _get_padding_truncation_strategies
    raise ValueError(
ValueError: Asking to pad but the tokenizer does not have a padding token. Please select a token to use as `pad_token` `(tokenizer.pad_token = tokenizer.eos_token e.g.)` or add a new pad token via `tokenizer.add_special_tokens({'pad_token': '[PAD]'})`.
"""
PAD_VERDICT = "tokenizer.no_pad_token"
MESSAGE_TS = "1700000100.000100"




def _buttons(report: dict) -> list[str]:
    return [e["text"]["text"] for b in report["blocks"] if b["type"] == "actions" for e in b["elements"]]


def _kind(slack: SlackStandIn, kind: str, thread_ts: str | None = None) -> list[dict]:
    with slack._lock:
        return [m for m in slack.messages if message_meta(m).get("kind") == kind
                and (thread_ts is None or m.get("thread_ts") == thread_ts)]


def _shortcut(server, body: bytes) -> httpx.Response:
    return server.http.post("/slack/interactions", content=body, headers=sign_slack(SECRET, body))


def _triages(server) -> int:
    c = server.service.store.counts()
    return c.queued + c.running + c.done


def test_shortcut_on_a_pasted_log_posts_its_report_in_the_messages_thread(live, slack):
    server = live()
    # Slack escapes <, > and & in message text, and a pasted log usually sits in a code block.
    pasted = "```" + PAD_LOG.replace("<module>", "&lt;module&gt;") + "```"
    started = time.perf_counter()
    r = _shortcut(server, message_shortcut_body(pasted, message_ts=MESSAGE_TS))
    assert r.status_code == 200 and time.perf_counter() - started < 3.0

    anchor = wait_for(lambda: next(iter(_kind(slack, "anchor", MESSAGE_TS)), None), timeout=10)
    assert "<@U0ALICE> asked for a triage of `pasted-message.log`" in anchor["text"]
    report = wait_for(lambda: next(iter(_kind(slack, "report", MESSAGE_TS)), None), timeout=40)
    text = block_text(report["blocks"])
    assert f"`{PAD_VERDICT}`" in text
    assert "the input was a fragment (the message pasted in Slack, 6 lines)" in text
    assert "Run active probes" not in _buttons(report)  # nothing to relaunch for a pasted log
    triage_id = json.loads(next(e["value"] for b in report["blocks"] if b["type"] == "actions"
                                for e in b["elements"] if e.get("value")))["triage"]
    state = server.triage(triage_id)
    assert state["run"] == "pasted-message.log" and state["report"]["root_cause"]["id"] == PAD_VERDICT
    assert state["requests"][0]["source"] == "shortcut" and state["requests"][0]["thread_ts"] == MESSAGE_TS
    assert slack.downloads() == [] and slack.posts("files.info") == []  # the text came in the payload
    postmortem = server.read(triage_id, "/postmortem")  # the report's "Full postmortem" link
    assert postmortem.status_code == 200 and f"`{PAD_VERDICT}`" in postmortem.text


def test_triage_file_command_and_a_shortcut_on_an_attached_file_fetch_it_with_the_bot_token(live, slack):
    server = live()
    f = slack.register_file("job.log", PAD_LOG.encode(), "text/plain", file_id="F0JOBLOG1")
    r = server.command(slash_command_body(f"file:{f['id']}"))
    assert r.status_code == 200 and r.json()["response_type"] == "ephemeral"
    assert "Fetching the file `F0JOBLOG1`" in r.json()["text"]

    anchor = wait_for(lambda: next(iter(slack.top_level(CHANNEL)), None), timeout=10)
    assert "asked for a triage of `job.log`" in anchor["text"]
    report = wait_for(lambda: next(iter(_kind(slack, "report", anchor["ts"])), None), timeout=40)
    text = block_text(report["blocks"])
    assert f"`{PAD_VERDICT}`" in text and "*Run*\n`job.log`" in text
    assert "the input was a fragment (the Slack file 'job.log', 6 lines)" in text
    assert slack.posts("files.info") == [{"file": "F0JOBLOG1"}]
    assert [(d["path"], d["auth"]) for d in slack.downloads()] == [("/files-pri/T0TEST-F0JOBLOG1/job.log",
                                                                     "Bearer xoxb-test")]

    # The same log attached to a message (with a comment) and triaged by the shortcut: fetched, and
    # answered from the store in the message's thread (the same text is the same triage).
    g = slack.register_file("job.log", PAD_LOG.encode(), "text/plain", file_id="F0JOBLOG2")
    body = message_shortcut_body("here is the log of last night's run", files=[slack.file_payload(g["id"])],
                                 message_ts=MESSAGE_TS)
    assert _shortcut(server, body).status_code == 200
    again = wait_for(lambda: next(iter(_kind(slack, "report", MESSAGE_TS)), None), timeout=20)
    assert f"`{PAD_VERDICT}`" in block_text(again["blocks"])
    assert len(slack.downloads()) == 2 and _triages(server) == 1


def test_binary_oversized_foreign_and_unsigned_uploads_are_refused_politely_and_nothing_is_triaged(
        live, slack, monkeypatch):
    server = live(rate_user_per_min=0)
    with SlackStandIn() as elsewhere:
        files = {
            "binary type": slack.register_file("model.safetensors", b"\x00\x01" * 64, "application/octet-stream"),
            "binary text": slack.register_file("dump.log", b"step 1\n\x00\x00\x00\x00", "text/plain"),
            "oversized": slack.register_file("huge.log", PAD_LOG.encode(), size=uploads.MAX_UPLOAD_BYTES + 1),
            "size lies": slack.register_file("lies.log", PAD_LOG.encode() * 40, size=100),
            "foreign host": slack.register_file(
                "job.log", PAD_LOG.encode(), url_private=f"http://localhost:{elsewhere.port}/files-pri/T0TEST-F1/job.log"),
        }
        for case, f in files.items():
            # "size lies": its metadata says 100 bytes; the limit is enforced while reading (40 x 703 bytes > 4 KiB)
            monkeypatch.setattr(uploads, "MAX_UPLOAD_BYTES", 4096 if case == "size lies" else 64 << 20)
            r = server.command(slash_command_body(f"file:{f['id']}"))
            assert r.status_code == 200, case
            wait_for(lambda: any(f"`{f['name']}`" in e["text"] for e in slack.ephemerals), timeout=10)
        said = {case: next(e["text"] for e in slack.ephemerals if f"`{f['name']}`" in e["text"])
                for case, f in files.items()}
        assert said["binary type"].startswith("Sorry — `model.safetensors` is not a text file (application/octet-stream)")
        assert said["binary text"].startswith("Sorry — `dump.log` is binary (it holds NUL bytes), not a log")
        assert "over the 64 MB a Slack upload may hold" in said["oversized"]
        assert said["size lies"].startswith("Sorry — `lies.log` is over the")
        assert "not served by this workspace's Slack" in said["foreign host"]
        assert elsewhere.requests == []  # the bot token never went to the other host
        fetched = {d["path"].split("/")[2].rsplit("-", 1)[1] for d in slack.downloads()}
        assert fetched == {files["binary text"]["id"], files["size lies"]["id"]}  # their metadata said text, small

        # The shortcut on a message holding only a binary file: refused from the payload, in the message's thread.
        body = message_shortcut_body("", files=[slack.file_payload(files["binary type"]["id"])], trigger="2")
        calls = len(slack.calls)
        assert _shortcut(server, body).status_code == 200
        note = wait_for(lambda: [e for e in slack.ephemerals if e.get("thread_ts") == MESSAGE_TS], timeout=10)
        assert "is not a text file" in note[0]["text"] and note[0]["user"] == "U0ALICE"
        assert [c["method"] for c in slack.calls[calls:]] == ["chat.postEphemeral"]

        # Unsigned, and signed with another secret: 401, and nothing read or recorded.
        pasted = message_shortcut_body(PAD_LOG, trigger="3")
        assert server.http.post("/slack/interactions", content=pasted,
                                headers={"Content-Type": "application/x-www-form-urlencoded"}).status_code == 401
        assert server.http.post("/slack/interactions", content=pasted,
                                headers=sign_slack("not-the-secret", pasted)).status_code == 401

    time.sleep(0.3)
    assert _triages(server) == 0 and slack.posts() == []  # no anchor, no report: only the ephemeral notes
    assert not (server.config.files_root / "uploads").exists() or not any((server.config.files_root / "uploads").iterdir())


def test_shortcut_on_an_empty_message_is_refused_and_on_a_chat_message_says_it_is_not_a_log(live, slack):
    server = live()
    assert _shortcut(server, message_shortcut_body("", message_ts="1700000200.000200")).status_code == 200
    note = wait_for(lambda: slack.ephemerals, timeout=10)
    assert "that message holds no text or text file to triage" in note[0]["text"] and _triages(server) == 0

    assert _shortcut(server, message_shortcut_body("thanks, that fixed it!")).status_code == 200
    report = wait_for(lambda: next(iter(_kind(slack, "report", MESSAGE_TS)), None), timeout=40)
    assert report["text"].startswith(":x: The triage of `pasted-message.log` could not finish: "
                                     "`pasted-message.log` does not read as a training job's log")


def test_a_repeated_shortcut_click_is_one_triage_and_one_report(live, slack):
    server = live()
    first = message_shortcut_body(PAD_LOG, trigger="1")
    second = message_shortcut_body(PAD_LOG, trigger="2")  # the user clicks again: a new delivery, same message
    assert _shortcut(server, first).status_code == 200
    assert server.http.post("/slack/interactions", content=first,  # and Slack retries the first one
                            headers=sign_slack(SECRET, first)).status_code == 200
    assert _shortcut(server, second).status_code == 200
    note = wait_for(lambda: slack.ephemerals, timeout=10)
    assert note[0]["text"].startswith("Already received: the triage of `pasted-message.log` is")
    assert note[0]["thread_ts"] == MESSAGE_TS
    report = wait_for(lambda: next(iter(_kind(slack, "report", MESSAGE_TS)), None), timeout=40)
    assert f"`{PAD_VERDICT}`" in block_text(report["blocks"])
    time.sleep(0.3)
    assert len(_kind(slack, "anchor")) == 1 and len(_kind(slack, "report")) == 1
    assert _triages(server) == 1
