"""Test doubles for the service's peers, shipped so tests and benchmarks need no real Slack.

- `SlackStandIn`: a small HTTP server on 127.0.0.1 answering the Web API methods the
  service calls, the way Slack answers them (`{"ok": true, "ts": ...}`), and recording
  every call, message and file. Failures can be injected: an error answer, or a post
  recorded and its answer lost (the connection dropped), as after a network cut.
- `ServerThread`: the ASGI app served by uvicorn on 127.0.0.1 in a thread.
- Builders for signed slash-command, button and message-shortcut bodies.

Files a test registers (`register_file`) are described by `files.info` and served at their
`url_private` to a request bearing the bot token, as Slack serves uploads; `requests`
holds every HTTP request the stand-in received (API calls and file downloads alike).
"""

from __future__ import annotations

import itertools
import json
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(predicate: Callable[[], Any], timeout: float = 30.0, interval: float = 0.05) -> Any:
    """Poll until `predicate()` is truthy; its value, or AssertionError after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(interval)


class SlackStandIn:
    """A local stand-in for Slack's Web API (`base_url` = `stand_in.url`)."""

    def __init__(self, token: str | None = "xoxb-test") -> None:
        self.token = token
        self.calls: list[dict[str, Any]] = []
        self.messages: list[dict[str, Any]] = []
        self.ephemerals: list[dict[str, Any]] = []
        self.views: list[dict[str, Any]] = []  # modals opened (views.open)
        self.files: dict[str, dict[str, Any]] = {}
        self.requests: list[dict[str, Any]] = []  # every HTTP request: method, path, Authorization
        self.fail_next: dict[str, list[str]] = {}  # method -> errors to answer, one per call
        self.drop_answer: dict[str, int] = {}  # method -> how many calls to record and then hang up on
        self._lock = threading.Lock()
        self._ts = itertools.count(1)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/api/"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="slack-stand-in", daemon=True)

    def __enter__(self) -> SlackStandIn:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()

    # --- what tests set up ------------------------------------------------------------

    def register_file(self, name: str, data: bytes, mimetype: str = "text/plain", *, size: int | None = None,
                      url_private: str | None = None, file_id: str | None = None) -> dict[str, Any]:
        """A file shared in the workspace, as `files.info` describes it (`size` and `url_private` may lie)."""
        fid = file_id or f"F{next(self._ts):08d}"
        f = {"id": fid, "name": name, "length": len(data), "data": data, "shared": None, "mimetype": mimetype,
             "size": len(data) if size is None else size,
             "url_private": url_private or f"http://127.0.0.1:{self.port}/files-pri/T0TEST-{fid}/{name}"}
        with self._lock:
            self.files[fid] = f
        return f

    def file_payload(self, fid: str) -> dict[str, Any]:
        """The file as a message's `files` list carries it in an interaction payload."""
        f = self.files[fid]
        return {"id": fid, "name": f["name"], "title": f["name"], "mimetype": f["mimetype"], "size": f["size"],
                "url_private": f["url_private"], "mode": "hosted"}

    def downloads(self) -> list[dict[str, Any]]:
        """The file downloads (GETs of a url_private) the stand-in answered or refused."""
        with self._lock:
            return [r for r in self.requests if r["path"].startswith("/files-pri/")]

    # --- what tests look at -----------------------------------------------------------

    def posts(self, method: str = "chat.postMessage") -> list[dict[str, Any]]:
        with self._lock:
            return [c["params"] for c in self.calls if c["method"] == method]

    def thread(self, ts: str) -> list[dict[str, Any]]:
        """Replies in the thread of message `ts`."""
        with self._lock:
            return [m for m in self.messages if m.get("thread_ts") == ts and m["ts"] != ts]

    def top_level(self, channel: str | None = None) -> list[dict[str, Any]]:
        with self._lock:
            return [m for m in self.messages if not m.get("thread_ts") and (channel is None or m["channel"] == channel)]

    # --- the API ----------------------------------------------------------------------

    def _next_ts(self) -> str:
        return f"{int(time.time())}.{next(self._ts):06d}"

    def _answer(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "chat.postMessage":
            if not params.get("channel"):
                return {"ok": False, "error": "channel_not_found"}
            if not (params.get("text") or params.get("blocks")):
                return {"ok": False, "error": "no_text"}
            msg = {"type": "message", "channel": params["channel"], "ts": self._next_ts(),
                   "thread_ts": params.get("thread_ts"), "text": params.get("text"), "blocks": params.get("blocks"),
                   "metadata": params.get("metadata")}
            if isinstance(msg["blocks"], str):
                msg["blocks"] = json.loads(msg["blocks"])
            if isinstance(msg["metadata"], str):
                msg["metadata"] = json.loads(msg["metadata"])
            self.messages.append(msg)
            return {"ok": True, "channel": msg["channel"], "ts": msg["ts"], "message": msg}
        if method == "chat.postEphemeral":
            ts = self._next_ts()
            self.ephemerals.append({**params, "message_ts": ts})
            return {"ok": True, "message_ts": ts}
        if method in ("conversations.history", "conversations.replies"):
            channel = params.get("channel")
            with_meta = str(params.get("include_all_metadata", "")).lower() in ("1", "true")
            if method == "conversations.history":
                oldest = float(params.get("oldest") or 0)
                found = [m for m in self.messages if m["channel"] == channel and not m.get("thread_ts")
                         and float(m["ts"]) >= oldest]
                found.reverse()  # newest first, like Slack
            else:
                root = params.get("ts")
                found = [m for m in self.messages if m["channel"] == channel and (m["ts"] == root or m.get("thread_ts") == root)]
            out = [{k: v for k, v in m.items() if k != "metadata" or with_meta} for m in found]
            return {"ok": True, "messages": out, "has_more": False}
        if method == "files.getUploadURLExternal":
            fid = f"F{next(self._ts):08d}"
            self.files[fid] = {"id": fid, "name": params.get("filename"), "length": int(params.get("length") or 0),
                               "data": None, "shared": None}
            return {"ok": True, "file_id": fid, "upload_url": f"http://127.0.0.1:{self.port}/upload/{fid}"}
        if method == "files.completeUploadExternal":
            items = params.get("files")
            items = json.loads(items) if isinstance(items, str) else items or []
            out = []
            for item in items:
                f = self.files.get(item.get("id"))
                if f is None or f["data"] is None:
                    return {"ok": False, "error": "file_not_found"}
                f.update(shared={"channel": params.get("channel_id"), "thread_ts": params.get("thread_ts"),
                                 "comment": params.get("initial_comment")}, title=item.get("title"))
                out.append({"id": f["id"], "title": f.get("title"), "name": f["name"]})
            return {"ok": True, "files": out}
        if method == "files.info":
            f = self.files.get(params.get("file"))
            if f is None:
                return {"ok": False, "error": "file_not_found"}
            channels = [f["shared"]["channel"]] if f["shared"] else []
            info = {"id": f["id"], "name": f["name"], "channels": channels}
            if "url_private" in f:  # registered by a test: described as Slack describes a shared upload
                info.update(title=f["name"], mimetype=f["mimetype"], size=f["size"], url_private=f["url_private"],
                            url_private_download=f["url_private"], mode="hosted", is_public=False)
            return {"ok": True, "file": info}
        if method == "views.open":
            view = params.get("view")
            view = json.loads(view) if isinstance(view, str) else view
            if not params.get("trigger_id") or not isinstance(view, dict):
                return {"ok": False, "error": "invalid_arguments"}
            self.views.append({"trigger_id": params["trigger_id"], "view": view})
            return {"ok": True, "view": {**view, "id": f"V{next(self._ts):08d}"}}
        if method == "auth.test":
            return {"ok": True, "team_id": "T0TEST", "user_id": "U0BOT"}
        return {"ok": False, "error": "unknown_method"}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _reply(self, status: int, body: bytes, content_type: str = "application/json") -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _params(self, raw: bytes) -> dict[str, Any]:
                query = {k: v[0] for k, v in parse_qs(urlsplit(self.path).query).items()}
                ctype = self.headers.get("Content-Type", "")
                if raw and "json" in ctype:
                    query.update(json.loads(raw))
                elif raw:
                    query.update({k: v[0] for k, v in parse_qs(raw.decode()).items()})
                return query

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                path = urlsplit(self.path).path
                with stand_in._lock:
                    stand_in.requests.append({"method": self.command, "path": path,
                                              "auth": self.headers.get("Authorization", ""), "at": time.time()})
                if path.startswith("/files-pri/"):  # a file's url_private: its bytes, for the bot token only
                    fid = path.split("/")[2].rsplit("-", 1)[-1]
                    with stand_in._lock:
                        f = stand_in.files.get(fid)
                    if stand_in.token and self.headers.get("Authorization", "") != f"Bearer {stand_in.token}":
                        self._reply(200, b"<html>sign in to Slack</html>", "text/html")  # what Slack answers
                    elif f is None or f.get("data") is None:
                        self._reply(404, b"not found", "text/plain")
                    else:
                        self._reply(200, f["data"], f.get("mimetype") or "application/octet-stream")
                    return
                if path.startswith("/upload/"):
                    fid = path.rsplit("/", 1)[1]
                    with stand_in._lock:
                        f = stand_in.files.get(fid)
                        if f is not None:
                            f["data"] = raw
                    self._reply(200 if f is not None else 404, f"OK - {len(raw)}".encode(), "text/plain")
                    return
                if path == "/_stand_in/summary":  # for a stand-in running in another process
                    with stand_in._lock:
                        summary = {"calls": len(stand_in.calls), "messages": len(stand_in.messages),
                                   "files_shared": sum(1 for f in stand_in.files.values() if f["shared"])}
                    self._reply(200, json.dumps(summary).encode())
                    return
                method = path.removeprefix("/api/")
                params = self._params(raw)
                auth = self.headers.get("Authorization", "")
                with stand_in._lock:
                    stand_in.calls.append({"method": method, "params": params, "auth": auth, "at": time.time()})
                    if stand_in.token and auth != f"Bearer {stand_in.token}":
                        answer: dict[str, Any] = {"ok": False, "error": "invalid_auth"}
                    elif stand_in.fail_next.get(method):
                        answer = {"ok": False, "error": stand_in.fail_next[method].pop(0)}
                    else:
                        answer = stand_in._answer(method, params)
                    drop = stand_in.drop_answer.get(method, 0) > 0
                    if drop:
                        stand_in.drop_answer[method] -= 1
                if drop:  # the call took effect; its answer is lost
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                self._reply(200, json.dumps(answer).encode())

            do_GET = _handle
            do_POST = _handle

        return Handler


def serve_stand_in(ready: Any, token: str | None = "xoxb-test") -> None:
    """Run a `SlackStandIn` until killed, sending its URL through `ready` (a multiprocessing pipe end)."""
    stand_in = SlackStandIn(token)
    ready.send(stand_in.url)
    stand_in._server.serve_forever(poll_interval=0.05)


class ServerThread:
    """An ASGI app served by uvicorn on 127.0.0.1 in a background thread."""

    def __init__(self, app: Any, port: int | None = None) -> None:
        import uvicorn

        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_config=None, access_log=False,
                                lifespan="on", timeout_graceful_shutdown=3)
        self.server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self.server.run, name="uvicorn", daemon=True)

    def __enter__(self) -> ServerThread:
        self._thread.start()
        wait_for(lambda: self.server.started, timeout=15)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.should_exit = True
        self._thread.join(10)


def slash_command_body(text: str, *, team: str = "T0TEST", channel: str = "C0TRIAGE", user: str = "U0ALICE",
                       command: str = "/triage", **extra: str) -> bytes:
    """A slash command as Slack posts it (application/x-www-form-urlencoded)."""
    fields = {
        "token": "deprecated-verification-token", "team_id": team, "team_domain": "example", "channel_id": channel,
        "channel_name": "triage", "user_id": user, "user_name": user.lower(), "command": command, "text": text,
        "api_app_id": "A0TRIAGE", "response_url": "https://hooks.slack.com/commands/T0TEST/1/abc",
        "trigger_id": f"{int(time.time())}.1.{user}",
    }
    fields.update(extra)
    return urlencode(fields).encode()


def button_body(run_ref: str, *, triage_id: str = "0" * 16, team: str = "T0TEST", channel: str = "C0TRIAGE",
                user: str = "U0ALICE", thread_ts: str = "1700000000.000001", message_ts: str = "1700000000.000002") -> bytes:
    """A "Run active probes" press as Slack posts it (a form field `payload` holding JSON)."""
    payload = {
        "type": "block_actions", "team": {"id": team}, "user": {"id": user}, "channel": {"id": channel},
        "container": {"type": "message", "channel_id": channel, "message_ts": message_ts, "thread_ts": thread_ts},
        "message": {"ts": message_ts, "thread_ts": thread_ts},
        "actions": [{"action_id": "triage_active", "type": "button",
                     "value": json.dumps({"run": run_ref, "triage": triage_id})}],
        "response_url": "https://hooks.slack.com/actions/T0TEST/1/abc",
    }
    return urlencode({"payload": json.dumps(payload)}).encode()


def message_shortcut_body(text: str = "", *, files: list[dict[str, Any]] | None = None, team: str = "T0TEST",
                          channel: str = "C0TRIAGE", user: str = "U0ALICE", message_ts: str = "1700000100.000100",
                          callback_id: str = "triage_message", trigger: str = "1") -> bytes:
    """A message shortcut ("Triage this log") as Slack posts it: `type: message_action`, the message inside.

    Shape from Slack's docs, "Message shortcuts" (api.slack.com/interactivity/shortcuts/using#message_shortcuts).
    """
    message: dict[str, Any] = {"type": "message", "user": "U0BOB", "ts": message_ts, "text": text}
    if files:
        message["files"] = files
        message["upload"] = True
    payload = {
        "type": "message_action", "callback_id": callback_id, "trigger_id": f"{int(time.time())}.{trigger}.abc",
        "team": {"id": team, "domain": "example"}, "channel": {"id": channel, "name": "triage"},
        "user": {"id": user, "name": user.lower()}, "message_ts": message_ts, "message": message,
        "response_url": "https://hooks.slack.com/app/T0TEST/1/abc", "token": "deprecated-verification-token",
    }
    return urlencode({"payload": json.dumps(payload)}).encode()
