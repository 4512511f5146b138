"""Columnar storage of metric records (`step N: {...}`, `rollout N: {...}`, log_history rows).

Rows of floats per key tuple keep memory proportional to the numbers, not to Python
dicts: 8 bytes per value plus 16 per record (its index and its place).
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


class _Rows:
    """Records of one kind that carry the same keys in the same order: a row of floats each.

    A job logs the same dict every step, so nearly all of a kind's records share one key
    tuple; storing them as rows makes a record one C-level `extend` instead of a Python
    step per value. `seq` is each record's place among all records of its kind, so that a
    key spread over several row groups reads back in the order the records came.
    """

    __slots__ = ("keys", "pos", "seq", "idx", "vals")

    def __init__(self, keys: tuple[str, ...]) -> None:
        self.keys = keys
        self.pos = {key: i for i, key in enumerate(keys)}
        self.seq = array("q")
        self.idx = array("q")
        self.vals = array("d")


class MetricTable:
    """Metric records of several kinds ("step", "rollout", "perf", "eval", "hf", ...)."""

    def __init__(self) -> None:
        # kind -> key tuple -> rows; kind -> key -> the row groups holding it
        self._rows: dict[str, dict[tuple[str, ...], _Rows]] = {}
        self._by_key: dict[str, dict[str, list[_Rows]]] = {}
        self._counts: dict[str, int] = {}
        self._first: dict[str, tuple[int, dict[str, float]]] = {}

    def _group(self, kind: str, keys: tuple[str, ...]) -> _Rows:
        groups = self._rows.setdefault(kind, {})
        rows = groups.get(keys)
        if rows is None:
            rows = groups[keys] = _Rows(keys)
            by_key = self._by_key.setdefault(kind, {})
            for key in keys:
                by_key.setdefault(key, []).append(rows)
        return rows

    def add(self, kind: str, index: int, record: Mapping[str, object]) -> None:
        n = self._counts.get(kind, 0)
        if n:  # the common case: floats (ints and bools convert alike) under a key tuple seen before
            rows = self._rows[kind].get(tuple(record))
            if rows is not None:
                size = len(rows.vals)
                try:
                    rows.vals.extend(record.values())
                except (TypeError, OverflowError):
                    del rows.vals[size:]  # a value that is not a plain number: the careful way below
                else:
                    rows.idx.append(index)
                    rows.seq.append(n)
                    self._counts[kind] = n + 1
                    return
        numeric: dict[str, float] = {}
        for key, value in record.items():
            v = value if type(value) is float else _as_float(value)
            if v is not None:
                numeric[key] = v
        self._rows.setdefault(kind, {})
        self._by_key.setdefault(kind, {})
        if numeric:
            rows = self._group(kind, tuple(numeric))
            rows.vals.extend(numeric.values())
            rows.idx.append(index)
            rows.seq.append(n)
        self._counts[kind] = n + 1
        if not n:
            self._first[kind] = (index, numeric)

    def kinds(self) -> list[str]:
        return sorted(self._rows)

    def keys(self, kind: str) -> list[str]:
        return sorted(self._by_key.get(kind, {}))

    def count(self, kind: str) -> int:
        return self._counts.get(kind, 0)

    def has(self, kind: str, key: str) -> bool:
        return key in self._by_key.get(kind, {})

    def series(self, kind: str, key: str) -> tuple[np.ndarray, np.ndarray]:
        """(indices, values) of one key, in the order the records were seen."""
        import numpy as np  # here, not at the top: a log scan's worker process starts without it (0.14 s)

        groups = self._by_key.get(kind, {}).get(key)
        if not groups:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        parts = []
        for rows in groups:
            width = len(rows.keys)
            vals = np.frombuffer(rows.vals, dtype=np.float64).reshape(-1, width)[:, rows.pos[key]]
            parts.append((np.frombuffer(rows.seq, dtype=np.int64), np.frombuffer(rows.idx, dtype=np.int64), vals))
        if len(parts) == 1:
            return parts[0][1].copy(), parts[0][2].copy()
        order = np.argsort(np.concatenate([seq for seq, _, _ in parts]), kind="stable")
        return np.concatenate([i for _, i, _ in parts])[order], np.concatenate([v for _, _, v in parts])[order]

    def first(self, kind: str) -> tuple[int, dict[str, float]] | None:
        """The first record of a kind as (index, numeric values)."""
        return self._first.get(kind)

    def empty(self) -> bool:
        return not self._counts

    def merge(self, other: MetricTable, shift: Mapping[str, int] | None = None, drain: bool = False) -> None:
        """Append `other`'s records after these; `shift` adds to the indices of a kind
        (records numbered by their order, continued from the records here). `drain`
        frees each of `other`'s row groups once copied (it is left empty of values), so
        that the two tables are never held whole at once."""
        shift = shift or {}
        for kind, groups in other._rows.items():
            by = shift.get(kind, 0)
            base = self._counts.get(kind, 0)  # other's records come after all of these
            self._rows.setdefault(kind, {})
            self._by_key.setdefault(kind, {})
            for keys in list(groups):
                theirs = groups.pop(keys) if drain else groups[keys]
                rows = self._group(kind, keys)
                rows.vals.extend(theirs.vals)
                # shifted in C (`map` over the array), without numpy: a log scan may not have imported it
                rows.idx.extend(map(by.__add__, theirs.idx) if by else theirs.idx)
                rows.seq.extend(map(base.__add__, theirs.seq) if base else theirs.seq)
            if drain:
                other._by_key.pop(kind, None)
        for kind, n in other._counts.items():
            self._counts[kind] = self._counts.get(kind, 0) + n
        for kind, (index, values) in other._first.items():
            self._first.setdefault(kind, (index + shift.get(kind, 0), values))

    def nbytes(self) -> int:
        """Bytes held: 8 per value, and 16 per record (its index and its place)."""
        return sum(
            rows.vals.itemsize * len(rows.vals) + rows.idx.itemsize * len(rows.idx) * 2
            for groups in self._rows.values() for rows in groups.values()
        )


def _as_float(value: object) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        low = value.strip().lower()
        if low in ("nan", "inf", "-inf", "+inf", "infinity", "-infinity"):
            return float(low.replace("infinity", "inf"))
        # a number logged as text: ms-swift formats each value before it prints the record
        # (`{'objective/kl': '3.323', 'loss/policy_avg': '-0.002931'}`, modelscope/ms-swift#9872)
        if low[:1] in "+-.0123456789" and len(low) <= 40:
            try:
                return float(low)
            except ValueError:
                return None
    return None


def finite(values: Iterable[float]) -> list[float]:
    return [v for v in values if not (math.isnan(v) or math.isinf(v))]
