"""Walking the decision graph: node -> probe -> finding -> edge -> ... -> verdict."""

from __future__ import annotations

from dataclasses import dataclass, field

import structlog

from triage.executor import Executor, LocalExecutor
from triage.finding import ERROR, UNAVAILABLE, Finding
from triage.graph import VERDICT_PREFIX, DecisionGraph
from triage.run.run import Run

log = structlog.get_logger("triage.walker")


@dataclass
class Walk:
    findings: list[Finding] = field(default_factory=list)
    verdict: str = "inconclusive"

    @property
    def deciding(self) -> Finding | None:
        """The last finding with a real outcome: the one whose edge led to the verdict."""
        for f in reversed(self.findings):
            if f.outcome not in (UNAVAILABLE, ERROR):
                return f
        return None


def walk(graph: DecisionGraph, run: Run, executor: Executor | None = None, start: str | None = None) -> Walk:
    executor = executor or LocalExecutor()
    attach = getattr(executor, "attach", None)
    if attach is not None:  # executors that start likely next probes early need the graph
        attach(graph)
    result = Walk()
    current = start or graph.entry
    limit = len(graph.nodes) + 1  # the graph is acyclic: a walk visits each node at most once
    while not current.startswith(VERDICT_PREFIX):
        if len(result.findings) >= limit:
            raise AssertionError(f"unreachable: walk longer than the graph at {current}")
        node = graph.nodes[current]
        finding = executor.run_probe(node, graph.probes[node.probe], run)
        log.debug("finding", node=node.id, probe=node.probe, outcome=finding.outcome, summary=finding.summary)
        result.findings.append(finding)
        current = node.edges[finding.outcome]
    result.verdict = current[len(VERDICT_PREFIX):]
    return result
