"""Shared fixtures: the repository's examples and a scenario harness."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: longer tests (still part of make test)")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture
def examples_dir() -> Path:
    return EXAMPLES


@pytest.fixture(autouse=True)
def _private_findings_cache(tmp_path_factory, monkeypatch):
    """Every test gets its own findings cache, never the user's ~/.cache."""
    monkeypatch.setenv("TRIAGE_DB", str(tmp_path_factory.mktemp("db") / "triage.db"))


@pytest.fixture(autouse=True)
def _tests_tmp_is_an_allowed_root(tmp_path_factory, monkeypatch):
    """Tests build a run beside its checkpoints and models (tmp_path/run, tmp_path/hf), as a
    cluster keeps them on shared storage: the session's temporary directory is an allowed root
    (`$TRIAGE_ALLOWED_ROOTS`, like `--allow-path`). tests/security/ clears it."""
    monkeypatch.setenv("TRIAGE_ALLOWED_ROOTS", str(tmp_path_factory.getbasetemp()))
