source /usr/local/Ascend/ascend-toolkit/set_env.sh
source /usr/local/Ascend/nnal/atb/set_env.sh
export USE_OPTIMIZED_MODEL=0
export NNODES=8
export NODE_RANK=0
export MASTER_ADDR=127.0.0.1
export MASTER_PORT=29500
export NPROC_PER_NODE=8
export HCCL_CONNECT_TIMEOUT=600
MAX_PIXELS=1003500 \
swift rlhf \
    --rlhf_type grpo \
    --model /cache/zzh/MiMo-VL-7B-RL-2508 \
    --model_type mimo_vl \
    --external_plugins examples/train/grpo/plugin/plugin.py \
    --reward_funcs external_rm_acc \
    --use_vllm true \
    --vllm_mode colocate \
    --vllm_gpu_memory_utilization 0.7 \
    --vllm_tensor_parallel_size 8 \
    --vllm_max_model_len 28312 \
    --train_type full \
    --torch_dtype bfloat16 \
    --dataset /cache/zzh/llava-critic-r1-preference_data_swift.jsonl \
    --max_length 13312 \
    --max_completion_length 15000 \
    --num_train_epochs 1 \
    --per_de