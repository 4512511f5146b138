"""Playbooks compiled into one validated decision graph.

A playbook is a YAML file under `playbooks/`::

    playbook: garbled_rollouts
    title: Garbled rollouts
    entry: checkpoint
    nodes:
      checkpoint:
        probe: checkpoint_integrity
        params: {}
        ask: Did Megatron load the checkpoint the run names?
        on:
          intact: weights                       # a node of this playbook
          tracker_missing: verdict:ckpt.not_loaded
          unavailable: playbook:metrics         # another playbook's entry node
          error: metrics.classify               # a node of another playbook
          ...

A *question* is a sub-graph asked in several playbooks (the engine's weights, from a dump
or a live engine) and defined once, in a file with ``question:`` instead of ``playbook:``.
It lists its ``exits``; its nodes lead to ``exit:<name>``, to verdicts, or to its own
nodes. A playbook node asks it with ``question: <name>`` and maps every exit to a target::

      weights:
        question: engine_weights
        on: {match: template, value_mismatch: verdict:weights.name_mapping, unknown: template}

Each call is compiled as its own copy of the question's nodes (ids ``<caller>/<node>``),
so the graph stays acyclic and every path can be checked.

Loading refuses, naming the file and node: a declared outcome without an edge, an edge
for an outcome the probe does not declare, an unknown node / playbook / question / probe /
verdict, a cycle, a node unreachable from the entry playbook, a path that does not end in
a verdict, and any edge that breaks the evidence rule (`check_evidence`): a probe that
could not run (`unavailable`, `error`) never leads to `healthy`, and a path reaches a
fault verdict only through a finding its catalog entry names as evidence.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import re

import networkx as nx
import yaml

from triage.catalog import HEALTHY, INCONCLUSIVE, Verdict, load_catalog
from triage.errors import PlaybookError
from triage.finding import IMPLICIT_OUTCOMES
from triage.probe import Probe, registry

ENTRY_PLAYBOOK = "entry"
VERDICT_PREFIX = "verdict:"
PLAYBOOK_PREFIX = "playbook:"
EXIT_PREFIX = "exit:"
QUESTION_SEP = "/"  # <caller node id>/<question node>
DEFAULT_DIR = Path(__file__).resolve().parent.parent / "playbooks"


@dataclass(frozen=True)
class Node:
    id: str  # "<playbook>.<node>"
    playbook: str
    probe: str
    params: Any  # the probe's validated Params model
    ask: str  # the question this node answers, shown in reports
    edges: Mapping[str, str]  # outcome -> node id or "verdict:<id>"
    question: str | None = None  # the question this node belongs to, when it is part of one
    exits: Mapping[str, str] = field(default_factory=dict)  # outcome -> the question's exit it takes


@dataclass
class Playbook:
    name: str
    title: str
    description: str
    entry: str  # node id
    path: Path
    nodes: list[str] = field(default_factory=list)


@dataclass
class Question:
    name: str
    title: str
    description: str
    entry: str  # local node name
    exits: tuple[str, ...]
    path: Path
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)  # local name -> raw spec

    @property
    def probe_names(self) -> frozenset[str]:
        """The probes the question's nodes run (whose answers its exits carry)."""
        return frozenset(str(spec.get("probe")) for spec in self.nodes.values())


@dataclass
class DecisionGraph:
    graph: nx.DiGraph
    nodes: dict[str, Node]
    playbooks: dict[str, Playbook]
    catalog: Mapping[str, Verdict]
    probes: Mapping[str, type[Probe]]
    questions: dict[str, Question] = field(default_factory=dict)

    @property
    def entry(self) -> str:
        return self.playbooks[ENTRY_PLAYBOOK].entry

    @cached_property
    def suspects(self) -> dict[tuple[str, str], list[str]]:
        """Each finding ("probe", "outcome") the catalog lists under `suspected_by:`, and the verdicts it makes
        suspects of, in catalog order."""
        out: dict[tuple[str, str], list[str]] = {}
        for vid, verdict in self.catalog.items():
            for token in sorted(suspicions(verdict, self.probes, self.questions)):
                out.setdefault(token, []).append(vid)
        return out

    def verdicts_reachable_from(self, node_or_target: str) -> set[str]:
        if node_or_target.startswith(VERDICT_PREFIX):
            return {node_or_target[len(VERDICT_PREFIX):]}
        reach = nx.descendants(self.graph, node_or_target)
        return {n[len(VERDICT_PREFIX):] for n in reach if n.startswith(VERDICT_PREFIX)}

    def verdicts_nearest_first(self, node_or_target: str) -> list[str]:
        """The verdicts reachable from a node, nearest first, and at equal distance in the order the
        playbooks list the edges (each node's expected outcome first): breadth-first over the graph."""
        if node_or_target.startswith(VERDICT_PREFIX):
            return [node_or_target[len(VERDICT_PREFIX):]]
        seen = {node_or_target}
        queue = deque([node_or_target])
        out: list[str] = []
        while queue:
            for nxt in self.graph.successors(queue.popleft()):
                if nxt in seen:
                    continue
                seen.add(nxt)
                if nxt.startswith(VERDICT_PREFIX):
                    out.append(nxt[len(VERDICT_PREFIX):])
                else:
                    queue.append(nxt)
        return out

    def reachable_verdicts(self) -> set[str]:
        return self.verdicts_reachable_from(self.entry)


class _PlaybookLoader(yaml.SafeLoader):
    """YAML 1.2 booleans only, so `on:`, `yes` and `no` stay strings (outcome names, the edges key)."""


_PlaybookLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_PlaybookLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


def _fail(path: Path, msg: str) -> PlaybookError:
    return PlaybookError(f"{path.name}: {msg}")


def _read_playbook(path: Path) -> dict[str, Any]:
    try:
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=_PlaybookLoader)  # noqa: S506 - a SafeLoader subclass
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise _fail(path, f"not readable YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(raw, dict):
        raise _fail(path, "a playbook must be a mapping with 'playbook', 'entry' and 'nodes'")
    kind = "question" if "question" in raw else "playbook"
    for key in (kind, "entry", "nodes") + (("exits",) if kind == "question" else ()):
        if key not in raw:
            raise _fail(path, f"missing '{key}'")
    if not isinstance(raw["nodes"], dict) or not raw["nodes"]:
        raise _fail(path, "'nodes' must be a non-empty mapping")
    allowed = {kind, "title", "description", "entry", "nodes"} | ({"exits"} if kind == "question" else set())
    unknown = set(raw) - allowed
    if unknown:
        raise _fail(path, f"unknown keys {sorted(unknown)}")
    if kind == "question" and (not isinstance(raw["exits"], list) or not raw["exits"]
                               or not all(isinstance(e, str) for e in raw["exits"])):
        raise _fail(path, "'exits' must be a non-empty list of exit names")
    return raw


def _resolve_target(target: Any, playbook: str, path: Path, node: str, outcome: str) -> str:
    if not isinstance(target, str) or not target:
        raise _fail(path, f"node {node!r}: edge for outcome {outcome!r} must name a node, playbook:<name> or verdict:<id>")
    if target.startswith(VERDICT_PREFIX) or target.startswith(PLAYBOOK_PREFIX):
        return target
    return target if "." in target else f"{playbook}.{target}"


def _parse_node_spec(path: Path, local: str, spec: Any, allow_question: bool) -> None:
    if not isinstance(spec, dict):
        raise _fail(path, f"node {local!r} must be a mapping with 'probe' (or 'question') and 'on'")
    extra = set(spec) - {"probe", "question", "params", "ask", "on"}
    if extra:
        raise _fail(path, f"node {local!r}: unknown keys {sorted(extra)}")
    if "question" in spec:
        if not allow_question:
            raise _fail(path, f"node {local!r}: a question's node cannot ask another question")
        if "probe" in spec or "params" in spec:
            raise _fail(path, f"node {local!r}: a node asks either a probe or a question, not both")
    if not isinstance(spec.get("on"), dict):
        what = f"question {spec['question']!r}" if "question" in spec else f"probe {spec.get('probe')!r}"
        raise _fail(path, f"node {local!r}: 'on' must map each outcome of {what} to a target")


def load_graph(directory: Path | None = None, probes: Mapping[str, type[Probe]] | None = None) -> DecisionGraph:
    """Compile every playbook and question in `directory` with the verdict catalog into one graph."""
    directory = directory or DEFAULT_DIR
    probes = probes if probes is not None else registry()
    catalog_path = directory / "verdicts.yaml"
    if not catalog_path.is_file():
        raise PlaybookError(f"{directory}: no verdicts.yaml (the verdict catalog)")
    catalog = load_catalog(catalog_path)
    files = sorted(p for p in directory.glob("*.yaml") if p.name != "verdicts.yaml")
    if not files:
        raise PlaybookError(f"{directory}: no playbooks (*.yaml)")

    playbooks: dict[str, Playbook] = {}
    questions: dict[str, Question] = {}
    raws: list[tuple[Path, dict[str, Any]]] = []
    for path in files:
        raw = _read_playbook(path)
        if "question" in raw:
            name = str(raw["question"])
            if name in questions or name in playbooks:
                raise _fail(path, f"question {name!r} is defined twice")
            if str(raw["entry"]) not in raw["nodes"]:
                raise _fail(path, f"entry node {raw['entry']!r} is not one of its nodes")
            for local, spec in raw["nodes"].items():
                _parse_node_spec(path, local, spec, allow_question=False)
            questions[name] = Question(name, str(raw.get("title", name)), str(raw.get("description", "")),
                                       str(raw["entry"]), tuple(raw["exits"]), path, dict(raw["nodes"]))
            continue
        name = str(raw["playbook"])
        if name in playbooks or name in questions:
            raise _fail(path, f"playbook {name!r} is also defined in {playbooks[name].path.name if name in playbooks else 'a question'}")
        if str(raw["entry"]) not in raw["nodes"]:
            raise _fail(path, f"entry node {raw['entry']!r} is not one of its nodes")
        playbooks[name] = Playbook(name, str(raw.get("title", name)), str(raw.get("description", "")),
                                   f"{name}.{raw['entry']}", path)
        raws.append((path, raw))
    if ENTRY_PLAYBOOK not in playbooks:
        raise PlaybookError(f"{directory}: no entry playbook (a file with 'playbook: {ENTRY_PLAYBOOK}')")

    # node id -> (file, local name for messages, playbook, probe, params, ask, question, raw edges, resolver)
    drafts: dict[str, dict[str, Any]] = {}
    aliases: dict[str, str] = {}  # a node that asks a question -> the first node of its copy
    asked: set[str] = set()

    def add_probe_node(node_id: str, path: Path, where: str, book: str, spec: dict[str, Any],
                       question: str | None, targets: dict[str, str], exits: dict[str, str]) -> None:
        probe_name = spec.get("probe")
        if probe_name not in probes:
            raise _fail(path, f"{where}: unknown probe {probe_name!r} (registered: {', '.join(probes)})")
        probe_cls = probes[probe_name]
        params = probe_cls.parse_params(spec.get("params"), f"{path.name}: {where}")
        declared = probe_cls.all_outcomes()
        missing = [o for o in declared if o not in spec["on"]]
        if missing:
            raise _fail(path, f"{where}: no edge for outcome(s) {missing} of probe {probe_name!r}")
        undeclared = [o for o in spec["on"] if o not in declared]
        if undeclared:
            raise _fail(path, f"{where}: probe {probe_name!r} has no outcome(s) {undeclared} (it declares {list(declared)})")
        drafts[node_id] = dict(path=path, where=where, playbook=book, probe=probe_name, params=params,
                               ask=str(spec.get("ask", probe_cls.description())), question=question,
                               targets=targets, exits=exits)

    for path, raw in raws:
        book_name = str(raw["playbook"])
        book = playbooks[book_name]
        for local, spec in raw["nodes"].items():
            node_id = f"{book_name}.{local}"
            where = f"node {local!r}"
            _parse_node_spec(path, local, spec, allow_question=True)
            book.nodes.append(node_id)
            if "question" not in spec:
                targets = {o: _resolve_target(t, book_name, path, local, o) for o, t in spec["on"].items()}
                add_probe_node(node_id, path, where, book_name, spec, None, targets, {})
                continue
            qname = str(spec["question"])
            if qname not in questions:
                raise _fail(path, f"{where}: unknown question {qname!r} (questions: {', '.join(sorted(questions)) or 'none'})")
            q = questions[qname]
            asked.add(qname)
            missing = [e for e in q.exits if e not in spec["on"]]
            if missing:
                raise _fail(path, f"{where}: no edge for exit(s) {missing} of question {qname!r}")
            undeclared = [e for e in spec["on"] if e not in q.exits]
            if undeclared:
                raise _fail(path, f"{where}: question {qname!r} has no exit(s) {undeclared} (it declares {list(q.exits)})")
            exit_targets = {e: _resolve_target(t, book_name, path, local, e) for e, t in spec["on"].items()}
            aliases[node_id] = f"{node_id}{QUESTION_SEP}{q.entry}"
            for qlocal, qspec in q.nodes.items():
                qwhere = f"node {qlocal!r} (asked from {node_id})"
                targets: dict[str, str] = {}
                exits: dict[str, str] = {}
                for outcome, t in qspec["on"].items():
                    if not isinstance(t, str) or not t:
                        raise _fail(q.path, f"{qwhere}: edge for outcome {outcome!r} must name a node, exit:<name> or verdict:<id>")
                    if t.startswith(EXIT_PREFIX):
                        exit_name = t[len(EXIT_PREFIX):]
                        if exit_name not in q.exits:
                            raise _fail(q.path, f"{qwhere}: outcome {outcome!r} leads to unknown exit {exit_name!r} (exits: {list(q.exits)})")
                        targets[outcome], exits[outcome] = exit_targets[exit_name], exit_name
                    elif t.startswith(VERDICT_PREFIX):
                        targets[outcome] = t
                    elif t in q.nodes:
                        targets[outcome] = f"{node_id}{QUESTION_SEP}{t}"
                    else:
                        raise _fail(q.path, f"{qwhere}: outcome {outcome!r} leads to {t!r}, which is not a node of question {qname!r}, an exit or a verdict")
                add_probe_node(f"{node_id}{QUESTION_SEP}{qlocal}", q.path, qwhere, book_name, qspec, qname, targets, exits)
    for qname, q in questions.items():
        if qname not in asked:
            raise _fail(q.path, f"question {qname!r} is never asked by a playbook")

    graph = nx.DiGraph()
    nodes: dict[str, Node] = {}
    for node_id, d in drafts.items():
        graph.add_node(node_id, kind="node", playbook=d["playbook"], probe=d["probe"])
    for node_id, d in drafts.items():
        destinations: dict[str, str] = {}
        for outcome, target in d["targets"].items():
            where = d["where"]
            if target.startswith(VERDICT_PREFIX):
                vid = target[len(VERDICT_PREFIX):]
                if vid not in catalog:
                    raise _fail(d["path"], f"{where}: outcome {outcome!r} leads to unknown verdict {vid!r}")
                graph.add_node(target, kind="verdict")
                dest = target
            elif target.startswith(PLAYBOOK_PREFIX):
                book_name = target[len(PLAYBOOK_PREFIX):]
                if book_name not in playbooks:
                    raise _fail(d["path"], f"{where}: outcome {outcome!r} leads to unknown playbook {book_name!r}")
                dest = playbooks[book_name].entry
            else:
                dest = target
            dest = aliases.get(dest, dest)
            if not dest.startswith(VERDICT_PREFIX) and dest not in drafts:
                raise _fail(d["path"], f"{where}: outcome {outcome!r} leads to unknown node {target!r}")
            # several outcomes may share a target; keep them all on one edge
            if graph.has_edge(node_id, dest):
                graph.edges[node_id, dest]["outcomes"].append(outcome)
            else:
                graph.add_edge(node_id, dest, outcomes=[outcome])
            destinations[outcome] = dest
        nodes[node_id] = Node(node_id, d["playbook"], d["probe"], d["params"], d["ask"], destinations,
                              d["question"], d["exits"])
    for book in playbooks.values():
        book.entry = aliases.get(book.entry, book.entry)
        book.nodes = [x for b in book.nodes
                      for x in ([b] if b in drafts else sorted(y for y in drafts if y.startswith(b + QUESTION_SEP)))]

    def where_of(node_id: str) -> tuple[Path, str]:
        return drafts[node_id]["path"], drafts[node_id]["where"]

    try:
        cycle = nx.find_cycle(graph)
    except nx.NetworkXNoCycle:
        cycle = None
    if cycle:
        loop = " -> ".join(u for u, _ in cycle) + f" -> {cycle[0][0]}"
        path, where = where_of(cycle[0][0])
        raise _fail(path, f"{where} is on a cycle: {loop}")

    entry = playbooks[ENTRY_PLAYBOOK].entry
    reachable = nx.descendants(graph, entry) | {entry}
    for node_id in nodes:
        if node_id not in reachable:
            path, where = where_of(node_id)
            raise _fail(path, f"{where} is unreachable from the entry playbook")
    for n in graph.nodes:
        if graph.out_degree(n) == 0 and not n.startswith(VERDICT_PREFIX):
            path, where = where_of(n)
            raise _fail(path, f"{where}: a path ends here without a verdict")

    result = DecisionGraph(graph=graph, nodes=nodes, playbooks=playbooks, catalog=catalog, probes=probes,
                           questions=questions)
    check_evidence(result, where_of)
    return result


Evidence = frozenset[tuple[str, str]]


def _finding_token(verdict: Verdict, token: str, key: str, probes: Mapping[str, type[Probe]],
                   questions: Mapping[str, Question], catalog_path: str) -> tuple[str, str]:
    """One catalog "probe:outcome" (or "question:exit") entry, checked against what the probe declares."""
    name, _, outcome = token.strip().partition(":")
    if name in probes:
        known = probes[name].outcomes
    elif name in questions:
        known = questions[name].exits
    else:
        raise PlaybookError(f"{catalog_path}: verdict {verdict.id!r}: {key} {token.strip()!r} names no probe or question")
    if outcome not in known:
        raise PlaybookError(f"{catalog_path}: verdict {verdict.id!r}: {key} {token.strip()!r}: {name!r} has no outcome {outcome!r} (it declares {list(known)})")
    return name, outcome


def evidence_alternatives(verdict: Verdict, probes: Mapping[str, type[Probe]],
                          questions: Mapping[str, Question], catalog_path: str = "verdicts.yaml") -> list[Evidence]:
    """A verdict's `evidence:` entries, each a set of (probe or question, outcome) that must all be seen."""
    return [frozenset(_finding_token(verdict, token, "evidence", probes, questions, catalog_path)
                      for token in entry.split("+"))
            for entry in verdict.evidence]


def suspicions(verdict: Verdict, probes: Mapping[str, type[Probe]], questions: Mapping[str, Question],
               catalog_path: str = "verdicts.yaml") -> set[tuple[str, str]]:
    """A verdict's `suspected_by:` findings: each makes it a candidate when the walk cannot decide, none decides it."""
    return {_finding_token(verdict, token, "suspected_by", probes, questions, catalog_path)
            for token in verdict.suspected_by}


def edge_tokens(node: Node, outcome: str, earlier: frozenset[tuple[str, str]] | set[tuple[str, str]] = frozenset(),
                question_probes: frozenset[str] = frozenset()) -> set[tuple[str, str]]:
    """What a finding with this outcome observed: nothing when the probe could not run.

    Leaving a question through an exit observes `question:exit` when this probe answered,
    or when a probe of the question answered that exit's name earlier on the path (a
    follow-up check that could not run leaves the question's answer standing).
    """
    exit_name = node.exits.get(outcome) if node.question else None
    answered = outcome not in IMPLICIT_OUTCOMES or any((p, exit_name) in earlier for p in question_probes)
    tokens = set() if outcome in IMPLICIT_OUTCOMES else {(node.probe, outcome)}
    if exit_name is not None and answered:
        tokens.add((node.question, exit_name))
    return tokens


def check_evidence(graph: DecisionGraph, where_of: Callable[[str], tuple[Path, str]]) -> None:
    """The evidence rule of ROOT_CAUSES.md, checked on every path of the compiled graph.

    A probe that could not run is never evidence: its edge may lead to another node or to
    `inconclusive`, never to `healthy`; and every path that reaches a fault verdict (or
    `healthy`) passes through a finding its catalog entry lists under `evidence:`.
    """
    alternatives = {vid: evidence_alternatives(v, graph.probes, graph.questions) for vid, v in graph.catalog.items()}
    graph.suspects  # a misspelt suspicion fails the compile, not a report
    relevant = {token for alts in alternatives.values() for alt in alts for token in alt}
    # node -> the distinct sets of evidence tokens observed along the paths that reach it
    seen: dict[str, set[frozenset[tuple[str, str]]]] = {graph.entry: {frozenset()}}
    probes_of = {name: q.probe_names for name, q in graph.questions.items()}
    order = [n for n in nx.topological_sort(graph.graph) if not n.startswith(VERDICT_PREFIX)]
    for node_id in order:
        if node_id not in seen:
            continue
        node = graph.nodes[node_id]
        own = probes_of.get(node.question or "", frozenset())
        for outcome, dest in node.edges.items():
            observed = {paths | frozenset(edge_tokens(node, outcome, paths, own) & relevant) for paths in seen[node_id]}
            if not dest.startswith(VERDICT_PREFIX):
                seen.setdefault(dest, set()).update(observed)
                continue
            vid = dest[len(VERDICT_PREFIX):]
            if vid == INCONCLUSIVE:
                continue
            path, where = where_of(node_id)
            could_not_run = outcome in IMPLICIT_OUTCOMES
            if vid == HEALTHY and could_not_run:
                raise _fail(path, f"{where}: outcome {outcome!r} (the probe could not run) leads to verdict 'healthy': a check that could not run is never evidence of health")
            alts = alternatives[vid]
            if not alts:
                raise _fail(path, f"{where}: outcome {outcome!r} leads to verdict {vid!r}, which declares no evidence (add 'evidence:' to its catalog entry)")
            short = next((o for o in sorted(observed, key=len) if not any(alt <= o for alt in alts)), None)
            if short is not None:
                wanted = " or ".join(" + ".join(f"{a}:{b}" for a, b in sorted(alt)) for alt in alts)
                had = ", ".join(f"{a}:{b}" for a, b in sorted(short)) or "none of it"
                because = "(the probe could not run) " if could_not_run else ""
                raise _fail(path, f"{where}: outcome {outcome!r} {because}leads to verdict {vid!r}, but a path here observes only "
                                  f"({had}), not its evidence ({wanted})")
