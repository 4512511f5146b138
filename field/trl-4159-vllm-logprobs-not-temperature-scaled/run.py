from datasets import load_dataset
from trl import GRPOConfig, GRPOTrainer


class DebugGRPOTrainer(GRPOTrainer):
    def _generate_and_score_completions(self, inputs):
        batch = super()._generate_and_score_completions(inputs)
        # importance_sampling_ratio = torch.exp(old_logps - vllm_logps)
        print(f"[DEBUG] first-token IS ratio: {batch['importance_sampling_ratio'][:, 0].detach().cpu()}")
        return batch


def reward_fn(completions, **kwargs):  # dummy
    return [float(len(c)) for c in completions]


args = GRPOConfig(
    output_dir="out",
    per_device_train_batch_size=2,
    num_generations=2,
    num_iterations=1,
    max_prompt_length=64,
    max_completion_length=8,
    steps_per_generation=1,
    temperature=0.6,
    use_vllm=True,
    vllm_mode="colocate",
    logging_steps=-1,
    report_to="none",
)

ds = load_dataset("trl-lib/tldr", split="train[:64]")
trainer = DebugGRPOTrainer(
    model="HuggingFaceTB/SmolLM-135M-Instruct",
    reward_funcs=[reward_fn],
    args=args,
    train_dataset=ds,
)

trainer.train()

