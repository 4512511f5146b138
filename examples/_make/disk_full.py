"""disk-full-checkpoint: slime saves a torch_dist checkpoint every 2 rollouts to /mnt/ckpt; the
third save fills the volume and the DCP filesystem writer fails with `OSError: [Errno 28] No
space left on device` (torch/distributed/checkpoint/filesystem.py).
"""

from __future__ import annotations

import random

from common import TRAIN, Log, base_args, base_flags, example_dir, expected, multiline_command, write_text
from field_common import driver_ray_error, healthy_rollouts

NAME = "disk-full-checkpoint"
JOB = "raysubmit_Dk2Fs6Lq9Wn4Pv1T"
SAVE = "/mnt/ckpt/qwen2.5-7b-grpo"


def build() -> None:
    d = example_dir(NAME)
    rng = random.Random(331)
    flags = base_flags()
    flags.update(save=SAVE, save_interval=2)
    args = base_args()
    args.update(save=SAVE, save_interval=2)
    write_text(d / "cmdline.txt", multiline_command(flags))
    log = Log("2026-08-14 03:00:00", seed=331)
    healthy_rollouts(log, args, rng, 5, job=JOB, save_at=3, save_dir=SAVE)
    log.timer("train", "start", TRAIN)
    log.tick(80)
    log.raw(f"saving checkpoint at iteration       5 to {SAVE} in torch_dist format", TRAIN)
    log.tick(52)
    frames = f'''  File "/root/slime/slime/backends/megatron_utils/actor.py", line 598, in save_model
    save_checkpoint(iteration, self.model, self.optimizer, self.opt_param_scheduler)
  File "/root/Megatron-LM/megatron/training/checkpointing.py", line 498, in save_checkpoint
    dist_checkpointing.save(state_dict, checkpoint_name, save_strategy, async_sharded_save=args.async_save)
  File "/usr/local/lib/python3.12/dist-packages/torch/distributed/checkpoint/filesystem.py", line 321, in _write_files_from_queue
    _write_item(transforms, stream, data, write_item, storage_key)
  File "/usr/local/lib/python3.12/dist-packages/torch/distributed/checkpoint/filesystem.py", line 286, in _write_item
    stream.write(data.getbuffer())'''
    error = f"OSError: [Errno 28] No space left on device: '{SAVE}/iter_0000005/__3_0.distcp'"
    driver_ray_error(log, inner="OSError", actor="MegatronTrainRayActor", method="save_model", pid=2231, ip="10.0.0.11",
                     job=JOB, remote_frames=frames, error=error,
                     call="ray.get(actor_model.async_save_model(rollout_id))")
    write_text(d / "job.log", log.text())
    expected(d, "infra.disk_full",
             f"saving iteration 5 to {SAVE}: `OSError: [Errno 28] No space left on device` in the checkpoint writer")


if __name__ == "__main__":
    build()
