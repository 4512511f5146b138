"""trl-single-generation-nan: GRPO with one completion per prompt (`--num_generations 1`),
set to save memory on a first try. A group of one has no standard deviation: the group std
is NaN (torch's unbiased std divides by n - 1 = 0), so reward_std, the advantages, the loss
and grad_norm are NaN from the very first step, while the reward itself is an ordinary
number. The shape follows the report in om-ai-lab/VLM-R1#71 ("`--num_generations 1` ...
`grad_norm` and `reward_std` are both nan"); the rows are TRL GRPOTrainer's `log_history`
(huggingface/trl trl/trainer/grpo_trainer.py metric names), as VLM-R1's trainer logs them.
"""

from __future__ import annotations

import math
import random

from common import example_dir, expected, grpo_row, trainer_state, write_json, write_text

NAME = "trl-single-generation-nan"
STEPS = 30

CMD = """torchrun --nproc_per_node 8 --nnodes 1 --master_port 12346 \\
    src/open_r1/grpo_rec.py \\
    --deepspeed local_scripts/zero3.json \\
    --output_dir output/qwen2.5vl-3b-rec-g1 \\
    --model_name_or_path Qwen/Qwen2.5-VL-3B-Instruct \\
    --dataset_name data_config/rec.yaml \\
    --max_prompt_length 1024 --max_completion_length 512 \\
    --num_generations 1 \\
    --per_device_train_batch_size 1 --gradient_accumulation_steps 2 \\
    --logging_steps 1 --bf16 --torch_dtype bfloat16 --gradient_checkpointing true \\
    --attn_implementation flash_attention_2 --num_train_epochs 2 --save_steps 100 \\
    --learning_rate 1e-6 --beta 0.04
"""


def build() -> None:
    d = example_dir(NAME)
    rng = random.Random(611)
    rows = []
    tokens = 0.0
    for step in range(1, STEPS + 1):
        acc = 0.42 + rng.uniform(-0.12, 0.12)  # one sample per prompt per device: a noisy mean
        mean_len = 88 + rng.uniform(-14, 14)
        tokens += 8 * 2 * (mean_len + 640)
        row = grpo_row(
            step, epoch=step * 16 / 6000, loss=math.nan, grad_norm=math.nan, lr=1e-6, num_tokens=round(tokens),
            mean_len=mean_len, max_len=float(int(mean_len * rng.uniform(1.4, 1.9))),
            min_len=float(int(mean_len * rng.uniform(0.4, 0.7))), clipped=0.0,
            reward_fns={"accuracy_reward": (acc, math.nan), "format_reward": (1.0, math.nan)},
            reward=acc + 1.0, reward_std=math.nan, frac_zero_std=0.0, entropy=0.52 + rng.uniform(-0.04, 0.04),
            kl=0.0 if step == 1 else math.nan, clip_region=0.0, max_completion_length=512,
        )
        rows.append(row)
    state = trainer_state(rows, global_step=STEPS, max_steps=750, epoch=STEPS * 16 / 6000, logging_steps=1,
                          save_steps=100)
    write_json(d / "trainer_state.json", state)
    write_text(d / "cmdline.txt", CMD)
    expected(d, "algo.degenerate_groups",
             "--num_generations 1: reward_std, loss and grad_norm are NaN from step 1 on every step while the reward "
             "is finite; a group of one sample has no std, so the group-normalised advantages are NaN")


if __name__ == "__main__":
    build()
