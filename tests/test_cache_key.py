"""The findings cache never answers from a finding judged by other code or other thresholds."""

from __future__ import annotations

from triage.cache import code_digest, rules_digest


def _package(root, body: str) -> None:
    (root / "probes").mkdir(exist_ok=True)
    (root / "probes" / "a_probe.py").write_text(body, encoding="utf-8")
    (root / "probes" / "table.yaml").write_text("limit: 1\n", encoding="utf-8")


def test_a_changed_probe_changes_the_code_digest(tmp_path):
    _package(tmp_path, "LIMIT = 1\n")
    before = code_digest(tmp_path, ("probes",))
    assert code_digest(tmp_path, ("probes",)) == before  # stable
    _package(tmp_path, "LIMIT = 2\n")
    assert code_digest(tmp_path, ("probes",)) != before


def test_a_changed_table_changes_the_code_digest(tmp_path):
    _package(tmp_path, "LIMIT = 1\n")
    before = code_digest(tmp_path, ("probes",))
    (tmp_path / "probes" / "table.yaml").write_text("limit: 2\n", encoding="utf-8")
    assert code_digest(tmp_path, ("probes",)) != before


def test_the_rules_digest_is_stable_within_a_process():
    assert rules_digest() == rules_digest() and len(rules_digest()) == 16
