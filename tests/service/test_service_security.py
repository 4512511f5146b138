"""Signature checks, body limits, allow-lists and command parsing, without a server."""

from __future__ import annotations

import asyncio

import pytest

from triage.errors import BadInput
from triage.service.app import parse_command
from triage.service.config import ServiceConfig
from triage.service.security import (
    Access,
    Rejected,
    read_body,
    sign_hook,
    sign_slack,
    verify_hook,
    verify_slack,
)

NOW = 1_790_000_000


def _lower(headers: dict[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in headers.items()}


def _reason(fn, *args, **kw) -> tuple[int, str]:
    with pytest.raises(Rejected) as exc:
        fn(*args, **kw)
    return exc.value.status, exc.value.reason


def test_slack_signatures_are_checked_with_the_five_minute_rule():
    body = b"text=run-7&channel_id=C1"
    good = _lower(sign_slack("s3cret", body, timestamp=NOW))
    verify_slack("s3cret", good, body, now=NOW + 299)
    assert _reason(verify_slack, "s3cret", good, body, now=NOW + 301) == (401, "replayed")
    assert _reason(verify_slack, "s3cret", good, body, now=NOW - 301) == (401, "replayed")  # from the future
    assert _reason(verify_slack, "other", good, body, now=NOW) == (401, "bad_signature")
    assert _reason(verify_slack, "s3cret", good, body + b"x", now=NOW) == (401, "bad_signature")
    assert _reason(verify_slack, "s3cret", {}, body, now=NOW) == (401, "unsigned")
    assert _reason(verify_slack, "s3cret", {**good, "x-slack-request-timestamp": "soon"}, body, now=NOW) == (401, "bad_signature")
    assert _reason(verify_slack, None, good, body, now=NOW) == (401, "unconfigured")


def test_hook_signatures_use_their_own_secret():
    body = b'{"run": "run-7"}'
    good = _lower(sign_hook("hook", body, timestamp=NOW))
    assert good["x-triage-signature"].startswith("sha256=")
    verify_hook("hook", good, body, now=NOW)
    assert _reason(verify_hook, "hook", good, b'{"run": "run-8"}', now=NOW) == (401, "bad_signature")
    assert _reason(verify_hook, "hook", good, body, now=NOW + 400) == (401, "replayed")
    assert _reason(verify_hook, "hook", {"x-triage-timestamp": str(NOW)}, body, now=NOW) == (401, "unsigned")
    # A Slack signature is no hook signature.
    assert _reason(verify_hook, "hook", _lower(sign_slack("hook", body, timestamp=NOW)), body, now=NOW)[0] == 401


def test_bodies_over_the_limit_are_refused_before_they_are_read_whole():
    async def chunks(n: int, size: int):
        for _ in range(n):
            yield b"x" * size

    assert asyncio.run(read_body({}, chunks(2, 10), limit=20)) == b"x" * 20
    with pytest.raises(Rejected) as exc:
        asyncio.run(read_body({"content-length": "5000000"}, chunks(0, 0), limit=1000))
    assert exc.value.status == 400 and exc.value.reason == "oversized"
    with pytest.raises(Rejected):  # a lying Content-Length does not help
        asyncio.run(read_body({"content-length": "10"}, chunks(5, 400), limit=1000))


def test_allow_lists():
    open_to_all = Access(frozenset(), frozenset(), frozenset())
    assert open_to_all.team_allowed("T1") and open_to_all.channel_allowed("C1")
    assert not open_to_all.may_run_active("U1")  # nobody runs GPU probes unless named
    strict = Access(frozenset({"T1"}), frozenset({"C1"}), frozenset({"U1"}))
    assert strict.team_allowed("T1") and not strict.team_allowed("T2") and not strict.team_allowed(None)
    assert strict.channel_allowed("C1") and not strict.channel_allowed("C2")
    assert strict.may_run_active("U1") and not strict.may_run_active("U2")


@pytest.mark.parametrize("text,parsed", [
    ("run-7", ("run-7", False, False)),
    ("run-7 --active", ("run-7", True, False)),
    ("--force 'run 7'", ("run 7", False, True)),
])
def test_parse_command(text, parsed):
    assert parse_command(text) == parsed


def test_config_needs_a_runs_root_and_reads_the_environment(tmp_path):
    with pytest.raises(BadInput, match="no runs root"):
        ServiceConfig(runs_roots=())
    env = {"TRIAGE_RUNS_ROOT": str(tmp_path), "TRIAGE_DB": str(tmp_path / "t.db"), "SLACK_SIGNING_SECRET": "s",
           "SLACK_BOT_TOKEN": "xoxb-1", "SLACK_API_URL": "http://127.0.0.1:9/api", "TRIAGE_WEBHOOK_SECRET": "h",
           "TRIAGE_ALLOWED_CHANNELS": "C1, C2", "TRIAGE_ACTIVE_USERS": "U1"}
    cfg = ServiceConfig.from_env(env, concurrency=3)
    assert cfg.runs_roots == (tmp_path.resolve(),) and cfg.db_path == tmp_path / "t.db"
    assert cfg.slack_api_url == "http://127.0.0.1:9/api/"  # WebClient joins method names onto it
    assert cfg.allowed_channels == {"C1", "C2"} and cfg.active_users == {"U1"} and cfg.concurrency == 3
    assert cfg.webhook_secret == "h" and cfg.slack_signing_secret == "s" and cfg.slack_bot_token == "xoxb-1"
