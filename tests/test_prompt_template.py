"""prompt_template: do the prompts the run sent follow the checkpoint's chat template?"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from probes.prompt_template import PromptTemplate, chat_template, end_of_turn, template_family, token_ids
from triage.errors import Unavailable
from triage.run import open_run

CHATML = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
LLAMA3 = (
    "{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'"
    " + message['content'] | trim + '<|eot_id|>' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"
)
GEMMA = (
    "{% for message in messages %}{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\\n'}}{% endif %}"
)
MISTRAL = (
    "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
    "{% else %}{{ message['content'] + eos_token}}{% endif %}{% endfor %}"
)


def chatml_prompt(q: str) -> str:
    return f"<|im_start|>user\n{q}<|im_end|>\n<|im_start|>assistant\n"


def make_run(tmp_path: Path, prompts: list, *, template: str | None = CHATML, flags: str = "--apply-chat-template",
             log: str | None = None, eos: str = "<|im_end|>") -> object:
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / "config.json").write_text(json.dumps({"model_type": "qwen2", "eos_token_id": 2}), encoding="utf-8")
    tok: dict = {"eos_token": eos, "added_tokens_decoder": {
        "0": {"content": "<|endoftext|>"}, "1": {"content": "<|im_start|>"}, "2": {"content": "<|im_end|>"}}}
    if template is not None:
        tok["chat_template"] = template
    (hf / "tokenizer_config.json").write_text(json.dumps(tok), encoding="utf-8")
    (tmp_path / "cmdline.txt").write_text(f"python3 train.py --hf-checkpoint hf {flags}\n", encoding="utf-8")
    if prompts:
        d = tmp_path / "dump" / "rollout_data"
        d.mkdir(parents=True)
        torch.save({"rollout_id": 0, "samples": [{"prompt": p, "response": "4", "reward": 1.0} for p in prompts]},
                   d / "0.pt")
    if log is not None:
        (tmp_path / "job.log").write_text(log, encoding="utf-8")
    return open_run(str(tmp_path))


def examine(run):
    return PromptTemplate(PromptTemplate.parse_params({}, "test")).examine(run)


def test_chatml_prompts_follow_the_template(tmp_path):
    obs = examine(make_run(tmp_path, [chatml_prompt(f"What is {i}+2?") for i in range(6)]))
    assert obs.outcome == "follows_template"
    assert obs.evidence["counts"] == {"follows_template": 6}
    assert obs.evidence["template_family"] == "chatml"
    assert obs.evidence["expected_markers"] == ["<|im_start|>user", "<|im_end|>"]
    assert obs.evidence["examples"][0]["head"].startswith("<|im_start|>user\nWhat is 0+2?")


def test_alpaca_prompts_are_a_foreign_template(tmp_path):
    prompts = [f"### Instruction:\nWhat is {i}+2?\n\n### Response:\n" for i in range(5)]
    obs = examine(make_run(tmp_path, prompts, flags=""))
    assert obs.outcome == "foreign_template"
    assert obs.evidence["markers_found"] == ["### Instruction:"]
    assert obs.evidence["apply_chat_template"] is False
    assert "### Instruction:" in obs.summary and "5 of 5" in obs.summary
    assert obs.confidence >= 0.9


@pytest.mark.parametrize("prompt, marker", [
    ("<|user|>\nWhat is 2+2?<|end|>\n<|assistant|>\n", "<|user|>"),
    ("[INST] What is 2+2? [/INST]", "[INST]"),
    ("Human: What is 2+2?\n\nAssistant:", "Human:"),
    ("<|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>", "<|start_header_id|>user<|end_header_id|>"),
])
def test_other_role_markers_are_foreign(tmp_path, prompt, marker):
    obs = examine(make_run(tmp_path, [prompt] * 3))
    assert obs.outcome == "foreign_template"
    assert marker in obs.evidence["markers_found"]


def test_own_markers_out_of_structure_are_foreign(tmp_path):
    # the ChatML tokens pasted into the text, no role after <|im_start|> and no assistant turn opened
    obs = examine(make_run(tmp_path, ["<|im_start|>What is 2+2?<|im_end|>"] * 4))
    assert obs.outcome == "foreign_template"
    assert "out of its structure" in obs.summary


def test_chatml_turns_wrapping_another_templates_roles_are_foreign(tmp_path):
    obs = examine(make_run(tmp_path, [chatml_prompt("### Instruction:\nWhat is 2+2?")] * 3))
    assert obs.outcome == "foreign_template"
    assert set(obs.evidence["markers_found"]) == {"### Instruction:", "<|im_start|>user"}


def test_plain_text_to_a_chat_model_without_the_flag_is_untemplated(tmp_path):
    obs = examine(make_run(tmp_path, ["What is 2+2?", "What is 3+5?", "What is 7+1?"], flags=""))
    assert obs.outcome == "untemplated"
    assert "--apply-chat-template is off" in obs.summary
    assert obs.evidence["counts"] == {"untemplated": 3}
    assert obs.confidence >= 0.85


def test_majority_decides_and_counts_are_reported(tmp_path):
    prompts = [chatml_prompt("What is 1+1?")] * 5 + ["### Instruction:\nWhat is 1+1?\n\n### Response:\n"]
    obs = examine(make_run(tmp_path, prompts))
    assert obs.outcome == "follows_template"
    assert obs.evidence["counts"] == {"follows_template": 5, "foreign_template": 1}
    assert obs.confidence < 0.9


def test_message_lists_are_rendered_by_the_template(tmp_path):
    messages = [{"role": "user", "content": "What is 2+2?"}]
    assert examine(make_run(tmp_path, [messages] * 2)).outcome == "follows_template"


def test_finish_rollout_lines_when_there_are_no_dumps(tmp_path):
    log = "".join(
        f"[2026-08-01 10:00:0{i}] sglang_rollout.py:446 - Finish rollout: "
        f"['### Instruction:\\nWhat is {i}+1?\\n\\n### Response:\\n7<|im_end|>'], label: 2, reward: 0.0\n" for i in range(3)
    )
    obs = examine(make_run(tmp_path, [], flags="", log=log))
    assert obs.outcome == "foreign_template"
    assert obs.evidence["source"] == "Finish rollout lines"
    assert obs.evidence["examples"][0]["where"].endswith("job.log:1")


def test_plain_finish_rollout_closing_its_turn_is_untemplated(tmp_path):
    """The model's own <|im_end|> after a plain-text prompt is the response, not the prompt's markup."""
    log = "[2026-08-01 10:00:00] sglang_rollout.py:446 - Finish rollout: ['What is 2+2? 4<|im_end|>'], label: 4, reward: 1.0\n"
    obs = examine(make_run(tmp_path, [], flags="", log=log))
    assert obs.outcome == "untemplated"


def test_no_prompts_is_unavailable(tmp_path):
    with pytest.raises(Unavailable) as exc:
        examine(make_run(tmp_path, []))
    assert "Finish rollout" in exc.value.reason


def test_no_chat_template_is_unavailable(tmp_path):
    with pytest.raises(Unavailable) as exc:
        examine(make_run(tmp_path, ["What is 2+2?"], template=None))
    assert "no chat template" in exc.value.reason


def test_template_helpers(tmp_path):
    hf = tmp_path / "m"
    hf.mkdir()
    (hf / "tokenizer_config.json").write_text(json.dumps({"eos_token": "</s>", "chat_template": MISTRAL}), encoding="utf-8")
    (hf / "tokenizer.json").write_text(json.dumps({"model": {"type": "BPE", "vocab": {"<s>": 1, "</s>": 2, "a": 3}},
                                                   "added_tokens": [{"id": 32000, "content": "<pad>"}]}), encoding="utf-8")
    text, source = chat_template(hf)
    assert source == "tokenizer_config.json:chat_template"
    assert template_family(text).name == "inst"
    assert end_of_turn(hf, text)[0] == "</s>"
    assert token_ids(hf)["</s>"] == 2 and token_ids(hf)["<pad>"] == 32000
    assert end_of_turn(hf, LLAMA3)[0] == "<|eot_id|>"
    assert end_of_turn(hf, GEMMA)[0] == "<end_of_turn>"
    assert end_of_turn(hf, CHATML)[0] == "<|im_end|>"
    # a template of no known family: the token written right after the content
    assert end_of_turn(hf, "{% for m in messages %}{{ '<turn>' + m['content'] + '<|turn_end|>' }}{% endfor %}")[0] == "<|turn_end|>"


# --- the testbed's runs ----------------------------------------------------------------


@pytest.mark.parametrize("scenario, outcome", [
    ("data.chat_template_mismatch", "foreign_template"),
    ("healthy.qwen2", "follows_template"),
    ("healthy.llama", "follows_template"),
    ("model.base_not_instruct", "follows_template"),
])
def test_testbed_scenarios(scenario, outcome):
    from triage.testbed.scenarios import generate

    obs = examine(open_run(str(generate(scenario))))
    assert obs.outcome == outcome
    assert obs.evidence["source"] == "rollout dumps" and obs.evidence["prompts_checked"] > 0
    if outcome == "foreign_template":
        assert obs.evidence["markers_found"] == ["### Instruction:"]
        assert obs.evidence["examples"][0]["head"].startswith("### Instruction:")
