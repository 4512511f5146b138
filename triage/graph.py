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

Loading refuses, naming the file and node: a declared outcome without an edge, an edge
for an outcome the probe does not declare, an unknown node / playbook / probe / verdict,
a cycle, a node unreachable from the entry playbook, a path that does not end in a verdict.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import re

import networkx as nx
import yaml

from triage.catalog import Verdict, load_catalog
from triage.errors import PlaybookError
from triage.probe import Probe, registry

ENTRY_PLAYBOOK = "entry"
VERDICT_PREFIX = "verdict:"
PLAYBOOK_PREFIX = "playbook:"
DEFAULT_DIR = Path(__file__).resolve().parent.parent / "playbooks"


@dataclass(frozen=True)
class Node:
    id: str  # "<playbook>.<node>"
    playbook: str
    probe: str
    params: Any  # the probe's validated Params model
    ask: str  # the question this node answers, shown in reports
    edges: Mapping[str, str]  # outcome -> node id or "verdict:<id>"


@dataclass
class Playbook:
    name: str
    title: str
    description: str
    entry: str  # node id
    path: Path
    nodes: list[str] = field(default_factory=list)


@dataclass
class DecisionGraph:
    graph: nx.DiGraph
    nodes: dict[str, Node]
    playbooks: dict[str, Playbook]
    catalog: Mapping[str, Verdict]
    probes: Mapping[str, type[Probe]]

    @property
    def entry(self) -> str:
        return self.playbooks[ENTRY_PLAYBOOK].entry

    def verdicts_reachable_from(self, node_or_target: str) -> set[str]:
        if node_or_target.startswith(VERDICT_PREFIX):
            return {node_or_target[len(VERDICT_PREFIX):]}
        reach = nx.descendants(self.graph, node_or_target)
        return {n[len(VERDICT_PREFIX):] for n in reach if n.startswith(VERDICT_PREFIX)}

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
    for key in ("playbook", "entry", "nodes"):
        if key not in raw:
            raise _fail(path, f"missing '{key}'")
    if not isinstance(raw["nodes"], dict) or not raw["nodes"]:
        raise _fail(path, "'nodes' must be a non-empty mapping")
    unknown = set(raw) - {"playbook", "title", "description", "entry", "nodes"}
    if unknown:
        raise _fail(path, f"unknown keys {sorted(unknown)}")
    return raw


def _resolve_target(target: Any, playbook: str, path: Path, node: str, outcome: str) -> str:
    if not isinstance(target, str) or not target:
        raise _fail(path, f"node {node!r}: edge for outcome {outcome!r} must name a node, playbook:<name> or verdict:<id>")
    if target.startswith(VERDICT_PREFIX) or target.startswith(PLAYBOOK_PREFIX):
        return target
    return target if "." in target else f"{playbook}.{target}"


def load_graph(directory: Path | None = None, probes: Mapping[str, type[Probe]] | None = None) -> DecisionGraph:
    """Compile every playbook in `directory` with the verdict catalog into one graph."""
    directory = directory or DEFAULT_DIR
    probes = probes if probes is not None else registry()
    catalog_path = directory / "verdicts.yaml"
    if not catalog_path.is_file():
        raise PlaybookError(f"{directory}: no verdicts.yaml (the verdict catalog)")
    catalog = load_catalog(catalog_path)
    graph = nx.DiGraph()
    nodes: dict[str, Node] = {}
    playbooks: dict[str, Playbook] = {}
    pending: list[tuple[Path, str, str, str]] = []  # (path, node id, outcome, raw target)
    drafts: dict[str, tuple[str, str, Any, str]] = {}  # node id -> (playbook, probe, params, ask)
    destinations: dict[str, dict[str, str]] = {}  # node id -> outcome -> resolved node id / verdict

    files = sorted(p for p in directory.glob("*.yaml") if p.name != "verdicts.yaml")
    if not files:
        raise PlaybookError(f"{directory}: no playbooks (*.yaml)")
    for path in files:
        raw = _read_playbook(path)
        name = str(raw["playbook"])
        if name in playbooks:
            raise _fail(path, f"playbook {name!r} is also defined in {playbooks[name].path.name}")
        if str(raw["entry"]) not in raw["nodes"]:
            raise _fail(path, f"entry node {raw['entry']!r} is not one of its nodes")
        book = Playbook(name, str(raw.get("title", name)), str(raw.get("description", "")), f"{name}.{raw['entry']}", path)
        playbooks[name] = book
        for local, spec in raw["nodes"].items():
            node_id = f"{name}.{local}"
            if not isinstance(spec, dict):
                raise _fail(path, f"node {local!r} must be a mapping with 'probe' and 'on'")
            extra = set(spec) - {"probe", "params", "ask", "on"}
            if extra:
                raise _fail(path, f"node {local!r}: unknown keys {sorted(extra)}")
            probe_name = spec.get("probe")
            if probe_name not in probes:
                raise _fail(path, f"node {local!r}: unknown probe {probe_name!r} (registered: {', '.join(probes)})")
            probe_cls = probes[probe_name]
            params = probe_cls.parse_params(spec.get("params"), f"{path.name}: node {local!r}")
            edges_raw = spec.get("on")
            if not isinstance(edges_raw, dict):
                raise _fail(path, f"node {local!r}: 'on' must map each outcome of {probe_name!r} to a target")
            declared = probe_cls.all_outcomes()
            missing = [o for o in declared if o not in edges_raw]
            if missing:
                raise _fail(path, f"node {local!r}: no edge for outcome(s) {missing} of probe {probe_name!r}")
            undeclared = [o for o in edges_raw if o not in declared]
            if undeclared:
                raise _fail(path, f"node {local!r}: probe {probe_name!r} has no outcome(s) {undeclared} (it declares {list(declared)})")
            edges = {o: _resolve_target(t, name, path, local, o) for o, t in edges_raw.items()}
            drafts[node_id] = (name, probe_name, params, str(spec.get("ask", probe_cls.description())))
            book.nodes.append(node_id)
            graph.add_node(node_id, kind="node", playbook=name, probe=probe_name)
            for outcome, target in edges.items():
                pending.append((path, node_id, outcome, target))

    if ENTRY_PLAYBOOK not in playbooks:
        raise PlaybookError(f"{directory}: no entry playbook (a file with 'playbook: {ENTRY_PLAYBOOK}')")

    for path, node_id, outcome, target in pending:
        local = node_id.split(".", 1)[1]
        if target.startswith(VERDICT_PREFIX):
            vid = target[len(VERDICT_PREFIX):]
            if vid not in catalog:
                raise _fail(path, f"node {local!r}: outcome {outcome!r} leads to unknown verdict {vid!r}")
            graph.add_node(target, kind="verdict")
            dest = target
        elif target.startswith(PLAYBOOK_PREFIX):
            book_name = target[len(PLAYBOOK_PREFIX):]
            if book_name not in playbooks:
                raise _fail(path, f"node {local!r}: outcome {outcome!r} leads to unknown playbook {book_name!r}")
            dest = playbooks[book_name].entry
        else:
            if target not in drafts:
                raise _fail(path, f"node {local!r}: outcome {outcome!r} leads to unknown node {target!r}")
            dest = target
        # several outcomes may share a target; keep them all on one edge
        if graph.has_edge(node_id, dest):
            graph.edges[node_id, dest]["outcomes"].append(outcome)
        else:
            graph.add_edge(node_id, dest, outcomes=[outcome])
        destinations.setdefault(node_id, {})[outcome] = dest

    for node_id, (book_name, probe_name, params, ask) in drafts.items():
        nodes[node_id] = Node(node_id, book_name, probe_name, params, ask, destinations[node_id])

    try:
        cycle = nx.find_cycle(graph)
    except nx.NetworkXNoCycle:
        cycle = None
    if cycle:
        loop = " -> ".join(u for u, _ in cycle) + f" -> {cycle[0][0]}"
        first = nodes[cycle[0][0]]
        raise _fail(playbooks[first.playbook].path, f"node {cycle[0][0].split('.', 1)[1]!r} is on a cycle: {loop}")

    entry = playbooks[ENTRY_PLAYBOOK].entry
    reachable = nx.descendants(graph, entry) | {entry}
    for node_id, node in nodes.items():
        if node_id not in reachable:
            raise _fail(playbooks[node.playbook].path, f"node {node_id.split('.', 1)[1]!r} is unreachable from the entry playbook")
    for n in graph.nodes:
        if graph.out_degree(n) == 0 and not n.startswith(VERDICT_PREFIX):
            node = nodes[n]
            raise _fail(playbooks[node.playbook].path, f"node {n.split('.', 1)[1]!r}: a path ends here without a verdict")

    return DecisionGraph(graph=graph, nodes=nodes, playbooks=playbooks, catalog=catalog, probes=probes)
