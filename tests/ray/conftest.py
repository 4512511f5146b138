"""One local Ray head shared by the Ray tests, always stopped at the end."""

from __future__ import annotations

import os
import secrets
import shutil

# The head listens on 127.0.0.1 only; this keeps the driver (this process) from swapping
# 127.0.0.1 for the machine's address when it connects. Read when Ray is first imported.
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
# The head runs with Ray's token authentication, as clusters Ray starts do by default, with a
# token of the test session's own: nothing is read from or written to ~/.ray/auth_token.
os.environ["RAY_AUTH_MODE"] = "token"
os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(16)

import pytest

from ray_support import RayHead


@pytest.fixture(scope="session")
def ray_head():
    # one declared GPU (Ray takes the count as given): GPU probes are placed on it as on a real one
    head = RayHead(num_cpus=2, num_gpus=1)
    try:
        head.start()
        yield head
    finally:
        head.stop()
        shutil.rmtree(head.temp_dir, ignore_errors=True)


@pytest.fixture(autouse=True)
def _private_ray_cache(tmp_path_factory, monkeypatch):
    """Ray job runs are materialised under the test's own directory, never ~/.cache."""
    monkeypatch.setenv("TRIAGE_RAY_CACHE", str(tmp_path_factory.mktemp("raycache")))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.delenv("RAY_API_SERVER_ADDRESS", raising=False)
