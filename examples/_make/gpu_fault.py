"""gpu-ecc-fault: a two-node slime job; after two rollouts one GPU of 10.0.0.12 reports an
uncorrectable ECC error (the CUDA runtime's cudaErrorECCUncorrectable string; NVIDIA Xid 48),
the rank dies, and the ranks on the other node time out waiting for it. Only one node shows the
fault: hardware, not software.
"""

from __future__ import annotations

import random

from common import Log, base_args, base_flags, example_dir, expected, multiline_command, write_text
from field_common import driver_ray_error, healthy_rollouts, nccl_cascade

NAME = "gpu-ecc-fault"
JOB = "raysubmit_Gx5Ec1Cq7Vb3Hn2M"
RANK13 = "MegatronTrainRayActor pid=4413, ip=10.0.0.12"


def build() -> None:
    d = example_dir(NAME)
    rng = random.Random(317)
    flags = base_flags()
    flags.update(actor_num_nodes=2)
    args = base_args()
    args.update(actor_num_nodes=2, world_size=16, data_parallel_size=8)
    write_text(d / "cmdline.txt", multiline_command(flags))
    log = Log("2026-08-13 22:10:00", seed=317)
    healthy_rollouts(log, args, rng, 2, job=JOB, ips=("10.0.0.11", "10.0.0.12"), n_gpus=16)
    log.timer("train", "start", "MegatronTrainRayActor pid=2231")
    log.tick(12)
    frames = '''  File "/root/slime/slime/backends/megatron_utils/actor.py", line 441, in train
    self.train_actor(rollout_id, rollout_data)
  File "/root/slime/slime/backends/megatron_utils/model.py", line 680, in train_one_step
    losses_reduced = forward_backward_func(
  File "/root/Megatron-LM/megatron/core/pipeline_parallel/schedules.py", line 594, in forward_backward_no_pipelining
    output_tensor, num_tokens = forward_step(
  File "/usr/local/lib/python3.12/dist-packages/transformer_engine/pytorch/module/linear.py", line 321, in forward
    out = general_gemm('''
    error = ("RuntimeError: CUDA error: uncorrectable ECC error encountered\n"
             "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.\n"
             "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
             "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.")
    log.raw("Traceback (most recent call last):", RANK13)
    for line in frames.splitlines():
        log.raw(line, RANK13)
    for line in error.splitlines():
        log.raw(line, RANK13)
    log.tick(600)
    nccl_cascade(log, range(0, 8), pid0=2231, ip="10.0.0.11", seq=1933)
    driver_ray_error(log, inner="RuntimeError", actor="MegatronTrainRayActor", method="train", pid=4413, ip="10.0.0.12",
                     job=JOB, remote_frames=frames, error=error.splitlines()[0])
    write_text(d / "job.log", log.text())
    expected(d, "infra.gpu_fault",
             "rank 13 on 10.0.0.12 only: `CUDA error: uncorrectable ECC error encountered`; the ranks on 10.0.0.11 time "
             "out after it (a GPU fault on one node)")


if __name__ == "__main__":
    build()
