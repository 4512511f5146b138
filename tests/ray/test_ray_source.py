"""A Ray job as a run: `triage run <submission-id> --ray-address …` against a real local head."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
import time

import pytest

from ray_support import ROOT, disconnect_driver, entrypoint, example_flags, slime_job_script
from triage.cli import main
from triage.ray.jobs_api import JobsClient
from triage.ray.source import open_ray_run
from triage.run import open_run

EXAMPLES = ROOT / "examples"


def triage_json(capsys, *args: str) -> tuple[int, dict]:
    code = main(["run", *args, "--json", "--no-cache"])
    out = capsys.readouterr().out
    return code, json.loads(out)


def submit_example(ray_head, tmp_path, name: str, **kw) -> str:
    example = EXAMPLES / name
    log = next(p for p in (example / "job.log", example / "train.log") if p.exists())
    script = slime_job_script(tmp_path, log.read_text(), **kw)
    return ray_head.submit(entrypoint(script, example_flags(example)))


@pytest.mark.parametrize("name", ["oom-max-tokens-per-gpu", "ckpt-not-loaded"])
def test_a_failed_job_gets_the_verdict_of_its_run_directory(ray_head, tmp_path, capsys, name, monkeypatch):
    # the job's flags name the example's copies, as a cluster job names shared storage: the user
    # allows that root ($TRIAGE_ALLOWED_ROOTS / --allow-path)
    monkeypatch.setenv("TRIAGE_ALLOWED_ROOTS", os.pathsep.join(filter(None, (os.environ.get("TRIAGE_ALLOWED_ROOTS"),
                                                                             str(EXAMPLES)))))
    sid = submit_example(ray_head, tmp_path, name)
    assert ray_head.wait(sid) == "FAILED"
    expected = json.loads((EXAMPLES / name / "expected.json").read_text())["verdict"]

    code_dir, from_dir = triage_json(capsys, str(EXAMPLES / name))
    code_job, from_job = triage_json(capsys, sid, "--ray-address", ray_head.dashboard)
    assert code_job == code_dir == 0
    assert from_job["root_cause"]["id"] == from_dir["root_cause"]["id"] == expected
    assert [s["outcome"] for s in from_job["path"]] == [s["outcome"] for s in from_dir["path"]]
    assert from_job["run"]["ref"] == sid and from_job["run"]["status"] == "failed"
    # the framework's flags came from the job's entrypoint
    run = open_ray_run(sid, ray_head.dashboard)
    from_flags = open_run(str(EXAMPLES / name)).args
    for key in ("max_tokens_per_gpu", "rollout_max_response_len", "global_batch_size"):
        assert run.args.get(key) == from_flags.get(key) is not None, key
    if name == "ckpt-not-loaded":
        # a cluster path in the flags resolves where it exists (here: the example's copy)
        ref_load = run.resolve_path(run.args.get("ref_load"))
        assert ref_load == EXAMPLES / name / "Qwen2.5-7B-Instruct_torch_dist"


def test_a_job_triaged_with_its_probes_on_the_same_cluster(ray_head, tmp_path, capsys):
    """`triage run <id> --executor ray`: the job read through the dashboard, each probe a task on the cluster."""
    sid = submit_example(ray_head, tmp_path, "oom-max-tokens-per-gpu")
    ray_head.wait(sid)
    try:
        code, on_ray = triage_json(capsys, sid, "--ray-address", ray_head.dashboard, "--executor", "ray")
        import ray

        # this process became a driver of the cluster at the dashboard's address
        assert ray.is_initialized() and ray.get_runtime_context().gcs_address == ray_head.gcs
    finally:
        disconnect_driver()
    _, local = triage_json(capsys, sid, "--ray-address", ray_head.dashboard)
    assert code == 0 and on_ray["root_cause"]["id"] == local["root_cause"]["id"] == "memory.max_tokens_per_gpu"
    assert [(s["node"], s["outcome"], s["summary"]) for s in on_ray["path"]] == \
        [(s["node"], s["outcome"], s["summary"]) for s in local["path"]]


def test_the_ray_prefix_names_a_job_and_a_finished_job_is_fetched_once(ray_head, tmp_path, capsys):
    sid = submit_example(ray_head, tmp_path, "oom-max-tokens-per-gpu")
    ray_head.wait(sid)
    code, report = triage_json(capsys, f"ray:{sid}", "--ray-address", ray_head.dashboard.removeprefix("http://"))
    assert code == 0 and report["root_cause"]["id"] == "memory.max_tokens_per_gpu"
    log = open_ray_run(sid, ray_head.dashboard).root / "job.log"
    size, mtime = log.stat().st_size, log.stat().st_mtime_ns
    assert "CUDA out of memory" in log.read_text()
    time.sleep(0.05)
    again = open_ray_run(sid, ray_head.dashboard)
    assert again.root / "job.log" == log
    assert (log.stat().st_size, log.stat().st_mtime_ns) == (size, mtime)


def test_a_running_job_is_triaged_on_what_it_has_so_far(ray_head, tmp_path, capsys):
    sid = submit_example(ray_head, tmp_path, "lr-too-high", hold_s=120, exit_code=0)
    try:
        ray_head.wait(sid, ("RUNNING",))
        with JobsClient(ray_head.dashboard) as client:
            deadline = time.monotonic() + 30  # until the log has been written out
            while "step" not in (open_ray_run(sid, client=client).root / "job.log").read_text():
                assert time.monotonic() < deadline
                time.sleep(0.3)
        code, report = triage_json(capsys, sid, "--ray-address", ray_head.dashboard)
        assert report["run"]["status"] == "running"
        assert any("still running" in note for note in report["run"]["notes"])
        assert report["root_cause"]["id"] == "optim.lr_too_high"
    finally:
        ray_head.stop_job(sid)


def test_unknown_job_and_dead_dashboard_are_one_line_errors(ray_head, capsys):
    from ray_support import free_port

    code = main(["run", "raysubmit_doesnotexist0000", "--ray-address", ray_head.dashboard])
    err = capsys.readouterr().err
    assert code == 2
    assert "no Ray job 'raysubmit_doesnotexist0000'" in err and ray_head.dashboard in err
    assert len(err.strip().splitlines()) == 1

    dead = f"http://127.0.0.1:{free_port()}"
    t0 = time.monotonic()
    code = main(["run", "raysubmit_doesnotexist0000", "--ray-address", dead])
    err = capsys.readouterr().err
    assert code == 2
    assert f"Ray dashboard at {dead} is not answering" in err and "connection refused" in err
    assert len(err.strip().splitlines()) == 1
    assert time.monotonic() - t0 < 20


def test_a_testbed_job_submitted_to_ray_gets_the_verdict_of_the_same_run_on_disk(ray_head, tmp_path, capsys):
    """The miniature slime (`python3 -m triage.testbed.train`) run as a Ray job, against the same scenario
    run to a directory: the job's relative paths resolve in the directory its entrypoint `cd`s into."""
    from triage.testbed import prepare
    from triage.testbed.scenarios import SCENARIOS, generate

    scenario = SCENARIOS["memory.max_tokens_per_gpu"]
    on_disk = generate(scenario.name, tmp_path / "on_disk")
    job_dir = tmp_path / "job"
    layout = prepare.base_layout(prepare.RunLayout(job_dir, model=scenario.model,
                                                   prompt_seed=int(scenario.flags.get("--rollout-seed", "0"))))
    for step in scenario.setup:
        prepare.SETUPS[step](layout)
    if "--ref-load" not in scenario.flags:
        shutil.rmtree(layout.ref, ignore_errors=True)
    command = " ".join(shlex.quote(a) for a in [sys.executable, "-m", "triage.testbed.train", *scenario.argv()])
    sid = ray_head.submit(f"cd {shlex.quote(str(job_dir))} && {command}",
                          env_vars={"TRIAGE_TESTBED_FAULT": scenario.fault})
    assert ray_head.wait(sid, timeout_s=120) == "FAILED"

    _, from_dir = triage_json(capsys, str(on_disk))
    _, from_job = triage_json(capsys, sid, "--ray-address", ray_head.dashboard)
    assert from_job["root_cause"]["id"] == from_dir["root_cause"]["id"] == scenario.expected
    assert [s["outcome"] for s in from_job["path"]] == [s["outcome"] for s in from_dir["path"]]
    run = open_ray_run(sid, ray_head.dashboard)
    # the job's relative --hf-checkpoint hf / --ref-load ref, in the directory it ran in
    assert run.resolve_path(run.args.get("hf_checkpoint")) == job_dir / "hf"
    assert run.resolve_path(run.args.get("ref_load")) == job_dir / "ref"
