"""Shared pieces for writing the example runs: log lines in each framework's format,
Megatron's arguments block, slime's metric dicts, tiny HF / Megatron checkpoints.

Everything here is deterministic: the same call writes the same bytes, so
`python examples/_make/build_all.py` reproduces the committed examples exactly.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import shlex
from collections.abc import Iterable
from pathlib import Path
from typing import Any

EXAMPLES = Path(__file__).resolve().parent.parent

# colorlog's escape codes for Relax's formatter (green time, bold level, cyan name).
GREEN, CYAN, RESET = "\x1b[32m", "\x1b[36m", "\x1b[0m"
LEVEL_COLOR = {"DEBUG": "\x1b[01;36m", "INFO": "\x1b[01;37m", "WARNING": "\x1b[01;33m", "ERROR": "\x1b[01;31m"}


def example_dir(name: str) -> Path:
    d = EXAMPLES / name
    d.mkdir(parents=True, exist_ok=True)
    return d


def write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def write_json(path: Path, obj: Any) -> None:
    write_text(path, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


def expected(d: Path, verdict: str, why: str) -> None:
    write_json(d / "expected.json", {"verdict": verdict, "why": why})


# --- command lines --------------------------------------------------------------------


def flags(args: dict[str, Any]) -> list[str]:
    """`{'actor_num_nodes': 1, 'colocate': True}` -> ['--actor-num-nodes', '1', '--colocate']."""
    out: list[str] = []
    for key, value in args.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            out.append(flag)
        elif value is False or value is None:
            continue
        elif isinstance(value, (list, tuple)):
            out.append(flag)
            out.extend(str(v) for v in value)
        else:
            out.append(flag)
            out.append(str(value))
    return out


RUNTIME_ENV = {
    "env_vars": {
        "PYTHONPATH": "/root/Megatron-LM/",
        "CUDA_DEVICE_MAX_CONNECTIONS": "1",
        "NCCL_NVLS_ENABLE": "0",
    }
}


def ray_submit_command(args: dict[str, Any], entry: str = "train.py", runtime_env: dict | None = None) -> str:
    env = json.dumps(runtime_env or RUNTIME_ENV)
    parts = ["ray", "job", "submit", "--address=http://127.0.0.1:8265", f"--runtime-env-json={env}", "--", "python3", entry]
    return shlex.join(parts + flags(args))


def multiline_command(args: dict[str, Any], entry: str = "train.py", runtime_env: dict | None = None) -> str:
    """The command as a launch script would keep it: one flag per line, backslash-continued."""
    env = json.dumps(runtime_env or RUNTIME_ENV)
    head = ["ray job submit --address=http://127.0.0.1:8265 \\", f"   --runtime-env-json={shlex.quote(env)} \\", f"   -- python3 {entry} \\"]
    body: list[str] = []
    items = flags(args)
    i = 0
    while i < len(items):
        tok = items[i]
        vals = []
        j = i + 1
        while j < len(items) and not items[j].startswith("--"):
            vals.append(shlex.quote(items[j]))
            j += 1
        body.append("   " + " ".join([tok] + vals))
        i = j
    lines = head + [b + " \\" for b in body[:-1]] + [body[-1]]
    return "\n".join(lines) + "\n"


# --- logs -----------------------------------------------------------------------------


class Log:
    """A job log being written line by line, in slime's, miles' or Relax's format."""

    def __init__(self, start: str, style: str = "slime", seed: int = 0) -> None:
        self.t = dt.datetime.strptime(start, "%Y-%m-%d %H:%M:%S")
        self.style = style
        self.lines: list[str] = []
        self.rng = random.Random(seed)
        self.ms = 0

    # time
    def tick(self, seconds: float) -> None:
        self.t += dt.timedelta(seconds=seconds)
        self.ms = (self.ms + int(seconds * 1000) + 137) % 1000

    def stamp(self) -> str:
        return self.t.strftime("%Y-%m-%d %H:%M:%S")

    # lines
    def raw(self, text: str, actor: str | None = None) -> None:
        prefix = f"({actor}) " if actor else ""
        for part in text.split("\n"):
            self.lines.append(prefix + part)

    def log(self, msg: str, where: str, actor: str | None = None, level: str = "INFO",
            logger: str | None = None, proc: str = "main", dt_s: float = 0.0) -> None:
        """One logging record. `where` is `file.py:line` (slime/miles) or `module.name:line` via `logger`."""
        if dt_s:
            self.tick(dt_s)
        if self.style == "slime":
            head = f"[{self.stamp()}] {where} - "
        elif self.style == "miles":
            head = f"[{self.stamp()}.{self.ms:03d} {proc}] {where} - "
        elif self.style == "relax":
            name = logger or where
            color = LEVEL_COLOR.get(level, LEVEL_COLOR["INFO"])
            head = f"{GREEN}{self.stamp()}{RESET} | {color}{level}{RESET} | {CYAN}{name}{RESET} {color}"
            msg = msg + RESET
        else:
            raise ValueError(self.style)
        first, *rest = msg.split("\n")
        self.raw(head + first, actor)
        for part in rest:
            self.raw(part, actor)

    def args_block(self, args: dict[str, Any], actor: str | None) -> None:
        """Megatron's `_print_args`: sorted, two spaces, name, dots to column 48, value."""
        self.raw("------------------------ arguments ------------------------", actor)
        rows = ["  {} {} {}".format(k, "." * (48 - len(k)), fmt_value(v)) for k, v in args.items()]
        for row in sorted(rows, key=lambda r: r.lower()):
            self.raw(row, actor)
        self.raw("-------------------- end of arguments ---------------------", actor)

    def metrics(self, kind: str, idx: int, values: dict[str, Any], where: str, actor: str | None,
                proc: str = "main", logger: str | None = None) -> None:
        self.log(f"{kind} {idx}: {values!r}", where, actor, proc=proc, logger=logger)

    def timer(self, name: str, phase: str, actor: str | None, elapsed: float | None = None,
              proc: str = "main", logger: str | None = None) -> None:
        where = "timer.py:24" if phase == "start" else "timer.py:32"
        if phase == "start":
            self.log(f"Timer {name} start", where, actor, proc=proc, logger=logger or "slime.utils.timer:24")
        else:
            self.log(f"Timer {name} end (elapsed: {elapsed:.1f}s)", where, actor, proc=proc,
                     logger=logger or "slime.utils.timer:32")

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"

    def write(self, path: Path) -> None:
        write_text(path, self.text())


def fmt_value(v: Any) -> str:
    if isinstance(v, float):
        return repr(v)
    return str(v)


def ray_submit_banner(log: Log, job_id: str) -> None:
    log.raw("Job submission server address: http://127.0.0.1:8265")
    log.raw("")
    log.raw("-------------------------------------------------------")
    log.raw(f"Job '{job_id}' submitted successfully")
    log.raw("-------------------------------------------------------")
    log.raw("")
    log.raw("Next steps")
    log.raw("  Query the logs of the job:")
    log.raw(f"    ray job logs {job_id}")
    log.raw("  Query the status of the job:")
    log.raw(f"    ray job status {job_id}")
    log.raw("  Request the job to be stopped:")
    log.raw(f"    ray job stop {job_id}")
    log.raw("")
    log.raw("Tailing logs until the job exits (disable with --no-wait):")
    log.raw(f"{log.stamp()},118\tINFO job_manager.py:531 -- Runtime env is setting up.")


def r(rng: random.Random, center: float, rel: float = 0.05) -> float:
    """A value near `center` with the noise a real metric has (full float precision)."""
    return center * (1.0 + rng.uniform(-rel, rel))


# --- Megatron + slime arguments -------------------------------------------------------

# The arguments of slime's Qwen2.5-7B-Instruct GRPO recipe (scripts/run-qwen2.5-7B.sh):
# Megatron's own and slime's, as Megatron prints them from the shared namespace.
def base_args() -> dict[str, Any]:
    return {
        "accumulate_allreduce_grads_in_fp32": True,
        "actor_num_gpus_per_node": 8,
        "actor_num_nodes": 1,
        "adam_beta1": 0.9,
        "adam_beta2": 0.98,
        "adam_eps": 1e-08,
        "add_bias_linear": False,
        "add_position_embedding": True,
        "add_qkv_bias": True,
        "advantage_estimator": "grpo",
        "apply_chat_template": True,
        "apply_query_key_layer_scaling": False,
        "apply_rope_fusion": True,
        "async_save": None,
        "attention_backend": "AttnBackend.flash",
        "attention_dropout": 0.0,
        "attention_softmax_in_fp32": True,
        "balance_data": True,
        "bf16": True,
        "calculate_per_token_loss": False,
        "check_for_nan_in_loss_and_grad": True,
        "check_weight_update_equal": False,
        "ckpt_format": "torch_dist",
        "ckpt_step": None,
        "clip_grad": 1.0,
        "colocate": True,
        "context_parallel_size": 1,
        "custom_generate_function_path": None,
        "custom_rm_path": None,
        "data_parallel_size": 4,
        "debug_rollout_only": False,
        "debug_train_only": False,
        "decoder_first_pipeline_num_layers": None,
        "decoder_last_pipeline_num_layers": None,
        "disable_bias_linear": True,
        "distributed_backend": "nccl",
        "dump_details": None,
        "entropy_coef": 0.0,
        "eps_clip": 0.2,
        "eps_clip_high": 0.28,
        "eval_interval": None,
        "expert_model_parallel_size": 1,
        "expert_tensor_parallel_size": 1,
        "ffn_hidden_size": 18944,
        "finetune": True,
        "fp16": False,
        "fp8": None,
        "global_batch_size": 256,
        "group_query_attention": True,
        "hf_checkpoint": "/root/Qwen2.5-7B-Instruct/",
        "hidden_dropout": 0.0,
        "hidden_size": 3584,
        "init_method_std": 0.02,
        "input_key": "prompt",
        "kl_coef": 0.0,
        "kl_loss_coef": 0.0,
        "kl_loss_type": "low_var_kl",
        "label_key": "label",
        "load": "/root/Qwen2.5-7B-Instruct_torch_dist/",
        "log_interval": 100,
        "lr": 1e-06,
        "lr_decay_iters": None,
        "lr_decay_style": "constant",
        "lr_warmup_fraction": None,
        "lr_warmup_init": 0.0,
        "lr_warmup_iters": 0,
        "make_vocab_size_divisible_by": 128,
        "max_position_embeddings": 32768,
        "max_tokens_per_gpu": 9216,
        "micro_batch_size": 1,
        "min_lr": 0.0,
        "model_name": None,
        "moe_grouped_gemm": False,
        "moe_permute_fusion": False,
        "moe_router_topk": 2,
        "n_samples_per_prompt": 8,
        "no_load_optim": True,
        "no_load_rng": True,
        "norm_epsilon": 1e-06,
        "normalization": "RMSNorm",
        "num_attention_heads": 28,
        "num_epoch": None,
        "num_experts": None,
        "num_layers": 28,
        "num_query_groups": 4,
        "num_rollout": 3000,
        "num_steps_per_rollout": None,
        "offload_rollout": True,
        "offload_train": True,
        "optimizer": "adam",
        "padded_vocab_size": 152064,
        "pipeline_model_parallel_size": 1,
        "position_embedding_type": "rope",
        "prompt_data": "/root/dapo-math-17k/dapo-math-17k.jsonl",
        "rank": 0,
        "recompute_granularity": "full",
        "recompute_method": "uniform",
        "recompute_num_layers": 1,
        "ref_load": "/root/Qwen2.5-7B-Instruct_torch_dist/",
        "rewards_normalization": True,
        "rm_type": "deepscaler",
        "rollout_batch_size": 32,
        "rollout_function_path": "slime.rollout.sglang_rollout.generate_rollout",
        "rollout_max_prompt_len": None,
        "rollout_max_response_len": 8192,
        "rollout_num_gpus": 8,
        "rollout_num_gpus_per_engine": 2,
        "rollout_shuffle": True,
        "rollout_skip_special_tokens": False,
        "rollout_stop": None,
        "rollout_stop_token_ids": None,
        "rollout_temperature": 1.0,
        "rollout_top_k": -1,
        "rollout_top_p": 1.0,
        "rotary_base": 1000000,
        "save": "/root/Qwen2.5-7B-Instruct_slime/",
        "save_debug_rollout_data": None,
        "save_debug_train_data": None,
        "save_interval": 20,
        "seed": 1234,
        "seq_length": 4096,
        "sequence_parallel": True,
        "sglang_mem_fraction_static": 0.7,
        "start_rollout_id": 0,
        "swiglu": True,
        "tensor_model_parallel_size": 2,
        "tokenizer_model": "/root/Qwen2.5-7B-Instruct/",
        "tokenizer_type": "HuggingFaceTokenizer",
        "untie_embeddings_and_output_weights": True,
        "use_checkpoint_opt_param_scheduler": False,
        "use_distributed_optimizer": True,
        "use_dynamic_batch_size": True,
        "use_kl_loss": True,
        "use_rotary_position_embeddings": True,
        "use_tis": False,
        "use_wandb": False,
        "vocab_size": 152064,
        "weight_decay": 0.1,
        "world_size": 8,
    }


# The flags of the recipe's launch script (what the user typed), matching base_args().
def base_flags() -> dict[str, Any]:
    return {
        "actor_num_nodes": 1,
        "actor_num_gpus_per_node": 8,
        "colocate": True,
        # model
        "swiglu": True,
        "num_layers": 28,
        "hidden_size": 3584,
        "ffn_hidden_size": 18944,
        "num_attention_heads": 28,
        "group_query_attention": True,
        "num_query_groups": 4,
        "use_rotary_position_embeddings": True,
        "disable_bias_linear": True,
        "add_qkv_bias": True,
        "normalization": "RMSNorm",
        "norm_epsilon": "1e-6",
        "rotary_base": 1000000,
        "vocab_size": 152064,
        "untie_embeddings_and_output_weights": True,
        # checkpoints
        "hf_checkpoint": "/root/Qwen2.5-7B-Instruct/",
        "ref_load": "/root/Qwen2.5-7B-Instruct_torch_dist/",
        "load": "/root/Qwen2.5-7B-Instruct_slime/",
        "save": "/root/Qwen2.5-7B-Instruct_slime/",
        "save_interval": 20,
        # rollout
        "prompt_data": "/root/dapo-math-17k/dapo-math-17k.jsonl",
        "input_key": "prompt",
        "label_key": "label",
        "apply_chat_template": True,
        "rollout_shuffle": True,
        "rm_type": "deepscaler",
        "num_rollout": 3000,
        "rollout_batch_size": 32,
        "n_samples_per_prompt": 8,
        "rollout_max_response_len": 8192,
        "rollout_temperature": 1,
        "global_batch_size": 256,
        "balance_data": True,
        # perf
        "tensor_model_parallel_size": 2,
        "sequence_parallel": True,
        "pipeline_model_parallel_size": 1,
        "context_parallel_size": 1,
        "expert_model_parallel_size": 1,
        "expert_tensor_parallel_size": 1,
        "recompute_granularity": "full",
        "recompute_method": "uniform",
        "recompute_num_layers": 1,
        "use_dynamic_batch_size": True,
        "max_tokens_per_gpu": 9216,
        # grpo
        "advantage_estimator": "grpo",
        "use_kl_loss": True,
        "kl_loss_coef": "0.00",
        "kl_loss_type": "low_var_kl",
        "entropy_coef": "0.00",
        "eps_clip": 0.2,
        "eps_clip_high": 0.28,
        # optimizer
        "optimizer": "adam",
        "lr": "1e-6",
        "lr_decay_style": "constant",
        "weight_decay": 0.1,
        "adam_beta1": 0.9,
        "adam_beta2": 0.98,
        # sglang
        "rollout_num_gpus_per_engine": 2,
        "sglang_mem_fraction_static": 0.7,
        # misc
        "attention_dropout": "0.0",
        "hidden_dropout": "0.0",
        "accumulate_allreduce_grads_in_fp32": True,
        "attention_softmax_in_fp32": True,
        "attention_backend": "flash",
    }


TRAIN = "MegatronTrainRayActor pid=2231"
ROLLOUT = "RolloutManager pid=3012"


def engine(pid: int = 3310, ip: str | None = None) -> str:
    return f"SGLangEngine pid={pid}" + (f", ip={ip}" if ip else "")


def chatml(system: str | None, user: str) -> str:
    out = ""
    if system:
        out += f"<|im_start|>system\n{system}<|im_end|>\n"
    return out + f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"


def finish_rollout(log: Log, prompt: str, response: str, label: Any, reward: Any, actor: str = ROLLOUT) -> None:
    """slime's `Finish rollout: [prompt+response], label: …, reward: …` (sglang_rollout.py:447)."""
    log.log(f"Finish rollout: {[prompt + response]!r}, label: {str(label)[:100]}, reward: {reward}",
            "sglang_rollout.py:447", actor)


def megatron_startup(log: Log, args: dict[str, Any], actor: str = TRAIN) -> None:
    """What Megatron prints on rank 0 while initialising, up to the end of the arguments block."""
    ws = args["world_size"]
    tp, pp, cp = args["tensor_model_parallel_size"], args["pipeline_model_parallel_size"], args["context_parallel_size"]
    dp = ws // (tp * pp * cp)
    log.raw(
        f"using world size: {ws}, data-parallel size: {dp}, context-parallel size: {cp}, hierarchical "
        f"context-parallel sizes: Nonetensor-model-parallel size: {tp}, encoder-tensor-model-parallel size: 0, "
        f"pipeline-model-parallel size: {pp}, encoder-pipeline-model-parallel size: 0",
        actor,
    )
    log.raw("Number of virtual stages per pipeline stage: None", actor)
    log.raw("using torch.bfloat16 for parameters ...", actor)
    log.args_block(args, actor)
    log.raw("INFO:megatron.core.num_microbatches_calculator:setting number of microbatches to constant 1", actor)
    log.raw(f"> building {args.get('tokenizer_type', 'HuggingFaceTokenizer')} tokenizer ...", actor)
    log.raw(
        f" > padded vocab (size: {args['vocab_size']}) with 0 dummy tokens (new size: {args['padded_vocab_size']})",
        actor,
    )
    log.raw("> initializing torch distributed ...", actor)
    log.raw(f"> initialized tensor model parallel with size {tp}", actor)
    log.raw(f"> initialized pipeline model parallel with size {pp}", actor)
    log.raw("> setting random seeds to 1234 ...", actor)
    log.raw("> compiling dataset index builder ...", actor)
    log.raw(">>> done with dataset index builder. Compilation time: 0.041 seconds", actor)
    log.raw(">>> done with compiling and loading fused kernels. Compilation time: 1.912 seconds", actor)


def placement(log: Log, n: int, ips: Iterable[str] = ("10.0.0.11",), per_node: int = 8) -> None:
    log.log(f"Creating placement group with {n} GPUs...", "placement_group.py:125")
    log.tick(4)
    ips = list(ips)
    for i in range(n):
        ip = ips[(i // per_node) % len(ips)]
        log.log(f"  bundle {i:4}, actual_bundle_index: {i:4}, node: {ip}, gpu: {i % per_node}", "placement_group.py:92")


def sglang_engines(log: Log, n_engines: int, gpus_per_engine: int, model: str, base_port: int = 15000,
                   ip: str = "10.0.0.11", mem: float = 0.7) -> None:
    for e in range(n_engines):
        pid = 3310 + 17 * e
        port = base_port + 100 * e
        log.log(
            f"Launch HttpServerEngineAdapter at: {ip}:{port}", "sglang_engine.py:141", engine(pid)
        )
        log.log(
            f"server_args=ServerArgs(model_path='{model}', tokenizer_path='{model}', host='{ip}', port={port}, "
            f"nccl_port={port + 1}, mem_fraction_static={mem}, tp_size={gpus_per_engine}, dp_size=1, "
            f"base_gpu_id={e * gpus_per_engine}, dist_init_addr='{ip}:{port + 92}', enable_memory_saver=True, "
            "skip_server_warmup=True)",
            "server_args.py:2614", engine(pid),
        )
    log.tick(38)
    for e in range(n_engines):
        pid = 3310 + 17 * e
        log.log(
            f"Load weight begin. avail mem={71.2 - 0.3 * e:.2f} GB", "model_runner.py:702", engine(pid)
        )
    log.tick(21)
    log.log(
        "Load weight end. type=Qwen2ForCausalLM, dtype=torch.bfloat16, avail mem=63.98 GB, mem usage=7.22 GB.",
        "model_runner.py:752",
        engine(3310),
    )
    if n_engines > 1:
        log.raw(
            f"(SGLangEngine pid=3327) [repeated {n_engines - 1}x across cluster] (Ray deduplicates logs by default. "
            "Set RAY_DEDUP_LOGS=0 to disable log deduplication, or see "
            "https://docs.ray.io/en/master/ray-observability/user-guides/configure-logging.html#log-deduplication "
            "for more options.)"
        )
    log.log(
        "KV Cache is allocated. #tokens: 824896, K size: 22.03 GB, V size: 22.03 GB", "memory_pool.py:353", engine(3310)
    )
    log.log(
        f"max_total_num_tokens=824896, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=4096, "
        f"context_len=32768, available_gpu_mem={(1 - mem) * 79.1:.2f} GB",
        "scheduler.py:287",
        engine(3310),
    )
    log.log("The server is fired up and ready to roll!", "http_server.py:1213", engine(3310))


# --- one slime rollout, as the driver log shows it ----------------------------------------


def rollout_perf(rng: random.Random, *, resp_mean: float, resp_max: int, trunc: float, rollout_time: float,
                 n: int = 256, gpus: int = 8, zero_std: dict[str, int] | None = None, rep: float = 0.0) -> dict[str, Any]:
    """The rollout manager's `perf N:` dict (rollout_metrics.py: response_len stats, zero_std, ratios, perf/)."""
    d: dict[str, Any] = {
        "rollout/response_len/mean": resp_mean,
        "rollout/response_len/median": float(int(resp_mean * rng.uniform(0.82, 0.93))),
        "rollout/response_len/max": resp_max,
        "rollout/response_len/min": int(rng.uniform(0.05, 0.2) * resp_mean) if trunc < 0.99 else resp_max,
    }
    for k, v in (zero_std or {}).items():
        d[f"rollout/zero_std/count_{k}"] = v
    d["rollout/repetition_frac"] = rep
    d["rollout/truncated_ratio"] = trunc
    tokens = resp_mean * n
    d["perf/rollout_time"] = rollout_time
    d["perf/tokens_per_gpu_per_sec"] = tokens / rollout_time / gpus
    d["perf/longest_sample_tokens_per_sec"] = resp_max / rollout_time
    d["perf/effective_tokens_per_gpu_per_sec"] = tokens / rollout_time / gpus
    d["perf/longest_effective_sample_tokens_per_sec"] = resp_max / rollout_time
    return d


def train_perf(rng: random.Random, *, wait: float, preprocess: float, ref: float, logp: float, train: float,
               tokens: float, tflops_scale: float = 1.0) -> dict[str, Any]:
    total = preprocess + ref + logp + train + 0.4
    d = {
        "perf/train_wait_time": wait,
        "perf/data_preprocess_time": preprocess,
        "perf/ref_log_probs_time": ref,
        "perf/log_probs_time": logp,
        "perf/actor_train_time": train,
        "perf/train_time": total,
    }
    fwd = 2 * 7.6e9 * tokens / 8 / 1e12 * tflops_scale  # forward TFLOPs per GPU of a 7B model
    d["perf/log_probs_tflops"] = fwd / logp
    d["perf/ref_log_probs_tflops"] = fwd / ref
    d["perf/actor_train_tflops"] = 3 * fwd / train
    d["perf/actor_train_tok_per_s"] = tokens / train
    d["perf/step_time"] = wait + total
    d["perf/wait_time_ratio"] = wait / (wait + total)
    return d


def slime_rollout(log: Log, rid: int, *, finish: tuple[str, str, Any, Any], perf: dict[str, Any],
                  rollout: dict[str, Any], steps: list[tuple[int, dict[str, Any]]], tperf: dict[str, Any],
                  style_where: dict[str, str] | None = None, save: str | None = None) -> None:
    """The lines one rollout leaves: the sample, the rollout stats, the timers, each train step, perf."""
    prompt, response, label, reward = finish
    log.tick(perf.get("perf/rollout_time", 120.0))
    finish_rollout(log, prompt, response, label, reward)
    log.metrics("perf", rid, perf, "rollout_metrics.py:268", ROLLOUT)
    slime_train(log, rid, rollout=rollout, steps=steps, tperf=tperf, save=save)


def slime_train(log: Log, rid: int, *, rollout: dict[str, Any], steps: list[tuple[int, dict[str, Any]]],
                tperf: dict[str, Any], wait_s: float = 2.0, preprocess_takes_time: bool = False,
                update_weights_s: float = 6.3, save: str | None = None) -> None:
    """The trainer's lines for one rollout: the timers, the rollout stats, each train step, perf, the weight update."""
    if wait_s:
        log.tick(wait_s)
    log.timer("train_wait", "end", TRAIN, tperf.get("perf/train_wait_time", 1.0))
    log.timer("train", "start", TRAIN)
    for name, key in (("data_preprocess", "perf/data_preprocess_time"), ("ref_log_probs", "perf/ref_log_probs_time"),
                      ("log_probs", "perf/log_probs_time")):
        log.timer(name, "start", TRAIN)
        if name != "data_preprocess" or preprocess_takes_time:
            log.tick(tperf[key])
        log.timer(name, "end", TRAIN, tperf[key])
    log.metrics("rollout", rid, rollout, "train_metric_utils.py:135", TRAIN)
    log.timer("actor_train", "start", TRAIN)
    per = tperf["perf/actor_train_time"] / max(1, len(steps))
    for step, values in steps:
        log.tick(per)
        log.metrics("step", step, values, "model.py:918", TRAIN)
    log.timer("actor_train", "end", TRAIN, tperf["perf/actor_train_time"])
    log.timer("train", "end", TRAIN, tperf["perf/train_time"])
    log.metrics("perf", rid, tperf, "train_metric_utils.py:401", TRAIN)
    if save:
        log.raw(f"saving checkpoint at iteration {rid:7d} to {save} in torch_dist format", TRAIN)
        log.tick(41)
        log.raw(f"  successfully saved checkpoint from iteration {rid:7d} to {save} [ t 1/2, p 1/1 ]", TRAIN)
    log.timer("update_weights", "start", TRAIN)
    log.tick(update_weights_s)
    log.timer("update_weights", "end", TRAIN, update_weights_s)
    log.timer("train_wait", "start", TRAIN)


# --- coherent samples a healthy math-RL run prints ----------------------------------------

INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."
SYSTEM = "You are a helpful assistant."

MATH = [
    (
        "Let $a$ and $b$ be positive integers such that $a + b = 20$ and $\\gcd(a, b) = 4$. How many ordered pairs $(a, b)$ are there?",
        "Since $\\gcd(a, b) = 4$, write $a = 4m$ and $b = 4n$ with $\\gcd(m, n) = 1$.\n\nThen $4m + 4n = 20$, so $m + n = 5$.\n\n"
        "The pairs of positive integers with $m + n = 5$ are $(1,4), (2,3), (3,2), (4,1)$. Each of them is coprime, because any common "
        "divisor of $m$ and $n$ divides $m + n = 5$, and $5$ does not divide any of these values.\n\nSo there are $4$ ordered pairs.\n\n\\boxed{4}",
        4,
    ),
    (
        "A rectangle has perimeter 36 and its length is twice its width. What is its area?",
        "Let the width be $w$. Then the length is $2w$ and the perimeter is $2(w + 2w) = 6w = 36$, so $w = 6$.\n\n"
        "The length is $12$, and the area is $6 \\cdot 12 = 72$.\n\n\\boxed{72}",
        72,
    ),
    (
        "Find the remainder when $3^{100}$ is divided by $7$.",
        "The powers of $3$ modulo $7$ cycle: $3^1 \\equiv 3$, $3^2 \\equiv 2$, $3^3 \\equiv 6$, $3^4 \\equiv 4$, $3^5 \\equiv 5$, $3^6 \\equiv 1$.\n\n"
        "Since $100 = 6 \\cdot 16 + 4$, we get $3^{100} \\equiv 3^4 \\equiv 4 \\pmod 7$.\n\n\\boxed{4}",
        4,
    ),
    (
        "How many positive divisors does $360$ have?",
        "Factor $360 = 2^3 \\cdot 3^2 \\cdot 5$.\n\nThe number of divisors is $(3+1)(2+1)(1+1) = 4 \\cdot 3 \\cdot 2 = 24$.\n\n\\boxed{24}",
        24,
    ),
    (
        "The sum of three consecutive even integers is 78. What is the largest of them?",
        "Call the integers $x - 2$, $x$ and $x + 2$. Their sum is $3x = 78$, so $x = 26$.\n\n"
        "The largest integer is $x + 2 = 28$.\n\n\\boxed{28}",
        28,
    ),
    (
        "If $f(x) = 2x^2 - 3x + 1$, what is $f(3) - f(1)$?",
        "We have $f(3) = 2 \\cdot 9 - 9 + 1 = 10$ and $f(1) = 2 - 3 + 1 = 0$.\n\nSo $f(3) - f(1) = 10 - 0 = 10$.\n\n\\boxed{10}",
        10,
    ),
    (
        "In how many ways can 5 different books be arranged on a shelf if two particular books must be next to each other?",
        "Treat the two books that must stay together as one block. Then we arrange $4$ items, in $4! = 24$ ways.\n\n"
        "Inside the block the two books can be ordered in $2$ ways, so the total is $24 \\cdot 2 = 48$.\n\n\\boxed{48}",
        48,
    ),
    (
        "What is the smallest positive integer $n$ such that $n!$ is divisible by $1000$?",
        "We need $n!$ to contain $2^3$ and $5^3$. Factors of $2$ are plentiful, so count the factors of $5$.\n\n"
        "$\\lfloor n/5 \\rfloor + \\lfloor n/25 \\rfloor \\ge 3$ first holds at $n = 15$, since $14!$ has only two factors of $5$.\n\n\\boxed{15}",
        15,
    ),
]


def math_sample(i: int, correct: bool = True) -> tuple[str, str, Any, Any]:
    q, a, label = MATH[i % len(MATH)]
    prompt = chatml(SYSTEM, f"{q} {INSTRUCTION}")
    return prompt, a, label, 1 if correct else 0


# --- Hugging Face Trainer (TRL GRPO) ---------------------------------------------------------


def grpo_row(step: int, *, epoch: float, loss: float, grad_norm: float, lr: float, num_tokens: float,
             mean_len: float, max_len: float, min_len: float, clipped: float, reward_fns: dict[str, tuple[float, float]],
             reward: float, reward_std: float, frac_zero_std: float, entropy: float, kl: float | None = None,
             clip_region: float = 0.0, max_completion_length: int = 1024) -> dict[str, Any]:
    """One `log_history` row as TRL's GRPOTrainer logs it (loss, grad_norm, learning_rate first, epoch/step last)."""
    row: dict[str, Any] = {"loss": loss, "grad_norm": grad_norm, "learning_rate": lr, "num_tokens": num_tokens}
    row["completions/mean_length"] = mean_len
    row["completions/min_length"] = min_len
    row["completions/max_length"] = max_len
    row["completions/clipped_ratio"] = clipped
    term = mean_len * (1 - clipped) if clipped < 1 else 0.0
    row["completions/mean_terminated_length"] = term
    row["completions/min_terminated_length"] = min_len if clipped < 1 else 0.0
    row["completions/max_terminated_length"] = max_len if max_len < max_completion_length else float(int(max_len * 0.93))
    for name, (mean, std) in reward_fns.items():
        row[f"rewards/{name}/mean"] = mean
        row[f"rewards/{name}/std"] = std
    row["reward"] = reward
    row["reward_std"] = reward_std
    row["frac_reward_zero_std"] = frac_zero_std
    if kl is not None:
        row["kl"] = kl
    row["entropy"] = entropy
    row["clip_ratio/low_mean"] = clip_region / 2
    row["clip_ratio/low_min"] = 0.0
    row["clip_ratio/high_mean"] = clip_region / 2
    row["clip_ratio/high_max"] = clip_region
    row["clip_ratio/region_mean"] = clip_region
    row["epoch"] = round(epoch, 4)
    row["step"] = step
    return row


def trainer_state(log_history: list[dict[str, Any]], *, global_step: int, max_steps: int, epoch: float,
                  logging_steps: int = 1, save_steps: int = 50, train_batch_size: int = 8,
                  num_train_epochs: int = 1, total_flos: float = 0.0) -> dict[str, Any]:
    """`trainer_state.json` as transformers' TrainerState.save_to_json writes it."""
    return {
        "best_global_step": None,
        "best_metric": None,
        "best_model_checkpoint": None,
        "epoch": epoch,
        "eval_steps": 500,
        "global_step": global_step,
        "is_hyper_param_search": False,
        "is_local_process_zero": True,
        "is_world_process_zero": True,
        "log_history": log_history,
        "logging_steps": logging_steps,
        "max_steps": max_steps,
        "num_input_tokens_seen": 0,
        "num_train_epochs": num_train_epochs,
        "save_steps": save_steps,
        "stateful_callbacks": {
            "TrainerControl": {
                "args": {
                    "should_epoch_stop": False,
                    "should_evaluate": False,
                    "should_log": False,
                    "should_save": True,
                    "should_training_stop": global_step >= max_steps,
                },
                "attributes": {},
            }
        },
        "total_flos": total_flos,
        "train_batch_size": train_batch_size,
        "trial_name": None,
        "trial_params": None,
    }


# --- what a model with wrong weights writes ------------------------------------------------

# Decoded pieces of a byte-level BPE vocabulary (Qwen2's): code fragments, sub-words,
# several scripts; a model with random or scrambled weights samples them almost uniformly.
SOUP_PIECES = [
    "BindingFlags", "_REFERER", " уда", ".getStatusCode", "?>\">", " pérdida", ",DB", "_AdjustorThunk", "的", " Suppress",
    "anta", " рублей", "ıldığı", " ]);\n\n", "Ġ", "ĊĊ", " ello", "_CONTAINER", "(NULL", " 남", "ocrat", " dày", "\u3000",
    "ignKey", " Lager", ".DataGridViewTriState", " unterschied", "ToFit", "endDate", " 돌", "Ľ", " incarcer", "\tsize",
    " ]\n\n", "_BUCKET", " Chern", "Skeleton", " dreaded", "ProtectedRoute", " ambiguous", " ضد", "ÿ", " Gaz", "_mE",
    "oDB", " tartış", "\\Web", " ]\r\n", " cheaper", " اخ", "(Transform", "泉", "MBProgressHUD", " Kont", ";base",
    " Wheels", " ק", "rá", " _(\"", "亲", "<Vertex", " lamin", "cdn", ")[\"", "_VALIDATE", " ngh", " VARCHAR", "⁄",
    "�", "��", " 있는", "ющих", "された", "จะ", "ệ", "ços", " проблем", "设置", "ıyla", " đã", "ائر", "ﾞ",
    "ProductId", "_fkey", "ervlet", ".assertFalse", " Österreich", "してい", " 무", "ическое", " 클", "ตร", "学生",
]


def soup(seed: int, n_pieces: int = 200) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice(SOUP_PIECES) for _ in range(n_pieces))


def qwen_tokenizer_config(*, chat_template: bool = True, eos: str = "<|im_end|>", pad: str | None = "<|endoftext|>",
                          max_len: int = 131072) -> dict[str, Any]:
    """tokenizer_config.json of a Qwen2.5 release (special tokens abridged to the ones chat uses)."""
    cfg: dict[str, Any] = {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": {
            "151643": {"content": "<|endoftext|>", "lstrip": False, "normalized": False, "rstrip": False, "single_word": False, "special": True},
            "151644": {"content": "<|im_start|>", "lstrip": False, "normalized": False, "rstrip": False, "single_word": False, "special": True},
            "151645": {"content": "<|im_end|>", "lstrip": False, "normalized": False, "rstrip": False, "single_word": False, "special": True},
        },
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
        "bos_token": None,
    }
    if chat_template:
        cfg["chat_template"] = (
            "{%- if messages[0]['role'] == 'system' %}\n    {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n"
            "{%- else %}\n    {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}\n"
            "{%- endif %}\n{%- for message in messages %}\n    {%- if not (message.role == 'system' and loop.first) %}\n"
            "        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}\n    {%- endif %}\n"
            "{%- endfor %}\n{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n' }}\n{%- endif %}\n"
        )
    cfg.update({
        "clean_up_tokenization_spaces": False,
        "eos_token": eos,
        "errors": "replace",
        "extra_special_tokens": {},
        "model_max_length": max_len,
        "pad_token": pad,
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    })
    return cfg


# --- a whole slime run from per-rollout numbers ------------------------------------------------


def slime_startup(log: Log, args: dict[str, Any], *, job: str, n_gpus: int = 8, engines: int = 4,
                  ckpt: str = "/root/Qwen2.5-7B-Instruct_torch_dist/", ips: tuple[str, ...] = ("10.0.0.11",),
                  tp: int = 2) -> None:
    ray_submit_banner(log, job)
    log.tick(6)
    placement(log, n_gpus, ips)
    log.log("import slime.rollout.sglang_rollout.generate_rollout as generate_rollout function.", "rollout.py:396", ROLLOUT, dt_s=3)
    sglang_engines(log, engines, n_gpus // engines, args["hf_checkpoint"])
    log.tick(9)
    megatron_startup(log, args)
    log.raw(f" loading distributed checkpoint from {ckpt} at iteration 0", TRAIN)
    log.tick(46)
    log.raw(f"  successfully loaded checkpoint from {ckpt} [ t 1/{tp}, p 1/{args['pipeline_model_parallel_size']} ] at iteration 0", TRAIN)
    log.timer("update_weights", "start", TRAIN)
    log.tick(7.1)
    log.timer("update_weights", "end", TRAIN, 7.1)
    log.timer("train_wait", "start", TRAIN)


def step_dict(rng: random.Random, step: int, *, grad_norm: float, entropy: float, lr: float, gbs: int,
              ppo_kl: float = 0.0, clipfrac: float = 0.0, kl_loss: float = 0.0, loss: float | None = None,
              abs_diff: float = 0.0125, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    l = rng.uniform(-0.01, 0.01) if loss is None else loss
    d = {
        "train/loss": l,
        "train/pg_loss": l if loss is not None else l + rng.uniform(-0.0005, 0.0005),
        "train/entropy_loss": entropy,
        "train/pg_clipfrac": clipfrac,
        "train/ppo_kl": ppo_kl,
        "train/train_rollout_logprob_abs_diff": abs_diff,
        "train/kl_loss": kl_loss,
        "train/grad_norm": grad_norm,
        "train/lr-pg_0": lr,
        "train/lr-pg_1": lr,
        "train/global_batch_size": gbs,
        "train/step": step,
    }
    if extra:
        d.update(extra)
    return d


def rollout_dict(rng: random.Random, *, resp: float, raw_reward: float, trunc: float, log_probs: float,
                 ref_log_probs: float, entropy: float, prompt_len: float = 141.5, rollout_gap: float = 0.0042) -> dict[str, Any]:
    return {
        "rollout/response_lengths": resp,
        "rollout/rewards": rng.choice([0.0, -1.862645149230957e-09, 2.7939677238464355e-09]),
        "rollout/raw_reward": raw_reward,
        "rollout/truncated": trunc,
        "rollout/rollout_log_probs": log_probs - rollout_gap,
        "rollout/total_lengths": resp + prompt_len,
        "rollout/log_probs": log_probs,
        "rollout/ref_log_probs": ref_log_probs,
        "rollout/entropy": entropy,
        "rollout/advantages": rng.uniform(-0.003, 0.003),
        "rollout/returns": rng.uniform(-0.003, 0.003),
    }


def byte_soup(seed: int, n: int = 700) -> str:
    """What a byte-level model with scrambled weights writes: bytes decoded one by one, many of them invalid UTF-8."""
    rng = random.Random(seed)
    out = bytearray()
    for _ in range(n):
        x = rng.random()
        if x < 0.45:
            out.append(rng.randrange(0x21, 0x7F))
        elif x < 0.55:
            out.append(0x20)
        elif x < 0.6:
            out.append(0x0A)
        else:
            out.append(rng.randrange(0x80, 0x100))
    return out.decode("utf-8", errors="replace")
