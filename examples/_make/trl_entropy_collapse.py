"""trl-entropy-collapse: TRL GRPO with a learning rate of 3e-6, temperature 0.6 and no KL
penalty (beta 0). The reward climbs early, then the policy collapses onto near-deterministic
completions: entropy falls from ~0.4 below 0.01 by step ~150 and stays there, completions
shrink, and more and more groups score identically.
"""

from __future__ import annotations

import math
import random

from common import example_dir, expected, grpo_row, trainer_state, write_json, write_text

NAME = "trl-entropy-collapse"
MAX_STEPS = 300
LOG_EVERY = 5

CMD = """accelerate launch --config_file recipes/accelerate_configs/zero3.yaml --num_processes 7 \\
    grpo_gsm8k.py \\
    --model_name_or_path Qwen/Qwen2.5-3B-Instruct \\
    --dataset_name openai/gsm8k --dataset_config main \\
    --output_dir outputs/qwen2.5-3b-grpo-gsm8k-lr3e-6 \\
    --learning_rate 3e-6 --lr_scheduler_type constant_with_warmup --warmup_steps 10 \\
    --per_device_train_batch_size 8 --gradient_accumulation_steps 4 \\
    --num_generations 4 --max_completion_length 768 --temperature 0.6 --beta 0.0 \\
    --use_vllm --vllm_mode server \\
    --reward_funcs accuracy_reward format_reward \\
    --max_steps 300 --logging_steps 5 --save_steps 100 --bf16 --gradient_checkpointing
"""


def build() -> None:
    d = example_dir(NAME)
    rng = random.Random(131)
    rows = []
    tokens = 0.0
    for step in range(LOG_EVERY, MAX_STEPS + 1, LOG_EVERY):
        f = step / MAX_STEPS
        entropy = max(0.0021, 0.41 * math.exp(-step / 32.0)) * rng.uniform(0.85, 1.15)
        acc = min(0.74, 0.38 + 0.36 * (1 - math.exp(-step / 40.0))) + rng.uniform(-0.03, 0.03)
        fmt = min(1.0, 0.7 + 0.3 * (1 - math.exp(-step / 30.0)))
        mean_len = 180 + 250 * math.exp(-step / 60.0) + rng.uniform(-8, 8)
        tokens += 7 * 8 * 4 * (mean_len + 130) * LOG_EVERY / 4
        zero = min(0.74, 0.31 + 0.45 * (1 - math.exp(-step / 70.0))) + rng.uniform(-0.04, 0.04)
        rows.append(grpo_row(
            step, epoch=step * 224 / 7473, loss=rng.uniform(-0.002, 0.006),
            grad_norm=max(0.004, 0.32 * math.exp(-step / 80.0)) * rng.uniform(0.7, 1.3), lr=3e-6 * min(1.0, step / 10),
            num_tokens=round(tokens), mean_len=mean_len, max_len=float(int(mean_len * rng.uniform(1.8, 2.6))),
            min_len=float(int(mean_len * rng.uniform(0.35, 0.6))), clipped=0.0,
            reward_fns={"accuracy_reward": (acc, max(0.05, 0.45 * (1 - zero))), "format_reward": (fmt, max(0.0, 0.4 * (1 - fmt)))},
            reward=acc + fmt, reward_std=max(0.04, 0.55 * (1 - zero)), frac_zero_std=zero, entropy=entropy,
            clip_region=0.0,
        ))
    rows.append({"epoch": round(MAX_STEPS * 224 / 7473, 4), "step": MAX_STEPS, "total_flos": 0.0,
                 "train_loss": 0.0019421, "train_runtime": 27311.6624, "train_samples_per_second": 2.461,
                 "train_steps_per_second": 0.011})
    state = trainer_state(rows, global_step=MAX_STEPS, max_steps=MAX_STEPS, epoch=MAX_STEPS * 224 / 7473,
                          logging_steps=LOG_EVERY, save_steps=100)
    write_json(d / "trainer_state.json", state)
    write_text(d / "cmdline.txt", CMD)
    last = [r["entropy"] for r in rows if "entropy" in r][-12:]
    expected(d, "policy.entropy_collapse",
             f"entropy falls from 0.41 to {min(last):.4f}-{max(last):.4f} over the last 60 steps (< 0.01), completions "
             "shrink from ~420 to ~180 tokens, while reward plateaus: lr 3e-6, temperature 0.6, beta 0")


if __name__ == "__main__":
    build()
