"""trl-reward-always-zero: TRL GRPO on a math set whose preprocessing renamed the `solution`
column to `answer`; the accuracy reward reads `solution` from its kwargs, finds nothing and
returns 0.0 for every completion. reward and reward_std are 0 on every step, every group has
zero spread, the loss and grad_norm are 0: no learning signal at all. The job was stopped at
step 61; checkpoint-50 holds the trainer state.
"""

from __future__ import annotations

import random

from common import example_dir, expected, grpo_row, trainer_state, write_json, write_text

NAME = "trl-reward-always-zero"

CMD = """accelerate launch --config_file recipes/accelerate_configs/zero2.yaml --num_processes 7 \\
    grpo_math.py \\
    --model_name_or_path Qwen/Qwen2.5-Math-1.5B-Instruct \\
    --dataset_name data/numina-math-cot-20k \\
    --output_dir outputs/qwen2.5-math-1.5b-grpo \\
    --learning_rate 1e-6 --lr_scheduler_type constant_with_warmup --warmup_steps 10 \\
    --per_device_train_batch_size 8 --gradient_accumulation_steps 2 \\
    --num_generations 8 --max_completion_length 1024 --temperature 0.9 --beta 0.04 \\
    --use_vllm --vllm_mode colocate \\
    --reward_funcs accuracy_reward \\
    --max_steps 500 --logging_steps 1 --save_steps 50 --bf16 --gradient_checkpointing
"""


def build() -> None:
    d = example_dir(NAME)
    rng = random.Random(121)
    rows = []
    tokens = 0.0
    for step in range(1, 51):
        lr = 1e-6 * min(1.0, step / 10)
        mean_len = 371 + rng.uniform(-25, 25)
        tokens += 7 * 8 * 2 * (mean_len + 118)
        rows.append(grpo_row(
            step, epoch=step * 112 / 20000, loss=0.0, grad_norm=0.0, lr=lr, num_tokens=round(tokens),
            mean_len=mean_len, max_len=float(rng.choice([911, 958, 1024, 1024])), min_len=float(rng.randint(71, 140)),
            clipped=rng.choice([0.0, 0.008928571827709675, 0.017857143655419350]),
            reward_fns={"accuracy_reward": (0.0, 0.0)}, reward=0.0, reward_std=0.0, frac_zero_std=1.0,
            entropy=0.331 + rng.uniform(-0.02, 0.02), kl=0.0, clip_region=0.0,
        ))
    state = trainer_state(rows, global_step=50, max_steps=500, epoch=50 * 112 / 20000, logging_steps=1, save_steps=50)
    write_json(d / "checkpoint-50" / "trainer_state.json", state)
    write_text(d / "cmdline.txt", CMD)
    expected(d, "reward.broken_fn",
             "reward and rewards/accuracy_reward/mean are 0.0 with reward_std 0.0 and frac_reward_zero_std 1.0 on all "
             "50 logged steps; loss and grad_norm 0: the reward function returns 0 for everything")


if __name__ == "__main__":
    build()
