from trl import GRPOConfig, GRPOTrainer
training_args = GRPOConfig(output_dir="some_path", logging_steps=1)
trainer = GRPOTrainer(
    model="gpt2",
    reward_funcs=reward_func,
    args=training_args,
    train_dataset=some_dataset,
)
trainer.train()
