"""One GRPO training step recomputed in-process on a saved rollout.

What slime's actor does with a rollout (`train_actor`), for the step being replayed:
the reference and the actor log-prob passes (forward only, micro-batched), GRPO
advantages (rewards normalised within each prompt's group of `--n-samples-per-prompt`),
then the policy loss of the step's global batch and its gradient norm:

    ppo_kl = old_log_probs - log_probs            ratio = exp(-ppo_kl)
    pg     = max(-ratio * A, -clip(ratio, 1 - eps_clip, 1 + eps_clip_high) * A)
    loss_i = mean_i(pg) - entropy_coef * mean_i(entropy) + kl_loss_coef * mean_i(kl(log_probs, ref_log_probs))

where mean_i is the mean over sample i's loss-masked response tokens, and the step's
loss is the sum of loss_i over the global batch divided by its size (slime's default;
`--calculate-per-token-loss` divides by the token count instead). The per-sample mean
divides by the sample's token count as computed: a sample with no response token is
0/0, NaN, which is how an empty sample poisons a batch (the axolotl guide: "bad data
(empty sequences) ... NaN in specific batches only").

Sequences are right-padded; under causal attention padding after a sequence does not
change its logits, so no attention mask is passed (as slime's packed batches need none).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from triage.formats.dumps import RolloutDump, reward_value

if TYPE_CHECKING:
    from torch import nn

    from triage.replay.hooks import TensorWatch
    from triage.run.run import Run


def _num(run: Run, key: str, default: float) -> float:
    value = run.args.get(key)
    if isinstance(value, bool) or value is None:
        return default
    try:
        return float(value)
    except (TypeError, ValueError):
        return default


def _flag(run: Run, key: str) -> bool:
    return run.args.get(key) is True


@dataclass(frozen=True)
class LossConfig:
    """The run's loss settings, with slime's defaults for what the run did not set."""

    temperature: float = 1.0
    eps_clip: float = 0.2
    eps_clip_high: float = 0.2
    use_kl_loss: bool = False
    kl_loss_coef: float = 0.0
    kl_loss_type: str = "k1"
    entropy_coef: float = 0.0
    n_samples_per_prompt: int = 1
    rewards_normalization: bool = True
    grpo_std_normalization: bool = True
    advantage_estimator: str = "grpo"
    global_batch_size: int | None = None
    micro_batch_size: int = 1
    calculate_per_token_loss: bool = False
    reward_key: str | None = None
    steps_per_rollout: int = 1

    @classmethod
    def from_run(cls, run: Run) -> LossConfig:
        eps = _num(run, "eps_clip", 0.2)
        n = int(_num(run, "n_samples_per_prompt", 1))
        rbs = run.args.get("rollout_batch_size")
        steps = int(_num(run, "num_steps_per_rollout", 1)) or 1
        gbs = run.args.get("global_batch_size")
        if not isinstance(gbs, int) and isinstance(rbs, int):
            gbs = rbs * n // steps
        kl_type = run.args.get("kl_loss_type")
        estimator = run.args.get("advantage_estimator")
        return cls(
            temperature=_num(run, "rollout_temperature", 1.0) or 1.0,
            eps_clip=eps,
            eps_clip_high=_num(run, "eps_clip_high", eps),
            use_kl_loss=_flag(run, "use_kl_loss"),
            kl_loss_coef=_num(run, "kl_loss_coef", 0.0),
            kl_loss_type=kl_type if isinstance(kl_type, str) else "k1",
            entropy_coef=_num(run, "entropy_coef", 0.0),
            n_samples_per_prompt=max(1, n),
            rewards_normalization=not _flag(run, "disable_rewards_normalization"),
            grpo_std_normalization=not _flag(run, "disable_grpo_std_normalization") and n > 1,
            advantage_estimator=estimator if isinstance(estimator, str) else "grpo",
            global_batch_size=gbs if isinstance(gbs, int) and gbs > 0 else None,
            micro_batch_size=max(1, int(_num(run, "micro_batch_size", 1))),
            calculate_per_token_loss=_flag(run, "calculate_per_token_loss"),
            reward_key=run.args.get("reward_key") if isinstance(run.args.get("reward_key"), str) else None,
            steps_per_rollout=steps,
        )


@dataclass(frozen=True)
class ReplaySample:
    """One sample of a rollout dump, as the trainer sees it."""

    position: int  # index in the rollout dump's sample list
    sample_id: int | None  # the Sample's own `index`
    tokens: tuple[int, ...]
    response_length: int
    loss_mask: tuple[float, ...]
    reward: float | None
    status: str = "unknown"

    @property
    def prompt_length(self) -> int:
        return len(self.tokens) - self.response_length


def _ints(value: Any) -> list[int]:
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        value = tolist()
    return [int(v) for v in value] if isinstance(value, (list, tuple)) else []


def samples_of(dump: RolloutDump, reward_key: str | None = None) -> list[ReplaySample]:
    out = []
    rewards = dump.rewards(reward_key)
    lengths = dump.response_lengths()
    statuses = dump.statuses()
    for i, s in enumerate(dump.samples):
        tokens = _ints(s.get("tokens"))
        n = min(lengths[i], len(tokens))
        mask = s.get("loss_mask")
        mask_list = [float(v) for v in _ints(mask)] if mask is not None else [1.0] * n
        if len(mask_list) != n:
            mask_list = (mask_list + [1.0] * n)[:n]
        sid = s.get("index")
        out.append(ReplaySample(i, int(sid) if isinstance(sid, int) else None, tuple(tokens), n, tuple(mask_list),
                                rewards[i], statuses[i]))
    return out


def advantages(samples: list[ReplaySample], cfg: LossConfig) -> list[float]:
    """slime's GRPO advantages: rewards normalised within each group of n samples (NaN rewards stay NaN)."""
    raw = torch.tensor([s.reward if s.reward is not None else math.nan for s in samples], dtype=torch.float32)
    if not cfg.rewards_normalization or cfg.advantage_estimator not in ("grpo", "gspo", "reinforce_plus_plus_baseline"):
        return raw.tolist()
    n = cfg.n_samples_per_prompt
    t = raw.view(-1, n) if raw.numel() % n == 0 else raw.view(1, -1)
    t = t - t.mean(dim=-1, keepdim=True)
    if cfg.advantage_estimator in ("grpo", "gspo") and cfg.grpo_std_normalization:
        t = t / (t.std(dim=-1, keepdim=True) + 1e-6)
    return t.flatten().tolist()


def compute_approx_kl(log_probs: torch.Tensor, ref: torch.Tensor, kl_type: str) -> torch.Tensor:
    """slime's KL estimators: k1 (log ratio), k2 (half squared log ratio), k3 / low_var_kl (clamped for low_var_kl)."""
    log_ratio = log_probs.float() - ref.float()
    if kl_type == "k1":
        return log_ratio
    if kl_type == "k2":
        return log_ratio**2 / 2.0
    log_ratio = -log_ratio
    kl = log_ratio.exp() - 1 - log_ratio
    return kl.clamp(min=-10, max=10) if kl_type == "low_var_kl" else kl


def sample_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over a sample's loss-masked tokens; 0/0 (NaN) for a sample without any."""
    return (x * mask).sum() / mask.sum()


def micro_batches(indices: list[int], size: int) -> list[list[int]]:
    return [indices[k: k + size] for k in range(0, len(indices), max(1, size))]


def step_indices(n: int, cfg: LossConfig, step: int = 0) -> list[int]:
    """Positions of the samples the given optimizer step of a rollout trains on."""
    gbs = cfg.global_batch_size or n
    return list(range(step * gbs, min(n, (step + 1) * gbs)))


def _device_of(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


def forward_logits(model: nn.Module, batch: list[ReplaySample]) -> torch.Tensor:
    """Logits [B, S, V] (float32) of right-padded sequences."""
    width = max(len(s.tokens) for s in batch)
    ids = torch.zeros((len(batch), width), dtype=torch.long, device=_device_of(model))
    for j, s in enumerate(batch):
        ids[j, : len(s.tokens)] = torch.tensor(s.tokens, dtype=torch.long)
    out = model(input_ids=ids, use_cache=False)
    logits = out.logits if hasattr(out, "logits") else out
    return logits.float()


def response_log_probs(logits: torch.Tensor, j: int, s: ReplaySample, temperature: float
                       ) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token log-probs and entropies of sample `s`'s response, from row j of the batch's logits."""
    t, r = len(s.tokens), s.response_length
    scaled = logits[j, t - r - 1: t - 1] / temperature
    targets = torch.tensor(s.tokens[t - r:], dtype=torch.long, device=logits.device)
    lsm = torch.log_softmax(scaled, dim=-1)
    lp = lsm.gather(-1, targets[:, None])[:, 0]
    entropy = -(torch.softmax(scaled, dim=-1) * lsm).sum(-1)
    return lp, entropy


@torch.no_grad()
def log_probs(model: nn.Module, samples: list[ReplaySample], cfg: LossConfig) -> list[torch.Tensor]:
    """The forward-only log-prob pass, micro-batched as the trainer does; per-sample response log-probs (CPU)."""
    out: list[torch.Tensor] = []
    for mb in micro_batches(list(range(len(samples))), cfg.micro_batch_size):
        batch = [samples[i] for i in mb]
        logits = forward_logits(model, batch)
        for j, s in enumerate(batch):
            out.append(response_log_probs(logits, j, s, cfg.temperature)[0].cpu())
    return out


@dataclass
class StepResult:
    """The recomputed step: its loss terms (as slime logs them) and gradient norm."""

    loss: float
    pg_loss: float
    entropy_loss: float
    ppo_kl: float
    kl_loss: float | None
    grad_norm: float
    per_sample_loss: dict[int, float] = field(default_factory=dict)  # position -> that sample's loss term

    def metrics(self) -> dict[str, float]:
        out = {"train/loss": self.loss, "train/pg_loss": self.pg_loss, "train/entropy_loss": self.entropy_loss,
               "train/ppo_kl": self.ppo_kl, "train/grad_norm": self.grad_norm}
        if self.kl_loss is not None:
            out["train/kl_loss"] = self.kl_loss
        return out


def sample_loss(lp: torch.Tensor, entropy: torch.Tensor, old: torch.Tensor, ref: torch.Tensor | None,
                advantage: float, mask: torch.Tensor, cfg: LossConfig) -> tuple[torch.Tensor, dict[str, float]]:
    """One sample's loss term and its parts (slime's policy loss)."""
    old = old.to(lp.device)
    adv = torch.full_like(lp, advantage)
    ppo_kl = old - lp
    ratio = (-ppo_kl).exp()
    pg1 = -ratio * adv
    pg2 = -ratio.clamp(1 - cfg.eps_clip, 1 + cfg.eps_clip_high) * adv
    pg = torch.maximum(pg1, pg2)
    pg_loss = sample_mean(pg, mask)
    entropy_loss = sample_mean(entropy, mask)
    loss = pg_loss - cfg.entropy_coef * entropy_loss
    parts = {"pg_loss": float(pg_loss.detach()), "entropy_loss": float(entropy_loss.detach()),
             "ppo_kl": float(sample_mean(ppo_kl, mask).detach())}
    if cfg.use_kl_loss and ref is not None:
        kl = sample_mean(compute_approx_kl(lp, ref.to(lp.device), cfg.kl_loss_type), mask)
        loss = loss + cfg.kl_loss_coef * kl
        parts["kl_loss"] = float(kl.detach())
    parts["loss"] = float(loss.detach())
    return loss, parts


def train_step(model: nn.Module, samples: list[ReplaySample], positions: list[int], old: list[torch.Tensor],
               ref: list[torch.Tensor] | None, adv: list[float], cfg: LossConfig,
               watch: TensorWatch | None = None, step: int = 0) -> StepResult:
    """Forward and backward of one optimizer step over `positions`; gradients are left zeroed."""
    model.zero_grad(set_to_none=True)
    denom = float(len(positions))
    if cfg.calculate_per_token_loss:
        denom = float(sum(sum(samples[i].loss_mask) for i in positions)) or 1.0
    sums = {"loss": 0.0, "pg_loss": 0.0, "entropy_loss": 0.0, "ppo_kl": 0.0, "kl_loss": 0.0}
    per_sample: dict[int, float] = {}
    device = _device_of(model)
    for mb in micro_batches(positions, cfg.micro_batch_size):
        batch = [samples[i] for i in mb]
        if watch is not None:
            watch.step, watch.samples = step, [samples[i].position for i in mb]
        logits = forward_logits(model, batch)
        total = torch.zeros((), dtype=torch.float32, device=device)
        for j, i in enumerate(mb):
            lp, ent = response_log_probs(logits, j, samples[i], cfg.temperature)
            mask = torch.tensor(samples[i].loss_mask, dtype=torch.float32, device=device)
            term, parts = sample_loss(lp, ent, old[i], ref[i] if ref is not None else None, adv[i], mask, cfg)
            total = total + term
            per_sample[i] = parts["loss"]
            for k in sums:
                sums[k] += parts.get(k, 0.0) / denom
        (total / denom).backward()
    sq = 0.0
    for p in model.parameters():
        if p.grad is not None:
            sq += float(p.grad.float().pow(2).sum())
    model.zero_grad(set_to_none=True)
    return StepResult(loss=sums["loss"], pg_loss=sums["pg_loss"], entropy_loss=sums["entropy_loss"],
                      ppo_kl=sums["ppo_kl"], kl_loss=sums["kl_loss"] if cfg.use_kl_loss else None,
                      grad_norm=math.sqrt(sq) if math.isfinite(sq) else sq, per_sample_loss=per_sample)


def rollout_means(values: list[torch.Tensor], samples: list[ReplaySample]) -> float:
    """What slime logs as `rollout/log_probs`: the mean over samples of each sample's masked mean."""
    if not values:
        return math.nan
    total = 0.0
    for v, s in zip(values, samples):
        total += float(sample_mean(v.float(), torch.tensor(s.loss_mask, dtype=torch.float32)))
    return total / len(values)


def max_abs_diff(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    """Largest |a - b| over all tokens (NaN where one side is NaN and the other is not counts as inf)."""
    worst = 0.0
    for x, y in zip(a, b):
        if x.numel() == 0 and y.numel() == 0:
            continue
        if x.shape != y.shape:
            return math.inf
        x, y = x.double(), y.double()
        both_nan = torch.isnan(x) & torch.isnan(y)
        d = (x - y).abs().masked_fill(both_nan, 0.0)
        d = torch.nan_to_num(d, nan=math.inf)
        worst = max(worst, float(d.max()))
    return worst


def bitwise_equal(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    """Every token's value identical (NaN where both are NaN counts as equal)."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x.shape != y.shape or x.dtype != y.dtype:
            return False
        if not bool(((x == y) | (torch.isnan(x) & torch.isnan(y))).all()):
            return False
    return True


def reward_of(sample: dict[str, Any], key: str | None) -> float | None:
    return reward_value(sample.get("reward"), key)
