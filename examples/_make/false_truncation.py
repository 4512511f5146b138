"""trl-false-truncation: GRPO on Phi-3.5-mini-instruct, whose chat template ends an assistant
turn with `<|end|>` (id 32007) while `tokenizer.eos_token_id` is `<|endoftext|>` (32000).
Generation stops on `<|end|>` (the model's generation config lists both), but the trainer
counts only the tokenizer's eos as an end, so `completions/clipped_ratio` is ~0.97 on every
step although no completion came near `max_completion_length` 2048: the longest is under
1000 tokens. Described in huggingface/trl#7039 ("On Phi-3.5 we observed clipped_ratio ≈ 0.97
at step 1 with max_completion_length=2048 while almost every completion had actually ended on
<|end|>"). Rows are TRL GRPOTrainer's `log_history` (trl/trainer/grpo_trainer.py names).
"""

from __future__ import annotations

import random

from common import example_dir, expected, grpo_row, trainer_state, write_json, write_text

NAME = "trl-false-truncation"
STEPS = 40
LIMIT = 2048

CMD = """accelerate launch --config_file recipes/accelerate_configs/zero2.yaml --num_processes 7 \\
    grpo_gsm8k.py \\
    --model_name_or_path microsoft/Phi-3.5-mini-instruct \\
    --dataset_name openai/gsm8k --dataset_config main \\
    --output_dir outputs/phi3.5-grpo-gsm8k \\
    --learning_rate 1e-6 --lr_scheduler_type constant_with_warmup --warmup_steps 5 \\
    --per_device_train_batch_size 8 --gradient_accumulation_steps 2 \\
    --num_generations 8 --max_completion_length 2048 --temperature 0.9 --beta 0.04 \\
    --use_vllm --vllm_mode colocate \\
    --reward_funcs accuracy_reward format_reward \\
    --max_steps 400 --logging_steps 1 --save_steps 100 --bf16 --gradient_checkpointing
"""


def build() -> None:
    d = example_dir(NAME)
    rng = random.Random(7039)
    rows = []
    tokens = 0.0
    for step in range(1, STEPS + 1):
        acc = 0.46 + 0.2 * step / STEPS + rng.uniform(-0.04, 0.04)
        mean_len = 312 + rng.uniform(-20, 20)
        max_len = float(int(rng.uniform(640, 980)))
        tokens += 7 * 8 * 2 * (mean_len + 120)
        # 109-112 of 112 completions counted as clipped: only those that happened to sample <|endoftext|>
        clipped = rng.choice([0.9642857313156128, 0.9732142686843872, 0.9821428656578064, 1.0])
        row = grpo_row(
            step, epoch=step * 112 / 7473, loss=rng.uniform(-0.004, 0.008), grad_norm=0.21 * rng.uniform(0.7, 1.4),
            lr=1e-6 * min(1.0, step / 5), num_tokens=round(tokens), mean_len=mean_len, max_len=max_len,
            min_len=float(rng.randint(96, 150)), clipped=clipped,
            reward_fns={"accuracy_reward": (acc, 0.43), "format_reward": (0.97, 0.1)}, reward=acc + 0.97,
            reward_std=0.46 + rng.uniform(-0.03, 0.03), frac_zero_std=0.28 + rng.uniform(-0.05, 0.05),
            entropy=0.41 - 0.002 * step + rng.uniform(-0.02, 0.02), kl=0.0004 * (step - 1), clip_region=0.0,
            max_completion_length=LIMIT,
        )
        rows.append(row)
    state = trainer_state(rows, global_step=STEPS, max_steps=400, epoch=STEPS * 112 / 7473, logging_steps=1,
                          save_steps=100)
    write_json(d / "trainer_state.json", state)
    write_text(d / "cmdline.txt", CMD)
    longest = max(r["completions/max_length"] for r in rows)
    expected(d, "metrics.false_truncation",
             f"completions/clipped_ratio 0.96-1.0 on every step, yet the longest completion is {longest:.0f} tokens of "
             f"max_completion_length {LIMIT}: no completion reached the limit; Phi-3.5 ends its turn on <|end|>, "
             "not the tokenizer's eos")


if __name__ == "__main__":
    build()
