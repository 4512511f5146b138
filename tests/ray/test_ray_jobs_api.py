"""The Job REST API client: addresses, retries, the streamed log, against a real head where it counts."""

from __future__ import annotations

import json
import random
import time
import tracemalloc

import httpx
import pytest

from ray_support import entrypoint, free_port
from triage.errors import BadInput
from triage.ray.jobs_api import (
    DashboardUnavailable, JobNotFound, JobsClient, JsonStringField, RayDashboardError, RayJob, resolve_address,
)


def test_addresses_default_to_the_environment_then_the_local_dashboard(monkeypatch):
    assert resolve_address("10.0.0.5:8265") == "http://10.0.0.5:8265"
    assert resolve_address("https://ray.example.org/") == "https://ray.example.org"
    assert resolve_address(None) == "http://127.0.0.1:8265"
    monkeypatch.setenv("RAY_ADDRESS", "http://head:8265")
    assert resolve_address(None) == "http://head:8265"
    monkeypatch.setenv("RAY_API_SERVER_ADDRESS", "http://api:8265")
    assert resolve_address(None) == "http://api:8265"
    with pytest.raises(BadInput, match="Ray Client address"):
        resolve_address("ray://head:10001")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_json_string_field_decodes_the_same_however_it_is_cut(seed):
    text = 'step 3: {"loss": nan}\n\t"quoted" \\ back \u00e9 \U0001F600 \u2028 end\n' * 40
    body = json.dumps({"other": "x", "logs": text, "after": 1})
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, len(body)), 200))
    pieces = [body[i:j] for i, j in zip([0, *cuts], [*cuts, len(body)])]
    field = JsonStringField("logs")
    out = "".join(field.feed(p) for p in pieces)
    assert out == text and field.done
    one_by_one = JsonStringField("logs")
    assert "".join(one_by_one.feed(c) for c in body) == text


def test_a_dashboard_that_is_down_is_one_line_after_bounded_retries():
    port = free_port()
    client = JobsClient(f"127.0.0.1:{port}", retries=2, backoff_s=0.05)
    t0 = time.monotonic()
    with pytest.raises(DashboardUnavailable) as err:
        client.get_job("raysubmit_abc")
    assert time.monotonic() - t0 < 5
    msg = str(err.value)
    assert f"http://127.0.0.1:{port}" in msg and "connection refused" in msg and "\n" not in msg


def test_a_restarting_dashboard_is_retried_until_it_answers():
    answers = [503, 502, 200]
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        status = answers.pop(0)
        body = [{"type": "SUBMISSION", "submission_id": "raysubmit_a", "status": "FAILED", "entrypoint": "python3 train.py",
                 "start_time": 1000, "end_time": 2000}] if status == 200 else None
        return httpx.Response(status, json=body) if body else httpx.Response(status, text="Bad Gateway")

    client = JobsClient("http://dash:8265", retries=3, backoff_s=0.01, transport=httpx.MockTransport(handler))
    (job,) = client.list_jobs()
    assert seen == ["/api/jobs/"] * 3
    assert (job.submission_id, job.status, job.key) == ("raysubmit_a", "FAILED", "raysubmit_a@1000")


def test_jobs_status_and_logs_from_a_real_head(ray_head, tmp_path):
    lines = 60_000  # about 5 MB of log
    script = tmp_path / "chatty.py"
    script.write_text(
        "import sys\n"
        f"for i in range({lines}):\n"
        "    sys.stdout.write(f'[2026-08-01 10:00:00] model.py:512 - step {i}: ' + \"{'train/loss': 0.5, 'x': '\\\\u00e9'}\" + '\\n')\n"
        "sys.exit(1)\n"
    )
    sid = ray_head.submit(entrypoint(script, ["--lr", "1e-6"]), metadata={"owner": "rl-team"})
    assert ray_head.wait(sid) == "FAILED"
    with JobsClient(ray_head.dashboard) as client:
        job = client.get_job(sid)
        assert job.status == "FAILED" and job.entrypoint.endswith("chatty.py --lr 1e-6")
        assert job.metadata["owner"] == "rl-team" and job.start_time and job.end_time >= job.start_time
        assert "exit code 1" in job.message
        assert sid in {j.submission_id for j in client.list_jobs()}

        tracemalloc.start()
        streamed = client.download_logs(job, tmp_path / "state_api.log")
        peak_streamed = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        # a job record without a driver node: the JSON endpoint, decoded as it arrives
        legacy = RayJob(submission_id=sid, status=job.status)
        decoded = client.download_logs(legacy, tmp_path / "jobs_api.log")
        peak_decoded = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        with pytest.raises(JobNotFound, match="no Ray job 'raysubmit_nope'"):
            client.get_job("raysubmit_nope")

    text = (tmp_path / "state_api.log").read_text()
    assert streamed == decoded > 4_000_000
    assert (tmp_path / "jobs_api.log").read_text() == text
    assert text.count("model.py:512 - step ") == lines and "step 59999:" in text and "\\u00e9" in text
    # neither copy was held in memory: what was allocated at the peak is a fraction of the log
    assert peak_streamed < streamed / 3 and peak_decoded < decoded / 3


def test_a_client_without_the_clusters_token_is_told_so_in_one_line(ray_head, monkeypatch):
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")  # send no token
    with JobsClient(ray_head.dashboard, retries=0) as client, pytest.raises(RayDashboardError) as err:
        client.list_jobs()
    msg = str(err.value)
    assert "HTTP 401" in msg and "token" in msg and "RAY_AUTH_TOKEN" in msg and "\n" not in msg
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    monkeypatch.setenv("RAY_AUTH_TOKEN", "not-the-token")
    with JobsClient(ray_head.dashboard, retries=0) as client, pytest.raises(RayDashboardError, match="HTTP 403"):
        client.list_jobs()
