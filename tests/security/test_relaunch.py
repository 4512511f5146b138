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
    assert refused.outcome in ("unavailable", "error") and "evil_arch" in (refused.summary + str(refused.error))
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
