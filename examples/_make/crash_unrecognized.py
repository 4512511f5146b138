"""crash-unrecognized-64-ranks: a TRL GRPO job on 8 nodes x 8 GPUs (accelerate / torchrun, each
rank's stderr prefixed `[rankN]:`, torch/distributed/elastic). At step 37 the advantages are
sliced with a process slice one element past the end on every rank, and all 64 ranks print the same
IndexError, their lines interleaved. No catalog entry explains it; the triage locates it: the
exception, the trainer, the frame in trl's grpo_trainer.py, step 37, and one finding for 64 ranks.
"""

from __future__ import annotations

import random

from common import Log, example_dir, expected, write_text

NAME = "crash-unrecognized-64-ranks"
RANKS = 64

CMD = """accelerate launch --config_file recipes/accelerate_configs/zero3.yaml --num_machines 8 --num_processes 64 \\
    --machine_rank $SLURM_NODEID --main_process_ip $MASTER_ADDR --main_process_port 29500 \\
    grpo_math.py --model_name_or_path Qwen/Qwen2.5-32B-Instruct --dataset_name openr1/math-220k \\
    --output_dir outputs/qwen32b-grpo --learning_rate 5e-7 --num_generations 16 --logging_steps 1 --bf16
"""

FRAMES = [
    '  File "/workspace/grpo_math.py", line 141, in <module>',
    "    main(script_args, training_args, model_args)",
    '  File "/usr/local/lib/python3.11/dist-packages/transformers/trainer.py", line 2582, in _inner_training_loop',
    "    tr_loss_step = self.training_step(model, inputs, num_items_in_batch)",
    '  File "/usr/local/lib/python3.11/dist-packages/trl/trainer/grpo_trainer.py", line 1061, in _prepare_inputs',
    "    generation_batch = self._generate_and_score_completions(generation_batch)",
    '  File "/usr/local/lib/python3.11/dist-packages/trl/trainer/grpo_trainer.py", line 1468, in _generate_and_score_completions',
    "    advantages = advantages[process_slice]",
    "                 ~~~~~~~~~~^^^^^^^^^^^^^^^",
]


def build() -> None:
    d = example_dir(NAME)
    rng = random.Random(381)
    write_text(d / "cmdline.txt", CMD)
    log = Log("2026-08-19 06:00:00", seed=381)
    log.raw(f"{log.stamp()} - INFO - __main__ - *** Train ***")
    for step in range(1, 38):
        log.tick(61)
        reward = round(0.28 + 0.003 * step + rng.uniform(-0.02, 0.02), 4)
        log.raw(repr({"loss": round(rng.uniform(-0.01, 0.02), 4), "grad_norm": round(0.29 * rng.uniform(0.8, 1.2), 4),
                      "learning_rate": 5e-07, "reward": reward, "reward_std": round(0.39 + rng.uniform(-0.03, 0.03), 4),
                      "kl": round(0.0003 * step, 6), "epoch": round(step / 1250, 4)}))
        log.raw(f"  {step * 100 // 1250}%|▏         | {step}/1250 [{step * 61 // 60:02d}:{step * 61 % 60:02d}<21:00:00, 61.02s/it]")
    log.tick(7)
    lines = ["Traceback (most recent call last):", *FRAMES]
    blocks = {r: [*lines, f"IndexError: index {4096 * (r + 1)} is out of bounds for dimension 0 with size {4096 * (r + 1)}"]
              for r in range(RANKS)}
    for i in range(len(lines) + 1):  # torchrun interleaves the ranks' stderr line by line
        for r in range(RANKS):
            log.raw(f"[rank{r}]: {blocks[r][i]}")
    log.raw("W0819 06:37:45.520000 4123 torch/distributed/elastic/multiprocessing/api.py:900] Sending process 4190 closing signal SIGTERM")
    log.raw("E0819 06:37:46.016000 4123 torch/distributed/elastic/multiprocessing/api.py:874] failed (exitcode: 1) local_rank: 0 (pid: 4189) of binary: /usr/bin/python3")
    write_text(d / "train.log", log.text())
    expected(d, "crash.unrecognized",
             "all 64 ranks raise `IndexError: index … is out of bounds for dimension 0` in trl grpo_trainer.py "
             "_generate_and_score_completions at step 37: one located error, count 64")


if __name__ == "__main__":
    build()
