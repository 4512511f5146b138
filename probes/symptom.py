"""The run's primary symptom: what the entry graph dispatches on.

Every check below runs, and the evidence lists every symptom seen (so a report can say
"also: grad-norm spikes"); the outcome is the first in this precedence order, from the
most to the least decisive:

1. `error_exit` — a fatal error or traceback ends the job (not warnings, not HTTP errors
   that were retried, not an error the job survived: one followed by two or more
   progress lines in the same file, unless the run is known to have failed). NCCL
   watchdog timeouts alone, with hang evidence, are a hang, not a crash. Progress is a
   `Finish rollout` sample, a Relax progress line, a checkpoint save or a weight update.
   `ignore_errors` skips this (used after an unrecognised crash, to fall through to the
   metric symptoms).
2. `stuck_at_submission` — Ray placement-group wait lines and no step / rollout record:
   the job never got its GPUs.
3. `hang` — flight-recorder dumps; or a timer that started and never ended together
   with NCCL watchdog / timeout lines; or a run marked running whose log has not been
   written for `stall_s` seconds.
4. `garbled_rollouts` — the first rollout's responses (its `Finish rollout` sample, the
   lowest-id rollout dump) are not text: checkpoint loading / conversion territory.
5. `step1_anomaly` — slime's first-step invariants fail: log_probs != ref_log_probs,
   ppo_kl / kl_loss != 0 at step 0, or |log_probs| per token at or above the guides'
   0.8 (`step1_invariants`' own bars, so the symptom and the probe never disagree).
6. `nonfinite` — NaN / Inf in loss, grad_norm, rewards or log-probs.
7. `grad_explosion` — grad_norm spikes (robust z, leaving the guide's healthy 0.001–1.0;
   or > 100) or sustained growth (> 10), or loss spikes of 2x and more.
8. `truncation` — the truncated / clipped ratio is above 0.8 (most responses hit the
   length limit, or the metric counts turn terminators as clipping). Before a gradient
   or a reward that never moves: a completion cut at the limit never reaches its answer,
   so its group scores alike and its advantage is 0 as a consequence.
9. `no_update` — grad_norm exactly 0 on every record: no update ever reached the weights.
10. `policy_drift` — entropy collapse, KL blow-up, aggressive clipping, stale or
   mismatched log-probs, length hacking. (Before a flat reward: a collapsed policy's
   groups get identical rewards as a consequence.)
11. `reward_flat` — the reward is constantly 0, has no spread, or never improves.
12. `no_symptom`.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, ConfigDict

from triage.errors import Unavailable
from triage.finding import ALSO_SEEN_OUTCOMES, UNJUDGED_OUTCOMES, UNSEEN_OUTCOMES, Observation
from triage.formats.slime_log import LAST_TRY
from triage.formats.tracebacks import Chain, went_on_after
from triage.probe import Cost, Probe
from triage.run.run import NEEDS_HELP
from triage.text_quality import garble_score, judge_texts
from triage.thresholds import count, threshold

from probes.error_signatures import CONSEQUENCE_LINE, cut_traceback_line, progress_lines, scan, short, stopped_on
from probes.grad_norm_health import GradNormHealth, loss_spikes, loss_with_level, rl_run
from probes.nonfinite_onset import NonfiniteOnset
from probes.policy_drift import PolicyDrift
from probes.reward_signal import RewardSignal
from probes.rollout_text import dump_samples, examples, log_samples, verdict_evidence
from probes.step1_invariants import Step1Invariants
from probes.truncation import Truncation

if TYPE_CHECKING:
    from triage.formats.log_index import LogLine
    from triage.run.run import Run

PRECEDENCE = (
    "error_exit",
    "stuck_at_submission",
    "hang",
    "garbled_rollouts",
    "step1_anomaly",
    "nonfinite",
    "grad_explosion",
    # most responses cut at the length limit: a cut completion never reaches its answer, so every
    # sample of a group scores the same and the advantages, the gradient and the reward's spread are
    # 0 as a consequence (huggingface/trl#5697: clipped_ratio 1.0, grad_norm 0 and reward 0 on every
    # step, fixed by a longer max_completion_length), so it comes before the no-update and reward checks
    "truncation",
    # grad_norm exactly 0 on every record: nothing was ever updated (before the reward checks,
    # which say why when the reward is the reason)
    "no_update",
    # drift before a flat reward: a collapsed policy samples identical responses, so its
    # groups show zero reward std as a consequence, not a cause
    "policy_drift",
    "reward_flat",
)
# the symptoms only a series of records can show (a spike over its median, grad_norm 0 on every record, a drift, a
# reward that never moves): in fewer records than health.grad_norm.min_records they were not looked for
TREND_SYMPTOMS = ("grad_explosion", "no_update", "policy_drift", "reward_flat")
# the symptoms read from the metrics
METRIC_SYMPTOMS = ("step1_anomaly", "nonfinite", "grad_explosion", "truncation", "no_update", "policy_drift", "reward_flat")
# The steps a log recorded after a traceback are counted by the traceback reader, which reads a log at about 12 MB/s
# (10.6 s for benchmarks/bench_ingest.py's 128 MB slime log): past this size the symptom check does not read it (the
# static triage of the 1 GB log took 82 s instead of 5.5 s), and an error with steps after it counts only the
# progress lines the log index keeps
STEP_COUNT_MAX_BYTES = 32 << 20
RETRYING = re.compile(r"retrying|\battempt \d+/\d+", re.I)


def _few_records_hints(run: Run) -> list[dict[str, str]]:
    """What records too few for a trend still point at, for the report's candidates (not a finding of the run's).
    Most responses cut at the limit on every record comes first: a cut completion scores like its group's others,
    so the groups' lack of spread is its consequence (huggingface/trl#5697)."""
    cut = run.metrics.get("truncated_ratio")
    bar = threshold("truncation.clipped_ratio")
    if cut is not None and len(cut) and bool(np.all(cut.values > bar)):
        because = (f"on every one of the {len(cut)} record{'s' if len(cut) > 1 else ''} logged, "
                   f"{float(np.min(cut.values)):.0%} or more of the responses were cut at the length limit ({cut.source}; "
                   f"the guide's bar {bar:.0%}): too few records to tell a limit too small from a missing stop token")
        return [{"verdict": "rollout.max_len_too_small", "because": because},
                {"verdict": "rollout.missing_stop_token", "because": because}]
    hint = _no_spread_on_every_record(run)
    if hint is not None:
        return [{"verdict": "reward.no_signal", "because": hint}]
    g = run.metrics.get("grad_norm")
    if g is not None and rl_run(run):
        v = g.values[np.isfinite(g.values)]
        if v.size and bool(np.all(v == 0.0)):
            # an RL step whose gradient is exactly 0 learned nothing: the no-update question's causes (playbooks/
            # no_update.yaml), too few records to ask it (JuncyLu/trl_DAPO: grad_norm 0.0 on 3 of 3 records)
            because = (f"grad_norm is exactly 0 on every one of the {v.size} record{'s' if v.size > 1 else ''} logged "
                       f"({g.source}): nothing was updated on those steps, too few of them to ask why")
            return [{"verdict": vid, "because": because}
                    for vid in ("reward.no_signal", "algo.degenerate_groups", "reward.broken_fn")]
    fell = _entropy_fell_below_bar(run)
    if fell is not None:
        return [fell]
    if g is not None and rl_run(run):
        from probes.reward_signal import zero_std_fraction

        z = zero_std_fraction(run)
        zbar = threshold("reward.zero_std_fraction")
        last = g.values[np.isfinite(g.values)]
        if z is not None and len(z) and last.size and float(last[-1]) == 0.0 and float(z.values[-1]) > zbar:
            # the latest record learned nothing: no group's rewards differed and the gradient was exactly 0
            # (bingreeky/MemGen#33: reward 0, frac_reward_zero_std 1.0 and grad_norm 0.0 on the second record)
            return [{"verdict": vid,
                     "because": (f"on the latest record logged {float(z.values[-1]):.0%} of the prompt groups had no "
                                 f"reward spread ({z.source}) and grad_norm is exactly 0 ({g.source}): that step learned "
                                 "nothing, too few records to say the run does not")}
                    for vid in ("reward.no_signal", "reward.broken_fn")]
    return []


# A reward manager's report of its function's error on one sample, caught and scored as nothing (verl's prime reward
# manager: `[Error] Task failed: {e}, completion: …`, verl-project/verl#3150; a reward loop's `reward_fn failed on row
# 127: KeyError('question')`, AI-Hypercomputer/maxtext#4140)
_REWARD_SAMPLE_FAILED = re.compile(r"\[Error\] Task failed: .*\bcompletion\b"
                                   r"|\breward(?:_fn|_func(?:tion)?| function)\b.{0,40}\bfailed\b.*\b[A-Z]\w*(?:Error|Exception)\b")


def _reward_sample_failure(run: Run) -> LogLine | None:
    """The first line of the log reporting a reward function's caught failure on a sample, if any."""
    for line in run.log.errors:
        if ("ailed" in line.text) and _REWARD_SAMPLE_FAILED.search(line.text):
            return line
    return None


def _keep_open(evidence: dict[str, Any], outcome: str, verdict: str, because: str) -> None:
    """Beside no symptom: `outcome` was not seen but not ruled out, and `verdict` is a candidate for `because`."""
    unseen = evidence.setdefault(UNSEEN_OUTCOMES, [])
    if outcome not in unseen:
        unseen.append(outcome)
    evidence["suggests"] = [*evidence.get("suggests", []), {"verdict": verdict, "because": because}]


def _entropy_below_bar_throughout(run: Run) -> str | None:
    """The entropy below the guide's collapse bar on every record (two or more), above 0 (a trainer that logs an
    entropy it never computed writes 0: huggingface/open-r1#704): what such records say, or None."""
    e = run.metrics.get("entropy")
    if e is None:
        return None
    v = e.values[np.isfinite(e.values)]
    bar = threshold("drift.entropy_min")
    if v.size < 2 or not bool(np.all((v > 0) & (v < bar))):
        return None
    start = int(e.steps[0]) if len(e.steps) else None
    where = f" from {e.step_word} {start} on" if start is not None and e.step_word != "record" else ""
    return (f"the entropy is below the guide's collapse bar {bar:g} on every one of the {v.size} records logged"
            f"{where} ({e.source}, at most {float(np.max(v)):.3g}): whether it fell there is not in these records")


def _entropy_fell_below_bar(run: Run) -> dict[str, str] | None:
    """An entropy that fell below the guide's collapse bar within the few records logged, as a candidate's hint
    (JuncyLu/trl_DAPO: 1.03, 0.11, 0.0085 over three records, clipped completions rising to 99%)."""
    e = run.metrics.get("entropy")
    bar = threshold("drift.entropy_min")
    if e is None:
        return None
    v = e.values[np.isfinite(e.values)]
    if v.size < 2 or not float(v[-1]) < bar <= float(v[0]):
        return None
    return {"verdict": "policy.entropy_collapse",
            "because": (f"{e.source} fell from {float(v[0]):.3g} to {float(v[-1]):.3g} within the {v.size} records "
                        f"logged, below the guide's collapse bar {bar:g}: too few records to call the trend")}


def _no_spread_on_every_record(run: Run) -> str | None:
    """Too few records to call a trend, each of them with most groups scoring alike: those steps had no learning
    signal (huggingface/trl#3857, unslothai/unsloth#3485: `frac_reward_zero_std` 1.0 beside a loss and a grad norm
    of 0)."""
    from probes.reward_signal import zero_std_fraction

    bar = threshold("reward.zero_std_fraction")
    z = zero_std_fraction(run)
    if z is not None and len(z) and bool(np.all(z.values > bar)):
        return (f"on every one of the {len(z)} record{'s' if len(z) > 1 else ''} logged, "
                f"{float(np.min(z.values)):.0%} or more of the prompt groups had no reward spread ({z.source}; "
                f"healthy < {bar:.0%}): no learning signal on those steps, too few of them to say the run has none")
    # verl logs the batch's advantage range (verl/trainer/ppo/metric_utils.py compute_data_metrics): a max and a min
    # of 0 are advantages of 0 for every token (rllm-org/rllm#54, zhaochenyang20/Awesome-ML-SYS-Tutorial#106)
    table = run.metrics.table
    if table.has("verl", "critic/advantages/max") and table.has("verl", "critic/advantages/min"):
        _, hi = table.series("verl", "critic/advantages/max")
        _, lo = table.series("verl", "critic/advantages/min")
        if len(hi) and len(hi) == len(lo) and bool(np.all(hi == 0.0) and np.all(lo == 0.0)):
            return (f"on every one of the {len(hi)} record{'s' if len(hi) > 1 else ''} logged the advantages are 0 "
                    "(critic/advantages/max and /min both 0): no learning signal on those steps, too few of them to "
                    "say the run has none")
    return None


def retrying(text: str) -> bool:
    """A line that says it will try again, so the job went on past it."""
    return RETRYING.search(text) is not None and LAST_TRY.search(text) is None
# What the NCCL watchdog prints when a collective never completes (and the abort it triggers).
HANG_LINE = re.compile(r"Watchdog caught collective operation timeout|timed out|timeout|watchdog|DistBackendError", re.I)
# a printed configuration (`server_args=ServerArgs(…, nccl_port=15001, …, watchdog_timeout=300, …)`,
# `Namespace(…)`): its settings name timeouts that did not happen (LLM360/miles's logs/cp2_ep8.log line 1373)
# (eight settings in a row: NCCL's own `WorkNCCL(SeqNum=…, OpType=…, NumelIn=…, NumelOut=…, Timeout(ms)=…)` has four)
CONFIG_DUMP = re.compile(r"(?:\b\w+=[^,\s]*,\s*){8}")


def _sentence(text: str) -> str:
    """Capitalise a plain first word (never a metric key such as `train/grad_norm`) and end with a period."""
    first = text.split(" ", 1)[0]
    if first.isalpha() and first.islower():
        text = text[0].upper() + text[1:]
    return text if text.endswith(".") else text + "."


class SymptomParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    ignore_errors: bool = False  # fall through a crash to the metric symptoms
    # sources and units: triage/thresholds.yaml (the step-1 bars are step1_invariants' own pair)
    first_rollout_samples: int = count("text.first_rollout_samples")  # Finish-rollout samples of the first rollout
    stall_s: float = threshold("symptom.stall_s")  # a running job whose log is this old is hanging
    survived_after: int = count("symptom.survived_after")  # progress lines after an error: the job went on
    garbled_score: float = threshold("text.garbled_score")  # a response scoring this or more is garbled
    garbled_fraction: float = threshold("text.garbled_fraction")  # this share of garbled samples: garbled


def _metric_records(run: Run) -> int:
    """Records of the longest training series (loss, grad_norm, reward) the run logged."""
    return max((len(x) for k in ("grad_norm", "loss", "reward") if (x := run.metrics.get(k)) is not None), default=0)


def _holds_job_records(log: Any) -> bool:
    """Whether a log holds anything the job itself wrote: a metric, an error, a traceback, a progress or
    timer line, a timestamp, its arguments or command line."""
    return bool(not log.metrics.empty() or log.errors or log.tracebacks or log.finish_rollouts or log.notable
                or log.timers or log.placement_group_waits or log.first_timestamp or log.arguments
                or log.command_line or log.unparsed_metric_lines or log.dropped_errors)


class Symptom(Probe):
    """The run's primary symptom (crash, hang, stuck, garbled, step-1, NaN, grad explosion, truncation, reward, drift)."""

    name = "symptom"
    outcomes = (*PRECEDENCE, "no_symptom")
    needs = ()
    cost = Cost.STATIC
    Params = SymptomParams

    def examine(self, run: Run) -> Observation:
        p: SymptomParams = self.params  # type: ignore[assignment]
        # a log that holds no record of the job (only a pasted package list, say) has nothing to classify
        # Ray's report of a request it cannot schedule is read from the logs' heads once, and only when asked
        ray_waits: list[dict[str, Any] | None] = []

        def ray_request_waits() -> dict[str, Any] | None:
            if not ray_waits:
                ray_waits.append(Symptom._ray_request_waits(run))
            return ray_waits[0]

        has_log = bool(run.artifacts.logs) and (_holds_job_records(run.log) or ray_request_waits() is not None
                                                or run.paste_holds_traceback or bool(log_samples(run)))
        has_metrics = not run.metrics.empty()
        has_dumps = bool(run.rollout_dump_paths())
        if not (has_log or has_metrics or has_dumps or run.artifacts.flight_recorder):
            what = "no log record of the job" if run.artifacts.logs else "no log"
            raise Unavailable("log", f"the run has {what}, no metrics and no rollout dumps to classify",
                              NEEDS_HELP["log"])

        seen: dict[str, dict[str, Any]] = {}
        hang = self._hang(run, p)
        if has_log:
            crash = self._error_exit(run, p, hang_evidence=hang is not None)
            if crash is not None:
                seen["error_exit"] = crash
            stuck = self._stuck(run, ray_request_waits)
            if stuck is not None:
                seen["stuck_at_submission"] = stuck
        if hang is not None:
            seen["hang"] = hang
        garbled = self._garbled(run, p)
        if garbled is not None:
            seen["garbled_rollouts"] = garbled
        if has_metrics:
            for name, check in (
                ("step1_anomaly", self._step1),
                ("nonfinite", self._nonfinite),
                ("grad_explosion", self._grad),
                ("no_update", self._no_update),
                ("truncation", self._truncation),
                ("reward_flat", self._reward),
                ("policy_drift", self._drift),
            ):
                found = check(run, p)
                if found is not None:
                    seen[name] = found

        order = [s for s in PRECEDENCE if s in seen]
        skipped = []
        if p.ignore_errors and "error_exit" in order:
            order.remove("error_exit")
            skipped.append("error_exit")
        evidence: dict[str, Any] = {
            "symptoms_seen": [s for s in PRECEDENCE if s in seen],
            "precedence": list(PRECEDENCE),
            "details": seen,
            "inputs": {"log": has_log, "metrics": has_metrics, "rollout_dumps": has_dumps,
                       "flight_recorder": bool(run.artifacts.flight_recorder)},
        }
        if skipped:
            evidence["ignored"] = skipped
        records = _metric_records(run) if has_metrics else 0
        few = 0 < records < count("health.grad_norm.min_records")  # too few records for a trend to show
        if few and (not order or order[0] in METRIC_SYMPTOMS):
            # a trend over records cannot show in fewer than it takes: those symptoms were not looked for, and
            # their causes stay open beside the metrics' other symptoms (a pasted record of every group scoring alike
            # had ruled out the reward's causes; three records of a collapsing entropy under a truncation wall, the
            # entropy's); a crash or a hang is its own story
            unseen = [s for s in TREND_SYMPTOMS if s not in seen]
            if unseen:
                # with no symptom, their causes are the candidates; beside a symptom found, that symptom's causes
                # lead and theirs are only not ruled out
                evidence[UNSEEN_OUTCOMES if not order else UNJUDGED_OUTCOMES] = unseen
            if order and (fell := _entropy_fell_below_bar(run)) is not None:
                # beside the symptom found, an entropy that fell under the collapse bar names its cause among the
                # candidates (a collapse into repetition runs its responses into the length limit: three reports of
                # JuncyLu/trl_DAPO's run had the truncation's causes alone)
                evidence["suggests"] = [fell]
        if not order:
            what = [k.replace("_", " ") for k, v in evidence["inputs"].items() if v]
            listed = " and ".join([", ".join(what[:-1]), what[-1]] if len(what) > 1 else what)
            if few:
                hints = _few_records_hints(run)
                if hints:
                    evidence["suggests"] = hints
            low = _entropy_below_bar_throughout(run) if has_metrics else None
            if low is not None:
                # below the guide's bar on every record: a collapse before the first record logged is not seen as a
                # fall (policy_drift), and not ruled out either (a fragment from step 383 on, TinyZero's notes)
                _keep_open(evidence, "policy_drift", "policy.entropy_collapse", low)
            failed = _reward_sample_failure(run) if has_log else None
            if failed is not None:
                # a reward manager that catches its function's error scores the sample as nothing and goes on: no stop
                # to classify, and the reward's causes stay open with this line for them
                _keep_open(evidence, "reward_flat", "reward.broken_fn",
                           f"the reward function failed on a sample and the job scored it as nothing: "
                           f"`{failed.text[:200]}` at {failed.where()}")
            metrics = ("there are no metrics to check" if not has_metrics else
                       f"its metrics show no symptom, but {low}" if low is not None else
                       "the metrics stay in the guides' healthy ranges" if records >= count("health.grad_norm.min_records")
                       else "its metrics hold no loss, grad_norm or reward to judge" if records == 0
                       else f"its {records} metric record{'s show' if records != 1 else ' shows'} no metric symptom "
                            "(too few to call the metrics healthy)")
            # with the crash set aside, "no fatal error" would contradict the crash the walk located just before
            head = (f"Apart from the crash set aside, no symptom in the run's {listed}: no hang or garbled rollout"
                    if skipped else f"No symptom in the run's {listed}: no fatal error, hang or garbled rollout")
            return self.observe(
                "no_symptom",
                f"{head}, and {metrics}.",
                0.7,
                **evidence,
            )
        chosen = order[0]
        summary = seen[chosen]["reason"]
        if order[1:]:
            summary += f" (also seen: {', '.join(o.replace('_', ' ') for o in order[1:])})"
            # what was seen too is observed, not excluded: its causes are not ruled out by the branch taken
            # (THUDM/slime#2073: a log-prob gap of 9.2 at step 0 beside the grad-norm spike it drives)
            evidence[ALSO_SEEN_OUTCOMES] = order[1:]
        return self.observe(chosen, _sentence(summary), seen[chosen].get("confidence", 0.8), **evidence)

    # --- error exit, submission, hang --------------------------------------------------

    def _error_exit(self, run: Run, p: SymptomParams, hang_evidence: bool) -> dict[str, Any] | None:
        log = run.log
        result = scan(log)
        progress = progress_lines(log)
        failed = (run.status or "").lower() == "failed"
        ends: dict[tuple[str, int], Chain] | None = None

        def survived(line: LogLine) -> bool:
            nonlocal ends
            if failed:
                return False
            later = [n for n in progress.get(line.path, []) if n > line.line_no]
            if len(later) >= p.survived_after:
                return True
            # a traceback's exception line: the steps the log went on to record after it (verl's `step:N` lines, the
            # Trainer's dicts, slime's records), counted from a step the log recorded before it
            if run.log.bytes > STEP_COUNT_MAX_BYTES:
                return False
            if ends is None:
                ends = {(g.first.path, g.first.root.line_no): g.first for g in run.tracebacks.groups.values()}
            chain = ends.get((line.path, line.line_no))
            return chain is not None and went_on_after(run.tracebacks, chain, p.survived_after, recorded_before=True)

        candidates: list[tuple[tuple[int, int], LogLine, str, str]] = []  # (order, line, kind, role)
        cut_headers: list[LogLine] = []
        last_error: dict[str, int] = {}  # per file, the line of its last error
        last_framed: dict[str, int] = {}  # per file, the line of its last error a traceback's frames lead to
        for err, frames in [(m.line, m.frames) for m in result.matches] + [(f[0], f[2]) for f in result.fatal_lines]:
            last_error[err.path] = max(last_error.get(err.path, 0), err.line_no)
            if frames:
                last_framed[err.path] = max(last_framed.get(err.path, 0), err.line_no)
        quiet = count("symptom.quiet_after_lines")

        def went_on_quietly(line: LogLine, frames: tuple[str, ...]) -> bool:
            # a lone error line (no traceback) the log goes on from for more than `quiet` lines, none of them an error:
            # a message the job printed and went on from (a job script's `CondaError: Run 'conda init' before 'conda
            # deactivate'` at line 2 of linskybing/LLM's logs/nv/zero_3.out, 519 lines of DeepSpeed training after it).
            # So is one followed only by other lone errors, the last of which the log goes on quietly from: the
            # job went on past each (tsrrodrigues/Wizard_QLoRA_Finetuning's finetune.log: three logged `ERROR - Erro
            # ao carregar …` lines of attempts over four days, then 1,878 lines of a run that ended `Treinamento
            # concluído com sucesso`)
            last = log.last_lines.get(line.path)
            return (not frames and last is not None and last - last_error.get(line.path, 0) > quiet
                    and last_framed.get(line.path, 0) < line.line_no)

        for m in result.matches:
            if retrying(m.line.text) or survived(m.line) or (not m.signature.state and went_on_quietly(m.line, m.frames)):
                continue
            candidates.append((m.order, m.line, m.signature.outcome, m.signature.role))
        for line, order, frames in result.fatal_lines:
            if went_on_quietly(line, frames):
                continue
            if retrying(line.text) or survived(line) or cut_traceback_line(line):
                if cut_traceback_line(line) and line.text.strip():
                    cut_headers.append(line)
                continue  # (a cut traceback is read below, with the frames it does hold)
            # a report of another process's death comes after its cause, like a cascade
            candidates.append((order, line, "other_error", "cascade" if CONSEQUENCE_LINE.search(line.text) else "root"))
        if not candidates:
            return self._cut_traceback(run, cut_headers)
        if hang_evidence and all(HANG_LINE.search(c[1].text) for c in candidates):
            return None  # the watchdog timeouts (and the abort they trigger) of a hang, not a crash of their own
        roots = [c for c in candidates if c[3] == "root"]
        order, line, kind, _role = min(roots or candidates, key=lambda c: c[0])
        return {
            "reason": f"the job stopped on an error: {stopped_on(line)} at {line.where()}",
            "confidence": 0.9 if roots else 0.7,
            "error": kind,
            "where": line.where(),
            "text": line.text[:500],
            "error_lines": len(candidates),
        }

    @staticmethod
    def _cut_traceback(run: Run, headers: list[LogLine] | None = None) -> dict[str, Any] | None:
        """A pasted traceback cut before its exception, which holds no error line: the job still
        stopped on an error, only its words are missing. `headers`: fatal lines that announce an
        error printed under them (Hydra's report) with nothing under them."""
        from probes.crash_location import pasted_cut_traceback

        # (a header with no readable frame under it too: OpenRLHF/OpenRLHF#762's paste ends mid-path)
        chain = pasted_cut_traceback(run, header_alone=True)
        if chain is None:
            if not headers:
                return None
            first = min(headers, key=lambda line: (line.path, line.line_no))
            return {
                "reason": f"the log holds the report of an error at {first.where()} (`{short(first.text)}`) with its "
                          "exception cut off under it",
                "confidence": 0.6,
                "error": "cut_traceback",
                "where": first.where(),
                "text": first.text[:500],
                "error_lines": 0,
            }
        inner = chain.root.frames[-1] if chain.root.frames else None
        return {
            "reason": f"the log holds a traceback cut before its exception at {chain.where}"
                      + (f" (innermost frame: {inner.function} in {inner.file}:{inner.line})" if inner else ""),
            "confidence": 0.6,
            "error": "cut_traceback",
            "where": chain.where,
            "text": str(inner) if inner else "Traceback (most recent call last):",
            "error_lines": 0,
        }

    @staticmethod
    def _stuck(run: Run, ray_request_waits: Callable[[], dict[str, Any] | None]) -> dict[str, Any] | None:
        log = run.log
        waits = log.placement_group_waits
        table = run.metrics.table
        if table.count("step") or table.count("rollout"):
            return None
        if not waits:  # (any record at all says the job runs)
            return ray_request_waits() if table.empty() else None
        last = waits[-1]
        return {
            "reason": (f"the job waited for a Ray placement group of {last.gpus_needed} GPUs "
                       f"({last.elapsed_s:.0f}s, {last.gpus_available} available of {last.gpus_registered} registered) "
                       "and never logged a step or rollout"),
            "confidence": 0.9,
            "gpus_needed": last.gpus_needed,
            "gpus_registered": last.gpus_registered,
            "gpus_available": last.gpus_available,
            "waited_s": last.elapsed_s,
            "where": last.line.where(),
            "wait_lines": len(waits),
        }

    @staticmethod
    def _ray_request_waits(run: Run) -> dict[str, Any] | None:
        """Ray's own report of a request it cannot schedule, where slime's wait lines are absent (any
        framework on Ray: the autoscaler's `The following resource request cannot be scheduled right now:
        {…}`, its `No available node types can fulfill resource request {…}`, the raylet's `… cannot be
        scheduled right now. It requires {…} for placement`), with no record logged: the job waits there
        (OpenRLHF/OpenRLHF#516). The placement rule reads the same lines (`config_rule.scan_placement`)."""
        from probes.config_rule import scan_placement

        demands = scan_placement(run).demands
        if not demands:
            return None
        first = demands[0]
        infeasible = any(d.kind == "infeasible" for d in demands)
        return {
            "reason": (f"Ray could not schedule {first.words()} ({first.where}){' and says no node can' if infeasible else ''}, "
                       "and the job never logged a step or rollout"),
            "confidence": 0.85 if infeasible else 0.7,
            "requests": [d.as_dict() for d in demands[:5]],
            "where": first.where,
            "wait_lines": len(demands),
        }

    @staticmethod
    def _hang(run: Run, p: SymptomParams) -> dict[str, Any] | None:
        if run.artifacts.flight_recorder:
            return {"reason": f"the job left {len(run.artifacts.flight_recorder)} NCCL flight-recorder dump(s), "
                              "written when a collective times out",
                    "confidence": 0.85, "flight_recorder": [str(x.name) for x in run.artifacts.flight_recorder[:16]]}
        if not run.artifacts.logs:
            return None
        log = run.log
        open_timers = {name: t.started_not_ended for name, t in log.timers.items() if t.started_not_ended}
        timeout_lines = [line for line in [*log.errors, *log.notable]
                         if HANG_LINE.search(line.text) and re.search(r"NCCL|collective|watchdog", line.text, re.I)
                         and not (CONFIG_DUMP.search(line.text) and "Watchdog caught" not in line.text)]
        if open_timers and timeout_lines:
            first = min(timeout_lines, key=lambda line: (line.path, line.line_no))
            return {"reason": f"timer(s) {', '.join(sorted(open_timers))} started and never ended, and NCCL timed out "
                              f"(`{first.text[:120]}` at {first.where()})",
                    "confidence": 0.8, "open_timers": open_timers, "where": first.where()}
        if (run.status or "").lower() == "running":
            try:
                newest = max(path.stat().st_mtime for path in run.artifacts.logs)
            except OSError:
                return None
            idle = time.time() - newest
            if idle >= p.stall_s:
                return {"reason": f"the job is marked running but its log has not been written for {idle / 60:.0f} "
                                  "minutes", "confidence": 0.7, "idle_s": round(idle), "open_timers": open_timers}
        return None

    # --- rollouts ---------------------------------------------------------------------

    @staticmethod
    def _garbled(run: Run, p: SymptomParams) -> dict[str, Any] | None:
        first = log_samples(run)[: p.first_rollout_samples]
        if first:
            scores = [garble_score(s.response) for s in first]
            bad = [s >= p.garbled_score for s in scores]
            if bad[0] and sum(bad) >= p.garbled_fraction * len(bad):
                return {"reason": f"the first rollout's response is garbled (garble score {scores[0]:.2f} at "
                                  f"{first[0].where})",
                        "confidence": 0.8, "scores": [round(s, 3) for s in scores], "examples": examples(first)}
        samples, _problems = dump_samples(run, per_dump=64, max_dumps=1)
        if samples:
            verdict = judge_texts((s.response for s in samples), threshold=p.garbled_score)
            if verdict.count > 0 and verdict.garbled_fraction >= p.garbled_fraction:
                return {"reason": f"{verdict.garbled_fraction:.0%} of the responses in the first rollout dump "
                                  f"({samples[0].where.split('#')[0]}) are garbled",
                        "confidence": 0.85, **verdict_evidence(verdict), "examples": examples(samples)}
        return None

    # --- metrics ----------------------------------------------------------------------

    @staticmethod
    def _run(probe: Probe, run: Run) -> Observation | None:
        try:
            return probe.examine(run)
        except Unavailable:
            return None

    def _step1(self, run: Run, p: SymptomParams) -> dict[str, Any] | None:
        obs = self._run(Step1Invariants(), run)
        if obs is None or obs.outcome == "hold":
            return None
        return {"reason": obs.summary.rstrip("."), "confidence": obs.confidence, "probe_outcome": obs.outcome,
                **{k: v for k, v in obs.evidence.items() if k != "thresholds"}}

    def _nonfinite(self, run: Run, p: SymptomParams) -> dict[str, Any] | None:
        obs = self._run(NonfiniteOnset(), run)
        if obs is None or obs.outcome == "none":
            return None
        return {"reason": obs.summary.rstrip("."), "confidence": 0.85, "probe_outcome": obs.outcome,
                "onset_step": obs.evidence.get("onset_step"), "onset_metric": obs.evidence.get("onset_metric")}

    def _grad(self, run: Run, p: SymptomParams) -> dict[str, Any] | None:
        obs = self._run(GradNormHealth(), run)
        loss = loss_with_level(run)
        ls = loss_spikes(loss) if loss is not None else None
        if obs is not None and obs.outcome != "healthy":
            out = {"reason": obs.summary.rstrip("."), "confidence": obs.confidence, "probe_outcome": obs.outcome,
                   "metric": obs.evidence.get("metric"), "onset_step": obs.evidence.get("onset_step")}
            if ls is not None and ls.spikes:
                out["loss_spikes"] = [s.as_evidence() for s in ls.spikes[:5]]
            return out
        if ls is not None and ls.spikes:
            top = max(ls.spikes, key=lambda s: s.ratio)
            return {"reason": f"the loss jumps {top.ratio:.1f}x over its running level at {loss.step_word} {top.step} "
                              f"({ls.source}, {len(ls.spikes)} spike(s))",
                    "confidence": 0.65, "probe_outcome": "loss_spikes", "metric": ls.source,
                    "loss_spikes": [s.as_evidence() for s in ls.spikes[:5]], "onset_step": ls.spikes[0].step}
        return None

    def _no_update(self, run: Run, p: SymptomParams) -> dict[str, Any] | None:
        """grad_norm exactly 0 on every record, over enough records to exclude the occasional
        zero-advantage skip (the axolotl guide: "occasional 0.0 values ... are fine")."""
        g = run.metrics.get("grad_norm")
        need = count("health.grad_norm.min_records")
        if g is None:
            return self._zero_loss(run, need)
        v = g.values[np.isfinite(g.values)]
        if v.size < need or np.any(v != 0.0):
            return None
        return {"reason": f"grad_norm is exactly 0 on all {v.size} records ({g.source}, {g.step_word}s {int(g.steps[0])}–"
                          f"{int(g.steps[-1])}): no update ever reached the weights",
                "confidence": 0.8, "metric": g.source, "records": int(v.size)}

    @staticmethod
    def _zero_loss(run: Run, need: int) -> dict[str, Any] | None:
        """Without a grad norm: a supervised loss exactly 0 on every record after its first. A cross-entropy of 0
        has a gradient of 0, so nothing was learned from those records (AolinGuo/graduate_agent's trainer_log.jsonl:
        122.14 at step 10, then `"loss": 0.0` on all 36 records to step 370)."""
        loss = loss_with_level(run)
        if loss is None:
            return None
        f = loss.finite()
        later = f.values[1:]
        if later.size < need or np.any(later != 0.0):
            return None
        return {"reason": f"the loss is exactly 0 on all {later.size} records from {f.step_word} {int(f.steps[1])} on "
                          f"({loss.source}; {float(f.values[0]):.4g} at {f.step_word} {int(f.steps[0])}): a loss of 0 gives no "
                          "gradient, so nothing was learned from them",
                "confidence": 0.7, "metric": loss.source, "records": int(later.size)}

    def _truncation(self, run: Run, p: SymptomParams) -> dict[str, Any] | None:
        obs = self._run(Truncation(), run)
        # a clipped ratio near 1 is the symptom the user sees, whether or not the metric counts right
        if obs is None or obs.outcome not in ("mostly_truncated", "false_truncation"):
            return None
        return {"reason": obs.summary.rstrip("."), "confidence": obs.confidence, "probe_outcome": obs.outcome,
                **{k: obs.evidence[k] for k in ("metric", "ratio", "limit") if k in obs.evidence}}

    def _reward(self, run: Run, p: SymptomParams) -> dict[str, Any] | None:
        obs = self._run(RewardSignal(), run)
        if obs is None or obs.outcome == "improving":
            return None
        return {"reason": obs.summary.rstrip("."), "confidence": obs.confidence, "probe_outcome": obs.outcome}

    def _drift(self, run: Run, p: SymptomParams) -> dict[str, Any] | None:
        obs = self._run(PolicyDrift(), run)
        if obs is None or obs.outcome == "none":
            return None
        return {"reason": obs.summary.rstrip("."), "confidence": obs.confidence, "probe_outcome": obs.outcome}
