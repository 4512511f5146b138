"""nccl-collective-mismatch: a 4-GPU slime job hangs in training step 10 and the NCCL watchdog kills
it after 10 minutes. The flight recorder was on (TORCH_NCCL_TRACE_BUFFER_SIZE=2000,
TORCH_NCCL_DUMP_ON_TIMEOUT=1); each rank's dump (PyTorch's pickled dict of plain containers,
written as /tmp/nccl_trace_rank_<r>) shows ranks 0, 2 and 3 inside all_reduce #2481 while
rank 1 completed #2480 and never issued #2481.
"""

from __future__ import annotations

import pickle
import random

from common import (ROLLOUT, TRAIN, Log, base_args, base_flags, example_dir, expected, finish_rollout, math_sample,
                    multiline_command, rollout_dict, rollout_perf, slime_rollout, slime_startup, step_dict, train_perf, write_text)

NAME = "nccl-collective-mismatch"
WORLD = 4
LAST = 2481  # the collective ranks 0, 2, 3 wait in
T0 = 1786962305_000_000_000  # 2026-08-17 12:21:05 UTC, in ns

C10D = "/usr/local/lib/python3.12/dist-packages/torch/distributed/distributed_c10d.py"


def frames(kind: str) -> list[dict[str, object]]:
    inner = {"all_reduce": ("all_reduce", 2806), "_reduce_scatter_base": ("reduce_scatter_tensor", 4418),
             "_allgather_base": ("all_gather_into_tensor", 3841), "broadcast": ("broadcast", 2714)}[kind]
    out = [{"name": inner[0], "filename": C10D, "line": inner[1]},
           {"name": "wrapper", "filename": "/usr/local/lib/python3.12/dist-packages/torch/distributed/c10d_logger.py", "line": 81}]
    if kind == "all_reduce":
        out += [{"name": "train_one_step", "filename": "/root/slime/slime/backends/megatron_utils/model.py", "line": 829},
                {"name": "train", "filename": "/root/slime/slime/backends/megatron_utils/model.py", "line": 961}]
    elif kind == "_reduce_scatter_base":
        out += [{"name": "start_grad_sync", "filename": "/root/Megatron-LM/megatron/core/distributed/param_and_grad_buffer.py", "line": 412},
                {"name": "finish_grad_sync", "filename": "/root/Megatron-LM/megatron/core/distributed/distributed_data_parallel.py", "line": 476}]
    elif kind == "_allgather_base":
        out += [{"name": "start_param_sync", "filename": "/root/Megatron-LM/megatron/core/distributed/param_and_grad_buffer.py", "line": 296},
                {"name": "step", "filename": "/root/Megatron-LM/megatron/core/optimizer/distrib_optimizer.py", "line": 2130}]
    else:
        out += [{"name": "broadcast_params", "filename": "/root/slime/slime/backends/megatron_utils/update_weight/common.py", "line": 88}]
    return out


PATTERN = ["_reduce_scatter_base", "_reduce_scatter_base", "all_reduce", "_allgather_base", "_allgather_base",
           "all_reduce", "broadcast", "all_reduce"]
SIZES = {"_reduce_scatter_base": ([[61571072]], [[15392768]]), "_allgather_base": ([[15392768]], [[61571072]]),
         "all_reduce": ([[1]], [[1]]), "broadcast": ([[4096]], [[4096]])}


def dump(rank: int) -> dict[str, object]:
    first = LAST - 23
    last = LAST - 1 if rank == 1 else LAST
    entries = []
    for n, seq in enumerate(range(first, last + 1)):
        kind = "all_reduce" if seq == LAST else PATTERN[seq % len(PATTERN)]
        ins, outs = SIZES[kind]
        created = T0 + (seq - first) * 412_000_000 + rank * 37_000
        hung = seq == LAST
        dtype = "Float" if kind == "all_reduce" else "BFloat16"
        entries.append({
            "record_id": 9000 + n, "pg_id": 0, "process_group": ("0", "default_pg"), "collective_seq_id": seq,
            "p2p_seq_id": 0, "op_id": seq, "profiling_name": f"nccl:{kind}", "time_created_ns": created,
            "input_sizes": ins, "input_dtypes": [dtype], "output_sizes": outs, "output_dtypes": [dtype],
            "state": "started" if hung else "completed",
            "time_discovered_started_ns": created + 2_100_000,
            "time_discovered_completed_ns": None if hung else created + 5_400_000,
            "retired": not hung, "timeout_ms": 600000, "is_p2p": False, "frames": frames(kind),
        })
    return {
        "version": "2.10",
        "comm_lib_version": "2.27.3",
        "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2, 3]"}},
        "pg_status": {"0": {"last_enqueued_collective": last, "last_started_collective": last,
                            "last_completed_collective": LAST - 1}},
        "entries": entries,
    }


def build() -> None:
    d = example_dir(NAME)
    rng = random.Random(191)
    flags = base_flags()
    flags.update(actor_num_gpus_per_node=4, tensor_model_parallel_size=1, sequence_parallel=False,
                 rollout_num_gpus_per_engine=1)
    args = base_args()
    args.update(actor_num_gpus_per_node=4, world_size=4, tensor_model_parallel_size=1, data_parallel_size=4,
                sequence_parallel=False, rollout_num_gpus=4, rollout_num_gpus_per_engine=1)
    env = {"env_vars": {"PYTHONPATH": "/root/Megatron-LM/", "CUDA_DEVICE_MAX_CONNECTIONS": "1",
                        "TORCH_NCCL_TRACE_BUFFER_SIZE": "2000", "TORCH_NCCL_DUMP_ON_TIMEOUT": "1"}}
    write_text(d / "cmdline.txt", multiline_command(flags, runtime_env=env))
    for r in range(WORLD):
        path = d / "flight_recorder" / f"nccl_trace_rank_{r}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(pickle.dumps(dump(r), protocol=2))

    log = Log("2026-08-17 11:20:40", seed=191)
    slime_startup(log, args, job="raysubmit_Fb7Sg2Um5Kc8Ra3W", n_gpus=4, engines=4, tp=1)
    for rid in range(10):
        resp = 1270 + 20 * rid + rng.uniform(-60, 60)
        perf = rollout_perf(rng, resp_mean=resp, resp_max=8192, trunc=0.01171875, rollout_time=resp * 0.16, gpus=4,
                            zero_std={"0": 14 + rng.randint(-2, 2), "1": 3})
        ref = -0.3066 + rng.uniform(-0.005, 0.005)
        rollout = rollout_dict(rng, resp=resp, raw_reward=0.3 + 0.008 * rid + rng.uniform(-0.03, 0.03), trunc=0.01171875,
                               log_probs=ref if rid == 0 else ref + 0.0009 * rid, ref_log_probs=ref,
                               entropy=0.371 - 0.002 * rid)
        step = step_dict(rng, rid, grad_norm=0.12 + 0.05 * rng.random(), entropy=rollout["rollout/entropy"], lr=1e-6,
                         gbs=256, kl_loss=0.0 if rid == 0 else 0.0001 * rid)
        tperf = train_perf(rng, wait=perf["perf/rollout_time"] + 3, preprocess=1.2, ref=33.0, logp=34.0, train=101.0,
                           tokens=256 * (resp + 142), tflops_scale=2.0)
        slime_rollout(log, rid, finish=math_sample(rid, correct=rng.random() < 0.4), perf=perf, rollout=rollout,
                      steps=[(rid, step)], tperf=tperf)
    # The next rollout: training starts and never ends.
    p, a, label, reward = math_sample(6)
    log.tick(221)
    finish_rollout(log, p, a, label, reward)
    perf = rollout_perf(rng, resp_mean=1561.0, resp_max=8192, trunc=0.015625, rollout_time=219.4, gpus=4, zero_std={"0": 13, "1": 4})
    log.metrics("perf", 10, perf, "rollout_metrics.py:268", ROLLOUT)
    log.timer("train_wait", "end", TRAIN, 222.6)
    log.timer("train", "start", TRAIN)
    log.timer("data_preprocess", "start", TRAIN)
    log.timer("data_preprocess", "end", TRAIN, 1.2)
    for name, secs in (("ref_log_probs", 38.0), ("log_probs", 38.9)):
        log.timer(name, "start", TRAIN)
        log.tick(secs)
        log.timer(name, "end", TRAIN, secs)
    log.metrics("rollout", 10, rollout_dict(rng, resp=1561.0, raw_reward=0.41, trunc=0.015625, log_probs=-0.2941,
                                            ref_log_probs=-0.3072, entropy=0.343), "train_metric_utils.py:135", TRAIN)
    log.timer("actor_train", "start", TRAIN)
    log.tick(600 + 47)
    ts = "E0817 12:31:05"
    for r in (0, 2, 3):
        actor = f"MegatronTrainRayActor pid={2231 + r}"
        log.raw(f"[rank{r}]:[{ts}.34{r}716529 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective operation "
                f"timeout: WorkNCCL(SeqNum={LAST}, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for "
                f"600042 milliseconds before timing out.", actor)
        log.raw(f"[rank{r}]:[{ts}.34{r}104982 ProcessGroupNCCL.cpp:2271] [PG ID 0 PG GUID 0(default_pg) Rank {r}]  failure "
                f"detected by watchdog at work sequence id: {LAST} PG status: last enqueued work: {LAST}, last completed "
                f"work: {LAST - 1}", actor)
        log.raw(f"[rank{r}]:[{ts}.34{r}121544 ProcessGroupNCCL.cpp:1595] [PG ID 0 PG GUID 0(default_pg) Rank {r}] "
                "ProcessGroupNCCL preparing to dump debug info. Include stack trace: 1", actor)
    log.tick(8)
    for r in (0, 2, 3):
        actor = f"MegatronTrainRayActor pid={2231 + r}"
        log.raw(f"[rank{r}]:[F0817 12:31:13.51{r}002117 ProcessGroupNCCL.cpp:1406] [PG ID 0 PG GUID 0(default_pg) Rank {r}] "
                f"[PG ID 0 PG GUID 0(default_pg) Rank {r}] Terminating the process after attempting to dump debug info, "
                "due to collective timeout or exception.", actor)
    log.raw("*** SIGABRT received at time=1786962673 on cpu 17 ***", "MegatronTrainRayActor pid=2231")
    log.raw("PC: @     0x7f9b2c49eb2c  (unknown)  pthread_kill", "MegatronTrainRayActor pid=2231")
    log.tick(2)
    log.raw("Traceback (most recent call last):")
    log.raw('  File "/root/slime/train.py", line 104, in <module>')
    log.raw("    train(args)")
    log.raw('  File "/root/slime/train.py", line 72, in train')
    log.raw("    ray.get(actor_model.async_train(rollout_id, rollout_data_ref))")
    log.raw('  File "/usr/local/lib/python3.12/dist-packages/ray/_private/worker.py", line 1026, in get_objects')
    log.raw("    raise value.as_instanceof_cause()")
    log.raw("ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.")
    log.raw("\tclass_name: MegatronTrainRayActor")
    log.raw("\tactor_id: 3b1d7e0c9a8f6e5d4c3b2a1901000000")
    log.raw("\tpid: 2231")
    log.raw("\tnamespace: 5f2e1c3a-7b9d-4e0f-8a6c-2d4b1e9f0a37")
    log.raw("\tip: 10.0.0.11")
    log.raw("The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit detail: "
            "Worker unexpectedly exits with a connection error code 2. End of file. There are some potential root causes. "
            "(1) The process is killed by SIGKILL by OOM killer due to high memory usage. (2) ray stop --force is called. "
            "(3) The worker is crashed unexpectedly due to SIGSEGV or other unexpected errors.")
    log.raw("---------------------------------------")
    log.raw("Job 'raysubmit_Fb7Sg2Um5Kc8Ra3W' failed")
    log.raw("---------------------------------------")
    write_text(d / "job.log", log.text())
    expected(d, "dist.collective_mismatch",
             f"flight-recorder dumps: ranks 0, 2, 3 are in all_reduce #{LAST} (state started) while rank 1 completed "
             f"#{LAST - 1} and never issued #{LAST}; watchdog timeouts on ranks 0, 2, 3")


if __name__ == "__main__":
    build()
