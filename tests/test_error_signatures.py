"""error_signatures: every error message of the guides, the root before its cascade."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from probes.error_signatures import ErrorSignatures, SignatureTableError, load_signatures, parse_signatures
from triage.errors import Unavailable
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
        "killed",
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
        # (two processes at once: the multi-node read the 004 guide describes)
        "(MegatronTrainRayActor pid=2351) OSError: /root/Qwen3-4B does not appear to have a file named config.json. "
        "Checkout 'https://huggingface.co//root/Qwen3-4B/tree/None' for available files.\n"
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


def test_one_process_that_cannot_find_a_model_not_shown_to_exist_is_only_a_suspect(tmp_path, capsys):
    # openvla/openvla#82 (a gated repository), xyz9911/FLAME#2 (an offline setting): the same words as a concurrent read
    import json

    from triage.cli import main

    line = ("OSError: Can't load tokenizer for 'meta-llama/Llama-2-7b-hf'. If you were trying to load it from "
            "'https://huggingface.co/models', make sure you don't have a local directory with the same name.\n")
    obs = examine(tmp_path, line)
    assert obs.outcome == "hf_model_unconfirmed" and "gated or private repository" in obs.summary
    (tmp_path / "job.log").write_text(line, encoding="utf-8")
    assert main(["run", str(tmp_path / "job.log"), "--json", "--no-cache"]) == 3
    report = json.loads(capsys.readouterr().out)
    assert report["root_cause"]["id"] == "inconclusive"
    assert report["candidates"][0]["id"] == "fs.concurrent_hf_read" and report["candidates"][0]["supports"]


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
    from probes.error_signatures import DERIVED_OUTCOMES

    assert outcomes == set(ErrorSignatures.outcomes) - {"other_error", "none", *DERIVED_OUTCOMES}


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
    ("exitcode: -9", "killed"),  # 002 reads it as RAM; alone it is only a SIGKILL (ROOT_CAUSES.md, host.ram_exhausted)
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


# --- field signatures: infrastructure, scheduler, versions, budgets ---------------------------
# One line (or block) per framework wording, as the named source prints it.
FIELD_CASES = [
    # infra.network
    ("network_failure", "[rank9]:gpu-node-2:2345:2410 [1] NCCL WARN "
     "socketStartConnect: Connect to 10.0.0.11<43211> failed : Software caused connection abort\n"),  # NVIDIA/nccl socket.cc
    ("connection_closed", "(WorkerDict pid=812, ip=10.0.0.5) ConnectionResetError: [Errno 104] Connection reset by peer\n"),  # verl worker
    ("connection_closed", "[rank3]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer "
     "[10.0.0.7]:29500\n"),  # torchrun / TRL
    ("network_failure", "socket.gaierror: [Errno -2] Name or service not known\n"),  # OpenRLHF vllm_engine host lookup
    # a 503 came from a server that was reached: why it had nothing to serve with is not in the words
    ("server_unavailable", "requests.exceptions.HTTPError: 503 Server Error: Service Unavailable for url: http://10.0.0.3:30000/generate\n"),
    # infra.gpu_fault
    ("gpu_fault", "(MegatronTrainRayActor pid=2345, ip=10.0.0.12) RuntimeError: CUDA error: uncorrectable ECC error encountered\n"),
    ("gpu_fault", "NVRM: Xid (PCI:0000:3b:00): 79, pid=2345, name=python3, GPU has fallen off the bus.\n"),
    # infra.disk_full
    ("disk_full", "(MegatronTrainRayActor pid=2345) OSError: [Errno 28] No space left on device: '/mnt/ckpt/iter_0000200/__0_0.distcp'\n"),
    ("disk_full", "[rank0]: RuntimeError: [enforce fail at inline_container.cc:603] . unexpected pos 1664 vs 1558; "
     "OSError: [Errno 122] Disk quota exceeded\n"),
    # sched.time_limit
    ("sched_ended", "slurmstepd: error: *** JOB 88123 ON gpu-node-07 CANCELLED AT 2026-08-10T18:00:14 DUE TO TIME LIMIT ***\n"),
    ("terminated", "W0810 18:00:14.118000 4123 torch/distributed/elastic/agent/server/api.py:704] Received Signals.SIGTERM "
     "death signal, shutting down workers\n"),
    # deps.version_mismatch
    ("version_mismatch", "ImportError: cannot import name 'Qwen3MoeForCausalLM' from 'transformers' "
     "(/usr/local/lib/python3.10/dist-packages/transformers/__init__.py)\n"),
    ("version_mismatch", "(WorkerDict pid=812, ip=10.0.0.5) AttributeError: module 'vllm.distributed.parallel_state' has no "
     "attribute 'get_tensor_model_parallel_group'\n"),
    # config.sample_exceeds_limits
    ("sample_too_long",  # THUDM/slime slime/backends/megatron_utils/data.py (#1823), as THUDM/slime#1839 shows it
     "(MegatronTrainRayActor pid=2345) Traceback (most recent call last):\n"
     '(MegatronTrainRayActor pid=2345)   File "/root/slime/slime/backends/megatron_utils/data.py", line 376, in get_data_iterator\n'
     "(MegatronTrainRayActor pid=2345)     partitions = _get_capped_partitions(seq_lens, num_mbs, args.max_tokens_per_gpu)\n"
     '(MegatronTrainRayActor pid=2345)   File "/root/slime/slime/backends/megatron_utils/data.py", line 307, in _get_capped_partitions\n'
     '(MegatronTrainRayActor pid=2345)     raise AssertionError("This should never happen.")\n'
     "(MegatronTrainRayActor pid=2345) AssertionError: This should never happen.\n"),
    ("sample_too_long", "(SGLangEngine pid=3101) ValueError: Requested token count exceeds the model's maximum context length "
     "of 32768 tokens. You requested a total of 33012 tokens: 1012 tokens from the input messages and 32000 tokens for the completion.\n"),
    ("sample_too_long", "(WorkerDict pid=812) ValueError: The decoder prompt (length 40960) is longer than the maximum model length of 32768. "
     "Make sure that `max_model_len` is no smaller than the number of text tokens.\n"),  # vLLM processor.py
    ("sample_too_long",  # vLLM's scheduler, a warning before the request ends with no output (huggingface/trl#3180)
     "WARNING 03-30 00:24:16 [_logger.py:72] Input prompt (8128 tokens) is too long and exceeds limit of 6000\n"),
    ("sample_too_long", "(WorkerDict pid=812) AssertionError: max_token_len must be greater than the sequence length. "
     "Got max_token_len=16384 and max_seq_len=20480\n"),  # verl seqlen_balancing.py
    ("sample_too_long",  # vllm/config/scheduler.py SchedulerConfig._verify_args, as verl-project/verl#7624 shows it
     "ValidationError: 1 validation error for SchedulerConfig\n"
     "  Value error, max_num_batched_tokens (8192) is smaller than max_model_len (131072). This effectively limits the "
     "maximum sequence length to max_num_batched_tokens.\n"),
    ("killed",  # DeepSpeed's launcher reporting a rank ended by SIGKILL (2U1/Qwen-VL-Series-Finetune#79)
     "[2025-01-14 10:12:07,391] [ERROR] [launch.py:325:sigkill_handler] ['/usr/bin/python3', '-u', 'train.py'] exits with "
     "return code = -9\n"),
    ("killed", "已杀死\n"),  # bash's `Killed` in a Chinese locale (danijar/dreamerv3#203)
    ("insufficient_gpus",  # vLLM's Ray executor giving up on its placement group (gpustack/gpustack#5181)
     "(EngineCore_DP0 pid=89) ERROR 04-20 18:08:14 [core.py:1100] ValueError: Cannot provide a placement group requiring "
     "4.0 GPUs (placement_group_specs=[{'GPU': 1.0}, {'GPU': 1.0}, {'GPU': 1.0}, {'GPU': 1.0}]) within 1800 seconds.\n"),
    ("insufficient_gpus",  # NeMo-RL's check, printed at each placement retry without its type (NVIDIA-NeMo/RL#271)
     "Not enough GPUs available. Requested 16 GPUs, but only 8 are available in the cluster.\n"),
    ("degenerate_groups",  # TRL's batch check pasted without `ValueError:` (modelscope/ms-swift#3980)
     "The global train batch size (1 x 1) must be evenly divisible by the number of generations per prompt (1). Given "
     "the current train batch size, the valid values for the number of generations are: [].\n"),
    ("killed",  # a non-interactive bash reporting a killed job with its command (modelscope/ms-swift#195)
     "train.sh: line 12: 40871 Killed                  CUDA_VISIBLE_DEVICES=0 python3 train.py --lr 1e-6\n"),
    ("nccl_abort",  # c10's backtrace head of the watchdog's timeout, all a paste kept of it (NovaSky-AI/SkyRL#757)
     "(FSDPPolicyWorkerBase pid=4060712) Exception raised from checkTimeout at "
     "/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:688 (most recent call first):\n"),
    ("cuda_oom",  # a notebook's header names torch's OOM above a traceback the paste cut (unslothai/unsloth#3373)
     "OutOfMemoryError                          Traceback (most recent call last)\n"),
    ("version_mismatch",  # pickle's find_class: a checkpoint's class the installed megatron-core lacks
     "AttributeError: Can't get attribute 'MCoreMetadata' on "
     "<module 'megatron.core.dist_checkpointing.strategies.torch'>\n"),  # NVIDIA-NeMo/Megatron-Bridge#1210
    ("version_mismatch",  # a name the installed diffusers does not have (huggingface/trl#1293)
     "ImportError: cannot import name 'convert_state_dict_to_diffusers' from 'diffusers.utils'\n"),
    # an engine's memory under torch_memory_saver (csrc/torch_memory_saver.cpp; CUresult 2 = CUDA_ERROR_OUT_OF_MEMORY)
    ("cuda_oom", " [torch_memory_saver.cpp] CUresult error  result=2 file=csrc/torch_memory_saver.cpp func=cu_mem_create line=103\n"),
    # host.ram_exhausted with memory evidence
    ("host_oom_killed", "slurmstepd: error: Detected 1 oom_kill event in StepId=88123.0. Some of the step tasks have been OOM Killed.\n"),
    ("host_oom_killed", "[Thu Aug 10 08:17:31 2026] Out of memory: Killed process 4189 (python3) total-vm:301234567kB, "
     "anon-rss:251823104kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:500000kB oom_score_adj:0\n"),
    # --- the same failures in other libraries' and schedulers' words -------------------------------
    # host.ram_exhausted: Slurm's memory enforcement (was read as the scheduler's time limit)
    ("host_oom_killed", "slurmstepd: error: Job 42664148 exceeded memory limit (10889240 > 4194304), being killed\n"),  # jmonlong/PopSV#7
    ("host_oom_killed", "slurmstepd: error: Exceeded job memory limit\n"),  # SchedMD/slurm slurmstepd; jmonlong/PopSV#7
    ("host_oom_killed", "srun: error: udc-ba26-19: task 0: Out Of Memory\n"),  # SchedMD/slurm srun; pepkit/geofetch#13
    ("host_oom_killed", "      Reason:       OOMKilled\n"),  # kubectl describe pod
    # NCCL's bootstrap finding no interface, quoted by a failed init (marin-community/marin#7018)
    ("network_failure", "invalid usage ... Last NCCL warning(error): 'Bootstrap : no socket interface found'\n"),
    # runc starting a container whose memory limit is below its init's (kubeflow/trainer#1661)
    ("host_oom_killed", "Error: failed to create containerd task: failed to create shim task: OCI runtime create failed: "
                        "runc create failed: unable to start container process: container init was OOM-killed (memory "
                        "limit too low?): unknown\n"),
    # host.ram_exhausted: a checkpoint's mmap refused (c10 MapAllocator; vllm-project/vllm#759) and Ray 1.x's monitor
    ("host_oom_killed", "RuntimeError: unable to mmap 16933256392 bytes from file </m/model.safetensors>: Cannot allocate "
     "memory (12)\n"),
    ("host_oom_killed", "ray.exceptions.RayTaskError(RayOutOfMemoryError): ray::IMPALA.train() (pid=19168, ip=172.31.26.49)\n"),
    # deps.version_mismatch: DeepSpeed's ops built for another torch (daswer123/xtts-webui#111), torch 2.6's weights-only
    # load of an older checkpoint (modelscope/ms-swift#5808)
    ("version_mismatch", "RuntimeError: PyTorch version mismatch! DeepSpeed ops were compiled and installed with a different "
     "version than what is being used at runtime. Please re-install DeepSpeed or switch torch versions. Install torch "
     "version=2.2, Runtime torch version=2.1\n"),
    ("version_mismatch", "_pickle.UnpicklingError: Weights only load failed. This file can still be loaded, to do so you have "
     "two options\n"),
    # SGLang's dependency check at start, and a version lookup of a distribution renamed (flashinfer-ai/flashinfer#794)
    ("version_mismatch", "Exception: flashinfer with minimum required version 0.1.6 is not installed. Please uninstall the old "
     "version and reinstall the latest version by following the instructions at https://docs.flashinfer.ai/installation.html.\n"),
    ("version_mismatch", "importlib.metadata.PackageNotFoundError: No package metadata was found for flashinfer\n"),
    # infra.disk_full: torch.save's stream writer (pytorch caffe2/serialize/inline_container.cc; zai-org/ChatGLM-6B#1166)
    ("disk_full", "[rank0]: RuntimeError: [enforce fail at inline_container.cc:471] . PytorchStreamWriter failed writing file "
     "data/3: file write failed\n"),
    # infra.network: NCCL >= 2.19 socket wording (NVIDIA/nccl misc/socket.cc, os/linux.cc), the c10d TCPStore client
    ("network_failure", "[2026-02-25 16:33:59] gpu-node-6:3996242:3996242 [2] misc/socket.cc:578 NCCL WARN socketPollConnect: "
     "connect to 10.0.0.249<54709> returned Connection refused, exceeded error retry count after 35 attempts\n"),
    ("network_failure", "gpu-node-3:2387398:2387398 [3] os/linux.cc:200 NCCL WARN ncclOsSocketPollConnect: connect to "
     "10.0.0.249<37857> returned Connection refused, exceeded error retry count after 35 attempts\n"),
    ("network_failure", "torch.distributed.DistNetworkError: The client socket has timed out after 1800000ms while trying to "
     "connect to (10.0.0.1, 29500).\n"),  # pytorch torch/csrc/distributed/c10d/socket.cpp
    # the same connect timeout as torch < 2.2 logs it before raising (OpenRLHF/OpenRLHF#265)
    ("network_failure", "(RayWorkerVllm pid=207931, ip=10.0.1.75) [E socket.cpp:922] [c10d] The client socket has timed out "
     "after 1800s while trying to connect to (172.17.0.2, 44737).\n"),
    # infra.gpu_fault: CUDA runtime cudaErrorNvlinkUncorrectable
    ("gpu_fault", "(WorkerDict pid=812, ip=10.0.0.5) RuntimeError: CUDA error: uncorrectable NVLink error detected during the execution\n"),
    # deps.version_mismatch: the libraries' own version checks
    ("version_mismatch", "ValueError: The checkpoint you are trying to load has model type `qwen3_moe` but Transformers does not "
     "recognize this architecture. This could be because of an issue with the checkpoint, or because your version of "
     "Transformers is out of date.\n"),  # transformers models/auto/configuration_auto.py; vllm-project/vllm#36217
    ("version_mismatch", "ImportError: tokenizers>=0.21,<0.22 is required for a normal functioning of this module, but found "
     "tokenizers==0.22.2.\n"),  # transformers utils/versions.py require_version
    ("version_mismatch", "AttributeError: _ARRAY_API not found\n"),  # NumPy 2 under a NumPy 1.x build; QwenAudio/CosyVoice#1398
    ("version_mismatch", "ImportError: numpy.core.multiarray failed to import\n"),  # NumPy C-API; dillonalaird/shared_numpy#10
    ("version_mismatch", "RuntimeError: The NVIDIA driver on your system is too old (found version 11040). Please update your GPU "
     "driver by downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx\n"),  # c10/cuda
    ("version_mismatch", "RuntimeError: CUDA error: CUDA driver version is insufficient for CUDA runtime version\n"),  # cudaErrorInsufficientDriver
    ("version_mismatch", "RuntimeError: CUDA error: no kernel image is available for execution on the device\n"),  # cudaErrorNoKernelImageForDevice
    # the driver older than the toolkit that compiled the PTX (huggingface/text-generation-inference#1026), a kernel
    # image the driver cannot load (triton-lang/triton#2971), NVML's code for a driver and library of two versions
    # (tensorpack/tensorpack#1244)
    ("version_mismatch", "RuntimeError: CUDA error: the provided PTX was compiled with an unsupported toolchain.\n"),
    # torch's own cuDNN check (RaleLee/Co-GAT#2) and its dispatcher refusing a package's operator of another release
    # (kohya-ss/sd-scripts#401)
    ("version_mismatch", "RuntimeError: cuDNN version incompatibility: PyTorch was compiled  against (8, 5, 0) but found "
                         "runtime version (8, 3, 3). PyTorch already comes bundled with cuDNN.\n"),
    ("version_mismatch", "RuntimeError: xformers::efficient_attention_forward_cutlass() expected at most 8 argument(s) but "
                         "received 13 argument(s). Declaration: xformers::efficient_attention_forward_cutlass(Tensor "
                         "query) -> (Tensor, Tensor)\n"),
    # NCCL's IB async event of a GID table rewritten (NVIDIA/nccl#394), AWS's OFI plugin without a provider
    # (aws/aws-ofi-nccl#1020), and torch < 2.2's c10d client giving up (pytorch/pytorch#85300)
    ("network_failure", "node01: host:106:196 [0] transport/net_ib.cc:73 NCCL WARN NET/IB : Got async event : GID table "
                        "change\n"),
    ("network_failure", "ip-172-31-3-90:1929:1937 [0] nccl_net_ofi_rdma_init:7978 NCCL WARN NET/OFI OFI fi_getinfo() "
                        "call failed: No data available\n"),
    ("network_failure", "[E socket.cpp:610] [c10d] The client socket has failed to connect to any network address of "
                        "(192.168.1.99, 1234).\n"),
    # the caching allocator's assert on its out-of-memory path (fal-ai/fal#478)
    ("cuda_oom", 'RuntimeError: NVML_SUCCESS == r INTERNAL ASSERT FAILED at "../c10/cuda/CUDACachingAllocator.cpp":830, '
                 "please report a bug to PyTorch.\n"),
    ("version_mismatch", "RuntimeError: Triton Error [CUDA]: device kernel image is invalid\n"),
    ("version_mismatch", "tensorpack.utils.nvml.NvmlException: NVML_ERROR_LIB_RM_VERSION_MISMATCH\n"),
    # config.batch_size_mismatch
    ("batch_size_mismatch", "(WorkerDict pid=812, ip=10.0.0.5) AssertionError: normalized ppo_mini_batch_size 8 should be divisible "
     "by ppo_micro_batch_size_per_gpu 16\n"),  # verl-project/verl verl/workers/fsdp_workers.py (#833)
    ("batch_size_mismatch", "ValueError: generation_batch_size (1) must be divisible by num_generations (2).\n"),  # trl grpo_config.py
    # config.sample_exceeds_limits: SGLang's scheduler check, as the rollout client prints the 400 body
    ("sample_too_long", "(RolloutManager pid=2290) {'object': 'error', 'message': 'Input length (160062 tokens) exceeds the maximum "
     "allowed length (59862 tokens). Use a shorter input or enable --allow-auto-truncate.', 'type': 'BadRequestError', "
     "'param': None, 'code': 400}\n"),  # sgl-project/sglang srt/managers/utils.py validate_input_length
    # OOM family
    ("cuda_oom", "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`\n"),  # ATen CublasHandlePool.cpp
    ("cuda_oom", "        rtMalloc execute failed, reason=[driver error:out of memory][FUNC:FuncErrorReason]"
     "[FILE:error_message_manage.cc][LINE:53]\n"),  # CANN runtime under torch_npu; hiyouga/LlamaFactory#6816
    ("cuda_oom", "E1103 18:23:55.101761 3413773 gpu_cudamallocasync_allocator.cc:361] gpu_async_3 cuMemAllocAsync failed to "
     "allocate 1225195446464 bytes: RESOURCE_EXHAUSTED: : CUDA_ERROR_OUT_OF_MEMORY: out of memory\n"),  # XLA; SkyRL#624
    ("cuda_oom", "(WorkerDict pid=812, ip=10.0.0.5) ValueError: Free memory on device (59.32/79.15 GiB) on startup is less than "
     "desired GPU memory utilization (0.9, 71.24 GiB). Decrease GPU memory utilization or reduce GPU memory used by other "
     "processes.\n"),  # vllm v1/worker/gpu_worker.py; vllm-project/vllm#20305
    ("cuda_oom", "(EngineCore_DP0 pid=6940) ValueError: Free memory on device cuda:0 (19.77/22.05 GiB) on startup is less than "
     "desired GPU memory utilization (0.9, 19.84 GiB). Decrease GPU memory utilization or reduce GPU memory used by other "
     "processes.\n"),  # the same check in newer vLLM; pytorch/pytorch#175666
    # tokenizer.no_pad_token: a sequence-classification (reward / value) model without pad_token_id
    ("no_pad_token", "ValueError: Cannot handle batch sizes > 1 if no padding token is defined.\n"),  # transformers; huggingface/trl#422
    # numerics.nan_grad outside Megatron
    ("nan_check_failed", "RuntimeError: Function 'PowBackward0' returned nan values in its 0th output.\n"),  # torch anomaly mode
    ("nan_check_failed", "Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.\n"),  # DeepSpeed loss_scaler.py
    # dist.collective_mismatch: the backend's own mismatch check, and torch >= 2.3's watchdog lines
    ("nccl_abort", "RuntimeError: Detected mismatch between collectives on ranks. Rank 1 is running collective: "
     "CollectiveFingerPrint(SequenceNumber=21, OpType=BROADCAST), but Rank 0 is running collective: "
     "CollectiveFingerPrint(SequenceNumber=21, OpType=ALLREDUCE).\n"),  # torch c10d ProcessGroupWrapper.cpp; pytorch/pytorch#78022
    ("nccl_abort", "gpu-node-1:1234:1290 [0] init.cc:1247 NCCL WARN Mismatched collective detected, please check your collective "
     "calls at and around rank 39.\n"),  # NVIDIA/nccl init.cc; NVIDIA/nccl#296
    ("nccl_abort", "[rank4]:[E1016 03:31:38.929220797 ProcessGroupNCCL.cpp:1664] [PG 3 Rank 4] Exception (either an error or "
     "timeout) detected by watchdog at work: 9141, last enqueued NCCL work: 9141, last completed NCCL work: 9140.\n"),  # sglang#1693
    ("nccl_abort", "[rank3]:[E909 09:55:46.996672294 ProcessGroupNCCL.cpp:1709] [PG 0 (default_pg) Rank 3] Timeout at NCCL work: "
     "2070, last enqueued NCCL work: 2082, last completed NCCL work: 2069.\n"),  # torch ProcessGroupNCCL.cpp
    # verl's default scorer has no reward function for the sample's data_source (verl-project/verl#3450)
    ("reward_fn_failed", '    raise NotImplementedError(f"Reward function is not implemented for {data_source=}")\n'
     "NotImplementedError: Reward function is not implemented for data_source=\n"),
    # a dependency the framework imports was never installed (NVIDIA/Megatron-LM#13)
    ("version_mismatch", "  File \"/content/Megatron-LM/mpu/layers.py\", line 28, in <module>\n"
     "    from apex.normalization.fused_layer_norm import FusedLayerNorm as LayerNorm\n"
     "ModuleNotFoundError: No module named 'apex'\n"),
    ("nccl_abort", "[rank7]:[E816 00:34:01.184200712 ProcessGroupNCCL.cpp:2168] [PG ID 1 PG GUID 1 Rank 7]  failure "
     "detected by watchdog at work sequence id: 137429 PG status: last enqueued work: 137429, last completed work: "
     "137428\n"),  # modelscope/ms-swift#5409
    ("nccl_abort", "[rank2]:[F205 18:19:06.383067836 ProcessGroupNCCL.cpp:1614] [PG ID 17 PG GUID 137 Rank 2] Terminating "
     "the process after attempting to dump debug info, due to ProcessGroupNCCL watchdog hang.\n"),  # ms-swift#7992
    ("network_failure", "RuntimeError: Gloo connectFullMesh failed with [/pytorch/third_party/gloo/gloo/transport/tcp/"
     "pair.cc:144] no error\n"),  # verl-project/verl#967
    ("network_failure", "node01:462:635 [3] proxy.cc:1484 NCCL WARN [Service thread] Error encountered progressing "
     "operation=Connect, res=2, closing connection\n"),  # NVIDIA/Megatron-LM#450
    ("nccl_abort", "[rank6]:[E909 08:45:31.970959174 ProcessGroupNCCL.cpp:1870] [PG ID 0 PG GUID 0 Rank 6] Received a "
     "dump signal due to a collective timeout from this local rank and we will try our best to dump the debug info. "
     "Last enqueued NCCL work: -1, last completed NCCL work: -1.\n"),  # sgl-project/sglang#10216
    # sched.time_limit under PBS / Torque (marbl/canu#1214)
    ("sched_ended", "=>> PBS: job killed: walltime 86415 exceeded limit 86400\n"),
    # fs.concurrent_hf_read's wording in huggingface_hub (offline mode); from one process, only a suspect
    ("hf_model_unconfirmed", "huggingface_hub.errors.LocalEntryNotFoundError: Cannot find the requested files in the disk cache "
     "and outgoing traffic has been disabled. To enable hf.co look-ups and downloads online, set 'local_files_only' to False.\n"),
    # engine.port_conflict as verl's SGLang replicas hit it (verl-project/verl#6448; c10d socket.cpp), already covered
    ("engine_port_conflict", "(SGLangHttpServer pid=3101) torch.distributed.DistNetworkError: The server socket has failed to "
     "listen on any local network address. port: 30412, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use\n"),
    # later additions (the indices above are referred to below)
    ("network_failure", "(LLMRayActor pid=90738, ip=172.19.24.110) mlx5: host_unknown: got completion with error:\n"),  # rdma-core
    # deps.version_mismatch: a build for another CUDA major version (glibc ld.so; CPython's extension import)
    ("version_mismatch", "$VENV/bin/python: error while loading shared libraries: libcudart.so.13: cannot open shared object "
     "file: No such file or directory\n"),  # sgl-project/sglang#36533
    ("version_mismatch", "ImportError: libcudart.so.11.0: cannot open shared object file: No such file or directory\n"),  # vllm#1369
    # ms-swift's template refusing a sample over --max_length (modelscope/ms-swift#4754)
    ("sample_too_long", "[rank0]: swift.llm.template.base.MaxLengthError: Current length of row(25000) is larger "
     "than the max_length(2048).\n"),
    # vLLM's cumem allocator as a user's copy spells it (TideDra/lmm-r1#42)
    ("cuda_oom", "RuntimeError: Cuda error: out of memory at /workspace/csrc/cumem_allocator.cpp: 62\n"),
    # torch quoting the NCCL proxy's failed connect under `Last error:`, without NCCL's WARN prefix (verl-project/verl#108)
    ("network_failure", "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device "
     "error.\nLast error:\n[Service thread] Error encountered progressing operation=Connect, res=3, closing connection\n"),
    # torch.distributed's rendezvous: a connect timeout a paste cut mid-word (hiyouga/LlamaFactory#6575), a master's
    # host name that does not resolve in an Alpine-based image (modelscope/ms-swift#6368)
    ("network_failure", "[E108 20:04:34.467642512 socket.cpp:957] [c10d] The client socket has timed out after 900s whi\n"),
    ("network_failure", "socket.gaierror: [Errno -2] Name does not resolve\n"),
    # vLLM's weight loader refusing a PEFT-prefixed name in ROLL's weight update (alibaba/ROLL#418), and
    # verl's update_params (TIGER-AI-Lab/verl-tool#125)
    ("weight_name_refused", '  File "/fs/ROLL/roll/distributed/executor/model_update_group.py", line 40, in model_update\n'
     "ValueError: There is no module or parameter named 'base_model' in Qwen2_5_VLForConditionalGeneration\n"),
    ("weight_name_refused", '  File "/verl/verl/workers/sharding_manager/fsdp_vllm.py", line 285, in update_params\n'
     "KeyError: 'layers.0.self_attn.qkv_proj.base_layer.weight'\n"),
    # a reward function called without a dataset column it requires (modelscope/ms-swift#3840; TRL's reward_kwargs)
    ("reward_fn_failed", "[rank5]: TypeError: CosineReward.__call__() missing 1 required positional argument: 'solution'\n"),
    ("reward_fn_failed", "TypeError: accuracy_reward() missing 1 required positional argument: 'solution'\n"),
    # SGLang's refusal in the OpenAI-style error body a client printed, its apostrophe escaped (QwenLM/Qwen3#1321)
    ("sample_too_long", '{"object":"error","message":"The input (61709 tokens) is longer than the model\\\'s context '
     'length (40960 tokens).","type":"BadRequestError","param":null,"code":400}\n'),
    # vLLM's model runner logging the failed forward's CUDA error under verl's worker, after the raylet's report of
    # the death it caused (verl-project/verl#316)
    ("illegal_memory_access",
     "(raylet) A worker died or was killed while executing a task by an unexpected system error. Worker PID: 93658\n"
     "(WorkerDict pid=93663) WARNING 02-21 04:32:47 model_runner_base.py:143] Failed to pickle inputs of failed "
     "execution: CUDA error: an illegal memory access was encountered\n"),
    # a script written for another TRL release (huggingface/trl#2226, huggingface/peft#2663), also pasted without
    # its type (dongyh20/Insight-V#6)
    ("version_mismatch", "TypeError: DPOTrainer.__init__() got an unexpected keyword argument 'processing_class'\n"),
    ("version_mismatch", "DPOTrainer.__init__() got an unexpected keyword argument 'gamma'\n"),
    # data (or a cache) written by datasets >= 4.0 read by an older datasets, and a dataset that still ships a loading
    # script under datasets 4 (verl-project/verl#2723, LiveCodeBench/LiveCodeBench#107)
    ("version_mismatch", "ValueError: Feature type 'List' not found. Available feature types: ['Value', 'ClassLabel', "
     "'Translation', 'TranslationVariableLanguages', 'LargeList', 'Sequence', 'Array2D']\n"),
    ("version_mismatch", "RuntimeError: Dataset scripts are no longer supported, but found code_generation_lite.py\n"),
    # a data collator padding with a tokenizer that has no pad token (huggingface/transformers#4122)
    ("no_pad_token", "ValueError: You are attempting to pad samples but the tokenizer you are using (GPT2Tokenizer) does "
     "not have one.\n"),
    # an engine's argument class refusing a field the framework passes (verl-project/verl#2812, pasted without its type)
    ("version_mismatch", "ServerArgs.__init__() got an unexpected keyword argument 'mm_attention_backend'\n"),
    # Ray's own check of a process against the running cluster (Unakar/Logic-RL#30)
    ("version_mismatch", "RuntimeError: Version mismatch: The cluster was started with:\n"),
    # a dataset column the reward function does not take, without **kwargs (greyhaven-ai/autocontext#1043)
    ("reward_fn_failed", "TypeError: _autocontext_verifier_reward() got an unexpected keyword argument 'answer'\n"),
    # torch elastic's agent quoting the rendezvous store it could not reach in its error JSON (pytorch/pytorch#64926)
    ("network_failure", '    "message": "RendezvousConnectionError: The connection to the C10d store has failed. See '
     'inner exception for details.",\n'),
    # a socket between two hosts that stopped delivering (NVIDIA/nccl#706)
    ("network_failure", "[15]worker-23:83:2526 [0] misc/socket.cc:503 NCCL WARN Net : Call to recv from "
     "100.96.188.199<41468> failed : Connection timed out\n"),
    # a cluster tool's restart reason (valeoai/DrivoR#35)
    ("host_oom_killed", "**Restart Reason**: OOMKill (memory exceeded limit, SIGKILL)\n"),
    # NVML's kernel module and library of two driver versions (mozilla/translations#1167), a container's CUDA on a driver
    # without forward compatibility (AIR-DISCOVER/ICRA2024-Sim2Real-AXS#5), torch's warning of an old driver without its
    # error (IEIT-Yuan/Yuan-2.0#65), sympy's antlr4 runtime check (sympy/sympy#25031)
    ("version_mismatch", "[task 2025-07-01T05:06:30.005+00:00] [train] [nvidia-smi(stdout)] Failed to initialize NVML: "
     "Driver/library version mismatch\n"),
    ("version_mismatch", "RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before "
     "calling NumCudaDevices() that might have already set an error? Error 804: forward compatibility was attempted on "
     "non supported HW\n"),
    ("version_mismatch", "/usr/local/lib/python3.10/dist-packages/torch/cuda/__init__.py:124: UserWarning: CUDA "
     "initialization: The NVIDIA driver on your system is too old (found version 11000).\n"),
    ("version_mismatch", "ImportError: LaTeX parsing requires the antlr4 Python package, provided by pip "
     "(antlr4-python3-runtime) or conda (antlr-python-runtime), version 4.10\n"),
    # the legacy Megatron-LM's `megatron.mpu` (facebookresearch/metaseq#496: another Megatron branch)
    ("version_mismatch", "AttributeError: module 'megatron.mpu' has no attribute "
     "'LinearWithGradAccumulationAndAsyncCommunication'\n"),
    # torch's own module, no frames pasted (lsdefine/simple_GRPO#5)
    ("version_mismatch", "RuntimeError: HIP error: invalid device function\n"),  # hipErrorInvalidDeviceFunction; verl#3163
    ("version_mismatch", "ValueError: Unregistered model type: qwen3_5_moe, now only support dict_keys(['deepseek_v3', "
     "'llama', 'qwen2', 'qwen3_vl_moe'])\n"),  # mbridge's registry; verl-project/verl#6627
    ("version_mismatch", "RuntimeError: Failed to import swift.tuners.base because of the following error (look up to see "
     "its traceback): No module named 'transformers.models.gemma'\n"),  # a lazy importer's wrapper; ms-swift#790
    ("version_mismatch", "AttributeError: module 'torch.utils._pytree' has no attribute 'register_pytree_node'. "
     "Did you mean: '_register_pytree_node'?\n"),
    # transformers' generate with no pad token to pad a batch with (OpenGVLab/InternVL#1072)
    ("no_pad_token", "ValueError: If `eos_token_id` is defined, make sure that `pad_token_id` is defined.\n"),
    # Ray's memory monitor in its first wording (ray-project/ray#27716)
    ("host_oom_killed", "(raylet) [2022-08-10 11:35:04,123 E 123 123] node_manager.cc:2963: System memory low at node "
     "with IP 172.17.0.2. Used memory (23.63GB) / total capacity (33.28GB) (0.709971) exceeds threshold 0.7, killing "
     "latest task with name the_real_oom_actor:Leaker.__init__ to avoid running out of memory.\n"),
    # verl's check of the installed vLLM against the ones its bundled copy supports (Zillwang/StepSearch#10), and
    # transformers not holding a class the model's config names (QwenLM/Qwen3-VL#1201)
    ("version_mismatch", "ValueError: vllm version 0.11.0 not supported. Currently supported versions are 0.3.1, 0.4.2, "
     "0.5.4 and 0.6.3.\n"),
    ("version_mismatch", "ValueError: Could not find Qwen2_5_VLVideoProcessor neither in <module "
     "'transformers.models.qwen2_5_vl' from '/usr/lib/python3.10/site-packages/transformers/models/qwen2_5_vl/__init__.py'> "
     "nor in <module 'transformers' from '/usr/lib/python3.10/site-packages/transformers/__init__.py'>!\n"),
    # Ray's own version check raised as a bare Exception by older releases (ray-project/ray#1263)
    ("version_mismatch", "Exception: Version mismatch: The cluster was started with:\n"),
    # vLLM's KV cache too small for one sequence of max_model_len, V0 without its ValueError (vllm-project/vllm#10517)
    ("cuda_oom", "The model's max seq len (29000) is larger than the maximum number of tokens that can be stored in KV "
     "cache (23648). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.\n"),
    # vLLM's sampling parameters refusing a field it dropped, answered by its server as a 400 (modelscope/ms-swift#6947)
    ("version_mismatch", "Error code: 400 - {'message': \"Unexpected keyword argument 'best_of'\", 'object': 'error'}\n"),
    # gloo's recv timeout, written by vLLM before the word Traceback on its worker's error line (vllm-project/vllm#5531)
    ("nccl_abort", "(VllmWorkerProcess pid=73) ERROR 06-13 01:30:49 multiproc_worker_utils.py:225] Exception in worker "
     "VllmWorkerProcess while processing method start_worker_execution_loop: [../third_party/gloo/gloo/transport/tcp/"
     "unbound_buffer.cc:81] Timed out waiting 1800000ms for recv operation to complete, Traceback (most recent call last):\n"),
    # the engine's own loader failing under a weight update on a parameter it re-made after loading (NVIDIA-NeMo/RL#275)
    ("weight_update_refused", "(VllmGenerationWorker pid=270812) Traceback (most recent call last):\n"
     '(VllmGenerationWorker pid=270812)   File "/work/nemo_reinforcer/models/generation/vllm_backend.py", line 72, in '
     "update_weights_from_ipc_handles\n"
     "(VllmGenerationWorker pid=270812)     self.model_runner.model.load_weights(weights=weights)\n"
     '(VllmGenerationWorker pid=270812)   File "/venv/lib/python3.12/site-packages/vllm/model_executor/models/'
     'deepseek_v2.py", line 801, in load_weights\n'
     "(VllmGenerationWorker pid=270812)     weight_loader = param.weight_loader\n"
     "(VllmGenerationWorker pid=270812) AttributeError: 'Parameter' object has no attribute 'weight_loader'\n"),
    # vLLM's fused-MoE loader on an expert weight the engine re-laid out after loading: only an update meets it
    # (verl-project/verl#7987)
    ("weight_update_refused", "ValueError: shard_dim=0 is not a valid data dimension for a 3D tensor (expected 1 or 2)\n"),
    # Megatron-Bridge reading the None conversion task it left for a parameter it has no mapping for (radixark/miles#1289)
    ("converter_no_mapping", "AttributeError: 'NoneType' object has no attribute 'megatron_module'\n"),
    # SGLang's own pin of its kernels, checked at start (redai-studio/Relax#8)
    ("version_mismatch", "Exception: flashinfer_python is installed with version 0.6.3, which is less than the minimum "
     "required version 0.6.4. Please uninstall the old version and reinstall the latest version by following the "
     "instructions at https://docs.flashinfer.ai/installation.html.\n"),
    # an image whose CUDA the host driver cannot run (vllm-project/vllm#5635)
    ("version_mismatch", "docker: Error response from daemon: failed to create task for container: failed to create shim "
     "task: OCI runtime create failed: runc create failed: unable to start container process: error during container "
     "init: error running hook #0: error running hook: exit status 1, stdout: , stderr: Auto-detected mode as 'legacy'\n"
     "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.4, please update your driver to a newer "
     "version, or use an earlier cuda container: unknown.\n"),
    # torchvision's operators built for another torch (pytorch/torchtitan#3022)
    ("version_mismatch", "RuntimeError: operator torchvision::nms does not exist\n"),
    # a namespace package is no shadowing on its own: megatron-core's `megatron` has no __init__.py, and accelerate's
    # import of Megatron-LM's old layout finds nothing there (huggingface/accelerate#2390)
    ("version_mismatch", 'Traceback (most recent call last):\n  File "/usr/lib/python3.10/site-packages/accelerate/utils/'
     'megatron_lm.py", line 32, in <module>\n    from megatron import (\n'
     "ImportError: cannot import name 'get_args' from 'megatron' (unknown location)\n"),
    # pytest's report of a failed test, pasted from CI: its `E   ` line and its short summary (NovaSky-AI/SkyRL#1248)
    ("version_mismatch", "    def test_chat_completions():\n>       from vllm.entrypoints.openai.protocol import "
     "ChatCompletionRequest\nE       ModuleNotFoundError: No module named 'vllm.entrypoints.openai.protocol'\n"),
    ("version_mismatch", "FAILED tests/backends/skyrl_train/gpu/test_new_inference_generation.py::test_chat_completions - "
     "ModuleNotFoundError: No module named 'vllm.entrypoints.openai.protocol'\n"),
    # dynamic sampling giving up on groups without a reward spread: verl's DAPO recipe and EasyR1 (BytedTsinghua-SIA/DAPO#22)
    ("groups_filtered_out", "ValueError: num_gen_batches=10 >= max_num_gen_batches=10. Generated too many. Please check "
     "if your data are too difficult. You could also try set max_num_gen_batches=0 to enable endless trials.\n"),
    ("groups_filtered_out", "RuntimeError: num_try_make_batch=20 >= max_try_make_batch=20. Generated too many. Please "
     "check your data.\n"),
    # transformers applying a chat template a base model's tokenizer does not have (sgl-project/sglang#3385)
    ("no_chat_template", "ValueError: Cannot use chat template functions because tokenizer.chat_template is not set and "
     "no template argument was passed! For information about writing templates and setting the tokenizer.chat_template "
     "attribute, please see the documentation at https://huggingface.co/docs/transformers/main/en/chat_templating\n"),
    # torch's build without kernels for the GPU, before the NCCL failure it causes (pytorch/pytorch#152077)
    ("version_mismatch", "NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current PyTorch "
     "installation.\n"),
    # SGLang's wait for a free port, given up after 30 s: two servers on one node took one port_base (ishandhanani/srt-slurm#147)
    ("engine_port_conflict", "ValueError: port_base at 30234 is not available in 30 seconds. port_base is used by a "
     "process already. process.name()='python3'\n"),
    # vLLM's own check of its placement group, raised (vllm-project/vllm#2416) and, before 0.3, of the cluster
    ("insufficient_gpus", "ValueError: The number of required GPUs exceeds the total number of available GPUs in the "
     "placement group.\n"),
    ("insufficient_gpus", "ValueError: The number of required GPUs exceeds the total number of available GPUs in the cluster.\n"),
    # SGLang's decode allocation failing after eviction, logged and raised (sglang mem_cache/common.py)
    ("cuda_oom", "[2026-01-05 10:00:00 TP0] Decode out of memory. Try to lower your batch size.\n"),
    # CUDA's cudaErrorSystemNotReady on an NVSwitch node whose fabric manager is not running
    # (huggingface/huggingface_hub#4134)
    ("gpu_fault", "RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling "
     "NumCudaDevices() that might have already set an error? Error 802: system not yet initialized\n"),
    # a TypeError from a method unsloth replaced on transformers' Trainer (unslothai/unsloth#2148, unsloth-zoo#91)
    ("version_mismatch", "TypeError: _unsloth_get_batch_samples() takes 3 positional arguments but 4 were given\n"),
    # a version requirement in the words of the program that checked it (hiyouga/LlamaFactory#10151), transformers'
    # require_version with its message cut (modelscope/ms-swift#1520), pkg_resources' refusal without its type under
    # transformers' lazy-import wrapper (hiyouga/LlamaFactory#6884)
    ("version_mismatch", "RuntimeError: LFM2.5-VL model requires transformers>=4.58.0\n"),
    ("version_mismatch", "ImportError: transformers>=4.43 is required for a\n"),
    ("version_mismatch", "RuntimeError: Failed to import transformers.modeling_utils because of the following error (look up "
     "to see its traceback):\nThe 'transformers!=4.46.*,<=4.48.3,>=4.41.2' distribution was not found and is required by "
     "llamafactory\n"),
    # an import MindSpeed-LLM makes of MindSpeed that the installed MindSpeed does not have (Ascend/MindSpeed-LLM#7)
    ("version_mismatch", "Traceback (most recent call last):\n"
     '  File "/MindSpeed-LLM-New/mindspeed_llm/features_manager/__init__.py", line 4, in <module>\n'
     "    from mindspeed.features_manager import (\n"
     "ImportError: cannot import name 'HcclOpModeSetFeature' from 'mindspeed.features_manager' "
     "(/MindSpeed-LLM-New/mindspeed/features_manager/__init__.py)\n"),
    # DeepSpeed's op builder refusing a CUDA toolkit other than torch's, its message cut (deepspeedai/DeepSpeedExamples#370)
    ("version_mismatch", "Exception: >- DeepSpeed Op Builder: Installed CUDA version 12.0 does not match the version torch was "
     "compiled with 11.8, unable to\n"),
    # vLLM's compile step refusing a corrupted cache artifact (NovaSky-AI/SkyRL#2167: engines of several nodes sharing one)
    ("inductor_cache", "RuntimeError: vLLM failed to compile the model ... corrupted compilation artifact\n"),
]


@pytest.mark.parametrize(("outcome", "block"), FIELD_CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(FIELD_CASES)])
def test_field_wordings_are_recognised(tmp_path, outcome, block):
    log = HEAD + block
    obs = examine(tmp_path, log)
    assert obs.outcome == outcome, obs.summary
    ev = obs.evidence
    assert ev["line"]["where"].endswith(f"job.log:{len((HEAD + block).splitlines())}")
    assert ev["pattern_source"]  # every match names where its wording comes from


def test_field_evidence_names_rank_node_and_details(tmp_path):
    ev = examine(tmp_path, HEAD + FIELD_CASES[0][1]).evidence
    assert ev["rank"] == 9 and ev["node"] == "gpu-node-2"
    assert ev["peer"].startswith("10.0.0.11")
    assert "nccl" in ev["pattern_source"].lower()
    ev = examine(tmp_path, HEAD + FIELD_CASES[6][1]).evidence
    assert ev["xid"] == 79
    ev = examine(tmp_path, HEAD + FIELD_CASES[11][1]).evidence
    assert ev["packages"] == ["transformers"]


def test_a_taken_rendezvous_port_is_told_its_own_remedy_and_an_engines_port_is_not(tmp_path):
    # om-ai-lab/VLM-R1#289: a second job's torchrun on the default port; verl-project/verl#6448: an SGLang
    # replica's own store, with the same words, keeps the engines' remedy
    line = ("RuntimeError: The server socket has failed to listen on any local network address. port: 29500, "
            "useIpv6: 0, code: -98, name: EADDRINUSE, message: address already in use.\n")
    ev = examine(tmp_path, HEAD + line).evidence
    assert ev["signature"] == "rendezvous_port_in_use"
    assert "MASTER_PORT" in ev["remedy"] and ev["flags"] == ["--master_port", "MASTER_PORT"]
    ev = examine(tmp_path, HEAD + "(SGLangHttpServer pid=3101) torch.distributed.DistNetworkError: " + line[14:]).evidence
    assert ev["signature"] == "address_in_use" and "remedy" not in ev


def test_an_illegal_memory_access_the_trainer_raised_is_no_engine_out_of_memory(tmp_path):
    # OpenRLHF/OpenRLHF#1194: raised in the trainer actor, in torch's stream synchronize (a model's kernel bug);
    # the catalog's engine OOM is the engine's (004: SGLang's illegal access under memory pressure)
    log = ("ray.exceptions.RayTaskError(AcceleratorError): ray::PPOTrainer.fit() (pid=6704, ip=10.0.0.3, "
           "actor_id=5b1c, repr=<openrlhf.trainer.ppo_trainer.PPOTrainer object at 0x7f>)\n"
           '  File "/usr/local/lib/python3.12/dist-packages/torch/cuda/streams.py", line 245, in synchronize\n'
           "    super().synchronize()\n"
           "torch.AcceleratorError: CUDA error: an illegal memory access was encountered\n")
    obs = examine(tmp_path, log)
    assert obs.outcome == "other_error", obs.summary
    engine = ("[2026-03-01 10:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
              '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 2512, in run_scheduler_process\n'
              "    scheduler.event_loop_overlap()\n"
              "RuntimeError: CUDA error: an illegal memory access was encountered\n")
    assert examine(tmp_path, engine).outcome == "illegal_memory_access"


# Near misses: lines a healthy (or still-running) job prints that look like a listed failure.
NEAR_MISSES = [
    # vLLM's warning that it could not read its build's commit hash: the generated `_version` module of a source checkout
    # (verl-project/verl#283), not a submodule a release dropped
    ("version_mismatch", "(main_task pid=68970) /root/vllm/vllm/connections.py:8: RuntimeWarning: Failed to read commit "
     "hash:\n(main_task pid=68970) No module named 'vllm._version'\n"),
    # the same loader failing while the engine loads its checkpoint at start: no weight update is in the frames
    ("weight_update_refused", "Traceback (most recent call last):\n"
     '  File "/venv/lib/python3.12/site-packages/vllm/model_executor/model_loader/default_loader.py", line 269, in '
     "load_model\n"
     "    loaded_weights = model.load_weights(self.get_all_weights(model_config, model))\n"
     '  File "/venv/lib/python3.12/site-packages/vllm/model_executor/models/deepseek_v2.py", line 801, in load_weights\n'
     "    weight_loader = param.weight_loader\n"
     "AttributeError: 'Parameter' object has no attribute 'weight_loader'\n"),
    # vLLM >= 0.5 warns with the same words and then waits for the placement group, which may still come
    ("insufficient_gpus", "WARNING 03-18 11:21:32 ray_utils.py:320] The number of required GPUs exceeds the total number "
     "of available GPUs in the placement group.\n"),
    # a function that is no reward function missing an argument is the caller's own bug
    ("reward_fn_failed", "TypeError: train() missing 1 required positional argument: 'cfg'\n"),
    # the `raise` statement above the exception it raised is code: its template's words are not the error's
    # (NVIDIA-NeMo/RL#564: pynccl's own failure, read as an aborted collective from the code line)
    ("nccl_abort", 'raise RuntimeError(f"NCCL error: {error_str}")\n'
     "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)\n"),
    # a store client waiting on its peers says they did not answer, not that the network failed: TRL's client
    # of its vLLM server timed out so mid-run (huggingface/trl#3157), as a rendezvous whose peers never came does
    ("network_failure", "[rank0]:[W326 22:36:28.884350096 socket.cpp:489] [c10d] waitForInput: socket SocketImpl(fd=60, "
     "addr=[::ffff:127.0.0.1]:52894, remote=[::ffff:10.0.0.2]:2490) timed out after 300000ms\n"),
    ("network_failure", "torch.distributed.DistStoreError: Socket Timeout\n"),
    # transformers tokenization_utils_base.py: a tokenizer warning, the trainer truncates afterwards
    ("sample_too_long", "Token indices sequence length is longer than the specified maximum sequence length for this model "
     "(121 > 77). Running this sequence through the model will result in indexing errors\n"),
    # DeepSpeed loss_scaler.py: fp16 loss scaling skipping one step is routine, not a stop
    ("nan_check_failed", "[2023-06-07 17:28:19,122] [INFO] [loss_scaler.py:181:update_scale] [deepspeed] OVERFLOW! Rank 0 "
     "Skipping step. Attempted loss scale: 2048, reducing to 1024\n"),
    # Slurm prints this even for jobs that succeed (galaxyproject/galaxy#2309, chaos/slurm#54)
    ("host_oom_killed", "slurmstepd: error: Exceeded step memory limit at some point.\n"),
    # c10d retries the TCPStore connection while the master starts (gensyn-ai/rl-swarm#197): a warning
    ("network_failure", "[W427 01:04:16.149509694 socket.cpp:752] [c10d] The client socket has failed to connect to "
     "[::ffff:10.0.0.1]:29500 (errno: 110 - Connection timed out).\n"),
    # SGLang scheduler.py: retraction under KV-cache pressure is normal operation
    ("cuda_oom", "[2026-08-01 10:05:00 TP0] KV cache pool is full. Retract requests. #retracted_reqs: 1, "
     "#new_token_ratio: 0.5384 -> 0.8000\n"),
    # Triton's shared-memory limit of one kernel config is not GPU memory exhaustion
    ("cuda_oom", "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 131072, Hardware limit: "
     "101376. Reducing block sizes or `num_stages` may help.\n"),
    # cudaErrorIllegalInstruction is a kernel bug, not the illegal memory access of memory pressure (sgl-project/sglang#4188)
    ("illegal_memory_access", "RuntimeError: CUDA error: an illegal instruction was encountered\n"),
    # the user's own module, or a package named like a dependency but not it, is no missing dependency
    ("version_mismatch", "ModuleNotFoundError: No module named 'utils'\n"),
    ("version_mismatch", "ModuleNotFoundError: No module named 'vllm_plugins'\n"),
    # vLLM's pynccl wording of a rank's own failed NCCL call (ncclCommInitRank) is no aborted collective
    # (vllm-project/vllm#16707)
    ("nccl_abort", "(RayWorkerWrapper pid=880) ERROR 04-16 01:01:44 [worker_base.py:620] RuntimeError: NCCL error: "
     "unhandled system error (run with NCCL_DEBUG=INFO for details) [repeated 6x across cluster]\n"),    # SGLang's scheduler retracting requests when a decode batch does not fit is an INFO line of normal operation
    # (sgl-project/sglang#4184; its tuning guide: "occasionally but not frequently, it is okay")
    ("cuda_oom", "[2025-03-07 21:49:33 TP13] Decode out of memory happened. #retracted_reqs: 1, #new_token_ratio: "
     "0.1474 -> 0.1845\n"),
    # the user's list of what was tried on a run that hung with no error (radixark/miles#574)
    ("nccl_abort", "- Considering NCCL timeout variables (`NCCL_TIMEOUT=1800`, `TORCH_NCCL_ASYNC_ERROR_HANDLING=1`) to "
     "surface diagnostics\n"),
    # a requirement named in words with no version operator is not a version check
    ("version_mismatch", "RuntimeError: this script requires transformers to be installed\n"),
    # Ray's workers ended by Ray at a normal shutdown print abseil's SIGTERM banner (vllm-project/vllm#13437: "please
    # ignore because this is the expected termination process in Ray")
    ("other_error", "INFO 02-17 15:27:18 llm_engine.py:431] Processed prompts: 100%\n"
     "[2025-02-17 15:27:18,341 E 2669821 2669821] logging.cc:460: *** SIGTERM received at time=1739834838 on cpu 88 ***\n"),
]


@pytest.mark.parametrize(("outcome", "block"), NEAR_MISSES, ids=[f"not-{c[0]}-{i}" for i, c in enumerate(NEAR_MISSES)])
def test_near_misses_are_not_the_failure(tmp_path, outcome, block):
    obs = examine(tmp_path, HEAD + block)
    assert obs.outcome != outcome, obs.summary


def test_sigkill_alone_is_not_memory(tmp_path):
    obs = examine(tmp_path, HEAD + "E0810 08:17:33.201000 4123 torch/distributed/elastic/multiprocessing/api.py:874] "
                  "failed (exitcode: -9) local_rank: 0 (pid: 4189) of binary: /usr/bin/python3\n")
    assert obs.outcome == "killed"
    assert "dmesg" in obs.evidence["confirm"]


def test_sigkill_with_memory_evidence_is_host_ram(tmp_path):
    log = HEAD + (
        "E0810 08:17:33.201000 4123 torch/distributed/elastic/multiprocessing/api.py:874] failed (exitcode: -9) "
        "local_rank: 0 (pid: 4189) of binary: /usr/bin/python3\n"
        "slurmstepd: error: Detected 1 oom_kill event in StepId=88123.0. Some of the step tasks have been OOM Killed.\n"
    )
    obs = examine(tmp_path, log)
    assert obs.outcome == "host_oom_killed"
    assert obs.evidence["signature"] == "scheduler_oom_kill"


def test_sigterm_then_sigkill_without_memory_is_the_scheduler(tmp_path):
    log = HEAD + (
        "W0810 18:00:14.118000 4123 torch/distributed/elastic/agent/server/api.py:704] Received Signals.SIGTERM death "
        "signal, shutting down workers\n"
        "E0810 18:00:44.201000 4123 torch/distributed/elastic/multiprocessing/api.py:874] failed (exitcode: -9) "
        "local_rank: 0 (pid: 4189) of binary: /usr/bin/python3\n"
    )
    assert examine(tmp_path, log).outcome == "sched_ended"


def test_the_same_hardware_error_on_every_node_is_not_a_gpu_fault(tmp_path):
    log = HEAD + "".join(
        f"(MegatronTrainRayActor pid={2345 + i}, ip=10.0.0.{11 + i}) RuntimeError: CUDA error: uncorrectable ECC error "
        "encountered\n" for i in range(4)
    )
    assert examine(tmp_path, log).outcome == "other_error"
    one = HEAD + "(MegatronTrainRayActor pid=2345, ip=10.0.0.11) RuntimeError: CUDA error: uncorrectable ECC error encountered\n"
    obs = examine(tmp_path, one)
    assert obs.outcome == "gpu_fault" and obs.evidence["nodes"] == ["10.0.0.11"]


def test_a_kernel_launch_failure_is_hardware_only_beside_the_drivers_xid(tmp_path):
    # CUDA's `unspecified launch failure` alone: CSUBioGroup/PGMG#3 was fixed by another PyTorch, opendatalab/MinerU#426
    # was a faulty card; the driver's Xid line is the hardware's own word
    line = "RuntimeError: CUDA error: unspecified launch failure\n"
    assert examine(tmp_path, line).outcome == "other_error"
    obs = examine(tmp_path, "[Tue Nov 25 10:00:00 2026] NVRM: Xid (PCI:0000:3b:00): 13, pid=4123, Graphics SM Warp "
                            "Exception on (GPC 0, TPC 0, SM 0): Out Of Range Address\n" + line)
    assert obs.outcome == "gpu_fault"
    # DCGM's report of a critical Xid, as GKE prints it (GoogleCloudPlatform/ai-infra-cluster-provisioning#383)
    assert examine(tmp_path, "GPU 00000000:04:00.0: Detected Critical Xid Error\n" + line).outcome == "gpu_fault"
    # sgl-project/sglang#32855: the words beside the Xid say it was no hardware fault
    prose = ("the scheduler crashes with `cudaErrorLaunchFailure` (Xid 13: \"Graphics SM Cga Exception\") and hits "
             "different GPU ranks, confirming a kernel-level bug rather than a hardware fault.\n")
    assert examine(tmp_path, prose + line).outcome == "other_error"


def test_a_users_own_type_error_is_not_a_version_mismatch(tmp_path):
    log = HEAD + (
        "Traceback (most recent call last):\n"
        '  File "/root/my_reward.py", line 12, in score\n'
        "    return helper(x, strict=True)\n"
        "TypeError: helper() got an unexpected keyword argument 'strict'\n"
    )
    assert examine(tmp_path, log).outcome == "other_error"
    lib = HEAD + (
        "(WorkerDict pid=812, ip=10.0.0.5) Traceback (most recent call last):\n"
        '(WorkerDict pid=812, ip=10.0.0.5)   File "/workspace/verl/verl/workers/rollout/vllm_rollout/vllm_rollout_spmd.py", line 150, in __init__\n'
        "(WorkerDict pid=812, ip=10.0.0.5)     self.inference_engine = LLM(model=model_path, enable_sleep_mode=True)\n"
        '(WorkerDict pid=812, ip=10.0.0.5)   File "/usr/local/lib/python3.10/dist-packages/vllm/entrypoints/llm.py", line 177, in __init__\n'
        "(WorkerDict pid=812, ip=10.0.0.5)     engine_args = EngineArgs(\n"
        "(WorkerDict pid=812, ip=10.0.0.5) TypeError: EngineArgs.__init__() got an unexpected keyword argument 'enable_sleep_mode'\n"
    )
    obs = examine(tmp_path, lib)
    assert obs.outcome == "version_mismatch"
    assert "vllm" in obs.evidence["packages"]


def test_an_assertion_elsewhere_is_not_a_sample_budget(tmp_path):
    log = HEAD + "AssertionError: the reward model must run on every node\n"
    assert examine(tmp_path, log).outcome == "other_error"


def test_a_frameworks_batch_assertion_is_its_refusal_of_the_batch_sizes(tmp_path):
    # OpenRLHF's and slime's argument checks assert on their batch sizes (triage/frameworks/openrlhf.py)
    log = HEAD + "AssertionError: rollout_batch_size must be divisible by the number of engines\n"
    obs = examine(tmp_path, log)
    assert obs.outcome == "batch_size_mismatch"
    assert obs.evidence["signature"].endswith(":config.batch_size_mismatch")


def test_batch_flags_pasted_after_another_assertion_are_not_a_batch_refusal(tmp_path):
    # hkust-nlp/simpleRL-reason#58: verl's context-length assertion, the user's command on the same line
    log = HEAD + ("AssertionError: model context length should be greater than total sequence length. Could you please "
                  "release the training script of Qwen2.5-Math-7B? The script I used is: bash train_grpo_math_tune_ray.sh "
                  "--model_name Qwen2.5-Math-7B --max_response_length 8192  --train_batch_size 1024 --rollout_n 8\n")
    obs = examine(tmp_path, log)
    assert obs.outcome == "sample_too_long"
    # verl's own start-up check, answered in verl's keys (RLHFlow/Online-DPO-R1#2 was told an engine refused a prompt)
    assert obs.evidence["signature"] == "verl_context_length_check"
    assert obs.evidence["flags"] == ["data.max_prompt_length", "data.max_response_length"]


def test_a_sampling_services_refusal_of_prompt_plus_max_tokens_is_a_sample_over_the_context(tmp_path):
    # sushantmehta-code/tinker-cookbook:logs/logs.log: Tinker's 400 after seven RL steps
    log = HEAD + ("[ERROR] Request failed with non-retryable error: BadRequestError: Error code: 400 - {'detail': "
                  "\"Prompt length plus max_tokens exceeds the model's context window: 20847 prompt tokens + 16384 "
                  "max_tokens > 32768.\"}\n")
    obs = examine(tmp_path, log)
    assert obs.outcome == "sample_too_long", obs.summary
    assert obs.evidence["signature"] == "engine_context_length"
    assert "20847 prompt tokens" in obs.summary


def test_a_lost_connection_after_an_error_of_the_jobs_own_is_its_consequence(tmp_path):
    # elena-lyulina/Megatron-LM-Attention-Benchmark:attn_bench/logs/1856383.err: every rank refused an argument, and the
    # elastic agent then lost its store
    log = HEAD + ("3: [default3]:pretrain_gpt.py: error: unrecognized arguments: --keep-last-n-checkpoints 5\n"
                  + "1: W0414 18:38:58.692000 256542 torch/distributed/elastic/agent/server/api.py:704] waiting\n" * 30
                  + "1: torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the C10d "
                    "store has failed. See inner exception for details.\n")
    obs = examine(tmp_path, log)
    assert obs.outcome == "other_error", obs.summary
    assert "unrecognized arguments" in obs.summary
    # a collective's own error above its connection detail is one failure, the network's (verl-project/verl#726)
    log = HEAD + ("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, "
                  "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5\n"
                  "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.\n"
                  "Last error:\nsocketStartConnect: Connect to 169.254.0.1<40815> failed : Software caused connection "
                  "abort\n")
    obs = examine(tmp_path, log)
    assert obs.outcome == "network_failure", obs.summary


def test_a_cascade_after_an_unlisted_error_does_not_decide(tmp_path):
    log = HEAD + (
        "(MegatronTrainRayActor pid=2345) ValueError: packed sequence has 0 tokens\n"
        "(MegatronTrainRayActor pid=2346) RuntimeError: NCCL communicator was aborted on rank 1.\n"
    )
    assert examine(tmp_path, log).outcome == "other_error"


def test_every_shipped_pattern_names_its_source():
    for sig in load_signatures():
        assert len(sig.pattern_sources) == len(sig.patterns), sig.id
        assert all(src.strip() for src in sig.pattern_sources), f"{sig.id}: a pattern without a source"


def test_a_signatures_suggestion_is_a_catalog_id_its_outcome_leaves_open():
    from pathlib import Path

    from triage.catalog import load_catalog

    ids = set(load_catalog(Path(__file__).resolve().parent.parent / "playbooks" / "verdicts.yaml"))
    suggesting = [sig for sig in load_signatures() if sig.suggests]
    assert suggesting
    for sig in suggesting:
        assert sig.suggests in ids, f"{sig.id}: {sig.suggests} is no catalog id"


def test_a_pattern_item_must_be_a_regex_or_re_and_source():
    with pytest.raises(SignatureTableError, match="'odd'.*pattern must be"):
        parse_signatures({"signatures": [{"id": "odd", "outcome": "cuda_oom", "patterns": [{"regex": "x"}]}]})


def test_frames_after_a_ray_envelope_count_as_the_errors_own(tmp_path):
    # verl: vLLM too old for the keyword verl passes (the error raised in the remote WorkerDict)
    log = HEAD + (
        "Traceback (most recent call last):\n"
        '  File "/workspace/verl/verl/trainer/main_ppo.py", line 64, in run_ppo\n'
        "    ray.get(runner.run.remote(config))\n"
        "ray.exceptions.RayTaskError(TypeError): ray::WorkerDict.actor_rollout_init_model() (pid=812, ip=10.0.0.5, "
        "actor_id=3c9d, repr=<verl.single_controller.ray.base.WorkerDict object at 0x7f0a>)\n"
        '  File "/workspace/verl/verl/workers/rollout/vllm_rollout/vllm_rollout_spmd.py", line 150, in __init__\n'
        "    self.inference_engine = LLM(\n"
        '  File "/usr/local/lib/python3.10/dist-packages/vllm/entrypoints/llm.py", line 177, in __init__\n'
        "    engine_args = EngineArgs(\n"
        "TypeError: EngineArgs.__init__() got an unexpected keyword argument 'enable_sleep_mode'\n"
    )
    obs = examine(tmp_path, log)
    assert obs.outcome == "version_mismatch", obs.summary
    assert any("vllm/entrypoints/llm.py" in f for f in obs.evidence["frames"])


BATCH_WORDINGS = [
    # verl-project/verl verl/workers/fsdp_workers.py
    "(WorkerDict pid=812, ip=10.0.0.5) AssertionError: ppo_mini_batch_size 0 should be larger than 0 after normalization\n",
    # huggingface/trl trl/trainer/grpo_trainer.py
    "[rank0]: ValueError: The global train batch size (8 x 1) must be evenly divisible by the number of generations per "
    "prompt (3). Given the current train batch size, the valid values for the number of generations are: [2, 4, 8].\n",
]


@pytest.mark.parametrize("block", BATCH_WORDINGS, ids=["verl", "trl"])
def test_batch_arithmetic_in_verl_and_trl_wording(tmp_path, block):
    obs = examine(tmp_path, HEAD + block)
    assert obs.outcome == "batch_size_mismatch", obs.summary


# --- field wordings read from what users paste --------------------------------------------------
# Each sample mimics the named source's output; none is a field case's text.

def test_compiled_extension_built_against_another_torch_is_a_version_mismatch(tmp_path):
    # Dao-AILab/flash-attention: the CUDA extension's ImportError through CPython's dlopen (dynload_shlib.c)
    log = HEAD + (
        "Traceback (most recent call last):\n"
        '  File "/opt/conda/lib/python3.10/site-packages/flash_attn/flash_attn_interface.py", line 10, in <module>\n'
        "    import flash_attn_2_cuda as flash_attn_cuda\n"
        "ImportError: /opt/conda/lib/python3.10/site-packages/flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so: "
        "undefined symbol: _ZN3c105ErrorC2ENS_14SourceLocationESs\n"
    )
    obs = examine(tmp_path, log)
    assert obs.outcome == "version_mismatch", obs.summary
    ev = obs.evidence
    assert ev["signature"] == "compiled_extension_abi"
    assert ev["symbol"] == "_ZN3c105ErrorC2ENS_14SourceLocationESs" and ev["built_against"] == "torch (c10)"
    assert ev["library"].endswith("flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so")
    assert "flash_attn" in ev["packages"]


def test_a_kernel_library_that_does_not_load_is_a_version_mismatch(tmp_path):
    # sgl-project/sglang sgl-kernel/python/sgl_kernel/load_utils.py: the ImportError's message spans lines
    log = HEAD + (
        "Traceback (most recent call last):\n"
        '  File "/usr/local/lib/python3.12/dist-packages/sgl_kernel/__init__.py", line 5, in <module>\n'
        "    common_ops = _load_architecture_specific_ops()\n"
        "ImportError: \n"
        "[sgl_kernel] CRITICAL: Could not load any common_ops library!\n"
        "\n"
        "Attempted locations:\n"
        "1. Architecture-specific pattern: /usr/local/lib/python3.12/dist-packages/sgl_kernel/sm90/common_ops.* - "
        "found files: ['/usr/local/lib/python3.12/dist-packages/sgl_kernel/sm90/common_ops.abi3.so']\n"
    )
    obs = examine(tmp_path, log)
    assert obs.outcome == "version_mismatch", obs.summary
    assert obs.evidence["signature"] == "compiled_extension_abi"
    assert "sgl_kernel" in obs.evidence["packages"]


@pytest.mark.parametrize("line, package", [
    # THUDM/slime slime/backends/megatron_utils: megatron.training is in Megatron-LM, not in the megatron-core wheel
    ("ModuleNotFoundError: No module named 'megatron.training.global_vars'\n", "megatron.training"),
    # NVIDIA-NeMo/Megatron-Bridge: a model provider the installed Megatron-Bridge does not have
    ("ModuleNotFoundError: No module named 'megatron.bridge.models.glm.glm45_provider'\n", "megatron.bridge"),
    # sgl-project/sglang#362 as pasted, its closing quote cut off: vllm 0.4.0 had removed the module
    ("ModuleNotFoundError: No module named 'vllm.model_executor.input_metadata\n", "vllm"),
])
def test_a_module_the_installed_package_lacks_is_a_version_mismatch(tmp_path, line, package):
    obs = examine(tmp_path, HEAD + line)
    assert obs.outcome == "version_mismatch", obs.summary
    assert obs.evidence["packages"] == [package]


def test_an_import_from_the_users_own_module_is_not_a_version_mismatch(tmp_path):
    obs = examine(tmp_path, HEAD + "ImportError: cannot import name 'score_answer' from 'my_rewards'\n")
    assert obs.outcome != "version_mismatch", obs.summary
    # nor a module name that runs on past a cut quote into other words
    obs = examine(tmp_path, HEAD + "ModuleNotFoundError: No module named 'vllm.model_executor.input_metadata and more\n")
    assert obs.outcome != "version_mismatch", obs.summary


def test_a_trl_trainer_missing_a_trainer_attribute_is_a_version_mismatch(tmp_path):
    # huggingface/trl trl/trainer/dpo_trainer.py reads attributes transformers' Trainer sets (trl#3983, #4010)
    obs = examine(tmp_path, HEAD + "[rank0]: AttributeError: 'DPOTrainer' object has no attribute 'model_accepts_loss_kwargs'\n")
    assert obs.outcome == "version_mismatch", obs.summary
    assert obs.evidence["signature"] == "trl_trainer_attribute"
    assert obs.evidence["packages"] == ["transformers", "trl"] and obs.evidence["rank"] == 0
    # a user's own trainer class is not TRL's
    assert examine(tmp_path, HEAD + "AttributeError: 'MyTrainer' object has no attribute 'scorer'\n").outcome == "other_error"


@pytest.mark.parametrize("line", [
    # deepspeedai/DeepSpeed deepspeed/runtime/config.py _batch_assertion, as OpenRLHF and TRL runs print it
    "(ActorModelRayActor pid=4102) AssertionError: Check batch related parameters. train_batch_size is not equal to "
    "micro_batch_per_gpu * gradient_acc_step * world_size 128 != 4 * 8 * 6\n",
    # verl-project/verl verl/protocol.py DataProto.chunk
    "(TaskRunner pid=2210) AssertionError: only support equal chunk. Got size of DataProto 6 and chunk 4.\n",
])
def test_batch_arithmetic_in_deepspeed_and_verl_protocol_wording(tmp_path, line):
    obs = examine(tmp_path, HEAD + line)
    assert obs.outcome == "batch_size_mismatch", obs.summary
    assert obs.evidence["pattern_source"].startswith(("deepspeedai/DeepSpeed", "verl-project/verl"))


@pytest.mark.parametrize("line", [
    # huggingface/trl trl/trainer/utils.py DPODataCollatorWithPadding (trl#1152)
    "ValueError: Padding is enabled, but the tokenizer is not configured with a padding token. Explicitly set "
    "`tokenizer.pad_token` (e.g. `tokenizer.pad_token = tokenizer.eos_token`) before calling the trainer.\n",
    # torch/nn/utils/rnn.py pad_sequence given pad_token_id None (trl#1149)
    "TypeError: pad_sequence(): argument 'padding_value' (position 3) must be float, not NoneType\n",
])
def test_pad_token_missing_in_trl_and_torch_wording(tmp_path, line):
    obs = examine(tmp_path, HEAD + line)
    assert obs.outcome == "no_pad_token", obs.summary


def test_rays_disk_monitor_line_is_a_full_disk(tmp_path):
    # ray-project/ray src/ray/common/file_system_monitor.cc, forwarded by the driver with the (raylet) prefix;
    # its words hold no "error", so the log scan must keep it on its own wording
    log = HEAD + (
        "(raylet) [2026-08-01 10:02:11,204 E 811 840] (raylet) file_system_monitor.cc:116: /tmp/ray/session_2026-08-01"
        "_09-58-00_123456_811 is over 95% full, available space: 21474836480; capacity: 1099511627776. Object creation "
        "will fail if spilling is required.\n"
    )
    obs = examine(tmp_path, log)
    assert obs.outcome == "disk_full", obs.summary
    assert "file_system_monitor" in obs.evidence["pattern_source"]


def test_an_engines_context_length_refusal_without_an_error_word(tmp_path):
    # sgl-project/sglang tokenizer_manager.py, as slime's rollout prints the HTTP body it got back
    log = HEAD + (
        "(RolloutManager pid=2290) 400 Bad Request\n"
        "(RolloutManager pid=2290) Requested token count exceeds the model's maximum context length of 32768 tokens. "
        "You requested a total of 33190 tokens: 8614 tokens from the input messages and 24576 tokens for the completion.\n"
    )
    obs = examine(tmp_path, log)
    assert obs.outcome == "sample_too_long", obs.summary
    assert obs.evidence["token_counts"][:2] == [32768, 33190]


def test_the_socket_failure_under_an_nccl_error_decides_over_the_abort(tmp_path):
    # pytorch/pytorch ProcessGroupNCCL (DistBackendError) quoting NVIDIA/nccl's last error (misc/socket.cc)
    log = HEAD + (
        "(WorkerDict pid=4410, ip=10.0.0.21) torch.distributed.DistBackendError: NCCL error in: "
        "../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, unhandled system error (run with NCCL_DEBUG=INFO for details), "
        "NCCL version 2.21.5\n"
        "(WorkerDict pid=4410, ip=10.0.0.21) ncclSystemError: System call (e.g. socket, malloc) or external library call "
        "failed or device error.\n"
        "(WorkerDict pid=4410, ip=10.0.0.21) Last error:\n"
        "(WorkerDict pid=4410, ip=10.0.0.21) socketStartConnect: Connect to 10.0.0.22<51234> failed : Connection refused\n"
    )
    obs = examine(tmp_path, log)
    assert obs.outcome == "network_failure", obs.summary
    assert obs.evidence["peer"].startswith("10.0.0.22") and obs.evidence["node"] == "10.0.0.21"
    # NCCL's own `unhandled system error` is the call that failed, which the socket line explains
    assert "socketStartConnect" in obs.evidence["line"]["text"]


PACKING_RAISE = '(MegatronTrainRayActor pid=2345)     raise AssertionError("This should never happen.")\n'


def test_slimes_packing_assertion_with_arguments_that_overrun_the_budget(tmp_path):
    # THUDM/slime slime/backends/megatron_utils/data.py _get_capped_partitions: a user pastes the raise line alone
    (tmp_path / "cmdline.txt").write_text(
        "python3 train.py --rollout-max-prompt-len 2048 --rollout-max-response-len 16384 --max-tokens-per-gpu 8192 "
        "--context-parallel-size 1 --use-dynamic-batch-size\n", encoding="utf-8")
    obs = examine(tmp_path, HEAD + PACKING_RAISE)
    assert obs.outcome == "sample_too_long", obs.summary
    budget = obs.evidence["packing_budget"]
    assert budget["longest_sample_tokens"] == 18432 and budget["max_tokens_per_gpu"] == 8192
    assert "18432 > max_tokens_per_gpu*cp_size = 8192*1 = 8192" in budget["arithmetic"]


def test_slimes_packing_assertion_within_budget_or_without_arguments_is_not_a_budget(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert examine(tmp_path / "a", HEAD + PACKING_RAISE).outcome == "other_error"  # no arguments: located, not guessed
    (tmp_path / "b" / "cmdline.txt").write_text(
        "python3 train.py --rollout-max-prompt-len 1024 --rollout-max-response-len 4096 --max-tokens-per-gpu 8192\n",
        encoding="utf-8")
    assert examine(tmp_path / "b", HEAD + PACKING_RAISE).outcome == "other_error"


def test_sglangs_own_scheduler_refusal_is_read(tmp_path):
    # sgl-project/sglang srt/managers/utils.py validate_input_length, as the scheduler logs it
    line = ("[2026-08-01 10:00:00 TP5] Input length (40960 tokens) exceeds the maximum allowed length (32768 tokens). "
            "Use a shorter input or enable --allow-auto-truncate.\n")
    assert examine(tmp_path, HEAD + line).outcome == "sample_too_long"


def test_an_unlisted_error_in_vllms_log_format_still_ends_the_job(tmp_path):
    obs = examine(tmp_path, HEAD + "ERROR 10-28 16:21:14 [core.py:710] ValueError: a reason no signature lists\n")
    assert obs.outcome == "other_error", obs.summary


# Wordings read in the frameworks' and libraries' sources (each pattern's `source` in probes/signatures.yaml
# names the file and the thread), and a line beside each that must not match: a log's own line, or the
# neighbouring message of the same code.
SOURCE_WORDINGS = [
    # THUDM/slime#641: slime's start-up check of the model arguments against the checkpoint's config.json
    ('hf_config_mismatch', "AssertionError: rope_theta in hf config 1000000.0 is not equal to rotary_base 10000, please "
     "check the config.\n"),
    # unslothai/unsloth#6385: the ModuleNotFoundError's message pasted without its type
    ('version_mismatch', "No module named 'vllm.transformers_utils.tokenizer'\n"),
    # vllm-project/vllm-ascend#405: a line of torch_npu's HCCL RuntimeError, two jobs on one node
    ('engine_port_conflict', '[rank0]: EJ0003: [PID: 159] 2025-03-26-17:01:02.816.428 Failed to bind the IP port. Reason: '
     'The IP address and port have been bound already.\n'),
    ('port_unreachable', '[E1118 17:30:24.226257071 socket.cpp:1019] [c10d] The client socket has timed out after 300000ms while trying to connect to (127.0.0.1, 51216).\n'),  # loopback_port_unserved
    ('cuda_oom', 'RuntimeError: NPU out of memory. Tried to allocate 22.00 MiB (NPU 0; 60.97 GiB total capacity; 10.24 GiB already allocated; 10.24 GiB current active; 19.52 MiB free; 10.65 GiB reserved in total by PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.\n'),  # npu_oom
    ('cuda_oom', "node0:1234:5678 [3] include/alloc.h:320 (ncclCuMemAlloc) NCCL WARN Cuda failure 2 'out of memory'\n"),  # nccl_cumem_oom
    ('cuda_oom', "Cuda failure 2 'out of memory'\n"),  # nccl_lasterror_oom
    ('killed', '      Exit Code: 137\n'),  # k8s_exit_137
    ('disk_full', 'Message:        The node was low on resource: ephemeral-storage. Container ebaogi-bff-app was using 34260Ki, which exceeds its request of 0.\n'),  # k8s_ephemeral
    ('disk_full', '  Warning  Evicted              109s  kubelet                                Pod ephemeral local storage usage exceeds the total limit of containers 5Gi.\n'),  # k8s_ephemeral2
    ('disk_full', 'RuntimeError: [enforce fail at inline_container.cc:659] . unexpected pos 2387758464 vs 2387758376\n'),  # torch_unexpected_pos
    ('connection_closed', 'node0:13571:13620 [0] misc/socket.cc:50 NCCL WARN socketProgress: Connection closed by remote peer node2<42830>\n'),  # nccl_closed_remote
    ('network_failure', 'node0:1958:1958 [3] bootstrap.cc:126 NCCL WARN Bootstrap : no socket interface found\n'),  # nccl_no_iface
    ('network_failure', 'node0:1958:1958 [3] bootstrap.cc:120 NCCL WARN NET/Socket : No usable listening interface found\n'),  # nccl_no_listen_iface
    ('network_failure', 'kp-ddp-worker-0:3468:3905 [4] ib_plugin.c:1615 NCCL WARN NET/IB : Got completion from peer 10.216.210.236<54862> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid fd00:1148:9000:5000:4:200:3:ff22 remoteGidsfd00:1148:9000:5000:4:200:3:ff1f\n'),  # nccl_ib_completion_old
    ('network_failure', 'NET/IBP:Got completion from peer 7.6.13.83<36315> with status=12 opcode=32698 len=32696 vendor err 129 (Send)\n'),  # nccl_ib_completion_new
    ('network_failure', '[2025-07-23 10:05:49,679 W 51000 51000] gcs_rpc_client.h:151: Failed to connect to GCS at address 192.168.2.40:6379 within 5 seconds.\n'),  # ray_gcs_connect
    ('network_failure', '2023-06-14 23:53:52,845 WARNING utils.py:1397 -- Unable to connect to GCS at 10.0.53.19:49650. Check that (1) Ray GCS with matching version started successfully at the specified address, and (2) there is no firewall setting preventing access.\n'),  # ray_gcs_unable
    ('version_mismatch', 'ValueError: Tokenizer class Qwen2Tokenizer does not exist or is not currently imported.\n'),  # tf_tokenizer_class
    ('version_mismatch', "ValueError: `rope_scaling` must be a dictionary with two fields, `type` and `factor`, got {'factor': 8.0, 'low_freq_factor': 1.0, 'high_freq_factor': 4.0, 'original_max_position_embeddings': 8192, 'rope_type': 'llama3'}\n"),  # tf_rope_scaling
    ('version_mismatch', 'Exception: data did not match any variant of untagged enum ModelWrapper at line 1251012 column 3\n'),  # tokenizers_untagged_enum
    ('version_mismatch', 'ImportError: Using the `Trainer` with `PyTorch` requires `accelerate>=0.20.1`: Please run `pip install transformers[torch]` or `pip install accelerate -U`\n'),  # tf_trainer_accelerate
    ('version_mismatch', 'deepspeed.ops.op_builder.builder.CUDAMismatchException: >- DeepSpeed Op Builder: Installed CUDA version 12.2 does not match the version torch was compiled with 11.7, unable to compile cuda/cpp extensions without a matching cuda version.\n'),  # ds_cuda_mismatch
    ('version_mismatch', 'ValueError: vLLM version 0.6.3 support has been removed. vLLM 0.5.4 and 0.6.3 are no longer supported. Please use vLLM 0.7.0 or later.\n'),  # verl_vllm_removed
    ('version_mismatch', 'AssertionError: Streaming VLLM version must be greater than 0.8.5\n'),  # openrlhf_vllm_version
    ('version_mismatch', 'AssertionError: DeepSpeed version must be >= 0.16.4 for tensor parallel training\n'),  # openrlhf_ds_version
    ('version_mismatch', 'AssertionError: Megatron does not support numpy 2.x\n'),  # slime_numpy2
    ('no_pad_token', "ValueError: The specified `pad_token` ('<|pad|>') is not found in the vocabulary of the given `processing_class` (Qwen2TokenizerFast). Ensure that the `pad_token` exists in the vocabulary before using it as a padding token.\n"),  # trl_pad_not_in_vocab
    ('no_pad_token', 'ValueError: The tokenizer does not have a pad token. Please set `pad_token_id` in the tokenizer.\n'),  # trl_no_pad_token
    ('batch_size_mismatch', 'ValueError: train_batch_size (16) must be >= actor.ppo_mini_batch_size (32)\n'),  # verl_train_lt_mini
    ('batch_size_mismatch', 'ValueError: ppo_mini_batch_size (32) must be divisible by ppo_micro_batch_size (6)\n'),  # verl_mini_micro
    ('batch_size_mismatch', 'ValueError: generation_batch_size (24) must be divisible by the global batch size (16).\n'),  # gen_bs_global
    ('batch_size_mismatch', 'ValueError: generation_batch_size (24) must be evenly divisible by num_generations (5). Valid values: [2, 3, 4, 6, 8, 12, 24].\n'),  # swift_gen_bs_even
    ('batch_size_mismatch', 'ValueError: The global eval batch size (4 * 3) must be divisible by the number of generations used for evaluation (8).\n'),  # eval_bs_gens
    ('batch_size_mismatch', 'ValueError: global batch size (30) is not divisible by micro batch size (2) times data parallel size (4).\n'),  # megatron_gbs_mbs_dp
    ('batch_size_mismatch', 'AssertionError: global_batch_size 256 is not equal to rollout_batch_size 32 * n_samples_per_prompt 16 // num_steps_per_rollout 1\n'),  # slime_gbs
    ('batch_size_mismatch', 'ValueError: num_rollout_prompt (6) = generation_batch_size (48) // num_generations (8) must be divisible by dp_size (4).\n'),  # swift_dp_prompts
    ('degenerate_groups', 'ValueError: GRPO requires at least 2 generations per prompt to calculate the advantages. You provided 1, which is less than the minimum required.\n'),  # trl_one_generation
    ('degenerate_groups', 'ValueError: num_generations must be greater than 1 for GRPO\n'),  # swift_one_generation
    ('sample_too_long', 'ValueError: The prompt (total length 25938) is too long to fit into the model (context length 4096). Make sure that `max_model_len` is no smaller than the number of text tokens plus multimodal tokens.\n'),  # vllm_prompt_too_long
    # the twentieth sweep's wordings (each pattern's source names its thread)
    ('killed', 'cli_demo.sh: line 5: 12989 Killed\n'),  # bash with the command cut off (hiyouga/LlamaFactory#2097)
    ('host_oom_killed', 'slurmstepd: error: Detected 1 oom-kill event(s) in StepId=191.batch cgroup. Some of your processes may have been killed by the cgroup out-of-memory handler.\n'),
    ('host_oom_killed', '  Warning  Evicted   3m   kubelet   The node had condition: [MemoryPressure].\n'),
    ('host_oom_killed', 'Your session crashed after using all available RAM.\n'),  # Colab (unslothai/unsloth#1860)
    ('gpu_fault', '               NVRM: fallen off the bus and is not responding to commands.\n'),  # NVIDIA/NVSentinel#155
    ('gpu_fault', 'Unable to determine the device handle for GPU 0000:02:00.0: GPU is lost. Reboot the system to recover this GPU\n'),
    ('disk_full', 'build-0-classifier-56b4b9d9vkc4t   ds-ws   Evicted   node-03   Pod The node had condition: [DiskPressure]. \n'),
    ('ref_load_missing', ">> '--exit-on-missing-checkpoint' set ... exiting. <<\n"),  # NVIDIA/Megatron-LM#1317
    ('inductor_cache', '(VllmWorker rank=1 pid=191128) ERROR 05-28 18:58:32 [multiproc_executor.py:522] AssertionError: failed to get the hash of the compiled graph\n'),
    ('version_mismatch', 'ImportError: FlashAttention2 has been toggled on, but it cannot be used due to the following error: you need flash_attn package version to be greater or equal than 2.1.0. Detected version 2.0.4. Please refer to the documentation of https://huggingface.co/docs/transformers/perf_infer_gpu_one#flashattention-2 to install Flash Attention 2.\n'),
    ('version_mismatch', "TypeError: GRPOConfig.__init__() got an unexpected keyword argument 'top_p'\n"),  # unslothai/unsloth#2576
    ('version_mismatch', "TypeError: Seq2SeqTrainingArguments.init() got an unexpected keyword argument \u2018evaluation_strategy\u2019\n"),
    ('version_mismatch', "TypeError: AsyncLLMEngine.generate() got an unexpected keyword argument 'prompt'\n"),  # imoneoi/openchat#225
    ('version_mismatch', "ModuleNotFoundError: No module named 'nemo'\n"),  # NVIDIA-NeMo/RL#801
    ('weight_name_refused', "ValueError: There is no module or parameter named 'decoder' in Qwen3ForCausalLM\n"),  # verl#1757
    ('version_mismatch', "10/18 16:45:32 - mmengine - WARNING - WARNING: command error: ''Adafactor is already registered in "
     "optimizer at torch.optim''!\n"),  # InternLM/xtuner#952
    ('version_mismatch', "ImportError: cannot import name 'log' from 'torch.distributed.elastic.agent.server.api' "
     "(/usr/lib/python3/site-packages/torch/distributed/elastic/agent/server/api.py)\n"),
    # NVIDIA/TransformerEngine#1684: dlopen's message wrapped after the extension's path
    ('version_mismatch', "ImportError: /home/u/env/lib/python3.11/site-packages/transformer_engine/wheel_lib/"
     "transformer_engine_torch.cpython-311-x86_64-linux-gnu.so: \n"),
    # NVIDIA-NeMo/Megatron-Bridge#1646: the modelopt API changed between containers
    ('version_mismatch', "AttributeError: module 'modelopt.torch.distill.plugins.megatron' has no attribute "
     "'DistillationConfig'. Did you mean: 'load_distillation_config'?\n"),
]
SOURCE_NEAR_MISSES = [
    ('port_unreachable', '[E1118 17:30:24.226257071 socket.cpp:1019] [c10d] The client socket has timed out after 300000ms while trying to connect to (10.0.0.12, 29500).\n'),  # loopback_port_unserved: another node's address is the network
    ('cuda_oom', '[W compiler_depend.ts:123] Warning: NPU memory usage is high\n'),  # npu_oom
    ('cuda_oom', "node0:1234:5678 [3] transport/p2p.cc:275 NCCL WARN Cuda failure 800 'operation not permitted'\n"),  # nccl_cumem_oom
    ('cuda_oom', "Cuda failure 1 'invalid argument'\n"),  # nccl_lasterror_oom
    ('killed', '      Exit Code: 1\n'),  # k8s_exit_137
    ('disk_full', 'Message:        The node was low on resource: memory. Container egg was using 5053216Ki, which exceeds its request of 0.\n'),  # k8s_ephemeral
    ('disk_full', '  Warning  Evicted              109s  kubelet                                The node had condition: [MemoryPressure].\n'),  # k8s_ephemeral2
    ('disk_full', 'RuntimeError: [enforce fail at inline_container.cc:222] . file not found: archive/data.pkl\n'),  # torch_unexpected_pos
    ('connection_closed', 'node0:13571:13571 [0] NCCL INFO Bootstrap : Using enp10s0:10.10.7.107<0>\n'),  # nccl_closed_remote
    ('network_failure', 'node0:1958:1958 [3] NCCL INFO Bootstrap : Using eth0:10.0.0.5<0>\n'),  # nccl_no_iface
    ('network_failure', 'node0:1958:1958 [3] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.5<0>\n'),  # nccl_no_listen_iface
    ('network_failure', 'kp-ddp-worker-0:3468:3905 [4] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [RO]; OOB eth0:10.216.210.235<0>\n'),  # nccl_ib_completion_old
    ('network_failure', 'NCCL INFO NET/IB: Dev 0 Port 1 qpn 1234 mtu 5 LID 0 subnet-prefix 65152\n'),  # nccl_ib_completion_new
    ('network_failure', '[2024-04-11 16:39:09,766 E 539 649] gcs_rpc_client.h:552: Failed to connect to GCS within 60 seconds. GCS may have been killed.\n'),  # ray_gcs_connect
    ('network_failure', '2023-06-14 23:53:52,845 INFO worker.py:1636 -- Connecting to existing Ray cluster at address: 10.0.53.19:6379...\n'),  # ray_gcs_unable
    ('version_mismatch', 'ValueError: Tokenizer class Qwen2Tokenizer does not support the `fast` option.\n'),  # tf_tokenizer_class
    ('version_mismatch', "ValueError: `rope_scaling` must be a dictionary with two fields, `type` and `factor`, got {'type': 'linear'}\n"),  # tf_rope_scaling
    ('version_mismatch', 'json.decoder.JSONDecodeError: Expecting value: line 1251012 column 3 (char 0)\n'),  # tokenizers_untagged_enum
    ('version_mismatch', 'UserWarning: Using the `Trainer` with `PyTorch` on a single GPU.\n'),  # tf_trainer_accelerate
    ('version_mismatch', 'Installed CUDA version 11.8 does not match the version torch was compiled with 11.7 but since the APIs are compatible, accepting this combination\n'),  # ds_cuda_mismatch
    ('version_mismatch', 'INFO vllm version 0.8.5 detected, using sleep level 2\n'),  # verl_vllm_removed
    ('version_mismatch', 'INFO Streaming VLLM version 0.9.0\n'),  # openrlhf_vllm_version
    ('version_mismatch', 'DeepSpeed version: 0.16.4\n'),  # openrlhf_ds_version
    ('version_mismatch', 'UserWarning: Megatron support for numpy 2.x is experimental\n'),  # slime_numpy2
    ('no_pad_token', "ValueError: The specified `eos_token` ('<|im_end|>') is not found in the vocabulary of the given `processing_class` (Qwen2TokenizerFast).\n"),  # trl_pad_not_in_vocab
    ('no_pad_token', 'Setting `pad_token_id` to `eos_token_id`:151643 for open-end generation.\n'),  # trl_no_pad_token
    ('batch_size_mismatch', 'train_batch_size (32) >= actor.ppo_mini_batch_size (16): ok\n'),  # verl_train_lt_mini
    ('batch_size_mismatch', 'ppo_mini_batch_size (32) is divisible by ppo_micro_batch_size (8)\n'),  # verl_mini_micro
    ('batch_size_mismatch', 'generation_batch_size (32) and steps_per_generation (2) configured\n'),  # gen_bs_global
    ('batch_size_mismatch', 'generation_batch_size (24) = per_device_train_batch_size * world_size * steps_per_generation\n'),  # swift_gen_bs_even
    ('batch_size_mismatch', 'The global eval batch size is 12.\n'),  # eval_bs_gens
    ('batch_size_mismatch', 'setting number of micro-batches to constant 4\n'),  # megatron_gbs_mbs_dp
    ('batch_size_mismatch', 'global_batch_size 512 = rollout_batch_size 32 * n_samples_per_prompt 16 // num_steps_per_rollout 1\n'),  # slime_gbs
    ('batch_size_mismatch', 'num_rollout_prompt (8) = generation_batch_size (64) // num_generations (8)\n'),  # swift_dp_prompts
    ('degenerate_groups', 'GRPO with 8 generations per prompt\n'),  # trl_one_generation
    ('degenerate_groups', 'num_generations_eval must be greater than 0\n'),  # swift_one_generation
    ('sample_too_long', 'INFO The prompt (total length 1200) fits the model (context length 4096).\n'),  # vllm_prompt_too_long
    ('sample_too_long', 'WARNING 03-30 00:24:16 [api_server.py:88] Request rate exceeds limit of 100 per second\n'),  # a rate, not a prompt
    ('version_mismatch', "AttributeError: Can't get attribute 'Net' on <module '__main__' from '/home/u/train.py'>\n"),  # a script's own class
    ('killed', 'train.sh: line 12: 4242 Done                    python3 train.py\n'),  # bash's report of a child that exited
    ('host_oom_killed', 'slurmstepd: info: Detected 0 oom-kill event(s) checking StepId=191.batch\n'),  # no `in`: not a kill report
    ('host_oom_killed', 'Your session is about to end: save your work.\n'),
    ('gpu_fault', 'NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  570.158.01\n'),
    ('disk_full', '  Normal  NodeHasNoDiskPressure  3m  kubelet  Node node-03 status is now: NodeHasNoDiskPressure\n'),
    ('ref_load_missing', "WARNING: could not find the metadata file /ckpt/latest_checkpointed_iteration.txt\n"),  # warns, goes on
    ('inductor_cache', 'INFO 05-28 18:58:32 [backends.py:215] Compiling a graph for dynamic shape takes 21.3 s\n'),
    ('version_mismatch', "ImportError: FlashAttention2 has been toggled on, but it cannot be used due to the following error: the package flash_attn seems to be not installed.\n"),
    ('version_mismatch', "AttributeError: 'MyTrainer' object has no attribute 'llm'\n"),  # a user's own trainer, no TRL trainer in its name
    # a project's subclass of a TRL trainer missing an attribute of its own (Hui-design/Open-LLaVA-Video-R1#3; StarsfieldAI/R1-V#44,
    # a pull request's own bug): no TRL release is named by it
    ('version_mismatch', "AttributeError: 'LLaVAVideoGRPOTrainer' object has no attribute 'image_processor'\n"),
    ('version_mismatch', "AttributeError: 'Qwen2VLGRPOVLLMTrainer' object has no attribute '_last_loaded_step'\n"),
    ('version_mismatch', "TypeError: MyConfig.__init__() got an unexpected keyword argument 'top_p'\n"),
    ('weight_name_refused', "ValueError: There is no module or parameter named 'lm_head' in Qwen3ForCausalLM\n"),  # an HF name
    ('version_mismatch', "ImportError: cannot import name 'Net' from partially initialized module 'torch_models' (most likely "
     "due to a circular import)\n"),
    ('version_mismatch', "KeyError: 'qwen2'\n"),  # no AutoConfig frame: any dict's key
    ('version_mismatch', "ImportError: libfoo.so: cannot open shared object file: No such file or directory\n"),  # not cut
]


@pytest.mark.parametrize(("outcome", "line"), SOURCE_WORDINGS, ids=[f"{c[0]}-{i}" for i, c in enumerate(SOURCE_WORDINGS)])
def test_source_wordings_are_recognised(tmp_path, outcome, line):
    obs = examine(tmp_path, HEAD + line)
    assert obs.outcome == outcome, obs.summary
    assert obs.evidence["pattern_source"]


@pytest.mark.parametrize(("outcome", "line"), SOURCE_NEAR_MISSES, ids=[f"not-{c[0]}-{i}" for i, c in enumerate(SOURCE_NEAR_MISSES)])
def test_source_near_misses_are_not_the_failure(tmp_path, outcome, line):
    assert examine(tmp_path, HEAD + line).outcome != outcome


@pytest.mark.parametrize("line", [
    # newer NCCL ends its /dev/shm failure in ENOSPC's words
    "ubuntu:9621:9691 [6] misc/shmutils.cc:71 NCCL WARN Error: failed to extend /dev/shm/nccl-fjwOOB to 5967876 "
    "bytes, error: No space left on device (28)\n",
    # older NCCL's (NVIDIA/nccl#290, #342: Docker's 64 MB default, fixed with --shm-size)
    "gpu2-ru7:2143:2561 [1] include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No space left on device\n",
    # the segment's failure as torch reports NCCL's last error (pytorch/torchtitan#853, fixed by --shm-size=1g)
    "  Error while creating shared memory segment /dev/shm/nccl-1YsMbG (size 7340384)\n",
    "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).\n",
])
def test_a_full_dev_shm_is_the_containers_shared_memory_not_the_checkpoints_disk(tmp_path, line):
    obs = examine(tmp_path, HEAD + line)
    assert obs.outcome == "disk_full"
    assert "/dev/shm" in obs.evidence["explanation"] and "--shm-size" in obs.evidence["remedy"]


def test_a_shared_memory_segment_refused_for_its_permissions_is_not_a_full_dev_shm(tmp_path):
    # NVIDIA/nccl#328: shm_open refused first; the segment's failure after it says nothing of space
    log = HEAD + ("node08:27106:27302 [0] include/shm.h:27 NCCL WARN Call to shm_open failed : Permission denied\n"
                  "node08:27106:27302 [0] include/shm.h:48 NCCL WARN Error while creating shared memory segment "
                  "nccl-shm-recv-b7948f403864987a-0-3-0 (size 4460544)\n")
    assert examine(tmp_path, log).outcome != "disk_full"


def test_a_checkpoint_on_a_full_disk_keeps_the_disks_remedy(tmp_path):
    obs = examine(tmp_path, HEAD + "OSError: [Errno 28] No space left on device: '/ckpt/iter_0000100'\n")
    assert obs.outcome == "disk_full" and "remedy" not in obs.evidence


def test_a_pod_kubernetes_cannot_place_for_its_gpus_is_short_of_gpus(tmp_path):
    event = ("  Warning  FailedScheduling  30s   default-scheduler  0/3 nodes are available: 1 node(s) had untolerated "
             "taint {node-role.kubernetes.io/control-plane: }, 2 Insufficient nvidia.com/gpu. preemption: 0/3 nodes "
             "are available: 3 No preemption victims found for incoming pod.\n")
    obs = examine(tmp_path, "Events:\n" + event)
    assert obs.outcome == "insufficient_gpus"
    assert "nvidia.com/gpu" in obs.evidence["remedy"]
    # a pod short of CPUs is not short of GPUs
    assert examine(tmp_path, event.replace("Insufficient nvidia.com/gpu", "Insufficient cpu")).outcome != "insufficient_gpus"


@pytest.mark.parametrize("line", [
    # kubernetes/kubernetes#19825: exit 137 from a failed liveness probe, the container not OOM-killed
    "1. container's **State.OOMKilled** is false, and **State.ExitCode** is 137.\n",
    '            "OOMKilled": false,\n',
    "OOMKilled: false, ExitCode: 137 (this is not related to OOMKilled)\n",
])
def test_the_oom_killed_flag_read_false_is_no_oom_kill(tmp_path, line):
    assert examine(tmp_path, HEAD + line).outcome != "host_oom_killed"


def test_a_step_srun_cancelled_after_a_task_failed_is_that_tasks_failure(tmp_path):
    # facebookresearch/deit#102: srun ends the step after task 5 exits 1; the cancellation has no reason of its own
    log = ("srun: error: learnfair0824: task 5: Exited with exit code 1\n"
           "srun: launch/slurm: _step_signal: Terminating StepId=43575862.0\n"
           "slurmstepd: error: *** STEP 43575862.0 ON learnfair0824 CANCELLED AT 2021-07-14T08:00:36 ***\n"
           "srun: error: learnfair0824: tasks 3,7: Killed\n")
    obs = examine(tmp_path, log)
    assert obs.outcome == "other_error"
    assert obs.evidence["line"]["where"].endswith("job.log:1")


def test_a_time_limit_after_the_training_finished_is_a_hang_at_exit(tmp_path):
    # NVIDIA-NeMo/Megatron-Bridge#1656: Megatron's last words, then the job hung until Slurm's limit
    log = ("[after training is done] datetime: 2025-12-03 14:45:03\n"
           "slurmstepd: error: *** STEP 4226796.2 ON eos0117 CANCELLED AT 2025-12-03T14:53:02 DUE TO TIME LIMIT ***\n")
    obs = examine(tmp_path, log)
    assert obs.outcome == "sched_ended"
    assert obs.evidence["training_finished"] == {"where": "job.log:1",
                                                 "text": "[after training is done] datetime: 2025-12-03 14:45:03"}
    assert "hung at its exit" in obs.evidence["remedy"]
    # in a log longer than the tail read, the words are placed from the cancellation
    big = "x" * 200 + "\n"
    obs = examine(tmp_path, big * 30_000 + log.replace("\n", "\n" + "waiting\n" * 3, 1))
    assert obs.evidence["training_finished"]["where"] == "4 lines above it"
    # the limit in the middle of training keeps the scheduler's remedy
    obs = examine(tmp_path, log.split("\n", 1)[1])
    assert obs.outcome == "sched_ended" and "training_finished" not in obs.evidence and "remedy" not in obs.evidence


def test_a_cancellation_with_no_failed_task_before_it_is_the_schedulers(tmp_path):
    log = HEAD + "slurmstepd: error: *** JOB 43575862 ON learnfair0824 CANCELLED AT 2021-07-14T08:00:36 ***\n"
    assert examine(tmp_path, log).outcome == "sched_ended"


def test_an_eviction_is_decided_by_what_the_node_ran_low_on(tmp_path):
    # kubectl describe: `Reason: Evicted` first, the kubelet's reason after it (kubernetes/kubernetes#91600)
    block = ("Status:         Failed\nReason:         Evicted\nMessage:        The node was low on resource: "
             "ephemeral-storage. Container trainer was using 34260Ki, which exceeds its request of 0.\n")
    assert examine(tmp_path, HEAD + block).outcome == "disk_full"


def test_one_generation_refused_at_start_is_the_degenerate_group_verdict(tmp_path, capsys):
    import json

    from triage.cli import main

    log = tmp_path / "job.log"
    log.write_text(
        '  File "/usr/local/lib/python3.11/site-packages/trl/trainer/grpo_config.py", line 812, in __post_init__\n'
        "ValueError: GRPO requires at least 2 generations per prompt to calculate the advantages. You provided 1, "
        "which is less than the minimum required.\n", encoding="utf-8")
    rc = main(["run", str(log), "--json", "--no-cache"])
    report = json.loads(capsys.readouterr().out)
    assert report["root_cause"]["id"] == "algo.degenerate_groups"
    assert rc == 0


def test_a_remote_actors_import_error_with_its_address_in_front_is_a_version_mismatch(tmp_path):
    # xorbitsai/xoscar re-raises an actor's error with `[address=…, pid=…]` before its message
    # (sgl-project/sglang#2552: outlines' build_regex_from_schema gone under vllm 0.6.5)
    line = ("ImportError: [address=0.0.0.0:40067, pid=32176] cannot import name 'build_regex_from_schema' from "
            "'outlines.fsm.json_schema' (/root/miniconda3/envs/xinf/lib/python3.10/site-packages/outlines/fsm/json_schema.py)\n")
    obs = examine(tmp_path, HEAD + line)
    assert obs.outcome == "version_mismatch", obs.summary
    assert obs.evidence["signature"] == "dependency_api_mismatch"


def test_a_circular_import_in_an_installed_package_is_not_a_version_mismatch(tmp_path):
    line = ("ImportError: cannot import name 'Foo' from partially initialized module 'mypkg.models' (most likely due to "
            "a circular import) (/usr/lib/python3.10/site-packages/mypkg/models.py)\n")
    obs = examine(tmp_path, HEAD + line)
    assert obs.outcome != "version_mismatch", obs.summary


def test_a_class_attribute_the_installed_dependency_lacks_is_a_version_mismatch(tmp_path):
    # verl-project/verl#6927: Megatron-Core 0.18 removed ModelType.encoder_and_decoder; the paste starts at
    # a frame line that lost its indentation, with no `Traceback` header above it
    log = ('File ".../verl/utils/megatron_utils.py", line 72, in get_model\n'
           "    assert model_type != ModelType.encoder_and_decoder, (\n"
           "AttributeError: type object 'ModelType' has no attribute 'encoder_and_decoder'\n")
    obs = examine(tmp_path, log)
    assert obs.outcome == "version_mismatch", obs.summary
    assert "verl" in obs.evidence["packages"]
    # the same wording in the user's own script, with no package in its frames, is not a version
    own = ('Traceback (most recent call last):\n  File "train.py", line 3, in <module>\n    Config.lr\n'
           "AttributeError: type object 'Config' has no attribute 'lr'\n")
    assert examine(tmp_path, own).outcome == "other_error"


def test_an_error_vllm_logs_from_inside_a_ray_actor_is_read_through_both_prefixes(tmp_path):
    # vLLM v1 prefixes its engine process's lines `(EngineCore_DP0 pid=…)` and its logger's
    # `ERROR MM-DD HH:MM:SS [file:line]`, inside Ray's own `(Actor pid=…)` (OpenRLHF/OpenRLHF#1193)
    pre = "(LLMRayActor pid=585804) (EngineCore_DP0 pid=586112) ERROR 03-05 00:25:45 [core.py:1094] "
    log = (pre + "Invocation of collective_rpc method failed\n"
           + pre + "Traceback (most recent call last):\n"
           + pre + '  File "/home/u/.local/lib/python3.12/site-packages/vllm/v1/engine/core.py", line 657, in collective_rpc\n'
           + pre + "    return self.model_executor.collective_rpc(method, timeout, args, kwargs)\n"
           + pre + "TypeError: collective_rpc() got an unexpected keyword argument 'non_block'\n")
    obs = examine(tmp_path, log)
    assert obs.outcome == "version_mismatch", obs.summary
    assert obs.evidence["packages"] == ["vllm"]
    assert obs.evidence["line"]["where"].endswith("job.log:5")


def test_cpps_terminate_header_does_not_hide_the_watchdog_timeout_under_it(tmp_path):
    # NVIDIA/Megatron-LM#935: libstdc++ prints `terminate called after throwing …` and then the message as `what():`
    log = ("terminate called after throwing an instance of 'c10::DistBackendError'\n"
           "  what():  [PG 1 Rank 1] Process group watchdog thread terminated with exception: [Rank 1] Watchdog caught "
           "collective operation timeout: WorkNCCL(SeqNum=199, OpType=_REDUCE_SCATTER_BASE, NumelIn=7098994688, "
           "NumelOut=443687168, Timeout(ms)=600000) ran for 600012 milliseconds before timing out.\n")
    obs = examine(tmp_path, log)
    assert obs.outcome == "nccl_abort", obs.summary
    assert obs.evidence["line"]["where"].endswith("job.log:2")
    # a terminate whose message no signature explains is still the unlisted error it was
    other = "terminate called after throwing an instance of 'std::runtime_error'\n  what():  bad state\n"
    assert examine(tmp_path, other).outcome == "other_error"


def test_an_uncaught_cpp_exception_without_error_words_stops_the_job_at_its_message(tmp_path):
    # sgl-project/sglang#6763: gloo's EnforceNotMet names no Error; the interpreter's `Fatal Python error:
    # Aborted` after it is the abort the terminate caused, not the first error
    log = ("terminate called after throwing an instance of 'gloo::EnforceNotMet'\n"
           "  what():  [enforce fail at /pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:446] "
           "op.preamble.length <= op.nbytes. 128 vs 8\n"
           "Fatal Python error: Aborted\n")
    obs = examine(tmp_path, log)
    assert obs.outcome == "other_error", obs.summary
    assert obs.evidence["line"]["where"].endswith("job.log:2")
    assert "enforce fail" in obs.summary


def test_a_workers_exit_code_of_1_reports_the_error_the_worker_printed(tmp_path):
    # torch elastic's summary of a worker whose own traceback is the error decides nothing
    log = ("[rank1]: ValueError: the batch is empty\n"
           "E0521 18:06:37.491000 2915962 site-packages/torch/distributed/elastic/multiprocessing/api.py:869] "
           "failed (exitcode: 1) local_rank: 1 (pid: 2916310) of binary: /usr/bin/python3\n")
    obs = examine(tmp_path, log)
    assert obs.evidence["line"]["where"].endswith("job.log:1"), obs.summary


def test_an_engine_refusing_a_weight_update_tensor_is_its_own_outcome(tmp_path):
    # THUDM/slime#2280 (expert shards sent ungathered); sgl-project/sglang#26032 (weights re-laid-out after loading)
    log = ("(SGLangEngine pid=1493437) [2026-05-21 16:07:41 DP6 TP6] Failed to update parameter online: start (256) "
           "+ length (256) exceeds dimension size (256).. The full weights of the ModelRunner are partially updated. "
           "Please discard the whole weights.\n")
    obs = examine(tmp_path, log)
    assert obs.outcome == "weight_update_refused", obs.summary
    assert obs.evidence["line"]["where"].endswith("job.log:1")
    # a refused name stays the converter's
    named = "Failed to update parameter online: Unknown parameter name: model.layers.0.mlp.experts.w13_weight\n"
    assert examine(tmp_path, named).outcome == "weight_name_refused"


@pytest.mark.parametrize("line", [
    # a CUDA kernel's device-side assert (NVIDIA/Megatron-LM#1038), printed before any traceback
    "/opt/pytorch/pytorch/aten/src/ATen/native/cuda/Indexing.cu:1284: indexSelectLargeIndex: block: [37,0,0], "
    "thread: [92,0,0] Assertion `srcIndex < srcSelectDimSize` failed.\n",
    # an OSError printed as the job's last words (NVIDIA/Megatron-LM#185)
    "[Errno 2] No such file or directory: 'checkpoints/gpt2_345m/iter_0006000/mp_rank_00/model_optim_rng.pt'\n",
    # NCCL's CUDACHECK inside a Ray actor (THUDM/slime#1106)
    "(MegatronTrainRayActor pid=228664) [2025-12-13 03:21:03] e54db9740f9d:228664:229081 [1] enqueue.cc:42 NCCL WARN "
    "Cuda failure 'named symbol not found'\n",
    # UCX's fatal signal handler under NCCL, then its native backtrace (NVIDIA/Megatron-LM#516)
    "[09677202c889:5283 :0:5704] Caught signal 7 (Bus error: nonexistent physical address)\n"
    "==== backtrace (tid:   5704) ====\n",
    # the native fatal-signal banner, then native frames (modelscope/ms-swift#8306)
    "!!!!!!! Segfault encountered !!!!!!!\n"
    '  File "<unknown>", line 0, in caffe2::serialize::PyTorchStreamWriter::writeRecord(std::string const&)\n',
    # Ray's core worker aborting on a failed glog CHECK (THUDM/slime#72)
    "(raylet) [2025-07-30 08:25:11,734 C 2786 2786] core_worker.cc:1023:  Check failed: "
    "worker_context_.GetCurrentActorID().IsNil() \n(raylet) *** StackTrace Information ***\n",
    # a rank that segfaulted, of which torch elastic's summary is the only word (modelscope/ms-swift#4302)
    "E0521 18:06:37.491000 2915962 site-packages/torch/distributed/elastic/multiprocessing/api.py:869] "
    "failed (exitcode: -11) local_rank: 3 (pid: 2916310) of binary: /usr/bin/python3\n",
    # SGLang's launcher taking the engine down after a child died, logged without a level word (sgl-project/sglang#3685)
    "[2026-04-15 07:45:17] Received sigquit from a child process. It usually means the child failed.\n",
    # an exception without a message, below a traceback whose head the paste cut off (modelscope/ms-swift#4418)
    "[rank1]: AssertionError\n",
    # SGLang's scheduler watchdog, the hang that comes before the engine's sigquit (sgl-project/sglang#3752)
    "[2025-03-09 00:57:15 TP4] Watchdog timeout (self.watchdog_timeout=300)\n",
    # torch_memory_saver's failed CUDA call, after which it exits (fzyzcjy/torch_memory_saver#35, THUDM/slime#1895)
    "[torch_memory_saver.cpp] CUresult error  result=1 file=csrc/torch_memory_saver.cpp func=resume line=214\n",
    "[torch_memory_saver.cpp] CUresult error: 1 (invalid argument)  file=csrc/core.cpp func=free line=81\n",
    # an NCCL call's failure logged by its caller without the exception's type (areal-project/AReaL#177)
    "[2025-07-15 02:18:13] Failed to initialize custom process group: NCCL error in: /pytorch/torch/csrc/distributed/"
    "c10d/NCCLUtils.hpp:268, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5\n",
    "ncclUnhandledCudaError: Call to CUDA function failed.\n",
    # vLLM's custom all-reduce check (vllm-project/vllm#56180) and torch_npu's failed call (huggingface/trl#5142)
    "Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:164 'invalid argument'\n",
    "[rank0]: NPU function error: call failed, error code is 50\n",
    # LLVM's fatal error under a Triton compile, which aborts the worker (verl-project/verl#1633)
    "(WorkerDict pid=804460) LLVM ERROR: Failed to compute parent layout\n",
    # Ray's core worker that cannot register with its raylet exits (Jiayi-Pan/TinyZero#7)
    "[2025-01-25 08:22:57,421 E 759 759] core_worker.cc:496: Failed to register worker to Raylet: IOError: "
    "[RayletClient] Unable to register worker with raylet. Failed to read data from the socket: End of file\n",
    # torch's asynchronous device-side assert as the kernel prints it, and SGLang's report of the child it took down
    # (THUDM/slime#2209: NaN sampling probabilities after a delta weight update)
    "TensorCompare.cu:109 _assert_async_cuda_kernel: Assertion `probability tensor contains either inf, nan or "
    "element < 0` failed\n",
    "Subprocess scheduler_0 crashed with exit code -3. Triggering SIGQUIT for cleanup...\n",
    # an I/O error a caller logged with its own words first (THUDM/slime#326, a checkpoint save)
    "ERROR: megatron.core.dist_checkpointing.strategies.filesystem_async: Local process 0 encountered an error: "
    "[Errno 5] Input/output error\n",
    # a rank's exception behind torch elastic's `[default7]:` and torch's `[rank7]:` (NVIDIA/Megatron-LM#3885)
    "[default7]:[rank7]: KeyError: 'state'\n",
    # the exception line quoted as code in a Markdown list item (THUDM/slime#1702)
    "   - `KeyError: 'mtp.layers.0.mlp.experts.gate_up_proj'`\n",
    # argparse refusing a subcommand the installed CLI does not have (huggingface/trl#3139)
    "TRL CLI: error: argument command: invalid choice: 'vllm-serve' (choose from 'chat', 'dpo', 'env', 'grpo', 'kto', 'sft')\n",
])
def test_hard_failures_without_an_exception_line_still_stop_the_job(tmp_path, line):
    obs = examine(tmp_path, line)
    assert obs.outcome == "other_error", obs.summary
    assert obs.evidence["line"]["where"].endswith("job.log:1")


def test_an_errno_in_the_middle_of_a_retry_message_is_not_the_jobs_end(tmp_path):
    obs = examine(tmp_path, "connect failed with [Errno 111] Connection refused, retrying in 5 s\n")
    assert obs.outcome == "none", obs.summary


def test_an_attribute_missing_on_a_users_own_object_is_not_a_version_mismatch(tmp_path):
    # the same wording, raised in the user's reward function called from verl: not one package's call into another
    log = ("Traceback (most recent call last):\n"
           '  File "/workspace/verl/verl/workers/reward_manager/naive.py", line 88, in __call__\n'
           "    score = self.compute_score(data_source, response_str, ground_truth)\n"
           '  File "/home/u/my_reward.py", line 12, in compute_score\n'
           "    return scorer.grade(solution)\n"
           "AttributeError: 'Scorer' object has no attribute 'grade'\n")
    assert examine(tmp_path, log).outcome == "other_error"
    # nor a value left unset inside one package
    none = log.replace("'Scorer'", "'NoneType'").replace("/home/u/my_reward.py", "/usr/lib/python3/site-packages/vllm/x.py")
    assert examine(tmp_path, none).outcome == "other_error"


def test_hydras_header_gives_way_to_the_error_its_traceback_ends_on(tmp_path):
    # verl's entry points run under Hydra, which prints this line before the app's traceback
    hydra = "Error executing job with overrides: ['trainer.nnodes=1', 'trainer.n_gpus_per_node=8']\n"
    log = (hydra + "Traceback (most recent call last):\n"
           '  File "/workspace/verl/verl/trainer/main_ppo.py", line 64, in main\n    run_ppo(config)\n'
           "torch.distributed.DistBackendError: [Rank 3] Watchdog caught collective operation timeout: "
           "WorkNCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600019 "
           "milliseconds before timing out.\n")
    obs = examine(tmp_path, log)
    assert obs.outcome == "nccl_abort", obs.summary
    # alone, the header names no error: its exception was cut off under it (verl-project/verl#217 and
    # #1929 pasted only that line), and the error's words are not in the log to match
    with pytest.raises(Unavailable, match="job.log:2 is cut before its exception line"):
        examine(tmp_path, "some output\n" + hydra)


@pytest.mark.parametrize("prefix", [
    "2025-07-25T07:53:08.21748708+08:00 stdout F ",  # a pod's log file as kubelet writes it (CRI)
    "2024-12-23T10:09:14.717696906Z ",  # `docker logs --timestamps` (axolotl-ai-cloud/axolotl#2218)
    "> ",  # a quoted GitHub comment
    "outlines-server-1  | ",  # Docker Compose's service prefix (sgl-project/sglang#203)
    "wandb: ERROR ",  # W&B's sweep agent logging a run's traceback (unslothai/unsloth-zoo#127)
    "[2025-12-18T16:24:02+08:00] rl-qwen3-8b-20251218-3da56-cfcd2 >> ",  # a log collector's pod prefix (THUDM/slime#1177)
    "【2024-12-13 15:37:21】",  # a log viewer's time in full-width brackets (alibaba/ChatLearn#179)
])
def test_what_carried_a_line_is_stripped_before_it_is_read(tmp_path, prefix):
    log = prefix + "[2025-07-25 07:53:08 TP2] Scheduler hit an exception: Traceback (most recent call last):\n" + \
        prefix + '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 2512, in run\n' + \
        prefix + "    scheduler.event_loop_overlap()\n" + \
        prefix + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
    obs = examine(tmp_path, log)
    assert obs.outcome == "cuda_oom", obs.summary
    assert obs.evidence["line"]["text"].startswith("torch.OutOfMemoryError")


@pytest.mark.parametrize("line", [
    # astral-sh/uv (sgl-project/sglang#11628: sglang 0.5.3.post1 pinned the yanked transformers 4.57.0)
    "  × No solution found when resolving dependencies:\n",
    # pypa/pip's resolver
    "ERROR: Cannot install sglang==0.5.3 and transformers==4.40.0 because these package versions have conflicting "
    "dependencies.\n",
])
def test_a_resolver_that_finds_no_versions_is_a_version_mismatch(tmp_path, line):
    obs = examine(tmp_path, line)
    assert obs.outcome == "version_mismatch", obs.summary
    assert obs.evidence["signature"] == "runtime_version_check"


def test_frames_pasted_without_indentation_or_function_names_still_name_the_package(tmp_path):
    # NVIDIA/Megatron-LM#293 as pasted: the renderer ate `<module>` and every indent
    log = ("Traceback (most recent call last):\n"
           'File "pretrain_gpt.py", line 28, in\n'
           "from megatron.training import pretrain\n"
           'File "/mnt/wd/megatron/training.py", line 43, in\n'
           "from megatron.optimizer import get_megatron_optimizer\n"
           'File "/mnt/wd/megatron/optimizer/clip_grads.py", line 19, in\n'
           "from torch._six import inf\n"
           "ModuleNotFoundError: No module named 'torch._six'\n")
    obs = examine(tmp_path, log)
    assert obs.outcome == "version_mismatch", obs.summary
    assert obs.evidence["line"]["where"].endswith("job.log:8")


def test_a_raise_line_of_a_frame_gives_way_to_the_exception_printed_under_it(tmp_path):
    # axolotl-ai-cloud/axolotl#3008 as pasted: frames without their header, torchrun's launcher raising
    log = ('  File "/usr/local/lib/python3.11/dist-packages/torch/distributed/launcher/api.py", line 269, in launch_agent\n'
           "    raise ChildFailedError(\n"
           "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
           "axolotl.cli.train FAILED\n")
    obs = examine(tmp_path, log)
    assert obs.outcome == "other_error", obs.summary
    assert obs.evidence["line"]["where"].endswith("job.log:3")
    # a raise statement pasted alone is still the line the job died on
    obs = examine(tmp_path, '    raise ValueError("reward function returned None")\n')
    assert obs.outcome == "other_error" and obs.evidence["line"]["where"].endswith("job.log:1")


def test_a_server_that_crashed_first_explains_its_clients_loopback_timeout(tmp_path):
    # rank 0 holds the TCPStore: when it dies, the other ranks time out on 127.0.0.1 as well
    log = ("[rank0]: Traceback (most recent call last):\n"
           '[rank0]:   File "/home/u/train.py", line 10, in <module>\n'
           "[rank0]:     main()\n"
           "[rank0]: RuntimeError: the dataset is empty\n"
           "[E1118 17:30:24.226257071 socket.cpp:1019] [c10d] The client socket has timed out after 300000ms while "
           "trying to connect to (127.0.0.1, 29500).\n")
    obs = examine(tmp_path, log)
    assert obs.outcome == "other_error", obs.summary
    assert obs.evidence["line"]["where"].endswith("job.log:4")


def test_an_engine_that_died_first_explains_the_routers_503(tmp_path):
    # the router answers 503 once its engines are gone: the engine's own error is the first and decides
    log = ("(SGLangEngine pid=77) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
           "total capacity of 79.11 GiB of which 1.02 GiB is free.\n"
           "(RolloutManager pid=519445) Error: Server error '503 Service Unavailable' for url 'http://10.78.210.151:4674/generate'\n")
    obs = examine(tmp_path, log)
    assert obs.outcome == "cuda_oom", obs.summary


def test_vllms_worker_error_written_before_its_traceback_is_not_a_cut_traceback(tmp_path):
    # vLLM's worker writes `…while processing method M: <message>, Traceback (most recent call last):` and the frames
    # after it; a paste that ends in the frames still holds the error's words (vllm-project/vllm#5531)
    prefix = "(VllmWorkerProcess pid=73) ERROR 06-13 01:30:49 multiproc_worker_utils.py:225] "
    log = (prefix + "Exception in worker VllmWorkerProcess while processing method load_model: the lora adapter has no "
           "target modules, Traceback (most recent call last):\n"
           + prefix + '  File "/usr/local/lib/python3.10/dist-packages/vllm/executor/multiproc_worker_utils.py", line 222, '
           "in _run_worker_process\n"
           + prefix + "    output = executor(*args, **kwargs)\n")
    obs = examine(tmp_path, log)
    assert obs.outcome == "other_error", obs.summary
    assert obs.evidence["line"]["where"].endswith("job.log:1") and "cut before" not in obs.summary


def test_a_torch_build_without_the_gpus_kernels_explains_the_cuda_failure_after_it(tmp_path):
    # pytorch/pytorch#152077: a cu118 build on an RTX 5090 (sm_120); NCCL is the first to run a kernel and fail
    log = ("/usr/lib/python3.10/site-packages/torch/cuda/__init__.py:235: UserWarning:\n"
           "NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current PyTorch installation.\n"
           "The current PyTorch install supports CUDA capabilities sm_37 sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90.\n"
           "4d1a2ae696c8:50555:50555 [0] NCCL WARN Cuda failure 'named symbol not found'\n"
           "RuntimeError: NCCL Error 1: unhandled cuda error\n")
    obs = examine(tmp_path, log)
    assert obs.outcome == "version_mismatch", obs.summary
    assert "sm_120" in obs.evidence["line"]["text"]


def test_sglangs_piecewise_graph_error_is_the_crash_not_the_cut_scheduler_traceback_under_it(tmp_path):
    # SGLang logs the capture's exception and re-raises it; the scheduler's traceback of it was cut (sgl-project/sglang#27811)
    log = ("[2026-06-10 13:08:34 TP7] Piecewise CUDA Graph failed with error: 'TcPiecewiseForwardContext' object has no "
           "attribute 'num_tokens'\n"
           "Piecewise CUDA Graph is enabled by default as an experimental feature.\n"
           "To work around this error, add --disable-piecewise-cuda-graph to your launch command.\n"
           "[2026-06-10 13:08:34 TP5] Scheduler hit an exception: Traceback (most recent call last):\n"
           '  File "/repos/sglang/python/sglang/srt/managers/scheduler.py", line 4048, in run_scheduler_process\n'
           "    scheduler = Scheduler(\n")
    obs = examine(tmp_path, log)
    assert obs.outcome == "other_error", obs.summary
    assert obs.evidence["line"]["where"].endswith("job.log:1") and "num_tokens" in obs.summary


def test_a_traceback_header_without_its_exception_is_not_quoted_as_the_error(tmp_path):
    # radixark/miles#308 as pasted: the header and the frames, the exception line cut away
    log = ("(MilesRouter pid=1) INFO started\n"
           "Traceback (most recent call last):\n"
           '  File "/tmp/ray/session_2025-12-11_05-56-06/runtime_resources/working_dir_files/train.py", line 106, '
           "in <module>\n"
           "    train(args)\n")
    with pytest.raises(Unavailable, match=r"job.log:\d+ is cut before its exception line"):
        ErrorSignatures().examine(make_run(tmp_path, log))
    # and the symptom says what it was, not the header's words
    from probes.symptom import Symptom

    obs = Symptom().examine(make_run(tmp_path, log))
    assert obs.outcome == "error_exit"
    assert "`Traceback (most recent call last):`" not in obs.summary


def test_a_bare_exception_under_headerless_frames_ends_the_job(tmp_path):
    # huggingface/trl#3587 as pasted: the frames without their header, then `raise Exception(...)`'s line
    log = ('  File "/opt/conda/lib/python3.11/site-packages/trl/extras/vllm_client.py", line 233, in init_communicator\n'
           '    raise Exception(f"Request failed: {response.status_code}, {response.text}")\n'
           'Exception: Request failed: 404, {"detail":"Not Found"}\n')
    obs = examine(tmp_path, log)
    assert obs.outcome == "other_error"
    assert obs.evidence["line"]["text"] == 'Exception: Request failed: 404, {"detail":"Not Found"}'


def test_a_users_elision_note_is_not_an_error_line(tmp_path):
    # verl-project/verl#3873 as pasted: the user's note where the paste was cut, then the first real report
    log = ("(TaskRunner pid=2119) step:12 - actor/pg_loss:0.01\n"
           "... (many NCCL timeout errors from different ranks) ...\n"
           "(WorkerDict pid=3301) [rank3]:[E1023 10:20:03.551 ProcessGroupNCCL.cpp:632] [Rank 3] Watchdog caught "
           "collective operation timeout: WorkNCCL(SeqNum=26, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
           "Timeout(ms)=600000) ran for 600021 milliseconds before timing out.\n"
           "(raylet) A worker died or was killed while executing a task by an unexpected system error. To troubleshoot "
           "the problem, check the logs for the dead worker.\n")
    obs = examine(tmp_path, log)
    assert obs.outcome == "nccl_abort"
    assert obs.evidence["line"]["where"].endswith("job.log:3")
    from probes.symptom import Symptom

    sym = Symptom().examine(make_run(tmp_path, log))
    assert sym.evidence["details"]["error_exit"]["where"].endswith("job.log:3")  # not the raylet's report after it



def test_an_nccl_calls_own_failure_is_that_ranks_crash_not_an_abort(tmp_path):
    # verl-project/verl#2044: the first barrier fails inside NCCL on this rank; nothing timed out
    log = ("torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.hpp:268, "
           "unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5\n")
    assert examine(tmp_path, log).outcome == "other_error"
    remote = ("torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:"
              "1970, remote process exited or there was a network error, NCCL version 2.21.5\n")
    assert examine(tmp_path, remote).outcome == "nccl_abort"  # a peer's failure reaching this rank


def test_a_parameter_name_the_engine_refuses_in_a_weight_sync_is_the_name_mapping(tmp_path):
    # verl-project/verl#706: the trainer sends lm_head, which the engine's model (tied embeddings) lacks
    log = ("Traceback (most recent call last):\n"
           '  File "/workspace/verl/verl/workers/sharding_manager/megatron_vllm.py", line 301, in __enter__\n'
           "    self.inference_engine.sync_model_weights(per_tensor_param, load_format='megatron')\n"
           '  File "/workspace/verl/verl/third_party/vllm/vllm_v_0_6_3/llm.py", line 190, in sync_model_weights\n'
           "    self.llm_engine.sync_model_weights(actor_weights=actor_weights, load_format=load_format)\n"
           '  File "/workspace/verl/verl/third_party/vllm/vllm_v_0_6_3/megatron_weight_loaders.py", line 247, in '
           "load_megatron_weights\n"
           "    param = params_dict[name]\n"
           "KeyError: 'lm_head.weight'\n")
    obs = examine(tmp_path, log)
    assert obs.outcome == "weight_name_refused" and obs.evidence["signature"] == "weight_name_keyerror_in_sync"
    # the same KeyError while an engine loads a checkpoint at start is not a name the trainer made
    start = log.replace("sync_model_weights", "load_model")
    assert examine(tmp_path, start).outcome == "other_error"


@pytest.mark.parametrize("line, outcome", [
    # huggingface/trl#3199: one generation per prompt is refused whatever the batch (the valid values start at 2)
    ("ValueError: The global train batch size (1 x 4) must be evenly divisible by the number of generations per "
     "prompt (1). Given the current train batch size, the valid values for the number of generations are: [2, 4].\n",
     "degenerate_groups"),
    ("ValueError: The global train batch size (1 x 6) must be evenly divisible by the number of generations per "
     "prompt (4). Given the current train batch size, the valid values for the number of generations are: [2, 3, 6].\n",
     "batch_size_mismatch"),
    # OpenRLHF/OpenRLHF#911 kept only the advice of Ray's memory-monitor kill message
    ("(ActorModelRayActor pid=8249) Refer to the documentation on how to address the out of memory issue: "
     "https://docs.ray.io/en/latest/ray-core/scheduling/ray-oom-prevention.html. Consider provisioning more memory\n",
     "host_oom_killed"),
    # verl-project/verl#539: a pool checked again while its own actors held every GPU reads 0 (a verl bug)
    ("ValueError: Total available GPUs 0 is less than total desired GPUs 8\n", "other_error"),
    ("ValueError: Total available GPUs 7.0 is less than total desired GPUs 8\n", "insufficient_gpus"),
])
def test_field_wordings_with_a_twist(tmp_path, line, outcome):
    assert examine(tmp_path, line).outcome == outcome


IGNORED = (  # huggingface/open-r1#658: math_verify's timeout raised in a finalizer, which Python reports and goes on from
    "Exception ignored in: <finalize object at 0x7f7d7b9bc920; dead>\n"
    "Traceback (most recent call last):\n"
    '  File "/usr/lib/python3.12/weakref.py", line 585, in __call__\n'
    "    def __call__(self, _=None):\n"
    "\n"
    '  File "/usr/lib/python3.12/site-packages/math_verify/utils.py", line 43, in handler\n'
    '    raise TimeoutError("Operation timed out!")\n'
    "TimeoutError: Operation timed out!\n"
)
WATCHDOG = ("[rank2]:[E516 06:09:16.295666043 ProcessGroupNCCL.cpp:629] [Rank 2] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=49296, OpType=_ALLGATHER_BASE, NumelIn=192, NumelOut=576, Timeout(ms)=1800000) ran "
            "for 1800077 milliseconds before timing out.\n")


def test_an_error_python_reports_and_goes_on_from_is_not_the_first_error(tmp_path):
    obs = examine(tmp_path, IGNORED + WATCHDOG)
    assert obs.outcome == "nccl_abort", obs.summary
    # the same traceback without the unraisable hook's header is the job's error
    assert examine(tmp_path, IGNORED.split("\n", 1)[1] + WATCHDOG).outcome == "other_error"


REWARD_KEYERROR = (  # PRIME-RL/TTRL#20: verl's reward manager reads a column the dataset does not have
    "ray.exceptions.RayTaskError(KeyError): ray::TaskRunner.run() (pid=221840, ip=172.31.45.209)\n"
    '  File "/workspace/TTRL/verl/verl/trainer/ppo/ray_trainer.py", line 627, in _validate\n'
    "    result = self.val_reward_fn(test_batch, return_dict=True)\n"
    '  File "/workspace/TTRL/verl/verl/workers/reward_manager/ttrl.py", line 203, in _compute_eval_reward\n'
    '    ground_truth = data_item.non_tensor_batch["reward_model"]["ground_truth"]\n'
    "KeyError: 'reward_model'\n"
)


def test_a_key_the_reward_function_cannot_find_is_a_broken_reward_and_elsewhere_is_not(tmp_path):
    obs = examine(tmp_path, REWARD_KEYERROR)
    assert obs.outcome == "reward_fn_failed" and obs.evidence["signature"] == "reward_input_missing_key"
    # the same KeyError raised in the trainer's own code, with no reward frame under it
    trainer = REWARD_KEYERROR.replace("workers/reward_manager/ttrl.py", "trainer/ppo/core_algos.py").replace(
        "_compute_eval_reward", "compute_advantage")
    assert examine(tmp_path, trainer).outcome == "other_error"


def test_a_sigterm_alone_names_no_sender(tmp_path):
    # modelscope/ms-swift#8193: the host ran out of memory while saving and "进程被系统发送 SIGTERM"; the numeric
    # form of the agent's line is read too (PrimeIntellect-ai/prime-rl#1360)
    for line in ("W0304 01:00:36.891000 2245 torch/distributed/elastic/agent/server/api.py:725] Received "
                 "Signals.SIGTERM death signal, shutting down workers\n",
                 "W1130 12:13:49.388000 124326 torch/distributed/elastic/agent/server/api.py:723] Received 15 death "
                 "signal, shutting down workers\n"):
        obs = examine(tmp_path, HEAD + line)
        assert obs.outcome == "terminated", obs.summary
        assert "who sent it" in obs.summary and "sacct" in obs.evidence["confirm"]


def test_a_sigterm_after_an_unlisted_error_is_its_teardown(tmp_path):
    log = HEAD + ("ValueError: the dataset has no column 'solution'\n"
                  "W0810 18:00:14.118000 4123 torch/distributed/elastic/agent/server/api.py:704] Received "
                  "Signals.SIGTERM death signal, shutting down workers\n")
    assert examine(tmp_path, log).outcome == "other_error"


@pytest.mark.parametrize("line", [
    # NVIDIA/Megatron-LM#3984 (megatron-core 0.16 with flash-attn 2.8.3)
    "ValueError: Supported flash-attn versions are >= 2.1.1, <= 2.7.4.post1. Found flash-attn 2.8.3.\n",
    # NVIDIA/TransformerEngine#1123 (an older TransformerEngine's assert)
    "AssertionError: FlashAttention maximum version 2.5.8 is supported.\n",
    # StarsfieldAI/R1-V#127: two ranks printing the same ImportError into one line
    "ImportErrorImportError    : : import flash_attn_2_cuda as flash_attn_gpu/root/miniconda3/envs/r1v/lib/python3.11/"
    "site-packages/flash_attn_2_cuda.cpython-311-x86_64-linux-gnu.so: undefined symbol: "
    "_ZNK3c1011StorageImpl27throw_data_ptr_access_errorEv\n",
])
def test_version_checks_and_abi_errors_in_the_fields_wordings(tmp_path, line):
    assert examine(tmp_path, HEAD + line).outcome == "version_mismatch"


def test_transformer_engines_version_warning_alone_is_not_a_failure(tmp_path):
    # TransformerEngine logs the same words as a warning when it falls back from flash-attn
    line = ("[WARNING  | transformer_engine.pytorch.dot_product_attention.utils]: Supported flash-attn versions are "
            ">= 2.1.1, <= 2.8.0.post2. Found flash-attn 2.8.3.\n")
    assert examine(tmp_path, HEAD + line).outcome != "version_mismatch"


def test_a_call_into_another_package_missing_a_required_argument_is_a_version_mismatch(tmp_path):
    # ROCm/Megatron-LM#83: a newer torch's checkpoint writer calls Megatron's override with one more argument
    log = HEAD + ("Traceback (most recent call last):\n"
                  '  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/checkpoint/filesystem.py", '
                  "line 356, in _write_files_from_queue\n"
                  "    _write_item(transforms, stream, data, write_item, storage_key, serialization_format)\n"
                  "TypeError: _write_item() missing 1 required positional argument: 'serialization_format'\n")
    assert examine(tmp_path, log).outcome == "version_mismatch"
    # a reward function's own signature is the reward's (modelscope/ms-swift#3840)
    line = "TypeError: CosineReward.__call__() missing 1 required positional argument: 'solution'\n"
    assert examine(tmp_path, HEAD + line).outcome == "reward_fn_failed"


def test_a_function_defined_inside_the_code_is_no_packages_api(tmp_path):
    # sgl-project/sglang#4703: SGLang's own layer lambda refused a keyword its own make_layers passed
    log = HEAD + ('  File "/sgl-workspace/sglang/python/sglang/srt/utils.py", line 401, in <listcomp>\n'
                  "    maybe_offload_to_cpu(layer_fn(idx=idx, prefix=add_prefix(idx, prefix)))\n"
                  "TypeError: Phi3SmallModel.__init__.<locals>.<lambda>() got an unexpected keyword argument 'idx'\n")
    assert examine(tmp_path, log).outcome == "other_error"


def test_a_packages_call_with_more_arguments_than_the_installed_function_takes_is_a_version_mismatch(tmp_path):
    # NVIDIA/TransformerEngine#1473: TE 1.13 calls torch 2.4's `is_autocast_enabled(device_type)` under torch 2.1
    log = HEAD + ('  File "/usr/local/lib/python3.10/dist-packages/transformer_engine/pytorch/ops/_common.py", '
                  "line 136, in maybe_autocast_dtype\n"
                  "    if torch.is_autocast_enabled(device_type):\n"
                  "TypeError: torch.is_autocast_enabled() takes no arguments (1 given)\n")
    assert examine(tmp_path, log).outcome == "version_mismatch"
    # the job's own function called with one too many, in its own script, is its own bug
    log = HEAD + ('Traceback (most recent call last):\n  File "train.py", line 3, in <module>\n    f(1, 2)\n'
                  "TypeError: f() takes 1 positional argument but 2 were given\n")
    assert examine(tmp_path, log).outcome == "other_error"


@pytest.mark.parametrize("line", [
    # transformers' own words (configuration_auto.py; hiyouga/LlamaFactory#8139)
    "ValueError: The checkpoint you are trying to load has model type `qwen3` but Transformers does not recognize "
    "this architecture. This could be because of an issue with the checkpoint, or because your version of "
    "Transformers is out of date.",
    # pasted without its type, the backticks taken by a Markdown renderer (filliptm/ComfyUI-FL-AceStep-Training#3)
    "Failed to load LLM: The checkpoint you are trying to load has model type qwen3 but Transformers does not "
    "recognize this architecture.",
])
def test_a_model_type_the_installed_transformers_does_not_know_is_a_version_mismatch(tmp_path, line):
    from triage.sources import open_text_run

    assert examine(tmp_path, HEAD + line + "\n").outcome == "version_mismatch"
    # a paste of the line alone is read, not refused
    assert ErrorSignatures().examine(open_text_run(line + "\n")).outcome == "version_mismatch"


@pytest.mark.parametrize("line", [
    # unslothai/unsloth#1992: unsloth and unsloth_zoo out of step, the ImportError printed without the module's path
    "ImportError: cannot import name '_unsloth_get_batch_samples' from 'unsloth_zoo.loss_utils'",
    # hiyouga/LlamaFactory#9387: Liger Kernel 0.6.3's functional API under an older transformers
    "TypeError: liger_fused_linear_cross_entropy() got an unexpected keyword argument 'return_dict'",
    # flash-attn older than the caller: `softcap` came in flash-attn 2.6
    "TypeError: flash_attn_func() got an unexpected keyword argument 'softcap'",
    # transformers' Trainer on an accelerate without the keyword (huggingface/transformers#34714, modelscope/ms-swift#4473)
    "TypeError: Accelerator.__init__() got an unexpected keyword argument 'dispatch_batches'",
    "TypeError: Accelerator.unwrap_model() got an unexpected keyword argument 'keep_torch_compile'",
    # a model's remote-code tokenizer under a transformers that passes it a newer keyword (vllm-project/vllm#10761)
    "TypeError: ChatGLMTokenizer._pad() got an unexpected keyword argument 'padding_side'",
    # an attribute the installed accelerate's Accelerator lacks (OpenBMB/MiniCPM-V#668: "our accelerate is 0.30.1")
    "AttributeError: 'Accelerator' object has no attribute 'deepspeed_engine_wrapped'",
])
def test_a_packages_api_named_without_frames_is_a_version_mismatch(tmp_path, line):
    assert examine(tmp_path, HEAD + line + "\n").outcome == "version_mismatch"


def test_an_exception_after_a_titles_spaced_colon_is_read(tmp_path):
    # vllm-project/vllm#10761: the issue's title, the exception after ` : `
    from triage.sources import open_text_run

    line = "using vllm0.6.2 with chatglm2-6B : TypeError: ChatGLMTokenizer._pad() got an unexpected keyword argument 'padding_side'\n"
    obs = ErrorSignatures().examine(open_text_run(line))
    assert obs.outcome == "version_mismatch"
    assert obs.evidence["line"]["text"].startswith("TypeError: ChatGLMTokenizer._pad()")


def test_unsloths_failed_patch_of_trls_trainer_is_a_version_mismatch(tmp_path):
    # unslothai/unsloth#1698 under trl 0.15.0 ("for now please use TRL < 0.15.0", #1699)
    log = HEAD + ("SyntaxError: invalid syntax (<string>, line 4)\n\n"
                  "RuntimeError: Unsloth: Please file a bug report! Error patching SFTTrainer\n")
    obs = examine(tmp_path, log)
    assert obs.outcome == "version_mismatch" and "trl<0.15.0" in obs.evidence["remedy"]


@pytest.mark.parametrize("line", [
    "ImportError: cannot import name 'load_rows' from 'mydata'",
    # the Accelerator's private state, read by its own code only: a bug of one release (huggingface/accelerate#3867)
    "AttributeError: 'Accelerator' object has no attribute '_cp_context'",
    "TypeError: my_flash_attn_func() got an unexpected keyword argument 'softcap'",
])
def test_a_name_of_the_jobs_own_code_without_frames_is_not_a_version(tmp_path, line):
    assert examine(tmp_path, HEAD + line + "\n").outcome == "other_error"


def test_a_saved_adapters_field_the_installed_peft_lacks_is_a_version_mismatch(tmp_path):
    # shibing624/MedicalGPT#355: an adapter saved by peft 0.10 loaded under 0.9
    log = HEAD + ("    return config_cls(**kwargs)\n"
                  "TypeError: LoraConfig.__init__() got an unexpected keyword argument 'layer_replication'\n")
    assert examine(tmp_path, log).outcome == "version_mismatch"
    # a config class of the job's own is its own
    log = HEAD + "TypeError: MyLoraConfig.__init__() got an unexpected keyword argument 'layer_replication'\n"
    assert examine(tmp_path, log).outcome == "other_error"


@pytest.mark.parametrize("line, outcome", [
    # DravenALG/VLANeXt#9: pasted alone, the model class is transformers' (5.3 added the argument)
    ("TypeError: Qwen3VLModel.get_rope_index() missing 1 required positional argument: 'mm_token_type_ids'",
     "version_mismatch"),
    ("TypeError: Qwen2ForCausalLM.forward() got an unexpected keyword argument 'num_items_in_batch'", "version_mismatch"),
    # a class of the job's own naming says no library's API changed
    ("TypeError: PolicyNet.forward() got an unexpected keyword argument 'num_items_in_batch'", "other_error"),
    # NVIDIA/Megatron-LM#1538: megatron-core's build_module building its wrapper of a TransformerEngine module
    ("TypeError: BasicOperation.__init__() got an unexpected keyword argument 'cache_quantized_input' when "
     "instantiating TESequentialSwigluLinear when instantiating SharedExpertMLP when instantiating MoELayer",
     "version_mismatch"),
    # a module of the job's own that build_module was building is the job's
    ("TypeError: MyMLP.__init__() got an unexpected keyword argument 'gate' when instantiating MyMLP when "
     "instantiating TransformerLayer", "other_error"),
])
def test_a_model_class_of_the_libraries_naming_is_a_librarys_api_without_frames(tmp_path, line, outcome):
    assert examine(tmp_path, HEAD + line + "\n").outcome == outcome


def test_an_exception_pasted_above_its_cut_traceback_gets_that_tracebacks_frames(tmp_path):
    # verl-project/verl#6256: the KeyError first, then vLLM's worker traceback cut before its own end
    log = ("KeyError: 'embed_tokens.weight'\n\nWorkerProc hit an exception.\n"
           "Traceback (most recent call last):\n"
           '  File "vllm/v1/executor/multiproc_executor.py", line 858, in worker_busy_loop\n'
           "    output = func(*args, **kwargs)\n"
           '  File "verl/workers/rollout/vllm_rollout/utils.py", line 256, in update_weights_from_ipc\n'
           "    self._update_weights(weights, peft_config=peft_config, base_sync_done=base_sync_done)\n")
    obs = examine(tmp_path, log)
    assert obs.outcome == "weight_name_refused"
    assert obs.evidence["line"]["where"].endswith("job.log:1")


def test_another_ranks_exception_above_a_cut_traceback_keeps_its_own_frames(tmp_path):
    # pytorch/pytorch#173679: rank 19's error printed without a traceback, rank 9's traceback below it cut
    log = ("[rank19]: torch._inductor.exc.InductorError: OSError: [Errno 16] Device or resource busy: "
           "'/root/.triton/cache/XU5D/tmp.pid_20/cuda_utils.so' -> '/root/.triton/cache/XU5D/cuda_utils.so'\n\n"
           "[rank9]: Traceback (most recent call last):\n"
           '[rank9]:   File "/work/train.py", line 1131, in <module>\n'
           "[rank9]:     main()\n"
           '[rank9]:   File "/usr/lib/python3.10/site-packages/torch/nn/modules/module.py", line 1882, in _call_impl\n'
           "[rank9]:     return inner()\n")
    obs = examine(tmp_path, log)
    assert obs.outcome == "inductor_cache"
    assert obs.evidence["rank"] == 19 and obs.evidence["frames"] == []
    assert "TRITON_CACHE_DIR" in obs.evidence["remedy"]


def test_ncclss_proxy_connect_after_a_cuda_failure_passes_the_cuda_failure_on(tmp_path):
    # NVIDIA/nccl#957: the CUDA call inside NCCL failed first; the proxy's connect fails with its result (res=3)
    log = ("host:1850301:1881341 [0] transport.cc:154 NCCL WARN Cuda failure 'invalid argument'\n"
           "host:1850301:1881358 [0] proxy.cc:1485 NCCL WARN [Service thread] Error encountered progressing "
           "operation=Connect, res=3, closing connection\n")
    obs = examine(tmp_path, log)
    assert obs.outcome == "other_error"
    assert obs.evidence["line"]["where"].endswith("job.log:1")
    # alone, the proxy's failed connect is the network's
    assert examine(tmp_path, log.split("\n", 1)[1]).outcome == "network_failure"


def test_a_ranks_exception_above_the_launchers_own_cut_traceback_keeps_no_frames(tmp_path):
    # dhcode-cpp/X-R1#45: the rank's error, then torch elastic's agent and its (unprefixed) traceback, cut
    log = ("[rank0]: RuntimeError: FlashAttention only supports Ampere GPUs or newer.\n"
           "  0%|          | 0/1500 [00:00<?, ?it/s]\n"
           "Traceback (most recent call last):\n"
           '  File "/env/bin/accelerate", line 8, in <module>\n'
           "    sys.exit(main())\n"
           '  File "/env/lib/python3.11/site-packages/torch/distributed/launcher/api.py", line 138, in __call__\n'
           "    return launch_agent(self._config, self._entrypoint, list(args))\n")
    obs = examine(tmp_path, log)
    assert obs.evidence["line"]["where"].endswith("job.log:1") and obs.evidence["frames"] == []


def test_a_stale_handle_in_tritons_cache_is_the_shared_caches_conflict(tmp_path):
    # PrimeIntellect-ai/prime-rl#2305: ~/.triton/cache on NFS shared by the nodes
    log = HEAD + ("ImportError: /home/u/.triton/cache/1f2e/__triton_launcher.cpython-312-x86_64-linux-gnu.so: "
                  "cannot stat shared object: Stale file handle\n")
    assert examine(tmp_path, log).outcome == "inductor_cache"


def test_a_stale_handle_outside_any_compile_cache_is_not_the_caches(tmp_path):
    log = HEAD + "OSError: [Errno 116] Stale file handle: '/nfs/data/shard_0001.parquet'\n"
    assert examine(tmp_path, log).outcome == "other_error"


def test_hydras_short_report_of_a_refused_override_ends_the_job(tmp_path):
    # verl-project/verl#4262, as Hydra prints it without HYDRA_FULL_ERROR=1
    log = ("Could not override 'actor_rollout_ref.rollout.n'.\n"
           "To append to your config use +actor_rollout_ref.rollout.n=8\n"
           "Key 'n' is not in struct\n"
           "    full_key: actor_rollout_ref.rollout.n\n"
           "    object_type=dict\n\n"
           "Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.\n")
    obs = examine(tmp_path, log)
    assert obs.outcome == "other_error"
    assert "Could not override 'actor_rollout_ref.rollout.n'." in obs.summary


def test_an_exception_from_a_packages_errors_module_ends_the_job_whatever_its_name(tmp_path):
    # huggingface/kernels#553: the class name ends neither in Error nor in Exception
    log = ("huggingface_hub.errors.OfflineModeIsEnabled: Cannot reach https://huggingface.co/api/models/"
           "kernels-community/finegrained-fp8/refs: offline mode is enabled.\n")
    obs = examine(tmp_path, log)
    assert obs.outcome == "other_error" and "OfflineModeIsEnabled" in obs.summary


def test_a_gpu_runtimes_own_error_line_ends_the_job(tmp_path):
    # sgl-project/sglang#24011: ROCm's HIP error under the watchdog's line (a HIP runtime bug of ROCm <= 7.2.0)
    log = ("Process group watchdog thread terminated with exception:\n"
           "HIP error: operation not permitted on an event last recorded in a capturing stream\n")
    obs = examine(tmp_path, log)
    assert obs.outcome == "other_error" and "HIP error: operation not permitted" in obs.summary


@pytest.mark.parametrize("line", [
    "TypeError: XPOTrainer.training_step() takes 3 positional arguments but 4 were given\n",  # huggingface/trl#2247
    "TypeError: DPOTrainer.log() takes 2 positional arguments but 3 were given\n",  # huggingface/trl#2445
])
def test_transformers_calling_a_trl_override_with_another_signature_is_a_version_mismatch(tmp_path, line):
    obs = examine(tmp_path, HEAD + line)
    assert obs.outcome == "version_mismatch"
    assert obs.evidence["packages"] == ["transformers", "trl"]


def test_a_ranks_own_cuda_error_rethrown_by_its_watchdog_comes_before_the_others_timeouts(tmp_path):
    # vllm-project/vllm#6042: "one process has illegal memory access. It dies, but the rest process is still in
    # allreduce, and is waiting for it, causing the timeout problem" (c10's logging before torch 2.2)
    log = ("[rank3]:[E ProcessGroupNCCL.cpp:1414] [PG 2 Rank 3] Process group watchdog thread terminated with "
           "exception: CUDA error: an illegal memory access was encountered\n"
           "[rank1]:[E ProcessGroupNCCL.cpp:563] [Rank 1] Watchdog caught collective operation timeout: "
           "WorkNCCL(SeqNum=158046, OpType=GATHER, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600033 "
           "milliseconds before timing out.\n")
    obs = examine(tmp_path, log)
    assert obs.outcome == "other_error"
    assert obs.evidence["line"]["where"].endswith("job.log:1") and "on rank3" in obs.summary
    from triage.formats.slime_log import split_line

    assert split_line(log.splitlines()[0]).level == "ERROR"


def test_ncclss_own_failure_named_by_its_enum_is_the_ranks_error_not_an_aborted_collective(tmp_path):
    # huggingface/trl#4737: torch >= 2.4 prints the enum after the location; a call's own failure on this rank
    line = ('NCCL error: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.hpp:268, NCCL version 2.22.3 '
            'ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.\n')
    obs = examine(tmp_path, HEAD + line)
    assert obs.outcome == "other_error", obs.summary
    assert "ncclSystemError" in obs.summary


AUTO_CONFIG_KEYERROR = """\
Traceback (most recent call last):
  File "/home/u/qwen/cli_demo.py", line 55, in main
    config = transformers.AutoConfig.from_pretrained(
  File "/home/u/env/lib/python3.11/site-packages/transformers/models/auto/configuration_auto.py", line 1022, in from_pretrained
    config_class = CONFIG_MAPPING[config_dict["model_type"]]
  File "/home/u/env/lib/python3.11/site-packages/transformers/models/auto/configuration_auto.py", line 723, in __getitem__
    raise KeyError(key)
KeyError: 'qwen2'
"""


def test_autoconfigs_bare_keyerror_for_a_model_type_is_a_transformers_older_than_the_model(tmp_path):
    # QwenLM/Qwen3#434: transformers 4.32 raised KeyError from its config mapping where newer ones name the model type
    obs = examine(tmp_path, HEAD + AUTO_CONFIG_KEYERROR)
    assert obs.outcome == "version_mismatch", obs.summary
    assert obs.evidence["signature"] == "auto_config_model_type"


def test_a_modules_missing_dunder_is_a_shadowing_directory_not_a_version(tmp_path):
    # vllm-project/vllm-ascend#718: run from the source checkout, `import vllm` found a directory without the package
    block = ("Traceback (most recent call last):\n"
             '  File "/usr/local/python3.10/site-packages/vllm_ascend/utils.py", line 94, in vllm_version_is\n'
             "    vllm_version = vllm.__version__\n"
             "AttributeError: module 'vllm' has no attribute '__version__'\n")
    assert examine(tmp_path, HEAD + block).outcome == "other_error"


@pytest.mark.parametrize("line", [
    "[ERROR] aclrtSynchronizeStream(stream) failed: 507015 (/tmp/runs/main.cpp:108)\n",  # hw-native-sys/PTOAS#482
    "EE9999[PID: 43311] The error from device(chipId:1, dieId:0), serial number is 6.\n",  # Ascend/pytorch#166
])
def test_ascends_runtime_reporting_a_device_error_ends_the_job(tmp_path, line):
    obs = examine(tmp_path, HEAD + line)
    assert obs.outcome == "other_error", obs.summary
    assert line.strip()[:30] in obs.summary


@pytest.mark.parametrize("line", [
    "(raylet) Raylet is terminated. Termination is unexpected. Possible reasons include: (1) SIGKILL by the user or "
    "system OOM killer, (2) Invalid memory access from Raylet causing SIGSEGV or SIGBUS, (3) Other termination "
    "signals. Last 20 lines of the Raylet logs:\n",  # ray-project/ray#60048
    "[2025-06-30 03:00:01,000 E 1 1] gcs_rpc_client.h:196: Failed to connect to GCS within 60 seconds. GCS may have "
    "been killed. It's either GCS is terminated by `ray stop` or is killed unexpectedly. The program will terminate.\n",
    "libc++abi.dylib: terminating with uncaught exception of type boost::wrapexcept<boost::system::system_error>: "
    "File name too long\n",  # ray-project/ray#7724
    "*** SIGABRT (@0x7fff6d9bf7fa) received by PID 2316 (TID 0x1128b5dc0) stack trace: ***\n",
])
def test_a_native_process_ending_is_located(tmp_path, line):
    obs = examine(tmp_path, HEAD + line)
    assert obs.outcome == "other_error", obs.summary


def test_slurms_lines_inside_a_traceback_do_not_end_it(tmp_path):
    # ray-project/ray#6978: srun reporting the task's exit between the frames of the traceback it reports
    block = ("Traceback (most recent call last):\n"
             '  File "/env/lib/python3.7/site-packages/ray/worker.py", line 494, in <module>\n'
             "srun: error: bhc0007: task 0: Exited with exit code 1\n"
             "    global_worker = Worker()\n"
             "srun: Terminating job step 11420439.1\n"
             '  File "/env/lib/python3.7/site-packages/ray/utils.py", line 274, in get_cuda_visible_devices\n'
             '    return [int(i) for i in gpu_ids_str.split(",")]\n'
             "ValueError: invalid literal for int() with base 10: 'NoDevFiles'\n")
    obs = examine(tmp_path, HEAD + block)
    assert obs.outcome == "other_error"
    assert "NoDevFiles" in obs.summary and "srun" not in obs.summary


@pytest.mark.parametrize(("line", "outcome", "quoted"), [
    # DLLXW/baby-llama2-chinese#45: the user's words, then the exception, on one line
    ("使用transformers==4.35.2时会报错：AttributeError: 'ChatGLMTokenizer' object has no attribute 'tokenizer'、\n",
     "other_error", "AttributeError: 'ChatGLMTokenizer' object has no attribute 'tokenizer'"),
    # RethinkFun/trian_ppo#1: the same with no colon between them
    ("train_ppo.py会出现TypeError: PPOConfig.__init__() got an unexpected keyword argument 'kl_penalty'，请问怎么修改？\n",
     "version_mismatch", "TypeError: PPOConfig.__init__()"),
    # an import error's message without its type (vllm-project/vllm-ascend#1093's form, with a module of a known package)
    ("运行时报错：No module named 'vllm.transformers_utils.tokenizer'\n", "version_mismatch",
     "No module named 'vllm.transformers_utils.tokenizer'"),
    # waltonfuture/MM-UPT#1: an opening quote between the words and the exception
    ("报错\"ImportError: cannot import name 'Qwen2_5_VLFlashAttention2' from "
     "'transformers.models.qwen2_5_vl.modeling_qwen2_5_vl'\"\n", "version_mismatch", "ImportError: cannot import name"),
])
def test_an_exception_after_cjk_prose_on_its_line_is_read_from_the_exception_on(tmp_path, line, outcome, quoted):
    obs = examine(tmp_path, HEAD + line)
    assert obs.outcome == outcome, obs.summary
    assert f"`{quoted}" in obs.summary


def test_cjk_prose_without_an_exception_after_it_is_not_an_error(tmp_path):
    obs = examine(tmp_path, HEAD + "训练过程中没有报错，但是 reward 一直是 0，请问 Error 在哪里？\n")
    assert obs.outcome not in ("other_error", "version_mismatch")


@pytest.mark.parametrize("log, needle", [
    # transformers' lazy import wraps the error that stopped it; its words are on the next line (project-baize/
    # baize-chatbot#24: torch._six, gone in torch 2.0; OpenRLHF/OpenRLHF#355: flash-attn built for another torch)
    ("RuntimeError: Failed to import transformers.trainer because of the following error (look up to see its "
     "traceback):\nNo module named 'torch._six'\n", "torch._six"),
    ("RuntimeError: Failed to import transformers.models.llama.modeling_llama because of the following error (look up "
     "to see its traceback):\n[rank7]: /home/.local/lib/python3.10/site-packages/flash_attn_2_cuda.cpython-310-x86_64-"
     "linux-gnu.so: undefined symbol: _ZN2at4_ops5zeros4callEN3c108ArrayRefINS2_6SymIntEEE\n", "undefined symbol"),
    # setuptools' pkg_resources refusing a pinned range (QwenLM/Qwen3-VL#84)
    ("pkg_resources.DistributionNotFound: The 'transformers<4.45,>=4.33' distribution was not found and is required "
     "by ms-swift\n", "DistributionNotFound"),
    # verl's check of the installed vLLM without its ValueError (MIT-MI/MEM1#6)
    ("vllm version 0.5.1 not supported. Currently supported versions are 0.3.1, 0.4.2, 0.5.4 and 0.6.3.\n",
     "Currently supported versions"),
    # an ImportError's message without its type, naming the package (verl-project/verl#5690: TRL moved the class)
    ("bash examples/grpo_trainer/run_qwen2-7b_math_trtllm.sh\ncannot import name 'AutoModelForCausalLMWithValueHead' "
     "from 'trl'\n", "AutoModelForCausalLMWithValueHead"),
    # a submodule of a package the framework pins, named in the message (verl-project/verl#82)
    ("  File \"/opt/verl/verl/workers/megatron_workers.py\", line 40, in <module>\n"
     "    from megatron.optimizer import DistributedOptimizer\nModuleNotFoundError: No module named 'megatron.optimizer'\n",
     "megatron.optimizer"),
])
def test_a_version_error_is_read_under_its_wrapper_and_without_its_type(tmp_path, log, needle):
    obs = examine(tmp_path, log)
    assert obs.outcome == "version_mismatch", obs.summary
    assert needle in obs.evidence["line"]["text"]


@pytest.mark.parametrize("line", [
    # argparse refusing a value its type does not take (THUDM/slime#386; VectorInstitute/vector-inference#157)
    "convert_hf_to_torch_dist.py: error: argument --moe-layer-freq: invalid moe_freq_type value: \"'([1]*94)'\"\n",
    "vllm serve: error: argument --compilation-config/-O: 1 validation error for CompilationConfig\n",
    # Hydra's and OmegaConf's refusals of an override (verl-project/verl#820, mll-lab-nu/RAGEN#49)
    "Could not append to config. An item is already at 'trainer.val_before_train'.\n",
    "To append to your config use +env.dim_x=6\nKey 'dim_x' is not in struct\n    full_key: env.dim_x\n",
    # torch's strict load_state_dict, its RuntimeError line not pasted (NVIDIA/Megatron-LM#900)
    'Unexpected key(s) in state_dict: "decoder.layers.0.self_attention.core_attention._extra_state"\n',
    # and its line for a tensor of another shape (OpenRLHF/OpenRLHF#651: a LoRA saved empty under ZeRO-3), SGLang's
    # piecewise graph capture logging the error it re-raises (sgl-project/sglang#23351)
    "\tsize mismatch for base_model.model.model.layers.26.mlp.up_proj.lora_B.default.weight: copying a param with shape "
    "torch.Size([0]) from checkpoint, the shape in current model is torch.Size([14336, 8]).\n",
    "[2026-05-22 04:54:32 TP6] Piecewise CUDA Graph failed with error: Tensor match failed for Tensor<8>[strides=<1>]\n",
    # CPython refusing the script it was given: a module name passed as a path under Ray's working_dir
    # (OpenRLHF/OpenRLHF#573)
    "python: can't open file '/tmp/ray/session_2024-12-10_16-38-29_258673_264302/runtime_resources/working_dir_files/"
    "_ray_pkg_7b407da091e4f702/openrlhf.cli.train_ppo_ray': [Errno 2] No such file or directory\n",
    # NCCL's own failure with its location wrapped onto the next line: a call's failure, not an aborted collective
    # (pytorch/pytorch#122571)
    "torch.distributed.DistBackendError: NCCL error in: \n../torch/csrc/distributed/c10d/NCCLUtils.hpp:219, internal "
    "error - please report this issue to the NCCL developers, NCCL version 2.19.3\n",
    # ROCm's abort on a kernel's bad address, AMD's illegal memory access (iree-org/wave#466)
    "Memory access fault by GPU node-2 (Agent handle: 0x5a0d7202eab0) on address 0x7d35a0c00000. Reason: Unknown.\n",
    # UCX's handler without its prefix (ROCm/rocm-systems#3700) and torch elastic's report of the signal
    # (intelligent-machine-learning/dlrover#1046): Docker's 64 MB /dev/shm
    "Caught signal 7 (Bus error: nonexistent physical address)\n",
    "The worker fails with {0: ProcessFailure(local_rank=0, pid=54, exitcode=-7, error_file='', "
    "message='Signal 7 (SIGBUS) received by PID 54')}\n",
    # srun that could not start the step (verl-project/verl#548), a parquet file that is a Git LFS pointer
    # (policy-gradient/GRPO-Zero#1), a launch failure without the driver's Xid (CSUBioGroup/PGMG#3)
    "srun: error: Unable to create step for job 4242: Requested node configuration is not available\n",
    # a torch extension's JIT build without the CUDA toolkit's headers (deepspeedai/DeepSpeed#4889), and its link step
    "cc1plus: fatal error: cuda_runtime.h: No such file or directory\ncompilation terminated.\n",
    "collect2: error: ld returned 1 exit status\n",
    # a container that never started: Docker without the NVIDIA toolkit (OpenBMB/XAgent#273), the NVIDIA container CLI
    # without a loaded driver (dstackai/dstack#1080), pyxis failing to import the image (NVIDIA/pyxis#127)
    'docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]].\n',
    "nvidia-container-cli: initialization error: nvml error: driver not loaded: unknown\n",
    "slurmstepd: error: pyxis: failed to import docker image\n",
    # bitsandbytes' CUDA check of its kernels (bitsandbytes-foundation/bitsandbytes#553)
    "Error an illegal memory access was encountered at line 74 in file /mmfs1/bitsandbytes/csrc/ops.cu\n",
    # Triton's kernel over the GPU's shared memory, at the end of its traceback (vllm-project/vllm#2513)
    "Traceback (most recent call last):\n  File \"/env/lib/python3.10/site-packages/triton/runtime/autotuner.py\", line 1"
    "00, in run\n    return self.fn.run(*args, **kwargs)\ntriton.runtime.autotuner.OutOfResources: out of resource: "
    "shared memory, Required: 65538, Hardware limit: 65536. Reducing block sizes or `num_stages` may help.\n",
    # slurmstepd that could not run the batch script (ArjunaCluster/ArjunaUsers#46)
    "slurmstepd: error: execve(): /tmp/slurmd/job00089/slurm_script: No such file or directory\n",
    "ArrowInvalid: Parquet magic bytes not found in footer. Either the file is corrupted or this is not a parquet file.\n",
    "RuntimeError: CUDA error: unspecified launch failure\n",
    # Ray's raylet failing to set up an actor's runtime_env (ray-project/ray#20483), and a runtime_env process's
    # error under Ray's `(pid=runtime_env, ip=…)` prefix (ray-project/ray#38312)
    '(raylet) [2021-11-17 10:00:00,000 E 1 1] agent_manager.cc:190: Failed to create runtime env: {"working_dir": '
    '"s3://fake.zip"}, error message: not enough values to unpack (expected 2, got 1)\n',
    "(pid=runtime_env, ip=192.168.1.100) ValueError: Local directory /tmp/ray/session_1/runtime_resources/pip/4950ef "
    "for URI pip://4950ef does not exist on the cluster.\n",
])
def test_a_refusal_that_ends_the_program_without_an_exception_type_is_its_crash(tmp_path, capsys, line):
    import json

    from triage.cli import main

    (tmp_path / "job.log").write_text(line, encoding="utf-8")
    assert main(["run", str(tmp_path / "job.log"), "--json", "--no-cache"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["root_cause"]["id"] == "crash.unrecognized"
    assert report["path"][0]["outcome"] == "error_exit" and "job.log:" in report["path"][0]["summary"]


def test_an_infiniband_memory_registration_the_locked_memory_limit_refused_is_not_the_network(tmp_path):
    # NVIDIA/nccl-tests#206: `ulimit -l` was 8192 on a single node; no connection failed
    line = "node1:1234:1250 [0] misc/ibvwrap.cc:278 NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory\n"
    assert examine(tmp_path, line).outcome == "none"
    obs = examine(tmp_path, line.replace("ibv_reg_mr_iova2 failed with error Cannot allocate memory",
                                         "ibv_modify_qp failed with 110 Connection timed out"))
    assert obs.outcome == "network_failure"


def test_deepspeeds_batch_check_is_explained_and_remedied_in_deepspeeds_own_terms(tmp_path, capsys):
    # OpenGVLab/InternImage#111 was told slime's rollout formula for DeepSpeed's `4096 != 128 * 4 * 1`
    import json

    from triage.cli import main

    (tmp_path / "job.log").write_text(
        "AssertionError: Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu * "
        "gradient_acc_step * world_size 4096 != 128 * 4 * 1\n", encoding="utf-8")
    assert main(["run", str(tmp_path / "job.log"), "--json", "--no-cache"]) == 0
    rc = json.loads(capsys.readouterr().out)["root_cause"]
    assert rc["id"] == "config.batch_size_mismatch"
    assert rc["explanation"].startswith("DeepSpeed refused its batch sizes") and "rollout_batch_size" not in rc["explanation"]
    assert rc["remedy"].startswith("Make DeepSpeed's three batch sizes agree") and "train_batch_size" in rc["flags"]


def test_verls_split_of_a_batch_over_its_workers_is_explained_in_its_own_terms(tmp_path, capsys):
    # hiyouga/EasyR1#44 was told slime's rollout formula for `Got size of DataProto 512 and chunk 6`
    import json

    from triage.cli import main

    (tmp_path / "job.log").write_text(
        "(Runner pid=2210) AssertionError: only support equal chunk. Got size of DataProto 512 and chunk 6.\n",
        encoding="utf-8")
    assert main(["run", str(tmp_path / "job.log"), "--json", "--no-cache"]) == 0
    rc = json.loads(capsys.readouterr().out)["root_cause"]
    assert rc["id"] == "config.batch_size_mismatch"
    assert rc["explanation"].startswith("verl split a batch over its workers") and "n_samples_per_prompt" not in rc["explanation"]
    assert "the batch divides by the number of workers" in rc["remedy"] and "data.val_batch_size" in rc["flags"]


def test_a_virtualenv_named_after_a_package_is_not_that_packages_frame(tmp_path):
    # modelscope/ms-swift#4398: torch's Module.__getattr__ under a virtualenv `ms-swift-new` raised for a model the
    # Liger path reads `lm_head` off; no package's API is missing (the env's name is no `swift` frame)
    env = "/data/u/env/ms-swift-new/lib/python3.10/site-packages"
    log = ("[rank6]: Traceback (most recent call last):\n"
           f'[rank6]:   File "{env}/trl/trainer/grpo_trainer.py", line 1041, in _compute_loss\n'
           "[rank6]:     lm_head = unwrapped_model.lm_head\n"
           f'[rank6]:   File "{env}/peft/peft_model.py", line 793, in __getattr__\n'
           "[rank6]:     return super().__getattr__(name)  # defer to nn.Module's logic\n"
           f'[rank6]:   File "{env}/torch/nn/modules/module.py", line 1940, in __getattr__\n'
           "[rank6]:     raise AttributeError(\n"
           "[rank6]: AttributeError: 'PeftModelForCausalLM' object has no attribute 'lm_head'\n")
    obs = examine(tmp_path, log)
    assert obs.outcome != "version_mismatch", obs.summary


def test_an_npus_out_of_memory_is_said_to_be_the_npus_and_a_missing_module_not_installed(tmp_path):
    obs = examine(tmp_path, "RuntimeError: NPU out of memory. Tried to allocate 26.44 GiB (NPU 0; 60.97 GiB total)\n")
    assert obs.outcome == "cuda_oom" and obs.summary.startswith("An Ascend NPU ran out of memory")
    # OpenRLHF/OpenRLHF#790: no API is missing when the package is not there at all
    obs = examine(tmp_path, "ModuleNotFoundError: No module named 'flash_attn'\n")
    assert obs.outcome == "version_mismatch"
    assert obs.summary.startswith("A package the job imports is not installed in the environment that ran it")


def test_an_outside_services_name_that_did_not_resolve_is_told_its_own_remedy(tmp_path, capsys):
    import json

    from triage.cli import main

    (tmp_path / "job.log").write_text(
        "urllib3.exceptions.NameResolutionError: <urllib3.connection.HTTPSConnection object at 0x765a141842f0>: Failed to "
        "resolve 'api.wandb.ai' ([Errno -3] Temporary failure in name resolution)\n", encoding="utf-8")
    assert main(["run", str(tmp_path / "job.log"), "--json", "--no-cache"]) == 0
    rc = json.loads(capsys.readouterr().out)["root_cause"]
    assert rc["id"] == "infra.network" and "outside service" in rc["explanation"]
    assert "WANDB_MODE=offline" in rc["flags"] and "NCCL_SOCKET_IFNAME" not in rc["remedy"]
    # a node of the job by its address is the network between nodes, as before
    obs = examine(tmp_path, "socket.gaierror: [Errno -2] Name or service not known\n")
    assert obs.outcome == "network_failure" and obs.evidence["signature"] == "network_failure"


def test_rays_envelope_of_an_out_of_memory_error_alone_leaves_host_memory_open(tmp_path, capsys):
    import json

    from triage.cli import main

    envelope = "ray.exceptions.RayTaskError(OutOfMemoryError): ray::MegatronTrainRayActor.update_weights()\n"
    obs = examine(tmp_path, envelope)
    assert obs.outcome == "cuda_oom" and obs.evidence["signature"] == "ray_wrapped_oom"
    assert obs.evidence["unjudged_outcomes"] == ["host_oom_killed"]
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "job.log").write_text(envelope, encoding="utf-8")
    main(["run", str(tmp_path / "run"), "--json", "--no-cache"])
    report = json.loads(capsys.readouterr().out)
    assert "host.ram_exhausted" not in {r["verdict"] for r in report["ruled_out"]}
    # the exception under it decides: torch's is the GPU's
    obs = examine(tmp_path, envelope + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.16 GiB.\n")
    assert obs.outcome == "cuda_oom" and obs.evidence["signature"] == "cuda_oom"


def test_host_memory_running_out_while_a_checkpoint_is_written_is_told_the_saves_remedy(tmp_path, capsys):
    import json

    from triage.cli import main

    # verl-project/verl#1964: Ray's memory monitor killed the save of a 32B model's checkpoint
    (tmp_path / "job.log").write_text(
        "Traceback (most recent call last):\n"
        '  File "/code/verl/verl/trainer/ppo/ray_trainer.py", line 1011, in fit\n    self._save_checkpoint()\n'
        '  File "/code/verl/verl/trainer/ppo/ray_trainer.py", line 856, in _save_checkpoint\n'
        "    self.actor_rollout_wg.save_checkpoint(actor_local_path, actor_remote_path, self.global_steps)\n"
        "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.\n", encoding="utf-8")
    assert main(["run", str(tmp_path / "job.log"), "--json", "--no-cache"]) == 0
    rc = json.loads(capsys.readouterr().out)["root_cause"]
    assert rc["id"] == "host.ram_exhausted"
    assert rc["remedy"].startswith("The host ran out of RAM while a checkpoint was being gathered and written")
    assert "dataset_num_proc" not in rc["remedy"] and rc["flags"] == []


def test_math_verify_timing_out_off_the_main_thread_is_the_reward_function(tmp_path):
    # huggingface/Math-Verify#50: the reward ran in a worker thread of verl's main_task; every answer then scored 0
    block = ("(main_task pid=1324104) Traceback (most recent call last):\n"
             '(main_task pid=1324104)   File "/usr/local/lib/python3.10/dist-packages/math_verify/utils.py", line 47, '
             "in wrapper\n"
             "(main_task pid=1324104)     signal.signal(signal.SIGALRM, handler)\n"
             "(main_task pid=1324104) ValueError: signal only works in main thread of the main interpreter\n")
    obs = examine(tmp_path, block)
    assert obs.outcome == "reward_fn_failed" and obs.evidence["signature"] == "math_verify_off_main_thread"
    assert "parsing_timeout=None" in obs.evidence["remedy"]
    # the same error in a program's own thread is not the reward's
    assert examine(tmp_path, block.replace("math_verify/utils.py", "myapp/timer.py")).outcome == "other_error"


@pytest.mark.parametrize("line, exc", [
    # verl-project/verl#4799 and huggingface/transformers#24874: inline code in the user's sentence
    ("If a checkpoint is saved immediately after validation, it will trigger the following error: `AssertionError: "
     "Expects tensor to be on the compute device cuda:0, was on cpu.`\n",
     "AssertionError: Expects tensor to be on the compute device cuda:0, was on cpu."),
    # cmu-l3/l1#21: double quotes
    ("there are many errors reported, such as \"omegaconf.errors.ConfigAttributeError: Key 'launch_reward_fn_async' is "
     "not in struct.\" Many keys are not in the structure.\n",
     "omegaconf.errors.ConfigAttributeError: Key 'launch_reward_fn_async' is not in struct."),
    # inline code that starts with a space (huggingface/trl#4488), an issue title's `[Bug] ` tag (sgl-project/sglang#3385)
    ("  - Output: ` ValueError: Image features and image tokens do not match: tokens: 3456, features 2359296`\n",
     "ValueError: Image features and image tokens do not match: tokens: 3456, features 2359296"),
    ("[Bug] ValueError: Cannot use chat template functions because tokenizer.chat_template is not set\n",
     "ValueError: Cannot use chat template functions because tokenizer.chat_template is not set"),
    # unquoted, right after the user's `error:` (huggingface/transformers#36099, verl-project/verl#4657)
    ("use main branch to sft qwen25_vl，when save ckpt, got error:OSError: [Errno 39] Directory not empty:\n",
     "OSError: [Errno 39] Directory not empty:"),
    ("Running the example results in error: AssertionError: Expects tensor to be on the compute device cuda:0\n",
     "AssertionError: Expects tensor to be on the compute device cuda:0"),
    # the words of a call that fails on it (vllm-project/vllm#49237)
    ("POST /wake_up fails with AttributeError: 'list' object has no attribute 'zero_' in init_fp8_kv_scales\n",
     "AttributeError: 'list' object has no attribute 'zero_' in init_fp8_kv_scales"),
    ("when I run it I got `RuntimeError: CUDA error: unspecified launch failure`\n",
     "RuntimeError: CUDA error: unspecified launch failure"),
    # a few words between the error word and its colon (togethercomputer/OpenChatKit#86)
    ("And when run the model.generate the error will occur: RuntimeError: probability tensor contains either `inf`\n",
     "RuntimeError: probability tensor contains either `inf`"),
    # Markdown bold around the line (StarsfieldAI/R1-V#191)
    ("**AssertionError: Attempted to load weight (torch.Size([0])) into parameter (torch.Size([1280, 3]))**\n",
     "AssertionError: Attempted to load weight (torch.Size([0])) into parameter (torch.Size([1280, 3]))"),
])
def test_an_exception_the_user_quoted_in_a_sentence_is_read_as_the_error(tmp_path, line, exc):
    obs = examine(tmp_path, line)
    assert obs.outcome == "other_error" and obs.evidence["line"]["text"] == exc


def test_a_debuggers_report_of_the_exception_is_read_with_its_message(tmp_path):
    # vllm-project/vllm#21776: VS Code's header, the message on the line under it
    text = ("Exception has occurred: AttributeError       (note: full exception trace is shown but execution is paused "
            "at: _run_module_as_main)\nmodule 'ray' has no attribute 'is_initialized'\n"
            '  File "/opt/pytorch/lib/python3.12/site-packages/vllm/utils/__init__.py", line 2872, in is_in_ray_actor\n'
            "    return (ray.is_initialized()\n")
    obs = examine(tmp_path, text)
    assert obs.outcome == "version_mismatch"
    assert obs.evidence["line"]["text"] == "AttributeError: module 'ray' has no attribute 'is_initialized'"


def test_an_import_error_in_a_users_words_without_its_type_is_read_as_its_message(tmp_path):
    # NVIDIA-NeMo/Speech#13520: "a mismatch mcore version issue"
    line = ("When trying to use nemotron ultra in nemo i get \"\"\"cannot import name 'L2Norm' from "
            "'megatron.core.transformer.torch_norm'\"\"\"\n")
    obs = examine(tmp_path, line)
    assert obs.outcome == "version_mismatch"
    assert obs.evidence["line"]["text"] == "cannot import name 'L2Norm' from 'megatron.core.transformer.torch_norm'"
    # a sentence that gets no error is no error
    assert examine(tmp_path, "I got 3 results from the reward model, as expected\n").outcome == "none"


def test_an_error_word_before_an_exception_in_a_line_a_program_printed_is_not_prose(tmp_path):
    # a logger's own line keeps its words: the scan reads it as it stands
    line = "2026-02-21 17:48:27 - INFO - app - last error: ValueError: bad input, retrying\n"
    assert examine(tmp_path, line).outcome == "none"


def test_a_quoted_exception_in_a_line_a_program_printed_is_not_lifted_out_of_it(tmp_path):
    # a logger's hint that names an error it did not meet: its head says a program printed it
    line = "2026-02-21 17:48:27 - INFO - trl.extras - if you see `KeyError: 'prompt'`, map the dataset's column first\n"
    assert examine(tmp_path, line).outcome == "none"
    assert examine(tmp_path, line.split(" - ", 3)[3]).outcome == "other_error"


def test_ray_failing_to_rebuild_a_remote_exception_is_not_a_version(tmp_path):
    # ray-project/ray#21075: the exception's class takes other arguments than its pickle gives ("it will fail on
    # builtin pickle", ray-project/ray#52660)
    log = ("2021-12-14 06:25:27,441 ERROR serialization.py:270 -- Failed to unpickle serialized exception\n"
           "Traceback (most recent call last):\n"
           '  File "/home/ray/anaconda3/lib/python3.7/site-packages/ray/exceptions.py", line 32, in from_bytes\n'
           "    return pickle.loads(ray_exception.serialized_exception)\n"
           "TypeError: __init__() missing 5 required positional arguments: 'url', 'code', 'msg', 'hdrs', and 'fp'\n")
    assert examine(tmp_path, log).outcome == "other_error"


RAY_DISK = ("(raylet) [2026-03-03 15:24:06,801 E 330298 330327] (raylet) file_system_monitor.cc:116: "
            "/tmp/ray/session_2026-03-03_15-20-01_000000_1 is over 95% full, available space: 136.201 GB; "
            "capacity: 7095.97 GB. Object creation will fail if spilling is required.\n")


def test_a_disk_monitor_the_job_went_on_past_is_not_the_stop(tmp_path):
    # verl-project/verl#5474: Ray's warning, then the trainer starting; nothing failed to write
    log = RAY_DISK + "(FullyAsyncTaskRunner pid=334042) [ASYNC MAIN] Starting fully async PPO training...\n\n\n"
    obs = examine(tmp_path, HEAD + log)
    assert obs.outcome != "disk_full", obs.summary


@pytest.mark.parametrize("after", [
    "\n\n",  # the log ends at the monitor's report (OpenRLHF/OpenRLHF#638), blank lines under it
    "Traceback (most recent call last):\n  File \"/app/main.py\", line 3, in <module>\n    run()\n"
    "ray.exceptions.RuntimeEnvSetupError: Failed to set up runtime environment.\n",  # an error after it
])
def test_a_disk_monitor_where_the_job_stopped_is_the_full_disk(tmp_path, after):
    obs = examine(tmp_path, HEAD + RAY_DISK + RAY_DISK + after)
    assert obs.outcome == "disk_full", obs.summary
    assert obs.evidence["signature"] == "ray_disk_monitor"


def test_a_disk_monitor_the_job_made_progress_past_is_not_the_stop_of_a_later_crash(tmp_path):
    # the monitor's warning, then rollouts going on, then a crash of its own: the crash is the stop
    log = (RAY_DISK + "".join(f"[2026-08-01 10:0{i}:00] rollout.py:300 - Finish rollout {i}/100\n" for i in range(3))
           + "Traceback (most recent call last):\n  File \"/root/slime/train.py\", line 9, in <module>\n    main()\n"
           "ZeroDivisionError: division by zero\n")
    obs = examine(tmp_path, HEAD + log)
    assert obs.outcome == "other_error", obs.summary
    assert "ZeroDivisionError" in obs.summary


# --- lines of runs that went on, from logs committed with their runs ------------------------------------------


def test_a_keyboard_interrupt_alone_is_a_stop_from_outside_not_a_crash(tmp_path):
    # tsebaka/T-Lab-2024-LLM-Alignment:wandb/run-20241216_132720-chk58nkd/files/output.log: the loss falling, then Ctrl-C
    log = ("{'loss': 0.0531, 'grad_norm': 0.41, 'learning_rate': 1.2e-05, 'epoch': 0.4}\n"
           "Traceback (most recent call last):\n"
           '  File "/root/train_rm.py", line 88, in <module>\n    trainer.train()\n'
           '  File "/usr/lib/python3/dist-packages/transformers/trainer.py", line 2052, in train\n'
           "    return inner_training_loop(args, resume_from_checkpoint)\n"
           "KeyboardInterrupt\n")
    obs = examine(tmp_path, HEAD + log)
    assert obs.outcome == "terminated", obs.summary
    assert obs.evidence["signature"] == "keyboard_interrupt"
    assert obs.summary.startswith("The job was interrupted (KeyboardInterrupt, SIGINT)")
    assert "SIGTERM" not in obs.summary.split(":")[0]
    # no memory killer sends SIGINT: the summary asks who sent it, and the scheduler leads the candidates
    assert "Out of memory: Killed process" not in obs.summary and "a user's Ctrl-C" in obs.summary
    assert obs.evidence["suggests"][0]["verdict"] == "sched.time_limit"


def test_a_keyboard_interrupt_printed_with_an_empty_message_is_one_too(tmp_path):
    # Arnie-He/BLPO's W&B output.log: jax re-raises the Ctrl-C from a host callback as `KeyboardInterrupt:`
    log = ("global step=4034560, episodic return=1317.6922607421875\n"
           "Traceback (most recent call last):\n"
           '  File "/home/arnie/Stackelberg_RL/continuous_stppo.py", line 281, in <module>\n    out = train_jit(rng)\n'
           '  File "/home/arnie/miniconda3/lib/python3.11/site-packages/jax/_src/interpreters/mlir.py", line 2776, '
           "in _wrapped_callback\n"
           "KeyboardInterrupt:\n")
    obs = examine(tmp_path, HEAD + log)
    assert obs.outcome == "terminated", obs.summary
    assert obs.evidence["signature"] == "keyboard_interrupt"


def test_a_bare_stop_iteration_ending_a_ranks_traceback_is_the_first_error(tmp_path, capsys):
    # elena-lyulina/Megatron-LM-Attention-Benchmark's attn_bench/logs/2327228.err: the data iterator ran out on rank30
    # (`StopIteration`, no error word), and its tensor-parallel peer then read garbage sizes; the first error decides
    from triage.cli import main

    log = ("30: [rank30]: Traceback (most recent call last):\n"
           '30: [rank30]:   File "/scratch/Megatron-LM/pretrain_gpt.py", line 402, in <module>\n'
           "30: [rank30]:     pretrain(\n"
           '30: [rank30]:   File "/usr/local/lib/python3.12/dist-packages/torch/utils/data/dataloader.py", line 1471, '
           "in _next_data\n"
           "30: [rank30]:     raise StopIteration\n"
           "30: [rank30]: StopIteration\n"
           "31: [rank31]: Traceback (most recent call last):\n"
           '31: [rank31]:   File "/scratch/Megatron-LM/megatron/core/utils.py", line 1877, in _broadcast_cu_seqlens\n'
           "31: [rank31]:     buf = torch.empty(n, dtype=torch.int64)\n"
           "31: [rank31]: RuntimeError: Storage size calculation overflowed with sizes=[4, 4733001734490161152]\n")
    (tmp_path / "2327228.err").write_text(log, encoding="utf-8")
    main(["run", str(tmp_path / "2327228.err"), "--json", "--no-cache"])
    import json

    first = json.loads(capsys.readouterr().out)["path"][0]
    assert first["outcome"] == "error_exit" and "`StopIteration`" in first["summary"], first["summary"]
    assert "2327228.err:1" in first["summary"]


def test_a_keyboard_interrupt_after_the_jobs_own_error_gives_way_to_it(tmp_path):
    log = ("Traceback (most recent call last):\n  File \"/root/train.py\", line 9, in <module>\n    main()\n"
           "ZeroDivisionError: division by zero\n"
           "Traceback (most recent call last):\n  File \"/root/launch.py\", line 3, in <module>\n    wait()\n"
           "KeyboardInterrupt\n")
    obs = examine(tmp_path, HEAD + log)
    assert obs.outcome == "other_error", obs.summary
    assert "ZeroDivisionError" in obs.summary


MODELOPT_WARNING = ("0: [default0]:/opt/TensorRT-Model-Optimizer/modelopt/torch/utils/import_utils.py:32: UserWarning: "
                    "Failed to import diffusers plugin due to: ImportError('peft>=0.17.0 is required for a normal "
                    "functioning of this module, but found peft==0.13.2.'). You may ignore this warning if you do "
                    "not need this plugin.\n0: [default0]:  warnings.warn(\n")


def test_a_python_warning_gives_way_to_the_error_that_ended_the_job(tmp_path):
    # elena-lyulina/Megatron-LM-Attention-Benchmark:attn_bench/logs/1861140.err: modelopt's warning, then the time limit
    log = MODELOPT_WARNING + ("slurmstepd: error: *** STEP 1861140.1 ON nid007420 CANCELLED AT 2026-04-15T11:31:51 "
                              "DUE TO TIME LIMIT ***\n")
    obs = examine(tmp_path, HEAD + log)
    assert obs.outcome == "sched_ended", obs.summary


def test_a_warning_that_says_it_may_be_ignored_is_no_error(tmp_path):
    obs = examine(tmp_path, HEAD + MODELOPT_WARNING)
    assert obs.outcome == "none", obs.summary


def test_a_warning_that_says_it_silently_ignores_a_failed_lookup_is_no_network_failure(tmp_path):
    # vivsn289/Benchmarking-vanilla-llm-to-validate-forgetting:finetune.log: PEFT's warning inside a progress bar's frame,
    # at a checkpoint save on a node without a network, then 33 training records and the run's end
    log = (" 77%|███████▋  | 2500/3252 [1:07:44<54:49,  4.37s/it]/home/u/.pyenvs/b/lib/python3.12/site-packages/peft/"
           "utils/other.py:1419: UserWarning: Unable to fetch remote file due to the following error [Errno -3] "
           "Temporary failure in name resolution - silently ignoring the lookup for the file config.json in "
           "TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T.\n  warnings.warn(\n")
    obs = examine(tmp_path, HEAD + log)
    assert obs.outcome == "none", obs.summary
    # the same words as an error of their own are still read
    obs = examine(tmp_path, HEAD + "OSError: [Errno -3] Temporary failure in name resolution\n")
    assert obs.outcome == "network_failure", obs.summary


def test_inotifys_enospc_is_no_full_disk(tmp_path):
    # shifang99/Megatron-LM_core_v0.7.0_trace: UCX's watch limit at start-up, in the log of a run that trained to its end
    log = ("[1724682420.890842] [sse-lg-112-41:85732:f]        vfs_fuse.c:281  UCX  ERROR inotify_add_watch(/tmp) "
           "failed: No space left on device\n")
    obs = examine(tmp_path, HEAD + log)
    assert obs.outcome != "disk_full", obs.summary


def test_a_disk_monitor_gives_way_to_a_later_error_of_the_jobs_own(tmp_path):
    # zhiyuanhubj/logic-rl-formula:grpo.log: Ray's warning with 88 GB free, then a worker that never registered
    log = (RAY_DISK + "Error executing job with overrides: []\nTraceback (most recent call last):\n"
           '  File "/root/verl/single_controller/ray/base.py", line 198, in __init__\n    self._init_with_resource_pool()\n'
           "AssertionError: failed to get register_center_actor: V9zrH5_register_center in []\n")
    obs = examine(tmp_path, HEAD + log)
    assert obs.outcome != "disk_full", obs.summary
    assert "register_center_actor" in obs.summary


def test_a_raise_line_of_a_script_printed_into_its_log_is_no_error(tmp_path):
    # AkramjitS/gpt-lab-diffusion:experiments/7ee9623e-….txt: modded-nanogpt's record opens with the script's source
    source = ("def distributed_data_generator(filename_pattern: str, batch_size: int, rank: int, world_size: int):\n"
              "    files = [Path(file) for file in sorted(glob.glob(filename_pattern))]\n"
              "    if not files:\n"
              '        raise ValueError(f"No files found matching pattern: {filename_pattern}")\n')
    log = source + "".join(f"step:{i}/1000 train_time:{i * 76}ms step_avg:76.00ms\n" for i in range(600))
    obs = examine(tmp_path, HEAD + log)
    assert obs.outcome == "none", obs.summary


def test_a_raise_line_a_paste_ends_on_is_still_the_last_line(tmp_path):
    log = '        raise ValueError(f"No files found matching pattern: {filename_pattern}")\n'
    obs = examine(tmp_path, HEAD + log)
    assert obs.outcome == "other_error", obs.summary


def test_the_write_that_failed_is_quoted_over_the_monitors_report(tmp_path):
    # Westwood-Lin/TinyZero-Reproduction:part-of-logs.md: the monitor with 1 GB free, then the checkpoint save
    report = ("(raylet) [2025-08-10 22:40:01,000 E 1 1] file_system_monitor.cc:116: /tmp/ray/session_x is over 95% "
              "full, available space: 1.04582 GB; capacity: 30 GB. Object creation will fail if spilling is required.\n")
    failure = ('safetensors_rust.SafetensorError: Error while serializing: IoError(Os { code: 28, kind: StorageFull, '
               'message: "No space left on device" })\n')
    obs = examine(tmp_path, HEAD + report + failure)
    assert obs.outcome == "disk_full", obs.summary
    assert "SafetensorError" in obs.summary


def test_vllms_sigterm_handler_raising_keyboardinterrupt_is_a_stop_from_outside(tmp_path):
    # shiroyo-0/ai-agent-train:vllm_server.log: vLLM's api_server signal_handler raises KeyboardInterrupt("terminated")
    log = ("Traceback (most recent call last):\n"
           '  File "/opt/venv/lib/python3.12/site-packages/vllm/entrypoints/openai/api_server.py", line 579, in '
           "signal_handler\n"
           '    raise KeyboardInterrupt("terminated")\n'
           "KeyboardInterrupt: terminated\n")
    obs = examine(tmp_path, HEAD + log)
    assert obs.outcome == "terminated", obs.summary
    assert obs.evidence["signature"] == "keyboard_interrupt"


def test_a_connection_reset_as_a_finished_job_tears_down_is_no_failure(tmp_path):
    # stark-sim/megatron-deepspeed-lock-clock:.context/dual32_run_v2.log: Megatron's last words, the launcher's
    # `exits successfully`, then the other ranks' reads of the exited TCPStore reset
    log = ("localhost: [after training is done] datetime: 2026-03-24 12:25:47 \n"
           "localhost: [2026-03-24 12:26:38,619] [INFO] [launch.py:367:main] Process 3164902 exits successfully.\n"
           "localhost: [rank1]:[W324 12:26:38.234210612 TCPStore.cpp:125] [c10d] recvValue failed on SocketImpl(fd=138, "
           "addr=[::]:27967, remote=[fdff:ffff::]:35989): Connection reset by peer\n")
    obs = examine(tmp_path, HEAD + log)
    assert obs.outcome not in ("connection_closed", "network_failure"), obs.summary


# Ray's worker exit details (ray-project/ray src/ray/raylet/node_manager.cc, python/ray/_raylet.pyx)
RAY_VANISHED = ("(raylet) The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit "
                "detail: Worker unexpectedly exits with a connection error code 2. End of file. There are some potential "
                "root causes. (1) The process is killed by SIGKILL by OOM killer due to high memory usage. (2) ray stop "
                "--force is called. (3) The worker is crashed unexpectedly due to SIGSEGV or other unexpected errors.\n")


def test_a_ray_worker_that_vanished_is_a_kill_whose_sender_is_unknown(tmp_path):
    # OpenRLHF/OpenRLHF#305: the critic's worker gone, nothing else in the paste
    obs = examine(tmp_path, "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n"
                            + RAY_VANISHED)
    assert obs.outcome == "killed", obs.summary
    assert obs.evidence["signature"] == "ray_worker_vanished"
    # Ray lists the possible causes: no SIGKILL is claimed as seen (hkust-nlp/simpleRL-reason#98)
    assert "was killed with SIGKILL" not in obs.summary and "Ray worker vanished" in obs.summary


def test_a_ray_worker_that_vanished_after_its_own_abort_reports_that_abort(tmp_path):
    # examples/nccl-collective-mismatch: the watchdog's timeout, the rank's SIGABRT, then Ray's report of the death
    log = ("[rank1]:[E ProcessGroupNCCL.cpp:607] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2481, "
           "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600042 milliseconds before timing out.\n"
           "(MegatronTrainRayActor pid=2231) *** SIGABRT received at time=1786962673 on cpu 17 ***\n" + RAY_VANISHED)
    obs = examine(tmp_path, log)
    assert obs.outcome == "nccl_abort", obs.summary


def test_a_k8s_worker_exit_is_a_sigterm_that_makes_memory_a_suspect(tmp_path):
    obs = examine(tmp_path, "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker "
                            "exit detail: Worker exits unexpectedly. Worker exits with an exit code None. The worker may "
                            "have exceeded K8s pod memory limits.\n")
    assert obs.outcome == "terminated", obs.summary
    assert obs.evidence["signature"] == "ray_worker_k8s_exit"


@pytest.mark.parametrize("log", [
    # NVIDIA-NeMo/RL#1375: a Ray worker whose interpreter lacks Ray itself
    '(raylet)   File "/opt/venvs/lib/python3.12/site-packages/ray/_private/workers/default_worker.py", line 8, in <module>\n'
    "(raylet)     import ray\n"
    "(raylet) ModuleNotFoundError: No module named 'ray'\n",
    # NVIDIA-NeMo/RL#1244: NeMo-RL's check of a generation worker's environment
    "(VllmGenerationWorker pid=1845477) ImportError: vLLM is not installed. Please check that the py_executable in the "
    "runtime_env of VllmGenerationWorker covers the vllm dependency.\n",
])
def test_a_worker_environment_without_the_package_is_a_version_mismatch(tmp_path, log):
    obs = examine(tmp_path, log)
    assert obs.outcome == "version_mismatch", obs.summary



def test_verls_default_scorer_without_a_scorer_for_the_data_source_is_a_broken_reward_function(tmp_path):
    # KotoHanon/VERL-Maze's verl_demo.log: an older verl's bare NotImplementedError at the end of the dispatcher
    log = ("(TaskRunner pid=2151) Traceback (most recent call last):\n"
           '(TaskRunner pid=2151)   File "/verl/verl/workers/reward_manager/naive.py", line 58, in __call__\n'
           "(TaskRunner pid=2151)     score = self.compute_score(\n"
           '(TaskRunner pid=2151)   File "/verl/verl/utils/reward_score/__init__.py", line 37, in _default_compute_score\n'
           "(TaskRunner pid=2151)     raise NotImplementedError\n"
           "(TaskRunner pid=2151) NotImplementedError\n")
    obs = examine(tmp_path, log)
    assert obs.outcome == "reward_fn_failed", obs.summary
    # a NotImplementedError anywhere else is no reward function's
    other = examine(tmp_path, log.replace("_default_compute_score", "forward").replace("reward_score/__init__.py",
                                                                                        "models/llama.py"))
    assert other.outcome != "reward_fn_failed"


def test_ray_reporting_workers_ended_after_verls_final_validation_is_the_finished_jobs_teardown(tmp_path):
    # a committed verl PPO run its author called finished: the last validation, then Ray shutting the actors down
    finished = ("(TaskRunner pid=267532) (\"Final validation metrics: {'val-core/char_count/reward/mean@1': 0.91}\")\n")
    death = ("(raylet) A worker died or was killed while executing a task by an unexpected system error. To troubleshoot "
             "the problem, check the logs for the dead worker. RayTask ID: ffffffffffffffffc90bbe15 Worker ID: f7ea96b1 "
             "Worker exit type: SYSTEM_ERROR Worker exit detail: Worker exits unexpectedly by a signal. SystemExit is "
             "raised (sys.exit is called). Exit code: 1. The process receives a SIGTERM.\n")
    assert examine(tmp_path, finished + death).outcome == "none"
    # before the trainer's last words, the same report is an error the job stopped on
    assert examine(tmp_path, death + finished).outcome != "none"
