"""HF Trainer records pasted as indented JSON: `log_history` cut out of a `trainer_state.json`.

A user who has the Trainer's state file pastes its `log_history` (or the whole file) into an
issue: each record an indented JSON object over several lines, `NaN` where a value diverged
(huggingface/trl#1371: `"grad_norm": NaN,` … `"loss": 9078019.2,` … `"step": 5`). The log
scan reads one record a line (the dicts the Trainer prints); a record spread over lines is
read here, from the text of a paste (`pasted_table.PASTE_BYTES`), so a paste cut anywhere
still gives the records it holds whole.

A record is a flat JSON object (no nested object or list) written over two lines or more
that Python's json reads (`NaN` / `Infinity` included, as the Trainer writes them), with an
integer `step` (the key `Trainer.log` adds to every `log_history` row) and one more number.
Records go to the `hf_paste` kind, which the canonical vocabulary reads as trainer_state's
`hf` kind.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator

from triage import safe_io
from triage.formats.metric_table import MetricTable

KIND = "hf_paste"
# a flat object: braces with no brace or bracket inside (a record of log_history holds numbers)
_FLAT_OBJECT = re.compile(r"\{[^{}\[\]]*\}")
MAX_STEP = 1 << 62  # past int64 a step is not one (trainer_state.MAX_STEP)


def records(text: str) -> Iterator[tuple[int, dict[str, float]]]:
    """(step, {key: number}) of every multi-line flat JSON record in `text` that has a step."""
    for m in _FLAT_OBJECT.finditer(text):
        body = m.group(0)
        if "\n" not in body.strip():
            continue  # one record on one line is the log scan's (the Trainer's printed dicts)
        try:
            raw = safe_io.loads_json(body)
        except (json.JSONDecodeError, ValueError):
            continue
        if not isinstance(raw, dict):
            continue
        step = raw.get("step")
        if isinstance(step, bool) or not isinstance(step, (int, float)) or not math.isfinite(step) \
                or not float(step).is_integer() or abs(step) >= MAX_STEP:
            continue
        values = {str(k): float(v) for k, v in raw.items()
                  if k != "step" and not isinstance(v, bool) and isinstance(v, (int, float))}
        if values:
            yield int(step), values


def pasted_records(texts: Iterable[str]) -> MetricTable:
    """The multi-line records of pasted texts, as one metric table. A record whose every value a record of the same
    step already gave is a copy of it, not a step of its own: a script that saves a run's history keeps each series
    apart beside the whole records (shreyashreddyk/json-extraction-qlora-dpo's *_dpo_history.json: `train_loss`'s
    `{epoch, loss, step}` records and `learning_rate`'s beside `raw_log_history`), which read in turn had restarted
    the run at step 1 twice."""
    table = MetricTable()
    for text in texts:
        if "{" not in text or '"step"' not in text:
            continue
        seen: dict[int, dict[str, float]] = {}
        for step, record in records(text):
            given = seen.get(step)
            if given is not None and all(k in given and _same(given[k], v) for k, v in record.items()):
                continue
            if given is None:
                seen[step] = dict(record)
            else:
                given.update((k, v) for k, v in record.items() if k not in given)
            table.add(KIND, step, record)
    return table


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))
