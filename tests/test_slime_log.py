"""Scanning real-looking slime / miles / Relax job logs into a LogIndex."""

from __future__ import annotations

import gzip
import math
import time
from dataclasses import fields
from pathlib import Path

import pytest

from triage.errors import CorruptArtifact
from triage.formats import slime_log
from triage.formats.slime_log import scan_logs

A = "(MegatronTrainRayActor pid=1234) "
R = "(RolloutManager pid=3456) "
E = "(SGLangEngine pid=77, ip=10.0.0.3) "

# A slime driver log as `ray job logs` returns it: the submit line, Megatron's arguments
# block interleaved with engine output, checkpoint loading, two rollouts, a crash.
SLIME_LOG = "\n".join([
    "+ ray job submit --address=http://127.0.0.1:8265 --runtime-env-json='{\"env_vars\": {\"X\": \"1\"}}' "
    "-- python3 train.py --actor-num-nodes 1 --actor-num-gpus-per-node 8 --colocate --lr 1e-6",  # 1
    "Job submission server address: http://127.0.0.1:8265",  # 2
    A + "------------------------ arguments ------------------------",  # 3
    A + "  accumulate_allreduce_grads_in_fp32 .............. False",  # 4
    E + "[2026-08-01 10:00:01 TP0] Load weight end. type=Qwen3ForCausalLM, avail mem=61.20 GB",  # 5
    A + "  attention_backend ............................... AttnBackend.flash",  # 6
    A + "  exit_on_missing_checkpoint ...................... False",  # 7
    A + "  lr .............................................. 1e-06",  # 8
    A + "  max_tokens_per_gpu .............................. 9216",  # 9
    A + "-------------------- end of arguments ---------------------",  # 10
    A + " loading distributed checkpoint from /root/ckpt at iteration 100",  # 11
    A + "  successfully loaded checkpoint from /root/ckpt [ t 1/2, gtp_remat 1/1, p 1/1 ] at iteration 100",  # 12
    "[2026-08-01 10:00:02] placement_group.py:64 - Waiting for placement group of 16 GPUs (elapsed 30s): "
    "8 GPUs registered with Ray, 8 available.",  # 13
    "[2026-08-01 10:00:32] placement_group.py:64 - Waiting for placement group of 16 GPUs (elapsed 60s): "
    "12 GPUs registered with Ray, 4 available.",  # 14
    R + "[2026-08-01 10:01:00] timer.py:24 - Timer generate start",  # 15
    E + "[2026-08-01 10:01:30 TP0] Decode batch. #running-req: 64, #token: 81234, token usage: 0.41, cuda graph: True",  # 16
    R + "[2026-08-01 10:02:00] sglang_rollout.py:447 - Finish rollout: ['<|im_start|>user\\nWhat is 1+1?<|im_end|>"
    "\\n<|im_start|>assistant\\n2'], label: 2, reward: 1.0",  # 17
    R + "[2026-08-01 10:02:01] timer.py:32 - Timer generate end (elapsed: 61.0s)",  # 18
    A + "[2026-08-01 10:02:02] memory_utils.py:49 - [Rank 0] Memory-Usage before offload model: {'gpu': '0', 'free_GB': 12.5}",  # 19
    A + "[2026-08-01 10:02:03] train_metric_utils.py:135 - rollout 0: {'rollout/log_probs': -0.31, "
    "'rollout/ref_log_probs': -0.31, 'rollout/entropy': nan, 'rollout/raw_reward': 0.5}",  # 20
    A + "[2026-08-01 10:02:04] model.py:918 - step 0: {'train/loss': 0.0123, 'train/grad_norm': 0.25, 'train/ppo_kl': 0.0}",  # 21
    A + "[2026-08-01 10:02:05] timer.py:24 - Timer update_weights start",  # 22
    A + "[2026-08-01 10:02:08] timer.py:32 - Timer update_weights end (elapsed: 3.0s)",  # 23
    R + "[2026-08-01 10:02:09] rollout.py:201 - Timer generate start",  # 24
    R + "[2026-08-01 10:03:09] http_utils.py:80 - Error: ReadTimeout('timed out'), retrying... (attempt 1/60, url=http://10.0.0.3:30000/generate)",  # 25
    A + "[2026-08-01 10:03:10] model.py:918 - step 1: {'train/loss': 0.02, 'train/grad_norm': inf, 'train/ppo_kl': 0.001}",  # 26
    A + "[2026-08-01 10:03:11] model.py:918 - step 2: {'train/loss': 0.03, 'train/grad_nor",  # 27: cut mid-write
    A + "Traceback (most recent call last):",  # 28
    E + "[2026-08-01 10:03:12 TP0] Decode batch. #running-req: 3, #token: 1200, token usage: 0.01, cuda graph: True",  # 29
    A + '  File "/root/slime/train.py", line 88, in <module>',  # 30
    A + "    train(args)",  # 31
    A + '  File "/root/slime/slime/backends/megatron_utils/actor.py", line 300, in train',  # 32
    A + '    raise RuntimeError("CUDA error: an illegal memory access was encountered")',  # 33
    A + "RuntimeError: CUDA error: an illegal memory access was encountered",  # 34
    E + "[2026-08-01 10:03:13 TP0] NCCL INFO Channel 00/02 : 0 1",  # 35: NCCL_DEBUG chatter, not an error
    "[2026-08-01 10:03:14] train.py:90 - job failed",  # 36
]) + "\n"


def write(tmp_path: Path, text: str, name: str = "driver.log") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_slime_driver_log(tmp_path):
    ix = scan_logs([write(tmp_path, SLIME_LOG)])
    assert ix.framework == "slime"
    assert ix.lines == 36 and ix.bytes == len(SLIME_LOG.encode())
    assert not ix.truncated_tail and ix.skipped_long_lines == 0

    # metrics: two steps parsed, the one cut mid-write counted
    idx, vals = ix.metrics.series("step", "train/grad_norm")
    assert list(idx) == [0, 1] and vals[0] == 0.25 and math.isinf(vals[1])
    assert ix.metrics.count("rollout") == 1 and math.isnan(ix.metrics.series("rollout", "rollout/entropy")[1][0])
    assert ix.unparsed_metric_lines == 1

    # Megatron's arguments block, despite the engine line inside it
    assert ix.arguments == {"accumulate_allreduce_grads_in_fp32": "False", "attention_backend": "AttnBackend.flash",
                            "exit_on_missing_checkpoint": "False", "lr": "1e-06", "max_tokens_per_gpu": "9216"}
    assert ix.command_line == ("python3 train.py --actor-num-nodes 1 --actor-num-gpus-per-node 8 --colocate --lr 1e-6")

    # timers: `generate` ran once (61 s) and was started again without an end
    gen = ix.timers["generate"]
    assert (gen.count, gen.total_s, gen.max_s, gen.started_not_ended) == (1, 61.0, 61.0, 1)
    assert ix.timers["update_weights"].last_s == 3.0 and ix.timers["update_weights"].started_not_ended == 0

    waits = ix.placement_group_waits
    assert [(w.gpus_needed, w.elapsed_s, w.gpus_registered, w.gpus_available) for w in waits] == [
        (16, 30.0, 8, 8), (16, 60.0, 12, 4)]
    assert waits[-1].line.line_no == 14

    (finish,) = ix.finish_rollouts
    assert finish.line_no == 17 and finish.source == "RolloutManager pid=3456"
    assert finish.text.startswith("Finish rollout: ['<|im_start|>user") and finish.text.endswith("reward: 1.0")
    assert finish.timestamp == "2026-08-01 10:02:00"

    loaded = ix.notable_tagged("ckpt_loaded")
    assert [line.line_no for line in loaded] == [11, 12]
    assert loaded[1].text.endswith("at iteration 100") and loaded[1].source == "MegatronTrainRayActor pid=1234"
    assert [line.line_no for line in ix.notable_tagged("weights_update")] == [22, 23]
    assert [line.line_no for line in ix.notable_tagged("release_memory")] == [19]

    (tb,) = ix.tracebacks
    assert tb.line_no == 28 and tb.source == "MegatronTrainRayActor pid=1234"
    assert tb.frames == ('File "/root/slime/train.py", line 88, in <module>',
                         'File "/root/slime/slime/backends/megatron_utils/actor.py", line 300, in train')
    assert tb.exception == "RuntimeError: CUDA error: an illegal memory access was encountered"

    # errors: the retry, the traceback and its exception line; not the frames' code, not NCCL INFO
    assert [(e.line_no, e.text[:40]) for e in ix.errors] == [
        (25, "Error: ReadTimeout('timed out'), retryin"),
        (28, "Traceback (most recent call last):"),
        (34, "RuntimeError: CUDA error: an illegal mem"),
    ]
    assert ix.errors[2].source == "MegatronTrainRayActor pid=1234" and ix.errors[0].timestamp == "2026-08-01 10:03:09"
    assert ix.dropped_errors == 0
    assert (ix.first_timestamp, ix.last_timestamp) == ("2026-08-01 10:00:01", "2026-08-01 10:03:14")


def test_search_with_and_without_the_automaton_agree(tmp_path):
    if slime_log._ahocorasick is None:
        pytest.skip("ahocorasick_rs not installed: only the bytes.find search exists")
    path = write(tmp_path, SLIME_LOG + MILES_LOG + RELAX_LOG)
    assert_same_index(scan_logs([path], use_automaton=True), scan_logs([path], use_automaton=False))


def test_lines_cut_by_chunk_boundaries_give_the_same_index(tmp_path, monkeypatch):
    path = write(tmp_path, SLIME_LOG + MILES_LOG + RELAX_LOG)
    whole = scan_logs([path])
    for chunk in (53, 97, 1000):
        monkeypatch.setattr(slime_log, "CHUNK_BYTES", chunk)
        monkeypatch.setattr(slime_log, "MAX_LINE_BYTES", 4096)
        assert_same_index(scan_logs([path]), whole)


def assert_same_index(a, b):
    for f in fields(a):
        if f.name == "metrics":
            for kind in a.metrics.kinds():
                for key in a.metrics.keys(kind):
                    ia, va = a.metrics.series(kind, key)
                    ib, vb = b.metrics.series(kind, key)
                    assert list(ia) == list(ib) and [str(v) for v in va] == [str(v) for v in vb], (kind, key)
            assert a.metrics.kinds() == b.metrics.kinds()
        else:
            assert getattr(a, f.name) == getattr(b, f.name), f.name


MILES_LOG = "\n".join([
    "[2026-08-02 09:00:00.125 main] train.py:40 - starting",
    "[2026-08-02 09:00:01.500 rollout_manager] sglang_rollout.py:514 - Finish rollout: "
    "text_preview='<think>2+2=4</think> 4', label=4, reward_summary={'score': 1.0}",
    "[2026-08-02 09:00:02.001 actor_cell0_rank0] model.py:918 - step 7: {'train/loss': 0.5, 'train/train_rollout_kl': 0.002}",
    "[2026-08-02 09:00:03.250 actor_cell0_rank0] model.py:950 - ValueError: bad batch",
]) + "\n"


def test_miles_log(tmp_path):
    ix = scan_logs([write(tmp_path, MILES_LOG)])
    assert ix.framework == "miles"
    assert ix.metrics.first("step") == (7, {"train/loss": 0.5, "train/train_rollout_kl": 0.002})
    (finish,) = ix.finish_rollouts
    assert finish.text.startswith("Finish rollout: text_preview=") and finish.source == "rollout_manager"
    (err,) = ix.errors
    assert (err.line_no, err.text, err.source, err.timestamp) == (4, "ValueError: bad batch", "actor_cell0_rank0",
                                                                  "2026-08-02 09:00:03.250")
    assert (ix.first_timestamp, ix.last_timestamp) == ("2026-08-02 09:00:00.125", "2026-08-02 09:00:03.250")


def colorlog(ts: str, level: str, name: str, msg: str) -> str:
    """Relax's colorlog format, escape codes and all."""
    color = {"INFO": "\x1b[01;37m", "WARNING": "\x1b[01;33m", "ERROR": "\x1b[01;31m"}[level]
    return (f"\x1b[32m{ts}\x1b[0m | {color}{level}\x1b[0m | \x1b[36m{name}\x1b[0m {color}{msg}\x1b[0m")


RELAX_LOG = "\n".join([
    colorlog("2026-08-03 08:00:00", "INFO", "relax.components.rollout:90", "Start rollout 3/100"),
    colorlog("2026-08-03 08:01:00", "INFO", "relax.components.rollout:120", "Finish rollout 3/100"),
    colorlog("2026-08-03 08:01:01", "INFO", "relax.components.actor:185", "Actor training step 3/100"),
    colorlog("2026-08-03 08:01:30", "INFO", "relax.engine.train:918", "step 3: {'train/loss': 0.1, 'train/grad_norm': nan}"),
    colorlog("2026-08-03 08:01:31", "ERROR", "relax.components.actor:201",
             "Actor training failed at step 3: DistBackendError: NCCL communicator was aborted"),
    colorlog("2026-08-03 08:01:32", "WARNING", "relax.components.actor:210", "step took long"),
]) + "\n"


def test_loguru_lines_of_another_project_are_no_relax_run(tmp_path):
    # NovaSky-AI/SkyRL#542: loguru's default layout, as Relax's, but SkyRL's modules; time and level still read
    log = ("2025-10-21 17:27:14.171 | INFO     | skyrl_train.utils.utils:prepare_runtime_environment:523 - "
           "`VLLM_USE_V1` is not specified\n"
           "2025-10-21 17:27:20.002 | ERROR    | skyrl_train.entrypoints.main_base:run:101 - RuntimeError: boom\n")
    ix = scan_logs([write(tmp_path, log)])
    assert ix.framework == "unknown"
    (err,) = ix.errors
    assert err.level == "ERROR" and err.timestamp.startswith("2025-10-21")


def test_relax_colorlog_with_ansi_codes(tmp_path):
    ix = scan_logs([write(tmp_path, RELAX_LOG)])
    assert ix.framework == "relax"
    assert [(line.tag, line.text) for line in ix.notable] == [
        ("rollout_progress", "Start rollout 3/100"),
        ("rollout_progress", "Finish rollout 3/100"),
        ("train_progress", "Actor training step 3/100"),
    ]
    assert math.isnan(ix.metrics.first("step")[1]["train/grad_norm"])
    (err,) = ix.errors
    assert err.level == "ERROR" and err.line_no == 5 and "\x1b" not in err.text
    assert err.text == "Actor training failed at step 3: DistBackendError: NCCL communicator was aborted"
    assert err.timestamp == "2026-08-03 08:01:31"
    assert ix.finish_rollouts == []  # Relax's `Finish rollout i/N` is progress, not a sample


def test_bare_prints_of_slime_v0_1_and_rank_prefixes(tmp_path):
    text = "\n".join([
        "step 0: {'train/loss': 0.7, 'train/grad_norm': 1.5}",
        A + "rollout 0: {'rollout/log_probs': -0.2, 'rollout/ref_log_probs': -0.2}",
        "[rank0]: Traceback (most recent call last):",
        '[rank0]:   File "/root/train.py", line 3, in <module>',
        "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
        "critic-step 0: {'train/critic-loss': 0.3}",
    ]) + "\n"
    ix = scan_logs([write(tmp_path, text)])
    assert ix.framework == "slime"
    assert ix.metrics.first("step") == (0, {"train/loss": 0.7, "train/grad_norm": 1.5})
    assert ix.metrics.first("critic-step") == (0, {"train/critic-loss": 0.3})
    assert ix.metrics.first("rollout")[1]["rollout/log_probs"] == -0.2
    (tb,) = ix.tracebacks
    assert tb.source == "rank0" and tb.exception.startswith("torch.OutOfMemoryError: CUDA out of memory")
    assert ix.first_timestamp is None


def test_a_slime_record_pasted_without_its_time_is_still_a_record(tmp_path):
    # NovaSky-AI/SkyRL#1864 pasted `model.py:660 - step 1: {…}`, the `[time]` trimmed off
    text = ("model.py:660 - step 1: {'train/loss': 0.0006, 'train/ppo_kl': -0.2024, 'train/kl_loss': 0.6256}\n"
            "INFO model.py:660 - step 2: {'train/loss': 0.0005, 'train/ppo_kl': -0.1, 'train/kl_loss': 0.5}\n")
    ix = scan_logs([write(tmp_path, text)])
    assert ix.metrics.first("step") == (1, {"train/loss": 0.0006, "train/ppo_kl": -0.2024, "train/kl_loss": 0.6256})
    steps, loss = ix.metrics.series("step", "train/loss")
    assert list(steps) == [1, 2] and list(loss) == [0.0006, 0.0005]


def test_checkpoint_not_found_and_nan_skip_lines(tmp_path):
    text = "\n".join([
        A + "WARNING: could not find the metadata file /root/ckpt/latest_checkpointed_iteration.txt",
        A + "    will not load any checkpoints and will start from random",
        A + "[2026-08-01 10:00:00] model.py:700 - Found NaN in grad norm, skipping step",
        A + "[2026-08-01 10:00:01] training.py:3 - found Inf in local grad norm for bucket #0 in backward pass",
        A + "[2026-08-01 10:00:02] checkpointing.py:1 - saving checkpoint at iteration       5 to /root/ckpt",
    ]) + "\n"
    ix = scan_logs([write(tmp_path, text)])
    assert [line.line_no for line in ix.notable_tagged("ckpt_not_found")] == [1, 2]
    assert [line.line_no for line in ix.notable_tagged("nan_skip")] == [3, 4]
    assert [line.line_no for line in ix.notable_tagged("ckpt_saved")] == [5]
    assert ix.notable_tagged("ckpt_loaded") == []


def test_interleaved_tracebacks_keep_their_own_frames(tmp_path):
    b = "(MegatronTrainRayActor pid=1235) "
    text = "\n".join([
        A + "Traceback (most recent call last):",
        b + "Traceback (most recent call last):",
        A + '  File "/a.py", line 1, in f',
        b + '  File "/b.py", line 2, in g',
        b + "KeyboardInterrupt",
        A + "AssertionError: grad norm is nan",
    ]) + "\n"
    ix = scan_logs([write(tmp_path, text)])
    got = {tb.source: (tb.line_no, tb.frames, tb.exception) for tb in ix.tracebacks}
    assert got == {
        "MegatronTrainRayActor pid=1234": (1, ('File "/a.py", line 1, in f',), "AssertionError: grad norm is nan"),
        "MegatronTrainRayActor pid=1235": (2, ('File "/b.py", line 2, in g',), "KeyboardInterrupt"),
    }


def test_ray_repeated_suffix_and_continued_command_line(tmp_path):
    text = "\n".join([
        "python3 train.py \\",
        "   --actor-num-nodes 1 \\",
        "   --rollout-stop-token-ids 1 2 3",
        A + "[2026-08-01 10:00:00] model.py:1 - NCCL timeout in allreduce [repeated 7x across cluster]",
        '  File "/usr/lib/python3.10/runpy.py", line 196, in _run_module_as_main',
    ]) + "\n"
    ix = scan_logs([write(tmp_path, text)])
    assert ix.command_line == "python3 train.py --actor-num-nodes 1 --rollout-stop-token-ids 1 2 3"
    assert [e.text for e in ix.errors] == ["NCCL timeout in allreduce"]


def test_hydra_command_echoed_by_set_x_is_the_command_line(tmp_path):
    # verl's entry point takes Hydra overrides, no `--` flag; bash's `set -x` echoes it with `+ `
    # (verl examples/grpo_trainer/*.sh run under `set -x`)
    cmd = ("python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo data.train_batch_size=128 "
           "actor_rollout_ref.rollout.n=8 trainer.n_gpus_per_node=1")
    text = "\n".join([
        "+ " + cmd,
        "2025-08-02 00:35:19,831 INFO worker.py:1879 -- Started a local Ray instance.",
        "python3 tools/plot.py out.png",  # no override, no flag: not a training command
    ]) + "\n"
    ix = scan_logs([write(tmp_path, text)])
    assert ix.command_line == cmd
    only_plot = scan_logs([write(tmp_path, "python3 tools/plot.py a=1 out.png\n")])
    assert only_plot.command_line is None


def test_a_log_collectors_service_tag_is_not_read_as_the_line(tmp_path):
    # akash-network/awesome-akash#543: a container's `[vllm]: ` before vLLM's worker prefix; the traceback's code
    # line (`raise RuntimeError(f"NCCL error: …")`) is not its exception, and `[rank3]: ` still names a rank
    tag = "[vllm]: (VllmWorkerProcess pid=91) ERROR 07-28 23:29:37 multiproc_worker_utils.py:226] "
    text = "\n".join([
        tag + "Traceback (most recent call last):",
        tag + '  File "/usr/local/lib/python3.10/dist-packages/vllm/distributed/device_communicators/pynccl_wrapper.py", '
              'line 223, in NCCL_CHECK',
        tag + '    raise RuntimeError(f"NCCL error: {error_str}")',
        tag + "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)",
        "[rank3]: RuntimeError: a rank's own error",
    ]) + "\n"
    ix = scan_logs([write(tmp_path, text)])
    got = [(tb.line_no, tb.exception) for tb in ix.tracebacks]
    assert got[0] == (1, "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)")
    assert [e.source for e in ix.errors if "own error" in e.text] == ["rank3"]


def test_truncated_last_line_is_still_parsed(tmp_path):
    text = SLIME_LOG + A + "[2026-08-01 10:04:00] model.py:918 - step 3: {'train/loss': 0.5}"
    ix = scan_logs([write(tmp_path, text)])
    assert ix.truncated_tail and ix.lines == 37
    assert list(ix.metrics.series("step", "train/loss")[0]) == [0, 1, 3]
    assert ix.last_timestamp == "2026-08-01 10:04:00"


def test_last_line_cut_mid_dict_is_counted_not_raised(tmp_path):
    text = "step 0: {'train/loss': 0.5}\nstep 1: {'train/loss': 0.4, 'train/gr"
    ix = scan_logs([write(tmp_path, text)])
    # the record the file ends inside keeps its whole items
    assert ix.truncated_tail and ix.unparsed_metric_lines == 0 and ix.metrics.count("step") == 2
    assert list(ix.metrics.series("step", "train/loss")[1]) == [0.5, 0.4]


def test_ten_megabyte_line_is_skipped_quickly(tmp_path):
    path = tmp_path / "long.log"
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("[2026-08-01 10:00:00] a.py:1 - before\n")
        fh.write("x" * (5 << 20) + " RuntimeError inside the long line " + "y" * (5 << 20) + "\n")
        fh.write("[2026-08-01 10:00:01] a.py:2 - RuntimeError: after the long line\n")
        fh.write("z" * (3 << 20))  # a long unterminated tail as well
    t0 = time.perf_counter()
    ix = scan_logs([path])
    elapsed = time.perf_counter() - t0
    assert elapsed < 3.0
    assert ix.skipped_long_lines == 2 and ix.truncated_tail and ix.lines == 4
    assert [(e.line_no, e.text) for e in ix.errors] == [(3, "RuntimeError: after the long line")]


def test_long_line_inside_one_chunk_is_counted_and_skipped(tmp_path):
    text = "ok\n" + "Error " * 400_000 + "\nValueError: after\n"  # a 2.4 MB line
    ix = scan_logs([write(tmp_path, text)])
    assert ix.skipped_long_lines == 1 and ix.lines == 3
    assert [(e.line_no, e.text) for e in ix.errors] == [(3, "ValueError: after")]


def test_gzip_log_reads_like_the_plain_one(tmp_path):
    plain = write(tmp_path, SLIME_LOG)
    gz = tmp_path / "driver.log.gz"
    gz.write_bytes(gzip.compress(SLIME_LOG.encode()))
    a, b = scan_logs([plain]), scan_logs([gz])
    assert b.files == [str(gz)]
    assert [(e.line_no, e.text) for e in a.errors] == [(e.line_no, e.text) for e in b.errors]
    assert a.arguments == b.arguments and a.lines == b.lines and b.metrics.count("step") == 2


def test_truncated_gzip_keeps_what_was_read(tmp_path):
    gz = tmp_path / "driver.log.gz"
    gz.write_bytes(gzip.compress(SLIME_LOG.encode())[:-12])  # the trailer is gone
    ix = scan_logs([gz])
    assert ix.truncated_tail


def test_binary_file_is_refused_with_one_line(tmp_path):
    path = tmp_path / "model_optim_rng.pt"
    path.write_bytes(b"PK\x03\x04" + bytes(range(256)) * 100)
    with pytest.raises(CorruptArtifact, match="is not a text log: it contains NUL bytes") as info:
        scan_logs([path])
    assert "\n" not in str(info.value) and str(path) in str(info.value)


def test_a_zero_filled_stretch_in_a_text_log_is_no_binary_data(tmp_path):
    # KramCoder/ADL-3:homework3_v3/full_training_log.txt: truncated while the trainer kept writing at its offset, 2,024
    # zeros between two progress-bar frames
    path = tmp_path / "train.log"
    records = "".join(f"{{'loss': {2.0 - 0.01 * i:.4f}, 'grad_norm': 0.5, 'learning_rate': 2e-05, 'epoch': {i / 10}}}\n"
                      for i in range(1, 6))
    path.write_bytes(b"Starting training...\n" + b"\x00" * 2024 + b"\r 35%|###5      | 34/96\n" + records.encode())
    ix = scan_logs([path])
    assert ix.metrics.count("hf_log") == 5
    # NULs in short runs stay binary
    path.write_bytes(b"Starting training...\n" + b"\x00\x01\x00\x02" * 100 + records.encode())
    with pytest.raises(CorruptArtifact, match="is not a text log: it contains NUL bytes"):
        scan_logs([path])
    # and a file of zeros alone too
    path.write_bytes(b"\x00" * 4096)
    with pytest.raises(CorruptArtifact, match="is not a text log: it contains NUL bytes"):
        scan_logs([path])


def test_mostly_non_utf8_file_is_refused(tmp_path):
    path = tmp_path / "noise.log"
    path.write_bytes(bytes([0x80 + (i % 120) for i in range(70_000)]))
    with pytest.raises(CorruptArtifact, match=r"is not a text log: \d+% of its first 64 KB is not UTF-8 text"):
        scan_logs([path])


def test_stray_invalid_utf8_is_replaced_not_fatal(tmp_path):
    path = tmp_path / "driver.log"
    path.write_bytes(b"hello\n[2026-08-01 10:00:00] a.py:1 - Error: caf\xe9 closed\n")
    (err,) = scan_logs([path]).errors
    assert err.text == "Error: caf\ufffd closed"


def test_missing_and_directory_paths_are_corrupt_artifacts(tmp_path):
    with pytest.raises(CorruptArtifact, match="cannot read log: No such file or directory"):
        scan_logs([tmp_path / "nope.log"])
    with pytest.raises(CorruptArtifact, match="is a directory"):
        scan_logs([tmp_path])


def test_error_lines_are_bounded_first_and_last_half(tmp_path, monkeypatch):
    monkeypatch.setattr(slime_log, "MAX_ERROR_LINES", 10)
    text = "".join(f"[2026-08-01 10:00:00] a.py:1 - RuntimeError: failure {i}\n" for i in range(1, 26))
    ix = scan_logs([write(tmp_path, text)])
    assert [e.line_no for e in ix.errors] == [1, 2, 3, 4, 5, 21, 22, 23, 24, 25]
    assert ix.dropped_errors == 15


def test_several_files_keep_their_own_paths_and_line_numbers(tmp_path):
    a = write(tmp_path, "one\nRuntimeError: in a\n", "a.log")
    b = write(tmp_path, "RuntimeError: in b\n", "b.log")
    ix = scan_logs([a, b])
    assert ix.files == [str(a), str(b)] and ix.lines == 3
    assert [e.where() for e in ix.errors] == [f"{a}:2", f"{b}:1"]


def test_empty_log(tmp_path):
    ix = scan_logs([write(tmp_path, "")])
    assert ix.lines == 0 and ix.framework == "unknown" and ix.metrics.empty() and not ix.truncated_tail


def test_long_lines_are_quoted_by_head_and_tail(tmp_path):
    response = "word " * 3000
    text = R + f"[2026-08-01 10:02:00] sglang_rollout.py:447 - Finish rollout: ['{response}'], label: 7, reward: 0.0\n"
    (finish,) = scan_logs([write(tmp_path, text)]).finish_rollouts
    assert len(finish.text) == 2000 and " … " in finish.text
    assert finish.text.startswith("Finish rollout: ['word") and finish.text.endswith("label: 7, reward: 0.0")


def test_only_the_last_placement_group_waits_are_kept(tmp_path):
    text = "".join(f"[2026-08-01 10:{i // 2:02d}:00] placement_group.py:64 - Waiting for placement group of 8 GPUs "
                   f"(elapsed {30 * i}s): 4 GPUs registered with Ray, 4 available.\n" for i in range(1, 31))
    waits = scan_logs([write(tmp_path, text)]).placement_group_waits
    assert len(waits) == 20 and waits[0].elapsed_s == 330.0 and waits[-1].elapsed_s == 900.0


def test_metric_head_shortcut_agrees_with_the_pattern():
    """`_after_metric_head` answers as `_METRIC_HEAD.search` does, on heads built from its pieces."""
    import random

    rng = random.Random(1)
    pieces = [b"step", b"rollout", b"perf", b"eval", b"passrate", b"multi_turn", b" ", b"-", b"m", b"x", b"_",
              b"3", b"12", b"\n", b"critic", b"[", b"\x1b[0m", b"a-", b"Z"]
    for _ in range(20000):
        data = b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 8))) + b": {"
        p = len(data) - 3
        for start in (0, max(0, p - 64), rng.randint(0, p)):
            assert slime_log._after_metric_head(data, start, p) == (
                slime_log._METRIC_HEAD.search(data, start, p) is not None), (data, start)


def test_vllm_logger_lines_give_their_level_and_message():
    # vllm/logger.py: "%(levelname)s %(asctime)s [%(filename)s:%(lineno)d] %(message)s", "%m-%d %H:%M:%S"
    from triage.formats.slime_log import split_line

    line = split_line("(EngineCore_DP0 pid=2341366) ERROR 10-28 16:21:14 [core.py:710] ValueError: bad request")
    assert (line.text, line.level, line.source) == ("ValueError: bad request", "ERROR", "EngineCore_DP0 pid=2341366")
    assert split_line("INFO 10-28 16:14:04 [llm.py:306] Supported_tasks: ['generate']").level == "INFO"


# A console's metric dict as pasted into an issue, wrapped by the terminal (huggingface/trl#5312's paste)
WRAPPED = [
    "{'loss': 0.0, 'grad_norm': 4.947049092152156e-06, 'learning_rate': 1.0000000000000002e-06, 'completions/max_terminated_length':",
    " 85.0, 'reward': 0.006554092280566692, 'reward_std': 0.006052262149751186, 'sampling/importance_sampling_ratio/min'",
    ": 3.197867121484542e-21, 'epoch': 0.12}",
]


def test_a_wrapped_metric_dict_is_joined_into_one_record(tmp_path):
    log = tmp_path / "job.log"
    log.write_text("\n".join(WRAPPED + ["INFO done"]) + "\n", encoding="utf-8")
    ix = scan_logs([log])
    assert ix.unparsed_metric_lines == 0
    assert ix.metrics.count("hf_log") == 1
    _, values = ix.metrics.series("hf_log", "sampling/importance_sampling_ratio/min")
    assert values.tolist() == [3.197867121484542e-21]
    assert ix.lines == 4


@pytest.mark.parametrize("after", [
    [],  # cut at the end of the paste
    ["", "{'loss': 0.1, 'grad_norm': 1.0, 'epoch': 0.2}"],  # a blank line, then the next record
    ["Traceback (most recent call last):", '  File "train.py", line 3, in <module>', "RuntimeError: boom"],
])
def test_a_dict_that_never_closes_is_one_unparsed_line_and_what_follows_is_read(tmp_path, after):
    log = tmp_path / "job.log"
    log.write_text("\n".join([WRAPPED[0]] + after) + "\n", encoding="utf-8")
    ix = scan_logs([log])
    if not after:  # the file ends inside it: its whole items are the record
        assert ix.unparsed_metric_lines == 0 and ix.metrics.count("hf_log") == 1
        assert ix.metrics.series("hf_log", "learning_rate")[1][0] == pytest.approx(1e-06)
        return
    assert ix.unparsed_metric_lines == 1
    if after[0] == "":
        assert ix.metrics.count("hf_log") == 1
    if after and after[0].startswith("Traceback"):
        assert [tb.exception for tb in ix.tracebacks] == ["RuntimeError: boom"]


def test_a_process_prefix_nested_in_rays_is_stripped_with_it():
    # vLLM v1 names the engine's processes inside the Ray actor's prefix (OpenRLHF/OpenRLHF#1193)
    from triage.formats.slime_log import split_line

    line = split_line("(LLMRayActor pid=585804) (EngineCore_DP0 pid=586112) ERROR 03-05 00:25:45 [core.py:1094] "
                      "Invocation of collective_rpc method failed")
    assert (line.text, line.source, line.level) == ("Invocation of collective_rpc method failed",
                                                   "LLMRayActor pid=585804", "ERROR")
    # a parenthesised word after the actor's prefix that is not a process stays in the message
    assert split_line("(TaskRunner pid=7) (note) step 3 done").text == "(note) step 3 done"


def test_metric_lines_in_a_quoted_comment_are_read(tmp_path):
    # THUDM/slime#1487 pasted its log as a Markdown quote
    p = tmp_path / "job.log"
    p.write_text("".join(f"> (MegatronTrainRayActor pid=19450) [2026-03-24 06:36:5{i}] model.py:665 - step {i}: "
                         f"{{'train/loss': 0.0{i}, 'train/grad_norm': 0.4{i}}}\n" for i in range(3)), encoding="utf-8")
    ix = scan_logs([p])
    steps, values = ix.metrics.series("step", "train/grad_norm")
    assert list(steps) == [0, 1, 2] and list(values) == pytest.approx([0.40, 0.41, 0.42])
    assert ix.framework == "slime"


def test_a_table_row_or_a_progress_bar_is_not_a_compose_prefix():
    from triage.formats.slime_log import split_line

    assert split_line("step | loss | grad_norm").text == "step | loss | grad_norm"
    assert split_line("Epoch 1 | loss 0.5").text == "Epoch 1 | loss 0.5"
    assert split_line("app_worker_2   | ValueError: bad").text == "ValueError: bad"


def test_a_launchers_task_label_is_stripped(tmp_path):
    # Slurm's `srun --label` (sgl-project/sglang#4096) and Open MPI's `mpirun --tag-output`
    from triage.formats.slime_log import split_line

    line = split_line("0: [2025-03-05 03:55:55 TP0] Scheduler hit an exception: Traceback (most recent call last):")
    assert line.text == "Scheduler hit an exception: Traceback (most recent call last):"
    assert split_line(" 12: [rank3]: RuntimeError: boom").text == "RuntimeError: boom"
    assert split_line("[1,0]<stderr>:ValueError: bad").text == "ValueError: bad"
    # with `--timestamp-output`'s date before it (verl-project/verl#1657)
    assert split_line("Tue May 20 21:16:06 2025[1,0]<stdout>:RuntimeError: Parent directory /ckpt does not exist."
                      ).text == "RuntimeError: Parent directory /ckpt does not exist."
    assert split_line("Tue May 20 21:16:06 2025 started").text == "Tue May 20 21:16:06 2025 started"
    # `grep -n` (and `-C`'s context lines) before the lines a user grepped out of the log
    assert split_line("4924:torch.OutOfMemoryError: CUDA out of memory.").text == "torch.OutOfMemoryError: CUDA out of memory."
    assert split_line("4917-(RolloutManager pid=6809) started").text == "started"
    assert split_line("3-shot eval").text == "3-shot eval"
    # a worker prefix with its rank after a comma (THUDM/slime#1491's `(head, rank=0, pid=40184)`)
    line = split_line("(head, rank=0, pid=40184) ModuleNotFoundError: No module named 'slime.x'")
    assert line.text == "ModuleNotFoundError: No module named 'slime.x'" and line.source == "head, rank=0, pid=40184"
    # `cat -n`'s gutter (hiyouga/LlamaFactory#7986), the rank's prefix after it still read
    line = split_line("  1145\t[rank3]: RuntimeError: InnerRun: OPS function error: Conv3D, error code is 500002")
    assert line.text == "RuntimeError: InnerRun: OPS function error: Conv3D, error code is 500002" and line.source == "rank3"
    grepped = tmp_path / "grep.log"
    grepped.write_text("4980:(MegatronTrainRayActor pid=10122) [2026-07-20 17:53:24] data.py:193 - rollout 0: "
                       "{'rollout/raw_reward': 0.2083, 'rollout/ref_log_probs': -0.0921, 'rollout/kl': 0.0}\n",
                       encoding="utf-8")
    assert scan_logs([grepped]).metrics.count("rollout") == 1
    # a number and a colon inside a message, or a time, is not a label
    assert split_line("step 0: {'loss': 1.0}").text == "step 0: {'loss': 1.0}"
    assert split_line("12:30:01 started").text == "12:30:01 started"
    log = tmp_path / "job.log"
    log.write_text(
        "0: [2025-03-05 03:55:55 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        '0:   File "/sgl-workspace/sglang/python/sglang/srt/model_executor/model_runner.py", line 463, '
        "in init_weights_update_group\n"
        "0:     dist.barrier(group=self._model_update_group, device_ids=[self.gpu_id])\n"
        "0: torch.distributed.DistBackendError: store->get('0') got error: failed to format addr, unknown family=0\n",
        encoding="utf-8")
    ix = scan_logs([log])
    assert [e.text for e in ix.errors][-1] == (
        "torch.distributed.DistBackendError: store->get('0') got error: failed to format addr, unknown family=0")
    assert ix.errors[-1].line_no == 4


def test_every_error_word_is_reached_by_a_marker():
    from triage.formats.slime_log import ERROR_WORDS, _NEEDLES

    # lines that always hold another marker: urllib3's `Max retries exceeded … (Caused by
    # NewConnectionError(…))` (`rror`), NCCL's `NET/IB : Got completion from peer …` (`NET/IB`)
    elsewhere = {"Max retries": "rror", "Got completion from peer": "NET/IB"}
    for word in ERROR_WORDS:
        marker = elsewhere.get(word)
        assert marker is not None or any(n.decode() in word for n in _NEEDLES), f"no marker finds {word!r}"
        assert marker is None or marker.encode() in _NEEDLES


@pytest.mark.parametrize("line", [
    "terminate called after throwing an instance of 'gloo::EnforceNotMet'",
    "  what():  [enforce fail at /pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:446] op.preamble.length <= op.nbytes",
    "[2025-07-30 08:25:11,734 C 2786 2786] core_worker.cc:1023:  Check failed: worker_context_.GetCurrentActorID().IsNil()",
    "[2026-05-21 16:07:41 DP6 TP6] Failed to update parameter online: start out of range (expected to be in range",
    "  Exit Code:    137",
    "!!!!!!! Segfault encountered !!!!!!!",
    "torch.distributed.elastic.multiprocessing.api: failed (exitcode: 1) local_rank: 0 (pid: 2916310)",
    "[2026-04-15 07:45:17] Received sigquit from a child process. It usually means the child failed.",
])
def test_error_lines_without_an_error_word_are_error_lines(tmp_path, line):
    log = tmp_path / "job.log"
    log.write_text(f"{line}\n", encoding="utf-8")
    for automaton in (True, False):
        index = scan_logs([log], use_automaton=automaton)
        assert [e.line_no for e in index.errors] == [1], (automaton, line)


@pytest.mark.parametrize("raw, text", [
    # THUDM/slime#1076: the exception line pasted as Markdown inline code
    ("`RuntimeError: The size of tensor a (6236) must match the size of tensor b (8192)`",
     "RuntimeError: The size of tensor a (6236) must match the size of tensor b (8192)"),
    ("`[rank0]: ValueError: boom` ", "[rank0]: ValueError: boom"),
    ("```python", "```python"),  # a fence is no inline code
    # THUDM/slime#1217: a Ray-prefixed line indented under a Markdown list item
    ("   (SGLangEngine pid=32887)   File \"/sgl-workspace/scheduler.py\", line 2683, in run",
     "(SGLangEngine pid=32887)   File \"/sgl-workspace/scheduler.py\", line 2683, in run"),
    ("    (a parenthesis in prose) is no prefix", "    (a parenthesis in prose) is no prefix"),
])
def test_inline_codes_backticks_are_a_carrier(raw, text):
    assert slime_log.strip_carrier(raw) == text


@pytest.mark.parametrize("raw", [
    # verl-project/verl#2106: Ray's colour codes around the task name, their ESC lost or turned into U+FFFD
    "ray.exceptions.RayTaskError(RuntimeError): \ufffd[36mray::TaskRunner.run()\ufffd[39m (pid=279569, ip=172.27.150.51)",
    "ray.exceptions.RayTaskError(RuntimeError): [36mray::TaskRunner.run()[39m (pid=279569, ip=172.27.150.51)",
])
def test_ray_colour_codes_that_lost_their_escape_are_dropped_mid_line(raw):
    assert slime_log.split_line(raw).text == ("ray.exceptions.RayTaskError(RuntimeError): ray::TaskRunner.run() "
                                              "(pid=279569, ip=172.27.150.51)")


def test_a_ci_runners_zoned_timestamp_is_a_carrier_and_a_loggers_own_is_not():
    from triage.formats.slime_log import split_line

    # vllm-project/vllm#43375: Buildkite's `[ISO time] ` before the engine's own record
    line = split_line("[2026-08-21T19:42:40Z] (EngineCore pid=522) ERROR 08-21 19:42:40 [core.py:1354] EngineCore failed")
    assert (line.text, line.source, line.level) == ("EngineCore failed", "EngineCore pid=522", "ERROR")
    # a logger's own bracketed time (no zone) stays the line's timestamp
    line = split_line("[2026-08-21T19:42:40] Connection lost")
    assert (line.text, line.timestamp) == ("Connection lost", "2026-08-21 19:42:40")


def test_a_compose_services_container_name_is_a_carrier():
    # matatonic/openedai-images-flux#7: a service with `container_name` prints it without a replica number
    from triage.formats.slime_log import split_line

    assert split_line("openedai-images-flux  | RuntimeError: No CUDA GPUs are available").text == \
        "RuntimeError: No CUDA GPUs are available"
    assert split_line("outlines-server-1  | INFO: started").text == "INFO: started"
    # a word and a bar in a message is the message's own
    assert split_line("loss | 0.25 | step 3").text == "loss | 0.25 | step 3"


def test_pdshs_host_prefix_is_a_carrier():
    from triage.formats.slime_log import split_line

    # StarsfieldAI/R1-V#44: DeepSpeed's multi-node launcher runs each node's ranks through pdsh
    line = split_line("29.127.65.230: [rank0]: AttributeError: 'Qwen2VLGRPOVLLMTrainer' object has no attribute 'x'")
    assert (line.text, line.source) == ("AttributeError: 'Qwen2VLGRPOVLLMTrainer' object has no attribute 'x'", "rank0")
    assert split_line("worker-1: [rank3]: RuntimeError: y").text == "RuntimeError: y"
    # a host name before anything but a rank's prefix is a message's own `word: `
    assert split_line("Error: something").text == "Error: something"
    assert split_line("worker-1: started").text == "worker-1: started"
    # a cluster's host name (words joined by hyphens, a number last) before a traceback's lines (NVIDIA/nccl#1029)
    assert split_line('rdma-gpu-train-worker-0:   File "/x/c10d.py", line 3665, in barrier').text == \
        '  File "/x/c10d.py", line 3665, in barrier'
    assert split_line("gpu-node-07: Traceback (most recent call last):").text == "Traceback (most recent call last):"
    assert split_line("gpu-node-07: torch.distributed.DistBackendError: NCCL error").text == \
        "torch.distributed.DistBackendError: NCCL error"
    # a word that names no host keeps its line
    assert split_line("Note: Traceback (most recent call last):").text == "Note: Traceback (most recent call last):"


def test_nemos_logging_prefix_gives_the_level_and_time():
    # NVIDIA/NeMo#7647 (nemo/utils/formatters/base.py's layout)
    from triage.formats.slime_log import split_line

    line = split_line("[NeMo W 2023-10-05 22:24:59 nemo_logging:393] megatron-core was not found.")
    assert line.level == "WARNING" and line.text == "megatron-core was not found."
    assert line.timestamp is not None and line.timestamp.startswith("2023-10-05")


def test_ms_swifts_logging_prefix_gives_the_level():
    # ms-swift's and modelscope's loggers (`[%(levelname)s:%(name)s] `): modelscope/ms-swift#1230, #3194
    from triage.formats.slime_log import split_line

    assert (split_line("[INFO:swift] Setting args.lazy_tokenize: False").text,
            split_line("[INFO:swift] Setting args.lazy_tokenize: False").level) == ("Setting args.lazy_tokenize: False", "INFO")
    assert split_line("[ERROR:modelscope] >> Error loading LLM-Research/xlam-function-calling-60k: 'grpo'").level == "ERROR"
    assert split_line("[WARNING:swift] the dataset is small").level == "WARNING"
