"""Shared pieces of the field-failure examples: a slime job that trains a few healthy rollouts
before something outside the program (or between packages) stops it, and a driver-side
traceback as Ray prints a remote actor's error (ray-project/ray python/ray/exceptions.py,
RayTaskError.__str__: the `ray::Actor.method() (pid=…, ip=…)` header, then the remote frames).
"""

from __future__ import annotations

import random
from typing import Any

from common import (Log, math_sample, rollout_dict, rollout_perf, slime_rollout, slime_startup, step_dict, train_perf)


def healthy_rollouts(log: Log, args: dict[str, Any], rng: random.Random, n: int, *, job: str,
                     ips: tuple[str, ...] = ("10.0.0.11",), n_gpus: int = 8, save_at: int | None = None,
                     save_dir: str = "/mnt/ckpt/qwen2.5-7b-grpo") -> None:
    """Startup and `n` ordinary rollouts with one train step each."""
    slime_startup(log, args, job=job, ips=ips, n_gpus=n_gpus)
    for rid in range(n):
        ref = -0.41 + rng.uniform(-0.01, 0.01)
        resp = 1100 + 15 * rid + rng.uniform(-40, 40)
        perf = rollout_perf(rng, resp_mean=resp, resp_max=8192, trunc=0.0078125, rollout_time=resp * 0.08,
                            zero_std={"0": 14 + rng.randint(-2, 2), "1": 3})
        rollout = rollout_dict(rng, resp=resp, raw_reward=0.42 + 0.01 * rid, trunc=perf["rollout/truncated_ratio"],
                               log_probs=ref, ref_log_probs=ref, entropy=0.61 + rng.uniform(-0.02, 0.02))
        step = step_dict(rng, rid, grad_norm=0.38 * rng.uniform(0.85, 1.15), entropy=rollout["rollout/entropy"],
                         lr=1e-6, gbs=256, kl_loss=0.0 if rid == 0 else 0.0004 * rid)
        tperf = train_perf(rng, wait=perf["perf/rollout_time"] + 3, preprocess=1.1, ref=15.5, logp=16.2, train=49.0,
                           tokens=256 * (resp + 140))
        slime_rollout(log, rid, finish=math_sample(rid), perf=perf, rollout=rollout, steps=[(rid, step)], tperf=tperf,
                      save=save_dir if save_at is not None and rid == save_at else None)


def driver_ray_error(log: Log, *, inner: str, actor: str, method: str, pid: int, ip: str, remote_frames: str,
                     error: str, job: str, call: str = "ray.get(actor_model.async_train(rollout_id, rollout_data_ref))") -> None:
    """slime's driver (train.py) dying on a remote actor's error, then Ray's job-failed banner."""
    log.raw("Traceback (most recent call last):")
    log.raw('  File "/root/slime/train.py", line 104, in <module>')
    log.raw("    train(args)")
    log.raw('  File "/root/slime/train.py", line 72, in train')
    log.raw(f"    {call}")
    log.raw('  File "/usr/local/lib/python3.12/dist-packages/ray/_private/auto_init_hook.py", line 22, in auto_init_wrapper')
    log.raw("    return fn(*args, **kwargs)")
    log.raw('  File "/usr/local/lib/python3.12/dist-packages/ray/_private/worker.py", line 2961, in get')
    log.raw("    values, debugger_breakpoint = worker.get_objects(object_refs, timeout=timeout)")
    log.raw('  File "/usr/local/lib/python3.12/dist-packages/ray/_private/worker.py", line 1026, in get_objects')
    log.raw("    raise value.as_instanceof_cause()")
    log.raw(f"ray.exceptions.RayTaskError({inner}): ray::{actor}.{method}() (pid={pid}, ip={ip}, "
            f"actor_id=5a1f0c9e3d7b4e2a8c6f1b0d02000000, repr=<slime.backends.megatron_utils.actor.{actor} object at 0x7f3c2b1a9e50>)")
    log.raw(remote_frames.rstrip("\n"))
    log.raw(error)
    log.raw("---------------------------------------")
    log.raw(f"Job '{job}' failed")
    log.raw("---------------------------------------")


def nccl_cascade(log: Log, ranks: range, *, pid0: int, ip: str, seq: int, op: str = "ALLREDUCE") -> None:
    """The watchdog timeouts the other ranks print once a peer is gone (torch ProcessGroupNCCL.cpp)."""
    for r in ranks:
        log.raw(f"[rank{r}]:[E810 10:42:03.551000 {pid0 + r} ProcessGroupNCCL.cpp:1616] [PG ID 0 PG GUID 0(default_pg) Rank {r}] "
                f"Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn=1, NumelOut=1, "
                f"Timeout(ms)=600000) ran for 600094 milliseconds before timing out.",
                f"MegatronTrainRayActor pid={pid0 + r}, ip={ip}")
