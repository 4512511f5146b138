"""`triage watch --notify slack`: the watcher's reports go to the configured channel."""

from __future__ import annotations

from pathlib import Path

import pytest

from triage.api import triage_run
from triage.errors import BadInput
from triage.ray.jobs_api import RayJob
from triage.run import open_run
from triage.service.slack import make_watch_notifier
from triage.service.testing import SlackStandIn

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "oom-max-tokens-per-gpu"


def test_watch_report_is_posted_to_the_channel(monkeypatch):
    report = triage_run(open_run(str(EXAMPLE)))
    with SlackStandIn() as slack:
        monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-test")
        monkeypatch.setenv("SLACK_API_URL", slack.url)
        monkeypatch.setenv("TRIAGE_SLACK_CHANNEL", "C0FAILS")
        job = RayJob(submission_id="raysubmit_abc123", status="FAILED")
        make_watch_notifier().notify(job, report)
        posts = slack.posts()
    assert len(posts) == 1
    assert posts[0]["channel"] == "C0FAILS"
    assert "memory.max_tokens_per_gpu" in posts[0]["text"] and "ray:raysubmit_abc123" in posts[0]["text"]


def test_watch_notifier_needs_a_channel(monkeypatch):
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-test")
    monkeypatch.delenv("TRIAGE_SLACK_CHANNEL", raising=False)
    with pytest.raises(BadInput, match="TRIAGE_SLACK_CHANNEL"):
        make_watch_notifier()
