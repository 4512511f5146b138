"""slurm-time-limit: a TRL GRPO job launched with accelerate under Slurm (`#SBATCH --time=10:00:00`)
trains for hours; at the time limit slurmstepd cancels the step (`*** STEP 88123.0 ON gpu-node-07
CANCELLED AT … DUE TO TIME LIMIT ***`, SchedMD/slurm src/slurmd/slurmstepd/req.c), torchrun's agent
gets SIGTERM (torch/distributed/elastic/agent/server/api.py), and the workers are SIGKILLed after the
grace period. No memory pressure anywhere: the scheduler ended it, not the program.
"""

from __future__ import annotations

import random

from common import Log, example_dir, expected, write_text

NAME = "slurm-time-limit"

CMD = """srun --jobid 88123 accelerate launch --config_file recipes/accelerate_configs/zero2.yaml --num_processes 8 \\
    grpo_math.py --model_name_or_path Qwen/Qwen2.5-7B-Instruct --dataset_name openr1/math-220k \\
    --output_dir outputs/qwen7b-grpo-math --learning_rate 1e-6 --num_generations 8 \\
    --max_completion_length 2048 --logging_steps 1 --save_steps 50 --bf16
"""


def build() -> None:
    d = example_dir(NAME)
    rng = random.Random(341)
    write_text(d / "cmdline.txt", CMD)
    log = Log("2026-08-10 08:00:02", seed=341)
    log.raw("W0810 08:00:02.907000 4123 torch/distributed/run.py:792] *****************************************")
    log.raw(f"{log.stamp()} - INFO - __main__ - *** Train ***")
    for step in range(1, 41):
        log.tick(880)
        reward = 0.31 + 0.004 * step + rng.uniform(-0.02, 0.02)
        row = {"loss": round(rng.uniform(-0.01, 0.02), 4), "grad_norm": round(0.31 * rng.uniform(0.8, 1.2), 4),
               "learning_rate": 1e-06, "num_tokens": 1310720.0 * step, "completions/mean_length": round(812 + 3 * step + rng.uniform(-20, 20), 2),
               "completions/clipped_ratio": 0.0078, "rewards/accuracy_reward/mean": round(reward, 4),
               "reward": round(reward, 4), "reward_std": round(0.41 + rng.uniform(-0.03, 0.03), 4),
               "frac_reward_zero_std": round(0.18 + rng.uniform(-0.05, 0.05), 4), "kl": round(0.0004 * step, 6),
               "entropy": round(0.58 + rng.uniform(-0.02, 0.02), 4), "clip_ratio/region_mean": 0.0, "epoch": round(step / 1250, 4)}
        log.raw(repr(row))
        log.raw(f"  {step * 100 // 1250}%|▎         | {step}/1250 [{(step * 880) // 3600:02d}:{(step * 880) % 3600 // 60:02d}:00<{(1250 - step) * 880 // 3600}:00:00, 880.12s/it]")
    log.tick(310)
    log.raw("slurmstepd: error: *** STEP 88123.0 ON gpu-node-07 CANCELLED AT 2026-08-10T18:00:14 DUE TO TIME LIMIT ***")
    log.raw("W0810 18:00:14.118000 4123 torch/distributed/elastic/agent/server/api.py:704] Received Signals.SIGTERM death signal, shutting down workers")
    for pid in range(4189, 4197):
        log.raw(f"W0810 18:00:14.119000 4123 torch/distributed/elastic/multiprocessing/api.py:900] Sending process {pid} closing signal SIGTERM")
    log.raw("slurmstepd: error: *** JOB 88123 ON gpu-node-07 CANCELLED AT 2026-08-10T18:00:44 DUE TO TIME LIMIT ***")
    write_text(d / "slurm-88123.out", log.text())
    expected(d, "sched.time_limit",
             "slurmstepd: `CANCELLED AT 2026-08-10T18:00:14 DUE TO TIME LIMIT` at step 40 of 1250, then torchrun's SIGTERM; "
             "no memory-pressure message anywhere")


if __name__ == "__main__":
    build()
