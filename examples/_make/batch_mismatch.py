"""batch-size-mismatch: the launch script sets --num-steps-per-rollout 2 and keeps the recipe's
--global-batch-size 256; slime's argument check refuses it before Megatron starts (so the log has
no arguments block: the command line echoed by the launch script is the only record of the args).
"""

from __future__ import annotations

from common import Log, base_flags, example_dir, expected, ray_submit_banner, ray_submit_command, write_text

NAME = "batch-size-mismatch"


def build() -> None:
    d = example_dir(NAME)
    flags = base_flags()
    flags["num_steps_per_rollout"] = 2
    log = Log("2026-08-11 10:41:27", seed=101)
    log.raw("+ " + ray_submit_command(flags))
    ray_submit_banner(log, "raysubmit_Pn6Ye1Gd4Ks9Wb3T")
    log.tick(8)
    log.raw(f"{log.stamp()},514\tINFO job_manager.py:568 -- Runtime env is ready.")
    log.tick(5)
    log.raw("""Traceback (most recent call last):
  File "/root/slime/train.py", line 103, in <module>
    args = parse_args()
           ^^^^^^^^^^^^
  File "/root/slime/slime/utils/arguments.py", line 1712, in parse_args
    slime_validate_args(args)
  File "/root/slime/slime/utils/arguments.py", line 1974, in slime_validate_args
    assert args.global_batch_size == global_batch_size, (
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
AssertionError: global_batch_size 256 is not equal to rollout_batch_size 32 * n_samples_per_prompt 8 // num_steps_per_rollout 2""")
    log.tick(1)
    log.raw("")
    log.raw("---------------------------------------")
    log.raw("Job 'raysubmit_Pn6Ye1Gd4Ks9Wb3T' failed")
    log.raw("---------------------------------------")
    log.raw("")
    log.raw("Status message: Job entrypoint command failed with exit code 1, last available logs (truncated to 20,000 chars):")
    log.raw("AssertionError: global_batch_size 256 is not equal to rollout_batch_size 32 * n_samples_per_prompt 8 // num_steps_per_rollout 2")
    write_text(d / "job.log", log.text())
    expected(d, "config.batch_size_mismatch",
             "slime's check at start: global_batch_size 256 != rollout_batch_size 32 * n_samples_per_prompt 8 // "
             "num_steps_per_rollout 2 = 128")


if __name__ == "__main__":
    build()
