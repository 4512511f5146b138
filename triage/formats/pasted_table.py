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
names lower-cased, when two of them or more each hold two numbers or more.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from triage import safe_io
from triage.errors import TriageError
from triage.formats.metric_table import MetricTable

KIND = "table"
# The size of something pasted into an issue or a chat: GitHub caps an issue body at
# 65,536 characters; a paste of a few hundred KB is still a fragment, a job log is larger.
PASTE_BYTES = 1 << 20
MIN_COLUMNS = 3
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
    if "|" in line:
        cells = [_SPACED_SLASH.sub("/", c.strip()) for c in line.strip().strip("|").split("|")]
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
    if len(cells) < MIN_COLUMNS or not all(_NAME.match(c) for c in cells):
        return None
    lowered = [c.lower() for c in cells]
    if len(set(lowered)) != len(lowered):
        return None
    return next((i for i, c in enumerate(lowered) if c in STEP_NAMES), None)


def tables(lines: Iterable[str]) -> Iterator[tuple[int, dict[str, float]]]:
    """(step, {name: value}) for every row of every table in `lines`."""
    header: list[str] | None = None
    step_at = 0
    for line in lines:
        cells = _cells(line)
        if header is not None:
            if _MD_RULE.match(line) or _ELISION.match(line):
                continue
            values = _row(cells, step_at) if len(cells) == len(header) else None
            if values is not None:
                step = values[step_at]
                if step is not None and math.isfinite(step) and step.is_integer():
                    yield int(step), {n: v for i, (n, v) in enumerate(zip(header, values))
                                      if i != step_at and v is not None}
                    continue
            header = None
        at = _header(cells)
        if at is not None:
            header, step_at = cells, at


# A record line: the step, then `name value` pairs between bars or runs of two spaces or more (anything before
# the step is the line's logger head: `[rank0]:[titan] 2026-05-18 16:04:46,338 - root - INFO - `)
_STEP_LINE = re.compile(r"(?<![\w/])[Ss]tep:?\s+(?P<n>\d{1,12})\s*(?:\|\s*|\s{2,})(?P<rest>\S.*)$")
_ITEM_SPLIT = re.compile(r"\s*\|\s*|\s{2,}(?=[A-Za-z])(?!(?:nan|NaN|inf)\b)")
# `name value` with an optional colon or equals sign; the value's unit (`3.20s`, `9.46GiB(64.99%)`) is left off
_ITEM = re.compile(r"^(?P<k>[A-Za-z][\w/.\-]*(?: [A-Za-z][\w/.\-]*)?)\s*[:=]?\s+(?P<v>[-+]?(?:\d[\d,]*\.?\d*|\.\d+)"
                   r"(?:[eE][-+]?\d+)?|nan|NaN|-?inf)(?:[A-Za-z%/()\d.]*)\s*$")
MIN_STEP_LINES = 2
MIN_STEP_LINE_VALUES = 2


def _step_record(line: str) -> tuple[int, dict[str, float]] | None:
    m = _STEP_LINE.search(line)
    if m is None:
        return None
    record: dict[str, float] = {}
    for item in _ITEM_SPLIT.split(m.group("rest").strip().strip("|")):
        it = _ITEM.match(item.strip())
        if it is None:
            continue
        try:
            value = float(it.group("v").replace(",", ""))
        except ValueError:
            continue
        record[it.group("k").lower().replace(" ", "_")] = value
    return (int(m.group("n")), record) if len(record) >= MIN_STEP_LINE_VALUES else None


def step_lines(lines: Iterable[str]) -> list[tuple[int, dict[str, float]]]:
    """(step, {name: value}) for each line that prints one record after its step, when the paste holds at least
    MIN_STEP_LINES of them (one such line may be a sentence with numbers in it)."""
    rows = [rec for line in lines if ("tep" in line) and (rec := _step_record(line)) is not None]
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


def pasted_tables(texts: Iterable[str]) -> MetricTable:
    """The tables of pasted texts, as one metric table."""
    table = MetricTable()
    for text in texts:
        lines = text.splitlines()
        for step, record in tables(lines):
            table.add(KIND, step, record)
        for step, record in step_lines(lines):
            table.add(KIND, step, record)
    return table

