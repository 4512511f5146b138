"""The completions ms-swift, verl and TRL (through W&B) keep of their rollouts, read as rollout dumps.

Each file is written as its framework writes it: ms-swift's `completions.jsonl` one step's table per line
(swift/rlhf_trainers/grpo_trainer.py `log` through swift/utils/io_utils.py's `JsonlWriter`, `json.dumps`
of a dict of columns), verl's `trainer.rollout_data_dir/{step}.jsonl` one sample per line
(verl/trainer/ppo/ray_trainer.py `_dump_generations`, `json.dumps(entry, ensure_ascii=False)`), and the
W&B `completions` table by the wandb package itself (tests/test_wandb.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from triage.cli import main
from triage.run import open_run

GARBLED = [
    "нафтаξλ大学 vergütung ماهي สวัสดี Привет 的 αβγ abcдежfgh",
    "ysicsOrg\ufffd\ufffd DRM\x03 cosponsoredNexus мosqu ξλ",
]
FINE = "6 * 7 = 42, so the answer is 42."


def _swift(root: Path, steps: dict[int, list[str]]) -> Path:
    out = root / "output" / "v0-20260310-101500"
    out.mkdir(parents=True)
    with open(out / "completions.jsonl", "w", encoding="utf-8") as fh:
        for step, completions in steps.items():
            n = len(completions)
            table = {"step": [str(step)] * n, "prompt": ["<|im_start|>user\nWhat is 6*7?<|im_end|>\n"] * n,
                     "completion": completions, "accuracy": [0.0] * n, "format": [1.0] * n,
                     "advantages": [0.0] * n, "solution": ["42"] * n}
            fh.write(json.dumps(table, ensure_ascii=False) + "\n")
    return out / "completions.jsonl"


def _verl(root: Path, steps: dict[int, list[str]], score: float = 0.0) -> Path:
    out = root / "rollout_data"
    out.mkdir(parents=True)
    for step, outputs in steps.items():
        with open(out / f"{step}.jsonl", "w") as fh:
            for text in outputs:
                entry = {"input": "system\nYou are a helpful assistant.\nuser\nWhat is 6*7?\nassistant\n",
                         "output": text, "gts": "42", "score": score, "step": step}
                fh.write(json.dumps(entry, ensure_ascii=False) + "\n")
    return out


def _report(capsys, root: Path) -> tuple[int, dict]:
    code = main(["run", str(root), "--json", "--no-cache"])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else {"stderr": err})


def test_ms_swift_completions_are_the_first_steps_samples_in_slimes_keys(tmp_path):
    path = _swift(tmp_path, {1: [FINE, FINE], 2: [FINE, FINE, FINE]})
    run = open_run(str(tmp_path))
    assert run.artifacts.rollout_dumps == [path]
    dump = run.rollout_dump(path)
    assert dump.rollout_id == 1 and len(dump) == 2
    sample = dump.samples[0]
    assert sample["response"] == FINE and sample["label"] == "42" and sample["step"] == 1
    # one column per reward function, kept by name as slime keeps a dict reward
    assert sample["reward"] == {"accuracy": 0.0, "format": 1.0}


def test_garbled_completions_ms_swift_kept_are_the_garbled_rollouts_symptom(tmp_path, capsys):
    _swift(tmp_path, {1: GARBLED * 4})
    code, report = _report(capsys, tmp_path)
    first = report["path"][0]
    assert (first["probe"], first["outcome"]) == ("symptom", "garbled_rollouts"), first["summary"]
    assert "completions.jsonl" in first["summary"]


def test_verls_rollout_data_dir_is_read_lowest_step_first(tmp_path, capsys):
    # the first rollout decides: step 1 is garbled, later steps are fine (verl names files by step: 1, 2, 10)
    _verl(tmp_path, {1: GARBLED * 4, 2: [FINE] * 8, 10: [FINE] * 8})
    run = open_run(str(tmp_path))
    assert [p.name for p in run.artifacts.rollout_dumps] == ["1.jsonl", "2.jsonl", "10.jsonl"]  # numbers as numbers
    problems: list[str] = []
    assert [d.rollout_id for _p, d in run.rollout_dumps(problems)] == [1, 2, 10] and not problems
    code, report = _report(capsys, tmp_path)
    first = report["path"][0]
    assert first["outcome"] == "garbled_rollouts" and "rollout_data/1.jsonl" in first["summary"], first["summary"]


def test_responses_that_hold_their_label_and_score_0_are_a_broken_reward_function(tmp_path, capsys):
    # verl's console metrics: the score stays 0 for 25 steps; the dumped outputs end on the right answer
    lines = [f"step:{i} - critic/score/mean:0.000 - critic/score/max:0.000 - critic/score/min:0.000 - "
             f"actor/pg_loss:0.000 - actor/grad_norm:0.000 - response_length/mean:{180 + i}.0"
             for i in range(1, 26)]
    (tmp_path / "job.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    _verl(tmp_path, {1: [FINE] * 16})
    code, report = _report(capsys, tmp_path)
    assert report["root_cause"]["id"] == "reward.broken_fn", [(f["probe"], f["outcome"]) for f in report["path"]]
    check = next(f for f in report["path"] if f["probe"] == "reward_signal")
    assert check["evidence"]["dump_check"]["contain_label_scored_0"] == 16


@pytest.mark.parametrize("name, text", [
    ("5.jsonl", '{"step": 5, "loss": 0.3}\n'),  # another program's numbered file
    ("7.jsonl", '{"output": "fine", "step": "nan", "score": "inf"}\n'),  # values no step or reward can be made of
    ("completions.jsonl", '{"step": ["1"], "prompt": ["What is'),  # ms-swift stopped mid-write
])
def test_a_file_named_like_completions_that_holds_none_is_skipped_not_refused(tmp_path, capsys, name, text):
    (tmp_path / name).write_text(text, encoding="utf-8")
    (tmp_path / "job.log").write_text("step:1 - actor/grad_norm:0.5 - critic/score/mean:0.2\n", encoding="utf-8")
    code, report = _report(capsys, tmp_path)
    assert code in (0, 3), report
    rollout_text = [f for f in report["path"] if f["probe"] == "rollout_text"]
    assert all("Traceback" not in f["summary"] for f in rollout_text)
