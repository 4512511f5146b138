"""Evidence values as short text, shared by every renderer."""

from __future__ import annotations

import json
from typing import Any

MAX_VALUE_CHARS = 300


def short(value: Any, limit: int = MAX_VALUE_CHARS) -> str:
    if isinstance(value, float):
        text = f"{value:.6g}"
    elif isinstance(value, str):
        text = value
    else:
        text = json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def evidence_lines(evidence: dict[str, Any], limit: int = 12) -> list[str]:
    lines = [f"{k}: {short(v)}" for k, v in list(evidence.items())[:limit]]
    if len(evidence) > limit:
        lines.append(f"(+{len(evidence) - limit} more in --json)")
    return lines
