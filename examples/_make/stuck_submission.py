"""stuck-at-submission: a disaggregated job (no --colocate) asking for 2 nodes x 8 training
GPUs plus 8 rollout GPUs = 24 on a Ray cluster with 16 GPUs. The placement group can never
be scheduled; the driver logs its wait every 30 s until someone stops the job.
"""

from __future__ import annotations

from common import Log, base_flags, example_dir, expected, ray_submit_banner, ray_submit_command, write_text

NAME = "stuck-at-submission"


def build() -> None:
    d = example_dir(NAME)
    flags = base_flags()
    flags.update(actor_num_nodes=2, actor_num_gpus_per_node=8, colocate=False, rollout_num_gpus=8,
                 tensor_model_parallel_size=4, rollout_num_gpus_per_engine=4)
    log = Log("2026-08-05 16:02:11", seed=51)
    # The launch script runs under `set -x`, so the command is echoed first.
    log.raw("+ " + ray_submit_command(flags))
    ray_submit_banner(log, "raysubmit_R4kWz7HnB2yQe9Lx")
    log.tick(7)
    log.raw(f"{log.stamp()},902\tINFO job_manager.py:568 -- Runtime env is ready.")
    log.tick(4)
    log.log("Creating placement group with 24 GPUs...", "placement_group.py:125")
    for k in range(1, 41):
        log.tick(30)
        log.log(f"Waiting for placement group of 24 GPUs (elapsed {30 * k}s): 16 GPUs registered with Ray, 16 available.",
                "placement_group.py:64")
    log.tick(11)
    log.raw("---------------------------------------")
    log.raw("Job 'raysubmit_R4kWz7HnB2yQe9Lx' was stopped")
    log.raw("---------------------------------------")
    write_text(d / "job.log", log.text())
    expected(d, "sched.insufficient_gpus",
             "disaggregated job needs 2*8 + 8 = 24 GPUs; the log only waits for a placement group of 24 GPUs with 16 registered")


if __name__ == "__main__":
    build()
