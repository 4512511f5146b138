"""Replay the step that went non-finite with hooks on every module: which module, or which sample, broke it.

The axolotl guide's NaN steps: enable anomaly detection, check whether the forward or
the backward pass goes bad first, reduce to one batch, and "print the batch that
triggers NaN. Look for empty sequences, extreme token IDs, or unexpected padding
patterns". This probe does that on the saved rollout:

1. It picks the rollout whose step first logged a non-finite loss / grad norm (else
   the dumped rollouts in order) and rebuilds the model in the run's dtype
   (`--fp16` / `--bf16`) with the weights that rollout trained from.
2. It replays each optimizer step of the rollout, micro-batch by micro-batch, with
   forward and backward hooks on every module and parameter (`triage.replay.hooks`):
   the first output or gradient that is NaN / Inf, or beyond `safe_fraction` of the
   dtype's largest finite value, is the anomaly.
3. It replays the offending micro-batch sample by sample. When only a few of its
   samples reproduce the non-finite value (or a non-finite per-sample loss), the
   outcome is `bad_sample`, with why the sample is bad (empty response, longer than the
   context window, token ids outside the vocabulary, a non-finite reward); when every
   sample does, it is the module: `overflow_module`, with its name, op, pass, step,
   sample indices, the dtype and the absolute min / max of its inputs and weights.
4. Nothing non-finite anywhere: `clean`.

Samples whose token ids fall outside the vocabulary cannot even be embedded: they are
reported as bad samples before any forward pass.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from triage.errors import BadInput, Unavailable
from triage.finding import Observation
from triage.probe import Cost, Probe
from triage.replay.logged import dumped_rollouts, nonfinite_onset_rollout


def rstep_micro_batches(positions: list[int], size: int) -> list[list[int]]:
    from triage.replay.step import micro_batches

    return micro_batches(positions, size)


if TYPE_CHECKING:
    from triage.replay.hooks import Anomaly

    # (step, its sample positions, [(micro-batch, its first anomaly, per-sample loss terms)] that went bad)
    StepFailure = tuple[int, list[int], list[tuple[list[int], Anomaly | None, dict[int, float]]]]
    from triage.replay.model import ReplayModel
    from triage.replay.step import LossConfig, ReplaySample
    from triage.run.run import Run


class TensorAnomalyParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    rollout_id: int | None = None  # default: the non-finite onset's rollout, else the dumped ones in order
    max_rollouts: int = 3  # rollouts replayed when the log does not say which one went bad
    safe_fraction: float = 0.5  # |x| beyond this fraction of the dtype's max counts as overflowing
    bad_sample_fraction: float = 0.5  # at most this share of the step's samples (or prompt groups) are bad samples


def context_window(run: Run, config_dir: Path | None) -> int | None:
    for key in ("seq_length", "max_position_embeddings"):
        v = run.args.get(key)
        if isinstance(v, int) and v > 0:
            return v
    if config_dir is not None:
        from triage.weights.convert import load_hf_config

        v = (load_hf_config(config_dir) or {}).get("max_position_embeddings")
        if isinstance(v, int) and v > 0:
            return v
    return None


def why_bad(s: ReplaySample, vocab: int | None, window: int | None, loss: float | None,
            rollout_context: int | None = None) -> list[str]:
    """What is wrong with one sample, in words a user can check in the dump."""
    out = []
    if s.response_length == 0:
        out.append("empty response (response_length 0): its per-sample mean divides by zero tokens")
    elif sum(s.loss_mask) == 0:
        out.append("no loss-masked token: its per-sample mean divides by zero tokens")
    if rollout_context is not None and s.prompt_length >= rollout_context:
        out.append(f"its prompt has {s.prompt_length} tokens, at or beyond --rollout-max-context-len "
                   f"{rollout_context}: no room was left to generate")
    if window is not None and len(s.tokens) > window:
        out.append(f"{len(s.tokens)} tokens, longer than the context window of {window}")
    if vocab is not None:
        bad = [t for t in s.tokens if t < 0 or t >= vocab]
        if bad:
            out.append(f"token id {bad[0]} outside the vocabulary [0, {vocab})")
    if s.reward is None:
        out.append("no reward")
    elif not math.isfinite(s.reward):
        out.append(f"reward is {s.reward}")
    if loss is not None and not math.isfinite(loss):
        out.append(f"its loss term is {loss}")
    return out


class TensorAnomaly(Probe):
    """Replay the non-finite step with hooks on every module: the first overflowing module, or the bad sample."""

    name = "tensor_anomaly"
    outcomes = ("overflow_module", "bad_sample", "clean")
    needs = ("rollout_dump",)
    cost = Cost.CPU
    Params = TensorAnomalyParams
    how_to_get = {"rollout_dump": "rerun with `--dump-details <dir>`: the replay runs on the saved rollout"}
    rollout_context: int | None = None

    def examine(self, run: Run) -> Observation:
        from triage.replay import model as rmodel
        from triage.replay import step as rstep

        p: TensorAnomalyParams = self.params  # type: ignore[assignment]
        dumps = dumped_rollouts(run)
        first = min(dumps)
        onset = nonfinite_onset_rollout(run)
        if p.rollout_id is not None:
            if p.rollout_id not in dumps:
                raise Unavailable("rollout_dump",
                                  f"no rollout dump for rollout {p.rollout_id} (dumped: {sorted(dumps)})",
                                  "rerun with `--dump-details <dir>`")
            order = [p.rollout_id]
        else:
            order = ([onset] if onset in dumps else []) + [r for r in dumps if r != onset][: p.max_rollouts]
        config_dir = rmodel.hf_config_dir(run)
        dtype = rmodel.run_dtype(run)
        device = rmodel.choose_device(rmodel.parameter_count(config_dir), dtype)
        cfg = rstep.LossConfig.from_run(run)
        window = context_window(run, config_dir)
        ctx = run.args.get("rollout_max_context_len")
        self.rollout_context = ctx if isinstance(ctx, int) and ctx > 0 else None
        from triage.weights.convert import load_hf_config

        vocab = (load_hf_config(config_dir) or {}).get("vocab_size")
        vocab = vocab if isinstance(vocab, int) else None
        base = {"replay": "in_process", "dtype": str(dtype).replace("torch.", ""),
                "nonfinite_onset_rollout": onset, "safe_fraction": p.safe_fraction}
        loaded: dict[str, ReplayModel] = {}
        replayed = []
        for rid in order:
            dump = run.rollout_dump(dumps[rid])
            samples = rstep.samples_of(dump, cfg.reward_key)
            if not samples:
                continue
            evidence = {**base, "rollout_id": rid, "rollout_dump": str(dumps[rid].name)}
            out_of_vocab = [s for s in samples if vocab is not None and any(t < 0 or t >= vocab for t in s.tokens)]
            if out_of_vocab:
                return self._bad_sample(rid, out_of_vocab[0], [s.position for s in out_of_vocab], samples,
                                        vocab, window, None, evidence, "its tokens cannot be embedded")
            source = rmodel.source_for_rollout(run, rid, first)
            key = f"{source.path}:{source.iteration}"
            if key not in loaded:
                try:
                    loaded = {key: rmodel.load_model(config_dir, source, dtype, device)}
                except BadInput as exc:
                    raise Unavailable("checkpoint", str(exc),
                                      "keep the run's --ref-load / --save checkpoints reachable") from None
            model = loaded[key]
            evidence["model"] = model.describe()
            replayed.append(rid)
            found = self._replay_rollout(model, samples, cfg, p)
            if found is None:
                continue
            return self._localise(model, samples, cfg, p, rid, found, vocab, window, evidence)
        return self.observe(
            "clean",
            f"Replaying rollout(s) {', '.join(map(str, replayed)) or 'none'} in {base['dtype']} with hooks on every "
            "module found no NaN/Inf and no value beyond the dtype's safe range.",
            0.6, **base, rollouts_replayed=replayed)

    # -- replays ---------------------------------------------------------------------------------
    def _replay_rollout(self, model: ReplayModel, samples: list[ReplaySample], cfg: LossConfig,
                        p: TensorAnomalyParams) -> StepFailure | None:
        """Each optimizer step of the rollout, micro-batch by micro-batch, with the watch on.

        Returns the first step that went wrong: (step, its positions, [(micro-batch, first anomaly,
        per-sample loss terms)] for every micro-batch of it that went non-finite).
        """
        from triage.replay import step as rstep
        from triage.replay.hooks import TensorWatch

        old = rstep.log_probs(model.model, samples, cfg)
        adv = rstep.advantages(samples, cfg)
        gbs = cfg.global_batch_size or len(samples)
        steps = max(1, math.ceil(len(samples) / gbs))
        for k in range(steps):
            positions = rstep.step_indices(len(samples), cfg, k)
            bad_mbs = []
            for mb in rstep.micro_batches(positions, cfg.micro_batch_size):
                with TensorWatch(model.model, p.safe_fraction) as watch:
                    result = rstep.train_step(model.model, samples, mb, old, None, adv, cfg, watch=watch, step=k)
                nonfinite = any(not math.isfinite(v) for v in result.per_sample_loss.values())
                if watch.found is not None or nonfinite or not math.isfinite(result.grad_norm):
                    bad_mbs.append((mb, watch.found, result.per_sample_loss))
            if bad_mbs:
                return k, positions, bad_mbs
        return None

    def _per_sample(self, model: ReplayModel, samples: list[ReplaySample], cfg: LossConfig,
                    p: TensorAnomalyParams, positions: list[int], step: int) -> dict[int, tuple[Anomaly | None, float]]:
        """Each sample replayed alone (a micro-batch of one): its anomaly, if any, and its loss term."""
        from triage.replay import step as rstep
        from triage.replay.hooks import TensorWatch

        out: dict[int, tuple[Anomaly | None, float]] = {}
        single = dataclasses.replace(cfg, micro_batch_size=1)
        adv = rstep.advantages(samples, cfg)
        for i in positions:
            old = rstep.log_probs(model.model, [samples[i]], single)
            with TensorWatch(model.model, p.safe_fraction) as watch:
                r = rstep.train_step(model.model, [samples[i]], [0], old, None, [adv[i]], single, watch=watch,
                                     step=step)
            out[i] = (watch.found, r.per_sample_loss.get(0, math.nan))
        return out

    def _localise(self, model: ReplayModel, samples: list[ReplaySample], cfg: LossConfig, p: TensorAnomalyParams,
                  rid: int, found: StepFailure,
                  vocab: int | None, window: int | None, evidence: dict[str, Any]) -> Observation:
        step, positions, bad_mbs = found
        n_mbs = len(rstep_micro_batches(positions, cfg.micro_batch_size))
        evidence["step"] = step
        evidence["micro_batches_nonfinite"] = [mb for mb, _, _ in bad_mbs]
        evidence["micro_batches_in_step"] = n_mbs
        anomaly = next((a for _, a, _ in bad_mbs if a is not None), None)
        suspects = sorted(i for mb, _, _ in bad_mbs for i in mb)
        bad: list[int] = []
        alone: dict[int, tuple[Anomaly | None, float]] = {}
        if len(bad_mbs) < n_mbs or n_mbs == 1:  # some micro-batches are fine: find the samples that are not
            alone = self._per_sample(model, samples, cfg, p, suspects, step)
            bad = [i for i, (a, loss) in alone.items() if a is not None or not math.isfinite(loss)]
            evidence["samples_reproducing_alone"] = bad
        evidence["samples_in_step"] = len(positions)
        n = cfg.n_samples_per_prompt
        groups = sorted({i // n for i in bad})
        whole_groups = n > 1 and bool(bad) and len(bad) == n * len(groups)
        units, total = (len(groups), max(1, len(positions) // n)) if whole_groups else (len(bad), len(positions))
        if bad and units < total and units <= max(1, int(p.bad_sample_fraction * total)):
            a, loss = alone[bad[0]]
            if a is not None:
                evidence["anomaly_of_sample"] = a.evidence()
            if whole_groups:
                evidence["prompt_groups"] = groups
                how = (f"replayed alone, the {len(bad)} samples of prompt group(s) {', '.join(map(str, groups))} "
                       f"reproduce the non-finite value and the other {len(positions) - len(bad)} samples "
                       "of the step do not")
            else:
                how = (f"replayed alone it reproduces the non-finite value ({len(bad)} of the step's "
                       f"{len(positions)} samples do; the others do not)")
            return self._bad_sample(rid, samples[bad[0]], bad, samples, vocab, window, loss, evidence, how)
        a = anomaly or next((x for x, _ in alone.values() if x is not None), None)
        if a is None:
            nonfinite = sorted(i for _, _, per in bad_mbs for i, v in per.items() if not math.isfinite(v))
            evidence["nonfinite_sample_losses"] = nonfinite
            return self.observe(
                "clean",
                f"Step {step} of rollout {rid} has non-finite loss terms in {len(nonfinite)} of its {len(positions)} "
                "samples, but no module output or gradient goes non-finite and no few samples explain it.",
                0.5, **evidence)
        from triage.replay.model import describe_parameters

        ev = a.evidence()
        if a.weights:
            ev["weights"] = describe_parameters(model, list(a.weights))
        megatron = model.hf_to_megatron.get(f"{a.module}.weight")
        if megatron:
            ev["megatron_module"] = megatron.rsplit(".", 1)[0]
        evidence.update(ev)
        where = (a.module or type(model.model).__name__) + (f" (Megatron {ev['megatron_module']})" if megatron else "")
        rng = (f"; its inputs span |x| {a.input_abs_min:.3g}..{a.input_abs_max:.3g}"
               if a.input_abs_max is not None else "")
        wr = f", its weights |w| {a.weight_abs_min:.3g}..{a.weight_abs_max:.3g}" if a.weight_abs_max is not None else ""
        spread = (f"in {len(bad_mbs)} of the step's {n_mbs} micro-batches" if not alone
                  else f"for {len(bad)} of the {len(alone)} samples replayed alone")
        return self.observe(
            "overflow_module",
            f"{'NaN/Inf' if a.kind == 'nonfinite' else 'Values beyond the safe range'} first appear in the "
            f"{a.phase} {'output' if a.phase == 'forward' else 'gradient'} of {where} ({a.op}, {a.dtype}) at step "
            f"{a.step} of rollout {rid}, {spread}{rng}{wr}.",
            0.85, **evidence)

    def _bad_sample(self, rid: int, s: ReplaySample, bad: list[int], samples: list[ReplaySample],
                    vocab: int | None, window: int | None, loss: float | None, evidence: dict[str, Any],
                    how: str) -> Observation:
        reasons = why_bad(s, vocab, window, loss, self.rollout_context)
        evidence.update({
            "rollout_id": rid, "sample_index": s.position, "sample_id": s.sample_id, "bad_samples": bad,
            "response_length": s.response_length, "total_length": len(s.tokens), "reward": s.reward,
            "status": s.status, "why": reasons, "first_tokens": list(s.tokens[:16]),
        })
        what = "; ".join(reasons) if reasons else "no visible defect in its fields"
        return self.observe(
            "bad_sample",
            f"Sample {s.position} of rollout {rid} (index {s.sample_id}) is bad: {how}. {what[0].upper() + what[1:]}.",
            0.85, **evidence)
