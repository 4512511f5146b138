"""Slack: the report as Block Kit, and the poster that delivers what the store says is owed.

Posting goes through slack_sdk's `WebClient` (its `base_url` set from `SLACK_API_URL`),
with the client's own retries off: a retried `chat.postMessage` whose first answer was
lost would post twice. The poster retries itself, and first looks for the message a
lost attempt may have posted: every message carries Slack message metadata naming the
request and the kind of post, and files are uploaded in three steps whose file ids are
recorded before the upload is completed, so `files.info` says whether it was shared.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import structlog
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from triage.errors import BadInput
from triage.report import Report
from triage.service.config import SLACK_API_DEFAULT, ServiceConfig
from triage.service.metrics import ServiceMetrics
from triage.service.store import ANCHOR, FILE, REPORT, SKIPPED, PostJob, TriageRow, TriageStore

log = structlog.get_logger("triage.service.slack")

EVENT_TYPE = "triage_post"
ACTIVE_ACTION = "triage_active"
POSTMORTEM_ACTION = "triage_postmortem"
# Slack's limits on Block Kit text.
HEADER_MAX, SECTION_MAX, FIELD_MAX, BUTTON_VALUE_MAX = 150, 3000, 2000, 2000
# Errors after which trying again cannot help.
PERMANENT_ERRORS = frozenset({
    "channel_not_found", "not_in_channel", "is_archived", "invalid_auth", "not_authed", "account_inactive",
    "token_revoked", "missing_scope", "msg_too_long", "no_text", "restricted_action", "invalid_arguments",
    "thread_not_found", "team_access_not_granted",
})
VERDICT_ICONS = {"healthy": ":large_green_circle:", "inconclusive": ":grey_question:"}


def escape(text: str) -> str:
    """Slack mrkdwn: &, < and > are control characters."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _mrkdwn(text: str, limit: int = SECTION_MAX) -> dict[str, str]:
    return {"type": "mrkdwn", "text": _cut(text, limit)}


def postmortem_url(config: ServiceConfig, triage_id: str) -> str | None:
    """The postmortem's link as Slack users open it: signed, and valid for `link_ttl_s`."""
    if not config.public_url:
        return None
    from triage.service.security import signed_query

    query = signed_query(config.link_key, triage_id, config.link_ttl_s)
    return f"{config.public_url.rstrip('/')}/triages/{triage_id}/postmortem?{query}"


def report_blocks(report: Report, *, triage_id: str, run_ref: str, postmortem_link: str | None = None,
                  mentions: list[str] | None = None, offer_active: bool = True) -> list[dict[str, Any]]:
    """The report as Slack blocks: verdict, confidence, three key evidence lines, remedy, buttons."""
    rc = report.root_cause
    icon = VERDICT_ICONS.get(rc.id, ":red_circle:")
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": _cut(f"{rc.title}", HEADER_MAX), "emoji": True}},
        {"type": "section", "fields": [
            _mrkdwn(f"*Verdict*\n{icon} `{escape(rc.id)}`", FIELD_MAX),
            _mrkdwn(f"*Confidence*\n{rc.confidence:.0%}", FIELD_MAX),
            _mrkdwn(f"*Run*\n`{escape(run_ref)}`", FIELD_MAX),
            _mrkdwn(f"*Framework*\n{escape(report.run.framework)}", FIELD_MAX),
        ]},
    ]
    evidence = report.key_evidence(3)
    if evidence:
        lines = "\n".join(f"• {escape(_cut(line, 900))}" for line in evidence)
        blocks.append({"type": "section", "text": _mrkdwn(f"*Key evidence*\n{lines}")})
    if report.candidates:
        from triage.render.coverage import candidate_lines

        ranked = "\n".join(escape(_cut(line, 600)) for line in candidate_lines(report)[:3])
        blocks.append({"type": "section", "text": _mrkdwn(f"*Candidates*\n{ranked}")})
    from triage.memory.slack import confirm_buttons, memory_blocks

    blocks += memory_blocks(report)  # changed since the last good run; seen before
    remedy = f"*Remedy*\n{escape(rc.remedy)}"
    if rc.flags:
        remedy += "\n" + " ".join(f"`{escape(f)}`" for f in rc.flags)
    blocks.append({"type": "section", "text": _mrkdwn(remedy)})
    if report.run.notes:
        blocks.append({"type": "context", "elements": [_mrkdwn(":warning: " + escape(n), FIELD_MAX) for n in report.run.notes[:5]]})
    buttons: list[dict[str, Any]] = []
    if offer_active:
        value = json.dumps({"run": run_ref, "triage": triage_id})
        if len(value) <= BUTTON_VALUE_MAX:
            buttons.append({"type": "button", "action_id": ACTIVE_ACTION, "style": "primary",
                            "text": {"type": "plain_text", "text": "Run active probes"}, "value": value})
    if postmortem_link:
        buttons.append({"type": "button", "action_id": POSTMORTEM_ACTION, "url": postmortem_link,
                        "text": {"type": "plain_text", "text": "Full postmortem"}})
    if buttons:
        blocks.append({"type": "actions", "block_id": "triage_actions", "elements": buttons})
    blocks.append(confirm_buttons(report, triage_id))  # "Confirm" / "It was something else…"
    cov = report.coverage
    read = f"{cov.checks_ran} of {len(cov.checks)} checks ran · {sum(int(m.get('records', 0)) for m in cov.metrics.values())} metric records"
    if cov.not_understood:
        read += f" · not understood: {escape(_cut(cov.not_understood[0], 200))}"
    blocks.append({"type": "context", "elements": [_mrkdwn(f"*Coverage* {read}", FIELD_MAX)]})
    footer = f"triage `{triage_id}` · {len(report.path)} step(s) · {report.duration_s:.1f} s"
    if not postmortem_link:
        footer += f" · postmortem: `triage postmortem {escape(run_ref)} -o postmortem.md`"
    if mentions:
        footer += " · cc " + " ".join(f"<@{u}>" for u in mentions)
    blocks.append({"type": "context", "elements": [_mrkdwn(footer, FIELD_MAX)]})
    return blocks


def report_text(report: Report, run_ref: str) -> str:
    """The notification text that goes with the blocks."""
    rc = report.root_cause
    return f"Triage of {run_ref}: {rc.title} ({rc.id}, confidence {rc.confidence:.0%})"


def _ago(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 90:
        return f"{seconds} s"
    if seconds < 5400:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h"


def anchor_text(job: PostJob, position: int, running_slots_free: int) -> str:
    """The message that opens the thread the report will go to."""
    req, t = job.request, job.triage
    ref = escape(t.run_ref)
    if t.state == "done" and t.finished_at is not None and t.finished_at < req.created_at:
        status = f"answered from the store (triaged {_ago(req.created_at - t.finished_at)} before)"
    elif t.state == "done":
        status = "done; the report follows in this thread"
    elif t.state == "running":
        status = "running; the report will follow in this thread"
    elif position <= running_slots_free:
        status = "starting; the report will follow in this thread"
    else:
        status = f"queued (position {position - running_slots_free}); the report will follow in this thread"
    if req.source == "hook":
        job_id = req.detail.get("job_id")
        head = f":rotating_light: Job `{escape(str(job_id))}` failed" if job_id else ":rotating_light: A job failed"
        return f"{head}: triaging run `{ref}` — {status}."
    who = f"<@{req.user}>" if req.user else "Someone"
    what = "the active probes on" if t.active else "a triage of"
    return f"{who} asked for {what} `{ref}`: {status}."


class Lull:
    """When requests last came in, so that posts wait for a lull in them.

    The server answers Slack and delivers posts in one process: a post sent while slash
    commands pour in takes the interpreter from their acknowledgements, which must arrive
    within Slack's 3 seconds. Posts have no such deadline, so before each one the poster
    waits until no request has started or ended for `quiet_s`, but never longer than
    `max_wait_s` (a steady stream of requests cannot hold posts back for good).
    """

    def __init__(self, quiet_s: float = 0.1, max_wait_s: float = 2.0) -> None:
        self.quiet_s = quiet_s
        self.max_wait_s = max_wait_s
        self._last = -math.inf

    def touch(self) -> None:
        """A request started or ended now."""
        self._last = time.monotonic()

    def wait(self, stop: threading.Event) -> float:
        """Block until a lull, the maximum wait, or `stop`; the seconds waited."""
        started = time.monotonic()
        deadline = started + self.max_wait_s
        while True:
            now = time.monotonic()
            idle = now - self._last
            if idle >= self.quiet_s or now >= deadline or stop.is_set():
                return now - started
            stop.wait(min(self.quiet_s - idle, deadline - now))


class SlackPoster:
    """Threads that deliver the store's owed posts, in order, exactly once as far as Slack lets us know."""

    def __init__(self, store: TriageStore, config: ServiceConfig, metrics: ServiceMetrics,
                 client: WebClient | None = None, postmortem_files: Callable[[TriageRow], list[Path]] | None = None,
                 threads: int = 2, lull: Lull | None = None) -> None:
        self.store = store
        self.config = config
        self.metrics = metrics
        self.client = client if client is not None else self.make_client(config)
        self.postmortem_files = postmortem_files
        self._n = threads
        self.lull = lull
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    @staticmethod
    def make_client(config: ServiceConfig) -> WebClient | None:
        if not config.slack_bot_token:
            return None
        # No client-side retries: a retried post whose answer was lost would post twice.
        return WebClient(token=config.slack_bot_token, base_url=config.slack_api_url, timeout=15, retry_handlers=[])

    def start(self) -> None:
        for i in range(self._n):
            t = threading.Thread(target=self._loop, name=f"slack-poster-{i}", daemon=True)
            t.start()
            self._threads.append(t)

    def wake(self, *_: Any) -> None:
        with self._cond:
            self._cond.notify_all()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self.wake()
        for t in self._threads:
            t.join(timeout)
        self._threads.clear()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                job = self.store.claim_post()
            except Exception as exc:  # noqa: BLE001 - keep the poster alive through a database hiccup
                log.error("claim_post_failed", error=repr(exc))
                job = None
            if job is None:
                with self._cond:
                    self._cond.wait(0.5)
                continue
            if self.lull is not None:
                self.lull.wait(self._stop)
            structlog.contextvars.bind_contextvars(request_id=job.request.id, run_id=job.triage.run_ref,
                                                   triage_id=job.triage.id)
            try:
                self.deliver(job)
            finally:
                structlog.contextvars.clear_contextvars()

    # --- one post ---------------------------------------------------------------------

    def deliver(self, job: PostJob) -> None:
        if self.client is None:
            self.store.post_failed(job.id, "SLACK_BOT_TOKEN is not set: nothing is posted", state=SKIPPED)
            self.metrics.inc("triage_posts_total", kind=job.kind, outcome="skipped")
            return
        try:
            if job.was_unsure:
                found = self._find_posted(job)
                if found is not None:
                    self.store.post_sent(job.id, found, thread_ts=job.request.reply_to or found)
                    self.metrics.inc("triage_posts_total", kind=job.kind, outcome="recovered")
                    log.info("post_recovered", kind=job.kind, ts=found)
                    self.wake()
                    return
            ts, thread_ts = self._send(job)
        except SlackApiError as exc:
            self._api_error(job, exc)
            return
        except (httpx.HTTPError, OSError, TimeoutError) as exc:
            # The request may or may not have reached Slack: look before trying again.
            self._retry(job, f"{type(exc).__name__}: {exc}", unsure=True)
            return
        except Exception as exc:  # noqa: BLE001 - a post that cannot be built is recorded, not fatal
            log.error("post_failed", kind=job.kind, error=repr(exc), exc_info=True)
            self.store.post_failed(job.id, f"{type(exc).__name__}: {exc}")
            self.metrics.inc("triage_posts_total", kind=job.kind, outcome="failed")
            return
        self.store.post_sent(job.id, ts, thread_ts)
        self.metrics.inc("triage_posts_total", kind=job.kind, outcome="sent")
        log.info("posted", kind=job.kind, ts=ts, channel=job.request.channel)
        self.wake()  # the report of this request may now be due

    def _retry(self, job: PostJob, error: str, unsure: bool, delay: float | None = None) -> None:
        if job.attempts >= self.config.post_retries:
            self.store.post_failed(job.id, f"gave up after {job.attempts} attempts: {error}")
            self.metrics.inc("triage_posts_total", kind=job.kind, outcome="failed")
            log.error("post_gave_up", kind=job.kind, error=error, attempts=job.attempts)
            return
        delay = delay if delay is not None else min(60.0, 0.5 * 2 ** (job.attempts - 1))
        self.store.post_retry(job.id, delay, error, unsure)
        self.metrics.inc("triage_posts_total", kind=job.kind, outcome="retry")
        log.warning("post_retry", kind=job.kind, error=error, delay_s=delay, unsure=unsure)

    def _api_error(self, job: PostJob, exc: SlackApiError) -> None:
        resp = exc.response
        error = str(resp.get("error") if hasattr(resp, "get") else exc)
        status = getattr(resp, "status_code", 200)
        if status == 429 or error == "ratelimited":
            retry_after = 5.0
            try:
                retry_after = float(resp.headers.get("retry-after") or resp.headers.get("Retry-After") or 5)
            except (TypeError, ValueError, AttributeError):
                pass
            self._retry(job, "rate limited", unsure=False, delay=retry_after)
        elif error in PERMANENT_ERRORS:
            self.store.post_failed(job.id, error)
            self.metrics.inc("triage_posts_total", kind=job.kind, outcome="failed")
            log.error("post_refused", kind=job.kind, error=error)
        else:
            self._retry(job, error, unsure=status >= 500)

    def _metadata(self, job: PostJob) -> dict[str, Any]:
        return {"event_type": EVENT_TYPE, "event_payload": {"request_id": job.request.id, "kind": job.kind}}

    def _send(self, job: PostJob) -> tuple[str | None, str | None]:
        assert self.client is not None
        req, t = job.request, job.triage
        if job.kind == ANCHOR:
            counts = self.store.counts()
            free = max(0, self.config.concurrency - counts.running)
            text = anchor_text(job, self.store.position(t.id), free)
            resp = self.client.chat_postMessage(channel=req.channel, text=text, thread_ts=req.reply_to,
                                                metadata=self._metadata(job), unfurl_links=False)
            ts = resp.get("ts")
            return ts, req.reply_to or ts
        if job.kind == REPORT:
            text, blocks = self._report_message(job)
            try:
                resp = self.client.chat_postMessage(channel=req.channel, thread_ts=req.thread_ts, text=text,
                                                    blocks=blocks, metadata=self._metadata(job), unfurl_links=False)
            except SlackApiError as exc:
                if blocks and exc.response.get("error") == "invalid_blocks":
                    log.warning("blocks_refused", error=str(exc.response.get("response_metadata")))
                    resp = self.client.chat_postMessage(channel=req.channel, thread_ts=req.thread_ts, text=text,
                                                        metadata=self._metadata(job))
                else:
                    raise
            return resp.get("ts"), None
        if job.kind == FILE:
            return self._upload_postmortem(job), None
        raise AssertionError(f"unreachable: post kind {job.kind!r}")

    def _report_message(self, job: PostJob) -> tuple[str, list[dict[str, Any]] | None]:
        t = job.triage
        mentions = self.store.joined_users(job.request.id)
        if t.report is None:
            cc = (" cc " + " ".join(f"<@{u}>" for u in mentions)) if mentions else ""
            return f":x: The triage of `{escape(t.run_ref)}` could not finish: {escape(t.error or 'unknown error')}{cc}", None
        report = Report.model_validate_json(t.report)
        upload = t.run_dir.startswith("slack-upload:")  # a log handed over in Slack: no job to relaunch
        blocks = report_blocks(report, triage_id=t.id, run_ref=t.run_ref,
                               postmortem_link=postmortem_url(self.config, t.id), mentions=mentions,
                               offer_active=not t.active and not upload)
        return report_text(report, t.run_ref), blocks

    def _upload_postmortem(self, job: PostJob) -> str:
        """files.getUploadURLExternal per file, upload, then files.completeUploadExternal into the thread."""
        assert self.client is not None
        req, t = job.request, job.triage
        if self.postmortem_files is None or t.report is None:
            raise ValueError("no postmortem to attach" if t.report is None else "postmortems are not configured")
        paths = self.postmortem_files(t)
        uploaded: list[dict[str, str]] = []
        for path in paths:
            data = path.read_bytes()
            url = self.client.files_getUploadURLExternal(filename=path.name, length=len(data))
            resp = httpx.post(str(url["upload_url"]), content=data, timeout=30.0,
                              headers={"Content-Type": "application/octet-stream"})
            if resp.status_code != 200:
                raise httpx.HTTPStatusError(f"upload of {path.name} answered {resp.status_code}", request=resp.request,
                                            response=resp)
            uploaded.append({"id": str(url["file_id"]), "title": path.name})
        self.store.post_progress(job.id, {"file_ids": [u["id"] for u in uploaded]})
        self.client.files_completeUploadExternal(
            files=uploaded, channel_id=req.channel, thread_ts=req.thread_ts,
            initial_comment=f"Postmortem of `{t.run_ref}` (Markdown and plots).",
        )
        return ",".join(u["id"] for u in uploaded)

    def _find_posted(self, job: PostJob) -> str | None:
        """The ts of what an earlier, interrupted attempt posted, if it reached Slack."""
        assert self.client is not None
        req = job.request
        try:
            if job.kind == FILE:
                ids = job.detail.get("file_ids") or []
                if not ids:
                    return None  # the upload was never completed: nothing is visible in the channel
                info = self.client.files_info(file=ids[0])
                f = info.get("file") or {}
                shared = bool(f.get("channels") or f.get("groups") or f.get("ims") or f.get("shares"))
                return ",".join(ids) if shared else None
            if job.kind == ANCHOR and req.reply_to is None:
                resp = self.client.conversations_history(channel=req.channel, oldest=f"{req.created_at - 1:.6f}",
                                                         include_all_metadata=True, limit=200)
            else:
                thread = req.reply_to if job.kind == ANCHOR else req.thread_ts
                resp = self.client.conversations_replies(channel=req.channel, ts=thread, include_all_metadata=True,
                                                         limit=200)
        except SlackApiError as exc:
            # Cannot look (e.g. no history scope): posting again risks a duplicate, not posting risks a loss.
            log.warning("post_lookup_failed", kind=job.kind, error=str(exc.response.get("error")))
            return None
        for message in resp.get("messages") or []:
            payload = (message.get("metadata") or {}).get("event_payload") or {}
            if payload.get("request_id") == req.id and payload.get("kind") == job.kind:
                return message.get("ts")
        return None

    def ephemeral(self, channel: str | None, user: str | None, text: str, thread_ts: str | None = None) -> None:
        """A short note only `user` sees (refusals of button presses); best effort."""
        if self.client is None or not channel or not user:
            return
        try:
            self.client.chat_postEphemeral(channel=channel, user=user, text=text, thread_ts=thread_ts)
        except (SlackApiError, httpx.HTTPError, OSError) as exc:
            log.warning("ephemeral_failed", error=str(exc))


class WatchNotifier:
    """Posts `triage watch` reports to a channel (TRIAGE_SLACK_CHANNEL) with SLACK_BOT_TOKEN."""

    def __init__(self, token: str | None, channel: str | None, base_url: str = SLACK_API_DEFAULT,
                 client: WebClient | None = None) -> None:
        if not channel:
            raise BadInput("--notify slack needs TRIAGE_SLACK_CHANNEL: the channel failed-job reports go to")
        if client is None and not token:
            raise BadInput("--notify slack needs SLACK_BOT_TOKEN")
        self.channel = channel
        self.client = client or WebClient(token=token, base_url=base_url, timeout=15, retry_handlers=[])

    def notify(self, job: Any, report: Report) -> None:
        run_ref = f"ray:{getattr(job, 'submission_id', None) or getattr(job, 'job_id', '?')}"
        self.client.chat_postMessage(
            channel=self.channel,
            text=report_text(report, run_ref),
            blocks=report_blocks(report, triage_id=run_ref, run_ref=run_ref, offer_active=False),
        )


def make_watch_notifier() -> WatchNotifier:
    """What `triage watch --notify slack` posts with, configured from the environment."""
    import os

    base = os.environ.get("SLACK_API_URL") or SLACK_API_DEFAULT
    return WatchNotifier(os.environ.get("SLACK_BOT_TOKEN"), os.environ.get("TRIAGE_SLACK_CHANNEL"),
                         base if base.endswith("/") else base + "/")
