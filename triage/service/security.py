"""Who may ask for what: request signatures, body limits, allow-lists, run-id confinement.

Every check here runs before anything is recorded or queued, so a rejected request
leaves no trace but a log line and a metric.

- Slack signs each request: `X-Slack-Signature: v0=HMAC-SHA256(secret, "v0:{ts}:{body}")`
  with `X-Slack-Request-Timestamp: {ts}`; slack_sdk's `SignatureVerifier` checks it, and a
  timestamp more than five minutes away is a replay.
- Failed-job hooks use the same construction with their own secret and headers:
  `X-Triage-Timestamp: {ts}` and `X-Triage-Signature: sha256=HMAC-SHA256(secret, "{ts}.{body}")`.
- Run-ids are names under the configured runs roots; `..`, absolute paths outside them and
  symlinks leading out are refused (`triage.run.source.resolve_run_dir`).
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from slack_sdk.signature import SignatureVerifier

from triage.errors import BadInput
from triage.run.source import resolve_run_dir

HOOK_TIMESTAMP = "x-triage-timestamp"
HOOK_SIGNATURE = "x-triage-signature"


class Rejected(Exception):
    """A request refused before any work: `status` is the HTTP answer, `reason` a metric label."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        self.status = status
        self.reason = reason
        self.message = message
        super().__init__(message)


async def read_body(headers: Mapping[str, str], chunks: AsyncIterator[bytes], limit: int) -> bytes:
    """The request body, refused (400) as soon as it is known to exceed `limit` bytes."""
    declared = headers.get("content-length")
    if declared is not None:
        try:
            size = int(declared)
        except ValueError:
            raise Rejected(400, "bad_request", "Content-Length is not a number") from None
        if size > limit:
            raise Rejected(400, "oversized", f"request body of {size} bytes is over the {limit}-byte limit")
    body = bytearray()
    async for chunk in chunks:
        body.extend(chunk)
        if len(body) > limit:
            raise Rejected(400, "oversized", f"request body is over the {limit}-byte limit")
    return bytes(body)


def _timestamp(raw: str | None, skew_s: int, now: float, what: str) -> int:
    if not raw:
        raise Rejected(401, "unsigned", f"missing {what} timestamp header")
    try:
        ts = int(raw)
    except ValueError:
        raise Rejected(401, "bad_signature", f"{what} timestamp {raw[:20]!r} is not a number") from None
    if abs(now - ts) > skew_s:
        raise Rejected(401, "replayed", f"{what} timestamp is {int(now - ts)} s old (limit {skew_s} s): replayed or clock skew")
    return ts


def verify_slack(secret: str | None, headers: Mapping[str, str], body: bytes, skew_s: int = 300,
                 now: float | None = None) -> None:
    """Raise `Rejected` (401) unless Slack signed `body` within the last `skew_s` seconds."""
    if not secret:
        raise Rejected(401, "unconfigured", "SLACK_SIGNING_SECRET is not set: Slack requests cannot be verified")
    now = time.time() if now is None else now
    signature = headers.get("x-slack-signature")
    raw_ts = headers.get("x-slack-request-timestamp")
    if not signature and not raw_ts:
        raise Rejected(401, "unsigned", "request is not signed by Slack")
    if not signature:
        raise Rejected(401, "unsigned", "missing X-Slack-Signature")
    ts = _timestamp(raw_ts, skew_s, now, "Slack")
    verifier = SignatureVerifier(secret, clock=_FixedClock(now))
    try:
        ok = verifier.is_valid(body=body, timestamp=str(ts), signature=signature)
    except UnicodeDecodeError:
        ok = False
    if not ok:
        raise Rejected(401, "bad_signature", "Slack signature does not match")


class _FixedClock:
    def __init__(self, now: float) -> None:
        self._now = now

    def now(self) -> float:
        return self._now


def sign_slack(secret: str, body: bytes, timestamp: int | None = None) -> dict[str, str]:
    """Headers Slack would send with `body` (for tests, benchmarks and local tools)."""
    ts = str(int(time.time()) if timestamp is None else timestamp)
    sig = SignatureVerifier(secret).generate_signature(timestamp=ts, body=body)
    return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": str(sig),
            "Content-Type": "application/x-www-form-urlencoded"}


def hook_signature(secret: str, timestamp: str, body: bytes) -> str:
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def sign_hook(secret: str, body: bytes, timestamp: int | None = None) -> dict[str, str]:
    """Headers a scheduler or CI job sends with a failed-job hook."""
    ts = str(int(time.time()) if timestamp is None else timestamp)
    return {"X-Triage-Timestamp": ts, "X-Triage-Signature": hook_signature(secret, ts, body),
            "Content-Type": "application/json"}


def verify_hook(secret: str | None, headers: Mapping[str, str], body: bytes, skew_s: int = 300,
                now: float | None = None) -> None:
    if not secret:
        raise Rejected(401, "unconfigured", "TRIAGE_WEBHOOK_SECRET is not set: failed-job hooks are refused")
    now = time.time() if now is None else now
    signature = headers.get(HOOK_SIGNATURE)
    if not signature:
        raise Rejected(401, "unsigned", "missing X-Triage-Signature")
    ts = _timestamp(headers.get(HOOK_TIMESTAMP), skew_s, now, "hook")
    if not hmac.compare_digest(hook_signature(secret, str(ts), body), signature):
        raise Rejected(401, "bad_signature", "hook signature does not match")


def signature_key(headers: Mapping[str, str]) -> str:
    """A stable id for one signed delivery: a replay of the same bytes gets the same key."""
    raw = (headers.get("x-slack-signature") or headers.get(HOOK_SIGNATURE) or "").encode()
    return hashlib.sha256(raw).hexdigest()[:32]


@dataclass(frozen=True)
class Access:
    """The allow-lists: which workspaces and channels may ask, who may run active probes."""

    teams: frozenset[str]
    channels: frozenset[str]
    active_users: frozenset[str]

    def team_allowed(self, team: str | None) -> bool:
        return not self.teams or (team or "") in self.teams

    def channel_allowed(self, channel: str | None) -> bool:
        return not self.channels or (channel or "") in self.channels

    def may_run_active(self, user: str | None) -> bool:
        return bool(user) and user in self.active_users


def confine_run(ref: str, roots: tuple[Path, ...]) -> Path:
    """The run directory `ref` names under the runs roots; `UnsafeRunRef` / `RunNotFound` otherwise."""
    if not roots:
        raise BadInput("no runs root configured")
    return resolve_run_dir(ref, list(roots))
