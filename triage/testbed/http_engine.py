"""The engine served over HTTP on 127.0.0.1 with SGLang's request and response shapes.

    POST /generate              {"input_ids": [...] | [[...], ...], "sampling_params": {...}, "return_logprob": true}
                                -> {"text", "output_ids", "meta_info": {"output_token_logprobs": [[lp, id, null], ...],
                                    "finish_reason": {"type": "length", "length": N} | {"type": "stop", "matched": id}, ...}}
                                   (a list of those for a batch of prompts)
    GET  /health, /health_generate
    GET  /get_server_info, /server_info, /get_model_info, /model_info
    GET|POST /get_weights_by_name {"name", "truncate_size"} -> the tensor's first rows (a bare list);
                                400 {"error": {"message": "Get parameter by name failed"}} for an unknown name
    POST /weights_checker       {"action": "checksum"} -> sha256 of each tensor's bytes
    POST /flush_cache, /release_memory_occupation, /resume_memory_occupation

Only ever bound to 127.0.0.1; the testbed's job starts and stops it (`--use-http-engine`),
and `EngineServer` can be used on its own for a probe's tests.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from triage.testbed.engine import Engine


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # keep the job log free of access lines
        return

    def _send(self, status: int, body: Any, content_type: str = "application/json") -> None:
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str) -> None:
        self._send(status, {"error": {"message": message}})

    def _body(self) -> dict[str, Any]:
        length = int(self.headers.get("content-length") or 0)
        if not length:
            return {}
        try:
            body = json.loads(self.rfile.read(length))
        except json.JSONDecodeError as exc:
            raise ValueError(f"invalid JSON body: {exc}") from None
        if not isinstance(body, dict):
            raise ValueError("the body must be a JSON object")
        return body

    def do_GET(self) -> None:
        self._route("GET")

    def do_POST(self) -> None:
        self._route("POST")

    def _route(self, method: str) -> None:
        path = self.path.split("?", 1)[0]
        engine = self.server.engine
        try:
            body = self._body() if method == "POST" else {}
        except ValueError as exc:
            return self._error(400, str(exc))
        with self.server.lock:
            if path == "/health":
                return self._send(200, "", "text/plain")
            if path == "/health_generate":
                engine.generate([[0]], {"max_new_tokens": 1, "temperature": 1.0})
                return self._send(200, "", "text/plain")
            if path in ("/get_server_info", "/server_info"):
                return self._send(200, engine.server_info())
            if path in ("/get_model_info", "/model_info"):
                return self._send(200, {"model_path": str(engine.path), "tokenizer_path": str(engine.path),
                                        "is_generation": True, "weight_version": engine.weight_version,
                                        "model_type": engine.config.model_type,
                                        "architectures": list(engine.config.architectures or [])})
            if path == "/generate" and method == "POST":
                return self._generate(body)
            if path == "/get_weights_by_name":
                return self._weights_by_name(body)
            if path == "/weights_checker":
                if body.get("action", "checksum") != "checksum":
                    return self._send(400, {"success": False, "message": f"unsupported action {body.get('action')!r}"})
                sums = {n: hashlib.sha256(t.detach().float().numpy().tobytes()).hexdigest()[:16]
                        for n, t in engine.named_tensors().items()}
                return self._send(200, {"success": True, "message": "Success.", "ranks": [{"checksums": sums}]})
            if path == "/flush_cache":
                return self._send(200, "Cache flushed.\n", "text/plain")
            if path == "/release_memory_occupation":
                engine.release_memory_occupation(body.get("tags"))
                return self._send(200, None)
            if path == "/resume_memory_occupation":
                engine.resume_memory_occupation(body.get("tags"))
                return self._send(200, None)
        return self._error(404, f"no route {method} {path}")

    def _generate(self, body: dict[str, Any]) -> None:
        ids = body.get("input_ids")
        if ids is None:
            return self._error(400, "Either text, input_ids or input_embeds should be provided.")
        batch = bool(ids) and isinstance(ids[0], list)
        prompts = ids if batch else [ids]
        if not prompts or any(not p for p in prompts):
            return self._error(400, "input_ids cannot be empty.")
        vocab = self.server.engine.config.vocab_size
        if any(not isinstance(t, int) or not 0 <= t < vocab for p in prompts for t in p):
            return self._error(400, f"input_ids must be integers in [0, {vocab})")
        params = dict(body.get("sampling_params") or {})
        seed = int(params.pop("sampling_seed", 0) or 0)
        out = self.server.engine.generate(prompts, params, return_logprob=bool(body.get("return_logprob")), seed=seed)
        tok = self.server.tokenizer
        for r in out:
            r["text"] = tok.decode(r["output_ids"], skip_special_tokens=False) if tok is not None else ""
            r["meta_info"]["response_sent_to_client_ts"] = time.time()
        self._send(200, out if batch else out[0])

    def _weights_by_name(self, body: dict[str, Any]) -> None:
        name = body.get("name")
        tensor = self.server.engine.named_tensors().get(name) if isinstance(name, str) else None
        if tensor is None:
            return self._error(400, "Get parameter by name failed")
        size = int(body.get("truncate_size", 100))
        self._send(200, tensor.detach().float()[:size].tolist())


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    engine: Engine
    tokenizer: Any
    lock: threading.Lock


class EngineServer:
    """Serve an `Engine` on 127.0.0.1 (an ephemeral port unless one is given)."""

    def __init__(self, engine: Engine, port: int = 0, tokenizer: Any = None) -> None:
        self.httpd = _Server(("127.0.0.1", port), _Handler)
        self.httpd.engine = engine
        self.httpd.tokenizer = tokenizer
        self.httpd.lock = threading.Lock()
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="engine-http", daemon=True)

    @property
    def port(self) -> int:
        return self.httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> EngineServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


class HttpEngineClient:
    """What the rollout manager calls when the engine is remote: one /generate request per batch."""

    def __init__(self, url: str, timeout: float = 120.0) -> None:
        import httpx

        self.client = httpx.Client(base_url=url, timeout=timeout)

    def generate(self, input_ids: list[list[int]], sampling_params: dict[str, Any], return_logprob: bool = True,
                 seed: int = 0) -> list[dict[str, Any]]:
        params = {**sampling_params, "sampling_seed": seed}
        resp = self.client.post("/generate", json={"input_ids": input_ids, "sampling_params": params,
                                                   "return_logprob": return_logprob})
        resp.raise_for_status()
        return resp.json()

    def close(self) -> None:
        self.client.close()
