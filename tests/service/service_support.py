"""Constants and helpers shared by the service tests (imported by name; conftest.py holds the fixtures)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

import service_graph
from triage.service import ServiceConfig
from triage.service.security import sign_hook, sign_slack, signed_query
from triage.service.testing import ServerThread, SlackStandIn

SECRET = "8f14e45fceea167a5a36dedd4bea2543"
HOOK_SECRET = "hook-secret-for-tests"
TEAM, CHANNEL, ALERTS = "T0TEST", "C0TRIAGE", "C0ALERTS"
ADMIN = "U0ADMIN"


def service_config(tmp_path: Path, runs_root: Path, slack: SlackStandIn, **changes: Any) -> ServiceConfig:
    values: dict[str, Any] = dict(
        runs_roots=(runs_root,), db_path=tmp_path / "triage.db", slack_signing_secret=SECRET,
        slack_bot_token="xoxb-test", slack_api_url=slack.url, webhook_secret=HOOK_SECRET, hook_channel=ALERTS,
        allowed_channels=frozenset({CHANNEL, ALERTS}), active_users=frozenset({ADMIN}), concurrency=2,
        time_budget_s=30.0, triage_fn=service_graph.triage, public_url="https://triage.example.com",
        workers="thread", json_logs=False,
    )
    values.update(changes)
    return ServiceConfig(**values)


def signed_path(triage_id: str, suffix: str = "", config: ServiceConfig | None = None) -> str:
    """`/triages/{id}{suffix}` with a signed link, as the Slack messages carry it (the tests' secrets by default)."""
    config = config or ServiceConfig(runs_roots=(Path("."),), slack_signing_secret=SECRET, webhook_secret=HOOK_SECRET)
    return f"/triages/{triage_id}{suffix}?{signed_query(config.link_key, triage_id, config.link_ttl_s)}"


class Live:
    """A running server and a client for it."""

    def __init__(self, server: ServerThread, config: ServiceConfig, app: Any) -> None:
        self.server = server
        self.config = config
        self.service = app.state.service  # the running parts: store, queue, poster
        self.url = server.url
        self.http = httpx.Client(base_url=server.url, timeout=10.0)

    def command(self, body: bytes, secret: str = SECRET, **kw: Any) -> httpx.Response:
        return self.http.post("/slack/commands", content=body, headers=sign_slack(secret, body, **kw))

    def button(self, body: bytes) -> httpx.Response:
        return self.http.post("/slack/interactions", content=body, headers=sign_slack(SECRET, body))

    def hook(self, payload: bytes, secret: str = HOOK_SECRET, headers: dict[str, str] | None = None) -> httpx.Response:
        """Deliver a failed-job hook; a re-delivery passes the first delivery's signed headers again."""
        return self.http.post("/hooks/job-failed", content=payload, headers=headers or sign_hook(secret, payload))

    def triage(self, triage_id: str) -> dict[str, Any]:
        r = self.http.get(signed_path(triage_id, config=self.config))
        assert r.status_code == 200, r.text
        return r.json()

    def read(self, triage_id: str, suffix: str = "") -> httpx.Response:
        """GET /triages/{id}{suffix} with the signed link a Slack user holds."""
        return self.http.get(signed_path(triage_id, suffix, self.config))

    def health(self) -> dict[str, Any]:
        return self.http.get("/healthz").json()


def message_meta(message: dict) -> dict:
    """The triage's metadata on a posted Slack message (kind, triage id, ...)."""
    return (message.get("metadata") or {}).get("event_payload") or {}


def block_text(blocks: list[dict]) -> str:
    """Every piece of text in a Block Kit message, for assertions."""
    out = []
    for b in blocks:
        if isinstance(b.get("text"), dict):
            out.append(b["text"]["text"])
        for f in b.get("fields", []) + b.get("elements", []):
            if isinstance(f, dict) and "text" in f:
                out.append(f["text"] if isinstance(f["text"], str) else f["text"]["text"])
    return "\n".join(out)
