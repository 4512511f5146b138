"""Columnar storage of metric records (`step N: {...}`, `rollout N: {...}`, log_history rows).

A column per key keeps memory proportional to the numbers, not to Python dicts:
8 bytes per value plus 8 per index.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


class MetricTable:
    """Metric records of several kinds ("step", "rollout", "perf", "eval", "hf", ...)."""

    def __init__(self) -> None:
        # kind -> key -> (indices, values)
        self._cols: dict[str, dict[str, tuple[array, array]]] = {}
        self._counts: dict[str, int] = {}
        self._first: dict[str, tuple[int, dict[str, float]]] = {}

    def add(self, kind: str, index: int, record: Mapping[str, object]) -> None:
        cols = self._cols.get(kind)
        if cols is None:
            cols = self._cols[kind] = {}
        first = kind not in self._first
        numeric: dict[str, float] | None = {} if first else None
        for key, value in record.items():
            if type(value) is float:  # the common case: no conversion, no checks
                v = value
            else:
                v = _as_float(value)
                if v is None:
                    continue
            if numeric is not None:
                numeric[key] = v
            col = cols.get(key)
            if col is None:
                col = cols[key] = (array("q"), array("d"))
            col[0].append(index)
            col[1].append(v)
        self._counts[kind] = self._counts.get(kind, 0) + 1
        if numeric is not None:
            self._first[kind] = (index, numeric)

    def kinds(self) -> list[str]:
        return sorted(self._cols)

    def keys(self, kind: str) -> list[str]:
        return sorted(self._cols.get(kind, {}))

    def count(self, kind: str) -> int:
        return self._counts.get(kind, 0)

    def has(self, kind: str, key: str) -> bool:
        return key in self._cols.get(kind, {})

    def series(self, kind: str, key: str) -> tuple[np.ndarray, np.ndarray]:
        """(indices, values) of one key, in the order the records were seen."""
        import numpy as np  # here, not at the top: a log scan's worker process starts without it (0.14 s)

        col = self._cols.get(kind, {}).get(key)
        if col is None:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        return np.frombuffer(col[0], dtype=np.int64).copy(), np.frombuffer(col[1], dtype=np.float64).copy()

    def first(self, kind: str) -> tuple[int, dict[str, float]] | None:
        """The first record of a kind as (index, numeric values)."""
        return self._first.get(kind)

    def empty(self) -> bool:
        return not self._counts

    def merge(self, other: MetricTable, shift: Mapping[str, int] | None = None, drain: bool = False) -> None:
        """Append `other`'s records after these; `shift` adds to the indices of a kind
        (records numbered by their order, continued from the records here). `drain`
        frees each of `other`'s columns once copied (it is left empty of values), so
        that the two tables are never held whole at once."""
        shift = shift or {}
        for kind, cols in other._cols.items():
            mine = self._cols.setdefault(kind, {})
            by = shift.get(kind, 0)
            for key in list(cols):
                idx, vals = cols.pop(key) if drain else cols[key]
                col = mine.setdefault(key, (array("q"), array("d")))
                if by:
                    import numpy as np

                    col[0].frombytes((np.frombuffer(idx, dtype=np.int64) + by).tobytes())
                else:
                    col[0].extend(idx)
                col[1].extend(vals)
        for kind, n in other._counts.items():
            self._counts[kind] = self._counts.get(kind, 0) + n
        for kind, (index, values) in other._first.items():
            self._first.setdefault(kind, (index + shift.get(kind, 0), values))

    def nbytes(self) -> int:
        return sum(c[0].itemsize * len(c[0]) * 2 for cols in self._cols.values() for c in cols.values())


def _as_float(value: object) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        low = value.strip().lower()
        if low in ("nan", "inf", "-inf", "+inf", "infinity", "-infinity"):
            return float(low.replace("infinity", "inf"))
    return None


def finite(values: Iterable[float]) -> list[float]:
    return [v for v in values if not (math.isnan(v) or math.isinf(v))]
