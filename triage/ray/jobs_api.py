"""The Ray dashboard's Job REST API, read over httpx.

What `ray job status` / `ray job logs` use, without importing Ray:

    GET /api/jobs/                         every job the head knows (submission and driver jobs)
    GET /api/jobs/{submission_id}          status, message, entrypoint, metadata, start/end time
    GET /api/jobs/{submission_id}/logs     the whole driver log as one JSON string
    GET /api/v0/logs/file?submission_id=…&node_id=…&lines=-1
                                           the same log streamed as plain text, chunk by chunk

The log is streamed to disk, never held in memory: the state API's streaming endpoint
first, then `/api/jobs/{id}/logs`, whose JSON string is decoded as it arrives. (The
dashboard also has `/api/jobs/{id}/logs/tail`, a WebSocket that follows the log until
the job ends; a snapshot of what a job has written so far is what triage needs.)

Requests time out, and transport failures and 502/503/504 are retried with exponential
backoff; what is still failing after that becomes one line naming the address.

A cluster with Ray's token authentication (the default for clusters Ray starts itself
since it grew the feature) wants `Authorization: Bearer <token>`; the token is found
where Ray's own clients look: $RAY_AUTH_TOKEN, the file $RAY_AUTH_TOKEN_PATH, or
~/.ray/auth_token (none is sent when $RAY_AUTH_MODE is `disabled`).
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import httpx
import structlog

from triage.errors import BadInput, RunNotFound, TriageError

log = structlog.get_logger("triage.ray.jobs_api")

DEFAULT_DASHBOARD = "http://127.0.0.1:8265"
# Ray's own clients read the Job API address from these, in this order.
ADDRESS_ENVS = ("RAY_API_SERVER_ADDRESS", "RAY_ADDRESS")
# Extra request headers for a dashboard behind a proxy (Ray's JobSubmissionClient reads the same).
HEADERS_ENV = "RAY_JOB_HEADERS"
RETRY_STATUSES = frozenset({502, 503, 504})
CHUNK_BYTES = 1 << 16

PENDING, RUNNING, STOPPED, SUCCEEDED, FAILED = "PENDING", "RUNNING", "STOPPED", "SUCCEEDED", "FAILED"
TERMINAL = frozenset({STOPPED, SUCCEEDED, FAILED})


class RayDashboardError(TriageError):
    """The dashboard answered, but not with what was asked for."""


class DashboardUnavailable(RayDashboardError):
    """The dashboard does not answer (down, restarting, wrong address)."""


class JobNotFound(RunNotFound):
    """The head knows no job with that submission id."""


def resolve_address(address: str | None = None) -> str:
    """The dashboard URL to talk to: the argument, else $RAY_API_SERVER_ADDRESS / $RAY_ADDRESS, else 127.0.0.1:8265."""
    raw = (address or "").strip()
    if not raw:
        raw = next((os.environ[e].strip() for e in ADDRESS_ENVS if os.environ.get(e, "").strip()), DEFAULT_DASHBOARD)
    if raw.startswith("ray://"):
        raise BadInput(f"{raw} is a Ray Client address; the Job API is served by the dashboard: "
                       "give --ray-address http://HOST:8265")
    if raw == "auto":
        raw = DEFAULT_DASHBOARD
    if "://" not in raw:
        raw = "http://" + raw
    parts = urlsplit(raw)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadInput(f"--ray-address {raw!r} is not a dashboard URL such as http://127.0.0.1:8265")
    return raw.rstrip("/")


def _headers_from_env() -> dict[str, str]:
    raw = os.environ.get(HEADERS_ENV)
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        raise BadInput(f"${HEADERS_ENV} must be a JSON object of header names to values") from None
    if not isinstance(value, dict):
        raise BadInput(f"${HEADERS_ENV} must be a JSON object of header names to values")
    return {str(k): str(v) for k, v in value.items()}


def ray_auth_token() -> str | None:
    """The cluster token Ray's clients would send, if any."""
    if os.environ.get("RAY_AUTH_MODE", "").strip().lower() == "disabled":
        return None
    token = os.environ.get("RAY_AUTH_TOKEN", "").strip()
    if token:
        return token
    path = Path(os.environ.get("RAY_AUTH_TOKEN_PATH") or Path.home() / ".ray" / "auth_token").expanduser()
    try:
        token = path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None
    return token or None


def request_headers(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """$RAY_JOB_HEADERS, the cluster token, then `extra` (which wins)."""
    headers = _headers_from_env()
    token = ray_auth_token()
    if token and not any(k.lower() == "authorization" for k in {**headers, **(extra or {})}):
        headers["Authorization"] = f"Bearer {token}"
    headers.update(extra or {})
    return headers


def check_submission_id(submission_id: str) -> str:
    sid = submission_id.strip() if isinstance(submission_id, str) else ""
    if not sid:
        raise BadInput("empty Ray submission id: give raysubmit_… or ray:<submission-id>")
    if any(ord(c) < 32 for c in sid) or len(sid) > 512:
        raise BadInput(f"{submission_id!r} is not a Ray submission id")
    return sid


@dataclass(frozen=True)
class RayJob:
    """One job as the dashboard reports it. Times are milliseconds since the epoch."""

    submission_id: str | None
    status: str
    entrypoint: str = ""
    message: str | None = None
    error_type: str | None = None
    start_time: int | None = None
    end_time: int | None = None
    metadata: Mapping[str, str] = field(default_factory=dict)
    job_id: str | None = None
    type: str = "SUBMISSION"
    driver_node_id: str | None = None
    driver_exit_code: int | None = None

    @classmethod
    def from_api(cls, raw: Mapping[str, Any]) -> RayJob:
        def as_int(v: Any) -> int | None:
            try:
                return int(v) if v is not None else None
            except (TypeError, ValueError):
                return None

        meta = raw.get("metadata") or {}
        return cls(
            submission_id=raw.get("submission_id"),
            status=str(raw.get("status") or "PENDING").upper(),
            entrypoint=str(raw.get("entrypoint") or ""),
            message=raw.get("message"),
            error_type=raw.get("error_type"),
            start_time=as_int(raw.get("start_time")),
            end_time=as_int(raw.get("end_time")),
            metadata={str(k): str(v) for k, v in meta.items()} if isinstance(meta, dict) else {},
            job_id=raw.get("job_id"),
            type=str(raw.get("type") or "SUBMISSION").upper(),
            driver_node_id=raw.get("driver_node_id"),
            driver_exit_code=as_int(raw.get("driver_exit_code")),
        )

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    @property
    def key(self) -> str:
        """This job, distinct from a later job submitted under the same id (a restarted head forgets ids)."""
        return f"{self.submission_id}@{self.start_time or 0}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "submission_id": self.submission_id, "status": self.status, "entrypoint": self.entrypoint,
            "message": self.message, "error_type": self.error_type, "start_time": self.start_time,
            "end_time": self.end_time, "metadata": dict(self.metadata), "job_id": self.job_id,
            "type": self.type, "driver_node_id": self.driver_node_id, "driver_exit_code": self.driver_exit_code,
        }


class JsonStringField:
    """Decodes one string field of a streamed JSON object (`{"logs": "…"}`) as its bytes arrive.

    Keeps at most a few characters between chunks: a 10 GB log decodes in bounded memory.
    """

    # unrolled and possessive: no backtracking state kept per character of a 64 KB chunk
    _SAFE = re.compile(r'[^"\\]*+(?:\\.[^"\\]*+)*+', re.S)

    def __init__(self, name: str) -> None:
        self._key = re.compile(r'"' + re.escape(name) + r'"\s*:\s*"')
        self._state = "seek"
        self._buf = ""

    @property
    def done(self) -> bool:
        return self._state == "done"

    @property
    def found(self) -> bool:
        return self._state != "seek"

    def feed(self, text: str) -> str:
        if self._state == "done":
            return ""
        self._buf += text
        if self._state == "seek":
            m = self._key.search(self._buf)
            if m is None:
                self._buf = self._buf[-256:]
                return ""
            self._state = "string"
            self._buf = self._buf[m.end():]
        m = self._SAFE.match(self._buf)
        end = m.end() if m else 0
        if end < len(self._buf) and self._buf[end] == '"':
            out = self._decode(self._buf[:end])
            self._buf = ""
            self._state = "done"
            return out
        cut = _complete_prefix(self._buf, end)
        if len(self._buf) - cut > 16:
            raise RayDashboardError("the dashboard's log answer is not valid JSON: a broken escape sequence")
        out = self._decode(self._buf[:cut])
        self._buf = self._buf[cut:]
        return out

    @staticmethod
    def _decode(escaped: str) -> str:
        if not escaped:
            return ""
        try:
            return json.loads('"' + escaped + '"')
        except json.JSONDecodeError as exc:
            raise RayDashboardError(f"the dashboard's log answer is not valid JSON: {exc.msg}") from None


def _escape_start(text: str, stop: int) -> int | None:
    """Where the last escape sequence before `stop` begins, if one begins in the last 12 characters."""
    k = text.rfind("\\", max(0, stop - 12), stop)
    if k < 0:
        return None
    run = 1
    while k - run >= 0 and text[k - run] == "\\":
        run += 1
    # an even run ending at k is escaped backslashes, the last of them complete; an odd one starts an escape at k
    return k if run % 2 == 1 else None


def _complete_prefix(text: str, end: int) -> int:
    """The longest prefix of text[:end] that decodes on its own: no `\\uXX` cut short, no surrogate half."""
    cut = end
    while True:
        j = _escape_start(text, cut)
        if j is None or text[j + 1:j + 2] != "u":
            return cut
        digits = text[j + 2:cut]
        if len(digits) < 4:
            cut = j
            continue
        if len(digits) == 4 and digits[:2].lower() in ("d8", "d9", "da", "db"):
            cut = j  # a high surrogate waits for its low half
            continue
        return cut


class JobsClient:
    """Reads jobs and their logs from one Ray dashboard."""

    def __init__(
        self,
        address: str | None = None,
        *,
        timeout_s: float = 10.0,
        retries: int = 3,
        backoff_s: float = 0.5,
        backoff_max_s: float = 8.0,
        headers: Mapping[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.address = resolve_address(address)
        self.retries = max(0, retries)
        self.backoff_s = backoff_s
        self.backoff_max_s = backoff_max_s
        self.timeout_s = timeout_s
        merged = request_headers(headers)
        self._http = httpx.Client(
            base_url=self.address, headers=merged, transport=transport, follow_redirects=False,
            timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 5.0)),
        )

    def __enter__(self) -> JobsClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # -- plumbing -------------------------------------------------------------------

    def _sleep_before(self, attempt: int) -> None:
        time.sleep(min(self.backoff_max_s, self.backoff_s * (2 ** attempt)))

    def _unavailable(self, what: str, reason: str) -> DashboardUnavailable:
        return DashboardUnavailable(
            f"Ray dashboard at {self.address} is not answering {what} ({reason}): "
            "is the cluster up, and is --ray-address / $RAY_ADDRESS its dashboard (port 8265)?"
        )

    def _get(self, path: str, what: str, params: Mapping[str, Any] | None = None) -> httpx.Response:
        last = ""
        for attempt in range(self.retries + 1):
            if attempt:
                self._sleep_before(attempt - 1)
            try:
                resp = self._http.get(path, params=params)
            except httpx.TransportError as exc:
                last = _transport_reason(exc)
                log.debug("dashboard_retry", path=path, attempt=attempt, reason=last)
                continue
            if resp.status_code in RETRY_STATUSES:
                last = f"HTTP {resp.status_code}"
                continue
            return resp
        raise self._unavailable(what, last)

    def _json(self, resp: httpx.Response, what: str) -> Any:
        try:
            return resp.json()
        except ValueError:
            raise RayDashboardError(
                f"{self.address} answered {what} with something that is not JSON: is it a Ray dashboard?"
            ) from None

    def _fail(self, resp: httpx.Response, what: str) -> RayDashboardError:
        if resp.status_code in (401, 403):
            sent = "Authorization" in self._http.headers
            return RayDashboardError(
                f"Ray dashboard at {self.address} refused {what} (HTTP {resp.status_code}): the cluster uses token "
                + ("authentication and the token sent is not its token" if sent else
                   "authentication; set $RAY_AUTH_TOKEN (or ~/.ray/auth_token) to the cluster's token"))
        body = (resp.text or "").strip().splitlines()
        first = body[0][:200] if body else ""
        return RayDashboardError(f"Ray dashboard at {self.address} answered HTTP {resp.status_code} to {what}"
                                 + (f": {first}" if first else ""))

    # -- the API --------------------------------------------------------------------

    def list_jobs(self) -> list[RayJob]:
        """Every job the head knows, submission jobs and bare drivers alike."""
        what = "GET /api/jobs/"
        resp = self._get("/api/jobs/", what)
        if resp.status_code != 200:
            raise self._fail(resp, what)
        raw = self._json(resp, what)
        if not isinstance(raw, list):
            raise RayDashboardError(f"{self.address} answered {what} with {type(raw).__name__}, not a list of jobs")
        return [RayJob.from_api(j) for j in raw if isinstance(j, dict)]

    def get_job(self, submission_id: str) -> RayJob:
        sid = check_submission_id(submission_id)
        what = f"GET /api/jobs/{sid}"
        resp = self._get(f"/api/jobs/{quote(sid, safe='')}", what)
        if resp.status_code == 404:
            raise JobNotFound(
                f"no Ray job {sid!r} at {self.address} (a restarted head forgets its jobs; "
                f"`ray job list --address {self.address}` shows the ones it has)"
            )
        if resp.status_code != 200:
            raise self._fail(resp, what)
        raw = self._json(resp, what)
        if not isinstance(raw, dict):
            raise RayDashboardError(f"{self.address} answered {what} with {type(raw).__name__}, not a job")
        return RayJob.from_api(raw)

    def download_logs(self, job: RayJob, dest: Path) -> int:
        """Write the job's driver log to `dest` as it streams in; the number of bytes written.

        Retried from the start on a transport failure; `dest` holds only a complete copy.
        """
        sid = check_submission_id(job.submission_id or "")
        last = ""
        for attempt in range(self.retries + 1):
            if attempt:
                self._sleep_before(attempt - 1)
            try:
                if job.driver_node_id:
                    written = self._stream_state_api(sid, job.driver_node_id, dest)
                    if written is not None:
                        return written
                return self._stream_job_logs(sid, dest)
            except httpx.TransportError as exc:
                last = _transport_reason(exc)
                log.debug("log_download_retry", submission_id=sid, attempt=attempt, reason=last)
            except _Retry as exc:
                last = str(exc)
        raise self._unavailable(f"the logs of {sid}", last)

    def _stream_state_api(self, sid: str, node_id: str, dest: Path) -> int | None:
        """The plain-text streaming endpoint; None when it cannot serve this job (older Ray, no log file)."""
        params = {"submission_id": sid, "node_id": node_id, "lines": -1, "timeout": int(self.timeout_s) + 20}
        with self._http.stream("GET", "/api/v0/logs/file", params=params,
                               timeout=httpx.Timeout(self.timeout_s, read=max(self.timeout_s, 60.0))) as resp:
            if resp.status_code in RETRY_STATUSES:
                raise _Retry(f"HTTP {resp.status_code}")
            if resp.status_code != 200:
                return None
            return _write_stream(resp.iter_bytes(CHUNK_BYTES), dest)

    def _stream_job_logs(self, sid: str, dest: Path) -> int:
        what = f"GET /api/jobs/{sid}/logs"
        with self._http.stream("GET", f"/api/jobs/{quote(sid, safe='')}/logs",
                               timeout=httpx.Timeout(self.timeout_s, read=max(self.timeout_s, 60.0))) as resp:
            if resp.status_code in RETRY_STATUSES:
                raise _Retry(f"HTTP {resp.status_code}")
            if resp.status_code == 404:
                raise JobNotFound(f"no Ray job {sid!r} at {self.address}")
            if resp.status_code != 200:
                resp.read()
                raise self._fail(resp, what)
            decoder = JsonStringField("logs")

            def chunks() -> Iterator[bytes]:
                for text in resp.iter_text(CHUNK_BYTES):
                    out = decoder.feed(text)
                    if out:
                        yield out.encode("utf-8", "replace")

            written = _write_stream(chunks(), dest)
            if not decoder.found:
                raise RayDashboardError(f"{self.address} answered {what} without a 'logs' field")
            return written


class _Retry(Exception):
    pass


def _transport_reason(exc: httpx.TransportError) -> str:
    if isinstance(exc, httpx.ConnectError):
        return "connection refused" if "refused" in str(exc).lower() else f"cannot connect: {exc}"
    if isinstance(exc, httpx.TimeoutException):
        return f"timed out ({type(exc).__name__})"
    return f"{type(exc).__name__}: {exc}"


def _write_stream(chunks: Iterator[bytes], dest: Path) -> int:
    written = 0
    with open(dest, "wb") as fh:
        for chunk in chunks:
            fh.write(chunk)
            written += len(chunk)
    return written
