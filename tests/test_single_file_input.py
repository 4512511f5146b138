"""Input as users have it: `triage run job.log` (one file is the run) and `triage run -` (a fragment on stdin)."""

from __future__ import annotations

import io
import os
import json
import subprocess
import sys

import pytest

from triage.cli import main
from triage.errors import BadInput, UnsafeRunRef
from triage.run.fragment import open_bytes_run, open_file_run, open_text_run
from triage.sources import open_any_run

# A slime driver log cut from a run whose grad norm went non-finite (slime's model.py / rollout.py lines).
SLIME_LOG = "".join(
    f"[2026-08-01 10:00:{i:02d}] model.py:918 - step {i}: {{'train/loss': 0.1, 'train/grad_norm': "
    f"{'nan' if i >= 6 else 0.3 + 0.01 * i}, 'train/lr-pg_0': 1e-06}}\n" for i in range(8))
# verl console lines a user pastes from a terminal (verl/utils/logger/aggregate_logger.py).
VERL_FRAGMENT = "".join(
    f"(TaskRunner pid=2601) step:{i} - actor/grad_norm:{0.4 + 0.01 * i} - actor/entropy:0.6 - "
    f"critic/score/mean:0.1 - response_length/mean:400 - response_length/clip_ratio:0.0\n" for i in range(1, 9))

TRIAGE = [sys.executable, "-m", "triage"]


def test_a_single_log_is_the_whole_run_and_nothing_beside_it_is_read(tmp_path):
    log = tmp_path / "job.log"
    log.write_text(SLIME_LOG)
    (tmp_path / "trainer_state.json").write_text("{not json")  # beside it: never read
    (tmp_path / "other.log").write_text("Traceback (most recent call last):\n")
    run = open_any_run(str(log))
    assert run.artifacts.logs == [log.resolve()]
    assert run.artifacts.trainer_states == []
    assert run.metrics.get("grad_norm").source == "step:train/grad_norm"
    assert run.resolve_path("trainer_state.json") is None  # paths are not looked up beside the file
    assert any("single file job.log" in note for note in run.notes)


def test_a_single_trainer_state_file_is_read_as_metrics(tmp_path):
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps({"global_step": 2, "max_steps": 10, "log_history": [
        {"step": 1, "loss": 0.1, "grad_norm": 0.5}, {"step": 2, "loss": 0.1, "grad_norm": 0.6}]}))
    run = open_file_run(str(path))
    assert run.framework == "hf_trainer"
    assert list(run.metrics.get("grad_norm").values) == [0.5, 0.6]


def test_a_file_outside_the_runs_root_is_refused(tmp_path):
    root = tmp_path / "runs"
    root.mkdir()
    log = tmp_path / "elsewhere.log"
    log.write_text(SLIME_LOG)
    with pytest.raises(UnsafeRunRef):
        open_file_run(str(log), [root.resolve()])


def test_triage_run_on_a_log_file_gives_a_report(tmp_path, capsys):
    log = tmp_path / "job.log"
    log.write_text(SLIME_LOG)
    rc = main(["run", str(log), "--json", "--no-cache"])
    out = capsys.readouterr().out
    assert rc in (0, 3)
    report = json.loads(out)
    assert report["run"]["path"] == str(log.resolve())
    assert report["run"]["artifacts"]["logs"] == 1
    assert any("single file job.log" in note for note in report["run"]["notes"])


def _stdin(monkeypatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))


def _inconclusive(monkeypatch, capsys, data: bytes) -> dict:
    """The JSON report of a paste on stdin that the triage reads but cannot decide (exit 3)."""
    _stdin(monkeypatch, data)
    assert main(["run", "-", "--json", "--no-cache"]) == 3
    report = json.loads(capsys.readouterr().out)
    assert report["root_cause"]["id"] == "inconclusive"
    return report


def test_a_fragment_on_stdin_gives_a_report_that_says_it_was_a_fragment(monkeypatch, capsys):
    _stdin(monkeypatch, VERL_FRAGMENT.encode())
    rc = main(["run", "-", "--json", "--no-cache"])
    out = capsys.readouterr().out
    assert rc in (0, 3)
    report = json.loads(out)
    assert report["run"]["framework"] == "verl"
    assert any("fragment" in note and "standard input" in note for note in report["run"]["notes"])


def test_a_jobs_own_account_of_its_checkpoint_is_read_not_refused(monkeypatch, capsys):
    # THUDM/Chinese-Transformer-XL#16 pasted Megatron's one warning
    _inconclusive(monkeypatch, capsys, b"WARNING: could not find the metadata file data/txl-2.9B/"
                  b"latest_checkpointed_iteration.txt, will not load any checkpoints and will start from random\n")


def test_a_check_asked_at_two_nodes_is_said_once_in_what_could_not_be_checked(monkeypatch, capsys):
    # three TRL records, the last with a grad-norm spike: the batch rule is asked at two nodes, and the
    # run has no arguments for either
    records = [{"loss": 0.1, "grad_norm": 0.5, "reward": 0.5, "epoch": 0.01},
               {"loss": 0.09, "grad_norm": 0.6, "reward": 0.5, "epoch": 0.02},
               {"loss": 0.3, "grad_norm": 404.0, "reward": 0.5, "epoch": 0.03}]
    report = _inconclusive(monkeypatch, capsys, "".join(f"{r}\n" for r in records).encode())
    assert [n["probe"] for n in report["not_checked"]].count("config_rule") == 2
    assert report["root_cause"]["explanation"].count("config_rule: the run has no args") == 1


def test_a_pasted_ray_status_of_a_stuck_job_is_read_not_refused(monkeypatch, capsys):
    # rllm-org/rllm#95 pasted `ray status` alone: every GPU reserved, nothing pending
    _inconclusive(monkeypatch, capsys, (
        "Node status\n---------------------------------------------------------------\nActive:\n"
        " 1 node_a3881603841bacbe737cdecb93c89ffa290c024a7fe64d0b50efde65\nPending:\n (no pending nodes)\n"
        "Recent failures:\n (no failures)\n\nResources\n---------------------------------------------------------------\n"
        "Usage:\n 9.0/192.0 CPU (8.0 used of 8.0 reserved in placement groups)\n"
        " 8.0/8.0 GPU (8.0 used of 8.0 reserved in placement groups)\n\nDemands:\n (no resource demands)\n").encode())


def test_an_empty_stdin_through_the_real_command_is_one_line_and_exit_2():
    proc = subprocess.run([*TRIAGE, "run", "-"], input=b"", capture_output=True, timeout=120)
    err = proc.stderr.decode().strip()
    assert proc.returncode == 2 and len(err.splitlines()) == 1 and "standard input is empty" in err


def test_the_service_can_open_pasted_text_as_a_run():
    run = open_text_run(VERL_FRAGMENT, "pasted from #rl-oncall")
    assert run.artifacts.logs[0].name.endswith(".log")
    assert run.framework == "verl"
    assert run.metrics.get("grad_norm").source == "verl:actor/grad_norm"
    tmp = run.root
    assert tmp.exists()
    del run
    import gc

    gc.collect()
    assert not tmp.exists()  # the temporary copy goes with the run


@pytest.mark.parametrize("data, message", [
    (b"   \n\n", "standard input is empty"),
    (b"x" * (10 << 20), "a single line of 10485760 bytes"),
    (b"step 1\x00\x01\x02", "binary"),
])
def test_bad_stdin_is_one_line_and_exit_2(monkeypatch, capsys, data, message):
    _stdin(monkeypatch, data)
    rc = main(["run", "-"])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert len(err.splitlines()) == 1 and message in err


def test_fragment_checks_without_a_subprocess():
    with pytest.raises(BadInput, match="is empty"):
        open_bytes_run(b"", what="the text 'x'")
    with pytest.raises(BadInput, match="single line"):
        open_bytes_run(b"a\n" + b"b" * ((1 << 20) + 1) + b"\nc\n")


def test_a_paste_indented_as_a_whole_is_read_as_if_it_were_not():
    # a Markdown list item shifts every line of the paste (THUDM/slime#1217); a traceback keeps its frames' depth
    from triage.run.fragment import dedent

    shifted = (b"   (SGLangEngine pid=32887) [2025-12-25 10:14:03 TP7] Scheduler hit an exception: Traceback (most "
               b"recent call last):\n\n"
               b"   (SGLangEngine pid=32887)   File \"/sgl/scheduler.py\", line 2683, in run_scheduler_process\n"
               b"   (SGLangEngine pid=32887) ValueError: boom\n")
    assert dedent(shifted).splitlines()[0].startswith(b"(SGLangEngine pid=32887) [2025")
    assert dedent(shifted).count(b"\n") == shifted.count(b"\n")  # line numbers stay
    assert dedent(b"Traceback (most recent call last):\n  File \"x.py\", line 1\n") == \
        b"Traceback (most recent call last):\n  File \"x.py\", line 1\n"
    run = open_bytes_run(shifted)
    tb = run.log.tracebacks[0]
    assert tb.exception == "ValueError: boom" and tb.source == "SGLangEngine pid=32887"


def test_a_paste_copied_from_a_numbered_view_is_read_without_its_line_numbers():
    # alibaba/ROLL#436: every line behind its number, the exception at 6
    from triage.run.fragment import ungutter

    numbered = (b" 1 (DynamicSamplingScheduler) Traceback (most recent call last):\n"
                b"   2   File \".../roll/distributed/scheduler/generate_scheduler.py\", line 478, in __init__\n"
                b"   3     self.get_next_dataset_item()\n"
                b"   4 AttributeError: 'DynamicSamplingScheduler' object has no attribute 'dataset_iter'\n")
    run = open_bytes_run(numbered)
    tb = run.log.tracebacks[0]
    assert tb.exception.startswith("AttributeError: 'DynamicSamplingScheduler'")
    assert run.log.last_lines == {tb.path: 4}  # the lines keep their numbers, the paste's own
    # `cat -n` (a tab, blank lines numbered too)
    assert ungutter(b"     1\tTraceback (most recent call last):\n     2\t\n     3\tValueError: x\n") == \
        b"Traceback (most recent call last):\n\nValueError: x\n"


def test_a_traceback_pasted_on_one_line_is_read_with_its_line_breaks_put_back():
    # verl-project/verl#3324's shape: the header, frames, code and exception joined by spaces
    from triage.run.fragment import unflatten

    flat = (b'step 3 done\nTraceback (most recent call last): File "/w/verl/trainer/main_ppo.py", line 38, in main '
            b'run_ppo(config) File "/env/site-packages/ray/_private/worker.py", line 968, in get_objects raise '
            b"value.as_instanceof_cause() ray.exceptions.RayTaskError(ValueError): ray::TaskRunner.run() (pid=13, "
            b'ip=10.0.0.2) File "/w/verl/trainer/ppo/ray_trainer.py", line 9, in fit raise ValueError(f"bad {x}") '
            b"ValueError: bad batch: 7\n")
    run = open_bytes_run(flat)
    tb = run.log.tracebacks[-1]
    assert tb.exception == "ValueError: bad batch: 7" and tb.frames[-1].endswith("in fit")
    assert any("1 traceback was pasted on one line" in n for n in run.notes)
    text, n = unflatten(flat)
    assert n == 1 and text.splitlines()[:4] == [
        b"step 3 done", b"Traceback (most recent call last):",
        b'  File "/w/verl/trainer/main_ppo.py", line 38, in main', b"    run_ppo(config)"]
    # a line that only mentions a frame, or a traceback as Python printed it, stays as it is
    for kept in (b'see File "a.py", line 3, in f for details\n',
                 b'Traceback (most recent call last):\n  File "a.py", line 3, in f\n    g()\nValueError: x\n'):
        assert unflatten(kept) == (kept, 0)


@pytest.mark.parametrize("text", [
    b"1 epoch done\n2 epochs done\n",  # two lines may be numbered by chance
    b"step loss\n1 0.5\n2 0.4\n3 0.3\n",  # a table's index under its header
    b"1 a\n2 b\n4 c\n",  # numbers that skip a line count something else
    b"0 rank up\n0 rank up\n0 rank up\n",
])
def test_numbers_that_are_the_logs_own_are_kept(text):
    from triage.run.fragment import ungutter

    assert ungutter(text) == text


def test_candidates_no_finding_points_at_are_not_called_supported(monkeypatch, capsys):
    # a lone OSError line (NVIDIA/Megatron-LM#185) is located, and a paste with nothing to decide from
    # lists what the blocked checks could decide without ranking them as supported
    _stdin(monkeypatch, b"[Errno 2] No such file or directory: 'checkpoints/iter_0006000/mp_rank_00/model_optim_rng.pt'\n")
    assert main(["run", "-", "--json", "--no-cache"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["root_cause"]["id"] == "crash.unrecognized"
    assert report["path"][-1]["evidence"]["where"].endswith(":1")
    # a traceback cut before its exception, with no arguments: only the blocked config check is left
    _stdin(monkeypatch, b'Traceback (most recent call last):\n'
                        b'  File "/usr/lib/python3.10/site-packages/verl/trainer/main_ppo.py", line 64, in main\n'
                        b'    run_ppo(config)\n')
    main(["run", "-", "--json", "--no-cache"])
    report = json.loads(capsys.readouterr().out)
    assert report["root_cause"]["id"] == "inconclusive"
    assert report["candidates"] and all(c["score"] == 0 and not c["supports"] for c in report["candidates"])
    assert "Nothing observed points at one cause" in report["root_cause"]["explanation"]
    assert f"{len(report['candidates'])} causes stay open" in report["root_cause"]["explanation"]
    assert "most supported first" not in report["root_cause"]["explanation"]
    assert "memory." not in report["root_cause"]["explanation"]  # no id is named as if suspected


def test_a_sigkill_nothing_explains_leaves_host_memory_and_the_scheduler_open(monkeypatch, capsys):
    # bash's report of a killed job, all modelscope/ms-swift#195 pasted (the thread: the host RAM ran out)
    _stdin(monkeypatch, b"scripts/yi_6b/lora/sft.sh: line 34:  1917 Killed                  PYTHONPATH=../../.. "
                        b"CUDA_VISIBLE_DEVICES=0 python3 llm_sft.py --model_id_or_path 01ai/Yi-6B --sft_type lora\n")
    assert main(["run", "-", "--json", "--no-cache"]) == 3
    out = capsys.readouterr().out
    report = json.loads(out)
    assert report["root_cause"]["id"] == "inconclusive"
    assert [s["outcome"] for s in report["path"]][:2] == ["error_exit", "killed"]
    # the fragment's own name is where the line is: its temporary folder is gone with the run
    assert "triage-fragment" not in out and report["run"]["path"] == "stdin.log"
    assert report["path"][1]["evidence"]["first_where"] == "stdin.log:1"
    assert "(standard input, 1 line)" in report["run"]["notes"][0]
    # every check ran, so the remedy is the step that tells the two apart, not artifacts to produce
    assert "every check it asked ran" in report["root_cause"]["explanation"]
    assert report["root_cause"]["remedy"].startswith("Tell the candidates apart") and "dmesg" in report["root_cause"]["remedy"]
    # a SIGKILL alone decides neither, and rules neither out: 002 reads it as memory first
    assert [c["id"] for c in report["candidates"]] == ["host.ram_exhausted", "sched.time_limit"]
    assert all("SIGKILL" in c["supports"][0] for c in report["candidates"])
    assert "dmesg" in report["candidates"][0]["next_step"] and "sacct" in report["candidates"][1]["next_step"]
    assert "Candidates, most supported first: host.ram_exhausted, sched.time_limit." in report["root_cause"]["explanation"]
    ruled_out = {r["verdict"] for r in report["ruled_out"]}
    assert not ruled_out & {"host.ram_exhausted", "sched.time_limit"}


def test_a_sigterm_nothing_explains_leaves_host_memory_and_the_scheduler_open(monkeypatch, capsys):
    # modelscope/ms-swift#8193: the host's RAM ran out while the model was saved and the system sent SIGTERM;
    # nothing in the paste says who sent it
    report = _inconclusive(monkeypatch, capsys, (
        b"Val: 100%|##########| 9/9 [09:26<00:00, 62.92s/it]\n"
        b"W0304 01:00:36.891000 3535919 site-packages/torch/distributed/elastic/agent/server/api.py:725] Received "
        b"Signals.SIGTERM death signal, shutting down workers\n"
        b"W0304 01:00:37.092000 3535919 site-packages/torch/distributed/elastic/multiprocessing/api.py:908] Sending "
        b"process 3536001 closing signal SIGTERM\n"))
    assert report["path"][1]["outcome"] == "terminated"
    assert {c["id"] for c in report["candidates"]} == {"host.ram_exhausted", "sched.time_limit"}
    assert not {r["verdict"] for r in report["ruled_out"]} & {"host.ram_exhausted", "sched.time_limit"}


def test_what_a_check_could_not_see_or_saw_as_well_is_not_ruled_out(monkeypatch, capsys):
    # THUDM/slime#2073 pasted `step 0:` alone: a grad-norm spike with a log-prob gap of 9.2 beside it (the user's
    # own model bridge). The step-1 check read only the KL, which says nothing of the log-probs, and the gap is a
    # symptom the walk saw too: neither rules out the weights or the train-inference mismatch.
    report = _inconclusive(monkeypatch, capsys, (
        b"step 0: {'train/loss': -1.0281801223754883e-06, 'train/pg_loss': -1.0281801223754883e-06, "
        b"'train/entropy_loss': 5.39764404296875, 'train/pg_clipfrac': 0.0, 'train/ppo_kl': 0.0, "
        b"'train/train_rollout_logprob_abs_diff': 9.247343063354492, 'train/grad_norm': 15310134.6350668, "
        b"'train/lr-pg_0': 1e-06, 'train/step': 0}\n"))
    step1 = next(f for f in report["path"] if f["probe"] == "step1_invariants")
    assert step1["outcome"] == "hold" and step1["evidence"]["unseen_outcomes"] == ["logprob_extreme", "logprob_elevated"]
    ruled_out = {r["verdict"] for r in report["ruled_out"]}
    assert not ruled_out & {"weights.name_mapping", "weights.missing", "mismatch.train_inference"}
    assert "weights.name_mapping" in [c["id"] for c in report["candidates"]]
    assert report["path"][0]["evidence"]["also_seen_outcomes"] == ["policy_drift"]


def test_a_loopback_connect_timeout_makes_a_port_conflict_a_suspect_not_the_cause(monkeypatch, capsys):
    # the same words at the same port had two causes: a port held by another process (huggingface/trl#4538) and an
    # HTTP proxy (modelscope/ms-swift#5545)
    report = _inconclusive(monkeypatch, capsys, b"torch.distributed.DistNetworkError: The client socket has timed out "
                           b"after 300000ms while trying to connect to (127.0.0.1, 51216).\n")
    assert report["path"][1]["outcome"] == "port_unreachable"
    assert report["candidates"][0]["id"] == "engine.port_conflict" and report["candidates"][0]["supports"]
    assert "ss -ltnp" in report["root_cause"]["remedy"]


def test_dynamic_sampling_that_gave_up_makes_the_missing_reward_signal_the_first_suspect(monkeypatch, capsys):
    # BytedTsinghua-SIA/DAPO#22: the maintainers' answer was data too hard for the model; without the reward's values
    # the function scoring everything alike is not ruled out
    report = _inconclusive(monkeypatch, capsys, (
        b"(TaskRunner pid=1) ValueError: num_gen_batches=10 >= max_num_gen_batches=10. Generated too many. Please check "
        b"if your data are too difficult. You could also try set max_num_gen_batches=0 to enable endless trials.\n"))
    assert report["path"][1]["outcome"] == "groups_filtered_out"
    ids = [c["id"] for c in report["candidates"]]
    assert ids[0] == "reward.no_signal" and "reward.broken_fn" in ids


def test_deepspeeds_exit_line_without_its_prefix_is_still_a_killed_rank(monkeypatch, capsys):
    # THUDM/GLM#60: the paste starts inside the launcher's long command, so `[ERROR] [launch.py:…:sigkill_handler]` is lost
    report = _inconclusive(monkeypatch, capsys, (
        b", '2', '--src-seq-length', '512', '--fp16', '--model-parallel-size', '1', '--overwrite'] exits with return "
        b"code = -9\n"))
    assert report["path"][1]["outcome"] == "killed"
    assert [c["id"] for c in report["candidates"]][:2] == ["host.ram_exhausted", "sched.time_limit"]


def test_a_routers_503_alone_leaves_the_network_and_the_routers_version_as_suspects(monkeypatch, capsys):
    # THUDM/slime#683: the router answered 503 "No available workers" because slime registered its engines through an
    # endpoint the installed router had dropped; sgl-project/sglang#13894: the same words with the engines alive
    report = _inconclusive(monkeypatch, capsys, (
        b"(RolloutManager pid=519445) 2025-11-08 10:07:09 ERROR sglang_router_rs::response: src/middleware.rs:256: "
        b"request failed with server error\n"
        b"(RolloutManager pid=519445) Error: Server error '503 Service Unavailable' for url "
        b"'http://10.78.210.151:4674/generate'\n"))
    assert report["path"][1]["outcome"] == "server_unavailable"
    assert [c["id"] for c in report["candidates"]][:2] == ["infra.network", "deps.version_mismatch"]
    assert "list_workers" in report["root_cause"]["remedy"]


def test_the_same_paste_gets_the_same_candidates_in_every_process(tmp_path):
    # candidates of equal score rank in the catalog's order, not in a set's (string hashes differ per process)
    paste = b"(TaskRunner pid=1) step:1 - actor/pg_loss:0.1 - actor/grad_norm:0.2\n"
    seen = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run([sys.executable, "-m", "triage", "run", "-", "--json", "--no-cache"], input=paste,
                             capture_output=True, env=env, timeout=120, check=False)
        report = json.loads(out.stdout)
        seen.append([c["id"] for c in report["candidates"]])
    assert seen[0] == seen[1] and seen[0]
    # a candidate a finding stands behind (every health check that ran passed) ranks before those none does
    assert seen[0][0] == "healthy"


def test_an_inconclusive_verl_run_is_not_told_slimes_flags(tmp_path):
    from triage.api import triage

    # a verl driver's watchdog report and nothing else (verl-project/verl#3873's paste, shortened)
    (tmp_path / "job.log").write_text(
        "(TaskRunner pid=2119) step:12 - actor/pg_loss:0.01 - actor/grad_norm:0.3 - critic/score/mean:0.2\n"
        "(WorkerDict pid=3301) [rank3]:[E1023 10:20:03.551 ProcessGroupNCCL.cpp:632] [Rank 3] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=26, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for "
        "600021 milliseconds before timing out.\n", encoding="utf-8")
    report = triage(str(tmp_path))
    assert report.run.framework == "verl"
    assert report.root_cause.id == "inconclusive"
    assert "--dump-details" not in report.root_cause.remedy and report.root_cause.flags == []
    assert "trainer.rollout_data_dir" in report.root_cause.remedy


def test_a_verl_run_is_not_told_to_keep_slimes_first_rollout_lines(tmp_path):
    # verl-project/verl#2088: a verl `step:1` record; the step-1 invariants read slime's and the HF Trainer's records
    from triage.api import triage

    (tmp_path / "job.log").write_text(
        "(main_task pid=82052) step:1 - actor/kl_loss:0.001 - actor/kl_coef:0.001 - actor/pg_loss:0.02 - "
        "actor/ppo_kl:-0.000 - actor/grad_norm:0.017 - critic/score/mean:0.1\n", encoding="utf-8")
    report = triage(str(tmp_path))
    step1 = [n for n in report.not_checked if n.probe == "step1_invariants"]
    assert step1 and "this verl run's first records are not held to their exact-zero bar" in step1[0].reason
    assert "slime prints" not in (step1[0].command or "") and "`rollout 0:`" not in (step1[0].command or "")


def test_a_pasted_metric_table_alone_is_triaged_not_refused(monkeypatch, capsys):
    # huggingface/trl#5697 pasted only a table of its metrics
    table = ("Step  loss  grad_norm  reward_mean  clipped_ratio  mean_length\n"
             "1     0     0          0            1.0            256\n"
             "2     0     0          0            1.0            256\n"
             "...\n"
             "10    0     0          0            1.0            256\n")
    _stdin(monkeypatch, table.encode())
    rc = main(["run", "-", "--json", "--no-cache"])
    report = json.loads(capsys.readouterr().out)
    assert rc == 3 and report["root_cause"]["id"] == "inconclusive"
    assert report["path"][0]["outcome"] == "truncation"


# Pastes the field holds, each with the answer a user should get: (rc, verdict id, report field, its value)
FIELD_PASTES = {
    # huggingface/trl#1371 pasted the log_history of its trainer_state.json, cut at its first record
    "pasted log_history records": (
        '"log_history": [\n    {\n      "epoch": 0.0,\n      "grad_norm": NaN,\n      "learning_rate": 0.0,\n'
        '      "logits/chosen": NaN,\n      "loss": 9078019.2,\n      "rewards/accuracies": 0.0,\n'
        '      "step": 5\n    },\n',
        0, "numerics.nan_grad", "coverage.metrics.grad_norm.source", "log:pasted_records"),
    # OpenRLHF/OpenRLHF#516 pasted the autoscaler's warning and nothing the job logged after it
    "Ray's request it cannot schedule": (
        "(autoscaler +13s) Warning: The following resource request cannot be scheduled right now: "
        "{'GPU': 1.0, 'CPU': 1.0}. This is likely due to all cluster resources being claimed by actors.\n",
        3, "inconclusive", "path.0.outcome", "stuck_at_submission"),
    # NVIDIA/Megatron-LM#5026: Megatron's NaN check saw the non-finite grad norm; no metric record did
    "the trainer's own NaN check": (
        "Unexpected result nan on rank 3 at iteration #3 invocation #2 (message='found NaN in local grad norm for "
        "bucket #0 in backward pass before data-parallel communication collective')\n"
        "AssertionError: Rank 3: found NaN in local grad norm for bucket #0 in backward pass before data-parallel "
        "communication collective. Device: 3, node: node-1\n",
        0, "numerics.nan_grad", "path.1.outcome", "nan_check_failed"),
    # verl-project/verl#3450: the dataset's data_source column was empty
    "a reward function without a scorer for the data source": (
        '  File "/opt/tiger/myverl/verl/utils/reward_score/__init__.py", line 106, in default_compute_score\n'
        '    raise NotImplementedError(f"Reward function is not implemented for {data_source=}")\n'
        "NotImplementedError: Reward function is not implemented for data_source=\n",
        0, "reward.broken_fn", "run.framework", "verl"),
}


def _at(report: dict, dotted: str):
    value = report
    for key in dotted.split("."):
        value = value[int(key)] if isinstance(value, list) else value[key]
    return value


@pytest.mark.parametrize("name", list(FIELD_PASTES))
def test_a_field_paste_gets_the_answer_its_thread_found(monkeypatch, capsys, name):
    paste, rc, verdict, field, value = FIELD_PASTES[name]
    _stdin(monkeypatch, paste.encode())
    assert main(["run", "-", "--json", "--no-cache"]) == rc
    report = json.loads(capsys.readouterr().out)
    assert report["root_cause"]["id"] == verdict
    assert _at(report, field) == value


def test_a_paste_holding_only_a_shutdown_error_python_ignored_is_refused_saying_so(monkeypatch, capsys):
    # vllm-project/vllm#8208: `Exception ignored in: <function LLMEngine.__del__ …>` at the interpreter's exit
    _stdin(monkeypatch, b"Exception ignored in: <function LLMEngine.__del__ at 0x7f2ff66af060>\n"
                        b"Traceback (most recent call last):\n"
                        b'  File "/usr/local/lib/python3.10/site-packages/vllm/engine/llm_engine.py", line 492, in __del__\n'
                        b"ImportError: sys.meta_path is None, Python is likely shutting down\n")
    assert main(["run", "-", "--no-cache"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nothing in the pasted fragment reads as a training run" in err
    assert "Exception ignored in" in err and "triage-fragment" not in err


def test_slimes_own_check_of_the_arguments_against_the_hf_config_is_a_training_configuration_error(monkeypatch, capsys):
    # THUDM/slime#641: fixed in the config
    _stdin(monkeypatch, b"AssertionError: rope_theta in hf config 1000000.0 is not equal to rotary_base 10000, please "
                        b"check the config.\n")
    assert main(["run", "-", "--json", "--no-cache"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["root_cause"]["id"] == "config.training_error"
    assert "rotary_base 10000" in report["path"][1]["summary"]
