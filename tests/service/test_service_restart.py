"""`triage serve` as its own process, killed (SIGKILL) in the middle of a triage and started again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import service_graph
import service_runs as runs
from service_support import CHANNEL, HOOK_SECRET, SECRET, signed_path
from triage.service.security import sign_slack
from triage.service.testing import SlackStandIn, free_port, slash_command_body, wait_for

ROOT = Path(__file__).resolve().parents[2]


class ServeProcess:
    """`python -m triage.service serve ...` on 127.0.0.1, its JSON log lines kept in a file."""

    def __init__(self, tmp_path: Path, runs_root: Path, slack: SlackStandIn) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = tmp_path / "serve.log"
        self.args = [
            sys.executable, "-m", "triage.service", "serve", "--host", "127.0.0.1", "--port", str(self.port),
            "--runs-root", str(runs_root), "--db", str(tmp_path / "triage.db"), "--concurrency", "1",
            "--time-budget", "60", "--triage-function", "service_graph:triage",
        ]
        self.env = {
            **os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(Path(__file__).parent), str(Path(__file__).parent.parent)]),
            "SLACK_SIGNING_SECRET": SECRET, "SLACK_BOT_TOKEN": "xoxb-test", "SLACK_API_URL": slack.url,
            "TRIAGE_WEBHOOK_SECRET": HOOK_SECRET, "TRIAGE_ALLOWED_CHANNELS": CHANNEL,
        }
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child holds it
        self.proc = subprocess.Popen(self.args, env=self.env, stdout=log, stderr=log, cwd=ROOT)
        log.close()

        def up() -> bool:
            assert self.proc is not None and self.proc.poll() is None, self.log_path.read_text()[-2000:]
            try:
                return httpx.get(self.url + "/healthz", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(up, timeout=20, interval=0.1)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def log_lines(self) -> list[dict]:
        out = []
        for line in self.log_path.read_text().splitlines():
            if line.startswith("{"):
                out.append(json.loads(line))
        return out


@pytest.fixture
def serve(tmp_path: Path, runs_root: Path, slack: SlackStandIn) -> Iterator[ServeProcess]:
    proc = ServeProcess(tmp_path, runs_root, slack)
    try:
        yield proc
    finally:
        proc.stop()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _kind(message: dict) -> str | None:
    return ((message.get("metadata") or {}).get("event_payload") or {}).get("kind")


def test_killing_the_server_mid_triage_loses_nothing_and_posts_nothing_twice(serve, slack, runs_root):
    run = runs.slime_oom_run(runs_root / "oom7")
    (run / "hold.json").write_text('{"seconds": 1.0}')
    serve.start()
    body = slash_command_body("oom7")
    started = time.perf_counter()
    ack = httpx.post(serve.url + "/slack/commands", content=body, headers=sign_slack(SECRET, body), timeout=10)
    assert ack.status_code == 200 and time.perf_counter() - started < 3.0
    anchor = wait_for(lambda: next(iter(slack.top_level(CHANNEL)), None))
    wait_for(lambda: (run / "hold.started").exists())  # the triage is under way, in a worker process
    worker_pid = int((run / "hold.started").read_text().split()[0])
    serve.kill()
    assert slack.thread(anchor["ts"]) == []  # killed before the report
    wait_for(lambda: not _alive(worker_pid), timeout=15)  # the worker died with the server

    serve.start()
    report = wait_for(lambda: next((m for m in slack.thread(anchor["ts"]) if _kind(m) == "report"), None), timeout=15)
    request_id = report["metadata"]["event_payload"]["request_id"]
    assert anchor["metadata"]["event_payload"]["request_id"] == request_id
    mine = [m for m in slack.messages if (m.get("metadata") or {}).get("event_payload", {}).get("request_id") == request_id]
    assert sorted(_kind(m) for m in mine) == ["anchor", "report"]  # each posted exactly once
    assert len(slack.posts()) == 2
    assert "`memory.max_tokens_per_gpu`" in json.dumps(report["blocks"])
    # Two attempts of one triage: the killed one and the resumed one.
    assert service_graph.calls(run) == 2 and len((run / "hold.started").read_text().splitlines()) == 2
    triage_id = json.loads(next(b for b in report["blocks"] if b["type"] == "actions")["elements"][0]["value"])["triage"]
    state = httpx.get(serve.url + signed_path(triage_id)).json()
    assert state["state"] == "done" and state["attempt"] == 2 and state["requests"][0]["id"] == request_id

    # JSON log lines, each about this request naming its request id and run id.
    lines = serve.log_lines()
    events = {line["event"] for line in lines}
    assert {"request_recorded", "triage_started", "triage_finished", "posted", "service_started"} <= events
    about = [line for line in lines if line["event"] in ("request_recorded", "triage_started", "triage_finished", "posted")]
    assert about and all(line["request_id"] == request_id and line["run_id"] == "oom7" for line in about)
    restarted = [line for line in lines if line["event"] == "service_started"][-1]
    assert restarted["requeued"] == 1
