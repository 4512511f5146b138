"""`triage postmortem`: a Markdown postmortem a team can paste into its incident doc.

Sections: summary, impact (steps and time lost, from the log's timestamps, timers and
checkpoints), timeline of the run's events, plots of the metrics around the anomaly
with its onset marked, the decision path with its evidence, what was ruled out, the
remedy with its exact flags, and the commands that reproduce the failure with the
run's own paths (`--load-debug-rollout-data …`, `--debug-rollout-only`).

The plots are PNG files written next to the Markdown file and linked relatively, so
the pair can be moved or attached together.
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import structlog

from triage import __version__
from triage.anomaly import change_point, find_spikes, nonfinite_onset
from triage.errors import BadInput, TriageError
from triage.metrics import CANONICAL, Metrics, Series
from triage.render.evidence import evidence_lines, short

if TYPE_CHECKING:  # kept out of the import, which `triage --help` pays for
    from triage.plots import Plot
    from triage.report import Report
    from triage.run.run import Run

log = structlog.get_logger("triage.postmortem")

EXIT_OK, EXIT_BAD_INPUT = 0, 2
MAX_PLOTS = 4
MAX_LOG_EVENTS = 30
MAX_COMMAND_BYTES = 64 * 1024
# Evidence keys that name where an anomaly starts, most specific first.
ONSET_KEYS = ("onset_step", "first_nonfinite_step", "spike_step", "first_bad_step", "onset")
# Metrics worth a plot for each verdict family (the part of the id before the dot).
FAMILY_METRICS: dict[str, tuple[str, ...]] = {
    "optim": ("grad_norm", "loss", "lr"),
    "numerics": ("grad_norm", "loss"),
    "data": ("grad_norm", "loss", "log_probs"),
    "fp8": ("loss", "grad_norm", "reward"),
    "reward": ("reward", "reward_std", "frac_reward_zero_std", "response_length"),
    "policy": ("entropy", "kl", "is_ratio_min", "logp_diff", "reward"),
    "mismatch": ("logp_diff", "train_rollout_kl", "is_ratio_min"),
    "rollout": ("truncated_ratio", "response_length", "rollout_time"),
    "ppo": ("clip_ratio", "ppo_kl"),
    "kernel": ("log_probs", "ref_log_probs", "ppo_kl"),
    "moe": ("logp_diff", "ppo_kl", "grad_norm"),
    "memory": ("response_length", "loss", "grad_norm"),
}
FALLBACK_METRICS = ("loss", "grad_norm", "reward", "kl", "entropy", "response_length")
# slime's debug flags: the reproduction commands set these, so copies in the run's own command go.
DEBUG_FLAGS_WITH_VALUE = ("--load-debug-rollout-data", "--save-debug-rollout-data")
DEBUG_FLAGS = ("--debug-rollout-only", "--debug-train-only")


@dataclass(frozen=True)
class Onset:
    """Where the anomaly begins, and who said so."""

    step: int
    metric: str | None  # "kind:key" when known
    how: str
    label: str
    crash: bool = False  # no metric anomaly: the job died after its last logged step


@dataclass
class Impact:
    steps_completed: int | None = None
    steps_planned: int | None = None
    last_step: int | None = None
    steps_after_onset: int | None = None
    last_checkpoint: int | None = None
    steps_since_checkpoint: int | None = None
    wall_s: float | None = None
    per_step_s: float | None = None
    time_lost_s: float | None = None
    steps_lost: int | None = None
    lost_because: str | None = None
    gpus: int | None = None
    timers: list[tuple[str, int, float, float]] = field(default_factory=list)  # name, count, total_s, max_s


@dataclass
class Postmortem:
    markdown: str
    plots: list[Plot]
    onset: Onset | None
    impact: Impact
    path: Path | None = None


# --- reading the run ----------------------------------------------------------------


def _log(run: Run) -> Any:
    if not run.artifacts.logs:
        return None
    try:
        return run.log
    except TriageError as exc:
        log.warning("postmortem_log_unreadable", error=str(exc))
        return None


def _metrics(run: Run) -> Metrics | None:
    try:
        return run.metrics
    except TriageError as exc:
        log.warning("postmortem_metrics_unreadable", error=str(exc))
        return None


def _slime_family(run: Run) -> bool:
    return bool(run.artifacts.logs or run.artifacts.command_line or run.artifacts.command) and run.framework != "hf_trainer"


def _arg(run: Run, *names: str) -> Any:
    if not _slime_family(run):
        return None
    try:
        args = run.args
        for name in names:
            if args.has(name):
                value = args.get(name)
                if value is not None and str(value).strip().lower() not in ("", "none", "null"):
                    return value
    except TriageError:
        return None
    return None


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return int(f) if np.isfinite(f) and f == int(f) else None


def _parse_time(text: str | None) -> dt.datetime | None:
    if not text:
        return None
    raw = text.strip().strip("[]").replace(",", ".")
    for candidate in (raw, raw.replace(" ", "T", 1)):
        try:
            return dt.datetime.fromisoformat(candidate)
        except ValueError:
            continue
    return None


def _duration(seconds: float) -> str:
    seconds = max(0.0, float(seconds))
    if seconds < 90:
        return f"{seconds:.0f} s"
    minutes = seconds / 60
    if minutes < 90:
        return f"{minutes:.0f} min"
    hours, rest = divmod(int(round(minutes)), 60)
    return f"{hours} h {rest:02d} min"


def _cell(text: Any, limit: int = 160) -> str:
    return short(str(text), limit).replace("|", "\\|").replace("\n", " ")


def _last_step(metrics: Metrics | None) -> tuple[int | None, str | None]:
    if metrics is None:
        return None, None
    for kind in ("step", "hf", "rollout"):
        table = metrics.table
        last = None
        for key in table.keys(kind):
            idx, _ = table.series(kind, key)
            if idx.size:
                last = int(idx.max()) if last is None else max(last, int(idx.max()))
        if last is not None:
            return last, kind
    return None, None


def _checkpoint_steps(run: Run) -> list[int]:
    steps: set[int] = set()
    for ckpt in run.artifacts.checkpoints:
        tracker = ckpt / "latest_checkpointed_iteration.txt"
        try:
            text = tracker.read_text(encoding="utf-8", errors="replace")[:64].strip() if tracker.is_file() else ""
        except OSError:
            text = ""
        if text.isdigit():
            steps.add(int(text))
        try:
            for child in ckpt.iterdir():
                m = re.fullmatch(r"iter_(\d{7})", child.name)
                if m:
                    steps.add(int(m.group(1)))
        except OSError:
            continue
    for state in run.artifacts.trainer_states:
        m = re.fullmatch(r"checkpoint-(\d+)", state.parent.name)
        if m:
            steps.add(int(m.group(1)))
    return sorted(steps)


# --- the onset --------------------------------------------------------------------


def _plot_candidates(report: Report, metrics: Metrics) -> list[Series]:
    """Series for the plots: the ones the evidence names, then the verdict family's, then the usual."""
    chosen: list[Series] = []
    seen: set[str] = set()

    def add(series: Series | None) -> None:
        if series is not None and series.source not in seen and len(series) >= 2:
            seen.add(series.source)
            chosen.append(series)

    for step in reversed(report.path):
        for key in ("onset_metric", "metric", "source"):
            add(_series_for_source(metrics, step.evidence.get(key)))
        for item in step.evidence.get("metrics", []) if isinstance(step.evidence.get("metrics"), list) else []:
            add(_series_for_source(metrics, item.get("metric") or item.get("source") if isinstance(item, dict) else item))
        for key in step.evidence:
            if key in CANONICAL:
                add(metrics.get(key))
    family = report.root_cause.id.split(".", 1)[0]
    for name in FAMILY_METRICS.get(family, ()) + FALLBACK_METRICS:
        add(metrics.get(name))
    return chosen


def _series_for_source(metrics: Metrics, source: Any) -> Series | None:
    if not isinstance(source, str):
        return None
    if ":" in source:
        kind, key = source.split(":", 1)
        series = metrics.raw(kind, key)
        if series is not None:
            name = next((n for n, cands in CANONICAL.items() if (kind, key) in cands), key)
            return Series(name, series.source, series.steps, series.values)
    return metrics.get(source) if source in CANONICAL else None


def find_onset(report: Report, candidates: list[Series], crashed_at: int | None) -> Onset | None:
    """The anomaly's first step: as a probe reported it, else found in the plotted series."""
    from triage.finding import ERROR, UNAVAILABLE

    for step in reversed(report.path):
        if step.outcome in (UNAVAILABLE, ERROR):
            continue
        for key in ONSET_KEYS:
            at = _int(step.evidence.get(key))
            if at is not None:
                metric = step.evidence.get("onset_metric") or step.evidence.get("metric")
                return Onset(at, metric if isinstance(metric, str) else None, f"reported by {step.probe}",
                             f"onset: step {at}")
    for series in candidates:
        nf = nonfinite_onset(series.values, series.steps)
        if nf is not None:
            return Onset(nf.onset_step, series.source, f"first NaN/Inf in {series.key}", f"first NaN/Inf: step {nf.onset_step}")
    for series in candidates:
        spikes = find_spikes(series.values, series.steps)
        if spikes:
            s = spikes[0]
            return Onset(s.step, series.source, f"first spike of {series.key} ({s.value:.4g} vs {s.baseline:.4g} before)",
                         f"onset: step {s.step}")
    if crashed_at is not None:
        return Onset(crashed_at, None, "the job crashed after its last logged step", f"crash after step {crashed_at}",
                     crash=True)
    for series in candidates[:1]:
        cp = change_point(series.values, series.steps, min_gain=0.6)
        if cp is not None:
            return Onset(cp.step, series.source, f"level shift of {series.key} ({cp.before:.4g} -> {cp.after:.4g})",
                         f"shift: step {cp.step}")
    return None


# --- sections ---------------------------------------------------------------------


def _impact(run: Run, report: Report, metrics: Metrics | None, index: Any, onset: Onset | None) -> Impact:
    from triage.catalog import HEALTHY

    imp = Impact()
    last, kind = _last_step(metrics)
    imp.last_step = last
    if last is not None:
        imp.steps_completed = last if kind == "hf" else last + 1
    state = None
    if run.artifacts.trainer_states:
        try:
            state = run.trainer_state
        except TriageError:
            state = None
    if state is not None and state.max_steps:
        imp.steps_planned = state.max_steps
        imp.steps_completed = max(imp.steps_completed or 0, state.global_step)
    else:
        imp.steps_planned = _int(_arg(run, "num_rollout", "train_iters"))
    if onset is not None and last is not None and onset.step <= last:
        imp.steps_after_onset = last - onset.step + 1
    ckpts = [s for s in _checkpoint_steps(run) if last is None or s <= last]
    if ckpts:
        imp.last_checkpoint = ckpts[-1]
        if last is not None:
            imp.steps_since_checkpoint = max(0, last - ckpts[-1])
    if index is not None:
        first, end = _parse_time(index.first_timestamp), _parse_time(index.last_timestamp)
        if first and end and end >= first:
            imp.wall_s = (end - first).total_seconds()
        timers = sorted(index.timers.items(), key=lambda kv: kv[1].total_s, reverse=True)[:6]
        imp.timers = [(name, t.count, t.total_s, t.max_s) for name, t in timers if t.count]
    if state is not None and imp.wall_s is None:
        runtime = next((row.get("train_runtime") for row in reversed(state.log_history) if "train_runtime" in row), None)
        if isinstance(runtime, (int, float)):
            imp.wall_s = float(runtime)
    if metrics is not None:
        step_time = metrics.raw("perf", "perf/step_time")
        if step_time is not None and np.isfinite(step_time.values).any():
            imp.per_step_s = float(np.nanmedian(step_time.values[np.isfinite(step_time.values)]))
    if imp.per_step_s is None and imp.wall_s and imp.steps_completed:
        imp.per_step_s = imp.wall_s / max(1, imp.steps_completed)
    if imp.steps_after_onset is not None and onset is not None and not onset.crash:
        imp.steps_lost, imp.lost_because = imp.steps_after_onset, "trained after the onset, on a broken run"
    elif imp.steps_since_checkpoint is not None:
        imp.steps_lost, imp.lost_because = imp.steps_since_checkpoint, "done since the last checkpoint, to redo"
    elif (imp.steps_completed is not None and report.run.status in ("failed", None) and not ckpts
          and report.root_cause.id != HEALTHY):
        imp.steps_lost, imp.lost_because = imp.steps_completed, "with no checkpoint, all to redo"
    if imp.steps_lost is not None and imp.per_step_s is not None:
        imp.time_lost_s = imp.steps_lost * imp.per_step_s
    nodes = _int(_arg(run, "actor_num_nodes"))
    per_node = _int(_arg(run, "actor_num_gpus_per_node"))
    if nodes and per_node:
        imp.gpus = nodes * per_node
        rollout = _int(_arg(run, "rollout_num_gpus"))
        if rollout and not _arg(run, "colocate"):
            imp.gpus += rollout
    return imp


def _impact_lines(imp: Impact, onset: Onset | None) -> list[str]:
    out = []
    if imp.steps_completed is not None:
        planned = f" of {imp.steps_planned} planned" if imp.steps_planned else ""
        out.append(f"- Steps completed: {imp.steps_completed}{planned} (last logged step {imp.last_step}).")
    if onset is not None and onset.crash:
        out.append(f"- Crashed after step {onset.step}, the last step it logged.")
    elif onset is not None:
        where = f" in `{onset.metric}`" if onset.metric else ""
        out.append(f"- Anomaly onset: step {onset.step}{where} ({onset.how}).")
    if imp.steps_after_onset is not None and onset is not None and not onset.crash:
        out.append(f"- Steps after the onset: {imp.steps_after_onset}.")
    if imp.last_checkpoint is not None:
        out.append(f"- Last checkpoint: step {imp.last_checkpoint}"
                   + (f"; {imp.steps_since_checkpoint} step(s) after it are lost on a restart." if imp.steps_since_checkpoint is not None else "."))
    elif imp.steps_completed:
        out.append("- No checkpoint found in the run: a restart starts from the beginning.")
    if imp.wall_s is not None:
        per = f"; about {_duration(imp.per_step_s)} per step" if imp.per_step_s else ""
        out.append(f"- Wall time: {_duration(imp.wall_s)} from the first to the last log line{per}.")
    if imp.time_lost_s is not None and imp.steps_lost is not None:
        gpu = f"; with {imp.gpus} GPUs, {imp.gpus * imp.time_lost_s / 3600:.1f} GPU-hours" if imp.gpus else ""
        out.append(f"- Time lost: about {_duration(imp.time_lost_s)}: {imp.steps_lost} step(s) {imp.lost_because}{gpu}.")
    elif imp.steps_lost is not None:
        out.append(f"- Steps lost: {imp.steps_lost}, {imp.lost_because}; the run has no timestamps to price them in time.")
    if not out:
        out.append("- The run logged no steps and no timestamps: its impact cannot be measured from the artifacts.")
    if imp.timers:
        out += ["", "Where the time went (the run's own timers):", "", "| timer | count | total | longest |", "|---|---:|---:|---:|"]
        out += [f"| `{_cell(n, 60)}` | {c} | {_duration(t)} | {_duration(m)} |" for n, c, t, m in imp.timers]
    return out


def _log_events(index: Any) -> list[tuple[tuple[int, int], str, str, str]]:
    """(order, time, event, where) for what the log shows, in the order it was written."""
    if index is None:
        return []
    files = {path: i for i, path in enumerate(index.files)}
    events: list[tuple[tuple[int, int], str, str, str]] = []

    def add(path: str, line_no: int, when: str | None, what: str) -> None:
        events.append(((files.get(path, len(files)), line_no), when or "", what, f"{Path(path).name}:{line_no}"))

    for line in index.notable[:MAX_LOG_EVENTS]:
        add(line.path, line.line_no, line.timestamp, f"{line.tag or 'note'}: {line.text}")
    waits = index.placement_group_waits
    if waits:
        first, last = waits[0], waits[-1]
        add(first.line.path, first.line.line_no, first.line.timestamp,
            f"waiting for a placement group of {first.gpus_needed} GPUs ({first.gpus_available} available)")
        if last is not first:
            add(last.line.path, last.line.line_no, last.line.timestamp,
                f"still waiting after {last.elapsed_s:.0f} s ({len(waits)} wait lines)")
    exceptions = {tb.exception.strip() for tb in index.tracebacks}
    for line in index.errors[:8]:
        text = line.text.strip()
        if text.startswith("Traceback (most recent call last)") or text in exceptions:
            continue  # the traceback's own row says it
        add(line.path, line.line_no, line.timestamp, f"error: {line.text}")
    for tb in index.tracebacks[:6]:
        add(tb.path, tb.line_no, None, f"traceback: {tb.exception}")
    events.sort(key=lambda e: e[0])
    return events[:MAX_LOG_EVENTS]


def _timeline_lines(run: Run, index: Any, metrics: Metrics | None, onset: Onset | None, imp: Impact) -> list[str]:
    out: list[str] = []
    if index is not None:
        rows = [("", f"log begins ({len(index.files)} file(s), {index.lines} lines)", "")]
        if index.first_timestamp:
            rows[0] = (index.first_timestamp, rows[0][1], "")
        rows += [(when, what, where) for _o, when, what, where in _log_events(index)]
        if index.dropped_errors:
            rows.append(("", f"{index.dropped_errors} more error lines not kept", ""))
        end = "log ends" + (" mid-line (still being written, or cut)" if index.truncated_tail else "")
        rows.append((index.last_timestamp or "", end, ""))
        out += ["### In the log", "", "| time | event | where |", "|---|---|---|"]
        out += [f"| {_cell(w, 30)} | {_cell(e)} | {_cell(p, 60)} |" for w, e, p in rows]
        out.append("")
    progress: list[tuple[int, str]] = []
    if metrics is not None:
        for kind in ("step", "hf", "rollout"):
            first = metrics.first(kind)
            if first is not None:
                idx, values = first
                shown = ", ".join(f"{k}={v:.4g}" for k, v in list(values.items())[:3])
                progress.append((idx, f"first `{kind}` record: {shown}"))
                break
    for step in _checkpoint_steps(run):
        progress.append((step, "checkpoint saved"))
    if onset is not None:
        progress.append((onset.step, f"**{onset.label}** ({onset.how})"))
    if imp.last_step is not None:
        progress.append((imp.last_step, "last metrics logged"))
    if progress:
        out += ["### Training progress", "", "| step | event |", "|---:|---|"]
        out += [f"| {s} | {_cell(e, 200)} |" for s, e in sorted(progress, key=lambda t: t[0])]
        out.append("")
    if not out:
        out = ["The run has no log with timestamps and no metric records: no timeline to draw.", ""]
    return out


def _command(run: Run, index: Any) -> str | None:
    if run.artifacts.command:
        return run.artifacts.command.strip()
    path = run.artifacts.command_line
    if path is not None:
        try:
            with open(path, "rb") as fh:
                text = fh.read(MAX_COMMAND_BYTES).decode("utf-8", errors="replace")
            text = re.sub(r"\\\s*\n", " ", text)
            lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("#")]
            if lines:
                return " ".join(lines)
        except OSError:
            pass
    if index is not None and index.command_line:
        return str(index.command_line).strip()
    return None


def _strip_debug_flags(command: str) -> list[str]:
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    out: list[str] = []
    skip = False
    for w in words:
        if skip:
            skip = False
            continue
        flag = w.split("=", 1)[0]
        if flag in DEBUG_FLAGS_WITH_VALUE:
            skip = "=" not in w
            continue
        if flag in DEBUG_FLAGS:
            continue
        out.append(w)
    return out


def _rollout_template(run: Run) -> tuple[str | None, str]:
    """Where the run's rollouts are saved, as a `{rollout_id}` template, and where that came from."""
    dumps = run.rollout_dump_paths() if _slime_family(run) or run.artifacts.rollout_dumps else []
    if dumps:
        p = dumps[0]
        stem = re.sub(r"(\d+)(?!.*\d)", "{rollout_id}", p.stem, count=1)
        if "{rollout_id}" in stem:
            return str(p.with_name(stem + p.suffix)), f"{len(dumps)} rollout dump(s) found in the run"
        return str(p), "a rollout dump found in the run"
    saved = _arg(run, "save_debug_rollout_data", "load_debug_rollout_data")
    if isinstance(saved, str):
        return saved, "the run's --save-debug-rollout-data"
    details = _arg(run, "dump_details")
    if isinstance(details, str):
        return f"{details.rstrip('/')}/rollout_data/{{rollout_id}}.pt", "the run's --dump-details"
    return None, ""


def _wrap(words: list[str]) -> str:
    """A long command as one shell line per flag."""
    if not words:
        return ""
    i = next((k for k, w in enumerate(words) if w.startswith("-")), len(words))
    parts: list[str] = [" ".join(shlex.quote(w) for w in words[:i])]
    while i < len(words):
        w = words[i]
        if w.startswith("-") and i + 1 < len(words) and not words[i + 1].startswith("--"):
            parts.append(f"{shlex.quote(w)} {shlex.quote(words[i + 1])}")
            i += 2
        else:
            parts.append(shlex.quote(w))
            i += 1
    return " \\\n    ".join(parts) if len(parts) > 3 else " ".join(parts)


def _reproduce_lines(run: Run, report: Report, index: Any, onset: Onset | None) -> list[str]:
    ref = shlex.quote(report.run.ref)
    out = ["Triage it again (the report as JSON, and this postmortem):", "", "```bash",
           f"triage run {ref} --json", f"triage postmortem {ref} -o postmortem.md", "```", ""]
    if _slime_family(run):
        command = _command(run, index)
        base = _strip_debug_flags(command) if command else ["python3", "train.py", "<the run's arguments>"]
        known = "the run's own command" if command else "the run's command (not found in the run: fill in its arguments)"
        template, origin = _rollout_template(run)
        if template is not None:
            out += [f"Replay training on the saved rollouts, without SGLang ({known}; rollouts from {origin}):", "",
                    "```bash", _wrap(base + ["--load-debug-rollout-data", template, "--debug-train-only"]), "```", ""]
            save_to = template
        else:
            save_to = str(run.root / "debug" / "rollout_data" / "{rollout_id}.pt")
            out += ["The run saved no rollouts. Save them first, so that training can be replayed on the same data:", "",
                    "```bash", _wrap(base + ["--save-debug-rollout-data", save_to]), "```", "",
                    "then replay training alone on them:", "",
                    "```bash", _wrap(base + ["--load-debug-rollout-data", save_to, "--debug-train-only"]), "```", ""]
        out += ["Generate rollouts alone (inference only, no training step), saving them for comparison:", "",
                "```bash", _wrap(base + ["--debug-rollout-only", "--save-debug-rollout-data", save_to]), "```", ""]
        if report.root_cause.flags:
            out += ["Then rerun with the remedy's flags: " + ", ".join(f"`{f}`" for f in report.root_cause.flags) + ".", ""]
    else:
        ckpts = _checkpoint_steps(run)
        before = [c for c in ckpts if onset is None or c <= onset.step]
        if before:
            ckpt = run.root / f"checkpoint-{before[-1]}"
            out += [f"Resume from the last checkpoint before the onset (step {before[-1]}) with the same arguments:", "",
                    "```bash", f"--resume_from_checkpoint {shlex.quote(str(ckpt))}", "```", ""]
        if report.root_cause.flags:
            out += ["Settings the remedy changes: " + ", ".join(f"`{f}`" for f in report.root_cause.flags) + ".", ""]
    return out


def _path_lines(report: Report) -> list[str]:
    from triage.finding import ERROR, UNAVAILABLE

    out = []
    for i, step in enumerate(report.path, 1):
        mark = {UNAVAILABLE: "not checked", ERROR: "error"}.get(step.outcome, step.outcome)
        out.append(f"{i}. **{step.ask}** (`{step.probe}` → `{mark}`): {step.summary}")
        out += [f"    - {line}" for line in evidence_lines(step.evidence)]
        if step.missing and step.missing.command:
            out.append(f"    - to check it: {step.missing.command}")
    return out or ["The walk recorded no step."]


def _summary_lines(report: Report, imp: Impact, onset: Onset | None) -> list[str]:
    rc = report.root_cause
    status = report.run.status
    what = f"`{report.run.ref}` ({report.run.framework}" + (f", {status}" if status else "") + ")"
    sentence = f"{what}: the triage names **{rc.title}** (`{rc.id}`, confidence {rc.confidence:.0%})."
    if onset is not None and onset.crash:
        sentence += f" The job crashed after step {onset.step}."
    elif onset is not None:
        sentence += f" The anomaly begins at step {onset.step}" + (f" in `{onset.metric}`" if onset.metric else "") + "."
    if imp.time_lost_s is not None:
        sentence += f" About {_duration(imp.time_lost_s)} of training is lost."
    out = [sentence, "", "| | |", "|---|---|",
           f"| Root cause | `{rc.id}` — {_cell(rc.title)} |",
           f"| Confidence | {rc.confidence:.0%} |",
           f"| Run | `{_cell(report.run.path, 200)}` |",
           f"| Framework | {report.run.framework} |",
           f"| Triaged | {report.created_at} in {report.duration_s:.2f} s |", ""]
    out += [f"> {note}" for note in report.run.notes]
    if report.run.notes:
        out.append("")
    out += [rc.explanation, ""]
    return out


# --- the document -------------------------------------------------------------------


def build_postmortem(run: Run, report: Report, plots_dir: Path | None = None, stem: str = "postmortem") -> Postmortem:
    """The postmortem of `run` from its report; plots go to `plots_dir` (none when None)."""
    index = _log(run)
    metrics = _metrics(run)
    candidates = _plot_candidates(report, metrics) if metrics is not None and not metrics.empty() else []
    crashed_at = None
    if index is not None and index.tracebacks:
        crashed_at, _ = _last_step(metrics)
    onset = find_onset(report, candidates, crashed_at)
    if onset is not None and onset.metric:
        lead = _series_for_source(metrics, onset.metric) if metrics is not None else None
        if lead is not None:
            candidates = [lead] + [c for c in candidates if c.source != lead.source]
    imp = _impact(run, report, metrics, index, onset)

    plots: list[Plot] = []
    if plots_dir is not None:
        from triage.plots import plot_series, safe_name  # matplotlib: only when drawing

        for series in candidates[:MAX_PLOTS]:
            out = plots_dir / f"{stem}-{safe_name(series.key)}.png"
            try:
                plots.append(plot_series(series, out, onset_step=onset.step if onset else None,
                                         onset_label=onset.label if onset else None))
            except (ValueError, OverflowError) as exc:  # a series matplotlib cannot draw
                log.warning("plot_failed", metric=series.source, error=str(exc))

    rc = report.root_cause
    md = [f"# Postmortem: `{report.run.ref}` — {rc.title}", "",
          f"_Written by `triage postmortem` (triage {__version__}) on "
          f"{dt.datetime.now(dt.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}._", "",
          "## Summary", ""]
    md += _summary_lines(report, imp, onset)
    md += ["## Impact", ""] + _impact_lines(imp, onset) + [""]
    md += ["## Timeline", ""] + _timeline_lines(run, index, metrics, onset, imp)
    md += ["## Metrics around the anomaly", ""]
    if plots:
        for p in plots:
            marker = f"; the magenta line marks {onset.label}" if onset else ""
            md += [f"![{p.metric}]({p.path.name})", "",
                   f"_`{p.source}`: {p.points} records shown" + (f", {p.nonfinite} NaN/Inf (crosses)" if p.nonfinite else "")
                   + f"{marker}._", ""]
    elif plots_dir is None and candidates:
        md += [f"Plots of {', '.join(f'`{c.source}`' for c in candidates[:MAX_PLOTS])} are written with `-o FILE.md`.", ""]
    else:
        md += ["The run logged no metric series to plot.", ""]
    from triage.memory.render import TITLE, baseline_line, change_lines, history_lines

    if report.changes is not None:  # the run's baseline diff (triage/memory/)
        md += [f"## {TITLE}", "", f"_{baseline_line(report)}; divergence: {report.changes.rule}._", ""]
        md += [f"- {line}" for line in change_lines(report, limit=40)] + [""]
    if report.history is not None and report.history.confirmed:  # confirmed history of the same error signature
        md += ["## Seen before", "", *[f"- {line}" for line in history_lines(report)[:1]]]
        md += [f"- {c.at[:10]}: triage `{c.triage_id}` ({c.run or 'run unknown'}) confirmed as `{c.verdict}` by {c.by}"
               + (f" — {c.note}" if c.note else "") for c in report.history.confirmed[:10]] + [""]
    md += ["## How the triage got there", ""] + _path_lines(report) + [""]
    md += ["## Ruled out", ""]
    md += [f"- `{r.verdict}` ({r.title}): {r.because}" for r in report.ruled_out] or ["Nothing was ruled out on the way."]
    md.append("")
    if report.not_checked:
        md += ["## Not checked", ""]
        md += [f"- `{n.probe}`: {n.reason}" + (f" — {n.command}" if n.command else "") for n in report.not_checked]
        md.append("")
    md += ["## Remedy", "", rc.remedy, ""]
    if rc.flags:
        md += ["Flags and settings:", ""] + [f"- `{f}`" for f in rc.flags] + [""]
    md += ["## Reproduce", ""] + _reproduce_lines(run, report, index, onset)
    return Postmortem(markdown="\n".join(md).rstrip() + "\n", plots=plots, onset=onset, impact=imp)


def write_postmortem(run: Run, report: Report, out: Path) -> Postmortem:
    """Write the Markdown to `out` and its plots next to it (`<stem>-<metric>.png`)."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    pm = build_postmortem(run, report, out.parent, out.stem)
    out.write_text(pm.markdown, encoding="utf-8")
    pm.path = out
    return pm


# --- command line -------------------------------------------------------------------


def _cmd_postmortem(ns: argparse.Namespace) -> int:
    from triage.api import triage_run
    from triage.graph import load_graph
    from triage.run import open_run

    try:
        from triage.memory.enrich import configure

        run = open_run(ns.run, ns.runs_root)
        playbooks = getattr(ns, "playbooks", None)
        configure(runs_roots=[Path(ns.runs_root)] if ns.runs_root else None)  # where the last good run is looked for
        try:
            report = triage_run(run, load_graph(playbooks) if playbooks else None)
        finally:
            configure()
        if ns.output and ns.output != "-":
            pm = write_postmortem(run, report, Path(ns.output))
            names = ", ".join(p.path.name for p in pm.plots) or "no plots"
            print(f"triage: wrote {pm.path} ({names})", file=sys.stderr)
        else:
            sys.stdout.write(build_postmortem(run, report, None).markdown)
    except (BadInput, TriageError) as exc:
        print(f"triage: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as exc:
        print(f"triage: error: cannot write the postmortem: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return EXIT_OK


def add_postmortem_parser(subparsers: Any) -> argparse.ArgumentParser:
    """`triage postmortem <run-id> [-o FILE.md] [--runs-root DIR]`."""
    p = subparsers.add_parser(
        "postmortem", help="write a Markdown postmortem with plots (for the incident doc)",
        description="Triage a run and write a postmortem: summary, impact, timeline, plots of the metrics "
                    "around the anomaly, the decision path, what was ruled out, the remedy and the commands "
                    "to reproduce. Plots are PNG files written next to FILE.md.",
    )
    p.add_argument("run", help="a run directory, or a run-id under the runs root")
    p.add_argument("-o", "--output", default=None, metavar="FILE.md",
                   help="write the postmortem here, with its plots next to it (default: Markdown on stdout, no plots)")
    p.add_argument("--runs-root", default=None, help="where run-ids live (default: $TRIAGE_RUNS_ROOT)")
    p.set_defaults(func=_cmd_postmortem)
    return p
