"""A launch command pasted among log lines, as users put both in one issue or one Slack message.

The log scan keeps a `python … train.py --flag …` line it meets (`LogIndex.command_line`); a
paste also carries the commands people type for the CLIs the frameworks install, which hold
no `python`: `swift rlhf --rlhf_type grpo …` (ms-swift), `megatron rlhf …` (ms-swift's Megatron
backend), `torchrun … train.py …`, `accelerate launch …`, `deepspeed …`, `trl grpo …`,
`axolotl train …`, often behind `VAR=value` assignments, a shell prompt (`$ `) or bash's
`set -x` trace (`+ `), and continued over lines ending in `\\`.

Only a paste-sized log is read for this (`Run.pastes`, shared with the pasted-table reader):
a job's own log prints its command in the scan's form. The text is parsed by `run_args` like
a command file; nothing is run.
"""

from __future__ import annotations

import re
from collections.abc import Iterable


__all__ = ["pasted_command", "pasted_flag_block"]

# a CLI the frameworks install, or a launcher, and what follows it on the line
_LAUNCH = re.compile(
    r"^(?:[$#+>]\s+)?(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)*"
    r"(?P<cmd>(?:swift|megatron)\s+(?:sft|rlhf|pt|infer|export|rollout|sample)\b"
    r"|trl\s+(?:grpo|dpo|sft|kto|rloo|vllm-serve)\b"
    r"|axolotl\s+(?:train|preprocess)\b"
    r"|accelerate\s+launch\b|torchrun\b|deepspeed\b"
    # a flag follows (a package list's `deepspeed   0.15.4` row is not a command), or the line goes on
    r")(?=.*(?:\s--?[A-Za-z]|\\\s*$)).*$"
)
MAX_CONTINUED_LINES = 200  # a launch command continued over more lines than this is not one


def pasted_command(texts: Iterable[str]) -> str | None:
    """The first launch command in the pasted texts, joined over its `\\` lines."""
    for text in texts:
        lines = text.splitlines()
        for i, line in enumerate(lines):
            m = _LAUNCH.match(line.strip())
            if m is None:
                continue
            parts = [m.group(0)]
            j = i
            while parts[-1].rstrip().endswith("\\") and j + 1 < len(lines) and j - i < MAX_CONTINUED_LINES:
                j += 1
                parts[-1] = parts[-1].rstrip()[:-1]
                parts.append(lines[j].strip())
            return " ".join(p.strip() for p in parts if p.strip())
    return None


# a line that is one flag and its value, as a launch script's argument list lists them
_FLAG_LINE = re.compile(r"^\s*--[A-Za-z][\w-]*(?:[ =]\S.*)?\s*\\?\s*$")
MIN_FLAG_LINES = 3  # fewer are a flag mentioned in prose, not an argument list


def pasted_flag_block(texts: Iterable[str]) -> str | None:
    """The first run of flag lines in the pasted texts (`--lr 4.2e-4` one per line, with no command
    above them: NVIDIA/Megatron-LM#1469 pasted its arguments so), joined as bare flags."""
    for text in texts:
        run: list[str] = []
        for line in [*text.splitlines(), ""]:
            if _FLAG_LINE.match(line):
                run.append(line.strip().rstrip("\\").strip())
                continue
            if len(run) >= MIN_FLAG_LINES:
                return " ".join(run)
            run = []
    return None
