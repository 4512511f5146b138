"""Testbed tests. Tests marked `slow` (whole fault scenarios, two-process runs) run only with
TRIAGE_TESTBED_SLOW=1 (or when selected with `-m slow`); the rest stay well under two minutes
once the warmed-up models are cached (TRIAGE_TESTBED_CACHE, default ~/.cache/triage-testbed)."""

from __future__ import annotations

import os

import pytest


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: whole fault scenarios and two-process runs (TRIAGE_TESTBED_SLOW=1)")


def pytest_collection_modifyitems(config, items):
    if os.environ.get("TRIAGE_TESTBED_SLOW") == "1" or "slow" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="slow testbed test: set TRIAGE_TESTBED_SLOW=1 to run")
    for item in items:
        if "slow" in item.keywords and "tests/testbed" in str(item.fspath):
            item.add_marker(skip)
