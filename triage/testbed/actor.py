"""The trainer side (slime's `MegatronTrainRayActor`): log-prob passes, GRPO steps, weight sync, saving.

One instance per process holds one (TP shard, PP stage) of the Megatron-layout model.
`train(rollout_id, rollout_data)` follows slime's `train_actor`: the reference and the
actor log-prob passes (forward only, under timers `ref_log_probs` / `log_probs`),
GRPO advantages, the `rollout N: {...}` line, `--num-steps-per-rollout` optimizer steps
with slime's policy loss (clipped ratio, KL to the reference, entropy), a `step N: {...}`
line per step, the train-data dump and the trainer's `perf N: {...}` line.

Micro-batches are formed per step and per (logical) data-parallel rank, the same for
the log-prob pass and the training forward, so the step-1 invariants of a healthy run
hold exactly: log_probs == ref_log_probs and ppo_kl == 0.
"""

from __future__ import annotations

import argparse
import math
import socket
from pathlib import Path
from typing import Any

import torch

from triage.testbed import checkpoint as ckpt
from triage.testbed.comm import Comm
from triage.testbed.convert import gather_tp, hf_to_megatron, tp_partition
from triage.testbed.faults import Plugs
from triage.testbed.hf_models import ModelShape
from triage.testbed.megatron_model import GPTModel
from triage.testbed.memory import GpuMemory
from triage.testbed.parallel_state import ParallelState
from triage.testbed.slime_log import TRAIN_ACTOR, SlimeLog
from triage.testbed.timer import Timer

PER_SAMPLE_MEAN_KEYS = ("log_probs", "ref_log_probs", "rollout_log_probs", "returns", "advantages")
IGNORED_KEYS = ("tokens", "loss_masks", "sample_indices", "partition")


def compute_approx_kl(log_probs: torch.Tensor, base: torch.Tensor, kl_type: str) -> torch.Tensor:
    log_ratio = log_probs.float() - base.float()
    if kl_type == "k1":
        return log_ratio
    if kl_type == "k2":
        return log_ratio**2 / 2.0
    log_ratio = -log_ratio
    kl = log_ratio.exp() - 1 - log_ratio
    return kl.clamp(min=-10, max=10) if kl_type == "low_var_kl" else kl


def sample_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per-sample masked mean. The denominator is the sample's token count, unclamped:
    a sample with no response tokens makes this 0/0."""
    return (x * mask).sum() / mask.sum()


def lr_at(args: argparse.Namespace, step: int) -> float:
    """Megatron's OptimizerParamScheduler: linear warmup, then constant / linear / cosine decay."""
    if args.lr_warmup_iters and step <= args.lr_warmup_iters:
        return args.lr * step / args.lr_warmup_iters
    if args.lr_decay_style == "constant" or not args.lr_decay_iters:
        return args.lr
    progress = min(1.0, (step - args.lr_warmup_iters) / max(1, args.lr_decay_iters - args.lr_warmup_iters))
    if args.lr_decay_style == "linear":
        coeff = 1.0 - progress
    else:
        coeff = 0.5 * (math.cos(math.pi * progress) + 1.0)
    return args.min_lr + coeff * (args.lr - args.min_lr)


class NaNLossError(RuntimeError):
    pass


class MegatronActor:
    def __init__(self, args: argparse.Namespace, shape: ModelShape, vocab_size: int, comm: Comm,
                 state: ParallelState, log: SlimeLog, plugs: Plugs, memory: GpuMemory) -> None:
        self.args = args
        self.shape = shape
        self.vocab_size = vocab_size
        self.comm = comm
        self.state = state
        self.log = log
        self.plugs = plugs
        self.memory = memory
        dtype = torch.float16 if args.fp16 else torch.bfloat16 if args.bf16 else torch.float32
        torch.manual_seed(args.seed)
        self.model = GPTModel(shape, vocab_size, state, compute_dtype=dtype)
        self.model.init_weights(args.seed)
        decay = [p for n, p in self.model.named_parameters() if p.ndim >= 2]
        no_decay = [p for n, p in self.model.named_parameters() if p.ndim < 2]
        self.optimizer = torch.optim.AdamW(
            [{"params": decay, "weight_decay": args.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
            lr=lr_at(args, 1), betas=(args.adam_beta1, args.adam_beta2), eps=args.adam_eps,
        )
        self.num_steps = 0  # optimizer steps done (Megatron's iteration)
        self.backups: dict[str, dict[str, torch.Tensor]] = {}
        self.timer = Timer(log, enabled=comm.rank == 0)
        self.is_log_rank = state.tp_rank == 0 and state.is_last_stage
        self.layer_offset = state.layer_offset(shape.num_layers)
        self.timer.start("train_wait")

    # -- Megatron prints ---------------------------------------------------------------------
    def print0(self, message: str) -> None:
        """Megatron's print_rank_0."""
        if self.comm.rank == 0:
            self.log.print(message, actor=TRAIN_ACTOR)

    # -- loading -----------------------------------------------------------------------------
    def global_shapes(self) -> dict[str, torch.Size]:
        full = GPTModel(self.shape, self.vocab_size)
        return {k: v.shape for k, v in full.state_dict().items()}

    def _load_into_model(self, global_state: dict[str, torch.Tensor]) -> None:
        local = ckpt.local_state(global_state, self.shape.num_layers, self.state.tp_size, self.state.tp_rank,
                                 self.state.pp_size, self.state.pp_rank)
        self.model.load_state_dict(local, strict=True)

    def load_checkpoint(self, load_dir: str | None, with_optimizer: bool) -> int | None:
        """Megatron's load_checkpoint: the iteration loaded, or None (and a warning) without a tracker."""
        if not load_dir:
            return None
        root = Path(load_dir)
        if (root / "config.json").exists() and not (root / ckpt.TRACKER).exists():
            self.log.info(f"Load checkpoint from HuggingFace model into Megatron (path={load_dir})", "load_hf",
                          actor=TRAIN_ACTOR)
            from safetensors.torch import load_file

            hf: dict[str, torch.Tensor] = {}
            for f in sorted(root.glob("*.safetensors")):
                hf.update(load_file(str(f)))
            self._load_into_model(hf_to_megatron(hf, self.shape))
            return 0
        iteration = ckpt.read_tracker(root)
        if self.args.ckpt_step is not None and iteration is not None:
            iteration = self.args.ckpt_step
        if iteration is None:
            self.print0(f"WARNING: could not find the metadata file {root / ckpt.TRACKER}")
            self.print0("    will not load any checkpoints and will start from random")
            return None
        path = ckpt.iteration_dir(root, iteration)
        fmt = ckpt.checkpoint_format(path)
        infix = "distributed " if fmt == "torch_dist" else ""
        if iteration == "release":
            self.print0(f" loading release {infix}checkpoint from {load_dir}")
        else:
            self.print0(f" loading {infix}checkpoint from {load_dir} at iteration {iteration}")
        if fmt == "torch_dist":
            model, optim = ckpt.load_torch_dist(path, self.global_shapes(), self.shape.num_layers,
                                                with_optimizer=with_optimizer)
            self._load_into_model(model)
            if with_optimizer and optim:
                self._load_optimizer({m: ckpt.local_state(s, self.shape.num_layers, self.state.tp_size,
                                                          self.state.tp_rank, self.state.pp_size, self.state.pp_rank)
                                      for m, s in optim.items()})
        else:
            saved_args = ckpt.load_legacy_rank(path, 0, 0, self._saved_pp(path))["args"]
            tp, pp = saved_args.tensor_model_parallel_size, saved_args.pipeline_model_parallel_size
            payloads = {(t, p): ckpt.load_legacy_rank(path, t, p, pp) for t in range(tp) for p in range(pp)}
            model = ckpt.merge_local_states({k: v["model"] for k, v in payloads.items()}, self.shape.num_layers, tp, pp)
            self._load_into_model(model)
        it = 0 if iteration == "release" else int(iteration)
        self.print0(f"  successfully loaded checkpoint from {load_dir} [ t {self.state.tp_rank + 1}/{self.state.tp_size}, "
                    f"p {self.state.pp_rank + 1}/{self.state.pp_size} ] at iteration {it}")
        return it

    @staticmethod
    def _saved_pp(path: Path) -> int:
        names = [p.name for p in path.glob("mp_rank_*")]
        return 1 if any(len(n) == len("mp_rank_00") for n in names) else 2

    def _load_optimizer(self, moments: dict[str, dict[str, torch.Tensor]]) -> None:
        for name, p in self.model.named_parameters():
            st = self.optimizer.state[p]
            st["step"] = torch.tensor(float(self.num_steps))
            st["exp_avg"] = moments["exp_avg"][name].clone()
            st["exp_avg_sq"] = moments["exp_avg_sq"][name].clone()

    def initialize(self) -> int:
        """Load --load (and --ref-load as the reference), as slime's actor init does; the start rollout id."""
        args = self.args
        loaded = self.load_checkpoint(args.load, with_optimizer=not args.no_load_optim)
        start = args.start_rollout_id
        if start is None:
            start = (loaded + 1) if (loaded is not None and not args.finetune) else 0
        if loaded is not None and not args.finetune:
            self.num_steps = loaded * (args.num_steps_per_rollout or 1) + (args.num_steps_per_rollout or 1)
        if args.kl_coef != 0 or args.use_kl_loss:
            actor = self.snapshot()
            self.load_checkpoint(args.ref_load, with_optimizer=False)
            self.backups["ref"] = self.snapshot()
            self.model.load_state_dict(actor)
        self.backups["actor"] = self.snapshot()
        return start

    def snapshot(self) -> dict[str, torch.Tensor]:
        return {k: v.detach().clone() for k, v in self.model.state_dict().items()}

    def use_weights(self, tag: str) -> None:
        self.model.load_state_dict(self.backups[tag])

    # -- forward -----------------------------------------------------------------------------
    def _pad(self, seqs: list[list[int]]) -> torch.Tensor:
        width = max(len(s) for s in seqs)
        out = torch.zeros((len(seqs), width), dtype=torch.long)  # right padding; causal attention never reads it
        for i, s in enumerate(seqs):
            out[i, : len(s)] = torch.tensor(s, dtype=torch.long)
        return out

    def _stage_forward(self, tokens: torch.Tensor, grad: bool):
        """Run this stage; returns (output, stage input needing a grad) across the pipeline."""
        if self.state.pp_size == 1:
            return self.model(tokens), None
        b, s = tokens.shape
        h = self.shape.hidden_size
        if self.state.is_first_stage:
            out = self.model(tokens)
            self.comm.send(out.detach(), dst=self.comm.rank + self.state.tp_size)
            return out, None
        inp = self.comm.recv((b, s, h), self.model.compute_dtype, src=self.comm.rank - self.state.tp_size)
        if grad:
            inp.requires_grad_(True)
        return self.model(hidden=inp), inp

    def _stage_backward(self, out: torch.Tensor, inp: torch.Tensor | None, loss: torch.Tensor | None) -> None:
        if self.state.pp_size == 1:
            loss.backward()
            return
        if self.state.is_last_stage:
            loss.backward()
            self.comm.send(inp.grad, dst=self.comm.rank - self.state.tp_size)
        else:
            g = self.comm.recv(tuple(out.shape), out.dtype, src=self.comm.rank + self.state.tp_size)
            out.backward(g)

    def _response_logits(self, logits: torch.Tensor, i: int, total: int, resp: int) -> torch.Tensor:
        return logits[i, total - resp - 1: total - 1]

    def _log_probs(self, logits_r: torch.Tensor, targets: torch.Tensor):
        scaled = logits_r / self.args.rollout_temperature
        lsm = torch.log_softmax(scaled, dim=-1)
        lp = lsm.gather(-1, targets[:, None])[:, 0]
        entropy = -(lsm.exp() * lsm).sum(-1)
        return lp, entropy

    # -- batching ----------------------------------------------------------------------------
    def micro_batches(self, indices: list[int], total_lengths: list[int], forward_only: bool) -> list[list[int]]:
        """slime's micro-batching: fixed --micro-batch-size, or packing to --max-tokens-per-gpu."""
        args = self.args
        if args.use_dynamic_batch_size:
            limit = args.log_probs_max_tokens_per_gpu if forward_only else args.max_tokens_per_gpu
            out, cur, cur_tokens = [], [], 0
            for i in indices:
                if cur and cur_tokens + total_lengths[i] > limit:
                    out.append(cur)
                    cur, cur_tokens = [], 0
                cur.append(i)
                cur_tokens += total_lengths[i]
            if cur:
                out.append(cur)
            return out
        mbs = max(1, args.micro_batch_size)
        return [indices[k: k + mbs] for k in range(0, len(indices), mbs)]

    def step_partitions(self, n: int) -> list[list[list[int]]]:
        """For each step, for each data-parallel rank, the sample indices it trains on."""
        gbs = self.args.global_batch_size
        steps = max(1, math.ceil(n / gbs))
        dp = self.args.data_parallel_size
        out = []
        for s in range(steps):
            idx = list(range(s * gbs, min(n, (s + 1) * gbs)))
            out.append([idx[r::dp] for r in range(dp)])
        return out

    # -- passes ------------------------------------------------------------------------------
    @torch.no_grad()
    def forward_only(self, data: dict[str, Any], prefix: str) -> dict[str, list[torch.Tensor]]:
        n = len(data["tokens"])
        lps: list[torch.Tensor | None] = [None] * n
        ents: list[torch.Tensor | None] = [None] * n
        self.model.nondeterministic_split_k = self.plugs.nondeterministic_logprobs
        try:
            self._forward_only(data, lps, ents)
        finally:
            self.model.nondeterministic_split_k = False
        if not self.state.is_last_stage:
            return {}
        result = {f"{prefix}log_probs": lps}
        if not prefix:
            result["entropy"] = ents
        return result

    def _forward_only(self, data: dict[str, Any], lps: list, ents: list) -> None:
        n = len(data["tokens"])
        for step in self.step_partitions(n):
            for dp_indices in step:
                for mb in self.micro_batches(dp_indices, data["total_lengths"], forward_only=True):
                    tokens = self._pad([data["tokens"][i] for i in mb])
                    self.memory.activations(int(sum(data["total_lengths"][i] for i in mb)), training=False)
                    out, _ = self._stage_forward(tokens, grad=False)
                    if not self.state.is_last_stage:
                        continue
                    for j, i in enumerate(mb):
                        r = data["response_lengths"][i]
                        t = data["total_lengths"][i]
                        targets = torch.tensor(data["tokens"][i][t - r:], dtype=torch.long)
                        lps[i], ents[i] = self._log_probs(self._response_logits(out, j, t, r), targets)

    def compute_advantages(self, data: dict[str, Any]) -> None:
        args = self.args
        lps = data.get("log_probs")
        if args.kl_coef == 0 or not lps:
            kl = [torch.zeros(r, dtype=torch.float32) for r in data["response_lengths"]]
        else:
            kl = [compute_approx_kl(lps[i], data["ref_log_probs"][i], args.kl_loss_type) for i in range(len(lps))]
        data["kl"] = kl
        returns = [torch.ones_like(kl[i]) * data["rewards"][i] for i in range(len(kl))]
        data["advantages"] = returns
        data["returns"] = [r.clone() for r in returns]

    def log_rollout_data(self, rollout_id: int, data: dict[str, Any]) -> dict[str, float] | None:
        if not self.is_log_rank:
            return None
        out: dict[str, float] = {}
        masks = [torch.tensor(m, dtype=torch.float32) for m in data["loss_masks"]]
        for key, value in data.items():
            if key in IGNORED_KEYS or not isinstance(value, list) or not value:
                continue
            if isinstance(value[0], torch.Tensor):
                if key in PER_SAMPLE_MEAN_KEYS:
                    total = sum(sample_mean(v.float(), m) for v, m in zip(value, masks))
                    out[f"rollout/{key}"] = float(total) / len(value)
                else:
                    out[f"rollout/{key}"] = float(torch.cat([v.float() for v in value]).mean())
            elif isinstance(value[0], (int, float)):
                out[f"rollout/{key}"] = float(sum(value)) / len(value)
        self.log.info(f"rollout {rollout_id}: {out}", "train_metric", actor=TRAIN_ACTOR)
        if self.args.ci_test and rollout_id == 0 and "rollout/log_probs" in out and "rollout/ref_log_probs" in out:
            assert abs(out["rollout/log_probs"] - out["rollout/ref_log_probs"]) < 1e-8
        return out

    def train(self, rollout_id: int, data: dict[str, Any]) -> None:
        args = self.args
        with self.timer.context("data_preprocess"):
            data["total_lengths"] = [len(t) for t in data["tokens"]]
            for key in ("rollout_log_probs",):
                data[key] = [torch.tensor(v, dtype=torch.float32) for v in data[key]]
        with self.timer.inverse("train_wait"), self.timer.context("train"):
            if "ref" in self.backups:
                self.use_weights("ref")
                with self.timer.context("ref_log_probs"):
                    data.update(self.forward_only(data, "ref_"))
            self.use_weights("actor")
            with self.timer.context("log_probs"):
                data.update(self.forward_only(data, ""))
            if self.state.is_last_stage:
                self.compute_advantages(data)
            self.log_rollout_data(rollout_id, data)
            with self.timer.context("actor_train"):
                self.train_steps(rollout_id, data)
        self.timer.seq_lens.extend(data["total_lengths"])
        self.save_debug_train_data(rollout_id, data)
        self.backups["actor"] = self.snapshot()
        if (args.ref_update_interval is not None and (rollout_id + 1) % args.ref_update_interval == 0
                and "ref" in self.backups):
            self.log.info(f"Updating ref model at rollout_id {rollout_id}", "ref_update", actor=TRAIN_ACTOR)
            self.backups["ref"] = self.snapshot()
        self.log_perf(rollout_id)

    def train_steps(self, rollout_id: int, data: dict[str, Any]) -> None:
        args = self.args
        n = len(data["tokens"])
        steps = self.step_partitions(n)
        for step_id, step in enumerate(steps):
            gbs = sum(len(x) for x in step)
            self.optimizer.zero_grad(set_to_none=True)
            sums = {"loss": 0.0, "pg_loss": 0.0, "entropy_loss": 0.0, "pg_clipfrac": 0.0, "ppo_kl": 0.0,
                    "train_rollout_logprob_abs_diff": 0.0}
            if args.use_kl_loss:
                sums["kl_loss"] = 0.0
            total_tokens = sum(sum(data["loss_masks"][i]) for dp in step for i in dp)
            for dp_indices in step:
                for mb in self.micro_batches(dp_indices, data["total_lengths"], forward_only=False):
                    self.memory.activations(int(sum(data["total_lengths"][i] for i in mb)), training=True)
                    tokens = self._pad([data["tokens"][i] for i in mb])
                    out, inp = self._stage_forward(tokens, grad=True)
                    loss = None
                    if self.state.is_last_stage:
                        loss, parts = self._policy_loss(out, mb, data)
                        denom = total_tokens if args.calculate_per_token_loss else gbs
                        for k, v in parts.items():
                            sums[k] += float(v) / denom
                        value = float(loss.detach())
                        if args.check_for_nan_in_loss_and_grad and not math.isfinite(value):
                            raise NaNLossError(
                                f"Rank {self.comm.rank}, node {socket.gethostname()}, device 0, iteration "
                                f"{self.num_steps + 1}: Unexpected result {value} "
                                f"(message='found {'NaN' if math.isnan(value) else 'Inf'} in local forward loss calculation')"
                            )
                        loss = loss / denom
                    self._stage_backward(out, inp, loss)
            grad_norm = self._grad_norm()
            if args.check_for_nan_in_loss_and_grad and not math.isfinite(grad_norm):
                raise NaNLossError(
                    f"Rank {self.comm.rank}, node {socket.gethostname()}, device 0, iteration {self.num_steps + 1}: "
                    f"Unexpected result {grad_norm} (message='found {'NaN' if math.isnan(grad_norm) else 'Inf'} in "
                    "local grad norm for bucket #0 in backward pass before data-parallel communication collective')"
                )
            lr = lr_at(args, self.num_steps + 1)
            for group in self.optimizer.param_groups:
                group["lr"] = lr
            if math.isfinite(grad_norm):
                if args.clip_grad > 0:
                    coef = args.clip_grad / (grad_norm + 1e-6)
                    if coef < 1.0:
                        for p in self.model.parameters():
                            if p.grad is not None:
                                p.grad.mul_(coef)
                self.optimizer.step()
            self.num_steps += 1
            if self.is_log_rank:
                accumulated = rollout_id * len(steps) + step_id
                log_dict: dict[str, Any] = {f"train/{k}": v for k, v in sums.items()}
                log_dict["train/grad_norm"] = grad_norm
                for i, group in enumerate(self.optimizer.param_groups):
                    log_dict[f"train/lr-pg_{i}"] = group["lr"]
                log_dict["train/global_batch_size"] = gbs
                log_dict["train/step"] = accumulated
                if args.ci_test and step_id == 0:
                    assert log_dict["train/ppo_kl"] < 1e-8, f"{log_dict=}"
                self.log.info(f"step {accumulated}: {log_dict}", "step", actor=TRAIN_ACTOR)

    def _policy_loss(self, logits: torch.Tensor, mb: list[int], data: dict[str, Any]):
        args = self.args
        loss = torch.zeros((), dtype=torch.float32)
        parts = {"loss": 0.0, "pg_loss": 0.0, "entropy_loss": 0.0, "pg_clipfrac": 0.0, "ppo_kl": 0.0,
                 "train_rollout_logprob_abs_diff": 0.0}
        if args.use_kl_loss:
            parts["kl_loss"] = 0.0
        for j, i in enumerate(mb):
            r = data["response_lengths"][i]
            t = data["total_lengths"][i]
            targets = torch.tensor(data["tokens"][i][t - r:], dtype=torch.long)
            lp, ent = self._log_probs(self._response_logits(logits, j, t, r), targets)
            mask = torch.tensor(data["loss_masks"][i], dtype=torch.float32)
            old = data["rollout_log_probs"][i] if args.use_rollout_logprobs else data["log_probs"][i]
            adv = data["advantages"][i]
            ppo_kl = old - lp
            ratio = (-ppo_kl).exp()
            pg1 = -ratio * adv
            pg2 = -ratio.clamp(1 - args.eps_clip, 1 + args.eps_clip_high) * adv
            pg = torch.maximum(pg1, pg2)
            clipfrac = torch.gt(pg2, pg1).float()
            pg_loss = sample_mean(pg, mask)
            entropy_loss = sample_mean(ent, mask)
            sample_loss = pg_loss - args.entropy_coef * entropy_loss
            if args.use_kl_loss:
                kl_loss = sample_mean(compute_approx_kl(lp, data["ref_log_probs"][i], args.kl_loss_type), mask)
                sample_loss = sample_loss + args.kl_loss_coef * kl_loss
                parts["kl_loss"] += kl_loss.detach()
            loss = loss + sample_loss
            parts["loss"] += sample_loss.detach()
            parts["pg_loss"] += pg_loss.detach()
            parts["entropy_loss"] += entropy_loss.detach()
            parts["pg_clipfrac"] += sample_mean(clipfrac, mask).detach()
            parts["ppo_kl"] += sample_mean(ppo_kl, mask).detach()
            parts["train_rollout_logprob_abs_diff"] += sample_mean((old - data["rollout_log_probs"][i]).abs(), mask).detach()
        return loss, parts

    def _grad_norm(self) -> float:
        sq = torch.zeros((), dtype=torch.float32)
        for name, p in self.model.named_parameters():
            if p.grad is None:
                continue
            if self.state.tp_rank != 0 and tp_partition(name) is None:
                continue  # replicated across TP ranks: counted once
            sq = sq + p.grad.float().pow(2).sum()
        sq = self.comm.all_reduce_sum(sq.reshape(1), name="grad_norm")
        return float(sq[0].sqrt())

    # -- dumps and perf ----------------------------------------------------------------------
    def save_debug_train_data(self, rollout_id: int, data: dict[str, Any]) -> None:
        template = self.args.save_debug_train_data
        if template is None or not self.is_log_rank:
            return
        fields = {k: v for k, v in data.items()}
        dp = self.args.data_parallel_size
        n = len(data["tokens"])
        partitions = [list(range(r, n, dp)) for r in range(dp)]
        if "{rank}" in template:  # legacy layout: one file per data-parallel rank
            for r, part in enumerate(partitions):
                rank = r * self.state.tp_size * self.state.pp_size + self.comm.rank
                shard = {k: [v[i] for i in part] if isinstance(v, list) and len(v) == n else v for k, v in fields.items()}
                shard["partition"] = part
                path = Path(template.format(rollout_id=rollout_id, rank=rank))
                path.parent.mkdir(parents=True, exist_ok=True)
                torch.save({"rollout_id": rollout_id, "rank": rank, "rollout_data": _tensorize(shard)}, path)
            return
        path = Path(template.format(rollout_id=rollout_id))
        self.log.info(f"Save debug train data from {dp} DP shard(s) to {path}", "save_train", actor=TRAIN_ACTOR)
        samples = []
        for i in range(n):
            sample: dict[str, Any] = {"data_parallel_rank": i % dp, "rollout_position": i}
            for k, v in fields.items():
                if isinstance(v, list) and len(v) == n and k != "sample_indices":
                    sample[k] = _tensorize_value(v[i])
            sample["sample_index"] = data["sample_indices"][i]
            samples.append(sample)
        payload = {"format_version": 2, "rollout_id": rollout_id, "rank": self.comm.rank, "samples": samples,
                   "dp_shards": [{"rank": r, "data_parallel_rank": r, "partition": p} for r, p in enumerate(partitions)],
                   "raw_reward": list(data["raw_reward"])}
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(payload, path)

    def log_perf(self, rollout_id: int) -> None:
        timers = self.timer.log_dict()
        seq_lens = list(self.timer.seq_lens)
        self.timer.reset()
        if not (self.comm.rank == (self.comm.world_size - self.state.tp_size) and self.state.tp_rank == 0):
            return
        log_dict: dict[str, Any] = {f"perf/{k}_time": v for k, v in timers.items()}
        params = sum(p.numel() for p in self.model.parameters()) * self.comm.world_size
        fwd_flops = 2 * params * sum(seq_lens) / self.comm.world_size / 1e12
        if log_dict.get("perf/log_probs_time"):
            log_dict["perf/log_probs_tflops"] = fwd_flops / log_dict["perf/log_probs_time"]
        if log_dict.get("perf/ref_log_probs_time"):
            log_dict["perf/ref_log_probs_tflops"] = fwd_flops / log_dict["perf/ref_log_probs_time"]
        if log_dict.get("perf/actor_train_time"):
            log_dict["perf/actor_train_tflops"] = 3 * fwd_flops / log_dict["perf/actor_train_time"]
            log_dict["perf/actor_train_tok_per_s"] = sum(seq_lens) / log_dict["perf/actor_train_time"]
        if "perf/train_wait_time" in log_dict and "perf/train_time" in log_dict:
            total = log_dict["perf/train_wait_time"] + log_dict["perf/train_time"]
            if total > 0:
                log_dict["perf/step_time"] = total
                log_dict["perf/wait_time_ratio"] = log_dict["perf/train_wait_time"] / total
        self.log.info(f"perf {rollout_id}: {log_dict}", "train_perf", actor=TRAIN_ACTOR)

    # -- weights out -------------------------------------------------------------------------
    def full_stage_params(self) -> list[tuple[str, torch.Tensor]]:
        """This stage's parameters, TP shards all-gathered into full tensors (local layer names)."""
        out = []
        for name, p in self.model.named_parameters():
            t = p.detach()
            if self.state.tp_size > 1 and tp_partition(name) is not None:
                t = gather_tp(name, self.comm.all_gather(t))
            out.append((name, t.clone()))
        return out

    def hf_weights_for_engine(self) -> list[tuple[str, torch.Tensor]]:
        """What this stage sends to the engine: converted to HF names with the stage's layer offset."""
        offset = self.layer_offset if self.plugs.apply_layer_offset else 0
        out = []
        for name, tensor in self.full_stage_params():
            if self.plugs.skip_in_sync(name):
                continue
            out.extend(self.plugs.converter(name, tensor, self.shape, offset))
        return out

    def save(self, rollout_id: int) -> None:
        args = self.args
        if not args.save:
            return
        root = Path(args.save)
        fmt = args.ckpt_format
        self.print0(f" saving checkpoint at iteration {rollout_id:7d} to {args.save} in {fmt} format")
        moments = {m: {n: self.optimizer.state[p][m].detach().clone() for n, p in self.model.named_parameters()
                       if m in self.optimizer.state[p]} for m in ("exp_avg", "exp_avg_sq")}
        sched = {"max_lr": args.lr, "min_lr": args.min_lr, "num_steps": self.num_steps,
                 "lr_warmup_steps": args.lr_warmup_iters, "lr_decay_style": args.lr_decay_style}
        if fmt == "torch":
            ckpt.save_legacy_rank(root, rollout_id, args, self.model.state_dict(), moments,
                                  self.state.tp_rank, self.state.pp_rank, self.state.pp_size, sched)
            self.comm.barrier()
        else:
            local = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
            gathered = self.comm.gather_object((self.state.tp_rank, self.state.pp_rank, local, moments), dst=0)
            if self.comm.rank == 0:
                states = {(t, p): s for t, p, s, _ in gathered}
                model = ckpt.merge_local_states(states, self.shape.num_layers, self.state.tp_size, self.state.pp_size)
                optim = None
                if all(m["exp_avg"] for _, _, _, m in gathered):
                    optim = {mom: ckpt.merge_local_states({(t, p): m[mom] for t, p, _, m in gathered},
                                                          self.shape.num_layers, self.state.tp_size, self.state.pp_size)
                             for mom in ("exp_avg", "exp_avg_sq")}
                ckpt.save_torch_dist(root, rollout_id, args, model, optim, self.shape.num_layers, sched)
            self.comm.barrier()
        if self.comm.rank == 0:
            ckpt.write_tracker(root, rollout_id)
        self.print0(f"  successfully saved checkpoint from iteration {rollout_id:7d} to {args.save} "
                    f"[ t {self.state.tp_rank + 1}/{self.state.tp_size}, p {self.state.pp_rank + 1}/{self.state.pp_size} ]")


def _tensorize_value(v: Any) -> Any:
    if isinstance(v, torch.Tensor):
        return v.detach().clone()
    if isinstance(v, list) and v and all(isinstance(x, (int, float)) for x in v):
        return torch.tensor(v)
    return v


def _tensorize(fields: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for k, v in fields.items():
        if isinstance(v, list) and v and isinstance(v[0], list):
            out[k] = [torch.tensor(x) for x in v]
        else:
            out[k] = v
    return out

