"""The known-bug index: real entries, loading refusals, matching with `packaging`, the probe and the CLI."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest

from graph_support import write_catalog
from probes.known_bugs import KnownBugs
from triage.api import triage_run
from triage.cli import main
from triage.errors import Unavailable
from triage.executor import LocalExecutor
from triage.graph import load_graph
from triage.known_bugs import ENV, load_index
from triage.run import open_run

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "garbled-sglang-known-bug"


@pytest.fixture(autouse=True)
def no_user_files(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)


def run_with(tmp_path: Path, freeze: str, cmdline: str = "python3 train.py --hf-checkpoint /root/Qwen3-4B\n"):
    (tmp_path / "job.log").write_text("[2026-08-01 10:00:00] train.py:1 - start\n", encoding="utf-8")
    (tmp_path / "cmdline.txt").write_text(cmdline, encoding="utf-8")
    if freeze:
        (tmp_path / "pip_freeze.txt").write_text(freeze, encoding="utf-8")
    return open_run(str(tmp_path))


def probe(verdicts=("engine.version_regression",)) -> KnownBugs:
    return KnownBugs(KnownBugs.parse_params({"verdicts": list(verdicts)}, "test"))


def user_file(tmp_path: Path, entry: str) -> Path:
    path = tmp_path / "my_bugs.yaml"
    path.write_text("bugs:\n" + textwrap.indent(textwrap.dedent(entry), "  "), encoding="utf-8")
    return path


def versions_graph(tmp_path: Path):
    """A one-node playbook directory of our own: the known_bugs node as garbled.yaml would use it."""
    d = tmp_path / "playbooks"
    d.mkdir()
    (d / "entry.yaml").write_text(textwrap.dedent("""
        playbook: entry
        entry: versions
        nodes:
          versions:
            probe: known_bugs
            params: {verdicts: [engine.version_regression]}
            ask: Is the engine's version in a known-bad range?
            on:
              match: verdict:engine.version_regression
              no_match: verdict:inconclusive
              unavailable: verdict:inconclusive
              error: verdict:inconclusive
    """))
    write_catalog(d)
    return load_graph(d, probes={"known_bugs": KnownBugs})


GOOD_ENTRY = """\
- id: vllm-mine-1
  package: vllm
  affected: ">=0.8.0,<0.8.5"
  symptom: "our eval prompts come back empty"
  verdict: engine.version_regression
  thread: "acme/rl#12"
  url: "https://github.com/acme/rl/issues/12"
  fixed: "0.8.5"
"""


# --- the shipped index ----------------------------------------------------------------------


def test_shipped_index_has_real_entries_with_threads():
    index = load_index()
    assert len(index.bugs) >= 15
    packages = {b.package for b in index.bugs}
    assert {"sglang", "vllm", "megatron-core", "transformer-engine", "torch", "transformers", "deepspeed", "ray"} <= packages
    for b in index.bugs:
        repo, number = b.thread.split("#")
        assert re.fullmatch(rf"https://github\.com/{re.escape(repo)}/(issues|pull)/{number}", b.url), b.id
        assert len(b.symptom) > 40, b.id
        if b.fixed is None or "," in b.affected or b.affected.startswith(("<", ">")):
            assert b.note, f"{b.id}: a range the thread does not state exactly needs a note on how it was derived"


def test_index_ranges_are_matched_by_packaging(tmp_path):
    index = load_index()
    bug = next(b for b in index.bugs if b.id == "sglang-slime-1853")
    assert bug.specifiers.contains("0.5.9.post1", prereleases=True)
    assert not bug.specifiers.contains("0.5.10")
    run = run_with(tmp_path, "sglang==0.5.9.post1\n", "python3 train.py --hf-checkpoint /root/GLM-5\n")
    assert [m.bug.id for m in index.match(run.versions, "/root/GLM-5")] == ["sglang-slime-1853"]


def test_incompatible_pair_needs_both_versions(tmp_path):
    index = load_index()
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    both = run_with(tmp_path / "a", "transformers==4.45.2\ntrl==0.14.0\n")
    alone = run_with(tmp_path / "b", "transformers==4.45.2\n")
    pair = [m for m in index.match(both.versions) if m.bug.id == "transformers-trl-processing-class"]
    assert pair and pair[0].with_installed[0][:2] == ("trl", "0.14.0")
    assert not [m for m in index.match(alone.versions) if m.bug.id == "transformers-trl-processing-class"]


def test_model_filter(tmp_path):
    index = load_index()
    run = run_with(tmp_path, "sglang==0.5.9\n")
    assert not [m for m in index.match(run.versions, "/root/Qwen3-4B") if m.bug.id == "sglang-slime-1853"]
    unknown = [m for m in index.match(run.versions, None) if m.bug.id == "sglang-slime-1853"]
    assert unknown and unknown[0].model_checked is False  # matched, but the report says the model was not checked


# --- loading refusals ---------------------------------------------------------------------


@pytest.mark.parametrize("change, message", [
    (('affected: ">=0.8.0,<0.8.5"', 'affected: ">=0.8.0,<"'),
     "entry 'vllm-mine-1': affected '>=0.8.0,<' is not a version range"),
    (("package: vllm", "package: vllmm"), "entry 'vllm-mine-1': unknown package 'vllmm'"),
    (("verdict: engine.version_regression", "verdict: engine.gremlins"), "entry 'vllm-mine-1': verdict 'engine.gremlins'"),
    (('fixed: "0.8.5"', 'fixed: "soon"'), "entry 'vllm-mine-1': fixed 'soon' is not a version"),
    (('  url: "https://github.com/acme/rl/issues/12"\n', ""), "entry 'vllm-mine-1': url: Field required"),
])
def test_bad_user_file_is_refused_naming_the_entry(tmp_path, capsys, change, message):
    path = user_file(tmp_path, GOOD_ENTRY.replace(*change))
    assert main(["known-bugs", "--known-bugs", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and str(path) in err
    assert err.count("\n") == 1  # one line


def test_bad_user_file_stops_triage_run_before_any_probe(tmp_path, capsys):
    path = user_file(tmp_path, GOOD_ENTRY.replace("package: vllm", "package: nonsense"))
    assert main(["run", str(EXAMPLE), "--no-cache", "--known-bugs", str(path)]) == 2
    assert "unknown package 'nonsense'" in capsys.readouterr().err


def test_duplicate_id_is_refused(tmp_path, capsys):
    path = user_file(tmp_path, GOOD_ENTRY.replace("vllm-mine-1", "sglang-14178"))
    assert main(["known-bugs", "--known-bugs", str(path)]) == 2
    assert "'sglang-14178': duplicate id" in capsys.readouterr().err


# --- the CLI ----------------------------------------------------------------------------------


def test_known_bugs_lists_and_filters(capsys):
    assert main(["known-bugs", "--json", "--package", "sglang"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows and all(r["package"] == "sglang" for r in rows)
    assert {"id", "affected", "symptom", "verdict", "thread", "url"} <= set(rows[0])
    assert main(["known-bugs", "--package", "Megatron_Core"]) == 0
    assert "megatron-core-870" in capsys.readouterr().out


def test_user_entries_join_the_index(tmp_path, capsys, monkeypatch):
    path = user_file(tmp_path, GOOD_ENTRY)
    monkeypatch.setenv(ENV, str(path))
    assert main(["known-bugs", "--json", "--package", "vllm"]) == 0
    assert "vllm-mine-1" in [r["id"] for r in json.loads(capsys.readouterr().out)]


# --- the probe ------------------------------------------------------------------------------


def test_probe_match_names_entry_version_range_fix_and_thread():
    obs = probe().examine(open_run(str(EXAMPLE)))
    assert obs.outcome == "match"
    m = obs.evidence["matches"][0]
    assert (m["id"], m["package"], m["installed"], m["affected"], m["fixed"]) == (
        "sglang-slime-1853", "sglang", "0.5.9", ">=0.5.9,<0.5.10", "0.5.10")
    assert m["url"] == "https://github.com/THUDM/slime/issues/1853" and m["verdict"] == "engine.version_regression"
    assert m["read_at"].endswith("job.log:10")  # the `sglang==0.5.9` line of the pip freeze
    assert "0.5.10" in obs.summary and "THUDM/slime#1853" in obs.summary


def test_probe_no_match_and_other_verdicts(tmp_path):
    run = run_with(tmp_path, "sglang==0.5.10\ndeepspeed==0.13.5\n")
    obs = probe().examine(run)
    assert obs.outcome == "no_match"
    assert [m["id"] for m in obs.evidence["other_matches"]] == ["deepspeed-5242"]  # points at numerics.nan_grad


def test_probe_without_versions_is_unavailable(tmp_path):
    with pytest.raises(Unavailable) as exc:
        probe().examine(run_with(tmp_path, ""))
    assert exc.value.reason.startswith("no version information")
    assert "pip freeze" in (exc.value.command or "")


def test_user_file_changes_the_cache_key(tmp_path, monkeypatch):
    before = probe().params.index_digest  # type: ignore[attr-defined]
    monkeypatch.setenv(ENV, str(user_file(tmp_path, GOOD_ENTRY)))
    assert probe().params.index_digest != before  # type: ignore[attr-defined]


def test_probe_in_a_playbook_reaches_engine_version_regression(tmp_path):
    graph = versions_graph(tmp_path)
    report = triage_run(open_run(str(EXAMPLE)), graph, executor=LocalExecutor())
    assert report.root_cause.id == "engine.version_regression"
    step = report.path[0]
    assert step.evidence["matches"][0]["fixed"] == "0.5.10"


def test_run_without_versions_says_so_in_coverage_and_not_checked(tmp_path):
    (tmp_path / "run").mkdir()
    run = run_with(tmp_path / "run", "")
    report = triage_run(run, versions_graph(tmp_path), executor=LocalExecutor())
    assert report.root_cause.id == "inconclusive"  # no versions is never evidence
    assert report.coverage.versions_note.startswith("no version information")
    missing = report.not_checked[0]
    assert missing.artifact == "versions" and "pip freeze" in (missing.command or "")


def test_bad_file_on_the_environment_variable_is_refused_at_graph_load(tmp_path, monkeypatch):
    from triage.errors import BadInput

    monkeypatch.setenv(ENV, str(user_file(tmp_path, GOOD_ENTRY.replace('">=0.8.0,<0.8.5"', '"0.8"'))))
    with pytest.raises(BadInput) as exc:
        KnownBugs.parse_params({"verdicts": ["engine.version_regression"]}, "garbled.yaml: node 'known_bugs'")
    assert "entry 'vllm-mine-1': affected '0.8' is not a version range" in str(exc.value)


def test_triage_run_with_a_user_file_reports_its_entry(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(ENV, "")  # recorded, so the variable --known-bugs sets is undone after the test
    mine = GOOD_ENTRY.replace("vllm-mine-1", "sglang-mine-1").replace("package: vllm", "package: sglang").replace(
        '">=0.8.0,<0.8.5"', '"==0.5.9"').replace('fixed: "0.8.5"', 'fixed: "0.5.10"')
    path = user_file(tmp_path, mine)
    assert main(["run", str(EXAMPLE), "--json", "--no-cache", "--known-bugs", str(path)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["root_cause"]["id"] == "engine.version_regression"
    step = next(s for s in report["path"] if s["probe"] == "known_bugs")
    assert {m["id"] for m in step["evidence"]["matches"]} == {"sglang-slime-1853", "sglang-mine-1"}
    assert str(path) in step["evidence"]["index"]["files"]


def test_trl_in_process_vllm_with_the_v1_engine_is_a_known_pair(tmp_path):
    index = load_index()
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    bad = run_with(tmp_path / "a", "trl==0.15.1\nvllm==0.8.2\ntransformers==4.49.0\n")
    good = run_with(tmp_path / "b", "trl==0.16.0\nvllm==0.8.2\ntransformers==4.49.0\n")
    hit = [m for m in index.match(bad.versions) if m.bug.id == "trl-vllm-3115"]
    assert hit and hit[0].with_installed[0][:2] == ("vllm", "0.8.2")
    assert hit[0].bug.fixed == "0.16.0" and hit[0].bug.verdict == "deps.version_mismatch"
    assert not [m for m in index.match(good.versions) if m.bug.id == "trl-vllm-3115"]


def test_a_pasted_package_list_alone_reaches_the_known_pair(tmp_path):
    # what users paste as "System Info" in huggingface/trl issues: pins, nothing else
    (tmp_path / "job.log").write_text("trl==0.15.2\nvllm==0.8.1\n", encoding="utf-8")
    report = triage_run(open_run(str(tmp_path)), executor=LocalExecutor())
    assert report.root_cause.id == "deps.version_mismatch"
    step = next(s for s in report.path if s.probe == "known_bugs")
    assert step.evidence["matches"][0]["id"] == "trl-vllm-3115"


def test_a_package_list_alone_is_no_finding_where_its_entry_names_no_pair(tmp_path):
    # verl-project/verl#2031 pasted only verl's environment report: vLLM 0.8.3 broke GRPO rollouts in unsloth
    # (unslothai/unsloth#2298), a behaviour nothing of this run shows, so with no symptom it is no verdict
    (tmp_path / "job.log").write_text("vllm==0.8.3\nray==2.46.0\ntorch==2.6.0\n", encoding="utf-8")
    report = triage_run(open_run(str(tmp_path)), executor=LocalExecutor())
    assert report.root_cause.id == "inconclusive"
    step = next(s for s in report.path if s.probe == "known_bugs")
    assert step.outcome == "no_match" and "that name an incompatible pair" in step.summary
    assert step.evidence["other_matches"][0]["id"] == "vllm-unsloth-2298"
