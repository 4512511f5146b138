"""error_signatures: every error message of the guides, the root before its cascade."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from probes.error_signatures import ErrorSignatures, SignatureTableError, load_signatures, parse_signatures
from triage.run import open_run

HEAD = """\
[2026-08-01 10:00:00] train.py:41 - Start training with args: actor_num_nodes=1 actor_num_gpus_per_node=8
(MegatronTrainRayActor pid=2345) [2026-08-01 10:00:20] actor.py:205 - Timer train_wait start
(RolloutManager pid=2290) [2026-08-01 10:01:00] rollout.py:310 - Finish rollout: ['<|im_start|>user\\nWhat is 2+3?<|im_end|>\\n<|im_start|>assistant\\n5<|im_end|>'], label: 5, reward: 1.0
"""

OOM_TRACEBACK = """\
(MegatronTrainRayActor pid=2345) Traceback (most recent call last):
(MegatronTrainRayActor pid=2345)   File "/root/slime/slime/backends/megatron_utils/actor.py", line 524, in train_actor
(MegatronTrainRayActor pid=2345)     train(rollout_id, self.model, self.optimizer, self.opt_param_scheduler, data_iterator, num_microbatches)
(MegatronTrainRayActor pid=2345)   File "/root/slime/slime/backends/megatron_utils/model.py", line 680, in train_one_step
(MegatronTrainRayActor pid=2345)     losses_reduced = forward_backward_func(
(MegatronTrainRayActor pid=2345) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 9.27 GiB. GPU 0 has a total capacity of 79.11 GiB of which 3.20 GiB is free. Including non-PyTorch memory, this process has 75.90 GiB memory in use. Of the allocated memory 70.12 GiB is allocated by PyTorch, and 4.33 GiB is reserved by PyTorch but unallocated.
"""

NCCL_ABORTS = """\
(MegatronTrainRayActor pid=2346) [rank1]:[E801 10:12:03.551 ProcessGroupNCCL.cpp:1616] [PG ID 0 PG GUID 0(default_pg) Rank 1] Process group watchdog thread terminated with exception: NCCL communicator was aborted on rank 1.
(MegatronTrainRayActor pid=2347) [rank2]:[E801 10:12:03.552 ProcessGroupNCCL.cpp:1616] [PG ID 0 PG GUID 0(default_pg) Rank 2] Process group watchdog thread terminated with exception: NCCL communicator was aborted on rank 2.
(MegatronTrainRayActor pid=2348) RuntimeError: NCCL communicator was aborted on rank 3.
"""


def make_run(tmp_path: Path, log: str):
    (tmp_path / "job.log").write_text(log, encoding="utf-8")
    return open_run(str(tmp_path))


def examine(tmp_path: Path, log: str):
    return ErrorSignatures().examine(make_run(tmp_path, log))


def line_of(log: str, needle: str) -> int:
    return next(i for i, line in enumerate(log.splitlines(), 1) if needle in line)


def test_cuda_oom_then_nccl_aborts_is_the_oom(tmp_path):
    log = HEAD + OOM_TRACEBACK + NCCL_ABORTS
    obs = examine(tmp_path, log)
    assert obs.outcome == "cuda_oom"
    ev = obs.evidence
    assert ev["signature"] == "cuda_oom"
    assert ev["line"]["where"].endswith(f"job.log:{line_of(log, 'torch.OutOfMemoryError')}")
    assert ev["line"]["source"].startswith("MegatronTrainRayActor pid=2345")
    assert ev["tried_to_allocate"] == "9.27 GiB"
    assert ev["gpu_total"] == "79.11 GiB" and ev["gpu_free"] == "3.20 GiB"
    cascade = {s["signature"]: s for s in ev["also_seen"]}
    assert cascade["nccl_abort"]["count"] == 3
    assert cascade["nccl_abort"]["role"] == "cascade"
    assert "cascade" in obs.summary
    assert obs.confidence >= 0.9


def test_nccl_abort_printed_before_the_oom_is_still_the_cascade(tmp_path):
    # Ray flushes actors' output in its own order: the other ranks' aborts may come first.
    log = HEAD + NCCL_ABORTS + OOM_TRACEBACK
    obs = examine(tmp_path, log)
    assert obs.outcome == "cuda_oom"
    assert obs.evidence["line"]["where"].endswith(f"job.log:{line_of(log, 'torch.OutOfMemoryError')}")


def test_nccl_abort_alone_decides_with_lower_confidence(tmp_path):
    log = HEAD + NCCL_ABORTS
    obs = examine(tmp_path, log)
    assert obs.outcome == "nccl_abort"
    assert obs.evidence["count"] == 3
    assert obs.evidence["first_where"].endswith(f"job.log:{line_of(log, 'aborted on rank 1')}")
    assert obs.evidence["last_where"].endswith(f"job.log:{line_of(log, 'aborted on rank 3')}")
    assert obs.evidence["ranks"] == [1, 2, 3]
    assert obs.confidence < 0.9


def test_nccl_watchdog_timeout_is_nccl_abort(tmp_path):
    log = HEAD + (
        "(MegatronTrainRayActor pid=2346) [rank1]:[E801 10:22:00.100 ProcessGroupNCCL.cpp:632] [Rank 1] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=812, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) "
        "ran for 600046 milliseconds before timing out.\n"
    )
    obs = examine(tmp_path, log)
    assert obs.outcome == "nccl_abort"
    assert obs.evidence["ranks"] == [1]


# One realistic line (or block) per outcome, as the frameworks print them.
CASES = [
    (
        "host_oom_killed",
        "ray_memory_monitor",
        "(raylet) ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.\n"
        "(raylet) Memory on the node (IP: 10.0.0.3, ID: 7c1f) where the task (actor ID: 3f2a, name=RolloutManager.__init__, "
        "pid=2290, memory used=58.21GB) was running was 60.80GB / 62.00GB (0.980645), which exceeds the memory usage threshold of 0.95.\n",
        'Task was killed due to the node',
    ),
    (
        "host_oom_killed",
        "sigkill_exitcode",
        textwrap.dedent(
            """\
            torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
            ============================================================
            train.py FAILED
            ------------------------------------------------------------
            Root Cause (first observed failure):
            [0]:
              time      : 2026-08-01_10:30:12
              host      : node-3
              rank      : 0 (local_rank: 0)
              exitcode  : -9 (pid: 4242)
              error_file: <N/A>
              traceback : Signal 9 (SIGKILL) received by PID 4242
            ============================================================
            """
        ),
        'exitcode  : -9',
    ),
    (
        "illegal_memory_access",
        "illegal_memory_access",
        "(SGLangEngine pid=3101) [2026-08-01 10:15:00 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        "(SGLangEngine pid=3101) RuntimeError: CUDA error: an illegal memory access was encountered\n",
        'an illegal memory access',
    ),
    (
        "engine_port_conflict",
        "engine_get_model_info",
        "(SGLangEngine pid=3101) requests.exceptions.ConnectionError: HTTPConnectionPool(host='10.0.0.3', port=15001): "
        "Max retries exceeded with url: /get_model_info (Caused by NewConnectionError('<urllib3.connection.HTTPConnection "
        "object at 0x7f2a>: Failed to establish a new connection: [Errno 111] Connection refused'))\n",
        'Max retries exceeded',
    ),
    (
        "engine_port_conflict",
        "address_in_use",
        "(SGLangEngine pid=3102) ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 15001): "
        "address already in use\n",
        'address already in use',
    ),
    (
        "inductor_cache",
        "inductor_json_decode",
        "(MegatronTrainRayActor pid=2345) Traceback (most recent call last):\n"
        '(MegatronTrainRayActor pid=2345)   File "/usr/local/lib/python3.12/dist-packages/torch/_inductor/codecache.py", line 1200, in load\n'
        "(MegatronTrainRayActor pid=2345)     data = json.loads(f.read())\n"
        "(MegatronTrainRayActor pid=2345) json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)\n",
        'JSONDecodeError',
    ),
    (
        "hf_model_not_found",
        "hf_config_missing",
        "(MegatronTrainRayActor pid=2350) OSError: /root/Qwen3-4B does not appear to have a file named config.json. "
        "Checkout 'https://huggingface.co//root/Qwen3-4B/tree/None' for available files.\n",
        'does not appear to have',
    ),
    (
        "no_pad_token",
        "no_pad_token",
        "ValueError: Asking to pad but the tokenizer does not have a padding token. Please select a token to use as "
        "`pad_token` `(tokenizer.pad_token = tokenizer.eos_token e.g.)` or add a new pad token via "
        "`tokenizer.add_special_tokens({'pad_token': '[PAD]'})`.\n",
        'Asking to pad',
    ),
    (
        "eos_boundary",
        "eos_boundary",
        "ValueError: Content end boundary is before start boundary.\n",
        'Content end boundary',
    ),
    (
        "ref_load_missing",
        "ref_load_missing",
        "FileNotFoundError: ref_load /root/ckpt/Qwen3-4B_torch_dist does not exist, please check the path.\n",
        'ref_load /root',
    ),
    (
        "nan_check_failed",
        "megatron_nan_check",
        "(MegatronTrainRayActor pid=2345) RuntimeError: Rank 0, node node-3, device 0, iteration 3: Unexpected result nan "
        "(message='found NaN in local grad norm for bucket #0 in backward pass before data-parallel communication collective')\n",
        'found NaN',
    ),
]


@pytest.mark.parametrize(("outcome", "signature", "block", "needle"), CASES, ids=[c[1] for c in CASES])
def test_each_guide_error_is_recognised(tmp_path, outcome, signature, block, needle):
    log = HEAD + block
    obs = examine(tmp_path, log)
    assert obs.outcome == outcome, obs.summary
    assert obs.evidence["signature"] == signature
    assert obs.evidence["count"] >= 1
    assert obs.evidence["explanation"]
    assert obs.evidence["guide"]
    # the quoted line is the one that carries the signature, where the log has it
    assert needle in obs.evidence["line"]["text"]
    assert obs.evidence["line"]["where"].endswith(f"job.log:{line_of(log, needle)}")


def test_hf_model_not_found_says_whether_the_model_exists(tmp_path):
    model = tmp_path / "models" / "Qwen3-4B"
    model.mkdir(parents=True)
    (model / "config.json").write_text('{"model_type": "qwen3"}', encoding="utf-8")
    log = HEAD + (
        "(MegatronTrainRayActor pid=2350) OSError: /mnt/models/Qwen3-4B does not appear to have a file named config.json. "
        "Checkout 'https://huggingface.co//mnt/models/Qwen3-4B/tree/None' for available files.\n"
    )
    obs = examine(tmp_path, log)
    assert obs.outcome == "hf_model_not_found"
    assert obs.evidence["model_path"] == "/mnt/models/Qwen3-4B"
    assert obs.evidence["exists_here"] is True  # it exists: a concurrent read, not a wrong path


def test_json_decode_error_outside_inductor_is_not_a_cache_problem(tmp_path):
    log = HEAD + (
        "(RolloutManager pid=2290) Traceback (most recent call last):\n"
        '(RolloutManager pid=2290)   File "/root/slime/slime/rollout/rm_hub/remote.py", line 40, in remote_rm\n'
        "(RolloutManager pid=2290)     return json.loads(text)\n"
        "(RolloutManager pid=2290) json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)\n"
    )
    obs = examine(tmp_path, log)
    assert obs.outcome == "other_error"
    assert "JSONDecodeError" in obs.evidence["line"]["text"]


def test_unlisted_error_is_other_error_with_the_line_quoted(tmp_path):
    log = HEAD + (
        "(MegatronTrainRayActor pid=2345) Traceback (most recent call last):\n"
        '(MegatronTrainRayActor pid=2345)   File "/root/slime/train.py", line 88, in <module>\n'
        "(MegatronTrainRayActor pid=2345)     train(args)\n"
        "(MegatronTrainRayActor pid=2345) AssertionError: rollout_function_path my_rollout.generate could not be imported\n"
    )
    obs = examine(tmp_path, log)
    assert obs.outcome == "other_error"
    assert obs.evidence["line"]["text"].startswith("AssertionError: rollout_function_path")
    assert obs.evidence["line"]["source"].startswith("MegatronTrainRayActor pid=2345")


def test_clean_log_is_none(tmp_path):
    log = HEAD + (
        "(MegatronTrainRayActor pid=2345) [2026-08-01 10:02:00] model.py:512 - step 0: {'train/loss': 0.012, "
        "'train/grad_norm': 0.31, 'train/ppo_kl': 0.0}\n"
    )
    obs = examine(tmp_path, log)
    assert obs.outcome == "none"
    assert obs.evidence["log_files"] == 1


def test_signature_table_covers_every_outcome():
    outcomes = {s.outcome for s in load_signatures()}
    assert outcomes == set(ErrorSignatures.outcomes) - {"other_error", "none"}


def test_a_malformed_signature_table_is_refused_naming_the_entry():
    with pytest.raises(SignatureTableError, match="'broken'.*outcome"):
        parse_signatures({"signatures": [{"id": "broken", "outcome": "melted", "patterns": ["x"]}]})
    with pytest.raises(SignatureTableError, match="'bad_rx'.*bad regex"):
        parse_signatures({"signatures": [{"id": "bad_rx", "outcome": "cuda_oom", "patterns": ["(unclosed"]}]})


def test_missing_file_under_the_runs_ref_load_is_ref_load_missing(tmp_path):
    (tmp_path / "cmdline.txt").write_text(
        "python3 train.py --use-kl-loss --ref-load /mnt/ckpt/Qwen3-4B_ref --load /mnt/ckpt/run7\n", encoding="utf-8"
    )
    log = HEAD + (
        "(MegatronTrainRayActor pid=2345) Traceback (most recent call last):\n"
        '(MegatronTrainRayActor pid=2345)   File "/root/Megatron-LM/megatron/training/checkpointing.py", line 1200, in load_checkpoint\n'
        "(MegatronTrainRayActor pid=2345)     state_dict = torch.load(checkpoint_name, map_location='cpu')\n"
        "(MegatronTrainRayActor pid=2345) FileNotFoundError: [Errno 2] No such file or directory: "
        "'/mnt/ckpt/Qwen3-4B_ref/iter_0000000/mp_rank_00/model_optim_rng.pt'\n"
    )
    obs = examine(tmp_path, log)
    assert obs.outcome == "ref_load_missing"
    assert obs.evidence["signature"] == "ref_load_path_missing"
    assert "/mnt/ckpt/Qwen3-4B_ref/iter_0000000" in obs.evidence["line"]["text"]


def test_missing_file_elsewhere_stays_other_error(tmp_path):
    (tmp_path / "cmdline.txt").write_text("python3 train.py --use-kl-loss --ref-load /mnt/ckpt/Qwen3-4B_ref\n", encoding="utf-8")
    log = HEAD + "FileNotFoundError: Prompt dataset path '/root/dapo-math-17k.jsonl' does not exist.\n"
    obs = examine(tmp_path, log)
    assert obs.outcome == "other_error"


# The error-message rows of the guides, verbatim (002 Common Errors table, 004 Q&A).
GUIDE_ROWS = [
    ("exitcode: -9", "host_oom_killed"),
    ("CUDA out of memory", "cuda_oom"),
    ("RuntimeError: NCCL communicator was aborted", "nccl_abort"),
    ("ValueError: Asking to pad but the tokenizer does not have a padding token", "no_pad_token"),
    ("Content end boundary is before start boundary", "eos_boundary"),
    ("Max retries exceeded with url: /get_model_info (Caused by NewConnectionError", "engine_port_conflict"),
    ("an illegal memory access was encountered", "illegal_memory_access"),
]


@pytest.mark.parametrize(("text", "outcome"), GUIDE_ROWS)
def test_every_guide_error_row_has_a_signature(text, outcome):
    sig = next((s for s in load_signatures() if s.matches(text)), None)
    assert sig is not None and sig.outcome == outcome
