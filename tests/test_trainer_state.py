"""HF Trainer's trainer_state.json: merged histories, NaN values, and malformed files."""

from __future__ import annotations

import json
import math

import pytest

from triage.errors import CorruptArtifact
from triage.formats.trainer_state import load_trainer_state, load_trainer_states


def _state(global_step, rows, max_steps=10, **extra):
    return {
        "best_metric": None,
        "best_model_checkpoint": None,
        "epoch": global_step / max_steps,
        "eval_steps": 500,
        "global_step": global_step,
        "is_hyper_param_search": False,
        "is_local_process_zero": True,
        "is_world_process_zero": True,
        "log_history": rows,
        "logging_steps": 1,
        "max_steps": max_steps,
        "num_train_epochs": 1,
        "save_steps": 2,
        "total_flos": 0.0,
        "train_batch_size": 8,
        **extra,
    }


def _row(step, **metrics):
    return {"epoch": step / 10, "step": step, "learning_rate": 1e-6, **metrics}


def _write(path, payload):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2) if not isinstance(payload, str) else payload)
    return path


def test_single_state_gives_metric_series_keyed_by_step(tmp_path):
    rows = [_row(1, loss=0.1, grad_norm=1.5, reward=0.2, kl=0.0), _row(2, loss=0.2, grad_norm=2.5, reward=0.4, kl=0.01)]
    path = _write(tmp_path / "trainer_state.json", _state(2, rows))

    state = load_trainer_state(path)

    assert state.global_step == 2
    assert state.max_steps == 10
    assert not state.finished
    steps, values = state.metrics.series("hf", "grad_norm")
    assert steps.tolist() == [1, 2]
    assert values.tolist() == [1.5, 2.5]
    assert "step" not in state.metrics.keys("hf")
    assert state.metrics.keys("hf") == ["epoch", "grad_norm", "kl", "learning_rate", "loss", "reward"]


def test_nan_and_infinity_written_by_the_trainer_are_read(tmp_path):
    text = json.dumps(_state(2, [_row(1, grad_norm=1.0), _row(2, grad_norm=float("nan"), loss=float("inf"))]))
    assert "NaN" in text and "Infinity" in text
    path = _write(tmp_path / "trainer_state.json", text)

    state = load_trainer_state(path)

    _, grad = state.metrics.series("hf", "grad_norm")
    assert grad[0] == 1.0 and math.isnan(grad[1])
    _, loss = state.metrics.series("hf", "loss")
    assert math.isinf(loss[0])


def test_checkpoint_copies_and_top_level_merge_without_duplicates(tmp_path):
    early = [_row(1, loss=1.0), _row(2, loss=0.9), {"eval_loss": 0.95, "step": 2, "epoch": 0.2}]
    later = early + [_row(3, loss=0.8), _row(4, loss=0.7)]
    a = _write(tmp_path / "checkpoint-2" / "trainer_state.json", _state(2, early))
    b = _write(tmp_path / "checkpoint-4" / "trainer_state.json", _state(4, later, best_model_checkpoint="out/checkpoint-4"))

    state = load_trainer_states([a, b])

    assert state.global_step == 4
    assert [r["step"] for r in state.log_history] == [1, 2, 2, 3, 4]  # step 2 has a train row and an eval row
    steps, loss = state.metrics.series("hf", "loss")
    assert steps.tolist() == [1, 2, 3, 4]
    assert loss.tolist() == [1.0, 0.9, 0.8, 0.7]
    assert state.metrics.series("hf", "eval_loss")[1].tolist() == [0.95]
    assert state.best_model_checkpoint == "out/checkpoint-4"
    assert set(state.paths) == {a, b}


def test_rows_only_an_older_copy_has_are_kept(tmp_path):
    # a resumed run whose top-level state restarted its history at step 3
    a = _write(tmp_path / "checkpoint-2" / "trainer_state.json", _state(2, [_row(1, loss=1.0), _row(2, loss=0.9)]))
    b = _write(tmp_path / "trainer_state.json", _state(4, [_row(3, loss=0.8), _row(4, loss=0.7)]))
    state = load_trainer_states([b, a])
    assert state.metrics.series("hf", "loss")[0].tolist() == [1, 2, 3, 4]


def test_truncated_copy_is_skipped_when_others_are_readable(tmp_path):
    good = _write(tmp_path / "checkpoint-2" / "trainer_state.json", _state(2, [_row(1, loss=1.0), _row(2, loss=0.9)]))
    full = json.dumps(_state(4, [_row(1, loss=1.0)]))
    cut = _write(tmp_path / "checkpoint-4" / "trainer_state.json", full[: len(full) // 2])

    state = load_trainer_states([good, cut])

    assert state.global_step == 2
    assert len(state.unreadable) == 1 and "checkpoint-4" in state.unreadable[0]


def test_truncated_only_copy_names_the_json_error_position(tmp_path):
    full = json.dumps(_state(2, [_row(1, loss=1.0), _row(2, loss=0.9)]))
    path = _write(tmp_path / "trainer_state.json", full[:-40])
    with pytest.raises(CorruptArtifact) as err:
        load_trainer_states([path])
    message = str(err.value)
    assert "line 1 column" in message and "truncated" in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "empty"),
        ("{\"global_step\": 3,\n \"log_history\": [}", "invalid JSON at line 2 column"),
        ("[1, 2, 3]", "found a JSON list"),
        ("{\"global_step\": 3}", "expected a 'log_history' list"),
        ("{\"log_history\": [1, 2]}", r"log_history\[0\] is a JSON int"),
    ],
)
def test_malformed_trainer_state_is_one_clear_line(tmp_path, content, message):
    path = _write(tmp_path / "trainer_state.json", content)
    with pytest.raises(CorruptArtifact, match=message):
        load_trainer_state(path)


def test_binary_file_is_not_a_traceback(tmp_path):
    path = tmp_path / "trainer_state.json"
    path.write_bytes(b"\x80\x04\x95\xff\xfe binary")
    with pytest.raises(CorruptArtifact, match="not UTF-8"):
        load_trainer_state(path)


def test_directory_argument_reads_its_trainer_state(tmp_path):
    _write(tmp_path / "out" / "trainer_state.json", _state(10, [_row(10, loss=0.1)], max_steps=10))
    state = load_trainer_state(tmp_path / "out")
    assert state.finished
    with pytest.raises(CorruptArtifact, match="does not exist"):
        load_trainer_state(tmp_path / "missing")
