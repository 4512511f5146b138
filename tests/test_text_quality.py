"""The garble score separates text from the output of a model whose weights are wrong."""

from __future__ import annotations

import importlib
import random
import warnings

import pytest
import torch

from triage.run import open_run
from triage.text_quality import garble_score, garble_signals, judge_texts, repetition_fraction

from probes.rollout_text import RolloutText, parse_finish_rollout, split_response

COHERENT = [
    "The capital of France is Paris.",
    "To solve this, add 12 and 30: 12 + 30 = 42. The answer is 42.",
    "Let's compute step by step. First, 7 * 8 = 56. Then 56 - 14 = 42. So the final answer is \\boxed{42}.",
    "42",
    "\\boxed{7}",
    "Natalia sold 48/2 = 24 clips in May. Natalia sold 48+24 = 72 clips altogether in April and May. #### 72",
    "Janet's ducks lay 16 eggs per day. She eats three for breakfast and bakes muffins with four. "
    "She sells the remainder for $2 each, so she makes (16 - 3 - 4) * 2 = $18 every day.",
    "Okay, so I need to find the sum of the first 10 positive integers. The formula is n(n+1)/2, which gives "
    "10*11/2 = 55. Therefore the answer is 55.<|im_end|>",
    "Paris.<|im_end|>",
    "def add(a, b):\n    return a + b\n\nprint(add(2, 3))",
    "巴黎是法国的首都，也是法国最大的城市。",
    "我们先计算 3 + 4 = 7，所以答案是 7。",
    "The iPhone was released by Apple in 2007, and JavaScript is a language used on the web.",
    "x = 3, y = 4, so x^2 + y^2 = 9 + 16 = 25 and sqrt(25) = 5.",
    "First, we note that $a_n = 2^n - 1$. Then $a_{10} = 1023$.",
    "The angle θ = π/4, so sin θ = √2/2 and the answer is 0.707.",
    "Модель GPT-4 обучена на данных из интернета, включая Wikipedia и GitHub.",
    "これはペンです。日本語のテキストです。",
    "我们用Python写了一个程序，答案是42。",
    "안녕하세요. 답은 42입니다.",
    "Die Antwort ist 42, weil 6 mal 7 gleich 42 ist.",
]


def _docstrings() -> list[str]:
    lines: list[str] = []
    for name in ("json", "argparse", "collections", "functools", "itertools", "os", "pathlib", "re", "string",
                 "textwrap", "typing", "logging", "subprocess", "csv", "random", "statistics"):
        mod = importlib.import_module(name)
        for obj in [mod, *vars(mod).values()]:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                doc = getattr(obj, "__doc__", None)
            if isinstance(doc, str):
                lines.extend(line.strip() for line in doc.splitlines() if line.strip())
    return lines


@pytest.fixture(scope="module")
def byte_bpe():
    """A byte-level BPE tokenizer (as GPT-2 / Qwen use), trained offline on local text."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=4000,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_docstrings(), trainer=trainer)
    return tok


@pytest.mark.parametrize("text", COHERENT)
def test_coherent_text_and_arithmetic_score_low(text):
    assert garble_score(text) < 0.3, garble_signals(text)


def test_random_byte_bpe_token_soup_is_garbled(byte_bpe):
    rng = random.Random(7)
    n = byte_bpe.get_vocab_size()
    soup = [byte_bpe.decode([rng.randrange(n) for _ in range(40)]) for _ in range(40)]
    verdict = judge_texts(soup)
    assert verdict.count == 40
    assert verdict.garbled_fraction >= 0.8
    assert verdict.mean_score >= 0.6
    assert verdict.garbled
    # the worst examples come back, worst first
    assert len(verdict.examples) == 3 and verdict.examples[0][0] >= verdict.examples[-1][0]


def test_random_merged_tokens_without_byte_fragments_are_still_garbled(byte_bpe):
    """Only multi-byte merges: no replacement characters to give the soup away."""
    rng = random.Random(11)
    n = byte_bpe.get_vocab_size()
    soup = [byte_bpe.decode([rng.randrange(259, n) for _ in range(40)]) for _ in range(40)]
    assert all("\ufffd" not in s for s in soup)
    verdict = judge_texts(soup)
    assert verdict.garbled_fraction >= 0.7


def test_same_tokenizer_decodes_coherent_text_that_scores_low(byte_bpe):
    ids = byte_bpe.encode("First, 7 * 8 = 56. Then 56 - 14 = 42. The answer is 42.").ids
    assert garble_score(byte_bpe.decode(ids)) < 0.3


def test_one_token_repeated_is_garbled(byte_bpe):
    the = byte_bpe.encode(" the").ids
    assert garble_score(byte_bpe.decode(the * 60)) >= 0.8
    assert garble_score("!" * 80) >= 0.7
    assert garble_score("的" * 40) >= 0.8
    assert repetition_fraction("the " * 30) > 0.9


def test_mixed_scripts_are_garbled():
    text = "нафтаξλ大学 vergütung ماهي สวัสดี Привет 的 αβγ abcдежfgh клмnop"
    assert garble_score(text) >= 0.8
    assert garble_signals(text).scripts >= 0.8


def test_runs_of_special_tokens_are_garbled_but_one_end_marker_is_not():
    assert garble_score("<|endoftext|>" * 6) >= 0.9
    assert garble_score("The answer is 5. <unk><unk><unk><unk> <pad><pad>") >= 0.8
    assert garble_score("The answer is 5.<|im_end|>") == 0.0


def test_replacement_and_control_characters_are_garbled():
    assert garble_score("\ufffd\ufffdab\ufffd\x03cd\x00ef\ufffd gh") >= 0.9


def test_empty_text_is_counted_not_scored():
    assert garble_score("") == 0.0
    verdict = judge_texts(["", "  ", "The capital of France is Paris."])
    assert verdict.count == 1 and verdict.empty == 2 and verdict.garbled_fraction == 0.0
    nothing = judge_texts([])
    assert nothing.count == 0 and not nothing.garbled


# --- reading rollouts back from a log line / a dump ---------------------------------------


def test_parse_finish_rollout_slime_and_miles_lines():
    slime = ("Finish rollout: ['<|im_start|>user\\nWhat is 2+3?<|im_end|>\\n<|im_start|>assistant\\n"
             "2 + 3 = 5. The answer is 5.<|im_end|>'], label: 5, reward: 1.0")
    text = parse_finish_rollout(slime)
    assert text.startswith("<|im_start|>user\nWhat is 2+3?")
    assert split_response(text) == "2 + 3 = 5. The answer is 5.<|im_end|>"
    miles = "Finish rollout: text_preview='Question: 2+3? Answer: 5', label=5, reward_summary={'mean': 1.0}"
    assert parse_finish_rollout(miles) == "Question: 2+3? Answer: 5"
    # a line cut at the log's length cap still yields its text
    cut = "Finish rollout: ['<|im_start|>assistant\\nThe answer is"
    assert split_response(parse_finish_rollout(cut)) == "The answer is"


def _dump(path, rollout_id, responses):
    path.parent.mkdir(parents=True, exist_ok=True)
    samples = [
        {"index": i, "prompt": "<|im_start|>user\nWhat is 6*7?<|im_end|>\n<|im_start|>assistant\n",
         "response": r, "response_length": max(1, len(r.split())), "reward": 1.0, "status": "completed",
         "tokens": list(range(10)), "loss_mask": [1] * max(1, len(r.split())),
         "rollout_log_probs": [-0.1] * max(1, len(r.split()))}
        for i, r in enumerate(responses)
    ]
    torch.save({"rollout_id": rollout_id, "samples": samples}, path)


def test_rollout_text_probe_on_dumps_garbled_and_coherent(tmp_path, byte_bpe):
    rng = random.Random(3)
    n = byte_bpe.get_vocab_size()
    garbage = [byte_bpe.decode([rng.randrange(n) for _ in range(50)]) for _ in range(8)]
    _dump(tmp_path / "bad" / "dump" / "rollout_data" / "0.pt", 0, garbage)
    obs = RolloutText().examine(open_run(str(tmp_path / "bad")))
    assert obs.outcome == "garbled"
    assert obs.evidence["sources"] == {"finish_rollout_lines": 0, "dump_samples": 8}
    assert obs.evidence["garbled_fraction"] >= 0.75
    assert len(obs.evidence["examples"]) == 3
    assert obs.evidence["examples"][0]["where"].startswith("rollout_data/0.pt#")
    assert obs.evidence["examples"][0]["rollout"] == 0
    assert all(len(e["response"]) <= 201 for e in obs.evidence["examples"])

    good = ["6 * 7 = 42. The answer is 42.", "Six times seven is 42.", "We multiply 6 by 7 to get 42."] * 3
    _dump(tmp_path / "good" / "dump" / "rollout_data" / "0.pt", 0, good)
    obs = RolloutText().examine(open_run(str(tmp_path / "good")))
    assert obs.outcome == "coherent"
    assert obs.evidence["garbled_fraction"] == 0.0 and obs.evidence["judged"] == 9


def test_rollout_text_probe_on_finish_rollout_log_lines(tmp_path):
    lines = []
    for i, response in enumerate(["ограпсь大学 ξλ vergütung\\ufffd\\x03 ماهي", "<unk><unk><unk><unk><unk>",
                                  "нафтаξλ 大学abc дежfgh"]):
        lines.append(f"[2026-08-01 10:00:0{i}] sglang_rollout.py:420 - Finish rollout: ['<|im_start|>user\\nWhat is "
                     f"6*7?<|im_end|>\\n<|im_start|>assistant\\n{response}'], label: 42, reward: 0")
    (tmp_path / "job.log").write_text("\n".join(lines) + "\n")
    obs = RolloutText().examine(open_run(str(tmp_path)))
    assert obs.outcome == "garbled"
    assert obs.evidence["sources"]["finish_rollout_lines"] == 3
    assert obs.evidence["first_rollout"]["where"].endswith("job.log:1")


def test_rollout_text_probe_coherent_log(tmp_path):
    lines = [f"[2026-08-01 10:00:0{i}] sglang_rollout.py:420 - Finish rollout: ['<|im_start|>user\\nWhat is "
             f"{i}+{i}?<|im_end|>\\n<|im_start|>assistant\\n{i} + {i} = {2 * i}. The answer is {2 * i}.<|im_end|>'], "
             f"label: {2 * i}, reward: 1.0" for i in range(1, 6)]
    (tmp_path / "job.log").write_text("\n".join(lines) + "\n")
    obs = RolloutText().examine(open_run(str(tmp_path)))
    assert obs.outcome == "coherent"
    assert obs.evidence["judged"] == 5 and obs.evidence["mean_garble_score"] < 0.1
    assert obs.evidence["examples"][0]["response"].endswith("<|im_end|>")


def test_rollout_text_probe_unavailable_without_rollouts(tmp_path):
    from triage.errors import Unavailable

    (tmp_path / "job.log").write_text("[2026-08-01 10:00:00] train.py:1 - starting\n")
    with pytest.raises(Unavailable) as exc:
        RolloutText().examine(open_run(str(tmp_path)))
    assert exc.value.artifact == "rollout_dump"
    assert "--save-debug-rollout-data" in exc.value.command
