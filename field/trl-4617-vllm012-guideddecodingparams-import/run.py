from trl.trainer.grpo_trainer import RewardFunc
