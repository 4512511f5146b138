set -x

export CUDA_VISIBLE_DEVICES=4,5,6,7

nsys profile --stats=true -o verl_test_1 python3 -m verl.trainer.main_ppo \
   data.train_files=/workspace/gsm8k/train.parquet \
   data.val_files=/workspace/gsm8k/test.parquet \
   data.train_batch_size=16 \
   data.max_prompt_length=256 \
   data.max_response_length=256 \
   actor_rollout_ref.model.path=/workspace/DeepSeek-R1-Distill-Qwen-7B \
   actor_rollout_ref.actor.optim.lr=1e-6 \
   actor_rollout_ref.model.use_remove_padding=True \
   actor_rollout_ref.actor.use_dynamic_bsz=True \
   actor_rollout_ref.actor.use_kl_loss=True \
   actor_rollout_ref.actor.kl_loss_coef=0.001 \
   actor_rollout_ref.actor.kl_loss_type=low_var_kl \
   actor_rollout_ref.actor.entropy_coeff=0 \
   actor_rollout_ref.actor.ppo_mini_batch_size=4 \
   actor_rollout_ref.rollout.gpu_memory_utilization=0.6 \
   actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1 \
   actor_rollout_ref.actor.fsdp_config.param_offload=True \
   actor_rollout_ref.actor.fsdp_config.optimizer_offload=True \
   actor_rollout_ref.model.enable_gradient_checkpointing=True \
   actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4 \
   actor_
