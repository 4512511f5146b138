"""Nothing a run directory holds runs during a triage unless the user consents (--allow-relaunch).

The attack: a run directory with an `evil.py` that writes a marker file when imported,
and a command line that makes the relaunched job import it (`--custom-rm-path evil.rm`),
or names an entry script the run itself holds (`python3 train.py`, `python3 -m evil`),
or an environment (`.testbed/scenario.json`) for the relaunched job. Every Python process
started while a test runs leaves a file in `children/` (a `sitecustomize` put on the
PYTHONPATH), and every `subprocess.Popen` is recorded, so a child started from the run
cannot go unnoticed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from test_replay import make_tiny_run  # noqa: E402

from triage.executor import examine  # noqa: E402
from triage.graph import Node  # noqa: E402
from triage.run import open_run  # noqa: E402

TESTBED = "python3 -m triage.testbed.train"
SITECUSTOMIZE = """
import json, os, sys
d = os.environ.get("TRIAGE_TEST_CHILDREN")
if d:
    with open(os.path.join(d, str(os.getpid())), "w") as fh:
        json.dump({"argv": sys.argv, "env": sorted(os.environ)}, fh)
"""


@pytest.fixture
def watch(tmp_path, monkeypatch):
    """Records every Python child process (its argv and environment names) and every Popen."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    children = tmp_path / "children"
    children.mkdir()
    monkeypatch.setenv("PYTHONPATH", str(site))
    monkeypatch.setenv("TRIAGE_TEST_CHILDREN", str(children))
    popens: list[list[str]] = []
    real_init = subprocess.Popen.__init__

    def spy(self, args, *a, **kw):
        popens.append([str(x) for x in (args if isinstance(args, (list, tuple)) else [args])])
        real_init(self, args, *a, **kw)

    monkeypatch.setattr(subprocess.Popen, "__init__", spy)

    class Watch:
        def started(self) -> list[dict]:
            return [json.loads(p.read_text()) for p in sorted(children.iterdir())]

    w = Watch()
    w.popens = popens  # type: ignore[attr-defined]
    return w


def evil_run(root: Path, program: str = TESTBED, flags: str = "--custom-rm-path evil.rm") -> Path:
    """A tiny run whose command line makes its relaunched job import the run's own evil.py."""
    run = make_tiny_run(root, program=program, flags=flags)
    marker = root.parent / "MARKER"
    for name in ("evil.py", "train.py"):
        (run / name).write_text(f"open({str(marker)!r}, 'a').write({name!r} + '\\n')\nrm = None\n")
    (run / ".testbed").mkdir()
    (run / ".testbed" / "scenario.json").write_text(json.dumps({
        "argv": ["--custom-rm-path", "evil.rm"], "env": {"EVIL_VARIABLE": "1", "PYTHONSTARTUP": "evil.py"}}))
    return run


def node(probe: str, **params) -> Node:
    from triage.probe import registry

    cls = registry()[probe]
    return Node(id=f"t.{probe}", playbook="t", probe=probe, params=cls.Params(**params), ask="?", edges={})


def _examine(run_dir: Path, probe: str, allow: bool = False, **params):
    from triage.probe import registry

    run = open_run(str(run_dir))
    run.relaunch_allowed = allow
    return examine(node(probe, **params), registry()[probe], run)


def test_replay_without_consent_shows_the_command_and_starts_nothing(tmp_path, watch):
    run = evil_run(tmp_path / "run")
    finding = _examine(run, "replay_step", mode="launch")
    assert finding.outcome == "unavailable"
    assert finding.missing.artifact == "relaunch consent"
    assert "--allow-relaunch" in finding.missing.reason
    command = finding.missing.command
    assert "-m triage.testbed.train" in command and "--custom-rm-path evil.rm" in command
    assert "--load-debug-rollout-data" in command and "--start-rollout-id 0" in command
    assert not (tmp_path / "MARKER").exists()
    assert watch.started() == [] and watch.popens == []


def test_auto_replay_without_consent_replays_in_process_and_says_what_it_did_not_run(tmp_path, watch):
    finding = _examine(evil_run(tmp_path / "run"), "replay_step")
    assert finding.outcome == "deterministic_match", finding.summary
    assert finding.evidence["replay"] == "in_process"
    assert "--allow-relaunch" in finding.evidence["not_launched_because"]
    assert "--custom-rm-path evil.rm" in finding.evidence["not_launched_command"]
    assert not (tmp_path / "MARKER").exists()
    assert watch.started() == [] and watch.popens == []


def test_reduction_without_consent_shows_both_commands_and_starts_nothing(tmp_path, watch):
    run = evil_run(tmp_path / "run", flags="--custom-rm-path evil.rm --tensor-model-parallel-size 2 "
                                          "--actor-num-gpus-per-node 2")
    finding = _examine(run, "single_device_reduction")
    assert finding.outcome == "unavailable" and finding.missing.artifact == "relaunch consent"
    single, parallel = finding.missing.command.split("  and  ")
    assert "--tensor-model-parallel-size 1" in single and "--tensor-model-parallel-size 2" in parallel
    assert not (tmp_path / "MARKER").exists()
    assert watch.started() == [] and watch.popens == []


def test_an_entry_script_or_module_in_the_run_is_never_started_even_with_consent(tmp_path, watch):
    for i, program in enumerate(("python3 train.py", "python3 evil.py", "python3 -m evil")):
        finding = _examine(evil_run(tmp_path / f"r{i}" / "run", program=program), "replay_step", allow=True,
                           mode="launch")
        assert finding.outcome == "unavailable", (program, finding.summary)
        assert finding.missing.artifact == "framework", program
    assert not (tmp_path / "MARKER").exists()
    assert not any((tmp_path / f"r{i}" / "MARKER").exists() for i in range(3))
    assert watch.started() == [] and watch.popens == []


def test_a_plain_triage_run_starts_no_process_and_the_report_shows_the_command(tmp_path, watch, capsys):
    from triage.cli import main

    run = evil_run(tmp_path / "run")
    playbooks = _replay_graph(tmp_path / "playbooks")
    code = main(["--playbooks", str(playbooks), "run", str(run), "--json", "--no-cache"])
    report = json.loads(capsys.readouterr().out)
    assert code == 3  # inconclusive: the replay could not run
    (nc,) = report["not_checked"]
    assert nc["probe"] == "replay_step" and nc["artifact"] == "relaunch consent"
    assert "--allow-relaunch" in nc["reason"] and "--custom-rm-path evil.rm" in nc["command"]
    assert not (tmp_path / "MARKER").exists()
    assert watch.started() == [] and watch.popens == []


def test_with_allow_relaunch_the_job_is_relaunched_without_the_runs_environment(tmp_path, watch, capsys):
    from triage.cli import main

    run = evil_run(tmp_path / "run")
    playbooks = _replay_graph(tmp_path / "playbooks")
    main(["--playbooks", str(playbooks), "run", str(run), "--json", "--no-cache", "--allow-relaunch"])
    report = json.loads(capsys.readouterr().out)
    assert not any(n["artifact"] == "relaunch consent" for n in report["not_checked"])
    started = watch.started()
    assert started, "the consented relaunch started no process"
    assert any("triage.testbed.train" in " ".join(c["argv"]) or "train.py" in " ".join(c["argv"])
               for c in started) or any("triage.testbed.train" in " ".join(p) for p in watch.popens)
    for child in started:  # nothing from .testbed/scenario.json reached the job's environment
        assert "EVIL_VARIABLE" not in child["env"] and "PYTHONSTARTUP" not in child["env"]


def test_the_in_process_replay_ignores_a_hostile_auto_map(tmp_path, watch):
    """config.json's auto_map names a module of the run: transformers must not import it."""
    run = make_tiny_run(tmp_path / "run")
    marker = tmp_path / "AUTO_MAP_MARKER"
    config = json.loads((run / "hf" / "config.json").read_text())
    config["auto_map"] = {"AutoConfig": "evil_model.EvilConfig", "AutoModelForCausalLM": "evil_model.EvilModel"}
    (run / "hf" / "config.json").write_text(json.dumps(config))
    (run / "hf" / "evil_model.py").write_text(
        f"open({str(marker)!r}, 'w').write('imported')\n"
        "from transformers import Qwen2Config as EvilConfig, Qwen2ForCausalLM as EvilModel\n")
    finding = _examine(run, "replay_step")
    assert finding.outcome == "deterministic_match", finding.summary
    assert finding.evidence["replay"] == "in_process" and "Qwen2ForCausalLM" in finding.evidence["how"]
    from triage.engines.local import LocalEngine

    LocalEngine(run / "hf")._load()  # the isolated rollout's local engine: the same rule
    # A model type transformers does not know, with only the run's code to build it: refused, not imported.
    config["model_type"] = "evil_arch"
    (run / "hf" / "config.json").write_text(json.dumps(config))
    refused = _examine(run, "replay_step", mode="in_process")
    assert refused.outcome == "unavailable" and "evil_arch" in refused.summary and "auto_map" in refused.summary
    assert not marker.exists()
    assert watch.started() == []


def _replay_graph(where: Path) -> Path:
    """A playbooks directory whose only node is replay_step in launch mode."""
    where.mkdir()
    (where / "verdicts.yaml").write_text(
        "verdicts:\n"
        "  - {id: healthy, title: Healthy, explanation: x, remedy: x, evidence: ['replay_step:deterministic_match']}\n"
        "  - {id: inconclusive, title: Could not decide, explanation: x, remedy: x}\n")
    outcomes = ("deterministic_match", "nondeterministic", "kl_nonzero", "differs_from_log", "unavailable", "error")
    edges = "\n".join(f"      {o}: verdict:inconclusive" for o in outcomes)
    (where / "entry.yaml").write_text(
        "playbook: entry\ntitle: replay only\nentry: replay\nnodes:\n  replay:\n    probe: replay_step\n"
        f"    params: {{mode: launch}}\n    ask: Does the replay reproduce the step?\n    on:\n{edges}\n")
    return where


class _Permission:
    """A probe that only reports whether it was let relaunch (declared or not)."""

    outcomes = ("permitted", "refused")

    def examine(self, run):
        from triage.replay.consent import relaunch_permitted

        return self.observe("permitted" if relaunch_permitted() else "refused", "-")


def _bare_run(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "job.log").write_text("[2026-01-01 00:00:00] train.py:1 - start\n")
    return root


def _permission_probe(declares: bool):
    from triage.probe import Probe

    return type("PermissionProbe", (_Permission, Probe), {"name": "permission", "executes_run_code": declares})


@pytest.mark.parametrize("declares, allowed, expected", [
    (True, True, "permitted"), (True, False, "refused"), (False, True, "refused"), (False, False, "refused")])
def test_the_executor_grants_relaunch_only_to_a_declaring_probe_with_consent(tmp_path, declares, allowed, expected):
    cls = _permission_probe(declares)
    run = open_run(str(_bare_run(tmp_path / "run")))
    run.relaunch_allowed = allowed
    nd = Node(id="t.permission", playbook="t", probe="permission", params=cls.Params(), ask="?", edges={})
    assert examine(nd, cls, run).outcome == expected


@pytest.mark.parametrize("active, configured, expected", [
    (True, True, "permitted"), (False, True, "refused"), (True, False, "refused"), (False, False, "refused")])
def test_the_service_relaunches_only_when_configured_and_an_allowed_user_asked(tmp_path, active, configured, expected):
    """`active` is only ever set for an allowed user's request (slash command --active or the button)."""
    from triage.executor import LocalExecutor
    from triage.service.queue import BudgetExecutor

    cls = _permission_probe(True)
    run = open_run(str(_bare_run(tmp_path / "run")))
    run.relaunch_allowed = True  # whatever a run or a caller set: the service decides from its own consent
    executor = BudgetExecutor(LocalExecutor(), run_ref="run", active=active, budget_s=30,
                              relaunch_configured=configured)
    nd = Node(id="t.permission", playbook="t", probe="permission", params=cls.Params(), ask="?", edges={})
    assert executor.run_probe(nd, cls, run).outcome == expected


def test_a_static_service_triage_says_how_to_allow_the_relaunch(tmp_path):
    from triage.executor import LocalExecutor
    from triage.probe import registry
    from triage.service.queue import BudgetExecutor

    run_dir = evil_run(tmp_path / "run")
    for configured, says in ((True, "Run active probes"), (False, "TRIAGE_ALLOW_RELAUNCH")):
        executor = BudgetExecutor(LocalExecutor(), run_ref="run", active=False, budget_s=30,
                                  relaunch_configured=configured)
        finding = executor.run_probe(node("single_device_reduction"), registry()["single_device_reduction"],
                                     open_run(str(run_dir)))
        assert finding.outcome == "unavailable"
        # not parallel: it needs no relaunch to say so
        assert "not parallel" in finding.summary
    par = evil_run(tmp_path / "par", flags="--custom-rm-path evil.rm --tensor-model-parallel-size 2")
    for configured, says in ((True, "Run active probes"), (False, "TRIAGE_ALLOW_RELAUNCH")):
        executor = BudgetExecutor(LocalExecutor(), run_ref="par", active=False, budget_s=30,
                                  relaunch_configured=configured)
        finding = executor.run_probe(node("single_device_reduction"), registry()["single_device_reduction"],
                                     open_run(str(par)))
        assert finding.missing.artifact == "relaunch consent" and says in finding.missing.reason
    assert not (tmp_path / "MARKER").exists()


def test_triage_probes_shows_what_each_probe_does_beyond_reading(capsys):
    from triage.cli import main

    assert main(["probes", "--json"]) == 0
    probes = {p["name"]: p for p in json.loads(capsys.readouterr().out)}
    runs_code = {n for n, p in probes.items() if p["executes_run_code"]}
    contacts = {n for n, p in probes.items() if p["contacts_engine"]}
    assert {"replay_step", "single_device_reduction"} <= runs_code
    assert "tensor_anomaly" not in runs_code and "symptom" not in runs_code
    assert {"engine_model", "live_weights", "isolated_rollout"} <= contacts
    assert not any(p["writes_to_engine"] for p in probes.values())  # none sends a write today
    assert main(["--width", "200", "probes"]) == 0
    table = capsys.readouterr().out
    assert "beyond reading" in table and "executes run code" in table and "contacts engine" in table
