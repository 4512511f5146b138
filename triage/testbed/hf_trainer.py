"""The HF Trainer variant: the same GRPO job run the way TRL's GRPOTrainer runs it.

The policy is the HF model itself (no Megatron layout); completions come from the
engine, synced from the policy before each generation (TRL's vLLM server mode). Each
optimizer step appends one entry to `log_history` with TRL's metric names (`loss`,
`grad_norm`, `learning_rate`, `num_tokens`, `completions/*`, `rewards/<fn>/mean|std`,
`reward`, `reward_std`, `frac_reward_zero_std`, `kl`, `entropy`, `clip_ratio/*`,
`epoch`, `step`), and the Trainer writes `output_dir/trainer_state.json` at every save
and at the end, with `checkpoint-N/` directories (model.safetensors, config.json,
trainer_state.json) every `--save-interval` steps.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import torch

from triage.testbed import arguments
from triage.testbed.rollout import RolloutManager, Status
from triage.testbed.slime_log import SlimeLog


def _masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (x * mask).sum() / mask.sum().clamp(min=1.0)


def _state(args: argparse.Namespace, log_history: list[dict[str, Any]], step: int, max_steps: int) -> dict[str, Any]:
    return {
        "best_global_step": None,
        "best_metric": None,
        "best_model_checkpoint": None,
        "epoch": log_history[-1]["epoch"] if log_history else 0.0,
        "eval_steps": 500,
        "global_step": step,
        "is_hyper_param_search": False,
        "is_local_process_zero": True,
        "is_world_process_zero": True,
        "log_history": log_history,
        "logging_steps": 1,
        "max_steps": max_steps,
        "num_input_tokens_seen": 0,
        "num_train_epochs": 1,
        "save_steps": args.save_interval or max_steps,
        "stateful_callbacks": {"TrainerControl": {"args": {
            "should_epoch_stop": False, "should_evaluate": False, "should_log": False,
            "should_save": True, "should_training_stop": step >= max_steps}, "attributes": {}}},
        "total_flos": 0.0,
        "train_batch_size": args.rollout_batch_size * args.n_samples_per_prompt,
        "trial_name": None,
        "trial_params": None,
    }


def _write_state(path: Path, state: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(state, indent=2, sort_keys=True) + "\n")


def trl_command(flags: dict[str, Any]) -> str:
    """The command line a TRL user runs for the same job (what cmdline.txt records for this variant)."""
    get = flags.get
    n = int(get("--n-samples-per-prompt", "8"))
    parts = [
        "trl grpo", f"--model_name_or_path {get('--hf-checkpoint', 'hf')}",
        f"--dataset_name {get('--prompt-data', 'data/prompts.jsonl')}",
        f"--output_dir {get('--testbed-output-dir', 'output')}",
        f"--learning_rate {get('--lr', '1e-5')}", f"--num_generations {n}",
        f"--per_device_train_batch_size {int(get('--rollout-batch-size', '4')) * n}",
        f"--max_completion_length {get('--rollout-max-response-len', '8')}",
        f"--temperature {get('--rollout-temperature', '1.0')}", f"--max_steps {get('--num-rollout', '3')}",
        f"--save_steps {get('--save-interval', '2')}", "--logging_steps 1", "--beta 0.0",
        f"--epsilon {get('--eps-clip', '0.2')}", f"--epsilon_high {get('--eps-clip-high', '0.2')}",
        f"--max_grad_norm {get('--clip-grad', '1.0')}", f"--seed {get('--seed', '42')}",
    ]
    return " ".join(parts)


def run(argv: list[str]) -> int:
    from safetensors.torch import save_file

    from triage.testbed.engine import Engine
    from triage.testbed.hf_models import load_model
    from triage.testbed.tokenizer import load_tokenizer

    args = arguments.parse(argv)
    arguments.validate(args, [])
    out = Path(args.testbed_output_dir or "output")
    torch.manual_seed(args.seed)
    tok = load_tokenizer(Path(args.hf_checkpoint))
    policy = load_model(Path(args.hf_checkpoint)).train()
    engine = Engine(Path(args.hf_checkpoint))
    quiet = SlimeLog(args.testbed_log or "/dev/null")
    manager = RolloutManager(args, tok, engine, quiet)
    reward_name = (args.custom_rm_path or "addition_rm").rsplit(".", 1)[-1]
    optimizer = torch.optim.AdamW(policy.parameters(), lr=args.lr, betas=(args.adam_beta1, args.adam_beta2),
                                  eps=args.adam_eps, weight_decay=args.weight_decay)
    max_steps = args.num_rollout
    log_history: list[dict[str, Any]] = []
    num_tokens = 0
    start = time.time()
    epoch_size = len(manager.data.rows) / args.rollout_batch_size
    for step in range(1, max_steps + 1):
        engine.update_weights_from_tensor([(n, p.detach()) for n, p in policy.named_parameters()], flush=False)
        samples = manager.generate(step - 1)
        raw = torch.tensor([float(s.reward) for s in samples])
        groups = raw.view(-1, args.n_samples_per_prompt)
        mean, std = groups.mean(-1, keepdim=True), groups.std(-1, keepdim=True)
        advantages = ((groups - mean) / (std + 1e-4)).flatten()
        width = max(len(s.tokens) for s in samples)
        ids = torch.zeros((len(samples), width), dtype=torch.long)
        mask = torch.zeros((len(samples), width))
        for i, s in enumerate(samples):
            ids[i, : len(s.tokens)] = torch.tensor(s.tokens)
            mask[i, len(s.tokens) - s.response_length: len(s.tokens)] = 1.0
        logits = policy(input_ids=ids).logits[:, :-1].float() / args.rollout_temperature
        lsm = torch.log_softmax(logits, -1)
        logps = lsm.gather(-1, ids[:, 1:, None])[..., 0]
        cmask = mask[:, 1:]
        entropy = -(lsm.exp() * lsm).sum(-1)
        old = logps.detach()
        ratio = torch.exp(logps - old)
        adv = advantages[:, None]
        per_token = -torch.minimum(ratio * adv, ratio.clamp(1 - args.eps_clip, 1 + args.eps_clip_high) * adv)
        loss = (per_token * cmask).sum() / cmask.sum().clamp(min=1.0)
        optimizer.zero_grad()
        loss.backward()
        grad_norm = float(torch.nn.utils.clip_grad_norm_(policy.parameters(), args.clip_grad))
        optimizer.step()
        lengths = [s.response_length for s in samples]
        terminated = [s.response_length for s in samples if s.status != Status.TRUNCATED] or [0]
        num_tokens += int(sum(len(s.tokens) for s in samples))
        zero_std = float((groups.std(-1) == 0).float().mean())
        low = (ratio < 1 - args.eps_clip) & (adv < 0)
        high = (ratio > 1 + args.eps_clip_high) & (adv > 0)
        entry = {
            "clip_ratio/high_max": float(_masked_mean(high.float(), cmask)),
            "clip_ratio/high_mean": float(_masked_mean(high.float(), cmask)),
            "clip_ratio/low_mean": float(_masked_mean(low.float(), cmask)),
            "clip_ratio/low_min": float(_masked_mean(low.float(), cmask)),
            "clip_ratio/region_mean": float(_masked_mean((low | high).float(), cmask)),
            "completions/clipped_ratio": float(sum(s.status == Status.TRUNCATED for s in samples)) / len(samples),
            "completions/max_length": float(max(lengths)),
            "completions/max_terminated_length": float(max(terminated)),
            "completions/mean_length": float(sum(lengths)) / len(lengths),
            "completions/mean_terminated_length": float(sum(terminated)) / len(terminated),
            "completions/min_length": float(min(lengths)),
            "completions/min_terminated_length": float(min(terminated)),
            "entropy": float(_masked_mean(entropy.detach(), cmask)),
            "epoch": round(step / epoch_size, 4),
            "frac_reward_zero_std": zero_std,
            "grad_norm": grad_norm,
            "kl": 0.0,
            "learning_rate": args.lr,
            "loss": float(loss.detach()),
            "num_tokens": float(num_tokens),
            "reward": float(raw.mean()),
            "reward_std": float(groups.std(-1).mean()),
            f"rewards/{reward_name}/mean": float(raw.mean()),
            f"rewards/{reward_name}/std": float(raw.std()),
            "step": step,
        }
        log_history.append(entry)
        if args.save_interval and step % args.save_interval == 0:
            ckpt = out / f"checkpoint-{step}"
            ckpt.mkdir(parents=True, exist_ok=True)
            save_file({n: p.detach().contiguous() for n, p in policy.state_dict().items()}, str(ckpt / "model.safetensors"),
                      metadata={"format": "pt"})
            policy.config.to_json_file(str(ckpt / "config.json"))
            _write_state(ckpt / "trainer_state.json", _state(args, list(log_history), step, max_steps))
    runtime = time.time() - start
    log_history.append({"epoch": log_history[-1]["epoch"], "step": max_steps, "total_flos": 0.0,
                        "train_loss": sum(e["loss"] for e in log_history) / len(log_history),
                        "train_runtime": round(runtime, 4),
                        "train_samples_per_second": round(max_steps * len(samples) / runtime, 3),
                        "train_steps_per_second": round(max_steps / runtime, 3)})
    _write_state(out / "trainer_state.json", _state(args, log_history, max_steps, max_steps))
    quiet.close()
    return 0
