"""An engine the run names is contacted only when allow-listed; the user's --engine is consent.

The attack: a run's triage.yaml names `engines: [http://127.0.0.1:PORT]`, an address the
user never chose (in production an internal service). A loopback HTTP server stands at
that address and records every request: without `--engine-allow` it must receive none,
and the report must say the engine was not contacted.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from triage.cli import main

MODEL = "/models/served-model"
# SGLang's answers, as python/sglang/srt/entrypoints/http_server.py gives them (sgl-project/sglang)
ANSWERS = {
    "/get_model_info": {"model_path": MODEL, "tokenizer_path": MODEL, "is_generation": True},
    "/get_server_info": {"model_path": MODEL, "version": "0.5.23"},
}


class Recorder(BaseHTTPRequestHandler):
    requests: list[str]

    def _answer(self) -> None:
        self.requests.append(f"{self.command} {self.path}")
        body = json.dumps(ANSWERS.get(self.path.split("?")[0], {})).encode()
        self.send_response(200 if self.path.split("?")[0] in ANSWERS else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *args) -> None:  # quiet
        pass


@pytest.fixture
def engine() -> Iterator[tuple[str, list[str]]]:
    """A loopback HTTP server on a free port: (its URL, the requests it received)."""
    seen: list[str] = []
    handler = type("Handler", (Recorder,), {"requests": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def run_naming(root: Path, url: str) -> Path:
    """A run whose manifest names an engine (and whose command line names the model it should serve)."""
    root.mkdir(parents=True)
    (root / "cmdline.txt").write_text("python3 train.py --hf-checkpoint /models/configured-model\n")
    (root / "job.log").write_text("[2026-01-01 00:00:00] train.py:1 - start\n")
    (root / "triage.yaml").write_text(f"framework: slime\nengines: [{url}]\nlogs: [job.log]\ncommand_line: cmdline.txt\n")
    return root


def playbooks(where: Path) -> Path:
    """engine_model, then live_weights: the two probes that ask a run's engines."""
    where.mkdir()
    (where / "verdicts.yaml").write_text(
        "verdicts:\n"
        "  - {id: healthy, title: Healthy, explanation: x, remedy: x, evidence: ['engine_model:same_model']}\n"
        "  - {id: inconclusive, title: Could not decide, explanation: x, remedy: x}\n")
    from probes.live_weights import LiveWeights

    live = "\n".join(f"      {o}: verdict:inconclusive" for o in LiveWeights.all_outcomes())
    (where / "entry.yaml").write_text(
        "playbook: entry\ntitle: engines\nentry: model\nnodes:\n"
        "  model:\n    probe: engine_model\n    ask: Which model does the engine serve?\n    on:\n"
        "      same_model: live\n      different_model: live\n      unavailable: live\n      error: live\n"
        f"  live:\n    probe: live_weights\n    ask: Does the engine hold the trainer's weights?\n    on:\n{live}\n")
    return where


def triage(run: Path, tmp_path: Path, capsys, *flags: str) -> tuple[int, dict]:
    code = main(["--playbooks", str(playbooks(tmp_path / f"pb{len(list(tmp_path.glob('pb*')))}")),
                 "run", str(run), "--json", "--no-cache", *flags])
    out = capsys.readouterr().out
    return code, (json.loads(out) if out.strip() else {})


def test_an_engine_the_run_names_is_not_contacted_and_the_report_says_so(tmp_path, engine, capsys, monkeypatch):
    monkeypatch.delenv("TRIAGE_ENGINE_ALLOW", raising=False)
    url, seen = engine
    code, report = triage(run_naming(tmp_path / "run", url), tmp_path, capsys)
    assert seen == []
    assert code == 3
    assert any(url in n and "not contacted" in n and "--engine-allow" in n for n in report["run"]["notes"])
    live = next(n for n in report["not_checked"] if n["probe"] == "live_weights")
    assert url in live["reason"] and "allow-list" in live["reason"]
    assert live["command"].startswith(f"--engine-allow {url.removeprefix('http://')}")
    assert "served-model" not in json.dumps(report)  # nothing the address would have answered


def test_an_allow_listed_engine_is_contacted(tmp_path, engine, capsys, monkeypatch):
    monkeypatch.delenv("TRIAGE_ENGINE_ALLOW", raising=False)
    url, seen = engine
    code, report = triage(run_naming(tmp_path / "run", url), tmp_path, capsys,
                          "--engine-allow", url.removeprefix("http://"))
    assert "GET /get_model_info" in seen
    model = next(s for s in report["path"] if s["probe"] == "engine_model")
    assert model["outcome"] == "different_model" and MODEL in model["summary"]
    assert not any("not contacted" in n for n in report["run"]["notes"])


def test_the_allow_list_comes_from_the_environment_too(tmp_path, engine, capsys, monkeypatch):
    url, seen = engine
    monkeypatch.setenv("TRIAGE_ENGINE_ALLOW", f"10.0.0.9:30000, {url.removeprefix('http://')}")
    triage(run_naming(tmp_path / "run", url), tmp_path, capsys)
    assert "GET /get_model_info" in seen


def test_another_port_on_the_same_host_is_not_allowed(tmp_path, engine, capsys, monkeypatch):
    monkeypatch.delenv("TRIAGE_ENGINE_ALLOW", raising=False)
    url, seen = engine
    triage(run_naming(tmp_path / "run", url), tmp_path, capsys, "--engine-allow", "127.0.0.1:1")
    assert seen == []


def test_an_engine_given_with_engine_is_the_users_consent(tmp_path, engine, capsys, monkeypatch):
    monkeypatch.delenv("TRIAGE_ENGINE_ALLOW", raising=False)
    url, seen = engine
    run = run_naming(tmp_path / "run", "http://10.255.255.1:30000")  # the run names another address
    code, report = triage(run, tmp_path, capsys, "--engine", url)
    assert "GET /get_model_info" in seen
    assert any("10.255.255.1:30000" in n and "not contacted" in n for n in report["run"]["notes"])


@pytest.mark.parametrize("bad", ["not an address", "127.0.0.1", "http://:80"])
def test_a_bad_allow_list_entry_is_a_one_line_error(tmp_path, capsys, bad, monkeypatch):
    monkeypatch.delenv("TRIAGE_ENGINE_ALLOW", raising=False)
    run = run_naming(tmp_path / "run", "http://127.0.0.1:9")
    code = main(["run", str(run), "--json", "--engine-allow", bad])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("triage: error: --engine-allow")


def test_the_service_contacts_only_engines_on_its_allow_list(tmp_path, engine, monkeypatch):
    """The service's executor consents to nothing but its configuration's allow-list."""
    from triage.api import triage_run
    from triage.executor import LocalExecutor
    from triage.graph import load_graph
    from triage.run import open_run
    from triage.service.queue import BudgetExecutor

    url, seen = engine
    run_dir = run_naming(tmp_path / "run", url)
    graph = load_graph(playbooks(tmp_path / "pb"))
    monkeypatch.setenv("TRIAGE_ENGINE_ALLOW", url.removeprefix("http://"))  # the CLI's variable: not the service's
    executor = BudgetExecutor(LocalExecutor(), run_ref="run", active=True, budget_s=30, engine_allow=frozenset())
    report = triage_run(open_run(str(run_dir)), graph, executor)
    assert seen == []
    assert any("not contacted" in n for n in report.run.notes)
    allowed = BudgetExecutor(LocalExecutor(), run_ref="run", active=False, budget_s=30,
                             engine_allow=frozenset({url.removeprefix("http://")}))
    triage_run(open_run(str(run_dir)), graph, allowed)
    assert "GET /get_model_info" in seen


def test_service_configuration_reads_the_engine_allow_list(tmp_path):
    from triage.errors import BadInput
    from triage.service.config import ServiceConfig

    cfg = ServiceConfig.from_env({"TRIAGE_RUNS_ROOT": str(tmp_path), "TRIAGE_ENGINE_ALLOW": "10.0.0.5:30000,h:1"})
    assert cfg.engine_allow == frozenset({"10.0.0.5:30000", "h:1"})
    with pytest.raises(BadInput, match="TRIAGE_ENGINE_ALLOW"):
        ServiceConfig.from_env({"TRIAGE_RUNS_ROOT": str(tmp_path), "TRIAGE_ENGINE_ALLOW": "nohost"})
