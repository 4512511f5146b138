"""Fixtures for the service tests: a Slack stand-in, runs under a runs root, a live server on 127.0.0.1."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from service_support import Live, service_config  # noqa: E402

from triage.service import create_app  # noqa: E402
from triage.service.testing import ServerThread, SlackStandIn  # noqa: E402


@pytest.fixture
def slack() -> Iterator[SlackStandIn]:
    with SlackStandIn() as stand_in:
        yield stand_in


@pytest.fixture
def runs_root(tmp_path: Path) -> Path:
    root = tmp_path / "runs"
    root.mkdir()
    return root


@pytest.fixture
def live(tmp_path: Path, runs_root: Path, slack: SlackStandIn) -> Iterator[Callable[..., Live]]:
    """`live(**config_changes)` starts the app under uvicorn on 127.0.0.1; all are stopped after the test."""
    with ExitStack() as stack:

        def start(**changes: Any) -> Live:
            config = service_config(tmp_path, runs_root, slack, **changes)
            app = create_app(config)
            server = stack.enter_context(ServerThread(app))
            running = Live(server, config, app)
            stack.callback(running.http.close)
            return running

        yield start
