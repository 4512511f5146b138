"""Logs handed over in Slack: a message shortcut on a pasted log or an attached file, and `/triage file:F…`.

Slash commands carry no files, so a Slack user gives the service a log in one of two ways:

- the message shortcut "Triage this log" (callback id `triage_message`) on a message that
  holds a pasted log and/or an uploaded text file. The interaction (`type: message_action`)
  carries the message's text and its `files`; a file, when there is one, is what is
  triaged (the message's text is then usually a comment), else the pasted text;
- `/triage file:F0123ABCD` naming a file shared in a channel the bot is in.

A file is read through the Web API with the bot token: `files.info` for its metadata,
then a GET of its `url_private` with `Authorization: Bearer <token>`. The token goes only
to the host of `SLACK_API_URL` (or `files.slack.com` when that is Slack's own API), never
follows a redirect, and only text files up to the fragment limit
(`triage.run.fragment.MAX_FRAGMENT_BYTES`) are fetched, the limit enforced while reading.
A binary, oversized or foreign-hosted file gets a polite ephemeral reply and nothing else.

The text is kept under the service's files folder, named by a hash of its name and
content, and triaged by the same queue, store and deduplication as a run-id: the triage's
`run_dir` is `slack-upload:<that folder>`, so the same log handed over twice is one
triage, and the same message's shortcut clicked twice is one request. The worker triages
it as a fragment (`triage.run.fragment.open_bytes_run`): the report's notes say it was a
fragment and name the file.

A pasted message is recorded before the shortcut is acknowledged, like a run-id. A file is
fetched after the acknowledgement (a download does not fit Slack's 3 seconds) and recorded
when it has arrived: a restart in those seconds loses the request, and the user is told
nothing more; asking again starts it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import structlog
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from triage.errors import BadInput
from triage.run.fragment import MAX_FRAGMENT_BYTES, _check_fragment, open_bytes_run

log = structlog.get_logger("triage.service.uploads")

UPLOAD_PREFIX = "slack-upload:"  # a triage's run_dir when its run is an upload, not a run directory
SHORTCUT_CALLBACK = "triage_message"  # the message shortcut's callback id, as set in the Slack app's config
FILE_ARG = re.compile(r"^file:(F[A-Z0-9]{2,40})$")
META_FILE = "upload.json"
PASTED_NAME = "pasted-message.log"
# The fragment limit (`triage run -`) bounds what is fetched: the same text, handed over another way.
MAX_UPLOAD_BYTES = MAX_FRAGMENT_BYTES
# A shortcut's payload carries the whole message (its text twice: as text and as rich-text blocks), and
# Slack keeps up to 40,000 characters of message text (chat.postMessage docs, "Truncating content"),
# which JSON and form encoding can triple: more than the 64 KiB other Slack bodies are allowed.
INTERACTION_MAX_BODY = 512 * 1024
DOWNLOAD_TIMEOUT_S = 30.0
# Media types that hold text: logs, metrics as JSON lines, launch scripts, configs. Slack gives an
# uploaded `.log` / `.txt` file and a text snippet `text/plain`.
TEXT_TYPES = frozenset({
    "application/json", "application/x-ndjson", "application/jsonl", "application/x-jsonlines",
    "application/yaml", "application/x-yaml", "application/x-sh", "application/x-shellscript",
    "application/toml", "application/x-python", "application/x-python-code",
})


class UploadRefused(Exception):
    """The file or text cannot be triaged; `message` is the polite sentence for the user."""

    def __init__(self, reason: str, message: str) -> None:
        self.reason = reason  # a metric label
        self.message = message
        super().__init__(message)


def is_upload(run_dir: str | None) -> bool:
    return bool(run_dir) and str(run_dir).startswith(UPLOAD_PREFIX)


def _shown(name: str) -> str:
    name = name.replace("`", "'")
    return name if len(name) <= 80 else name[:79] + "…"


# --- what may be fetched ------------------------------------------------------------------


def is_text_type(mimetype: str | None) -> bool:
    base = (mimetype or "").split(";", 1)[0].strip().lower()
    return base.startswith("text/") or base in TEXT_TYPES


def file_hosts_allowed(api_url: str, file_url: str) -> bool:
    """Whether `file_url` is on the Slack API host the service is configured with (scheme and port too).

    Slack's own API (`https://slack.com/api/`) serves files from `https://files.slack.com/`.
    """
    try:
        api, url = urlsplit(api_url), urlsplit(file_url)
        api_port, url_port = api.port, url.port
    except ValueError:
        return False
    if url.username or url.password or not url.hostname:
        return False
    if (url.scheme, url.hostname, url_port) == (api.scheme, api.hostname, api_port):
        return True
    slack_api = api.scheme == "https" and (api.hostname == "slack.com" or (api.hostname or "").endswith(".slack.com"))
    return slack_api and url.scheme == "https" and url.hostname == "files.slack.com" and url_port in (None, 443)


def check_kind(meta: dict[str, Any], limit: int | None = None) -> None:
    """Refuse (UploadRefused) a file by its type and size, as `files.info` or a shortcut's payload gives them."""
    limit = MAX_UPLOAD_BYTES if limit is None else limit
    name = _shown(str(meta.get("name") or meta.get("id") or "that file"))
    mimetype = str(meta.get("mimetype") or "")
    if not is_text_type(mimetype):
        raise UploadRefused("binary", f"Sorry — `{name}` is not a text file ({mimetype or 'unknown type'}): "
                                      "only logs and other text files can be triaged.")
    try:
        size = int(meta.get("size") or 0)
    except (TypeError, ValueError):
        size = 0
    if size > limit:
        raise UploadRefused("oversized", f"Sorry — `{name}` is {size / 2**20:.1f} MB, over the {limit / 2**20:g} MB "
                                         "a Slack upload may hold. Triage it where it lies with `triage run FILE`, "
                                         "or share the part around the first error.")


def check_file(meta: dict[str, Any], api_url: str, limit: int | None = None) -> None:
    """Refuse (UploadRefused) a file the service will not fetch, from its `files.info` metadata."""
    check_kind(meta, limit)
    name = _shown(str(meta.get("name") or meta.get("id") or "that file"))
    url = str(meta.get("url_private_download") or meta.get("url_private") or "")
    if not url:
        raise UploadRefused("no_url", f"Sorry — Slack gave no address to read `{name}` from.")
    if not file_hosts_allowed(api_url, url):
        raise UploadRefused("foreign_host", f"Sorry — `{name}` is not served by this workspace's Slack: "
                                            "the service reads files only from Slack itself.")


def download(meta: dict[str, Any], api_url: str, token: str, limit: int | None = None,
             transport: httpx.BaseTransport | None = None) -> bytes:
    """The file's bytes, read with the bot token, at most `limit` of them (UploadRefused past it)."""
    limit = MAX_UPLOAD_BYTES if limit is None else limit
    check_file(meta, api_url, limit)
    url = str(meta.get("url_private_download") or meta.get("url_private"))
    name = _shown(str(meta.get("name") or meta.get("id") or "that file"))
    chunks: list[bytes] = []
    got = 0
    try:
        with httpx.Client(timeout=DOWNLOAD_TIMEOUT_S, follow_redirects=False, transport=transport) as client:
            with client.stream("GET", url, headers={"Authorization": f"Bearer {token}"}) as resp:
                if resp.status_code != 200:
                    log.warning("upload_fetch_failed", status=resp.status_code)
                    raise UploadRefused("fetch_failed", f"Sorry — Slack did not hand over `{name}` "
                                                        f"(HTTP {resp.status_code}). Is the app in that channel?")
                ctype = (resp.headers.get("content-type") or "").split(";", 1)[0].strip().lower()
                if ctype == "text/html":
                    # Slack answers its sign-in page, not the file, to a token that may not read files.
                    raise UploadRefused("fetch_failed", f"Sorry — Slack did not hand over `{name}`: the app may "
                                                        "lack the `files:read` scope.")
                if ctype and not is_text_type(ctype):
                    raise UploadRefused("binary", f"Sorry — `{name}` did not arrive as text ({ctype}).")
                for chunk in resp.iter_bytes():
                    got += len(chunk)
                    if got > limit:
                        raise UploadRefused("oversized", f"Sorry — `{name}` is over the {limit / 2**20:g} MB a Slack "
                                                         "upload may hold. Triage it with `triage run FILE`.")
                    chunks.append(chunk)
    except httpx.HTTPError as exc:
        log.warning("upload_fetch_failed", error=f"{type(exc).__name__}: {exc}")
        raise UploadRefused("fetch_failed", f"Sorry — `{name}` could not be fetched from Slack; "
                                            "please try again in a minute.") from None
    return b"".join(chunks)


def message_text(text: str | None) -> str:
    """The log a message holds: Slack's mrkdwn escapes undone, code fences removed."""
    # Slack escapes exactly these three in message text (api.slack.com, "Formatting text for app surfaces").
    text = (text or "").replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    lines = text.split("\n")
    out = []
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("```"):
            rest = stripped.strip("`").strip()
            if rest:
                out.append(rest)
            continue
        out.append(line[: line.rindex("```")] if stripped.endswith("```") else line)
    return "\n".join(out).strip("\n") + "\n"


def check_text(data: bytes, name: str, limit: int | None = None) -> None:
    """Refuse (UploadRefused) text that cannot be a log: empty, binary, a giant line, too large."""
    limit = MAX_UPLOAD_BYTES if limit is None else limit
    shown = _shown(name)
    if len(data) > limit:
        raise UploadRefused("oversized", f"Sorry — `{shown}` is over the {limit / 2**20:g} MB a Slack upload may hold. "
                                         "Triage it with `triage run FILE`.")
    try:
        _check_fragment(data, shown)
    except BadInput as exc:
        said = str(exc)
        if "binary" in said:
            raise UploadRefused("binary", f"Sorry — `{shown}` is binary (it holds NUL bytes), not a log: "
                                          "only text can be triaged.") from None
        if "empty" in said:
            raise UploadRefused("empty", f"Sorry — `{shown}` is empty: nothing to triage.") from None
        raise UploadRefused("not_a_log", f"Sorry — `{shown}` cannot be a log: {said.split(' holds ', 1)[-1]}.") from None


# --- kept on disk, triaged by a worker ------------------------------------------------------


def uploads_root(files_root: Path) -> Path:
    return files_root / "uploads"


def save(files_root: Path, name: str, data: bytes, what: str, file_id: str | None = None) -> str:
    """Keep the text under the files folder (named by its hash); the triage's `run_dir` for it."""
    digest = hashlib.sha256(name.encode("utf-8", "replace") + b"\0" + data).hexdigest()[:32]
    root = uploads_root(files_root)
    out = root / digest
    if not (out / META_FILE).is_file():
        root.mkdir(parents=True, exist_ok=True)
        tmp = root / f".{digest}.tmp-{uuid.uuid4().hex[:8]}"
        tmp.mkdir()
        (tmp / "text").write_bytes(data)
        (tmp / META_FILE).write_text(json.dumps({"name": name, "what": what, "file_id": file_id, "bytes": len(data)}))
        try:
            os.rename(tmp, out)
        except OSError:  # kept already by another request
            shutil.rmtree(tmp, ignore_errors=True)
    return UPLOAD_PREFIX + str(out)


def open_upload(run_dir: str) -> Any:
    """The run an upload stands for: a fragment made of its text, named by its file name."""
    folder = Path(run_dir[len(UPLOAD_PREFIX):]) if is_upload(run_dir) else Path(run_dir)
    try:
        meta = json.loads((folder / META_FILE).read_text())
        data = (folder / "text").read_bytes()
    except (OSError, ValueError) as exc:
        raise BadInput(f"the uploaded text is no longer kept ({getattr(exc, 'strerror', None) or exc})") from None
    return open_bytes_run(data, str(meta.get("name") or PASTED_NAME), what=str(meta.get("what") or "the upload"))


def triage_upload(run_dir: str, runs_root: str | None = None, playbooks: Path | str | None = None,
                  executor: Any = None) -> Any:
    """Triage an upload (what the queue calls instead of the triage function for a `slack-upload:` run)."""
    from triage.api import recognisable, triage_run
    from triage.service.queue import compiled_graph

    run = open_upload(run_dir)
    if not recognisable(run):
        raise BadInput(f"`{_shown(run.ref)}` does not read as a training job's log: no metric record, argument, "
                       "traceback, error line, timestamp or framework marker in it")
    return triage_run(run, compiled_graph(playbooks), executor)


# --- the Slack side ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Asker:
    """Who asked, where, and where the answer goes."""

    request_id: str
    source: str  # shortcut | slack
    team: str | None
    channel: str | None
    user: str | None
    reply_to: str | None  # the thread to answer in (the shortcut's message), None: a new one
    dedupe_key: str
    detail: dict[str, Any]
    force: bool = False  # triage again rather than answer from the store


def _files_info(svc: Any, file_id: str) -> dict[str, Any]:
    from slack_sdk.errors import SlackApiError

    client = svc.poster.client
    if client is None:
        raise UploadRefused("no_token", "Sorry — this service has no Slack bot token, so it cannot read files.")
    try:
        info = client.files_info(file=file_id)
    except SlackApiError as exc:
        error = str(exc.response.get("error") or "error")
        log.info("files_info_refused", error=error)
        if error in ("file_not_found", "file_deleted"):
            raise UploadRefused("not_found", f"Sorry — no file `{_shown(file_id)}` that this app can see. Share the "
                                             "file in a channel the app is in, then ask again.") from None
        raise UploadRefused("fetch_failed", f"Sorry — Slack would not describe `{_shown(file_id)}` ({error}).") from None
    except (httpx.HTTPError, OSError) as exc:
        log.warning("files_info_failed", error=repr(exc))
        raise UploadRefused("fetch_failed", "Sorry — Slack could not be reached to read the file; "
                                            "please try again in a minute.") from None
    meta = info.get("file")
    if not isinstance(meta, dict):
        raise UploadRefused("fetch_failed", f"Sorry — Slack gave no description of `{_shown(file_id)}`.")
    return meta


def fetch_file(svc: Any, file_id: str) -> tuple[str, bytes]:
    """(name, text) of a Slack file, through files.info and its url_private; UploadRefused otherwise."""
    cfg = svc.config
    meta = _files_info(svc, file_id)
    name = str(meta.get("name") or file_id)
    check_file(meta, cfg.slack_api_url, MAX_UPLOAD_BYTES)
    data = download(meta, cfg.slack_api_url, cfg.slack_bot_token or "", MAX_UPLOAD_BYTES)
    check_text(data, name, MAX_UPLOAD_BYTES)
    return name, data


async def _record(svc: Any, asker: Asker, name: str, data: bytes, what: str, file_id: str | None) -> str | None:
    """Keep and submit the text; None when it was recorded (the anchor says the rest), else what to tell the user."""
    from triage.service.store import DUPLICATE, QUEUE_FULL, NewRequest

    run_dir = await run_in_threadpool(save, svc.config.files_root, name, data, what, file_id)
    new = NewRequest(
        id=asker.request_id, source=asker.source, run_ref=name, run_dir=run_dir, team=asker.team,
        channel=asker.channel, user=asker.user, reply_to=asker.reply_to, dedupe_key=asker.dedupe_key, post=True,
        force=asker.force,
        detail={**asker.detail, "upload": name, **({"file_id": file_id} if file_id else {})},
    )
    try:
        sub = await svc.submit(new)
    except Exception as exc:  # noqa: BLE001 - say what happened rather than nothing
        log.error("request_not_recorded", error=repr(exc))
        return "Sorry — the triage service could not record this request (its database failed). Please try again."
    if sub.outcome == QUEUE_FULL or sub.triage is None:
        return f"The triage queue is full ({sub.position} waiting). Try again in a few minutes."
    if sub.outcome == DUPLICATE:
        where = " in this message's thread" if asker.source == "shortcut" else ""
        return f"Already received: the triage of `{_shown(name)}` is {sub.triage.state}; its report is posted{where}."
    log.info("upload_recorded", outcome=sub.outcome, triage_id=sub.triage.id, bytes=len(data))
    return None


async def _fetch_and_record(svc: Any, asker: Asker, file_id: str) -> None:
    """After the acknowledgement: fetch the file, record the request; a polite ephemeral note when refused."""
    import structlog.contextvars as ctx

    ctx.bind_contextvars(request_id=asker.request_id, file_id=file_id)
    try:
        name, data = await run_in_threadpool(fetch_file, svc, file_id)
    except UploadRefused as exc:
        svc.refuse(asker.source, exc.reason)
        log.info("upload_refused", reason=exc.reason)
        await run_in_threadpool(svc.poster.ephemeral, asker.channel, asker.user, exc.message, asker.reply_to)
        return
    note = await _record(svc, asker, name, data, f"the Slack file {name!r}", file_id)
    if note:
        await run_in_threadpool(svc.poster.ephemeral, asker.channel, asker.user, note, asker.reply_to)


def _allowed(svc: Any, source: str, team: str | None, channel: str | None, user: str | None,
             delivery: str) -> str | None:
    if not svc.access.team_allowed(team) or not svc.access.channel_allowed(channel):
        svc.refuse(source, "channel")
        return "Sorry — triage requests are not enabled here."
    limited = svc.rates.check(user, channel, delivery)
    if limited is not None:
        svc.refuse(source, "rate_limited")
    return limited


async def message_shortcut(svc: Any, request: Request, payload: dict[str, Any]) -> Response:
    """"Triage this log" on a message: its first text file, else its pasted text, triaged in its thread."""
    from triage.service.security import signature_key

    if payload.get("callback_id") != SHORTCUT_CALLBACK:
        return Response(status_code=200)  # another shortcut of the app: not ours
    team = (payload.get("team") or {}).get("id")
    user = (payload.get("user") or {}).get("id")
    channel = (payload.get("channel") or {}).get("id")
    message = payload.get("message") if isinstance(payload.get("message"), dict) else {}
    message_ts = str(payload.get("message_ts") or message.get("ts") or "")
    thread = message.get("thread_ts") or message_ts or None
    structlog.contextvars.bind_contextvars(team=team, channel=channel, user=user, shortcut=SHORTCUT_CALLBACK)

    def tell(text: str) -> Response:
        return Response(status_code=200, background=BackgroundTask(svc.poster.ephemeral, channel, user, text, thread))

    refusal = _allowed(svc, "shortcut", team, channel, user, "shortcut:" + signature_key(request.headers))
    if refusal is not None:
        return tell(refusal)
    asker = Asker(request_id=request.scope["state"]["request_id"], source="shortcut", team=team, channel=channel,
                  user=user, reply_to=thread, dedupe_key=f"shortcut:{team}:{channel}:{message_ts}",
                  detail={"shortcut": SHORTCUT_CALLBACK, "message_ts": message_ts})
    files = [f for f in (message.get("files") or []) if isinstance(f, dict) and f.get("id")]
    if files:
        # The first text file the message holds; the others, and the message's text, are its comment.
        chosen = next((f for f in files if is_text_type(f.get("mimetype"))), files[0])
        if chosen.get("mimetype") is not None:
            # What the payload already says is refused without a call to Slack; files.info has the last word.
            try:
                check_kind(chosen)
            except UploadRefused as exc:
                svc.refuse("shortcut", exc.reason)
                log.info("upload_refused", reason=exc.reason)
                return tell(exc.message)
        return Response(status_code=200, background=BackgroundTask(_fetch_and_record, svc, asker, str(chosen["id"])))
    data = message_text(message.get("text")).encode("utf-8", "replace")
    try:
        check_text(data, "the message")
    except UploadRefused as exc:
        svc.refuse("shortcut", exc.reason)
        return tell(exc.message if exc.reason != "empty" else
                    "Sorry — that message holds no text or text file to triage. Paste the log, or attach it as a file.")
    note = await _record(svc, asker, PASTED_NAME, data, "the message pasted in Slack", None)
    return tell(note) if note else Response(status_code=200)


async def file_command(svc: Any, request: Request, form: dict[str, str], file_id: str,
                       force: bool = False) -> Response:
    """`/triage file:F… [--force]`: acknowledged at once; the file is fetched, then triaged like a run-id."""
    from triage.service.security import signature_key

    asker = Asker(request_id=request.scope["state"]["request_id"], source="slack", team=form.get("team_id"),
                  channel=form.get("channel_id"), user=form.get("user_id"), reply_to=None,
                  dedupe_key="slack:" + signature_key(request.headers),
                  detail={"command": form.get("command", "/triage")}, force=force)
    text = (f"Fetching the file `{_shown(file_id)}` from Slack; its triage will be posted in a thread in this channel.")
    return JSONResponse({"response_type": "ephemeral", "text": text},
                        background=BackgroundTask(_fetch_and_record, svc, asker, file_id))
