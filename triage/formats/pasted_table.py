"""Metric tables as users paste them: a header of metric names over rows of numbers.

In issue threads metrics often arrive as a table rather than as the log's own records: a
Markdown table (`| step | loss | grad_norm |`), a W&B or pandas export printed with
spaces, or a summary the user typed under the log (huggingface/trl#5697:
`Step  loss  grad_norm  reward_mean  clipped_ratio  mean_length`). Such a table is read
here when the log file is the size of a paste; a job's own log prints records, which the
log scan reads.

A table is a header of at least three metric names, one of them a step column, followed
by rows with one number per column. A `...` row (the user's elision) is skipped; any other
row ends the table. Records go to the `table` kind under the header's names, so the
canonical vocabulary (triage/frameworks/metrics.yaml) finds them by their bare keys, as
it does for TensorBoard, W&B and JSONL tags.

The trainers without an adapter print one record a line, a step and then its `name value`
pairs between bars or wide spaces: torchtitan's `step: 14  loss:  3.24405  grad_norm:  0.8319`
(pytorch/torchtitan#3393), NeMo Automodel's `step 11 | loss 2.3224 | grad_norm     nan`
(NVIDIA-NeMo/Automodel#1883), prime-rl's `Step 9 | Time: 3.20s | Reward: 0.9912`
(PrimeIntellect-ai/prime-rl#2280). Such lines (`step_lines`) are read from a paste the same way,
names lower-cased, when two of them or more each hold two numbers or more. The same reader takes the step
as other trainers write it: zero-padded with its share of the run (nanochat's `step 00001 (20.00%) | loss: nan`),
`step:N/M` before compact `name:value` items (modded-nanogpt), llm.c's `s:0 trl:10.96` (one value a line, the
line nothing else), MiniMind's `Epoch:[1/1](10/39695), loss: 8.5371, …` (the epoch's step made the run's), and
a line of `name: value` items alone, one of them the step (`ep: 0, batch: 20, …, loss: 10.98`). A value `nan` or
`inf` is read as non-finite, so the NaN checks see it. A table of one metric beside its step (`step<TAB>loss`)
is read when it holds NARROW_ROWS rows or more.

A log FILE of a run directory reaches these readers the way a paste does: `Run.pastes` (triage/run/run.py)
holds every log of at most PASTE_BYTES, and `Metrics.from_run` (triage/metrics.py) reads their tables and
record lines; a larger log is the log scan's alone.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from triage import safe_io
from triage.errors import TriageError
from triage.formats.metric_table import MetricTable

KIND = "table"
# The size of something pasted into an issue or a chat: GitHub caps an issue body at
# 65,536 characters; a paste of a few hundred KB is still a fragment, a job log is larger.
PASTE_BYTES = 1 << 20
MIN_COLUMNS = 3
# a table of one metric and its step (`step<TAB>loss`, Jayant-Guru-Shrivastava/ERAV4-Session11 train.log)
NARROW_COLUMNS = 2
NARROW_ROWS = 3
# Step column names: the HF Trainer's "Step" progress table, W&B's `_step`, JSONL-style keys.
STEP_NAMES = frozenset({"step", "steps", "global_step", "_step", "iteration", "iter", "train/global_step"})
_NAME = re.compile(r"[A-Za-z_][\w/.@\-]*\Z")
_ELISION = re.compile(r"^\s*\|?\s*(?:\.\.\.|…)(?:\s*\|?\s*(?:\.\.\.|…))*\s*\|?\s*$")
_MD_RULE = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)*\|?\s*$")


# The progress table the Trainer draws in a notebook (transformers utils/notebook.py,
# NotebookProgressCallback) names the loss columns in words, writes "No log" where a step logged
# no value, and a copy of its HTML spaces the slashes of a metric's name (`rewards / fmt / mean`,
# huggingface/open-r1#704, unslothai/unsloth#2291).
_NOTEBOOK_NAMES = {"training loss": "loss", "validation loss": "eval_loss"}
NO_LOG = "no log"
_SPACED_SLASH = re.compile(r"\s+/\s+")


def _cells(line: str) -> list[str]:
    # (a tab separates the cells of the Trainer's notebook table copied from Colab, `Step<TAB>Training Loss<TAB>rewards
    # / chosen`: its names hold spaces, as between bars; unslothai/unsloth's notebooks, transformers utils/notebook.py)
    sep = "|" if "|" in line else "\t" if "\t" in line.strip() else None
    if sep is not None:
        cells = [_SPACED_SLASH.sub("/", c.strip()) for c in line.strip().strip("|").split(sep)]
        return [_NOTEBOOK_NAMES.get(c.lower(), c) for c in cells]
    return line.split()


def _number(cell: str) -> float | None:
    try:
        value = float(cell)
    except ValueError:
        return None
    return value


def _row(cells: list[str], step_at: int) -> list[float | None] | None:
    """One number per cell (None for the notebook's "No log"), or None when a cell is no number."""
    values = []
    for i, cell in enumerate(cells):
        v = _number(cell)
        if v is None and (i == step_at or cell.lower() != NO_LOG):
            return None
        values.append(v)
    return values


def _header(cells: list[str]) -> int | None:
    """The step column's position when `cells` is a table header, else None."""
    if len(cells) < NARROW_COLUMNS or not all(_NAME.match(c) for c in cells):
        return None
    lowered = [c.lower() for c in cells]
    if len(set(lowered)) != len(lowered):
        return None
    return next((i for i, c in enumerate(lowered) if c in STEP_NAMES), None)


def tables(lines: Iterable[str]) -> Iterator[tuple[int, dict[str, float]]]:
    """(step, {name: value}) for every row of every table in `lines`. A table of one metric beside its step (a
    `step<TAB>loss` file) counts when it holds NARROW_ROWS rows or more: two names over two numbers may be prose's."""
    header: list[str] | None = None
    step_at = 0
    held: list[tuple[int, dict[str, float]]] = []
    rows = 0  # the table's rows so far (a narrow table's are held until there are NARROW_ROWS)

    for line in lines:
        cells = _cells(line)
        if header is not None:
            if _MD_RULE.match(line) or _ELISION.match(line):
                continue
            values = _row(cells, step_at) if len(cells) == len(header) else None
            if values is not None:
                step = values[step_at]
                if step is not None and math.isfinite(step) and step.is_integer():
                    held.append((int(step), {n: v for i, (n, v) in enumerate(zip(header, values))
                                             if i != step_at and v is not None}))
                    rows += 1
                    if len(header) >= MIN_COLUMNS or rows >= NARROW_ROWS:
                        yield from held
                        held.clear()
                    continue
            header = None
            held.clear()  # a narrow table that ended short
        at = _header(cells)
        if at is not None:
            header, step_at, rows = cells, at, 0


# A record line: the step, then `name value` pairs (anything before the step is the line's logger head:
# `[rank0]:[titan] 2026-05-18 16:04:46,338 - root - INFO - `). The step is written `step 14`, `step: 14`,
# `Step 9`, `step:1000/1000` (modded-nanogpt), zero-padded with its share of the run, `step 00001 (20.00%)`
# (nanochat); llm.c's log file writes it `s:0` at the line's start (karpathy/llm.c train_gpt2.cu, logger_log_train:
# `s:%d trl:%.4f`); MiniMind writes the epoch before the step of the epoch, `Epoch:[1/1](10/39695)`
# (Coicozoi/minimind-from-scratch logs/pretrain.log). After the step come bars, a comma, runs of two spaces or more,
# or one space before a compact `name:value`.
_AFTER_STEP = (r"(?:\s*\(\d{1,3}(?:\.\d+)?%\))?"
               r"(?:\s*[|,]\s*|\s{2,}|\s+(?=[A-Za-z][\w/.\-]*[:=][^\s=])|(?<=\])\s+)(?P<rest>\S.*)$")
# (a script's own `[Step 1/100] Loss: 5.0507 | …` closes the step in a bracket; DeepSpeed's engine reports
# `[Rank 0] step=1, skipped=1, lr=[1e-05], mom=[[0.8, 0.999]]`: deepspeed/runtime/engine.py _report_progress)
_STEP_LINE = re.compile(r"(?<![\w/])(?:[Ss]tep|STEP)(?::\s*|=|\s+)(?P<n>\d{1,12})(?:/\d{1,12})?\]?" + _AFTER_STEP)
_LLMC_LINE = re.compile(r"\s*s:(?P<n>\d{1,12})(?=\s+[A-Za-z]\w*:\S)" + _AFTER_STEP)
_EPOCH_LINE = re.compile(r"(?<![\w/])[Ee]poch:?\s*\[(?P<e>\d{1,6})/\d{1,6}\]\s*\((?P<n>\d{1,12})/(?P<m>\d{1,12})\)"
                         + _AFTER_STEP)
# items: between bars, after a comma and a space (`4,440` is one number), before a run of spaces and a name, or
# before one space and a compact `name:value` (modded-nanogpt's `val_loss:4.5139 train_time:76904ms`)
_ITEM_SPLIT = re.compile(r"\s*\|\s*|,\s+(?=[A-Za-z])|\s{2,}(?=[A-Za-z])(?!(?:nan|NaN|inf)\b)"
                         r"|\s+(?=[A-Za-z][\w/.\-]*[:=][^\s=])")
# `name value`, `name: value` or `name:value` (a name of up to three words: MiniMind's `Avg Response Len: 271.38`);
# the value's unit or share (`3.20s`, `9.46GiB(64.99%)`, `485.20/513`) is left off
_ITEM = re.compile(r"^(?P<k>[A-Za-z][\w/.\-]*(?: [A-Za-z][\w/.\-]*){0,2})\s*(?:[:=]\s*\[?|\s+)"
                   r"(?P<v>[-+]?(?:\d[\d,]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|NaN|NAN|inf|Inf|INF))"
                   r"(?:[A-Za-z%/()\d.]*)\]?\s*$")
# A line of items alone, one of them the step (`ep: 0, batch: 20, time: 9.17, loss: 10.98`, Barber0/LLM-pretrain
# train.log): every item a `name: value` between commas or bars; a batch is counted within its epoch.
_STEP_KEYS = frozenset({"step", "global_step", "iter", "iteration", "batch"})
_EPOCH_KEYS = frozenset({"epoch", "ep"})
_ITEMS_LINE = re.compile(r"^\s*[A-Za-z][\w/.\-]*:\s*\d[^,|]*(?:\s*[,|]\s*[A-Za-z][\w/.\- ]*:\s*\S+){2,}\s*$")
_ITEMS_SPLIT = re.compile(r"\s*[,|]\s+|\s*\|\s*")
MIN_STEP_LINES = 2
MIN_STEP_LINE_VALUES = 2
MIN_ITEMS = 3


def _value(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def _items(parts: Iterable[str]) -> tuple[dict[str, float], int]:
    """{name: value} of the parts that are `name value` items (names lower-cased, spaces made `_`), and how many
    parts were not."""
    record: dict[str, float] = {}
    missed = 0
    for part in parts:
        it = _ITEM.match(part.strip())
        value = _value(it.group("v")) if it is not None else None
        if value is None:
            missed += 1
            continue
        # (an abbreviation's dot before a space is dropped: prime-rl's `Grad. Norm: 0.0000`, PrimeIntellect-ai/prime-rl#1117)
        record[re.sub(r"\.(?= )", "", it.group("k")).lower().replace(" ", "_")] = value
    return record, missed


def _step_record(line: str) -> tuple[int, dict[str, float], int | None] | None:
    """(step, record, epoch) of a record line: the epoch when the step counts within it, else None."""
    m = None
    if "tep" in line or "TEP" in line:
        m = _STEP_LINE.search(line)
    if m is None and "poch" in line:
        m = _EPOCH_LINE.search(line)
    if m is None and line.lstrip().startswith("s:"):
        m = _LLMC_LINE.match(line)
        if m is not None:  # llm.c's `s:0 trl:10.965596`: one value or more, on a line of their own
            record, missed = _items(_ITEM_SPLIT.split(m.group("rest").strip()))
            return (int(m.group("n")), record, None) if record and not missed else None
    if m is None:
        return _items_record(line) if ":" in line else None
    record, _ = _items(_ITEM_SPLIT.split(m.group("rest").strip().strip("|")))
    if len(record) < MIN_STEP_LINE_VALUES:
        return None
    if "e" in m.re.groupindex:  # MiniMind's `Epoch:[e/E](n/m)`: the n-th of the epoch's m steps
        return (int(m.group("e")) - 1) * int(m.group("m")) + int(m.group("n")), record, None
    return int(m.group("n")), record, None


def _items_record(line: str) -> tuple[int, dict[str, float], int | None] | None:
    if ":" not in line or _ITEMS_LINE.match(line) is None:
        return None
    parts = _ITEMS_SPLIT.split(line.strip().strip("|"))
    record, missed = _items(parts)
    if missed or len(record) < MIN_ITEMS:
        return None
    step_key = next((k for k in record if k in _STEP_KEYS), None)
    if step_key is None or not record[step_key].is_integer() or record[step_key] < 0:
        return None
    step = int(record.pop(step_key))
    epoch = next((record[k] for k in record if k in _EPOCH_KEYS), None)
    return step, record, (int(epoch) if epoch is not None and epoch.is_integer() and step_key == "batch" else None)


def step_lines(lines: Iterable[str]) -> list[tuple[int, dict[str, float]]]:
    """(step, {name: value}) for each line that prints one record after its step, when the paste holds at least
    MIN_STEP_LINES of them (one such line may be a sentence with numbers in it). A step counted within its epoch
    (a batch of `ep: 1`) goes on from the last step of the epoch before."""
    rows: list[tuple[int, dict[str, float]]] = []
    offset = last = 0
    epoch_at: int | None = None
    for line in lines:
        if ":" not in line and "tep" not in line and "|" not in line:
            continue
        rec = _step_record(line)
        if rec is None:
            continue
        step, record, epoch = rec
        if epoch is not None:
            if epoch_at is not None and epoch > epoch_at:
                offset = last
            epoch_at = epoch
            step += offset
        last = step
        rows.append((step, record))
    return rows if len(rows) >= MIN_STEP_LINES else []


def paste_texts(paths: Iterable[Path]) -> dict[str, str]:
    """path -> text of every log file small enough to be a paste (others are left to the log scan)."""
    out: dict[str, str] = {}
    for path in paths:
        try:
            out[str(path)] = safe_io.read_text(path, PASTE_BYTES, "pasted log")
        except (OSError, UnicodeDecodeError, TriageError):
            continue  # larger than a paste, unreadable or not text: the log scan reports those
    return out


# A summary typed under a log or copied from a dashboard: lines of `name: value` items two spaces or more apart, no
# step (greyhaven-ai/autocontext#1067: `completions/mean_length: 256   completions/clipped_ratio: 1   …` over
# `reward: 0   reward_std: 0   frac_reward_zero_std: 1   loss: 0   grad_norm: 0`). Its lines together are one
# record, when MIN_ITEMS items or more are numbers and MIN_KNOWN of their names are metrics the vocabulary knows.
_SUMMARY_SPLIT = re.compile(r"\s{2,}|\t")
_SUMMARY_ITEM = re.compile(r"^(?P<k>[A-Za-z_][\w/.@\-]*):\s*(?P<v>-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|nan|NaN|inf)$")
MIN_KNOWN = 2


def summary_records(lines: Iterable[str], known: Callable[[str], bool]) -> list[dict[str, float]]:
    """The summaries of a paste, one record each (a block of consecutive summary lines)."""
    out: list[dict[str, float]] = []
    block: dict[str, float] = {}

    def close() -> None:
        if len(block) >= MIN_ITEMS and sum(1 for k in block if known(k)) >= MIN_KNOWN:
            out.append(dict(block))
        block.clear()

    for line in lines:
        parts = [p for p in _SUMMARY_SPLIT.split(line.strip()) if p] if ":" in line else []
        items = [_SUMMARY_ITEM.match(p) for p in parts]
        if len(items) < 2 or not all(items):
            close()
            continue
        for m in items:
            block[m.group("k")] = float(m.group("v"))
    close()
    return out


def dict_records(lines: Iterable[str], known: Callable[[str], bool]) -> list[dict[str, float]]:
    """A script's printed metric dicts, one a line, in whatever key order and with numbers printed as strings
    (screechingviolet/epic-tikz-diagram-generator's train_grpo.log: `{'reward': '0.9513', 'reward_max': '0.9886',
    'frac_reward_zero_std': '0', 'loss': '1.268e-05', 'grad_norm': '0.6825', …}`): the log scan reads the
    Trainer's own dicts by their `{'loss': ` and `epoch`, and these carry neither. MIN_KNOWN of the names must be
    the vocabulary's; each line is a record, parsed without evaluating anything (triage/formats/pyrepr.py)."""
    from triage.formats.pyrepr import parse_metric_dict

    out: list[dict[str, float]] = []
    for line in lines:
        text = line.strip()
        if not (text.startswith("{'") and text.endswith("}")):
            continue
        try:
            raw = parse_metric_dict(text)
        except (ValueError, SyntaxError, RecursionError, MemoryError):
            continue
        record: dict[str, float] = {}
        for key, value in raw.items():
            number = value if isinstance(value, (int, float)) and not isinstance(value, bool) else (
                _value(value) if isinstance(value, str) else None)
            if number is not None:
                record[key] = float(number)
        if len(record) >= 2 and sum(1 for k in record if known(k)) >= MIN_KNOWN:
            out.append(record)
    return out


def pasted_tables(texts: Iterable[str], known: Callable[[str], bool] | None = None,
                  printed_dicts: bool = False, counts: list[int] | None = None) -> MetricTable:
    """The tables of pasted texts, as one metric table. `known(name)`: whether a name is a metric of the
    vocabulary (a typed summary and a printed dict count only with such names); `printed_dicts`: the log scan
    read no printed dict of the Trainer's, so a script's own are read here; `counts`, when given, gets each
    text's number of records, in order (the report's coverage names them per file)."""
    table = MetricTable()
    extra = 0
    for text in texts:
        lines = text.splitlines()
        own = 0  # this text's table rows and step lines: where it has them, they are its records
        for step, record in tables(lines):
            table.add(KIND, step, record)
            own += 1
        for step, record in step_lines(lines):
            table.add(KIND, step, record)
            own += 1
        if known is not None and not own:
            found = dict_records(lines, known) if printed_dicts else []
            for record in found or summary_records(lines, known):
                extra += 1
                own += 1
                table.add(KIND, extra, record)
        if counts is not None:
            counts.append(own)
    return table

