"""Engines that are not there, and an engine that dies while a probe talks to it: findings, never crashes."""

from __future__ import annotations

import re

import httpx
import pytest
import sglang_scenarios as sc
from sglang_kit import free_port

import probes.live_weights as lw
from probes.isolated_rollout import IsolatedRollout
from probes.live_weights import LiveWeights
from triage.executor import examine
from triage.graph import Node
from triage.run import open_run


def node(probe, **params) -> Node:
    return Node(f"garbled.{probe.name}", "garbled", probe.name, probe.Params(**params), "", {})


def test_an_engine_that_is_not_there_is_unavailable_with_the_address_tried(weights, tmp_path):
    url = f"http://127.0.0.1:{free_port()}"
    root = sc.garbled_run(tmp_path / "run", checkpoint=weights["qwen2/megatron"], base_dir=weights["qwen2/base"],
                          dump=weights["qwen2/dump"])
    run = open_run(str(root))
    run.engines.append(url)
    for probe in (LiveWeights, IsolatedRollout):
        f = examine(node(probe), probe, run)
        assert f.outcome == "unavailable", f.summary
        assert url in f.summary and "connection refused" in f.summary
        assert f.missing is not None and "--engine http://HOST:PORT" in f.missing.command


class KillOnRequest(httpx.HTTPTransport):
    """Forwards requests to the real server, and SIGKILLs the server just before request number `at`."""

    def __init__(self, server, at: int) -> None:
        super().__init__()
        self.server, self.at, self.sent = server, at, 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent += 1
        if self.sent == self.at:
            self.server.kill()
        return super().handle_request(request)


def test_a_server_killed_mid_probe_is_an_error_finding(servers, weights, tmp_path, monkeypatch):
    llama = servers.get("model-llama")
    root = sc.garbled_run(tmp_path / "run", checkpoint=weights["llama/megatron"], base_dir=weights["llama/base"])
    run = open_run(str(root))
    run.engines.append(llama.url)
    transport = KillOnRequest(llama, at=8)  # server info, model info, then get_weights_by_name one tensor at a time
    real = lw.connect
    monkeypatch.setattr(lw, "connect", lambda url, r, **kw: real(url, r, transport=transport, backoff_s=0.2, **kw))
    try:
        f = examine(node(LiveWeights, via="by_name"), LiveWeights, run)
    finally:
        servers.forget("model-llama")  # dead now: a later test that needs it starts a fresh one
        llama.stop()
    assert f.outcome == "error", f.summary
    assert f.summary.startswith(llama.url), f.summary
    # 7 answered; the 8th finds the server gone: refused (tried 3 times) or cut off on a kept-alive connection
    assert re.search(r"(the server went away.*after 10 requests|closed the connection.*after 8 requests)", f.summary)
    assert f.error == f.summary and "\n" not in f.summary
    assert not llama.alive()


@pytest.mark.parametrize("probe", [LiveWeights, IsolatedRollout])
def test_a_garbage_address_is_unavailable(probe, weights, tmp_path):
    root = sc.garbled_run(tmp_path / "run", checkpoint=weights["qwen2/megatron"], base_dir=weights["qwen2/base"],
                          dump=weights["qwen2/dump"])
    run = open_run(str(root))
    run.engines.append("ftp://nowhere")
    f = examine(node(probe), probe, run)
    assert f.outcome == "unavailable" and "ftp://nowhere" in f.summary
