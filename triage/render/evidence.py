"""Evidence values as short text, shared by every renderer.

The terminal and Markdown show the scalar facts and short lists a reader scans; nested
structures stay in the JSON report.
"""

from __future__ import annotations

import json
from typing import Any

MAX_VALUE_CHARS = 160


def short(value: Any, limit: int = MAX_VALUE_CHARS, root: str | None = None) -> str:
    if isinstance(value, float):
        text = f"{value:.6g}"
    elif isinstance(value, str):
        text = value
    else:
        text = json.dumps(value, default=str, ensure_ascii=False)
    if root:
        text = text.replace(root.rstrip("/") + "/", "")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _scannable(value: Any) -> bool:
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, (list, tuple)):
        return len(value) <= 8 and all(v is None or isinstance(v, (bool, int, float, str)) for v in value)
    return False


def evidence_lines(evidence: dict[str, Any], limit: int = 8, root: str | None = None) -> list[str]:
    """`key: value` lines for the scalar evidence; nested values are left to --json."""
    shown = [(k, v) for k, v in evidence.items() if _scannable(v) and v not in (None, "", [])]
    lines = [f"{k}: {short(v, root=root)}" for k, v in shown[:limit]]
    hidden = len(evidence) - min(len(shown), limit)
    if hidden > 0:
        lines.append(f"(+{hidden} more in --json)")
    return lines
