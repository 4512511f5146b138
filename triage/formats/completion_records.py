"""The completions frameworks other than slime keep of their rollouts, read as rollout dumps.

Three shapes, each as its framework writes it (JSON text only: nothing is unpickled):

- ms-swift's `completions.jsonl` in the output dir (`--log_completions true`;
  swift/rlhf_trainers/grpo_trainer.py `log`, through swift/utils/io_utils.py's `JsonlWriter`):
  one line per logged step, the step's table as columns, `{"step": ["5", …], "prompt": [...],
  "completion": [...], "<reward function>": [...], "advantages": [...], "solution": [...]}`
  (`gen_step` instead of `step` in its Megatron trainer);
- verl's `trainer.rollout_data_dir` (and `trainer.validation_data_dir`): `{global_step}.jsonl`,
  one sample per line, `{"input", "output", "gts", "score", "step", …}`
  (verl/trainer/ppo/ray_trainer.py `_dump_generations`; `gts` from 0.5);
- a `completions` table W&B keeps offline (`files/media/table/completions_<step>_<hash>.table.json`,
  `{"columns": [...], "data": [[...]]}`), which TRL's GRPOTrainer (`log_completions=True`:
  `step`, `prompt`, `completion`, one column per reward function, `advantage`) and ms-swift log.

Each becomes a `RolloutDump` of one rollout, its samples in slime's Sample keys (`prompt`,
`response`, `reward`, `label`) so the probes that read rollout text, rewards and labels read
them as they read slime's: a file of many steps keeps its first step's samples (the first
rollout), as slime's lowest-id dump is the first rollout. Bounded: at most `MAX_SAMPLES`
samples and `MAX_BYTES` read of a file.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import orjson

from triage import safe_io
from triage.errors import TriageError
from triage.formats.metric_table import _as_float as _number

MAX_BYTES = 64 << 20  # one step's table of long reasoning completions stays well under this
MAX_SAMPLES = 4096  # a bound on work, not a threshold
SWIFT_FILE = "completions.jsonl"
VERL_FILE = re.compile(r"^\d+\.jsonl$")
WANDB_TABLE = re.compile(r"^completions_\d+_[0-9a-f]+\.table\.json$")
# what each shape calls the fields slime's Sample calls prompt / response / label
_PROMPT = ("prompt", "input", "prompts")
_RESPONSE = ("completion", "output", "response", "completions")
_LABEL = ("solution", "gts", "ground_truth", "answer", "label")
_STEP = ("step", "gen_step", "global_step")
# columns that are not a reward although they hold numbers
_NOT_REWARD = {*_PROMPT, *_RESPONSE, *_LABEL, *_STEP, "advantages", "advantage", "entropy", "num_turns",
               "data_source", "image", "images", "request_id", "uid", "index"}
_TOTAL_REWARD = ("score", "reward", "rewards")


class NotCompletions(TriageError):
    """A file named like one of the shapes above that does not hold one (another program's `5.jsonl`, a
    line cut by a job that stopped mid-write): it is skipped and named among what was not read, and the
    triage goes on, where a torch dump that cannot be read stops it."""

    def __init__(self, path: object, reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{path}: {reason}")


def is_completion_record(path: Path) -> bool:
    """Whether a file's name is one of the shapes above (its content is checked when it is read)."""
    name = path.name
    return name == SWIFT_FILE or WANDB_TABLE.match(name) is not None or (
        VERL_FILE.match(name) is not None and "wandb" not in path.parts)


def _first(row: dict[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        if key in row:
            return row[key]
    return None


def _text(value: Any) -> str | None:
    """A prompt or completion as text: a string, or a chat's messages joined by their content."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(m, dict) for m in value):
        parts = [m["content"] for m in value if isinstance(m.get("content"), str)]
        if len(parts) == len(value):
            return "\n".join(parts)
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    return None


def _sample(row: dict[str, Any]) -> dict[str, Any] | None:
    """One record in slime's Sample keys; None when it has no completion text."""
    response = _text(_first(row, _RESPONSE))
    if response is None:
        return None
    sample: dict[str, Any] = {"prompt": _text(_first(row, _PROMPT)) or "", "response": response}
    total = _number(_first(row, _TOTAL_REWARD))
    if total is not None:
        sample["reward"] = total
    else:
        # one column per reward function (TRL, ms-swift): kept by name, as slime keeps a dict reward
        parts = {k: _number(v) for k, v in row.items() if k not in _NOT_REWARD and _number(v) is not None}
        if parts:
            sample["reward"] = parts
    label = _first(row, _LABEL)
    if isinstance(label, (str, int, float)) and not isinstance(label, bool):
        sample["label"] = str(label)
    step = _number(_first(row, _STEP))
    if step is not None and math.isfinite(step):
        sample["step"] = int(step)
    return sample


def _read(path: Path) -> bytes:
    with safe_io.open_regular(path) as fh:
        data = fh.read(MAX_BYTES + 1)
    return data


def _columns_to_rows(table: dict[str, Any]) -> list[dict[str, Any]]:
    """ms-swift's step table (every value a list of the same length) as one row per sample."""
    lists = {k: v for k, v in table.items() if isinstance(v, list)}
    n = max((len(v) for v in lists.values()), default=0)
    return [{k: v[i] for k, v in lists.items() if i < len(v)} for i in range(min(n, MAX_SAMPLES))]


def _swift(path: Path, data: bytes) -> tuple[int | None, list[dict[str, Any]]]:
    first_line = data.split(b"\n", 1)[0]
    if len(first_line) > MAX_BYTES:
        raise NotCompletions(path, f"its first line is over {MAX_BYTES >> 20} MiB: not read")
    try:
        table = orjson.loads(first_line)
    except orjson.JSONDecodeError as exc:
        raise NotCompletions(path, f"its first line is not JSON ({exc}): not read as ms-swift's completions") from None
    if not isinstance(table, dict):
        raise NotCompletions(path, "its first line is not a JSON object: not read as ms-swift's completions")
    rows = _columns_to_rows(table) if any(isinstance(v, list) for v in table.values()) else [table]
    samples = [s for s in map(_sample, rows) if s is not None]
    return (samples[0].get("step") if samples else None), samples


def _verl(path: Path, data: bytes) -> tuple[int | None, list[dict[str, Any]]]:
    samples = []
    lines = data.split(b"\n")
    if len(data) > MAX_BYTES:
        lines = lines[:-1]  # the last line read may be cut at the bound
    for line in lines:
        if len(samples) >= MAX_SAMPLES:
            break
        if not line.strip():
            continue
        try:
            row = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue  # a line cut by a job that stopped mid-write
        if isinstance(row, dict) and (s := _sample(row)) is not None:
            samples.append(s)
    if not samples:
        raise NotCompletions(path, "no line is a JSON sample with an `output`: not read as verl's rollout data")
    return (int(path.stem) if path.stem.isdigit() else samples[0].get("step")), samples


def _wandb_table(path: Path, data: bytes) -> tuple[int | None, list[dict[str, Any]]]:
    try:
        table = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise NotCompletions(path, f"not a W&B table ({exc}): not read") from None
    columns, rows = (table.get("columns"), table.get("data")) if isinstance(table, dict) else (None, None)
    if not isinstance(columns, list) or not isinstance(rows, list):
        raise NotCompletions(path, "not a W&B table (no `columns` and `data`): not read")
    names = [str(c) for c in columns]
    samples = [s for r in rows[:MAX_SAMPLES] if isinstance(r, list)
               if (s := _sample(dict(zip(names, r)))) is not None]
    # the name's number counts the table's logs (0, 1, …); the table's own `step` column is the trainer's step
    m = re.match(r"completions_(\d+)_", path.name)
    step = samples[0].get("step") if samples else None
    return (step if step is not None else int(m.group(1)) if m else None), samples


def load_completion_record(path: Path) -> tuple[int | None, list[dict[str, Any]]]:
    """(the first step, its samples in slime's Sample keys) of one completions file."""
    data = _read(path)
    name = path.name
    if name == SWIFT_FILE:
        rollout_id, samples = _swift(path, data)  # (its first line is its first step's table)
    elif WANDB_TABLE.match(name):
        rollout_id, samples = _wandb_table(path, data)
    else:
        rollout_id, samples = _verl(path, data)
    if not samples:
        raise NotCompletions(path, "holds no completion text: not read as a rollout's completions")
    return rollout_id, samples
