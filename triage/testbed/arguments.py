"""slime's command line, as far as the testbed honours it, and slime's argument derivations.

Flags keep slime / Megatron spellings (`--rollout-batch-size`, `--tensor-model-parallel-size`,
`--debug-rollout-only`, ...) and defaults. `validate` repeats the derivations slime's
`slime_validate_args` makes (a `--load` without a tracker file falls back to `--ref-load`
with `finetune`, `--dump-details` sets the debug dump paths, `--load-debug-rollout-data`
sets `debug_train_only`, `--colocate` offloads, the global batch size follows from
`--num-steps-per-rollout`), with slime's messages.

Flags that start with `--testbed-` describe the testbed's environment (how many GPUs its
scheduler has, which slime version's dump layout to write): they are not slime's and
never appear in the arguments block or the recorded command line.
"""

from __future__ import annotations

import argparse
import os
import shlex
from typing import Any

TESTBED_PREFIX = "testbed_"


def _bool_pair(p: argparse.ArgumentParser, name: str, default: bool) -> None:
    dest = name.replace("-", "_")
    p.add_argument(f"--{name}", dest=dest, action="store_true", default=default)
    p.add_argument(f"--no-{name}", dest=dest, action="store_false")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m triage.testbed.train", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    # cluster
    p.add_argument("--actor-num-nodes", type=int, default=1)
    p.add_argument("--actor-num-gpus-per-node", type=int, default=1)
    p.add_argument("--rollout-num-gpus", type=int, default=None)
    p.add_argument("--rollout-num-gpus-per-engine", type=int, default=1)
    p.add_argument("--colocate", action="store_true")
    p.add_argument("--offload", action="store_true")
    p.add_argument("--offload-train", action="store_true", default=None)
    p.add_argument("--offload-rollout", action="store_true", default=None)
    # model (Megatron)
    p.add_argument("--num-layers", type=int, default=None)
    p.add_argument("--hidden-size", type=int, default=None)
    p.add_argument("--ffn-hidden-size", type=int, default=None)
    p.add_argument("--num-attention-heads", type=int, default=None)
    p.add_argument("--group-query-attention", action="store_true")
    p.add_argument("--num-query-groups", type=int, default=None)
    p.add_argument("--kv-channels", type=int, default=None)
    p.add_argument("--normalization", default="RMSNorm")
    p.add_argument("--norm-epsilon", type=float, default=1e-6)
    p.add_argument("--swiglu", action="store_true")
    p.add_argument("--disable-bias-linear", action="store_true")
    p.add_argument("--add-qkv-bias", action="store_true")
    p.add_argument("--untie-embeddings-and-output-weights", action="store_true")
    p.add_argument("--use-rotary-position-embeddings", action="store_true")
    p.add_argument("--position-embedding-type", default="rope")
    p.add_argument("--rotary-base", type=float, default=10000.0)
    p.add_argument("--vocab-size", type=int, default=None)
    p.add_argument("--make-vocab-size-divisible-by", type=int, default=128)
    p.add_argument("--seq-length", type=int, default=512)
    p.add_argument("--max-position-embeddings", type=int, default=512)
    p.add_argument("--attention-dropout", type=float, default=0.0)
    p.add_argument("--hidden-dropout", type=float, default=0.0)
    p.add_argument("--attention-backend", default="auto")
    p.add_argument("--accumulate-allreduce-grads-in-fp32", action="store_true")
    p.add_argument("--attention-softmax-in-fp32", action="store_true")
    p.add_argument("--bf16", action="store_true")
    p.add_argument("--fp16", action="store_true")
    # parallelism
    p.add_argument("--tensor-model-parallel-size", type=int, default=1)
    p.add_argument("--pipeline-model-parallel-size", type=int, default=1)
    p.add_argument("--context-parallel-size", type=int, default=1)
    p.add_argument("--expert-model-parallel-size", type=int, default=1)
    p.add_argument("--sequence-parallel", action="store_true")
    # checkpoints
    p.add_argument("--hf-checkpoint", default=None)
    p.add_argument("--ref-load", default=None)
    p.add_argument("--load", default=None)
    p.add_argument("--save", default=None)
    p.add_argument("--save-interval", type=int, default=None)
    p.add_argument("--ckpt-format", choices=["torch_dist", "torch"], default="torch_dist")
    p.add_argument("--ckpt-step", type=int, default=None)
    p.add_argument("--ref-ckpt-step", type=int, default=None)
    p.add_argument("--no-load-optim", action="store_true")
    p.add_argument("--no-load-rng", action="store_true")
    p.add_argument("--finetune", action="store_true")
    p.add_argument("--start-rollout-id", type=int, default=None)
    # data
    p.add_argument("--prompt-data", default=None)
    p.add_argument("--input-key", default="input")
    p.add_argument("--label-key", default=None)
    p.add_argument("--metadata-key", default="metadata")
    p.add_argument("--apply-chat-template", action="store_true")
    p.add_argument("--rollout-shuffle", action="store_true")
    p.add_argument("--rm-type", default=None)
    p.add_argument("--custom-rm-path", default=None)
    p.add_argument("--reward-key", default=None)
    # rollout
    p.add_argument("--num-rollout", type=int, default=None)
    p.add_argument("--rollout-batch-size", type=int, default=None)
    p.add_argument("--n-samples-per-prompt", type=int, default=1)
    p.add_argument("--rollout-max-response-len", type=int, default=1024)
    p.add_argument("--rollout-max-context-len", type=int, default=None)
    p.add_argument("--rollout-temperature", type=float, default=1.0)
    p.add_argument("--rollout-top-p", type=float, default=1.0)
    p.add_argument("--rollout-top-k", type=int, default=-1)
    p.add_argument("--rollout-stop", nargs="+", default=None)
    p.add_argument("--rollout-stop-token-ids", nargs="+", type=int, default=None)
    p.add_argument("--rollout-seed", type=int, default=42)
    p.add_argument("--sglang-mem-fraction-static", type=float, default=None)
    p.add_argument("--sglang-server-concurrency", type=int, default=512)
    p.add_argument("--use-http-engine", action="store_true",
                   help="serve the engine over HTTP on 127.0.0.1 (SGLang's /generate) and roll out through it")
    # training
    p.add_argument("--global-batch-size", type=int, default=None)
    p.add_argument("--num-steps-per-rollout", type=int, default=None)
    p.add_argument("--micro-batch-size", type=int, default=1)
    p.add_argument("--use-dynamic-batch-size", action="store_true")
    p.add_argument("--max-tokens-per-gpu", type=int, default=None)
    p.add_argument("--log-probs-max-tokens-per-gpu", type=int, default=None)
    p.add_argument("--advantage-estimator", choices=["grpo", "gspo", "reinforce_plus_plus_baseline"], default="grpo")
    p.add_argument("--disable-rewards-normalization", dest="rewards_normalization", action="store_false", default=True)
    p.add_argument("--disable-grpo-std-normalization", dest="grpo_std_normalization", action="store_false", default=True)
    p.add_argument("--eps-clip", type=float, default=0.2)
    p.add_argument("--eps-clip-high", type=float, default=None)
    p.add_argument("--kl-coef", type=float, default=0.0)
    p.add_argument("--use-kl-loss", action="store_true")
    p.add_argument("--kl-loss-coef", type=float, default=0.0)
    p.add_argument("--kl-loss-type", choices=["k1", "k2", "k3", "low_var_kl"], default="k1")
    p.add_argument("--entropy-coef", type=float, default=0.0)
    p.add_argument("--calculate-per-token-loss", action="store_true")
    p.add_argument("--use-rollout-logprobs", action="store_true")
    p.add_argument("--use-tis", action="store_true")
    p.add_argument("--optimizer", choices=["adam"], default="adam")
    p.add_argument("--lr", type=float, default=1e-6)
    p.add_argument("--min-lr", type=float, default=0.0)
    p.add_argument("--lr-decay-style", choices=["constant", "linear", "cosine"], default="constant")
    p.add_argument("--lr-warmup-iters", type=int, default=0)
    p.add_argument("--lr-decay-iters", type=int, default=None)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--adam-beta1", type=float, default=0.9)
    p.add_argument("--adam-beta2", type=float, default=0.98)
    p.add_argument("--adam-eps", type=float, default=1e-8)
    p.add_argument("--clip-grad", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=1234)
    _bool_pair(p, "check-for-nan-in-loss-and-grad", True)
    p.add_argument("--ref-update-interval", type=int, default=None)
    # debugging
    p.add_argument("--debug-rollout-only", action="store_true")
    p.add_argument("--debug-train-only", action="store_true")
    p.add_argument("--save-debug-rollout-data", default=None)
    p.add_argument("--load-debug-rollout-data", default=None)
    p.add_argument("--save-debug-train-data", default=None)
    p.add_argument("--dump-details", default=None)
    p.add_argument("--ci-test", action="store_true")
    p.add_argument("--use-wandb", action="store_true")
    p.add_argument("--wandb-project", default=None)
    p.add_argument("--wandb-group", default=None)
    # the testbed's environment (never printed, never recorded)
    p.add_argument("--testbed-trainer", "--trainer", dest="testbed_trainer", choices=["megatron", "hf"], default="megatron",
                   help="megatron: slime's artifacts; hf: an HF Trainer / TRL GRPO run (trainer_state.json)")
    p.add_argument("--testbed-output-dir", default=None, help="output_dir of the HF Trainer variant")
    p.add_argument("--testbed-log", default=None, help="write the job log here instead of stdout")
    p.add_argument("--testbed-cluster-gpus", type=int, default=int(os.environ.get("TRIAGE_TESTBED_CLUSTER_GPUS", "8")),
                   help="GPUs the testbed's scheduler has (env TRIAGE_TESTBED_CLUSTER_GPUS)")
    p.add_argument("--testbed-gpu-memory-gib", type=float, default=80.0)
    p.add_argument("--testbed-placement-timeout", type=float, default=300.0,
                   help="simulated seconds the job waits for its placement group before it is stopped")
    p.add_argument("--testbed-dist-timeout", type=float, default=10.0,
                   help="seconds a model-parallel collective may wait before its process group times out")
    p.add_argument("--testbed-train-dump-format", choices=["legacy", "v2"], default="v2",
                   help="legacy: train_data/{id}_{rank}.pt (slime <= v0.3.1); v2: train_data/{id}.pt")
    p.add_argument("--testbed-engine-dump", default=None,
                   help="directory where the engine saves every weight it holds after each update")
    p.add_argument("--testbed-fault", default=os.environ.get("TRIAGE_TESTBED_FAULT"),
                   help="plant a fault from triage.testbed.faults (env TRIAGE_TESTBED_FAULT)")
    p.add_argument("--testbed-rank", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--testbed-master-port", type=int, default=None, help=argparse.SUPPRESS)
    return p


class ArgumentError(ValueError):
    """An argument slime would reject; the message is slime's."""


def parse(argv: list[str]) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def validate(args: argparse.Namespace, notes: list[str] | None = None) -> argparse.Namespace:
    """slime's derivations, in slime's order; `notes` collects the info lines slime logs."""
    notes = notes if notes is not None else []
    if args.rollout_temperature <= 0:
        raise ArgumentError("--rollout-temperature must be > 0; temperature 0 is greedy decoding and is not a valid RL policy.")
    if args.num_rollout is None:
        raise ArgumentError("num_epoch is not set, but num_rollout is not set, please set --num-rollout or --num-epoch")
    if args.rollout_batch_size is None:
        raise ArgumentError("--rollout-batch-size is required")
    if args.kl_coef != 0 or args.use_kl_loss:
        if not args.ref_load or not os.path.exists(args.ref_load):
            raise FileNotFoundError(f"ref_load {args.ref_load} does not exist, please check the path.")
        if not os.path.exists(os.path.join(args.ref_load, "latest_checkpointed_iteration.txt")):
            notes.append(f"ref_load {args.ref_load} does not have latest_checkpointed_iteration.txt, "
                         "please make sure it is a valid megatron checkpoint directory.")
    load_is_megatron = bool(args.load) and os.path.exists(os.path.join(args.load, "latest_checkpointed_iteration.txt"))
    load_is_hf = bool(args.load) and os.path.isdir(args.load) and os.path.exists(os.path.join(args.load, "config.json"))
    if not load_is_megatron:
        args.no_load_optim = True
        args.no_load_rng = True
        args.finetune = True
        if not load_is_hf:
            args.load = args.ref_load
        if args.ref_ckpt_step is not None:
            args.ckpt_step = args.ref_ckpt_step
        if args.start_rollout_id is None:
            args.start_rollout_id = 0
    if args.save_interval is not None and args.save is None:
        raise ArgumentError("'--save' is required when save_interval is set.")
    if args.kl_coef != 0 and args.kl_loss_coef != 0:
        raise ArgumentError("Only one of kl_coef and kl_loss_coef can be set")
    if args.use_dynamic_batch_size:
        if args.max_tokens_per_gpu is None:
            raise ArgumentError("max_tokens_per_gpu must be set when use_dynamic_batch_size is set")
        if args.log_probs_max_tokens_per_gpu is None:
            args.log_probs_max_tokens_per_gpu = args.max_tokens_per_gpu
    if args.eps_clip_high is None:
        args.eps_clip_high = args.eps_clip
    if args.dump_details is not None:
        args.save_debug_rollout_data = f"{args.dump_details}/rollout_data/{{rollout_id}}.pt"
        if args.testbed_train_dump_format == "legacy":
            args.save_debug_train_data = f"{args.dump_details}/train_data/{{rollout_id}}_{{rank}}.pt"
        else:
            args.save_debug_train_data = f"{args.dump_details}/train_data/{{rollout_id}}.pt"
    if args.load_debug_rollout_data is not None:
        notes.append(f"load_debug_rollout_data {args.load_debug_rollout_data} is set, "
                     "will not instantiate sglang servers and will only run the training process.")
        args.debug_train_only = True
    if args.offload:
        args.offload_train = True
        args.offload_rollout = True
    if args.debug_rollout_only:
        if args.colocate and args.rollout_num_gpus is None:
            args.rollout_num_gpus = args.actor_num_gpus_per_node * args.actor_num_nodes
        args.colocate = False
        args.offload_train = args.offload_rollout = False
    if args.debug_rollout_only and args.debug_train_only:
        raise ArgumentError("debug_rollout_only and debug_train_only cannot be set at the same time, "
                            "please set only one of them.")
    if args.colocate:
        if args.offload_train is None:
            args.offload_train = True
        if args.offload_rollout is None:
            args.offload_rollout = True
        if args.rollout_num_gpus is None:
            args.rollout_num_gpus = args.actor_num_gpus_per_node * args.actor_num_nodes
    if args.offload_train is None:
        args.offload_train = False
    if args.offload_rollout is None:
        args.offload_rollout = False
    if args.rollout_num_gpus is None:
        args.rollout_num_gpus = 1
    if args.num_steps_per_rollout is not None:
        gbs = args.rollout_batch_size * args.n_samples_per_prompt // args.num_steps_per_rollout
        if args.global_batch_size is not None and args.global_batch_size != gbs:
            raise ArgumentError(
                f"global_batch_size {args.global_batch_size} is not equal to rollout_batch_size {args.rollout_batch_size} "
                f"* n_samples_per_prompt {args.n_samples_per_prompt} // num_steps_per_rollout {args.num_steps_per_rollout}"
            )
        args.global_batch_size = gbs
    if args.global_batch_size is None:
        args.global_batch_size = args.rollout_batch_size * args.n_samples_per_prompt
    if args.n_samples_per_prompt == 1:
        args.grpo_std_normalization = False
        notes.append("n_samples_per_prompt is set to 1, grpo_std_normalization will be set to False.")
    if args.context_parallel_size != 1 or args.expert_model_parallel_size != 1:
        raise ArgumentError("the testbed runs tensor and pipeline parallelism only (context/expert parallel size must be 1)")
    if args.bf16 and args.fp16:
        raise ArgumentError("cannot use both fp16 and bf16")
    world = args.actor_num_nodes * args.actor_num_gpus_per_node
    mp = args.tensor_model_parallel_size * args.pipeline_model_parallel_size
    if not args.debug_rollout_only and world % mp:
        raise ArgumentError(f"world size ({world}) is not divisible by tensor-model-parallel-size "
                            f"({args.tensor_model_parallel_size}) times pipeline-model-parallel-size "
                            f"({args.pipeline_model_parallel_size})")
    args.world_size = world
    args.data_parallel_size = max(1, world // mp)
    args.rank = 0
    args.params_dtype = "torch.float16" if args.fp16 else "torch.bfloat16" if args.bf16 else "torch.float32"
    return args


def printed_arguments(args: argparse.Namespace) -> dict[str, Any]:
    """What Megatron's arguments block shows: every argument but the testbed's own."""
    return {k: v for k, v in vars(args).items() if not k.startswith(TESTBED_PREFIX)}


def recorded_command(argv: list[str], program: str = "python3 -m triage.testbed.train") -> str:
    """The job's command line as a user would have typed it: testbed-only flags dropped."""
    out: list[str] = []
    skip = False
    for tok in argv:
        if skip:
            skip = False
            if not tok.startswith("--"):
                continue
        if tok.startswith("--testbed-"):
            skip = "=" not in tok
            continue
        out.append(tok)
    return " ".join([program, *(shlex.quote(t) for t in out)])
