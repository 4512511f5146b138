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
- Reading a triage (`GET /triages/{id}`, its postmortem and files) takes a signed,
  expiring link, `?expires={unix time}&sig=HMAC-SHA256(key, "{id}.{expires}")`, which the
  Slack messages carry, or a request signed like a failed-job hook over its path
  (`X-Triage-Signature: sha256=HMAC-SHA256(webhook secret, "{ts}./triages/{id}")`).
  Without either the answer is a short 401 / 403 that discloses nothing.
- Slack users and channels are rate-limited (`RateLimiter`): a request over the limit is
  answered politely and not recorded; a request already accepted is never refused again.
"""

from __future__ import annotations

import hashlib
import hmac
import threading
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from slack_sdk.signature import SignatureVerifier

from triage.errors import BadInput
from triage.run.source import resolve_run_dir

MAX_RUN_ID_BYTES = 255  # NAME_MAX of Linux file systems: a longer name is no directory
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
    if not signature.isascii():  # hmac.compare_digest refuses non-ASCII text: it is no signature anyway
        raise Rejected(401, "bad_signature", "Slack signature does not match")
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
    if not hmac.compare_digest(hook_signature(secret, str(ts), body).encode(), signature.encode("utf-8", "replace")):
        raise Rejected(401, "bad_signature", "hook signature does not match")


# --- reading a triage: signed links --------------------------------------------------------


def link_signature(key: bytes, triage_id: str, expires: int) -> str:
    return hmac.new(key, f"{triage_id}.{expires}".encode(), hashlib.sha256).hexdigest()


def signed_query(key: bytes, triage_id: str, ttl_s: int, now: float | None = None) -> str:
    """`expires=...&sig=...`: the query that opens triage `triage_id` (and its postmortem) until it expires."""
    expires = int((time.time() if now is None else now) + ttl_s)
    return f"expires={expires}&sig={link_signature(key, triage_id, expires)}"


def verify_read(key: bytes, webhook_secret: str | None, triage_id: str, path: str, query: Mapping[str, str],
                headers: Mapping[str, str], skew_s: int = 300, now: float | None = None) -> None:
    """Raise `Rejected` unless the request carries a valid signed link for `triage_id`, or a hook signature.

    401: no credentials; 403: credentials that are wrong or expired. The messages name nothing of the triage.
    """
    now = time.time() if now is None else now
    sig, raw_expires = query.get("sig"), query.get("expires")
    if sig is not None or raw_expires is not None:
        try:
            expires = int(raw_expires or "")
        except ValueError:
            raise Rejected(403, "bad_link", "this link is not valid") from None
        good = link_signature(key, triage_id, expires)
        if not (sig and sig.isascii() and hmac.compare_digest(good.encode(), sig.encode())):
            raise Rejected(403, "bad_link", "this link is not valid")
        if expires < now:
            raise Rejected(403, "expired_link", "this link has expired: ask for the triage again in Slack")
        return
    if headers.get(HOOK_SIGNATURE):
        try:
            verify_hook(webhook_secret, headers, path.encode(), skew_s, now)
        except Rejected as exc:
            raise Rejected(403 if exc.reason != "unconfigured" else 401, exc.reason, "the request signature is not valid") from None
        return
    raise Rejected(401, "unauthenticated", "authentication required: open the signed link from Slack")


class RateLimiter:
    """At most `limit` admissions per key in any `window_s` seconds (0: no limit). Thread-safe."""

    def __init__(self, limit: int, window_s: float = 60.0, max_keys: int = 10_000) -> None:
        self.limit = limit
        self.window_s = window_s
        self.max_keys = max_keys
        self._times: OrderedDict[str, deque[float]] = OrderedDict()
        self._lock = threading.Lock()

    def _recent(self, key: str, now: float) -> deque[float]:
        times = self._times.get(key)
        if times is None:
            times = self._times[key] = deque()
            while len(self._times) > self.max_keys:
                self._times.popitem(last=False)
        self._times.move_to_end(key)
        while times and times[0] <= now - self.window_s:
            times.popleft()
        return times

    def retry_after(self, key: str, now: float) -> float | None:
        """Seconds until `key` may be admitted again; None when it may be now."""
        if self.limit <= 0:
            return None
        with self._lock:
            times = self._recent(key, now)
            return times[0] + self.window_s - now if len(times) >= self.limit else None

    def admit(self, key: str, now: float) -> None:
        if self.limit > 0:
            with self._lock:
                self._recent(key, now).append(now)


class SlackRateLimits:
    """Per Slack user and per channel; a delivery already admitted (Slack's retry) is admitted again."""

    def __init__(self, per_user: int, per_channel: int, window_s: float = 60.0) -> None:
        self.users = RateLimiter(per_user, window_s)
        self.channels = RateLimiter(per_channel, window_s)
        self._admitted: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()

    def check(self, user: str | None, channel: str | None, delivery: str, now: float | None = None) -> str | None:
        """None when the request may go on (and it is counted); else a polite sentence saying when to retry."""
        now = time.time() if now is None else now
        with self._lock:
            if delivery in self._admitted:
                return None
        for limiter, key, who in ((self.users, f"u:{user or '-'}", "you have"),
                                  (self.channels, f"c:{channel or '-'}", "this channel has")):
            wait = limiter.retry_after(key, now)
            if wait is not None:
                return (f"Sorry — {who} asked for {limiter.limit} triages in the last minute, the most this service "
                        f"takes. Please try again in {max(1, int(wait + 0.999))} s; nothing you asked before is lost.")
        self.users.admit(f"u:{user or '-'}", now)
        self.channels.admit(f"c:{channel or '-'}", now)
        with self._lock:
            self._admitted[delivery] = None
            while len(self._admitted) > 10_000:
                self._admitted.popitem(last=False)
        return None


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
    if len(ref.encode("utf-8", "replace")) > MAX_RUN_ID_BYTES:
        raise BadInput(f"a run-id is at most {MAX_RUN_ID_BYTES} bytes (a directory name)")
    if "\x00" in ref:
        raise BadInput("a run-id cannot contain a NUL character")
    try:
        return resolve_run_dir(ref, list(roots))
    except (OSError, ValueError) as exc:  # e.g. a name the file system refuses
        raise BadInput(f"the run-id cannot be used as a directory name ({getattr(exc, 'strerror', None) or 'invalid'})") from None
