"""Where NaN / Inf first appear in the metrics, and whether training ever recovered.

A NaN in one batch that is followed by finite steps is a bad batch (an empty or
extreme sample: `data.bad_sample`); a NaN that persists from some step on is the
model or the optimiser going non-finite (overflow, exploding gradients, FP8 scales).
The axolotl guide's rule of thumb for which pass broke: "If grad_norm goes to NaN, the
backward pass is the problem. If loss is NaN but grad_norm was fine on the previous
step, the forward pass is the problem" — so the evidence says which went first, and
how grad_norm moved before the onset (a climb first means an explosion, not a sample).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, ConfigDict

from triage.anomaly import NonFinite, evidence_number, nonfinite_onset, trend
from triage.errors import Unavailable
from triage.finding import Observation
from triage.metrics import Series, flag_arg
from triage.probe import Cost, Probe
from triage.run.run import NEEDS_HELP
from triage.thresholds import count, threshold

if TYPE_CHECKING:
    from triage.run.run import Run

# The series that go non-finite when training does, in the order the evidence lists them.
WATCHED = (
    "grad_norm",
    "loss",
    # a PPO critic's update goes non-finite on its own (verl-project/verl#498: `critic/grad_norm:nan`
    # with the actor's finite)
    "critic_grad_norm",
    "value_loss",
    "pg_loss",
    "kl",
    "ppo_kl",
    "entropy",
    "log_probs",
    "ref_log_probs",
    "rollout_log_probs",
    "raw_reward",
    "reward",
    "advantages",
    "logp_diff",
)


class NonfiniteParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # sources and units: triage/thresholds.yaml
    max_isolated: int = count("nonfinite.max_isolated")  # recovered non-finite records that are bad batches
    trend_window: int = count("nonfinite.trend_window")  # grad_norm values before the onset the evidence quotes


def watched_series(run: Run) -> list[Series]:
    seen: set[str] = set()
    out = []
    for name in WATCHED:
        s = run.metrics.get(name)
        if s is not None and s.source not in seen and len(s):
            seen.add(s.source)
            out.append(s)
    return out


# The series an update is made of: a NaN that reaches training shows in them (the axolotl guide:
# "If grad_norm goes to NaN, the backward pass is the problem. If loss is NaN ... the forward pass").
UPDATE_SERIES = ("grad_norm", "loss", "critic_grad_norm", "value_loss")


def _kind(series: Series) -> str:
    return series.source.split(":", 1)[0]


def _ordinal_note(run: Run, series: Series, at: int) -> str:
    """For records that carry no step (`Series.step_word`: the HF Trainer's printed dicts, numbered in the order the
    log holds them, so a fragment's first record is "1" wherever in training it was printed; hiyouga/LlamaFactory#5627:
    the first NaN at `'epoch': 0.66`): that they are counted from the log's first, and the epoch the record at `at`
    gives, where the same records log one."""
    if series.step_word != "record":
        return ""
    epoch = run.metrics.raw(_kind(series), "epoch")
    where = ""
    if epoch is not None and len(epoch):
        hit = np.flatnonzero(epoch.steps == at)
        if hit.size and np.isfinite(epoch.values[hit[0]]):
            where = f", at epoch {float(epoch.values[hit[0]]):g}"
    return f" (the printed records carry no step: counted from the first one the log holds{where})"


# The HF Trainer's records (printed, in trainer_state.json, pasted, and ms-swift's, which its Trainer logs): the loss
# they log is filtered, a NaN or Inf step's loss left out of the logged average (transformers TrainingArguments
# `logging_nan_inf_filter`, True by default), so a finite logged loss does not say the update was finite
# (huggingface/trl#1199 and hiyouga/LlamaFactory#2078: `'loss': 0.0` beside `'logps/chosen': nan` under fp16)
NAN_FILTERED_LOSS_KINDS = frozenset({"hf", "hf_log", "hf_paste", "swift"})


def _finite_update_at(run: Run, s: Series, steps: tuple[int, ...] | list[int]) -> bool:
    """The loss and grad_norm (those logged in the same records as `s`) are finite at every one of
    `steps`, and at least one was logged there. Records of another kind (slime's rollout records
    beside its train steps) are numbered otherwise, so they are not compared; the HF Trainer's logged
    loss, NaN-filtered, is not compared either."""
    seen = False
    for name in UPDATE_SERIES:
        u = run.metrics.get(name)
        if u is None or not len(u) or _kind(u) != _kind(s):
            continue
        if name == "loss" and _kind(u) in NAN_FILTERED_LOSS_KINDS:
            continue
        at = np.isin(u.steps, np.asarray(steps))
        if not at.any():
            continue
        if at.sum() < len(steps) or not np.all(np.isfinite(u.values[at])):
            return False
        seen = True
    return seen


def _pair_nonfinite(run: Run, s: Series, steps: tuple[int, ...] | list[int]) -> bool:
    """A preference trainer's two log-prob means (TRL's DPO / KTO / ORPO `logps/chosen` and `logps/rejected`) both
    non-finite on one record: a batch holds one side at least (KTO's may hold only one, and logs the other's mean over
    nothing as NaN: huggingface/trl#1447), so both at once is the forward pass gone non-finite, not a mean over
    nothing (modelscope/ms-swift#5418: both NaN, `logits/*` and `nll_loss` NaN beside them, under a finite grad_norm)."""
    kind = _kind(s)
    chosen, rejected = run.metrics.raw(kind, "logps/chosen"), run.metrics.raw(kind, "logps/rejected")
    if chosen is None or rejected is None:
        return False
    at = {int(x) for x in steps}
    bad_c = {int(st) for st, v in zip(chosen.steps.tolist(), chosen.values.tolist()) if not np.isfinite(v)}
    bad_r = {int(st) for st, v in zip(rejected.steps.tolist(), rejected.values.tolist()) if not np.isfinite(v)}
    return bool(at & bad_c & bad_r)


def nonfinite_by_series(run: Run) -> list[tuple[Series, NonFinite]]:
    """Every watched series with a NaN / Inf, earliest onset first (grad_norm first on a tie).

    A diagnostic series (kl, entropy, a reward, log-probs) that is NaN only on records whose loss and
    grad_norm are finite did not reach the update: a metric averaged over nothing (a KL logged without
    a reference model, a ratio over zero tokens), not training gone non-finite; it is left out.
    """
    found = []
    for order, s in enumerate(watched_series(run)):
        nf = nonfinite_onset(s.values, s.steps)
        if nf is None:
            continue
        if s.name not in UPDATE_SERIES and not _pair_nonfinite(run, s, nf.steps) \
                and _finite_update_at(run, s, [int(x) for x in nf.steps]):
            continue
        found.append((order, s, nf))
    found.sort(key=lambda t: (t[2].onset_step, t[0]))
    return [(s, nf) for _o, s, nf in found]


def _describe(s: Series, nf: NonFinite) -> dict[str, Any]:
    return {
        "metric": s.source,
        "onset_step": nf.onset_step,
        "nonfinite_steps": list(nf.steps[:20]),
        "nonfinite_count": len(nf.steps),
        "records": nf.total,
        "values": sorted({v for r in nf.runs for v in r.values}),
        "recovered": not nf.persistent,
        "finite_before": [evidence_number(v) for v in nf.finite_before],
    }


def grad_norm_before(run: Run, onset_step: int, window: int) -> dict[str, Any] | None:
    """How grad_norm moved in the `window` finite records before a step."""
    g = run.metrics.get("grad_norm")
    if g is None:
        return None
    mask = (g.steps < onset_step) & np.isfinite(g.values)
    values, steps = g.values[mask], g.steps[mask]
    if values.size == 0:
        return {"metric": g.source, "values": [], "note": "no finite grad_norm before the onset"}
    last_vals, last_steps = values[-window:], steps[-window:]
    earlier = values[:-window] if values.size > window else values[:1]
    t = trend(last_vals, last_steps)
    base = float(np.median(earlier))
    return {
        "metric": g.source,
        "steps": [int(s) for s in last_steps],
        "values": [evidence_number(v) for v in last_vals],
        "last_over_earlier_median": evidence_number(float(last_vals[-1]) / base) if base > 0 else None,
        "trend": t.as_evidence(),
        "rising": t.rising(alpha=threshold("nonfinite.rising_alpha"))
        and float(last_vals[-1]) > threshold("nonfinite.rising_ratio") * base,
    }


def finite_gradients_at(run: Run, found: list[tuple[Series, NonFinite]]) -> Series | None:
    """The grad norm series logged finite at every step where `found` is non-finite, if one was.

    The catalog's NaN gradient is read from the grad norm itself; a loss (or another metric) that is
    non-finite in records whose grad norm is finite did not put a NaN into the update: the logged value
    is an average over nothing or a term that does not reach the gradients (huggingface/trl#1447: KTO's
    loss NaN on batches with no rejected example, grad_norm 29-55 throughout).
    """
    grads = ("grad_norm", "critic_grad_norm")
    if any(s.name in grads for s, _nf in found):
        return None  # a grad norm went non-finite itself (a PPO critic's beside a finite actor's, verl#498)
    for name in grads:
        g = run.metrics.get(name)
        if g is None or not len(g):
            continue
        for s, nf in found:
            if _kind(g) != _kind(s):
                return None
            at = np.isin(g.steps, np.asarray(nf.steps))
            if at.sum() < len(set(nf.steps)) or not np.all(np.isfinite(g.values[at])):
                return None
        return g
    return None


def scaler_skips(run: Run, found: list[tuple[Series, NonFinite]]) -> list[int]:
    """The steps of a grad norm that went NaN/Inf on its own, the loss finite on each and the series finite again after:
    fp16's dynamic loss scaling skipping the update (torch.amp.GradScaler: "if any inf/NaN gradients are found,
    optimizer.step() is skipped" and the scale shrinks; the HF Trainer logs that step's grad norm as it is and does
    not step the scheduler: MemaSp/FT-Llama2-HRChatbot's trainer_state.json, `'grad_norm': inf` at step 33 with the LR
    of step 32 and a loss of 0.3391). Empty where anything else went non-finite or the grad norm stayed so."""
    if len(found) != 1 or found[0][0].name != "grad_norm" or found[0][1].persistent:
        return []
    # no loss scaler in bf16; the RL frameworks' own trainers run bf16 unless told fp16
    from probes.grad_norm_health import RL_FRAMEWORKS

    if flag_arg(run, "bf16") is True or (run.framework in RL_FRAMEWORKS and flag_arg(run, "fp16") is not True):
        return []
    g, nf = found[0]
    loss = run.metrics.get("loss")
    if loss is None:
        return []
    at = dict(zip(loss.steps.tolist(), loss.values.tolist()))
    if not all(st in at and np.isfinite(at[st]) for st in nf.steps):
        return []
    return list(nf.steps)


def training_nonfinite(run: Run) -> list[tuple[Series, NonFinite]]:
    """The non-finite series of `nonfinite_by_series`, less the loss scaler's skips (`scaler_skips`)."""
    found = nonfinite_by_series(run)
    return [] if found and scaler_skips(run, found) else found


def _no_update_after(run: Run, step: int) -> int:
    """The records after `step` when the grad norm is exactly 0 on every one of them (at least 2), else 0."""
    g = run.metrics.get("grad_norm")
    if g is None:
        return 0
    later = g.values[g.steps > step]
    return int(later.size) if later.size >= 2 and np.all(later == 0) else 0


class NonfiniteOnset(Probe):
    """The first NaN/Inf in loss, grad_norm, rewards or log-probs, and whether training recovered.

    Outcomes: `isolated` (finite again after a few records), `persistent` (non-finite from some step on,
    or recurring), `finite_gradients` (non-finite values that persist or recur while the grad norm logged
    beside them stays finite), `none`.
    """

    name = "nonfinite_onset"
    outcomes = ("isolated", "persistent", "finite_gradients", "none")
    needs = ("metrics",)
    cost = Cost.STATIC
    Params = NonfiniteParams

    def examine(self, run: Run) -> Observation:
        p: NonfiniteParams = self.params  # type: ignore[assignment]
        series = watched_series(run)
        if not series:
            raise Unavailable(
                "metrics", "no loss, grad_norm, reward or log-prob series in the metrics", NEEDS_HELP["metrics"]
            )
        found = nonfinite_by_series(run)
        if not found:
            # a diagnostic series non-finite only beside a finite update is set aside, and said so: a report
            # calling every value finite over a KL that is NaN on each record reads as wrong (open-r1#704)
            aside = []
            for s in series:
                nf = nonfinite_onset(s.values, s.steps)
                if nf is not None:
                    aside.append({"metric": s.source, "nonfinite_count": len(nf.steps), "records": nf.total})
            if not aside:
                summary = f"Every value of {len(series)} watched metrics is finite."
            else:
                named = ", ".join(f"{a['metric'].split(':', 1)[-1]} ({a['nonfinite_count']} of {a['records']} records)"
                                  for a in aside)
                summary = (f"The update stayed finite: {named} NaN/Inf only where the loss and grad norm logged beside "
                           "it are finite, a metric averaged over nothing (a KL with no reference model, a ratio "
                           "over zero tokens), set aside.")
            return self.observe(
                "none",
                summary,
                0.9,
                metrics=[s.source for s in series],
                records=max(len(s) for s in series),
                **({"set_aside": aside} if aside else {}),
            )
        skips = scaler_skips(run, found)
        if skips:
            return self.observe(
                "none",
                f"grad_norm is NaN/Inf only at {found[0][0].step_word}{'s' if len(skips) > 1 else ''} "
                f"{', '.join(map(str, skips[:10]))}, where the loss stayed finite, and finite again after each: the "
                "fp16 loss scaler skipping an update whose gradients overflowed (its check at work), not a NaN in "
                "training.",
                0.7,
                scaler_skips=skips,
                metrics=[s.source for s in series],
                records=max(len(s) for s in series),
            )
        first_series, first = found[0]
        evidence: dict[str, Any] = {
            "onset_step": first.onset_step,
            "onset_metric": first_series.source,
            "metrics": [_describe(s, nf) for s, nf in found],
            "finite_before": [evidence_number(v) for v in first.finite_before],
        }
        gn = grad_norm_before(run, first.onset_step, p.trend_window)
        if gn is not None:
            evidence["grad_norm_before"] = gn
        grad = next(((s, nf) for s, nf in found if s.name == "grad_norm"), None)
        loss = next(((s, nf) for s, nf in found if s.name in ("loss", "pg_loss")), None)
        if grad is not None and loss is not None:
            evidence["first_pass"] = "backward" if grad[1].onset_step <= loss[1].onset_step else "forward"
        elif loss is not None:
            evidence["first_pass"] = "forward"
        elif grad is not None:
            evidence["first_pass"] = "backward"

        names = ", ".join(sorted({s.key for s, _nf in found}))
        persistent = [(s, nf) for s, nf in found if nf.persistent]
        worst = max(len(nf.steps) for _s, nf in found)
        finite_grad = finite_gradients_at(run, found) if persistent or worst > p.max_isolated else None
        if finite_grad is not None:
            pair = any(_pair_nonfinite(run, s, nf.steps) for s, nf in found)
            head = (f"{names} {'is' if len(found) == 1 else 'are'} non-finite from {first_series.step_word} "
                    f"{first.onset_step} on")
            summary = (f"{head}, with both sides of the preference pair non-finite on those batches: the forward pass "
                       f"went non-finite, while {finite_grad.key} stays finite on every one of those records (an update "
                       "the trainer skipped or clipped)." if pair else
                       f"{head}, but {finite_grad.key} is finite on every one of those records: the update itself did "
                       "not go non-finite (a logged average over nothing, or a loss term that does not reach the "
                       "gradients).")
            return self.observe(
                "finite_gradients",
                summary,
                0.7,
                grad_norm_finite={"metric": finite_grad.source, "records": len(finite_grad),
                                  "max": evidence_number(float(np.max(finite_grad.values)))},
                **evidence,
            )
        if persistent:
            s, nf = min(persistent, key=lambda t: t[1].runs[-1].start_step)
            start = nf.runs[-1].start_step
            evidence["persistent_from_step"] = start
            if all(n.runs[-1].length < 2 for _s, n in persistent):
                # only the last record logged is non-finite (verl-project/verl#1037 pasted one step): no
                # later record says whether training recovers, so this is the weaker reading
                return self.observe(
                    "persistent",
                    f"{s.key} is non-finite at {s.step_word} {start}, the last record logged; no later record shows "
                    f"whether training recovers (non-finite: {names}){_ordinal_note(run, s, start)}.",
                    0.6,
                    last_record_only=True,
                    **evidence,
                )
            unit = first_series.step_word
            return self.observe(
                "persistent",
                f"{s.key} is non-finite from {s.step_word} {start} on and never recovers "
                f"(first NaN/Inf at {unit} {first.onset_step} in {first_series.key}; non-finite: {names})"
                f"{_ordinal_note(run, first_series, first.onset_step)}.",
                0.85,
                **evidence,
            )
        if worst > p.max_isolated:
            return self.observe(
                "persistent",
                f"NaN/Inf recur: {worst} non-finite records from {first_series.step_word} {first.onset_step} on ({names}), "
                "each time followed by finite records — more than a single bad batch.",
                0.6,
                recurring=True,
                **evidence,
            )
        steps = sorted({st for _s, nf in found for st in nf.steps})
        dead = _no_update_after(run, max(steps))
        if dead:
            # "finite again" only as a gradient of exactly 0: nothing was updated after the NaN, so training did
            # not get past it (elena-lyulina/Megatron-LM-Attention-Benchmark: `grad norm: nan` at iteration 1, then
            # `grad norm: 0.000` with the lm loss frozen at 1.040111E+01 to the end)
            return self.observe(
                "persistent",
                f"NaN/Inf at {first_series.step_word}{'s' if len(steps) > 1 else ''} {', '.join(map(str, steps))} "
                f"({names}), and the grad norm is exactly 0 on all {dead} records after it: nothing was updated "
                "again, so training never recovered.",
                0.7,
                no_update_after=dead,
                **evidence,
            )
        return self.observe(
            "isolated",
            f"NaN/Inf only at {first_series.step_word}{'s' if len(steps) > 1 else ''} {', '.join(map(str, steps))} "
            f"({names}); training is finite again afterwards: one bad batch, not a diverged model.",
            0.8,
            isolated_steps=steps,
            **evidence,
        )
