trainer = ORPOTrainer(
    **shared_training_args,
    args=ORPOConfig(
        **shared_config_args,
        per_device_train_batch_size=1,
        per_device_eval_batch_size=1,
        gradient_accumulation_steps=16,
        eval_accumulation_steps=16,
        warmup_ratio=0.1,
        beta=0.1,
        learning_rate=3e-7,
        weight_decay=0.01,
        lr_scheduler_type="cosine",
        max_prompt_length=max_prompt_length,
        max_completion_length=max_completion_length,
        max_length=max_prompt_length + max_completion_length,
        metric_for_best_model="eval_loss",
    ),
)
