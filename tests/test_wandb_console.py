"""W&B's end-of-run `Run summary:` block as pasted from a console (triage/formats/wandb_console.py).

The blocks are printed by wandb's own footer code (`Run._footer_summary` and the terminal
printer, which puts `wandb: ` before each line), not written by hand.
"""

from __future__ import annotations

import io
import json
import math
import sys

import pytest

from triage.cli import main
from triage.formats.wandb_console import KIND, summaries, summary_records

wandb = pytest.importorskip("wandb")


def _printed_summary(values: dict[str, object]) -> str:
    """What wandb prints to the terminal at the end of a run that logged `values` last: its footer's grid
    (`Run._footer_summary`), each line behind the `wandb: ` its terminal logger puts first (wandb/errors/term.py)."""
    from wandb.proto import wandb_internal_pb2 as pb
    from wandb.sdk.lib import printer
    from wandb.sdk.wandb_run import Run

    summary = pb.GetSummaryResponse(item=[pb.SummaryItem(key=k, value_json=json.dumps(v)) for k, v in values.items()])
    settings = wandb.Settings()
    grid = Run._footer_summary(summary, printer._PrinterTerm(settings=settings), settings)
    assert grid is not None and grid.startswith("Run summary:")
    return "wandb: \n" + "".join(f"wandb: {line}\n" for line in grid.splitlines()) + "wandb: \n"


# the last values of a verl GRPO run whose gradient went non-finite (verl's metric keys,
# verl/trainer/ppo/metric_utils.py; `training/global_step` from ray_trainer.py)
VERL_LAST = {"actor/entropy": 0.634771234, "actor/grad_norm": float("nan"), "actor/pg_loss": float("nan"),
             "actor/lr": 1e-6, "critic/score/mean": 0.25, "response_length/mean": 812.5,
             "training/global_step": 37, "_step": 37, "trainer/run_name": "qwen2.5-7b-grpo-gsm8k-long-name"}


def test_the_printed_summary_is_one_record_at_its_step():
    table = summary_records([_printed_summary(VERL_LAST)])
    assert table.count(KIND) == 1
    steps, grad = table.series(KIND, "actor/grad_norm")
    assert list(steps) == [37] and math.isnan(grad[0])
    _, entropy = table.series(KIND, "actor/entropy")
    assert entropy[0] == pytest.approx(0.63477)  # wandb rounds to 5 places; kept as printed
    assert not table.has(KIND, "trainer/run_name")  # a string row is not a metric
    assert not table.has(KIND, "training/global_step")  # the step is the index, not a value


def test_a_summary_without_a_step_key_is_not_placed():
    # NVlabs/Tool-N1#9: the user pasted the block from its title, with no step row
    paste = ("wandb: Run summary:\n"
             "wandb:               actor/entropy_loss 0.1888\n"
             "wandb:                         actor/lr 0.0\n"
             "wandb:                    actor/pg_loss 0\n"
             "wandb:              critic/rewards/mean 0\n")
    assert list(summaries(paste)) == [{"actor/entropy_loss": 0.1888, "actor/lr": 0.0, "actor/pg_loss": 0.0,
                                        "critic/rewards/mean": 0.0}]
    assert summary_records([paste]).empty()


def test_the_block_ends_where_its_prefix_or_rows_end():
    paste = ("(TaskRunner pid=4121) wandb: Run summary:\n"
             "(TaskRunner pid=4121) wandb:      actor/grad_norm 0.41\n"
             "(TaskRunner pid=4121) wandb: training/global_step 5\n"
             "(TaskRunner pid=4121) wandb:                  +3 ...\n"
             "(TaskRunner pid=4121) wandb: \n"
             "(TaskRunner pid=4121) wandb: 🚀 View run grpo at: https://wandb.ai/team/proj/runs/abc\n"
             "step 9: {'train/grad_norm': 0.2}\n")
    assert list(summaries(paste)) == [{"actor/grad_norm": 0.41, "training/global_step": 5.0}]
    # the words inside a sentence are no block
    assert list(summaries("see the Run summary: grad_norm 3 below\nloss 1\n")) == []


def test_a_pasted_summary_with_a_nan_gradient_is_read_by_the_triage(monkeypatch, capsys):
    paste = _printed_summary(VERL_LAST)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(paste.encode())))
    assert main(["run", "-", "--json", "--no-cache"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["root_cause"]["id"] == "numerics.nan_grad"
    assert "actor/grad_norm is non-finite at step 37" in report["path"][0]["summary"]
    assert report["coverage"]["metrics"]["grad_norm"]["source"] == "log:wandb_summary"
