CUDA_VISIBLE_DEVICES=0,1 trl vllm-serve \
  --model /home/user/qwen3-4B-instruct \
  --tensor-parallel-size 2 \
  --data-parallel-size 1 \
  --dtype bfloat16 \
  --max-model-len 4608 \
  --gpu-memory-utilization 0.9
