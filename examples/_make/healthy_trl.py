"""healthy-trl-grpo: TRL GRPOTrainer on GSM8K with Qwen2.5-1.5B-Instruct, a run that is fine.

Every metric of the axolotl guide's GRPO table stays in its healthy range: reward climbs
from 0.31 to ~0.72, reward_std > 0, frac_reward_zero_std < 0.5, grad_norm 0.04-0.35,
entropy 0.42 -> 0.27, kl < 0.06, clip ratio 0, few completions clipped.
"""

from __future__ import annotations

import random

from common import example_dir, expected, grpo_row, trainer_state, write_json, write_text

NAME = "healthy-trl-grpo"
MAX_STEPS = 200
LOG_EVERY = 5

CMD = """accelerate launch --config_file recipes/accelerate_configs/zero2.yaml --num_processes 7 \\
    grpo_gsm8k.py \\
    --model_name_or_path Qwen/Qwen2.5-1.5B-Instruct \\
    --dataset_name openai/gsm8k --dataset_config main \\
    --output_dir outputs/qwen2.5-1.5b-grpo-gsm8k \\
    --learning_rate 1e-6 --lr_scheduler_type cosine --warmup_ratio 0.05 \\
    --per_device_train_batch_size 8 --gradient_accumulation_steps 4 \\
    --num_generations 8 --max_prompt_length 512 --max_completion_length 1024 \\
    --beta 0.04 --temperature 0.9 \\
    --use_vllm --vllm_mode server \\
    --reward_funcs accuracy_reward format_reward \\
    --max_steps 200 --logging_steps 5 --save_steps 100 \\
    --bf16 --gradient_checkpointing --report_to wandb
"""


def lr_at(step: int) -> float:
    import math

    warm = int(0.05 * MAX_STEPS)
    if step < warm:
        return 1e-6 * step / warm
    progress = (step - warm) / (MAX_STEPS - warm)
    return 1e-6 * 0.5 * (1 + math.cos(math.pi * progress))


def build() -> None:
    d = example_dir(NAME)
    rng = random.Random(21)
    rows = []
    tokens = 0.0
    for step in range(LOG_EVERY, MAX_STEPS + 1, LOG_EVERY):
        f = step / MAX_STEPS
        acc = 0.31 + 0.41 * (1 - (1 - f) ** 2) + rng.uniform(-0.04, 0.04)
        fmt = min(1.0, 0.62 + 0.45 * f + rng.uniform(-0.03, 0.03))
        mean_len = 182 + 61 * f + rng.uniform(-12, 12)
        tokens += 7 * 8 * 4 * (mean_len + 148) * LOG_EVERY / 8
        rows.append(grpo_row(
            step, epoch=step * 224 / 7473, loss=rng.uniform(-0.004, 0.011), grad_norm=0.06 + 0.2 * rng.random(),
            lr=lr_at(step), num_tokens=round(tokens), mean_len=mean_len, max_len=float(rng.choice([612, 704, 733, 866, 1024])),
            min_len=float(rng.randint(58, 96)), clipped=rng.choice([0.0, 0.0, 0.004464285913854837, 0.008928571827709675]),
            reward_fns={"accuracy_reward": (acc, 0.41 + rng.uniform(-0.04, 0.04)),
                        "format_reward": (fmt, max(0.02, 0.48 - 0.42 * f + rng.uniform(-0.03, 0.03)))},
            reward=acc + fmt, reward_std=0.52 - 0.12 * f + rng.uniform(-0.05, 0.05),
            frac_zero_std=0.28 + 0.14 * f + rng.uniform(-0.06, 0.06), entropy=0.42 - 0.15 * f + rng.uniform(-0.015, 0.015),
            kl=0.0009 + 0.052 * f + rng.uniform(0, 0.004), clip_region=0.0,
        ))
    rows.append({
        "epoch": round(MAX_STEPS * 224 / 7473, 4), "step": MAX_STEPS, "total_flos": 0.0, "train_loss": 0.0031774215,
        "train_runtime": 21604.8813, "train_samples_per_second": 2.074, "train_steps_per_second": 0.009,
    })
    state = trainer_state(rows, global_step=MAX_STEPS, max_steps=MAX_STEPS, epoch=MAX_STEPS * 224 / 7473,
                          logging_steps=LOG_EVERY, save_steps=100)
    write_json(d / "trainer_state.json", state)
    write_text(d / "cmdline.txt", CMD)
    expected(d, "healthy", "reward 0.31 -> 0.72 with reward_std > 0, grad_norm 0.06-0.26, entropy 0.42 -> 0.27, kl < 0.06: every GRPO metric in the axolotl guide's healthy range")


if __name__ == "__main__":
    build()
