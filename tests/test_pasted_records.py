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


def test_a_saved_history_keeping_each_series_beside_the_whole_records_is_read_once(tmp_path):
    """shreyashreddyk/json-extraction-qlora-dpo's *_dpo_history.json: `learning_rate` and `train_loss` lists of
    `{epoch, x, step}` records beside `raw_log_history`; a directory's JSON of records is found under any name."""
    import json

    from triage.run import open_run

    raw = [{"epoch": 0.02 * i, "grad_norm": 7.4, "learning_rate": 1e-6, "loss": 0.69 - 0.007 * i,
            "rewards/margins": 0.01 * i, "step": i} for i in range(1, 91)]
    doc = {"eval_loss": [],
           "learning_rate": [{"epoch": r["epoch"], "learning_rate": r["learning_rate"], "step": r["step"]} for r in raw],
           "raw_log_history": raw,
           "train_loss": [{"epoch": r["epoch"], "loss": r["loss"], "step": r["step"]} for r in raw]}
    (tmp_path / "dpo-full-colab_dpo_history.json").write_text(json.dumps(doc, indent=2), encoding="utf-8")
    (tmp_path / "dataset.json").write_text(json.dumps([{"instruction": "x", "output": "y"}], indent=2),
                                           encoding="utf-8")
    run = open_run(str(tmp_path))
    assert [p.name for p in run.artifacts.logs] == ["dpo-full-colab_dpo_history.json"]
    loss = run.metrics.get("loss")
    assert len(loss) == 90 and list(loss.steps[:3]) == [1, 2, 3]


def test_a_json_list_of_a_trainers_records_in_a_run_directory_is_read(tmp_path):
    # kartikmunjal/rlhf-and-reward-modelling-alt's results/…/trajectory.json: TRL PPOTrainer's log_history as a list
    import json

    from triage.run import open_run

    rows = [{"eps": 0, "objective/kl": 10.38, "objective/scores": -0.1025 + 0.0001 * (i % 3), "lr": 5e-06,
             "episode": 4 * i, "step": i} for i in range(1, 101)]
    (tmp_path / "trajectory.json").write_text(json.dumps(rows, indent=2), encoding="utf-8")
    run = open_run(str(tmp_path))
    assert run.metrics.get("reward").source == "hf_paste:objective/scores" and len(run.metrics.get("reward")) == 100
    assert run.metrics.get("lr").source == "hf_paste:lr"  # PPOTrainer's own loop logs `lr`, not `learning_rate`
