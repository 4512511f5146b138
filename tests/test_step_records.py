"""Logs whose every line is a record by step, of trainers without an adapter: `triage run FILE` reads them
(triage/formats/pasted_table.py, `step_lines` and `tables`) instead of refusing them as no training run."""

from __future__ import annotations

import json

import pytest

from triage.cli import main
from triage.formats.pasted_table import step_lines, tables

# kwizzlesurp10-ctrl/nanochatkwizzle:browser_sft_final_v6.log (nanochat's SFT, the loss NaN from its first step)
NANOCHAT_NAN = """\
Loaded optimizer state from pretrained checkpoint (momentum buffers only, LRs reset)
Training mixture: 1,071,848 rows (MMLU x3, GSM8K x4)
step 00001 (20.00%) | loss: nan | lrm: 1.00 | dt: 2600.18ms | tok/sec: 393 | mfu: 0.00 | epoch: 1 | total time: 0.00m
step 00002 (40.00%) | loss: nan | lrm: 1.00 | dt: 199.40ms | tok/sec: 5,135 | mfu: 0.00 | epoch: 1 | total time: 0.00m
step 00003 (60.00%) | loss: nan | lrm: 0.80 | dt: 204.05ms | tok/sec: 5,018 | mfu: 0.00 | epoch: 1 | total time: 0.00m
step 00004 (80.00%) | loss: nan | lrm: 0.40 | dt: 200.84ms | tok/sec: 5,098 | mfu: 0.00 | epoch: 1 | total time: 0.00m
step 00005 (100.00%) | loss: nan | lrm: 0.00 | dt: 201.96ms | tok/sec: 5,070 | mfu: 0.00 | epoch: 1 | total time: 0.00m
"""
# Coicozoi/minimind-from-scratch:logs/pretrain.log (MiniMind: the epoch, then the step of the epoch)
MINIMIND_PRETRAIN = """\
Model Params: 30.03M
Trainable Params: 30.025M
Epoch:[1/1](10/39695), loss: 8.5371, logits_loss: 8.5371, aux_loss: 0.0000, lr: 0.00050000, epoch_time: 130.0min
Epoch:[1/1](20/39695), loss: 8.2461, logits_loss: 8.2461, aux_loss: 0.0000, lr: 0.00050000, epoch_time: 112.0min
Epoch:[1/1](30/39695), loss: 8.1319, logits_loss: 8.1319, aux_loss: 0.0000, lr: 0.00050000, epoch_time: 105.0min
"""
# Coicozoi/minimind-from-scratch:logs/grpo.log (names of several words)
MINIMIND_GRPO = """\
past_key_values should not be None in from_legacy_cache()
Epoch:[1/1](1/9751), Reward: -2.3041, KL_ref: -0.0010, Adv Std: 0.9258, Adv Mean: -0.0000, Actor Loss: 0.0000, Avg Response Len: 271.38, Learning Rate: 0.00000030
Epoch:[1/1](2/9751), Reward: -1.7233, KL_ref: 0.0002, Adv Std: 0.9257, Adv Mean: 0.0000, Actor Loss: 0.0000, Avg Response Len: 297.00, Learning Rate: 0.00000030
Epoch:[1/1](3/9751), Reward: -1.4468, KL_ref: 0.0409, Adv Std: 0.9257, Adv Mean: 0.0000, Actor Loss: 0.0065, Avg Response Len: 286.75, Learning Rate: 0.00000030
"""
# KellerJordan/modded-nanogpt:records/2024-06-06_AdamW/f66d43d7-e449-4029-8adf-e8537bab49ea.log (llm.c's log file)
LLMC = """\
s:0 tel:10.968871
s:0 trl:10.965596
s:1 trl:10.814037
s:2 trl:10.543272
"""
# KellerJordan/modded-nanogpt:records/071825_TritonMuon/record.txt (the log after the script's source)
MODDED_NANOGPT = """\
step:0/1750 val_loss:10.8258 train_time:0ms step_avg:0.04ms
step:1/1750 train_time:151ms step_avg:151.05ms
step:1750/1750 train_time:168935ms step_avg:96.53ms
step:1750/1750 val_loss:3.2780 train_time:169042ms step_avg:96.60ms
"""
# Barber0/LLM-pretrain:train.log (the step is the batch of the epoch, among the items)
BARBER0 = """\
ep: 0, batch: 20, time: 9.17, ntokens: 485.20/513, loss: 10.984375
ep: 0, batch: 40, time: 8.38, ntokens: 431.70/513, loss: 10.976562
ep: 0, batch: 60, time: 8.35, ntokens: 428.90/513, loss: 10.984375
"""
# Jayant-Guru-Shrivastava/ERAV4-Session11 (shakespeare-gpt2-124M) train.log: a tab-separated table of one metric
STEP_LOSS_TSV = "step\tloss\n10\t8.460716\n20\t7.688958\n30\t7.206179\n40\t6.972393\n"


def _run(tmp_path, name: str, text: str, capsys) -> tuple[int, dict | None]:
    log = tmp_path / name
    log.write_text(text, encoding="utf-8")
    rc = main(["run", str(log), "--json", "--no-cache"])
    out = capsys.readouterr().out
    return rc, (json.loads(out) if rc != 2 else None)


def test_nanochat_nan_loss_reaches_the_nan_check(tmp_path, capsys):
    rc, report = _run(tmp_path, "browser_sft_final_v6.log", NANOCHAT_NAN, capsys)
    assert rc != 2
    assert report["root_cause"]["id"] == "numerics.nan_grad"
    onset = next(p for p in report["path"] if p["probe"] == "nonfinite_onset")
    assert onset["evidence"]["onset_step"] == 1 and onset["evidence"]["onset_metric"] == "table:loss"


@pytest.mark.parametrize("name, text", [
    ("pretrain.log", MINIMIND_PRETRAIN), ("grpo.log", MINIMIND_GRPO), ("llmc.log", LLMC),
    ("record.txt", MODDED_NANOGPT), ("train.log", BARBER0), ("train_tsv.log", STEP_LOSS_TSV),
], ids=["minimind-pretrain", "minimind-grpo", "llm.c", "modded-nanogpt", "items-with-batch", "step-loss-tsv"])
def test_a_log_of_records_by_step_is_triaged_not_refused(tmp_path, capsys, name, text):
    rc, report = _run(tmp_path, name, text, capsys)
    assert rc != 2
    assert report["coverage"] is not None


def test_each_form_of_the_step_gives_its_records():
    nano = step_lines(NANOCHAT_NAN.splitlines())
    assert [s for s, _ in nano] == [1, 2, 3, 4, 5]
    assert nano[1][1]["tok/sec"] == 5135.0 and nano[0][1]["total_time"] == 0.0
    assert all(r["loss"] != r["loss"] for _, r in nano)  # `nan` is read, as NaN
    minimind = step_lines(MINIMIND_PRETRAIN.splitlines())
    assert minimind[0] == (10, {"loss": 8.5371, "logits_loss": 8.5371, "aux_loss": 0.0, "lr": 0.0005, "epoch_time": 130.0})
    grpo = step_lines(MINIMIND_GRPO.splitlines())
    assert grpo[2][0] == 3 and grpo[2][1]["avg_response_len"] == 286.75 and grpo[2][1]["learning_rate"] == 3e-07
    assert grpo[0][1]["kl_ref"] == -0.001 and grpo[0][1]["reward"] == -2.3041  # names kept as written
    # the epoch's steps go on from the epoch before: `Epoch:[2/2](5/100)` is the run's 105th step
    assert step_lines(["Epoch:[2/2](5/100), loss: 1.5, lr: 0.1", "Epoch:[2/2](6/100), loss: 1.4, lr: 0.1"])[0][0] == 105
    assert step_lines(LLMC.splitlines()) == [(0, {"tel": 10.968871}), (0, {"trl": 10.965596}), (1, {"trl": 10.814037}),
                                             (2, {"trl": 10.543272})]
    modded = step_lines(MODDED_NANOGPT.splitlines())
    assert modded[0] == (0, {"val_loss": 10.8258, "train_time": 0.0, "step_avg": 0.04}) and modded[-1][0] == 1750
    assert step_lines(BARBER0.splitlines())[1] == (40, {"ep": 0.0, "time": 8.38, "ntokens": 431.7, "loss": 10.976562})
    # a batch counted within its epoch goes on from the last batch of the epoch before
    assert [s for s, _ in step_lines(["ep: 0, batch: 20, loss: 2.0", "ep: 0, batch: 40, loss: 1.9",
                                      "ep: 1, batch: 20, loss: 1.8"])] == [20, 40, 60]
    assert list(tables(STEP_LOSS_TSV.splitlines()))[0] == (10, {"loss": 8.460716})


def test_the_canonical_series_of_records_by_step(tmp_path):
    from triage.run import open_run

    (tmp_path / "llmc.log").write_text(LLMC, encoding="utf-8")
    loss = open_run(str(tmp_path)).metrics.get("loss")
    assert loss is not None and loss.source == "table:trl" and list(loss.steps) == [0, 1, 2]


def test_lines_that_are_not_records_are_not_read():
    bars = ["50%|█████     | 5/10 [00:01<00:02,  4.50it/s]", "60%|██████    | 6/10 [00:01<00:01,  4.51it/s, loss=0.3]",
            "Step: 50%|█████     | 5/10 [00:01<00:02, loss=0.3, lr=1e-5]",
            "Step: 60%|██████    | 6/10 [00:01<00:02, loss=0.3, lr=1e-5]"]
    assert step_lines(bars) == [] and list(tables(bars)) == []
    prose = ["Step 3 of the guide: set lr: 0.1, batch: 8 and warmup: 100 steps",
             "Step 4 of the guide: set lr: 0.2, batch: 16 and warmup: 200 steps",
             "In epoch 2 the loss was 2.3, and at step 400 it rose to 9.1."] * 2
    assert step_lines(prose) == []
    source = ['        print0(f"s:{step} tel:{val_loss.item()}")',
              '    print(f"step {step:05d} ({pct_done:.2f}%) | loss: {debiased_smooth_loss:.6f} | lrm: {lrm:.2f}")',
              "            Logger(f'Epoch:[{epoch + 1}/{args.epochs}]({step}/{iters}), loss: {loss:.4f}, lr: {lr:.8f}')",
              "for step in range(10):", "    if step % 10 == 0: print(f'step {step} | loss {loss:.3f} | lr {lr:.2e}')",
              "    batch: int = 8, epoch: int = 1, lr: float = 0.1"] * 2
    assert step_lines(source) == []
    # a table of one metric needs more than two rows: two words over two numbers may be anything
    assert list(tables(["step loss", "1 2", "2 3", "and then"])) == []


def test_a_file_of_other_lines_is_still_refused(tmp_path, capsys):
    log = tmp_path / "notes.log"
    log.write_text("Step 3 of the guide: install the package\nthen run it\n" * 3, encoding="utf-8")
    assert main(["run", str(log), "--no-cache"]) == 2
    assert "notes.log held no metric record" in capsys.readouterr().err  # (the file is named, not `.`)


def test_deepspeeds_step_report_and_a_bracketed_step_are_records():
    # linskybing/LLM:logs/nv/zero_3.out: DeepSpeed's engine report (deepspeed/runtime/engine.py _report_progress) and
    # the script's own `[Step N/100] Loss: …` line, one after the other for each step
    lines = [
        "[2025-10-28 20:50:31,653] [INFO] [logging.py:107:log_dist] [Rank 0] step=1, skipped=1, lr=[1e-05], "
        "mom=[[0.8, 0.999]]",
        "[Step 1/100] Loss: 5.0507 | Global Tokens/s: 1376.92 | GPU Mem (GB): 6.49 | Peak Mem: 21.31",
        "[2025-10-28 20:50:33,186] [INFO] [logging.py:107:log_dist] [Rank 0] step=2, skipped=2, lr=[1e-05], "
        "mom=[[0.8, 0.999]]",
        "[Step 2/100] Loss: 5.1898 | Global Tokens/s: 1829.88 | GPU Mem (GB): 6.49 | Peak Mem: 21.31",
    ]
    records = step_lines(lines)
    assert (1, {"skipped": 1.0, "lr": 1e-05}) in records
    assert any(step == 2 and row.get("loss") == 5.1898 for step, row in records)


def test_tinker_cookbooks_metrics_are_read_under_its_names(tmp_path):
    # sushantmehta-code/tinker-cookbook's logs_v2p7/metrics.jsonl (tinker_cookbook/rl/metrics.py, metric_util.py)
    import json

    rows = [{"step": i, "progress/batch": i, "optim/lr": 4e-05, "env/all/reward/total": 0.55 + 0.001 * i,
             "optim/kl_sample_train_v1": 0.0008, "optim/entropy": 0.52 - 0.001 * i} for i in range(30)]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    from triage.run import open_run

    run = open_run(str(tmp_path))
    assert run.metrics.get("reward").source == "jsonl:env/all/reward/total"
    assert run.metrics.get("train_rollout_kl").source == "jsonl:optim/kl_sample_train_v1"
    assert run.metrics.get("entropy").values[0] == 0.52


def test_files_of_any_name_are_opened_a_bounded_number_of_times(tmp_path, monkeypatch):
    """A run of 100,000 `*.json` files (benchmarks/fuzz.py's many_files) is not opened file by file to the last."""
    import json

    from triage.run import discover
    from triage.run import open_run

    monkeypatch.setattr(discover, "MAX_CONTENT_SNIFFS", 2)
    for name in ("a.jsonl", "b.jsonl", "c.jsonl"):
        (tmp_path / name).write_text("".join(json.dumps({"step": i, "loss": 1.0}) + "\n" for i in range(3)),
                                     encoding="utf-8")
    run = open_run(str(tmp_path))
    assert [p.name for p in run.artifacts.metric_jsonl] == ["a.jsonl", "b.jsonl"]
