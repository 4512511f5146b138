"""The service's gates: reading a triage takes a signed link, Slack users are rate-limited, no input gives a 500."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from triage.errors import TriageError
from triage.service import ServiceConfig, create_app
from triage.service.security import SlackRateLimits, sign_hook, sign_slack, signed_query, hook_signature
from triage.service.testing import ServerThread, SlackStandIn, slash_command_body, wait_for

SECRET = "slack-signing-secret-for-tests"
HOOK_SECRET = "hook-secret-for-tests"
CHANNEL = "C0TRIAGE"


def refuse(ref: str, runs_root: str | None = None, playbooks: Any = None, executor: Any = None):
    """A triage function that ends at once (the gates are what is tested, not the triage)."""
    raise TriageError("stub triage: nothing to see")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Any]:
    runs = tmp_path / "runs"
    (runs / "grpo-12").mkdir(parents=True)
    (runs / "grpo-12" / "job.log").write_text("secret-looking log line\n")
    with SlackStandIn() as slack:
        config = ServiceConfig(
            runs_roots=(runs,), db_path=tmp_path / "triage.db", slack_signing_secret=SECRET, slack_bot_token="xoxb-t",
            slack_api_url=slack.url, webhook_secret=HOOK_SECRET, hook_channel=CHANNEL, triage_fn=refuse,
            workers="thread", json_logs=False, public_url="https://triage.example.com", rate_user_per_min=3,
            rate_channel_per_min=5, link_ttl_s=600,
        )
        with ServerThread(create_app(config)) as thread:
            http = httpx.Client(base_url=thread.url, timeout=10.0)
            http.config = config  # type: ignore[attr-defined]
            http.runs = runs  # type: ignore[attr-defined]
            yield http
            http.close()


def hook(http: httpx.Client, payload: dict | bytes) -> httpx.Response:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return http.post("/hooks/job-failed", content=body, headers=sign_hook(HOOK_SECRET, body))


def command(http: httpx.Client, text: str, user: str = "U0ALICE", channel: str = CHANNEL) -> httpx.Response:
    body = slash_command_body(text, user=user, channel=channel)
    return http.post("/slack/commands", content=body, headers=sign_slack(SECRET, body))


def a_triage(http: httpx.Client) -> tuple[str, str]:
    r = hook(http, {"run": "grpo-12", "job_id": "raysubmit_1"})
    assert r.status_code == 202, r.text
    return r.json()["triage_id"], r.json()["url"]


def test_reading_a_triage_without_credentials_is_refused_and_discloses_nothing(server):
    triage_id, _ = a_triage(server)
    for path in (f"/triages/{triage_id}", f"/triages/{triage_id}/postmortem",
                 f"/triages/{triage_id}/files/postmortem.md"):
        r = server.get(path)
        assert r.status_code == 401, path
        assert len(r.content) < 200
        for leak in (str(server.runs), "grpo-12", CHANNEL, "secret-looking", "raysubmit"):
            assert leak not in r.text, (path, leak)


def test_the_signed_link_from_the_hook_reply_opens_the_triage(server):
    triage_id, url = a_triage(server)
    assert url.startswith(f"/triages/{triage_id}?expires=")
    state = wait_for(lambda: (r := server.get(url)).status_code == 200 and r.json()["state"] != "queued" and r.json())
    assert state["id"] == triage_id and state["run"] == "grpo-12"
    # the postmortem link Slack carries is signed the same way
    from triage.service.slack import postmortem_url

    link = postmortem_url(server.config, triage_id)
    assert link.startswith(f"https://triage.example.com/triages/{triage_id}/postmortem?expires=")
    assert server.get(link.removeprefix("https://triage.example.com")).status_code != 401


def test_expired_forged_and_other_triages_links_are_refused(server):
    triage_id, url = a_triage(server)
    key = server.config.link_key
    expired = f"/triages/{triage_id}?{signed_query(key, triage_id, 60, now=time.time() - 3600)}"
    r = server.get(expired)
    assert r.status_code == 403 and "expired" in r.json()["error"]
    other = "0123456789abcdef"
    assert server.get(f"/triages/{other}?{url.split('?', 1)[1]}").status_code == 403  # a link is for one triage
    forged = f"/triages/{triage_id}?{signed_query(b'not-the-key', triage_id, 600)}"
    assert server.get(forged).status_code == 403
    assert server.get(f"/triages/{triage_id}?expires=abc&sig=\u00e9").status_code == 403


def test_a_request_signed_like_a_hook_may_read(server):
    triage_id, _ = a_triage(server)
    path = f"/triages/{triage_id}"
    ts = str(int(time.time()))
    good = {"X-Triage-Timestamp": ts, "X-Triage-Signature": hook_signature(HOOK_SECRET, ts, path.encode())}
    assert server.get(path, headers=good).status_code == 200
    bad = {"X-Triage-Timestamp": ts, "X-Triage-Signature": hook_signature("wrong", ts, path.encode())}
    assert server.get(path, headers=bad).status_code == 403


def test_a_slack_user_over_the_rate_limit_gets_a_polite_reply_and_nothing_accepted_is_lost(server):
    for i in range(3):
        (server.runs / f"run-{i}").mkdir()
    (server.runs / "run-3").mkdir()
    accepted = []
    for i in range(3):
        body = slash_command_body(f"run-{i}", user="U0BOB")
        headers = sign_slack(SECRET, body)
        r = server.post("/slack/commands", content=body, headers=headers)
        assert "Triaging `run-" in r.json()["text"], r.text
        accepted.append((body, headers))
    r = command(server, "run-3", user="U0BOB")
    assert r.status_code == 200 and r.json()["response_type"] == "ephemeral"
    assert r.json()["text"].startswith("Sorry — you have asked for 3 triages in the last minute")
    assert "try again in" in r.json()["text"]
    # Slack's retry of a request already accepted is not refused: it joins what was recorded
    retry = server.post("/slack/commands", content=accepted[0][0], headers=accepted[0][1])
    assert "Sorry" not in retry.json()["text"], retry.text
    # another user is not held back by Bob's limit
    assert "Triaging" in command(server, "run-3", user="U0CAROL").json()["text"]
    metrics = server.get("/metrics").text
    assert 'outcome="refused_rate_limited"' in metrics


def test_the_channel_limit_counts_every_user():
    limits = SlackRateLimits(per_user=10, per_channel=2)
    assert limits.check("U1", "C1", "d1", now=0) is None
    assert limits.check("U2", "C1", "d2", now=1) is None
    refused = limits.check("U3", "C1", "d3", now=2)
    assert refused is not None and refused.startswith("Sorry — this channel has asked for 2 triages")
    assert limits.check("U3", "C1", "d3", now=61) is None  # a minute later
    assert limits.check("U3", "C2", "d4", now=2) is None


def test_a_non_ascii_slack_signature_is_a_401(server):
    body = slash_command_body("grpo-12")
    headers = {**sign_slack(SECRET, body), "X-Slack-Signature": "v0=\u00e9\u00e9".encode("utf-8")}
    r = server.post("/slack/commands", content=body, headers=headers)
    assert r.status_code == 401 and len(r.content) < 200
    hook_headers = {**sign_hook(HOOK_SECRET, b"{}"), "X-Triage-Signature": "sha256=\u00e9".encode("utf-8")}
    assert server.post("/hooks/job-failed", content=b"{}", headers=hook_headers).status_code == 401


def test_a_5000_character_run_id_is_refused_with_a_short_message(server):
    ref = "r" * 5000
    r = hook(server, {"run": ref})
    assert r.status_code == 400 and len(r.content) < 300 and "255 bytes" in r.text
    slack = command(server, ref)
    assert slack.status_code == 200 and "255 bytes" in slack.json()["text"] and len(slack.content) < 400


def test_a_20000_deep_json_body_is_a_400(server):
    deep = b'{"run": ' + b"[" * 20_000 + b"]" * 20_000 + b"}"
    r = hook(server, deep)
    assert r.status_code == 400 and "nested too deeply" in r.text and len(r.content) < 200
    from urllib.parse import urlencode

    body = urlencode({"payload": "[" * 6_000 + "]" * 6_000}).encode()  # within the body limit once URL-encoded
    r = server.post("/slack/interactions", content=body, headers=sign_slack(SECRET, body))
    assert r.status_code == 400 and "nested too deeply" in r.text and len(r.content) < 200


def test_the_service_configuration_reads_relaunch_links_and_limits(tmp_path):
    from triage.errors import BadInput

    env = {"TRIAGE_RUNS_ROOT": str(tmp_path), "SLACK_SIGNING_SECRET": SECRET}
    default = ServiceConfig.from_env(env)
    assert default.allow_relaunch is False  # never, unless configured
    assert default.link_ttl_s == 7 * 24 * 3600 and default.rate_user_per_min == 6
    cfg = ServiceConfig.from_env({**env, "TRIAGE_ALLOW_RELAUNCH": "1", "TRIAGE_LINK_TTL": "60",
                                  "TRIAGE_RATE_USER": "2", "TRIAGE_RATE_CHANNEL": "0", "TRIAGE_LINK_SECRET": "k"})
    assert cfg.allow_relaunch and cfg.link_ttl_s == 60 and cfg.rate_user_per_min == 2 and cfg.link_key == b"k"
    assert default.link_key != SECRET.encode()  # derived, not the signing secret itself
    with pytest.raises(BadInput, match="TRIAGE_LINK_TTL"):
        ServiceConfig.from_env({**env, "TRIAGE_LINK_TTL": "soon"})
    from triage.cli import build_parser
    from triage.service.cli import config_from_args

    ns = build_parser().parse_args(["serve", "--runs-root", str(tmp_path), "--allow-relaunch", "--engine-allow",
                                    "10.0.0.5:30000", "--rate-user", "1"])
    flagged = config_from_args(ns)
    assert flagged.allow_relaunch and flagged.engine_allow == frozenset({"10.0.0.5:30000"})
    assert flagged.rate_user_per_min == 1
