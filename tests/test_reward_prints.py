"""verl's reward manager prints of its first samples read as rollout text (triage/formats/reward_prints.py); the
wording is verl's (verl/workers/reward_manager/naive.py: `print("[prompt]", …)`, `[response]`, `[ground_truth]`,
`[score]`), behind the Ray actor's prefix that ran it."""

from __future__ import annotations

import json

from triage.cli import main
from triage.formats.reward_prints import printed_samples

PRE = "(TaskRunner pid=28143) "
PROMPT = (f"{PRE}[prompt] system\n"
          f"{PRE}You are Qwen, created by Alibaba Cloud. You are a helpful assistant.\n"
          f"{PRE}user\n"
          f"{PRE}Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many "
          "clips did Natalia sell altogether in April and May? Let's think step by step and output the final answer "
          'after "####".\n'
          f"{PRE}assistant\n")
FINE = (f"{PRE}[response] In April Natalia sold 48 clips. In May she sold half as many, which is 48 / 2 = 24 clips.\n"
        f"{PRE}Altogether she sold 48 + 24 = 72 clips in April and May.\n"
        f"{PRE}#### 72\n"
        f"{PRE}[ground_truth] 72\n"
        f"{PRE}[score] 1.0\n")
# a GRPO + LoRA run's validation sample after its first update (the verl#3159 weight-sync race, as a user logged it)
BANGS = (f"{PRE}[response] " + "!" * 256 + "\n"
         f"{PRE}[ground_truth] 18\n"
         f"{PRE}[score] 0.0\n")


def test_the_prompt_and_response_span_lines_and_lose_the_actors_prefix():
    samples = list(printed_samples(PROMPT + FINE + PROMPT + BANGS))
    assert [s.line_no for s in samples] == [6, 16]
    assert samples[0].prompt.startswith("system\nYou are Qwen") and samples[0].prompt.endswith("assistant")
    assert samples[0].response.endswith("April and May.\n#### 72")
    assert samples[1].response == "!" * 256


def test_a_console_without_the_prints_holds_none():
    assert list(printed_samples("(TaskRunner pid=1) step:1 - actor/grad_norm:0.4\n")) == []


def test_a_garbled_printed_response_is_a_garbled_rollout(tmp_path, capsys):
    (tmp_path / "job.log").write_text(PROMPT + BANGS, encoding="utf-8")
    rc = main(["run", str(tmp_path), "--json"])
    report = json.loads(capsys.readouterr().out)
    first = report["path"][0]
    assert first["outcome"] == "garbled_rollouts", first["summary"]
    assert "job.log:6" in first["summary"]
    assert rc in (0, 3)


def test_a_coherent_printed_response_is_no_symptom(tmp_path, capsys):
    (tmp_path / "job.log").write_text(PROMPT + FINE, encoding="utf-8")
    main(["run", str(tmp_path), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert report["path"][0]["outcome"] == "no_symptom"
    assert "no fatal error, hang or garbled rollout" in report["path"][0]["summary"]
