"""sample-exceeds-token-budget: slime with dynamic batching packs each micro-batch under
`--max-tokens-per-gpu 8192`, while prompts of up to 1024 tokens get responses of up to
`--rollout-max-response-len 16384`. At rollout 4 one sample (prompt + response) is 9317 tokens, longer
than any micro-batch may be, and packing fails in `_get_capped_partitions` with
`AssertionError: This should never happen.` (THUDM/slime slime/backends/megatron_utils/data.py, #1823;
reported in THUDM/slime#1839).
"""

from __future__ import annotations

import random

from common import TRAIN, Log, base_args, base_flags, example_dir, expected, multiline_command, write_text
from field_common import driver_ray_error, healthy_rollouts

NAME = "sample-exceeds-token-budget"
JOB = "raysubmit_Sb8Tk3Lm1Qx7Cw5R"


def build() -> None:
    d = example_dir(NAME)
    rng = random.Random(361)
    flags = base_flags()
    flags.update(use_dynamic_batch_size=True, max_tokens_per_gpu=8192, rollout_max_response_len=16384)
    args = base_args()
    args.update(use_dynamic_batch_size=True, max_tokens_per_gpu=8192, rollout_max_response_len=16384)
    write_text(d / "cmdline.txt", multiline_command(flags))
    log = Log("2026-08-17 14:00:00", seed=361)
    healthy_rollouts(log, args, rng, 4, job=JOB)
    log.timer("train", "start", TRAIN)
    log.timer("data_preprocess", "start", TRAIN)
    driver_ray_error(
        log, inner="AssertionError", actor="MegatronTrainRayActor", method="train", pid=2231, ip="10.0.0.11", job=JOB,
        remote_frames='''  File "/root/slime/slime/backends/megatron_utils/actor.py", line 430, in train
    data_iterator, num_microbatches = get_data_iterator(self.args, self.model, rollout_data)
  File "/root/slime/slime/backends/megatron_utils/data.py", line 376, in get_data_iterator
    partitions = _get_capped_partitions(samples_seqlen, num_microbatches[i], args.max_tokens_per_gpu * cp_size)
  File "/root/slime/slime/backends/megatron_utils/data.py", line 307, in _get_capped_partitions
    raise AssertionError("This should never happen.")''',
        error="AssertionError: This should never happen.",
    )
    write_text(d / "job.log", log.text())
    expected(d, "config.sample_exceeds_limits",
             "packing in _get_capped_partitions asserts `This should never happen.`: with --max-tokens-per-gpu 8192 and "
             "--rollout-max-response-len 16384 a single sample can exceed the per-GPU token budget")


if __name__ == "__main__":
    build()
