"""The playbook compiler refuses every kind of graph defect, naming the file and node."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

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
    shutil.copy(ROOT / "playbooks" / "verdicts.yaml", d / "verdicts.yaml")
    for name, text in books.items():
        (d / f"{name}.yaml").write_text(textwrap.dedent(text))
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
