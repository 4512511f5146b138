"""Hugging Face Trainer's `trainer_state.json` (TRL GRPO, axolotl).

The Trainer writes `output_dir/trainer_state.json` at the end of training and
`output_dir/checkpoint-N/trainer_state.json` at every save, each holding the
whole `log_history` so far. A run that crashed has only the checkpoint copies; a
resumed run may have several partial histories. `load_trainer_states` merges them
into one history, one row per (step, kind of row).

Python's json reads the `NaN` / `Infinity` the Trainer writes for diverged values.
`training_args.bin` next to it is a pickle of arbitrary objects: it is never read.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from triage import safe_io
from triage.errors import CorruptArtifact
from triage.formats.metric_lines import hf_record_role
from triage.formats.metric_table import MetricTable

MAX_STATE_BYTES = 512 * 1024 * 1024  # a state file larger than this is not a trainer_state.json
MAX_STEP = 1 << 62  # steps past this are not steps (the metric table indexes by int64)
_CHECKPOINT_DIR = re.compile(r"^checkpoint-(\d+)$")


@dataclass
class TrainerState:
    """The parts of HF Trainer's state the triage uses, merged over every copy found."""

    global_step: int
    max_steps: int | None
    log_history: list[dict[str, Any]]
    metrics: MetricTable
    best_model_checkpoint: str | None = None
    best_metric: float | None = None
    num_train_epochs: float | None = None
    epoch: float | None = None
    paths: list[Path] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)  # copies skipped, with the reason, one line each

    def rows_with(self, key: str) -> list[dict[str, Any]]:
        return [row for row in self.log_history if key in row]

    @property
    def finished(self) -> bool:
        return self.max_steps is not None and self.max_steps > 0 and self.global_step >= self.max_steps


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _error_line(exc: json.JSONDecodeError) -> str:
    return f"invalid JSON at line {exc.lineno} column {exc.colno} (char {exc.pos}): {exc.msg}"


def _read_one(path: Path) -> dict[str, Any]:
    try:
        text = safe_io.read_text(path, MAX_STATE_BYTES, "trainer_state.json")
    except UnicodeDecodeError as exc:
        raise CorruptArtifact(path, f"not UTF-8 text (byte {exc.start}): expected trainer_state.json") from None
    except OSError as exc:  # RefusedFile too: a FIFO, outside the run, too large, permission denied
        raise CorruptArtifact(path, f"cannot read: {exc.strerror or exc}") from None
    if not text:
        raise CorruptArtifact(path, "file is empty (0 bytes): the Trainer was killed while saving it")
    try:
        raw = safe_io.loads_json(text)
    except json.JSONDecodeError as exc:
        hint = " (the file ends early: truncated while being written?)" if exc.pos and exc.pos >= len(text.rstrip()) else ""
        raise CorruptArtifact(path, _error_line(exc) + hint) from None
    if not isinstance(raw, dict):
        raise CorruptArtifact(path, f"expected a JSON object with 'log_history', found a JSON {type(raw).__name__}")
    history = raw.get("log_history")
    if not isinstance(history, list):
        raise CorruptArtifact(path, "expected a 'log_history' list: this is not an HF Trainer trainer_state.json")
    bad = next((i for i, row in enumerate(history) if not isinstance(row, dict)), None)
    if bad is not None:
        raise CorruptArtifact(path, f"log_history[{bad}] is a JSON {type(history[bad]).__name__}, expected an object")
    return raw


def _count(value: Any) -> int | None:
    """A step or step count as an int, or None when it is not one: not a number, not finite,
    or past int64 (`1e308`, `10**30` would overflow the metric table's int64 index)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if abs(value) >= MAX_STEP:
        return None
    return int(value)


def _step_of(row: dict[str, Any], fallback: int) -> int:
    step = _count(row.get("step"))
    return fallback if step is None else step


def _build(raws: list[tuple[Path, dict[str, Any]]]) -> TrainerState:
    """Merge parsed states: the most advanced state's rows first, then rows only older copies have."""
    ranked = sorted(
        raws,
        key=lambda pr: (
            _count(pr[1].get("global_step")) or 0,
            len(pr[1]["log_history"]),
            0 if _CHECKPOINT_DIR.match(pr[0].parent.name) else 1,  # the top-level copy wins a tie
        ),
        reverse=True,
    )
    seen: set[tuple[int, str]] = set()
    rows: list[tuple[int, int, dict[str, Any]]] = []
    for rank, (_path, raw) in enumerate(ranked):
        last_step = 0
        for order, row in enumerate(raw["log_history"]):
            step = _step_of(row, last_step)
            last_step = step
            key = (step, hf_record_role(row))
            if key in seen:
                continue
            seen.add(key)
            rows.append((step, rank * 1_000_000 + order, row))
    rows.sort(key=lambda t: (t[0], t[1]))
    history = [row for _step, _order, row in rows]

    table = MetricTable()
    for step, _order, row in rows:
        table.add("hf", step, {k: v for k, v in row.items() if k != "step"})

    best = ranked[0][1]
    global_step = max(_count(raw.get("global_step")) or 0 for _p, raw in raws)
    if history:
        global_step = max(global_step, max(step for step, _o, _r in rows))
    max_steps = _count(best.get("max_steps"))
    return TrainerState(
        global_step=global_step,
        max_steps=max_steps,
        log_history=history,
        metrics=table,
        best_model_checkpoint=best.get("best_model_checkpoint") if isinstance(best.get("best_model_checkpoint"), str) else None,
        best_metric=_number(best.get("best_metric")),
        num_train_epochs=_number(best.get("num_train_epochs")),
        epoch=_number(best.get("epoch")),
        paths=[p for p, _raw in raws],
    )


def load_trainer_state(path: str | Path) -> TrainerState:
    """One trainer_state.json; `CorruptArtifact` with the JSON error position when it is malformed."""
    p = Path(path)
    if p.is_dir():
        p = p / "trainer_state.json"
    if not p.is_file():
        raise CorruptArtifact(p, "file does not exist")
    return _build([(p, _read_one(p))])


def load_trainer_states(paths: Iterable[str | Path]) -> TrainerState:
    """The top-level trainer_state.json and every `checkpoint-*/trainer_state.json`, merged.

    A corrupt copy is fatal only when it is the only one: a run killed while
    saving `checkpoint-N` leaves a truncated copy beside complete older ones.
    """
    parsed: list[tuple[Path, dict[str, Any]]] = []
    errors: list[CorruptArtifact] = []
    for path in paths:
        p = Path(path)
        try:
            parsed.append((p, _read_one(p)))
        except CorruptArtifact as exc:
            errors.append(exc)
    if not parsed:
        if errors:
            raise errors[0]
        raise CorruptArtifact("trainer_state.json", "no trainer_state.json given")
    state = _build(parsed)
    state.unreadable = [str(exc) for exc in errors]
    return state
