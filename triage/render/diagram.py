"""A playbook drawn as Mermaid or Graphviz DOT, so people can read the logic."""

from __future__ import annotations

import re

from triage.graph import VERDICT_PREFIX, DecisionGraph


def _mid(node_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", node_id)


def _edges(graph: DecisionGraph, playbook: str):
    for node_id in graph.playbooks[playbook].nodes:
        node = graph.nodes[node_id]
        by_target: dict[str, list[str]] = {}
        for outcome, target in node.edges.items():
            by_target.setdefault(target, []).append(outcome)
        for target, outcomes in by_target.items():
            yield node, target, outcomes


def _label(graph: DecisionGraph, target: str, playbook: str) -> str:
    if target.startswith(VERDICT_PREFIX):
        return target[len(VERDICT_PREFIX):]
    node = graph.nodes[target]
    return f"{node.probe}" if node.playbook == playbook else f"{node.playbook} playbook"


def render_mermaid(graph: DecisionGraph, playbook: str) -> str:
    lines = ["flowchart TD"]
    declared: set[str] = set()
    for node, target, outcomes in _edges(graph, playbook):
        for n, shape in ((node.id, "node"), (target, "target")):
            if n in declared:
                continue
            declared.add(n)
            label = _label(graph, n, playbook).replace('"', "'")
            if n.startswith(VERDICT_PREFIX):
                lines.append(f'    {_mid(n)}(["{label}"])')
            elif graph.nodes[n].playbook != playbook:
                lines.append(f'    {_mid(n)}[/"{label}"/]')
            else:
                lines.append(f'    {_mid(n)}{{"{label}"}}')
        lines.append(f'    {_mid(node.id)} -->|{" / ".join(outcomes)}| {_mid(target)}')
    return "\n".join(lines) + "\n"


def render_dot(graph: DecisionGraph, playbook: str) -> str:
    lines = [f'digraph "{playbook}" {{', "  rankdir=TB;"]
    declared: set[str] = set()
    for node, target, outcomes in _edges(graph, playbook):
        for n in (node.id, target):
            if n in declared:
                continue
            declared.add(n)
            shape = "box" if n.startswith(VERDICT_PREFIX) else "diamond"
            lines.append(f'  "{n}" [label="{_label(graph, n, playbook)}", shape={shape}];')
        lines.append(f'  "{node.id}" -> "{target}" [label="{" / ".join(outcomes)}"];')
    lines.append("}")
    return "\n".join(lines) + "\n"
