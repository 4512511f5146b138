"""The metric dicts slime / miles / Relax print, read back without evaluating anything."""

from __future__ import annotations

import math

import pytest

from triage.formats.pyrepr import parse_metric_dict


def test_flat_step_dict_as_slime_prints_it():
    d = parse_metric_dict(
        "{'train/loss': 0.0123, 'train/pg_loss': -0.0021, 'train/ppo_kl': 1.2e-05, "
        "'train/grad_norm': 0.234, 'train/lr-pg_0': 1e-06, 'train/step': 3}"
    )
    assert d == {"train/loss": 0.0123, "train/pg_loss": -0.0021, "train/ppo_kl": 1.2e-05,
                 "train/grad_norm": 0.234, "train/lr-pg_0": 1e-06, "train/step": 3}
    assert isinstance(d["train/step"], int) and isinstance(d["train/loss"], float)


def test_non_finite_values_and_python_constants():
    d = parse_metric_dict("{'train/grad_norm': nan, 'a': inf, 'b': -inf, 'ok': True, 'no': False, 'none': None}")
    assert math.isnan(d["train/grad_norm"])
    assert d["a"] == math.inf and d["b"] == -math.inf
    assert d["ok"] is True and d["no"] is False and d["none"] is None


def test_python_words_inside_keys_are_left_alone():
    # 'perf/info_nan' holds "inf" and "nan"; 'True' is a key, not a value
    d = parse_metric_dict("{'perf/info_nan': 1.5, 'True': nan, 'x': 'None of it'}")
    assert d["perf/info_nan"] == 1.5 and math.isnan(d["True"]) and d["x"] == "None of it"


def test_nested_lists_and_dicts():
    d = parse_metric_dict("{'rollout/zero_std': {'count_0.0': 3, 'count_1.0': 1}, 'lens': [1, 2, nan], 'pair': (1, 2)}")
    assert d["rollout/zero_std"] == {"count_0.0": 3, "count_1.0": 1}
    assert d["lens"][:2] == [1, 2] and math.isnan(d["lens"][2])
    assert d["pair"] == [1, 2]


def test_numpy_and_torch_wrappers_give_their_number():
    d = parse_metric_dict("{'a': np.float64(1.5), 'b': tensor(0.3, device='cuda:0'), 'c': numpy.int64(-2), "
                          "'d': torch.tensor(nan)}")
    assert d["a"] == 1.5 and d["b"] == 0.3 and d["c"] == -2 and math.isnan(d["d"])


def test_quotes_and_escapes_in_strings():
    assert parse_metric_dict("{\"it's\": 1, 'a\\nb': 'x'}") == {"it's": 1, "a\nb": "x"}
    assert parse_metric_dict("{'it\\'s': 2}") == {"it's": 2}


def test_non_string_keys_become_strings():
    assert parse_metric_dict("{0: 1.0, 1: 2.0}") == {"0": 1.0, "1": 2.0}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{'train/loss': 0.01, 'train/grad_nor", "truncated"),  # a line cut mid-write
        ("{'train/loss': 0.01, 'x': ", "truncated"),
        ("[1, 2]", "not a dict"),
        ("{'a': __import__('os').system('true')}", "unsupported call"),
        ("{'a': open}", "unsupported name"),
        ("{'a': 1 + 2}", "unsupported BinOp"),
        ("{'a': lambda: 1}", "unsupported Lambda"),
        ("{**x}", "unpacking"),
        ("{'a': 1} {'b': 2}", "not a complete dict literal"),
    ],
)
def test_anything_else_is_a_one_line_value_error(text, message):
    with pytest.raises(ValueError, match=message) as info:
        parse_metric_dict(text)
    assert "\n" not in str(info.value)


def test_nothing_is_evaluated(tmp_path):
    marker = tmp_path / "ran"
    with pytest.raises(ValueError):
        parse_metric_dict("{'a': open(%r, 'w').write('x')}" % str(marker))
    assert not marker.exists()


def test_orjson_reads_what_the_standard_parser_reads(monkeypatch):
    """The C parser's answer is taken only where it equals the standard one's: integers past
    18 digits (floats there), nan / inf / 1e400, nested values, duplicate keys, types included."""
    import random

    from triage.formats import pyrepr

    if pyrepr._orjson is None:
        pytest.skip("orjson not installed: only the standard parser runs")
    rng = random.Random(5)
    values = ["0.5", "-0.0", "1e-06", "1e400", "-1e400", "nan", "inf", "-inf", "True", "None", "'x'", "[1, 2]",
              "{'a': 12345678901234567890}", str(10**18), str(10**18 - 1), str(-(10**18) + 1), str(2**63),
              str(2**64), "12345678901234567890123", "4.9e-324", "1.7976931348623157e308"]
    bodies = []
    for _ in range(3000):
        items = [f"'k{rng.randint(0, 3)}': {rng.choice(values + [repr(rng.uniform(-1e6, 1e6))])}"
                 for _ in range(rng.randint(0, 6))]
        bodies.append("{" + ", ".join(items) + "}")
    fast = [parse_metric_dict(body) for body in bodies]
    monkeypatch.setattr(pyrepr, "_orjson", None)
    for body, got in zip(bodies, fast):
        want = parse_metric_dict(body)
        assert repr(got) == repr(want) and [type(v) for v in got.values()] == [type(v) for v in want.values()], body


@pytest.mark.parametrize("text", [
    "{'train/loss': 0.1, 'train/grad_norm': 1.5e-06, 'train/step': 3}",
    "{'a': nan, 'b': -inf, 'c': True, 'd': None}",
    "{'a': [1, 2], 'b': 12345678901234567890}",  # a container, an integer past int64
    "{'a': \"it's\"}",  # a quote inside: the literal parser's
    "{'a': 1,",  # cut
])
def test_the_metric_tables_fast_path_stores_what_the_careful_one_does(text):
    from triage.formats.metric_table import MetricTable
    from triage.formats.pyrepr import parse_metric_record

    try:
        careful = parse_metric_dict(text)
    except ValueError:
        with pytest.raises(ValueError):
            parse_metric_record(text)
        return
    fast, slow = MetricTable(), MetricTable()
    fast.add("step", 1, parse_metric_record(text))
    slow.add("step", 1, careful)
    assert fast.keys("step") == slow.keys("step")
    for key in slow.keys("step"):
        assert str(fast.series("step", key)[1].tolist()) == str(slow.series("step", key)[1].tolist())


def test_a_timers_end_note_depends_on_its_name_alone():
    from triage.formats.slime_log import _notable_tag

    for name in ("update_weights", "offload_train", "wake_up", "train", "grad_nan_check", "found"):
        notes = {_notable_tag(f"Timer {name} end (elapsed: {s}s)") for s in ("1.5", "nan", "-inf", "inf", "3e-05", "0")}
        assert len(notes) == 1, (name, notes)
