"""The samples verl's reward manager prints to the console, as rollout text.

verl prints the first samples of each data source it scores (verl/workers/reward_manager/naive.py,
`num_examine`): `print("[prompt]", prompt_str)`, then `[response]`, `[ground_truth]` and `[score]`, each behind
the Ray actor's prefix that ran it (`(TaskRunner pid=…) [response] …`). A decoded response spans lines; the lines
up to the next tag are its own. A console pasted into an issue shows the run's generations this way: garbled
output after the first update (`[response] !!!!!!!…`) is seen here as slime's `Finish rollout` samples are.

Read from pasted-size logs (`Run.pastes`), not in the log scan: a job's long console keeps its rollouts in
`trainer.rollout_data_dir` (triage/formats/completion_records.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

_TAG = re.compile(r"^\s*(?:\(\w+ pid=\d+(?:, ip=[^)]*)?\)\s*)?\[(?P<tag>prompt|response|ground_truth|score)\] ?(?P<text>.*)$")
_PREFIX = re.compile(r"^\s*\(\w+ pid=\d+(?:, ip=[^)]*)?\) ?")
MAX_SAMPLES = 64
MAX_RESPONSE_CHARS = 64 << 10


@dataclass(frozen=True)
class PrintedSample:
    prompt: str
    response: str
    line_no: int  # the `[response]` line's number in the text (1-based)


def printed_samples(text: str) -> Iterator[PrintedSample]:
    """The `[prompt]` / `[response]` pairs of a console's text, in order."""
    if "[response]" not in text:
        return
    prompt = ""
    current: str | None = None
    parts: list[str] = []
    at = count = 0
    for n, line in enumerate(text.splitlines(), 1):
        m = _TAG.match(line)
        if m is None:
            if current in ("prompt", "response") and sum(map(len, parts)) < MAX_RESPONSE_CHARS:
                parts.append(_PREFIX.sub("", line, count=1))
            continue
        if current == "response":
            yield PrintedSample(prompt, "\n".join(parts), at)
            count += 1
            if count >= MAX_SAMPLES:
                return
        elif current == "prompt":
            prompt = "\n".join(parts)
        current, parts = m["tag"], [m["text"]]
        if current == "response":
            at = n
    if current == "response":
        yield PrintedSample(prompt, "\n".join(parts), at)
