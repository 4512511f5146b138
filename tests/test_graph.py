"""The playbook compiler refuses every kind of graph defect, naming the file and node."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest
import yaml

from graph_support import write_catalog
from triage.errors import PlaybookError
from triage.graph import load_graph
from triage.probe import Probe

ROOT = Path(__file__).resolve().parent.parent


class Classify(Probe):
    """Fake classifier for graph tests."""

    name = "classify"
    outcomes = ("bad", "fine")


class Check(Probe):
    """Fake check for graph tests."""

    name = "check"
    outcomes = ("yes", "no")


PROBES = {"classify": Classify, "check": Check}

GOOD_ENTRY = """
playbook: entry
entry: start
nodes:
  start:
    probe: classify
    on:
      bad: playbook:second
      fine: verdict:healthy
      unavailable: verdict:inconclusive
      error: verdict:inconclusive
"""
GOOD_SECOND = """
playbook: second
entry: look
nodes:
  look:
    probe: check
    on:
      yes: verdict:ckpt.not_loaded
      no: verdict:inconclusive
      unavailable: verdict:inconclusive
      error: verdict:inconclusive
"""


def make_dir(tmp_path: Path, **books: str) -> Path:
    d = tmp_path / "playbooks"
    d.mkdir()
    for name, text in books.items():
        (d / f"{name}.yaml").write_text(textwrap.dedent(text))
    write_catalog(d)
    return d


def refused(tmp_path: Path, **books: str) -> str:
    with pytest.raises(PlaybookError) as exc:
        load_graph(make_dir(tmp_path, **books), probes=PROBES)
    msg = str(exc.value)
    assert "\n" not in msg
    return msg


def test_good_graph_compiles_and_knows_reachable_verdicts(tmp_path):
    graph = load_graph(make_dir(tmp_path, entry=GOOD_ENTRY, second=GOOD_SECOND), probes=PROBES)
    assert graph.entry == "entry.start"
    assert graph.reachable_verdicts() == {"healthy", "inconclusive", "ckpt.not_loaded"}


def test_missing_outcome_edge_is_refused(tmp_path):
    msg = refused(tmp_path, entry=GOOD_ENTRY, second=GOOD_SECOND.replace("      no: verdict:inconclusive\n", ""))
    assert "second.yaml" in msg and "'look'" in msg and "'no'" in msg


def test_edge_for_undeclared_outcome_is_refused(tmp_path):
    msg = refused(tmp_path, entry=GOOD_ENTRY, second=GOOD_SECOND.replace("      no:", "      maybe: verdict:healthy\n      no:"))
    assert "'look'" in msg and "maybe" in msg


def test_unknown_node_is_refused(tmp_path):
    msg = refused(tmp_path, entry=GOOD_ENTRY, second=GOOD_SECOND.replace("yes: verdict:ckpt.not_loaded", "yes: nowhere"))
    assert "unknown node 'second.nowhere'" in msg and "'look'" in msg


def test_unknown_probe_is_refused(tmp_path):
    msg = refused(tmp_path, entry=GOOD_ENTRY, second=GOOD_SECOND.replace("probe: check", "probe: tea_leaves"))
    assert "unknown probe 'tea_leaves'" in msg and "'look'" in msg


def test_unknown_verdict_is_refused(tmp_path):
    msg = refused(tmp_path, entry=GOOD_ENTRY, second=GOOD_SECOND.replace("ckpt.not_loaded", "cosmic.rays"))
    assert "unknown verdict 'cosmic.rays'" in msg


def test_unknown_playbook_is_refused(tmp_path):
    msg = refused(tmp_path, entry=GOOD_ENTRY.replace("playbook:second", "playbook:third"), second=GOOD_SECOND)
    assert "unknown playbook 'third'" in msg


def test_cycle_is_refused(tmp_path):
    looping = GOOD_SECOND.replace("no: verdict:inconclusive", "no: entry.start")
    msg = refused(tmp_path, entry=GOOD_ENTRY, second=looping)
    assert "cycle" in msg and "entry.start" in msg


def test_unreachable_node_is_refused(tmp_path):
    orphan = GOOD_SECOND + (
        "  orphan:\n"
        "    probe: check\n"
        "    on: {yes: verdict:healthy, no: verdict:healthy, unavailable: verdict:healthy, error: verdict:healthy}\n"
    )
    msg = refused(tmp_path, entry=GOOD_ENTRY, second=orphan)
    assert "'orphan'" in msg and "unreachable" in msg


def test_malformed_yaml_and_missing_keys_are_refused(tmp_path):
    assert "not readable YAML" in refused(tmp_path, entry=GOOD_ENTRY, second="playbook: [unclosed")


def test_bad_params_are_refused(tmp_path):
    from pydantic import BaseModel, ConfigDict

    class TunedParams(BaseModel):
        model_config = ConfigDict(extra="forbid")
        threshold: float = 1.0

    class Tuned(Check):
        name = "check"
        Params = TunedParams  # type: ignore[assignment]

    d = make_dir(tmp_path, entry=GOOD_ENTRY, second=GOOD_SECOND.replace("probe: check", "probe: check\n    params: {threshhold: 2}"))
    with pytest.raises(PlaybookError, match="bad params for probe 'check': threshhold"):
        load_graph(d, probes={"classify": Classify, "check": Tuned})


def test_no_entry_playbook_is_refused(tmp_path):
    assert "no entry playbook" in refused(tmp_path, second=GOOD_SECOND)


# --- the evidence rule: a probe that could not run is never evidence ---------------------------


def with_evidence(d: Path, **evidence: list[str]) -> Path:
    """Set the catalog's evidence lists for the named verdicts (ids with '.' spelled '__')."""
    catalog = yaml.safe_load((d / "verdicts.yaml").read_text())
    for v in catalog["verdicts"]:
        key = v["id"].replace(".", "__")
        if key in evidence:
            v["evidence"] = evidence[key]
    (d / "verdicts.yaml").write_text(yaml.safe_dump(catalog, sort_keys=False))
    return d


def refused_with(d: Path) -> str:
    with pytest.raises(PlaybookError) as exc:
        load_graph(d, probes=PROBES)
    assert "\n" not in str(exc.value)
    return str(exc.value)


def test_unavailable_leading_to_healthy_is_refused(tmp_path):
    entry = GOOD_ENTRY.replace("unavailable: verdict:inconclusive", "unavailable: verdict:healthy", 1)
    msg = refused(tmp_path, entry=entry, second=GOOD_SECOND)
    assert "entry.yaml" in msg and "'start'" in msg and "'unavailable'" in msg and "'healthy'" in msg


def test_error_leading_to_a_fault_verdict_without_its_evidence_is_refused(tmp_path):
    second = GOOD_SECOND.replace("error: verdict:inconclusive", "error: verdict:ckpt.not_loaded")
    d = with_evidence(make_dir(tmp_path, entry=GOOD_ENTRY, second=second), ckpt__not_loaded=["check:yes"])
    msg = refused_with(d)
    assert "second.yaml" in msg and "'look'" in msg and "'error'" in msg and "ckpt.not_loaded" in msg
    assert "check:yes" in msg


def test_a_fault_verdict_reached_through_an_outcome_that_is_not_its_evidence_is_refused(tmp_path):
    second = GOOD_SECOND.replace("no: verdict:inconclusive", "no: verdict:ckpt.not_loaded")
    d = with_evidence(make_dir(tmp_path, entry=GOOD_ENTRY, second=second), ckpt__not_loaded=["check:yes"])
    msg = refused_with(d)
    assert "'look'" in msg and "'no'" in msg and "ckpt.not_loaded" in msg


def test_a_verdict_without_declared_evidence_is_refused(tmp_path):
    d = with_evidence(make_dir(tmp_path, entry=GOOD_ENTRY, second=GOOD_SECOND), ckpt__not_loaded=[])
    msg = refused_with(d)
    assert "'look'" in msg and "declares no evidence" in msg


def test_evidence_naming_an_unknown_outcome_is_refused(tmp_path):
    d = with_evidence(make_dir(tmp_path, entry=GOOD_ENTRY, second=GOOD_SECOND), ckpt__not_loaded=["check:perhaps"])
    msg = refused_with(d)
    assert "ckpt.not_loaded" in msg and "check:perhaps" in msg


def test_a_suspicion_naming_an_unknown_outcome_is_refused(tmp_path):
    d = make_dir(tmp_path, entry=GOOD_ENTRY, second=GOOD_SECOND)
    catalog = yaml.safe_load((d / "verdicts.yaml").read_text())
    catalog["verdicts"][-1]["suspected_by"] = ["check:perhaps"]
    (d / "verdicts.yaml").write_text(yaml.safe_dump(catalog, sort_keys=False))
    msg = refused_with(d)
    assert "suspected_by 'check:perhaps'" in msg and catalog["verdicts"][-1]["id"] in msg


THIRD = """
playbook: second
entry: look
nodes:
  look:
    probe: check
    on:
      yes: again
      no: again
      unavailable: again
      error: again
  again:
    probe: check
    on:
      yes: verdict:ckpt.not_loaded
      no: verdict:inconclusive
      unavailable: verdict:ckpt.not_loaded
      error: verdict:inconclusive
"""


def test_unavailable_to_a_fault_verdict_is_allowed_only_when_every_path_observed_its_evidence(tmp_path):
    # `again` is reached after check:yes on one path only: its unavailable edge cannot stand on it
    d = with_evidence(make_dir(tmp_path, entry=GOOD_ENTRY, second=THIRD),
                      ckpt__not_loaded=["check:yes + classify:bad"])
    msg = refused_with(d)
    assert "'again'" in msg and "'unavailable'" in msg and "a path here observes only" in msg
    # every path into `again` passed classify:bad: the fault's own evidence was seen before it
    d2 = tmp_path / "b"
    d2.mkdir()
    ok = with_evidence(make_dir(d2, entry=GOOD_ENTRY, second=THIRD), ckpt__not_loaded=["classify:bad"])
    graph = load_graph(ok, probes=PROBES)
    assert "ckpt.not_loaded" in graph.reachable_verdicts()


QUESTION = """
question: ask_twice
entry: first
exits: [seen, unknown]
nodes:
  first:
    probe: check
    on: {yes: exit:seen, no: verdict:ckpt.not_loaded, unavailable: exit:unknown, error: exit:unknown}
"""


def test_a_question_is_compiled_once_per_caller_and_its_exits_carry_no_evidence_when_it_could_not_run(tmp_path):
    entry = """
    playbook: entry
    entry: start
    nodes:
      start:
        probe: classify
        on: {bad: asked, fine: asked, unavailable: verdict:inconclusive, error: verdict:inconclusive}
      asked:
        question: ask_twice
        on: {seen: verdict:weights.missing, unknown: verdict:inconclusive}
    """
    d = with_evidence(make_dir(tmp_path, entry=entry, q_ask=QUESTION),
                      weights__missing=["ask_twice:seen"], ckpt__not_loaded=["check:no"])
    graph = load_graph(d, probes=PROBES)
    assert "entry.asked/first" in graph.nodes and graph.nodes["entry.asked/first"].question == "ask_twice"
    assert graph.nodes["entry.start"].edges["bad"] == "entry.asked/first"
    # an exit the question reaches only when its probe could not run is no evidence
    unknown_as_fault = entry.replace("unknown: verdict:inconclusive", "unknown: verdict:weights.missing")
    d2 = tmp_path / "c"
    d2.mkdir()
    d2 = with_evidence(make_dir(d2, entry=unknown_as_fault, q_ask=QUESTION),
                       weights__missing=["ask_twice:seen"], ckpt__not_loaded=["check:no"])
    msg = refused_with(d2)
    assert "q_ask.yaml" in msg and "'first'" in msg and "asked from entry.asked" in msg and "'unavailable'" in msg


def test_a_question_with_an_unmapped_exit_or_never_asked_is_refused(tmp_path):
    entry = GOOD_ENTRY.replace("bad: playbook:second", "bad: asked") + (
        "  asked:\n    question: ask_twice\n    on: {seen: verdict:inconclusive}\n")
    msg = refused(tmp_path, entry=entry, q_ask=QUESTION)
    assert "'asked'" in msg and "unknown" in msg and "ask_twice" in msg
    d = tmp_path / "d"
    d.mkdir()
    msg = refused(d, entry=GOOD_ENTRY, second=GOOD_SECOND, q_ask=QUESTION)
    assert "never asked" in msg


def test_the_shipped_playbooks_obey_the_evidence_rule():
    graph = load_graph()
    for node in graph.nodes.values():
        for outcome in ("unavailable", "error"):
            assert node.edges[outcome] != "verdict:healthy", node.id


def test_the_crash_batch_node_decides_without_its_arguments_only_because_the_refusal_was_seen(tmp_path):
    # crash.yaml's batch_arithmetic node sends `unavailable` / `error` to config.batch_size_mismatch: it
    # stands because every path into it observed error_signatures:batch_size_mismatch, the verdict's evidence
    from triage.graph import DEFAULT_DIR

    graph = load_graph()
    node = graph.nodes["crash.batch_arithmetic"]
    assert node.edges["unavailable"] == node.edges["error"] == "verdict:config.batch_size_mismatch"
    # reached any other way (here: after an unlisted error), the same edges are refused
    d = tmp_path / "playbooks"
    shutil.copytree(DEFAULT_DIR, d)
    crash = d / "crash.yaml"
    crash.write_text(crash.read_text().replace("      other_error: batch\n", "      other_error: batch_arithmetic\n"))
    with pytest.raises(PlaybookError) as exc:
        load_graph(d)
    assert "batch_arithmetic" in str(exc.value) and "config.batch_size_mismatch" in str(exc.value)
