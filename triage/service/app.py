"""The ASGI app behind `triage serve`: Slack's slash command and buttons, failed-job hooks, reports.

    POST /slack/commands        `/triage <run-id> [--active] [--force]`, signed by Slack; answered at once
    POST /slack/interactions    the report's buttons ("Run active probes"), signed by Slack
    POST /hooks/job-failed      {"run": ..., "job_id": ...}, HMAC-signed by a scheduler or CI
    GET  /triages/{id}          the triage's state and its report (JSON), with a signed link
    GET  /triages/{id}/postmortem, /triages/{id}/files/{name}   the postmortem and its plots, likewise
    GET  /healthz, /metrics     liveness, and Prometheus text

A request is checked (signature, size, allow-lists, run-id confinement), written to the
store with the answer it is owed, and acknowledged; the triage and the Slack posts happen
in worker threads. Slack requires an answer within 3 seconds: nothing slow happens
before the acknowledgement.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import structlog
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from triage.errors import RunNotFound, TriageError, UnsafeRunRef
from triage.report import Report
from triage.service.config import ServiceConfig
from triage.service.metrics import ServiceMetrics
from triage.service.queue import WorkQueue
from triage.service.security import (
    Access,
    Rejected,
    SlackRateLimits,
    confine_run,
    read_body,
    signature_key,
    signed_query,
    verify_hook,
    verify_read,
    verify_slack,
)
from triage.service.slack import ACTIVE_ACTION, Lull, SlackPoster
from triage.service.store import DUPLICATE, JOINED, NEW, QUEUE_FULL, STORED, NewRequest, SQLiteStore, Submission, TriageRow, TriageStore

log = structlog.get_logger("triage.service")

USAGE = ("Usage: `/triage <run-id> [--active] [--force]` — the run-id is a run's name under the runs root; "
         "`--active` also runs the active probes (for allowed users), `--force` triages again instead of "
         "answering from the store. `/triage file:<FILE_ID>` triages a log file shared in a channel the app is "
         "in; the message shortcut \"Triage this log\" triages a pasted log or an attached file.")
FILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,120}\.(png|md)$")


class RequestContext:
    """Pure ASGI middleware: a request id on every log line of the request, and one access line."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = uuid.uuid4().hex[:16]
        scope.setdefault("state", {})["request_id"] = request_id
        lull = _lull_of(scope) if scope.get("method") == "POST" else None
        if lull is not None:
            lull.touch()
        tokens = structlog.contextvars.bind_contextvars(request_id=request_id)
        started = time.perf_counter()
        status = {"code": 500}

        async def send_wrapper(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            if lull is not None:
                lull.touch()
            log.info("http_request", method=scope.get("method"), path=scope.get("path"), status=status["code"],
                     duration_ms=round(1000 * (time.perf_counter() - started), 2))
            structlog.contextvars.reset_contextvars(**tokens)


def _lull_of(scope: Scope) -> Lull | None:
    app = scope.get("app")
    service = getattr(getattr(app, "state", None), "service", None)
    return getattr(service, "lull", None)


class Service:
    """The running parts the routes share."""

    def __init__(self, config: ServiceConfig, store: TriageStore | None = None, slack_client: Any = None,
                 postmortem_files: Callable[[TriageRow], list[Path]] | None = None) -> None:
        self.config = config
        self.metrics = ServiceMetrics()
        self._store = store
        self._slack_client = slack_client
        self._postmortem_files = postmortem_files
        self.access = Access(config.allowed_teams, config.allowed_channels, config.active_users)
        self.rates = SlackRateLimits(config.rate_user_per_min, config.rate_channel_per_min)
        self.lull = Lull(config.post_lull_s, config.post_max_defer_s)
        self.store: TriageStore
        self.queue: WorkQueue
        self.poster: SlackPoster

    def start(self) -> None:
        self.store = self._store if self._store is not None else SQLiteStore(self.config.db_path)
        from triage.memory.enrich import configure

        # the team's memory (baselines, confirmed causes) lives in the service's database file
        configure(db=self.config.db_path, runs_roots=list(self.config.runs_roots),
                  export_env=self.config.workers == "process")
        requeued, unsure = self.store.recover()
        self.poster = SlackPoster(self.store, self.config, self.metrics, client=self._slack_client,
                                  postmortem_files=self._postmortem_files or self.postmortem_files, lull=self.lull)
        self.queue = WorkQueue(self.store, self.config, self.metrics, on_finished=self.poster.wake)
        # Before the server listens: in thread mode the playbooks are compiled (the probes imported) here,
        # so that seconds of imports do not hold up the first acknowledgements.
        self.queue.start()
        self.poster.start()
        log.info("service_started", requeued=requeued, unsure_posts=unsure, db=str(self.config.db_path),
                 concurrency=self.config.concurrency, slack=bool(self.poster.client),
                 runs_roots=[str(r) for r in self.config.runs_roots])

    def stop(self) -> None:
        self.queue.stop()
        self.poster.stop()
        from triage.memory.enrich import configure

        configure()
        if self._store is None:
            self.store.close()

    def wake(self) -> None:
        self.queue.wake()
        self.poster.wake()

    # --- postmortems ------------------------------------------------------------------

    def postmortem_dir(self, triage_id: str) -> Path:
        return self.config.files_root / triage_id

    def postmortem_files(self, t: TriageRow) -> list[Path]:
        """Write (once) the postmortem of a finished triage and its plots; the Markdown first."""
        out = self.postmortem_dir(t.id)
        md = out / "postmortem.md"
        if not md.is_file():
            from triage.postmortem import write_postmortem
            from triage.run import open_run

            if t.report is None:
                raise ValueError(f"triage {t.id} has no report")
            report = Report.model_validate_json(t.report)
            from triage.service.uploads import is_upload, open_upload

            run = open_upload(t.run_dir) if is_upload(t.run_dir) else open_run(t.run_ref, self.config.runs_root_arg)
            # Written aside and renamed into place, so a reader never sees half a postmortem.
            tmp = out.with_name(f"{out.name}.tmp-{uuid.uuid4().hex[:8]}")
            write_postmortem(run, report, tmp / "postmortem.md")
            try:
                tmp.rename(out)
            except OSError:  # another thread wrote it first
                shutil.rmtree(tmp, ignore_errors=True)
        return [md] + sorted(out.glob("*.png"))

    # --- admission --------------------------------------------------------------------

    async def submit(self, new: NewRequest) -> Submission:
        sub = await run_in_threadpool(self.store.submit, new, self.config.max_queued)
        outcome = sub.outcome
        self.metrics.inc("triage_requests_total", source=new.source, outcome=outcome)
        log.info("request_recorded", outcome=outcome, triage_id=sub.triage.id if sub.triage else None,
                 position=sub.position, active=new.active)
        self.wake()
        return sub

    def signed_path(self, triage_id: str, suffix: str = "") -> str:
        """`/triages/{id}{suffix}` with the signed, expiring query that lets its holder read it."""
        query = signed_query(self.config.link_key, triage_id, self.config.link_ttl_s)
        return f"/triages/{triage_id}{suffix}?{query}"

    def authorize(self, request: Request, triage_id: str) -> Response | None:
        """None when the request may read triage `triage_id`; else the short refusal to send."""
        try:
            verify_read(self.config.link_key, self.config.webhook_secret, triage_id, request.url.path,
                        request.query_params, request.headers, self.config.max_clock_skew_s)
        except Rejected as exc:
            self.metrics.inc("triage_http_rejected_total", reason=exc.reason)
            log.warning("read_refused", status=exc.status, reason=exc.reason)
            return JSONResponse({"ok": False, "error": exc.message}, status_code=exc.status)
        return None

    def refuse(self, source: str, reason: str) -> None:
        self.metrics.inc("triage_requests_total", source=source, outcome=f"refused_{reason}")

    def reject(self, exc: Rejected) -> Response:
        self.metrics.inc("triage_http_rejected_total", reason=exc.reason)
        log.warning("request_rejected", status=exc.status, reason=exc.reason, message=exc.message)
        return JSONResponse({"ok": False, "error": exc.message}, status_code=exc.status)

    async def resolve(self, ref: str) -> Path:
        return await run_in_threadpool(confine_run, ref, self.config.runs_roots)

    def position_text(self, sub: Submission) -> str:
        t = sub.triage
        assert t is not None
        if t.state == "running":
            return "running now"
        running = sub.running
        free = max(0, self.config.concurrency - running)
        if sub.position <= free:
            return "starting now"
        return f"queued, position {sub.position - free} ({running} running)"


def _ephemeral(text: str) -> JSONResponse:
    return JSONResponse({"response_type": "ephemeral", "text": text})


def _run_refusal(ref: str, exc: TriageError) -> str:
    """What a Slack user is told about a run-id that cannot be used (no server paths in it)."""
    shown = ref if len(ref) <= 80 else ref[:79] + "…"
    if isinstance(exc, UnsafeRunRef):
        if ".." in Path(ref).parts:
            return f"`{shown}` is not a run-id: run-ids are names under the runs root, without `..`."
        return f"`{shown}` is outside the runs root: only runs under it can be triaged."
    if isinstance(exc, RunNotFound):
        return f"No run `{shown}` under the runs root. Check the run-id (the run directory's name)."
    return f"`{shown}` cannot be triaged: {exc}"


def parse_command(text: str) -> tuple[str, bool, bool]:
    """`<run-id> [--active] [--force]` -> (run-id, active, force); ValueError with a usage line."""
    try:
        words = shlex.split(text or "")
    except ValueError as exc:
        raise ValueError(f"Could not read that: {exc}. {USAGE}") from None
    active = force = False
    refs = []
    for w in words:
        if w in ("--active", "-a"):
            active = True
        elif w in ("--force", "-f"):
            force = True
        elif w in ("help", "--help", "-h"):
            raise ValueError(USAGE)
        elif w.startswith("-"):
            raise ValueError(f"Unknown option `{w}`. {USAGE}")
        else:
            refs.append(w)
    if len(refs) != 1:
        raise ValueError(("Which run? " if not refs else "One run at a time. ") + USAGE)
    return refs[0], active, force


def _ago(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds} s" if seconds < 90 else (f"{seconds // 60} min" if seconds < 5400 else f"{seconds // 3600} h")


def _ack_text(svc: Service, ref: str, sub: Submission) -> str:
    t = sub.triage
    if sub.outcome == QUEUE_FULL or t is None:
        return f"The triage queue is full ({sub.position} waiting). Try again in a few minutes."
    if sub.outcome == NEW:
        return f"Triaging `{ref}` ({svc.position_text(sub)}). The report will be posted in a thread in this channel."
    if sub.outcome == JOINED:
        if sub.thread_of:
            return (f"`{ref}` is already being triaged ({svc.position_text(sub)}, asked {_ago(time.time() - t.created_at)} "
                    "ago). The report goes to that request's thread, and you will be mentioned there.")
        return f"`{ref}` is already being triaged ({svc.position_text(sub)}). The report will be posted in a thread here."
    if sub.outcome == STORED:
        ago = _ago(time.time() - (t.finished_at or time.time()))
        return (f"`{ref}` was triaged {ago} ago ({t.verdict}). Posting the stored report in a thread here; "
                f"`/triage {ref} --force` triages it again.")
    if sub.outcome == DUPLICATE:
        return f"Already received: the triage of `{ref}` is {t.state}."
    raise AssertionError(f"unreachable: submission outcome {sub.outcome!r}")


# --- routes -----------------------------------------------------------------------------


async def slash_command(request: Request) -> Response:
    svc: Service = request.app.state.service
    cfg = svc.config
    try:
        body = await read_body(request.headers, request.stream(), cfg.max_body_bytes)
        verify_slack(cfg.slack_signing_secret, request.headers, body, cfg.max_clock_skew_s)
        form = {k: v[0] for k, v in parse_qs(body.decode("utf-8"), keep_blank_values=True).items()}
    except Rejected as exc:
        return svc.reject(exc)
    except UnicodeDecodeError:
        return svc.reject(Rejected(400, "bad_request", "the body is not UTF-8 form data"))
    team, channel, user = form.get("team_id"), form.get("channel_id"), form.get("user_id")
    structlog.contextvars.bind_contextvars(team=team, channel=channel, user=user)
    if not svc.access.team_allowed(team):
        svc.refuse("slack", "team")
        return _ephemeral("Sorry — this workspace is not set up to request triages from this service.")
    if not svc.access.channel_allowed(channel):
        svc.refuse("slack", "channel")
        where = " ".join(f"<#{c}>" for c in sorted(cfg.allowed_channels)[:5])
        return _ephemeral(f"Sorry — triage requests are not enabled in this channel. Please ask in {where}.")
    try:
        ref, active, force = parse_command(form.get("text", ""))
    except ValueError as exc:
        svc.refuse("slack", "usage")
        return _ephemeral(str(exc))
    structlog.contextvars.bind_contextvars(run_id=ref)
    limited = svc.rates.check(user, channel, "slack:" + signature_key(request.headers))
    if limited is not None:
        svc.refuse("slack", "rate_limited")
        return _ephemeral(limited)
    from triage.service.uploads import FILE_ARG, file_command

    shared = FILE_ARG.match(ref)
    if shared is not None:  # `/triage file:F…`: a log shared in Slack (triage/service/uploads.py)
        return await file_command(svc, request, form, shared.group(1), force)
    note = ""
    if active and not svc.access.may_run_active(user):
        active = False
        svc.refuse("slack", "active_not_allowed")
        note = " Active probes (those that relaunch the run's job) are limited to allowed users: running the static triage."
    try:
        run_dir = await svc.resolve(ref)
    except TriageError as exc:
        svc.refuse("slack", "run")
        log.info("run_refused", error=str(exc))
        return _ephemeral(_run_refusal(ref, exc))
    new = NewRequest(
        id=request.scope["state"]["request_id"], source="slack", run_ref=ref, run_dir=str(run_dir), active=active,
        force=force, team=team, channel=channel, user=user, dedupe_key="slack:" + signature_key(request.headers),
        post=True, detail={"command": form.get("command", "/triage")},
    )
    try:
        sub = await svc.submit(new)
    except Exception as exc:  # noqa: BLE001 - Slack shows a 500 as a bare failure: say what happened
        log.error("request_not_recorded", error=repr(exc))
        return _ephemeral("Sorry — the triage service could not record this request (its database failed). "
                          "Please try again in a minute.")
    return _ephemeral(_ack_text(svc, ref, sub) + note)


async def interactions(request: Request) -> Response:
    svc: Service = request.app.state.service
    cfg = svc.config
    try:
        from triage.service.uploads import INTERACTION_MAX_BODY

        # a message shortcut's payload carries the whole message, a pasted log included
        body = await read_body(request.headers, request.stream(), max(cfg.max_body_bytes, INTERACTION_MAX_BODY))
        verify_slack(cfg.slack_signing_secret, request.headers, body, cfg.max_clock_skew_s)
        form = {k: v[0] for k, v in parse_qs(body.decode("utf-8")).items()}
        payload = json.loads(form.get("payload", ""))
        if not isinstance(payload, dict):
            raise ValueError("payload is not an object")
    except Rejected as exc:
        return svc.reject(exc)
    except RecursionError:
        return svc.reject(Rejected(400, "bad_request", "the interaction payload is nested too deeply"))
    except (UnicodeDecodeError, ValueError) as exc:
        return svc.reject(Rejected(400, "bad_request", f"the interaction payload is not readable: {str(exc)[:200]}"))
    from triage.memory.slack import handle_interaction

    answered = await handle_interaction(svc, payload)  # "Confirm" / "It was something else…" and its modal
    if answered is not None:
        return answered
    if payload.get("type") == "message_action":  # "Triage this log" on a message (triage/service/uploads.py)
        from triage.service.uploads import message_shortcut

        return await message_shortcut(svc, request, payload)
    actions = payload.get("actions") or []
    action = actions[0] if actions and isinstance(actions[0], dict) else {}
    if payload.get("type") != "block_actions" or action.get("action_id") != ACTIVE_ACTION:
        return Response(status_code=200)  # link buttons and anything else: nothing to do
    team = (payload.get("team") or {}).get("id")
    user = (payload.get("user") or {}).get("id")
    channel = (payload.get("channel") or {}).get("id") or (payload.get("container") or {}).get("channel_id")
    message = payload.get("message") or {}
    thread = message.get("thread_ts") or (payload.get("container") or {}).get("thread_ts") or message.get("ts")
    structlog.contextvars.bind_contextvars(team=team, channel=channel, user=user)

    def tell(text: str) -> Response:
        return Response(status_code=200, background=BackgroundTask(svc.poster.ephemeral, channel, user, text, thread))

    if not svc.access.team_allowed(team) or not svc.access.channel_allowed(channel):
        svc.refuse("button", "channel")
        return tell("Sorry — triage requests are not enabled here.")
    if not svc.access.may_run_active(user):
        svc.refuse("button", "active_not_allowed")
        return tell("Sorry — active probes can only be run by the users allowed to run them. "
                    "Ask one of them, or an admin to add you.")
    limited = svc.rates.check(user, channel, "button:" + signature_key(request.headers))
    if limited is not None:
        svc.refuse("button", "rate_limited")
        return tell(limited)
    try:
        ref = str(json.loads(action.get("value") or "{}").get("run") or "")
    except (ValueError, AttributeError):
        ref = ""
    structlog.contextvars.bind_contextvars(run_id=ref)
    try:
        run_dir = await svc.resolve(ref)
    except TriageError as exc:
        svc.refuse("button", "run")
        return tell(_run_refusal(ref, exc))
    new = NewRequest(
        id=request.scope["state"]["request_id"], source="button", run_ref=ref, run_dir=str(run_dir), active=True,
        team=team, channel=channel, user=user, reply_to=thread, post=True,
        dedupe_key="button:" + signature_key(request.headers),
    )
    sub = await svc.submit(new)
    if sub.outcome == QUEUE_FULL:
        return tell(_ack_text(svc, ref, sub))
    return Response(status_code=200)


async def job_failed(request: Request) -> Response:
    svc: Service = request.app.state.service
    cfg = svc.config
    try:
        body = await read_body(request.headers, request.stream(), cfg.max_body_bytes)
        verify_hook(cfg.webhook_secret, request.headers, body, cfg.max_clock_skew_s)
        data = json.loads(body)
        if not isinstance(data, dict) or not isinstance(data.get("run"), str):
            raise ValueError('the body must be a JSON object with a "run" string')
    except Rejected as exc:
        return svc.reject(exc)
    except RecursionError:
        return svc.reject(Rejected(400, "bad_request", "unreadable hook body: nested too deeply"))
    except (UnicodeDecodeError, ValueError) as exc:
        return svc.reject(Rejected(400, "bad_request", f"unreadable hook body: {str(exc)[:200]}"))
    ref = data["run"]
    structlog.contextvars.bind_contextvars(run_id=ref, job_id=data.get("job_id"))
    channel = data.get("channel") or cfg.hook_channel
    if data.get("channel") and not svc.access.channel_allowed(str(data["channel"])):
        svc.refuse("hook", "channel")
        return JSONResponse({"ok": False, "error": f"channel {data['channel']!r} is not allowed"}, status_code=403)
    try:
        run_dir = await svc.resolve(ref)
    except TriageError as exc:
        svc.refuse("hook", "run")
        status = 404 if isinstance(exc, RunNotFound) else 400
        return JSONResponse({"ok": False, "error": _run_refusal(ref, exc).replace("`", "")}, status_code=status)
    delivery = str(data.get("delivery_id") or request.headers.get("x-triage-delivery") or signature_key(request.headers))
    new = NewRequest(
        id=request.scope["state"]["request_id"], source="hook", run_ref=ref, run_dir=str(run_dir),
        force=bool(data.get("force")), channel=str(channel) if channel else None, dedupe_key="hook:" + delivery,
        post=bool(channel), attach_postmortem=bool(channel),
        detail={k: data[k] for k in ("job_id", "status", "message") if k in data},
    )
    sub = await svc.submit(new)
    if sub.outcome == QUEUE_FULL or sub.triage is None:
        return JSONResponse({"ok": False, "error": "the triage queue is full"}, status_code=503,
                            headers={"Retry-After": "60"})
    return JSONResponse({
        "ok": True, "request_id": sub.request_id, "triage_id": sub.triage.id, "outcome": sub.outcome,
        "state": sub.triage.state, "position": sub.position, "url": svc.signed_path(sub.triage.id),
    }, status_code=202)


def _triage_json(svc: Service, t: TriageRow) -> dict[str, Any]:
    return {
        "id": t.id, "run": t.run_ref, "active": t.active, "state": t.state, "attempt": t.attempt,
        "position": svc.store.position(t.id), "created_at": t.created_at, "started_at": t.started_at,
        "finished_at": t.finished_at, "verdict": t.verdict, "partial": t.partial, "error": t.error,
        "requests": [{"id": r.id, "source": r.source, "channel": r.channel, "user": r.user, "thread_ts": r.thread_ts}
                     for r in svc.store.requests_of(t.id)],
        "report": json.loads(t.report) if t.report else None,
    }


async def get_triage(request: Request) -> Response:
    svc: Service = request.app.state.service
    refused = svc.authorize(request, request.path_params["triage_id"])
    if refused is not None:
        return refused
    t = await run_in_threadpool(svc.store.triage, request.path_params["triage_id"])
    if t is None:
        return JSONResponse({"ok": False, "error": "no such triage"}, status_code=404)
    return JSONResponse(await run_in_threadpool(_triage_json, svc, t))


async def get_postmortem(request: Request) -> Response:
    svc: Service = request.app.state.service
    refused = svc.authorize(request, request.path_params["triage_id"])
    if refused is not None:
        return refused
    t = await run_in_threadpool(svc.store.triage, request.path_params["triage_id"])
    if t is None or t.report is None:
        return PlainTextResponse("no finished triage with that id\n", status_code=404)
    try:
        paths = await run_in_threadpool(svc.postmortem_files, t)
    except TriageError as exc:
        return PlainTextResponse(f"the postmortem cannot be written: {exc}\n", status_code=409)
    text = paths[0].read_text(encoding="utf-8")
    return PlainTextResponse(text, media_type="text/markdown; charset=utf-8")


async def get_file(request: Request) -> Response:
    svc: Service = request.app.state.service
    name = request.path_params["name"]
    triage_id = request.path_params["triage_id"]
    refused = svc.authorize(request, triage_id)
    if refused is not None:
        return refused
    if not FILE_NAME.match(name) or not re.fullmatch(r"[0-9a-f]{16}", triage_id):
        return PlainTextResponse("not found\n", status_code=404)
    path = svc.postmortem_dir(triage_id) / name
    if not path.is_file():
        return PlainTextResponse("not found\n", status_code=404)
    return FileResponse(path)


async def healthz(request: Request) -> Response:
    svc: Service = request.app.state.service
    try:
        counts = await run_in_threadpool(svc.store.counts)
    except Exception as exc:  # noqa: BLE001 - the answer is the health check
        return JSONResponse({"ok": False, "error": f"database: {exc}"}, status_code=503)
    body = {"ok": True, "queued": counts.queued, "running": counts.running, "done": counts.done,
            "posts_pending": counts.posts_pending}
    if svc.config.workers == "process":
        body["workers_ready"] = len(svc.queue.worker_pids())
    return JSONResponse(body)


async def metrics(request: Request) -> Response:
    svc: Service = request.app.state.service
    counts = await run_in_threadpool(svc.store.counts)
    text = svc.metrics.render({
        "triage_queue_depth": ("Triages waiting for a worker.", counts.queued),
        "triage_running": ("Triages running now.", counts.running),
        "triage_stored": ("Finished triages in the store.", counts.done),
        "triage_posts_pending": ("Slack posts owed and not yet sent.", counts.posts_pending),
        "triage_posts_failed": ("Slack posts given up on.", counts.posts_failed),
        "triage_workers": ("Concurrent triages allowed.", svc.config.concurrency),
    })
    text += await run_in_threadpool(_memory_metrics, svc)
    return PlainTextResponse(text, media_type="text/plain; version=0.0.4; charset=utf-8")


def _memory_metrics(svc: Service) -> str:
    """Verdict quality from the team's memory (triage/memory/stats.py); empty when it cannot be read."""
    import sqlite3

    from triage.memory.stats import metrics_text
    from triage.memory.store import MemoryStore

    try:
        with MemoryStore(svc.config.db_path) as store:
            return metrics_text(store)
    except (sqlite3.Error, OSError) as exc:
        log.warning("memory_metrics_unavailable", error=str(exc))
        return ""


def create_app(config: ServiceConfig, *, store: TriageStore | None = None, slack_client: Any = None,
               postmortem_files: Callable[[TriageRow], list[Path]] | None = None) -> Starlette:
    """The service as an ASGI app; the store, workers and poster start with the app's lifespan."""
    service = Service(config, store=store, slack_client=slack_client, postmortem_files=postmortem_files)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await run_in_threadpool(service.start)
        try:
            yield
        finally:
            await run_in_threadpool(service.stop)

    app = Starlette(
        routes=[
            Route("/slack/commands", slash_command, methods=["POST"]),
            Route("/slack/interactions", interactions, methods=["POST"]),
            Route("/hooks/job-failed", job_failed, methods=["POST"]),
            Route("/triages/{triage_id}", get_triage, methods=["GET"]),
            Route("/triages/{triage_id}/postmortem", get_postmortem, methods=["GET"]),
            Route("/triages/{triage_id}/files/{name}", get_file, methods=["GET"]),
            Route("/healthz", healthz, methods=["GET"]),
            Route("/metrics", metrics, methods=["GET"]),
        ],
        lifespan=lifespan,
    )
    app.state.service = service
    app.add_middleware(RequestContext)
    return app
