"""Which files of a run directory are its logs, and in which order they are read: the order decides which error
came first (triage/run/discover.py, `_name_key` and `_console_by_content`)."""

from __future__ import annotations

import json

from triage.cli import main
from triage.run import open_run

# huggingface/trl#3408, two pasted blocks: vLLM's NCCL failure at 09:57, then the trainer's TCPStore client timing
# out at 10:05 on the port the failed side never served
VLLM_FIRST = """\
INFO 05-16 09:57:41 [pynccl.py:69] vLLM is using nccl==2.21.5
ERROR 05-16 09:57:41 [core.py:459] Invocation of collective_rpc method failed
ERROR 05-16 09:57:41 [core.py:459] RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)
"""
TRAINER_LATER = """\
[E516 10:05:30.089184418 socket.cpp:1023] [c10d] The client socket has timed out after 300000ms while trying to connect to (0.0.0.0, 51216).
"""


def _names(run) -> list[str]:
    return [p.name for p in run.artifacts.logs]


def test_a_log_is_read_before_its_numbered_continuations(tmp_path):
    for name in ("job-2.log", "job.log", "job-10.log", "job-3.log"):
        (tmp_path / name).write_text("INFO start\n", encoding="utf-8")
    assert _names(open_run(str(tmp_path))) == ["job.log", "job-2.log", "job-3.log", "job-10.log"]


def test_numbered_logs_in_number_order(tmp_path):
    for name in ("worker-10.log", "worker-2.log", "worker-1.log"):
        (tmp_path / name).write_text("INFO start\n", encoding="utf-8")
    assert _names(open_run(str(tmp_path))) == ["worker-1.log", "worker-2.log", "worker-10.log"]


def test_the_first_pasted_block_holds_the_first_error(tmp_path, capsys):
    (tmp_path / "job.log").write_text(VLLM_FIRST, encoding="utf-8")
    (tmp_path / "job-2.log").write_text(TRAINER_LATER, encoding="utf-8")
    rc = main(["run", str(tmp_path), "--json"])
    report = json.loads(capsys.readouterr().out)
    # the loopback timeout is the failed side's consequence, not the network's, and not the first error
    assert report["root_cause"]["id"] != "infra.network"
    signature = next(s for s in report["path"] if s["probe"] == "error_signatures")
    assert signature["outcome"] == "other_error"
    assert "NCCL error: unhandled cuda error" in signature["summary"] and "job.log:3" in signature["summary"]
    assert rc == 0


def test_a_loopback_connect_to_0000_is_no_network_failure(tmp_path, capsys):
    (tmp_path / "job.log").write_text(TRAINER_LATER, encoding="utf-8")
    main(["run", str(tmp_path), "--json"])
    report = json.loads(capsys.readouterr().out)
    signature = next(s for s in report["path"] if s["probe"] == "error_signatures")
    assert signature["outcome"] == "port_unreachable"
    assert report["root_cause"]["id"] != "infra.network"


# hebiao064/verl's recipe/spin/failed_log_for_sglang.md: a verl console committed as Markdown
SPIN_MD = """\
(TaskRunner pid=1047581) Traceback (most recent call last):
(TaskRunner pid=1047581)   File "/verl/workers/rollout/sglang_rollout/sglang_rollout.py", line 152, in __init__
(TaskRunner pid=1047581)     broadcast_pyobj(...)
(TaskRunner pid=1047581)   File "/usr/local/lib/python3.10/dist-packages/sglang/srt/utils.py", line 861, in broadcast_pyobj
(TaskRunner pid=1047581)     dist.broadcast(tensor_size, src=src, group=dist_group)
(TaskRunner pid=1047581) RuntimeError: No backend type associated with device type cpu
"""


def test_a_console_saved_as_markdown_is_read(tmp_path):
    (tmp_path / "failed_log_for_sglang.md").write_text(SPIN_MD, encoding="utf-8")
    run = open_run(str(tmp_path))
    assert _names(run) == ["failed_log_for_sglang.md"]


def test_a_readme_with_a_traceback_is_no_log(tmp_path):
    (tmp_path / "README.md").write_text("# Known errors\n\n```\n" + SPIN_MD + "```\n", encoding="utf-8")
    (tmp_path / "notes.md").write_text(SPIN_MD, encoding="utf-8")  # not named for a console
    (tmp_path / "train.log").write_text("INFO start\n", encoding="utf-8")
    assert _names(open_run(str(tmp_path))) == ["train.log"]


def test_a_console_without_an_extension_is_read_and_a_binary_is_not(tmp_path):
    (tmp_path / "slurm-4121").write_text(SPIN_MD, encoding="utf-8")
    (tmp_path / "latest").write_text("global_step100", encoding="utf-8")  # DeepSpeed's pointer to its last checkpoint
    (tmp_path / "blob").write_bytes(b"\0\x01INFO step 3\0" * 10)
    assert _names(open_run(str(tmp_path))) == ["slurm-4121"]
