"""Metric tables as users paste them (triage/formats/pasted_table.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from triage.cli import main
from triage.formats.pasted_table import PASTE_BYTES, paste_texts, pasted_tables, tables
from triage.run import open_run

# huggingface/trl#5697: the user's summary of a GRPO run, an elided middle included
SPACED = """Step  loss  grad_norm  reward_mean  clipped_ratio  mean_length
1     0     0          0            1.0            256
2     0     0          0            1.0            256
...
10    0     0          0            1.0            256
"""

MARKDOWN = """Here are my metrics:

| step | loss | grad_norm | reward |
|------|------|-----------|--------|
| 10 | 0.12 | 0.8 | 0.31 |
| 20 | 0.10 | nan | 0.30 |

and then it crashed.
"""


def test_a_spaced_table_with_an_elision_gives_one_record_per_row():
    rows = list(tables(SPACED.splitlines()))
    assert [step for step, _ in rows] == [1, 2, 10]
    assert rows[0][1] == {"loss": 0.0, "grad_norm": 0.0, "reward_mean": 0.0, "clipped_ratio": 1.0, "mean_length": 256.0}


def test_a_markdown_table_keeps_nan_and_ends_at_prose():
    rows = list(tables(MARKDOWN.splitlines()))
    assert [step for step, _ in rows] == [10, 20]
    assert rows[1][1]["grad_norm"] != rows[1][1]["grad_norm"]  # nan


# the Trainer's notebook progress table as users copy it (transformers utils/notebook.py; huggingface/open-r1#704):
# loss columns named in words, slashes spaced, "No log" where a step logged nothing
NOTEBOOK = """Step | Training Loss | reward | reward_std | kl | rewards / format_reward / mean
-- | -- | -- | -- | -- | --
1 | -0.283600 | 13.437500 | 21.810942 | nan | 3.125000
2 | -0.149100 | 6.931818 | 14.526671 | nan | No Log
3 | -0.110500 | 6.250000 | 17.677670 | No log | 2.5
"""


def test_the_notebook_progress_table_is_read_with_its_names_and_missing_cells():
    rows = list(tables(NOTEBOOK.splitlines()))
    assert [step for step, _ in rows] == [1, 2, 3]
    assert rows[0][1]["loss"] == -0.2836 and rows[0][1]["rewards/format_reward/mean"] == 3.125
    assert "rewards/format_reward/mean" not in rows[1][1] and "kl" not in rows[2][1]  # "No log": no value
    assert rows[1][1]["kl"] != rows[1][1]["kl"]  # nan is a value


def test_lines_that_are_not_a_table_give_nothing():
    text = [
        "step loss",  # two columns
        "Step  loss  grad_norm",  # a header ...
        "the run went on",  # ... with no numeric row
        "rank  world  size",  # no step column
        "0  8  8",
        "step | loss | reward",  # "No log" is no step
        "No log | 0.1 | 0.2",
    ]
    assert list(tables(text)) == []


def test_table_metrics_reach_the_canonical_names(tmp_path):
    (tmp_path / "job.log").write_text(SPACED, encoding="utf-8")
    (tmp_path / "run.py").write_text(
        "from trl import GRPOConfig\nargs = GRPOConfig(output_dir='out', logging_steps=1)\n", encoding="utf-8"
    )
    metrics = open_run(str(tmp_path)).metrics
    truncated = metrics.get("truncated_ratio")
    assert truncated is not None and truncated.source == "table:clipped_ratio"
    assert list(truncated.steps) == [1, 2, 10] and set(truncated.values) == {1.0}
    assert metrics.get("grad_norm").source == "table:grad_norm"
    assert metrics.records()["grad_norm"]["source"] == "log:pasted_table"
    # the column is the policy's grad norm only: verl's `critic/grad_norm` ends in the same word
    assert metrics.get("critic_grad_norm") is None


def test_a_log_larger_than_a_paste_is_left_to_the_log_scan(tmp_path):
    big = tmp_path / "job.log"
    big.write_text(SPACED + "x" * (PASTE_BYTES + 1) + "\n", encoding="utf-8")
    assert pasted_tables(paste_texts([big]).values()).empty()


def test_a_binary_file_is_skipped(tmp_path):
    blob = tmp_path / "job.log"
    blob.write_bytes(b"\xff\xfe\x00" * 100)
    assert pasted_tables(paste_texts([blob]).values()).empty()


def test_record_lines_of_trainers_without_an_adapter_are_read_by_step():
    from triage.formats.pasted_table import step_lines

    # pytorch/torchtitan#3393 (behind its logger head), NVIDIA-NeMo/Automodel#1883, PrimeIntellect-ai/prime-rl#2280
    titan = ["[rank0]:[titan] 2026-05-18 16:04:46,338 - root - INFO - step: 14  loss:  3.24405  grad_norm:  0.8319  "
             "memory:  9.46GiB(64.99%)  tps: 7,282",
             "[rank0]:[titan] 2026-05-18 16:04:47,338 - root - INFO - step: 15  loss:  3.10680  grad_norm:  0.8587  "
             "memory:  9.46GiB(64.99%)  tps: 7,334"]
    assert step_lines(titan)[0] == (14, {"loss": 3.24405, "grad_norm": 0.8319, "memory": 9.46, "tps": 7282.0})
    automodel = ["step 11 | loss 2.3224 | grad_norm     nan", "step 12 | loss    nan | grad_norm     nan",
                 "[val] step 29 | loss nan"]
    rows = step_lines(automodel)
    assert [r[0] for r in rows] == [11, 12] and rows[1][1]["loss"] != rows[1][1]["loss"]  # NaN kept
    prime = ["00:27:06 SUCCESS Step 9 | Time: 3.20s | Reward: 0.9912 | Seq. Length: 331.1 tokens/sample",
             "00:27:09 SUCCESS Step 10 | Time: 2.20s | Reward: 0.9900 | Seq. Length: 330.0 tokens/sample"]
    assert step_lines(prime)[1] == (10, {"time": 2.2, "reward": 0.99})
    # one such line alone may be a sentence; the frameworks' own records are their grammars'
    assert step_lines(titan[:1]) == []
    assert step_lines(["(TaskRunner pid=1) step:2 - actor/pg_loss:0.01 - actor/grad_norm:0.5",
                       "(TaskRunner pid=1) step:3 - actor/pg_loss:0.01 - actor/grad_norm:0.5",
                       "[2026-01-01 10:00:00] model.py:660 - step 3: {'train/loss': 0.1, 'train/grad_norm': 0.2}",
                       "[2026-01-01 10:00:01] model.py:660 - step 4: {'train/loss': 0.1, 'train/grad_norm': 0.2}"]) == []


def test_a_paste_of_record_lines_gives_the_canonical_series(tmp_path):
    # NVIDIA-NeMo/Automodel#1883: grad_norm NaN from step 11 (a known transformers limitation under SDPA)
    (tmp_path / "job.log").write_text("step 10 | loss 2.6030 | grad_norm  9.9375\nstep 11 | loss 2.3224 | grad_norm     nan\n"
                                      "step 12 | loss    nan | grad_norm     nan\n", encoding="utf-8")
    from triage.metrics import Metrics

    grad = Metrics.from_run(open_run(str(tmp_path))).get("grad_norm")
    assert grad is not None and grad.source == "table:grad_norm" and list(grad.steps) == [10, 11, 12]


# greyhaven-ai/autocontext#1067: a GRPO run's summary typed into the issue, no step
TYPED_SUMMARY = ("completions/mean_length: 256   completions/clipped_ratio: 1   mean_terminated_length: 0\n"
                 "reward: 0   reward_std: 0   frac_reward_zero_std: 1   loss: 0   grad_norm: 0\n")


def test_a_typed_summary_of_known_metrics_is_one_record():
    from triage.formats.pasted_table import summary_records
    from triage.metrics import TABLE_KEYS

    records = summary_records(TYPED_SUMMARY.splitlines(), TABLE_KEYS.__contains__)
    assert records == [{"completions/mean_length": 256.0, "completions/clipped_ratio": 1.0, "mean_terminated_length": 0.0,
                        "reward": 0.0, "reward_std": 0.0, "frac_reward_zero_std": 1.0, "loss": 0.0, "grad_norm": 0.0}]


@pytest.mark.parametrize("text", [
    "Time: 12:30   Date: 2025-01-02   Node: gpu-3\n",  # values that are no numbers
    "alpha: 1   beta: 2   gamma: 3\n",  # numbers under names no metric has
    "I set reward: 0 and loss: 0 in one sentence with single spaces\n",
])
def test_prose_and_unknown_names_are_no_summary(text):
    from triage.formats.pasted_table import summary_records
    from triage.metrics import TABLE_KEYS

    assert summary_records(text.splitlines(), TABLE_KEYS.__contains__) == []


def test_a_typed_summary_is_triaged_not_refused(tmp_path, capsys):
    (tmp_path / "job.log").write_text(TYPED_SUMMARY, encoding="utf-8")
    rc = main(["run", str(tmp_path / "job.log"), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert rc == 3 and report["root_cause"]["id"] == "inconclusive"
    # every response cut at the limit: the two causes of a cut lead, not the groups' lack of spread it causes
    assert {c["id"] for c in report["candidates"][:2]} == {"rollout.max_len_too_small", "rollout.missing_stop_token"}


def test_the_coverage_names_a_pasted_table_as_what_was_read_of_its_file(tmp_path, capsys):
    (tmp_path / "job.log").write_text(TYPED_SUMMARY, encoding="utf-8")
    main(["run", str(tmp_path), "--json"])
    read = json.loads(capsys.readouterr().out)["coverage"]["read"]
    assert read["logs"] == [{"file": "job.log", "format": "pasted_table", "records": 1}]


def test_the_notebook_table_copied_with_tabs_is_read(tmp_path):
    # unslothai/unsloth's DPO notebook as its user copied the rendered table: tabs between cells, spaced slashes
    header = "Step\tTraining Loss\trewards / chosen\trewards / rejected\trewards / accuracies\trewards / margins\n"
    rows = "".join(f"{i}\t{0.6931 - 0.01 * i:.6f}\t{0.01 * i:.6f}\t{-0.01 * i:.6f}\t0.{i}00000\t{0.02 * i:.6f}\n"
                   for i in range(1, 7))
    table = pasted_tables([header + rows])
    steps, values = table.series("table", "loss")
    assert list(steps) == [1, 2, 3, 4, 5, 6] and values[0] == 0.6831
    assert table.series("table", "rewards/margins")[1][5] == 0.12


# screechingviolet/epic-tikz-diagram-generator's train_grpo.log: a GRPO script's printed metrics, numbers as strings
TIKZ = "".join(f"{{'reward': '0.9{i}13', 'reward_max': '0.9886', 'frac_reward_zero_std': '0', 'loss': '1.268e-05', "
               f"'grad_norm': '0.68{i}5', 'kl': '0.0006671', 'step_time': '6.358'}}\n" for i in range(8))


def test_a_scripts_printed_dicts_are_read_whatever_their_key_order_and_quoting(tmp_path):
    from triage.formats.pasted_table import dict_records
    from triage.metrics import TABLE_KEYS

    records = dict_records(TIKZ.splitlines(), TABLE_KEYS.__contains__)
    assert len(records) == 8 and records[0]["reward"] == 0.9013 and records[0]["grad_norm"] == 0.6805
    assert dict_records(["{'alpha': '1', 'beta': 2, 'gamma': 3}"], TABLE_KEYS.__contains__) == []
    (tmp_path / "train_grpo.log").write_text("[train_grpo] resuming from saved adapter\n" + TIKZ, encoding="utf-8")
    run = open_run(str(tmp_path))
    assert run.metrics.get("grad_norm").source == "table:grad_norm" and len(run.metrics.get("reward")) == 8


def test_the_trainers_own_dicts_are_not_read_twice(tmp_path):
    # the Trainer's printed dicts (with `epoch`) are the log scan's; the paste reader leaves them
    log = "".join(f"{{'loss': 0.5, 'grad_norm': 0.{i + 1}, 'learning_rate': 1e-05, 'epoch': 0.{i}}}\n" for i in range(6))
    (tmp_path / "job.log").write_text(log, encoding="utf-8")
    run = open_run(str(tmp_path))
    assert run.metrics.table.count("table") == 0 and len(run.metrics.get("grad_norm")) == 6
