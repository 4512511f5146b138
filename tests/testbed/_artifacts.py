"""Reading a generated run's artifacts the plain way, for assertions (not the triage's parsers)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import torch

METRIC_LINE = re.compile(r" - (rollout|step|perf) (\d+): (\{.*\})$")


def _literal(text: str) -> dict:
    # Python prints non-finite floats as bare nan / inf, which literal_eval does not take.
    text = re.sub(r"(?<![\w'])-?(nan|inf)(?![\w'])", lambda m: repr(m.group(0)), text)
    out = ast.literal_eval(text)
    return {k: float(v) if isinstance(v, str) and v.lstrip("-") in ("nan", "inf") else v for k, v in out.items()}


def metric_lines(log: Path, kind: str) -> dict[int, dict]:
    """`rollout N: {...}` / `step N: {...}` / `perf N: {...}` dicts by N (for perf: merged)."""
    out: dict[int, dict] = {}
    for line in log.read_text().splitlines():
        m = METRIC_LINE.search(line)
        if m and m.group(1) == kind:
            out.setdefault(int(m.group(2)), {}).update(_literal(m.group(3)))
    return out


def lines_with(log: Path, needle: str) -> list[str]:
    return [line for line in log.read_text().splitlines() if needle in line]


def rollout_dump(run: Path, rollout_id: int) -> dict:
    return torch.load(run / "dump" / "rollout_data" / f"{rollout_id}.pt", weights_only=True)


def engine_weights(run: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(run / "engine_weights" / "model.safetensors"))


def hf_weights(run: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(run / "hf" / "model.safetensors"))
