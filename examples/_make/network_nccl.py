"""nccl-network-connect-failed: a two-node slime job (10.0.0.11, 10.0.0.12). After three rollouts the
second node's network link to the first drops: NCCL on rank 9 cannot connect its socket
(`socketStartConnect: Connect to 10.0.0.11<43211> failed`, NVIDIA/nccl src/misc/socket.cc, as in
THUDM/slime#1391), the collective aborts, and the other ranks' watchdogs time out after it.
"""

from __future__ import annotations

import random

from common import Log, base_args, base_flags, example_dir, expected, multiline_command, write_text
from field_common import driver_ray_error, healthy_rollouts, nccl_cascade

NAME = "nccl-network-connect-failed"
JOB = "raysubmit_Nk4Rt8Wc2Lp6Qs9D"
RANK9 = "MegatronTrainRayActor pid=4409, ip=10.0.0.12"


def build() -> None:
    d = example_dir(NAME)
    rng = random.Random(311)
    flags = base_flags()
    flags.update(actor_num_nodes=2)
    args = base_args()
    args.update(actor_num_nodes=2, world_size=16, data_parallel_size=8)
    write_text(d / "cmdline.txt", multiline_command(flags))
    log = Log("2026-08-12 07:30:00", seed=311)
    healthy_rollouts(log, args, rng, 3, job=JOB, ips=("10.0.0.11", "10.0.0.12"), n_gpus=16)
    log.timer("train", "start", "MegatronTrainRayActor pid=2231")
    log.tick(31)
    log.raw("gpu-node-2:4409:4877 [1] NCCL INFO Channel 02/0 : 9[1] -> 1[1] [send] via NET/Socket/0", RANK9)
    log.raw("gpu-node-2:4409:4877 [1] NCCL WARN socketStartConnect: Connect to 10.0.0.11<43211> failed : "
            "Software caused connection abort", RANK9)
    log.raw("gpu-node-2:4409:4877 [1] NCCL INFO misc/socket.cc:567 -> 2", RANK9)
    log.raw("gpu-node-2:4409:4877 [1] NCCL INFO transport/net_socket.cc:339 -> 2", RANK9)
    log.raw("gpu-node-2:4409:4877 [1] NCCL INFO transport/net.cc:683 -> 2", RANK9)
    log.tick(600)
    nccl_cascade(log, range(1, 8), pid0=2231, ip="10.0.0.11", seq=2417)
    driver_ray_error(
        log, inner="DistBackendError", actor="MegatronTrainRayActor", method="train", pid=4409, ip="10.0.0.12", job=JOB,
        remote_frames='''  File "/root/slime/slime/backends/megatron_utils/actor.py", line 441, in train
    self.train_actor(rollout_id, rollout_data)
  File "/root/slime/slime/backends/megatron_utils/model.py", line 680, in train_one_step
    losses_reduced = forward_backward_func(
  File "/usr/local/lib/python3.12/dist-packages/torch/distributed/c10d_logger.py", line 81, in wrapper
    return func(*args, **kwargs)
  File "/usr/local/lib/python3.12/dist-packages/torch/distributed/distributed_c10d.py", line 2806, in all_reduce
    work = group.allreduce([tensor], opts)''',
        error="torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:77, "
              "remote process exited or there was a network error, NCCL version 2.27.3",
    )
    write_text(d / "job.log", log.text())
    expected(d, "infra.network",
             "rank 9 on 10.0.0.12: NCCL `socketStartConnect: Connect to 10.0.0.11<43211> failed` before the other ranks' "
             "watchdog timeouts (the network between the nodes, not the program)")


if __name__ == "__main__":
    build()
