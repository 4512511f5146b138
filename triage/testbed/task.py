"""The verifiable toy task: small-number addition, with its prompt data and reward.

A prompt asks "What is 12+34?"; the answer is the sum's digits, ended by the turn's
eos. The reward is 1.0 when the response's leading number equals the label, else 0.0,
the shape of slime's rule-based rewards (`--rm-type` / `--custom-rm-path`).

Prompt data is written as slime reads it: JSONL with an input key (the user message)
and a label key, optionally pre-templated text (what a user passes without
`--apply-chat-template`).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CORPUS_VERSION = 2
MAX_OPERAND = 30  # operands are 0..MAX_OPERAND-1 for the trained distribution
HARD_MIN, HARD_MAX = 200, 999  # operands of the "hard" set: never seen in warm-up


@dataclass(frozen=True)
class Problem:
    a: int
    b: int

    @property
    def question(self) -> str:
        return f"What is {self.a}+{self.b}?"

    @property
    def answer(self) -> str:
        return str(self.a + self.b)

    @property
    def raw_text(self) -> str:
        """How the problem appears in a base model's pretraining text (no chat template)."""
        return f"{self.a}+{self.b}={self.answer}"


def all_problems(max_operand: int = MAX_OPERAND) -> list[Problem]:
    return [Problem(a, b) for a in range(max_operand) for b in range(max_operand)]


def sample_problems(n: int, seed: int, kind: str = "train") -> list[Problem]:
    """`n` problems drawn with `seed`: `train` from the warm-up distribution, `hard` far outside it."""
    rng = random.Random(seed)
    if kind == "train":
        return [Problem(rng.randrange(MAX_OPERAND), rng.randrange(MAX_OPERAND)) for _ in range(n)]
    if kind == "hard":
        return [Problem(rng.randint(HARD_MIN, HARD_MAX), rng.randint(HARD_MIN, HARD_MAX)) for _ in range(n)]
    raise ValueError(f"unknown problem kind {kind!r}: choose train or hard")


def tokenizer_corpus() -> Iterator[str]:
    for p in all_problems():
        yield p.question
        yield p.raw_text
    for role in ("system", "user", "assistant"):
        yield f"<|im_start|>{role}\n"


def messages(problem: Problem) -> list[dict[str, str]]:
    return [{"role": "user", "content": problem.question}]


OTHER_TEMPLATE = "### Instruction:\n{question}\n\n### Response:\n"


def write_prompt_data(path: Path, problems: list[Problem], style: str = "chat") -> Path:
    """Write slime-style prompt JSONL: {"prompt": ..., "label": ...} per line.

    `chat`: the user message, to be wrapped by `--apply-chat-template`.
    `other_template`: text already wrapped in a different (Alpaca-style) template.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        for p in problems:
            if style == "chat":
                prompt: Any = p.question
            elif style == "other_template":
                prompt = OTHER_TEMPLATE.format(question=p.question)
            else:
                raise ValueError(f"unknown prompt style {style!r}")
            fh.write(json.dumps({"prompt": prompt, "label": p.answer}) + "\n")
    return path


def read_prompt_data(path: Path, input_key: str = "prompt", label_key: str | None = "label") -> list[dict[str, Any]]:
    rows = []
    with open(path) as fh:
        for line_no, line in enumerate(fh, 1):
            if not line.strip():
                continue
            row = json.loads(line)
            if input_key not in row:
                raise KeyError(f"{path}:{line_no}: no {input_key!r} field (--input-key)")
            rows.append({"prompt": row[input_key], "label": row.get(label_key) if label_key else None,
                         "metadata": row.get("metadata") or {}})
    return rows


_LEADING_NUMBER = re.compile(r"^\s*(-?\d+)")


def extract_answer(response: str) -> str | None:
    m = _LEADING_NUMBER.match(response)
    return m.group(1) if m else None


def score(response: str, label: str | None) -> float:
    answer = extract_answer(response)
    return 1.0 if answer is not None and label is not None and answer == str(label).strip() else 0.0
