module load cuda/12.8
GPUS_PER_NODE=4
master=`scontrol show hostname $SLURM_NODELIST | head -n 1`

export HF_ENDPOINT=https://hf-mirror.com
export MASTER_ADDR=$master
export MASTER_PORT=6666
export NNODES=$SLURM_NNODES
export NODE_RANK=$SLURM_PROCID
export WORLD_SIZE=$(($GPUS_PER_NODE*$NNODES))
export LOCAL_RANK=$SLURM_LOCALID
export NCCL_SOCKET_IFNAME=ibs10

DISTRIBUTED_ARGS="--nproc_per_node $GPUS_PER_NODE --nnodes $NNODES --node_rank $NODE_RANK --master_addr $MASTER_ADDR --master_port $MASTER_PORT"


export optimizer=AdamW
export rlhf_type=grpo
export train_type=full
export learning_rate=1.0e-6
export per_device_train_batch_size=8
export gradient_accumulation_steps=1
export dataset=DAPO-Math-17k-Processed
TOTAL_BATCH_SIZE=$((per_device_train_batch_size * WORLD_SIZE * gradient_accumulation_steps))
export batch_size=$TOTAL_BATCH_SIZE
export num_generations=8
export adam_beta1=0.9
export adam_beta2=0.95
export epoch=3
export val_dataset=GSM8K


NNODES=$NNODES \
NODE_RANK=$SLURM_PROCID \
MASTER_ADDR=$MASTER_ADDR \
MASTER_PORT=$MASTER_PORT \
NPROC_PER_NODE=$GPUS_PER_NODE \
swift rlhf \
    --rlhf_type $rlhf_type \
    --train_type $train_type \
    --model /gf3/home/zqwen/Models/DeepSeek-R1-Distill-Qwen-1.5B \
    --reward_funcs accuracy \
    --torch_dtype bfloat16 \
    --dataset ./datasets/$dataset \
    --max_completion_lengt