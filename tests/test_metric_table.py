"""MetricTable: columns read back as the records were added; a merge appends, shifting numbered kinds."""

from __future__ import annotations

import math
import random

import pytest

from triage.formats.metric_table import MetricTable


def reference(records: list[tuple[str, int, dict]]) -> dict:
    """What the table must return: per kind, per key, (indices, values) in order; counts; first."""
    cols: dict = {}
    counts: dict = {}
    first: dict = {}
    for kind, index, record in records:
        numeric = {}
        for key, value in record.items():
            if isinstance(value, bool) or isinstance(value, (int, float)):
                v = float(value)
            elif isinstance(value, str) and value.strip().lower() in ("nan", "inf", "-inf"):
                v = float(value.strip().lower())
            else:
                continue
            numeric[key] = v
            col = cols.setdefault(kind, {}).setdefault(key, ([], []))
            col[0].append(index)
            col[1].append(v)
        cols.setdefault(kind, {})
        counts[kind] = counts.get(kind, 0) + 1
        first.setdefault(kind, (index, numeric))
    cols = {kind: {key: cols[kind][key] for key in sorted(cols[kind])} for kind in sorted(cols)}
    return {"cols": cols, "counts": dict(sorted(counts.items())), "first": dict(sorted(first.items()))}


def _numeric(value: object) -> bool:
    return isinstance(value, (bool, int, float)) or (isinstance(value, str) and value.strip().lower() in ("nan", "inf", "-inf"))


def read(table: MetricTable) -> dict:
    cols = {}
    for kind in table.kinds():
        cols[kind] = {}
        for key in table.keys(kind):
            idx, vals = table.series(kind, key)
            cols[kind][key] = (idx.tolist(), vals.tolist())
    counts = {kind: table.count(kind) for kind in table.kinds()}
    first = {kind: table.first(kind) for kind in table.kinds()}
    return {"cols": cols, "counts": counts, "first": first}


def same(a: object, b: object) -> bool:
    return repr(a) == repr(b)  # nan == nan


def random_records(rng: random.Random, n: int) -> list[tuple[str, int, dict]]:
    schemas = [("a", "b", "c"), ("a", "b", "c"), ("a", "b", "c"), ("b", "a"), ("a", "b", "c", "d"), ()]
    out = []
    for i in range(n):
        kind = rng.choice(("step", "step", "rollout", "eval"))
        keys = rng.choice(schemas)
        record = {}
        for key in keys:
            r = rng.random()
            record[key] = (rng.random() if r < 0.85 else rng.choice(
                (1, True, "nan", None, "x", [1.0], math.inf, -0.0, float("nan"))))
        out.append((kind, i, record))
    return out


def test_columns_read_back_as_added_whatever_the_order_of_adds_and_reads():
    rng = random.Random(7)
    for _ in range(50):
        records = random_records(rng, rng.randint(0, 60))
        table = MetricTable()
        for n, (kind, index, record) in enumerate(records):
            table.add(kind, index, record)
            if rng.random() < 0.05:  # reads in between
                assert same(read(table), reference(records[: n + 1]))
        assert same(read(table), reference(records))
        values = sum(len(i) for cols in reference(records)["cols"].values() for i, _ in cols.values())
        with_values = sum(1 for _, _, record in records if any(_numeric(v) for v in record.values()))
        assert table.nbytes() == 8 * values + 16 * with_values  # 8 a value, 16 a record


@pytest.mark.parametrize("drain", [False, True])
def test_merge_appends_and_shifts_numbered_kinds(drain):
    rng = random.Random(3)
    a_records, b_records = random_records(rng, 40), random_records(rng, 40)
    a, b = MetricTable(), MetricTable()
    for kind, index, record in a_records:
        a.add(kind, index, record)
    for kind, index, record in b_records:
        b.add(kind, index, record)
    a.merge(b, {"rollout": 100}, drain=drain)
    shifted = [(kind, index + (100 if kind == "rollout" else 0), record) for kind, index, record in b_records]
    assert same(read(a), reference(a_records + shifted))
    assert (b.nbytes() == 0) == (drain or not b_records)


def test_a_number_logged_as_text_is_a_number():
    # ms-swift formats each value before printing the record (modelscope/ms-swift#9872)
    from triage.formats.metric_table import MetricTable

    t = MetricTable()
    t.add("swift", 1, {"objective/kl": "3.323", "lr": "5e-06", "global_step/max_steps": "2/3", "note": "warmup"})
    assert t.keys("swift") == ["lr", "objective/kl"]
    assert list(t.series("swift", "objective/kl")[1]) == [3.323]
