"""The walker: findings recorded, unavailable and crashing probes followed on their edges,
and the report built from the walk (confidence, ruled out, not checked)."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

from triage.api import triage_run
import pytest

from triage.errors import CorruptArtifact, CorruptCheckpoint, Unavailable
from graph_support import write_catalog
from triage.coverage import confidence_factor
from triage.graph import load_graph
from triage.probe import Probe
from triage.run import open_run

ROOT = Path(__file__).resolve().parent.parent


class Classify(Probe):
    """Says the run is garbled."""

    name = "classify"
    outcomes = ("garbled", "fine")

    def examine(self, run):
        return self.observe("garbled", "rollouts are garbled from rollout 0", confidence=0.9, garble_score=0.93)


class NeedsEngine(Probe):
    """Needs an engine dump that the run does not have."""

    name = "needs_engine"
    outcomes = ("match", "shifted")
    needs = ("engine_weights",)

    def examine(self, run):  # pragma: no cover - never reached without the dump
        raise AssertionError("must not run without its needs")


class Missing(Probe):
    """Raises Unavailable itself."""

    name = "missing"
    outcomes = ("yes", "no")

    def examine(self, run):
        raise Unavailable("rollout_dump", "no rollout dump", "rerun with --dump-details DIR")


class Crashes(Probe):
    """Crashes with a bug."""

    name = "crashes"
    outcomes = ("yes", "no")

    def examine(self, run):
        return {}["boom"]


class Corrupt(Probe):
    """Finds a corrupt checkpoint shard: evidence about the run, so a finding."""

    name = "corrupt"
    outcomes = ("yes", "no")

    def examine(self, run):
        raise CorruptCheckpoint(run.root / "ckpt.pt", "truncated at byte 12")


class BadDump(Probe):
    """Meets a dump the user's run cannot provide safely: the triage stops."""

    name = "bad_dump"
    outcomes = ("yes", "no")

    def examine(self, run):
        raise CorruptArtifact(run.root / "rollout_data" / "0.pt", "truncated")


class Base(Probe):
    """Decides."""

    name = "base"
    outcomes = ("base", "instruct")

    def examine(self, run):
        return self.observe("base", "tokenizer has no chat template", confidence=0.8, file="tokenizer_config.json")


PROBES = {p.name: p for p in (Classify, NeedsEngine, Missing, Crashes, Corrupt, Base, BadDump)}

BOOK = """
playbook: entry
entry: classify
nodes:
  classify:
    probe: classify
    ask: What is wrong?
    on: {garbled: weights, fine: verdict:healthy, unavailable: verdict:inconclusive, error: verdict:inconclusive}
  weights:
    probe: needs_engine
    ask: Does the engine hold the trained weights?
    on: {match: dumps, shifted: verdict:weights.pp_layer_offset, unavailable: dumps, error: dumps}
  dumps:
    probe: missing
    on: {yes: verdict:data.bad_sample, no: crash, unavailable: crash, error: crash}
  crash:
    probe: crashes
    on: {yes: verdict:numerics.overflow, no: corrupt, unavailable: corrupt, error: corrupt}
  corrupt:
    probe: corrupt
    on: {yes: verdict:weights.missing, no: base, unavailable: base, error: base}
  base:
    probe: {probe}
    on: {probe_edges}
"""


def graph_for(tmp_path, last_probe="base"):
    d = tmp_path / "books"
    d.mkdir()
    edges = {
        "bad_dump": "{yes: verdict:healthy, no: verdict:healthy, unavailable: verdict:inconclusive, error: verdict:inconclusive}",
    }.get(last_probe, "{base: verdict:model.base_not_instruct, instruct: verdict:inconclusive, "
                      "unavailable: verdict:inconclusive, error: verdict:inconclusive}")
    text = textwrap.dedent(BOOK).replace("{probe}", last_probe).replace("{probe_edges}", edges)
    (d / "entry.yaml").write_text(text)
    write_catalog(d)
    return load_graph(d, probes=PROBES)


def run_dir(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    (d / "job.log").write_text("[2026-08-01 10:00:00] train.py:1 - start\n")
    return open_run(str(d))


def test_walk_goes_on_past_unavailable_and_crashing_probes(tmp_path):
    report = triage_run(run_dir(tmp_path), graph_for(tmp_path))
    assert report.root_cause.id == "model.base_not_instruct"
    outcomes = [(s.probe, s.outcome) for s in report.path]
    assert outcomes == [
        ("classify", "garbled"), ("needs_engine", "unavailable"), ("missing", "unavailable"),
        ("crashes", "error"), ("corrupt", "error"), ("base", "base"),
    ]
    crash = report.path[3]
    assert "KeyError" in crash.error and "crashes" in crash.summary
    assert "ckpt.pt" in report.path[4].summary and "truncated" in report.path[4].summary
    # four steps could not run: the deciding finding's 0.8 is lowered for each
    unread = confidence_factor(report.coverage)  # what looked like evidence but was not understood
    assert report.root_cause.confidence == round(round(0.8 * 0.9 ** 4, 3) * unread, 3)


def test_not_checked_names_the_artifact_and_the_command(tmp_path):
    report = triage_run(run_dir(tmp_path), graph_for(tmp_path))
    by_probe = {n.probe: n for n in report.not_checked}
    assert by_probe["needs_engine"].artifact == "engine_weights"
    assert "--engine" in by_probe["needs_engine"].command
    assert by_probe["missing"].artifact == "rollout_dump"
    assert by_probe["missing"].command == "rerun with --dump-details DIR"


def test_ruled_out_comes_from_branches_not_taken(tmp_path):
    report = triage_run(run_dir(tmp_path), graph_for(tmp_path))
    ruled = {r.verdict: r for r in report.ruled_out}
    # classify said garbled, not fine: 'healthy' is never listed as ruled out; nothing else was excluded there
    assert "healthy" not in ruled
    assert "model.base_not_instruct" not in ruled
    # unavailable / error findings rule nothing out
    assert "weights.pp_layer_offset" not in ruled and "numerics.overflow" not in ruled


def test_inconclusive_lists_what_is_missing(tmp_path):
    class Instruct(Base):
        """Decides instruct."""

        name = "instruct_only"

        def examine(self, run):
            return self.observe("instruct", "chat template present")

    PROBES["instruct_only"] = Instruct
    try:
        report = triage_run(run_dir(tmp_path), graph_for(tmp_path, last_probe="instruct_only"))
    finally:
        del PROBES["instruct_only"]
    assert report.root_cause.id == "inconclusive"
    assert report.root_cause.confidence == 0.0
    assert "needs_engine" in report.root_cause.explanation and "engine" in report.root_cause.explanation
    assert "model.base_not_instruct" in {r.verdict for r in report.ruled_out}


def test_bad_input_met_by_a_probe_stops_the_triage(tmp_path):
    with pytest.raises(CorruptArtifact, match="0.pt: truncated"):
        triage_run(run_dir(tmp_path), graph_for(tmp_path, last_probe="bad_dump"))


def test_corrupt_checkpoint_file_is_a_finding_but_a_corrupt_dump_is_bad_input(tmp_path):
    from triage.executor import examine
    from triage.graph import Node

    class ReadsShard(Probe):
        """Reads a truncated checkpoint shard."""

        name = "reads_shard"
        outcomes = ("yes", "no")

        def examine(self, run):
            raise CorruptArtifact(run.root / "ckpt" / "iter_0000010" / "__0_0.distcp", "truncated: 100 of 4096 bytes")

    run = run_dir(tmp_path)
    node = Node("x.shard", "x", "reads_shard", ReadsShard.Params(), "?", {})
    finding = examine(node, ReadsShard, run)
    assert finding.outcome == "error"
    assert "__0_0.distcp" in finding.summary and "truncated" in finding.summary
    with pytest.raises(CorruptArtifact):
        examine(node, BadDump, run)
