"""`python -m triage.testbed.train <slime flags>`: the miniature slime job.

Mirrors slime's `train.py`: create the placement group (the testbed's scheduler has
`--testbed-cluster-gpus` GPUs), the rollout manager with its engine, the training
actors (Megatron's arguments block, checkpoint loading), push the actor's weights to
the engine, then for each rollout: generate, train, save, sync weights. With
`--tensor-model-parallel-size 2` or `--pipeline-model-parallel-size 2` the training
actors are two real processes joined by a gloo process group on 127.0.0.1; rank 0
also hosts the rollout manager and the engine.

`main(argv)` returns the job's exit code; everything the job leaves is on disk.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from triage.testbed import arguments
from triage.testbed.slime_log import SlimeLog

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_STOPPED = 124  # stopped from outside (a job that never got its GPUs)


def _quiet_transformers() -> None:
    """transformers stays offline and quiet; it is imported only where it is needed (rank 0)."""
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def gpus_needed(args: argparse.Namespace) -> int:
    """slime's placement group size: actor GPUs, plus rollout GPUs when not colocated."""
    actor = 0 if args.debug_rollout_only else args.actor_num_nodes * args.actor_num_gpus_per_node
    rollout = 0 if (args.colocate or args.debug_train_only) else (args.rollout_num_gpus or 0)
    if args.debug_rollout_only:
        rollout = args.rollout_num_gpus or 1
    return actor + rollout


def wait_for_placement_group(args: argparse.Namespace, log: SlimeLog) -> bool:
    """True when the cluster can place the job; otherwise log slime's wait lines until the job is stopped."""
    need = gpus_needed(args)
    log.info(f"Creating placement group with {need} GPUs...", "placement_create")
    total = args.testbed_cluster_gpus
    if need <= total:
        return True
    start = time.time()
    elapsed = 0
    while elapsed + 30 <= args.testbed_placement_timeout:
        elapsed += 30
        log.info(f"Waiting for placement group of {need} GPUs (elapsed {elapsed}s): "
                 f"{float(total):g} GPUs registered with Ray, {float(total):g} available.",
                 "placement_wait", at=start + elapsed)
    return False


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = arguments.parse(argv)
    if args.testbed_trainer == "hf":
        from triage.testbed.hf_trainer import run as run_hf

        return run_hf(argv)
    if args.testbed_rank is not None:
        return run_rank(argv)
    log = SlimeLog(args.testbed_log, pids={"": os.getpid()})
    notes: list[str] = []
    try:
        arguments.validate(args, notes)
    except (arguments.ArgumentError, FileNotFoundError, AssertionError) as exc:
        log.traceback("Traceback (most recent call last):\n  File \"train.py\", line 103, in <module>\n"
                      "    args = parse_args()\n" + f"{type(exc).__name__}: {exc}")
        return EXIT_FAILED
    for note in notes:
        log.info(note, "args")
    if not wait_for_placement_group(args, log):
        log.close()
        return EXIT_STOPPED
    world = 1 if args.debug_rollout_only else args.tensor_model_parallel_size * args.pipeline_model_parallel_size
    if world == 1:
        log.close()
        return run_rank(argv + ["--testbed-rank", "0"])
    port = free_port()
    env = dict(os.environ)
    env.setdefault("TORCH_FR_BUFFER_SIZE", "2000")
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH", "")])
    procs = [
        subprocess.Popen([sys.executable, "-m", "triage.testbed.train", *argv, "--testbed-rank", str(r),
                          "--testbed-master-port", str(port)], env=env)
        for r in range(world)
    ]
    codes = [p.wait() for p in procs]
    log.close()
    return max(codes)


def run_rank(argv: list[str]) -> int:
    """One training process (and, on rank 0, the rollout side)."""
    _quiet_transformers()
    from triage.testbed.job import Job

    args = arguments.parse(argv)
    job = Job(args, argv)
    try:
        return job.run()
    finally:
        job.close()


if __name__ == "__main__":
    sys.exit(main())
