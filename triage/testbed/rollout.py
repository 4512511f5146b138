"""The rollout side: prompt data, samples, generation through the engine, rewards.

`Sample` has the fields of slime's `slime.utils.types.Sample` that a dump carries, and
`to_dict()` is slime's (status as a string). `RolloutManager.generate` is slime's
`RolloutManager.generate` + `sglang_rollout.generate_rollout`: take
`--rollout-batch-size` prompts, sample `--n-samples-per-prompt` responses each, score
them, log `Finish rollout: ...` and the rollout manager's `perf N: {...}` line, save
`--save-debug-rollout-data`. `to_train_data` is `_convert_samples_to_train_data` with
GRPO's group normalisation of rewards.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

import numpy as np
import torch

from triage.testbed import rewards as rm
from triage.testbed import task
from triage.testbed.slime_log import ROLLOUT_MANAGER, SlimeLog


class Status(Enum):
    PENDING = "pending"
    COMPLETED = "completed"
    TRUNCATED = "truncated"
    ABORTED = "aborted"
    FAILED = "failed"


@dataclass
class Sample:
    group_index: int | None = None
    index: int | None = None
    rollout_id: int | None = None
    prompt: str | list[dict[str, str]] = ""
    tokens: list[int] = field(default_factory=list)
    multimodal_inputs: dict | None = None
    response: str = ""
    response_length: int = 0
    label: str | None = None
    reward: float | dict | None = None
    loss_mask: list[int] | None = None
    weight_versions: list[str] = field(default_factory=list)
    rollout_log_probs: list[float] | None = None
    rollout_routed_experts: Any = None
    remove_sample: bool = False
    status: Status = Status.PENDING
    metadata: dict = field(default_factory=dict)
    train_metadata: dict | None = None
    non_generation_time: float = 0.0
    spec_info: dict = field(default_factory=lambda: {"spec_accept_token_num": 0, "spec_draft_token_num": 0,
                                                     "spec_verify_ct": 0, "completion_token_num": 0})
    prefix_cache_info: dict = field(default_factory=lambda: {"cached_tokens": 0, "total_prompt_tokens": 0})

    def to_dict(self) -> dict[str, Any]:
        value = dict(self.__dict__)
        value["status"] = self.status.value
        value["spec_info"] = dict(self.spec_info)
        value["prefix_cache_info"] = dict(self.prefix_cache_info)
        return value

    @staticmethod
    def from_dict(data: dict[str, Any]) -> Sample:
        data = dict(data)
        data["status"] = Status(data.get("status", "pending"))
        known = set(Sample.__dataclass_fields__)
        return Sample(**{k: v for k, v in data.items() if k in known})

    @property
    def effective_response_length(self) -> int:
        return sum(self.loss_mask) if self.loss_mask is not None else self.response_length


class DataSource:
    """slime's prompt dataset: rows in order (shuffled per epoch with `--rollout-seed`)."""

    def __init__(self, args) -> None:
        if not args.prompt_data:
            raise ValueError("--prompt-data is required to generate rollouts")
        self.rows = task.read_prompt_data(Path(args.prompt_data), args.input_key, args.label_key)
        if not self.rows:
            raise ValueError(f"{args.prompt_data}: no prompts")
        self.shuffle = args.rollout_shuffle
        self.seed = args.rollout_seed
        self.epoch = 0
        self.offset = 0
        self.order = self._order()

    def _order(self) -> list[int]:
        return prompt_order(len(self.rows), self.shuffle, self.seed, self.epoch)

    def take(self, n: int) -> list[dict[str, Any]]:
        out = []
        while len(out) < n:
            if self.offset >= len(self.order):
                self.epoch += 1
                self.offset = 0
                self.order = self._order()
            out.append(self.rows[self.order[self.offset]])
            self.offset += 1
        return out

    def skip_rollouts(self, num: int, batch: int) -> None:
        for _ in range(num):
            self.take(batch)


def prompt_order(n: int, shuffle: bool, seed: int, epoch: int = 0) -> list[int]:
    """The order the data source serves rows in (slime shuffles each epoch with `--rollout-seed`)."""
    order = list(range(n))
    if shuffle:
        random.Random(seed + epoch).shuffle(order)
    return order


def prompt_text(row_prompt: Any, tokenizer, apply_chat_template: bool) -> str:
    if apply_chat_template:
        messages = row_prompt if isinstance(row_prompt, list) else [{"role": "user", "content": str(row_prompt)}]
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    if isinstance(row_prompt, list):
        return "".join(m.get("content", "") for m in row_prompt)
    return str(row_prompt)


def _statistics(values: list[float]) -> dict[str, float]:
    arr = np.array(values, dtype=float)
    return {"mean": np.mean(arr).item(), "median": np.median(arr).item(), "max": np.max(arr).item(),
            "min": np.min(arr).item()}


class RolloutManager:
    def __init__(self, args, tokenizer, engine, log: SlimeLog, reward_fn=None, seed_offset: int = 0) -> None:
        self.args = args
        self.tokenizer = tokenizer
        self.engine = engine
        self.log = log
        self.reward_fn = reward_fn or rm.reward_function(args)
        self.data = DataSource(args) if args.load_debug_rollout_data is None else None
        self.seed_offset = seed_offset

    def sampling_params(self) -> dict[str, Any]:
        return {
            "temperature": self.args.rollout_temperature,
            "top_p": self.args.rollout_top_p,
            "top_k": self.args.rollout_top_k,
            "max_new_tokens": self.args.rollout_max_response_len,
            "stop": self.args.rollout_stop,
            "stop_token_ids": self.args.rollout_stop_token_ids,
            "skip_special_tokens": False,
            "no_stop_trim": True,
            "spaces_between_special_tokens": False,
        }

    def generate(self, rollout_id: int) -> list[Sample]:
        """One rollout: samples generated, scored, logged and (optionally) saved."""
        args = self.args
        start = time.time()
        if args.load_debug_rollout_data is not None:
            samples = load_debug_rollout_data(args.load_debug_rollout_data, rollout_id)
            save_debug_rollout_data(self.log, args.save_debug_rollout_data, samples, rollout_id)
            return samples
        if self.engine is None:
            raise RuntimeError("--debug-train-only runs no inference engine: pass --load-debug-rollout-data "
                               "with the rollouts to train on")
        rows = self.data.take(args.rollout_batch_size)
        samples: list[Sample] = []
        for g, row in enumerate(rows):
            text = prompt_text(row["prompt"], self.tokenizer, args.apply_chat_template)
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
            for j in range(args.n_samples_per_prompt):
                samples.append(Sample(group_index=rollout_id * args.rollout_batch_size + g,
                                      index=(rollout_id * args.rollout_batch_size + g) * args.n_samples_per_prompt + j,
                                      prompt=text, tokens=list(ids), label=row["label"], metadata=dict(row["metadata"])))
        outputs = self._generate(samples, rollout_id)
        for sample, out in zip(samples, outputs):
            if out is None:  # no room left in --rollout-max-context-len: slime marks it truncated, unsent
                sample.status = Status.TRUNCATED
                sample.loss_mask = []
                sample.rollout_log_probs = []
                continue
            meta = out["meta_info"]
            new_tokens = [int(t) for _, t, _ in meta.get("output_token_logprobs", [])]
            new_lps = [float(lp) for lp, _, _ in meta.get("output_token_logprobs", [])]
            sample.tokens = sample.tokens + new_tokens
            sample.response_length = len(new_tokens)
            sample.response = self.tokenizer.decode(new_tokens, skip_special_tokens=False)
            sample.loss_mask = [1] * len(new_tokens)
            sample.rollout_log_probs = new_lps
            sample.weight_versions = [str(meta.get("weight_version", "default"))]
            sample.prefix_cache_info = {"cached_tokens": int(meta.get("cached_tokens", 0)),
                                        "total_prompt_tokens": int(meta.get("prompt_tokens", 0))}
            reason = meta["finish_reason"]["type"]
            sample.status = {"length": Status.TRUNCATED, "abort": Status.ABORTED}.get(reason, Status.COMPLETED)
        for sample, reward in zip(samples, rm.compute_rewards(self.reward_fn, args, samples)):
            sample.reward = reward
        last = samples[-args.n_samples_per_prompt]
        self.log.info(
            f"Finish rollout: {[str(last.prompt) + last.response]}, label: {str(last.label)[:100]}, reward: {last.reward}",
            "finish_rollout", actor=ROLLOUT_MANAGER,
        )
        save_debug_rollout_data(self.log, args.save_debug_rollout_data, samples, rollout_id)
        self.log_rollout_perf(rollout_id, samples, time.time() - start)
        return samples

    def _generate(self, samples: list[Sample], rollout_id: int) -> list[dict[str, Any] | None]:
        """One engine call per distinct token budget (max_new_tokens shrinks to fit the context length)."""
        args = self.args
        budgets = []
        for s in samples:
            budget = args.rollout_max_response_len
            if args.rollout_max_context_len is not None:
                budget = min(budget, args.rollout_max_context_len - len(s.tokens))
            budgets.append(max(0, budget))
        outputs: list[dict[str, Any] | None] = [None] * len(samples)
        seed = args.rollout_seed * 1_000_003 + rollout_id + self.seed_offset
        for budget in sorted(set(budgets), reverse=True):
            if budget == 0:
                continue
            idx = [i for i, b in enumerate(budgets) if b == budget]
            params = {**self.sampling_params(), "max_new_tokens": budget}
            for i, out in zip(idx, self.engine.generate([samples[i].tokens for i in idx], params,
                                                        return_logprob=True, seed=seed + budget)):
                outputs[i] = out
        return outputs

    def log_rollout_perf(self, rollout_id: int, samples: list[Sample], rollout_time: float) -> None:
        args = self.args
        log_dict: dict[str, Any] = {}
        log_dict.update({f"rollout/response_len/{k}": v
                         for k, v in _statistics([s.effective_response_length for s in samples]).items()})
        groups: dict[int, list[float]] = {}
        for s in samples:
            groups.setdefault(s.group_index, []).append(float(s.reward))
        zero_std: dict[str, int] = {}
        for rewards in groups.values():
            if all(r == rewards[0] for r in rewards):
                key = f"rollout/zero_std/count_{round(rewards[0], 1)}"
                zero_std[key] = zero_std.get(key, 0) + 1
        log_dict.update(zero_std)
        cached = sum(s.prefix_cache_info["cached_tokens"] for s in samples)
        total_prompt = sum(s.prefix_cache_info["total_prompt_tokens"] for s in samples)
        log_dict["rollout/prefix_cache_hit_rate"] = cached / total_prompt if total_prompt else 0.0
        log_dict["rollout/avg_cached_tokens_per_sample"] = cached / len(samples)
        log_dict["rollout/repetition_frac"] = 0.0
        log_dict["rollout/truncated_ratio"] = float(np.mean([int(s.status == Status.TRUNCATED) for s in samples]))
        log_dict["perf/rollout_time"] = rollout_time
        lengths = [s.response_length for s in samples]
        eff = [s.effective_response_length for s in samples]
        if args.rollout_num_gpus:
            log_dict["perf/tokens_per_gpu_per_sec"] = sum(lengths) / rollout_time / args.rollout_num_gpus
        log_dict["perf/longest_sample_tokens_per_sec"] = max(lengths) / rollout_time
        if args.rollout_num_gpus:
            log_dict["perf/effective_tokens_per_gpu_per_sec"] = sum(eff) / rollout_time / args.rollout_num_gpus
        log_dict["perf/longest_effective_sample_tokens_per_sec"] = max(eff) / rollout_time
        self.log.info(f"perf {rollout_id}: {log_dict}", "rollout_perf", actor=ROLLOUT_MANAGER)

    def to_train_data(self, samples: list[Sample]) -> dict[str, Any]:
        """slime's `_convert_samples_to_train_data`, GRPO group normalisation included."""
        args = self.args
        raw = [float(s.reward) for s in samples]
        rewards = raw
        if args.advantage_estimator in ("grpo", "gspo", "reinforce_plus_plus_baseline") and args.rewards_normalization:
            t = torch.tensor(raw, dtype=torch.float)
            if t.shape[-1] == args.n_samples_per_prompt * args.rollout_batch_size:
                t = t.reshape(-1, args.n_samples_per_prompt)
            else:
                t = t.view(-1, t.shape[-1])
            t = t - t.mean(dim=-1, keepdim=True)
            if args.advantage_estimator in ("grpo", "gspo") and args.grpo_std_normalization:
                t = t / (t.std(dim=-1, keepdim=True) + 1e-6)
            rewards = t.flatten().tolist()
        return {
            "tokens": [list(s.tokens) for s in samples],
            "response_lengths": [s.response_length for s in samples],
            "rewards": rewards,
            "raw_reward": raw,
            "truncated": [1 if s.status == Status.TRUNCATED else 0 for s in samples],
            "sample_indices": [s.index for s in samples],
            "loss_masks": [list(s.loss_mask or [1] * s.response_length) for s in samples],
            "rollout_log_probs": [list(s.rollout_log_probs or [0.0] * s.response_length) for s in samples],
        }


def save_debug_rollout_data(log: SlimeLog, template: str | None, samples: list[Sample], rollout_id: int) -> Path | None:
    if template is None:
        return None
    path = Path(template.format(rollout_id=rollout_id))
    log.info(f"Save debug rollout data to {path}", "save_rollout", actor=ROLLOUT_MANAGER)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"rollout_id": rollout_id, "samples": [s.to_dict() for s in samples]}, path)
    return path


def load_debug_rollout_data(template: str, rollout_id: int) -> list[Sample]:
    path = Path(template.format(rollout_id=rollout_id))
    data = torch.load(path, weights_only=True)
    return [Sample.from_dict(d) for d in data["samples"]]
