"""W&B's end-of-run summary as the console prints it: `wandb: Run summary:` over `key value` rows.

When a run finishes, wandb prints the last value of each key the run logged
(wandb/sdk/wandb_run.py, `Run._footer_summary`): keys sorted, those that start with `_`
left out (so `_step` never shows), floats rounded to 5 decimal places, strings cut to 20
characters and ended `...`, a `+N ...` row for the keys past its limit, each row
`{key:>width} {value}` under the title `Run summary:`, every line behind the terminal's
`wandb: ` prefix (and behind Ray's `(TaskRunner pid=…)` when a worker printed it). Users
paste that block under a run that went wrong (NVlabs/Tool-N1#9, verl's console).

The block is one record: the values at the run's last logged step. Its step is read from
the step key a framework logs beside its metrics (verl's `training/global_step`, the HF
Trainer's W&B callback's `train/global_step`, slime's `train/step`); a summary without one
is not placed, since a record at a guessed step could be read as the run's first step.
The rounding stays what it is: a value printed `0` or `0.0` was below 5e-6 in size.

The rows that W&B's `Run history:` block prints are sparklines, not numbers: not read.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator

from triage.formats.metric_table import MetricTable

KIND = "wandb_summary"
TITLE = "Run summary:"
# The step keys, most specific first: verl (verl/trainer/ppo/ray_trainer.py, `training/global_step`),
# the HF Trainer's WandbCallback (`train/global_step`), slime (`train/step`, `rollout/step`), OpenRLHF's
# and others' bare names.
STEP_KEYS = ("training/global_step", "train/global_step", "trainer/global_step", "train/step",
             "rollout/step", "global_step", "step")
_ROW = re.compile(r"(?P<key>[A-Za-z_][\w/.@\-]*) +(?P<value>\S(?:.*\S)?)\Z")
_ELIDED = re.compile(r"\+[\d,]+ +\.\.\.\Z")  # `+12 ...`: the keys past the printed limit
_MAX_ROWS = 4096  # wandb prints at most `max_end_of_run_summary_metrics` rows (100 by default)


def summaries(text: str) -> Iterator[dict[str, float]]:
    """The numeric rows of each `Run summary:` block in `text`, one dict per block."""
    start = text.find(TITLE)
    while start >= 0:
        line_start = text.rfind("\n", 0, start) + 1
        prefix = text[line_start:start].rstrip()
        if prefix and not prefix.endswith("wandb:"):
            start = text.find(TITLE, start + len(TITLE))
            continue  # the words inside some other line
        values: dict[str, float] = {}
        pos = text.find("\n", start)
        rows = 0
        while pos >= 0 and rows < _MAX_ROWS:
            end = text.find("\n", pos + 1)
            line = text[pos + 1: end if end >= 0 else len(text)].rstrip("\r")
            pos = end
            if prefix:
                if not line.startswith(prefix):
                    break
                line = line[len(prefix):]
            line = line.strip()
            if not line:
                break
            if _ELIDED.match(line):
                continue
            m = _ROW.match(line)
            if m is None:
                break
            rows += 1
            try:
                values[m.group("key")] = float(m.group("value"))
            except ValueError:  # a string row (a run name, a cut text sample) is not a metric
                pass
        if values:
            yield values
        start = text.find(TITLE, start + len(TITLE))


def _step(values: dict[str, float]) -> int | None:
    for key in STEP_KEYS:
        step = values.get(key)
        if step is not None and math.isfinite(step) and step.is_integer() and 0 <= step < 1 << 62:
            return int(step)
    return None


def summary_records(texts: Iterable[str]) -> MetricTable:
    """The W&B summaries of pasted texts that name their step, as one metric table."""
    table = MetricTable()
    for text in texts:
        if TITLE not in text:
            continue
        for values in summaries(text):
            step = _step(values)
            if step is None:
                continue
            record = {k: v for k, v in values.items() if k not in STEP_KEYS}
            if record:
                table.add(KIND, step, record)
    return table
