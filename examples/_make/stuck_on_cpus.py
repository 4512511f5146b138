"""stuck-on-cpus: a colocated slime job asking for 1 node x 8 GPUs on a one-node Ray cluster
that has the 8 GPUs, but was started with `--num-cpus 4` (the Slurm allocation's CPU count,
as in allenai/open-instruct#1431's launch script). slime's placement group has one bundle
{"GPU": 1, "CPU": 1} per GPU (THUDM/slime slime/ray/placement_group.py), so it needs 8 CPUs and
waits forever with every GPU free. The launch script ran `ray status` after starting Ray, so
the log holds the cluster's resources (the `Usage:` block, ray-project/ray's `ray status`).
"""

from __future__ import annotations

from common import Log, base_flags, example_dir, expected, ray_submit_banner, ray_submit_command, write_text

NAME = "stuck-on-cpus"


def ray_status(log: Log, stamp: str) -> None:
    """`ray status` as Ray 2.4x prints it (ray-project/ray#47792 shows the same layout)."""
    for line in (
        f"======== Autoscaler status: {stamp}.118203 ========",
        "Node status",
        "---------------------------------------------------------------",
        "Active:",
        " 1 node_5f7c2a9e0b1d4c3f8a6e2d1b0c9f8e7d6a5b4c3d2e1f0a9b8c7d6e5f",
        "Pending:",
        " (no pending nodes)",
        "Recent failures:",
        " (no failures)",
        "",
        "Resources",
        "---------------------------------------------------------------",
        "Usage:",
        " 0.0/4.0 CPU",
        " 0.0/8.0 GPU",
        " 0B/1.40TiB memory",
        " 0B/186.26GiB object_store_memory",
        "",
        "Demands:",
        " (no resource demands)",
    ):
        log.raw(line)


def build() -> None:
    d = example_dir(NAME)
    flags = base_flags()
    flags.update(actor_num_nodes=1, actor_num_gpus_per_node=8, colocate=True, rollout_num_gpus=8,
                 tensor_model_parallel_size=2, rollout_num_gpus_per_engine=2)
    log = Log("2026-08-06 09:13:48", seed=63)
    # The launch script runs under `set -x`: each command is echoed before its output.
    log.raw("+ ray start --head --node-ip-address 10.0.0.11 --num-gpus 8 --num-cpus 4 --disable-usage-stats")
    log.raw(f"{log.stamp()},331\tINFO usage_lib.py:441 -- Usage stats collection is disabled.")
    log.raw(f"{log.stamp()},331\tINFO scripts.py:767 -- Local node IP: 10.0.0.11")
    log.tick(4)
    log.raw(f"{log.stamp()},902\tSUCC scripts.py:804 -- Ray runtime started.")
    log.raw("+ sleep 10")
    log.tick(10)
    log.raw("+ ray status")
    ray_status(log, log.stamp())
    log.raw("+ " + ray_submit_command(flags))
    ray_submit_banner(log, "raysubmit_C9pQ2wL7xNv4Rk8T")
    log.tick(6)
    log.raw(f"{log.stamp()},517\tINFO job_manager.py:568 -- Runtime env is ready.")
    log.tick(4)
    log.log("Creating placement group with 8 GPUs...", "placement_group.py:125")
    for k in range(1, 31):
        log.tick(30)
        log.log(f"Waiting for placement group of 8 GPUs (elapsed {30 * k}s): 8 GPUs registered with Ray, 8 available.",
                "placement_group.py:64")
    log.tick(9)
    log.raw("---------------------------------------")
    log.raw("Job 'raysubmit_C9pQ2wL7xNv4Rk8T' was stopped")
    log.raw("---------------------------------------")
    write_text(d / "job.log", log.text())
    expected(d, "sched.placement_resources",
             "the 8 GPUs fit (8 registered, 8 free), but slime's 8 bundles of {GPU: 1, CPU: 1} need 8 CPUs and "
             "`ray status` shows 4 (ray start --num-cpus 4)")


if __name__ == "__main__":
    build()
