"""Indented log_history records pasted as text (triage/formats/pasted_records.py)."""

from __future__ import annotations

import json
import math

from triage.formats.pasted_records import KIND, pasted_records, records


def test_a_whole_trainer_state_gives_each_record_by_its_step():
    state = {"global_step": 2, "log_history": [
        {"epoch": 0.1, "grad_norm": 0.5, "loss": 1.25, "step": 1},
        {"epoch": 0.2, "grad_norm": float("nan"), "loss": 1.5, "step": 2},
        {"epoch": 0.2, "step": 2, "train_runtime": 10.0},
    ]}
    got = list(records(json.dumps(state, indent=2)))
    assert [step for step, _ in got] == [1, 2, 2]
    assert got[0][1] == {"epoch": 0.1, "grad_norm": 0.5, "loss": 1.25}
    assert math.isnan(got[1][1]["grad_norm"])


def test_what_is_not_a_multi_line_record_with_a_step_is_left_alone():
    text = ('{"loss": 1.0, "step": 3}\n'  # one line: the log scan reads it
            '{\n  "loss": 1.0,\n  "epoch": 0.5\n}\n'  # no step
            '{\n  "loss": 1.0,\n  "step": 2.5\n}\n'  # not an integer step
            '{\n  "loss": "high",\n  "done": true,\n  "step": 4\n}\n'  # no number besides the step
            '{\n  "loss": 1.0,\n  "step": 5,\n'  # cut before its end
            )
    assert list(records(text)) == []


def test_records_go_to_their_own_kind():
    table = pasted_records(['[\n {\n  "loss": 2.0,\n  "grad_norm": 0.3,\n  "step": 7\n }\n]\n'])
    assert table.count(KIND) == 1
