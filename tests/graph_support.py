"""Test graphs built from fake probes, with a verdict catalog whose evidence fits them.

The shipped catalog names the shipped probes as each verdict's evidence; a test graph of
fake probes cannot satisfy that. `write_catalog` copies the catalog and declares, for each
verdict, the (probe, outcome) edges of the test's own playbooks that reach it, so tests of
the walker, the executors and the cache compile; the evidence rule itself is tested on its
own in tests/test_graph.py.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from triage.finding import IMPLICIT_OUTCOMES
from triage.graph import DEFAULT_DIR, VERDICT_PREFIX


def write_catalog(directory: Path) -> Path:
    evidence: dict[str, list[str]] = {}
    for book in sorted(directory.glob("*.yaml")):
        if book.name == "verdicts.yaml":
            continue
        try:
            raw = yaml.load(book.read_text(), Loader=yaml.BaseLoader)  # outcome names stay strings
        except yaml.YAMLError:
            continue  # a test of a malformed playbook: the compiler names it
        nodes = raw.get("nodes") if isinstance(raw, dict) else None
        for spec in (nodes.values() if isinstance(nodes, dict) else ()):
            if not isinstance(spec, dict) or not isinstance(spec.get("on"), dict):
                continue
            for outcome, target in spec["on"].items():
                if (isinstance(target, str) and target.startswith(VERDICT_PREFIX)
                        and outcome not in IMPLICIT_OUTCOMES and "probe" in spec):
                    evidence.setdefault(target[len(VERDICT_PREFIX):], []).append(f"{spec['probe']}:{outcome}")
    catalog = yaml.safe_load((DEFAULT_DIR / "verdicts.yaml").read_text())
    for verdict in catalog["verdicts"]:
        verdict.pop("evidence", None)
        verdict.pop("suspected_by", None)  # names the shipped probes, as evidence does
        if verdict["id"] in evidence:
            verdict["evidence"] = sorted(set(evidence[verdict["id"]]))
    out = directory / "verdicts.yaml"
    out.write_text(yaml.safe_dump(catalog, sort_keys=False, allow_unicode=True))
    return out
