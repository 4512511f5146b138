"""The job log, line for line as a slime job under Ray writes it.

slime configures Python logging with `[%(asctime)s] %(filename)s:%(lineno)d - %(message)s`
(`datefmt="%Y-%m-%d %H:%M:%S"`); Megatron prints its own lines with `print()`; Ray
prefixes what each actor writes with `(ActorClass pid=N) `. Each kind of line is
written with the source file and line slime emits it from (slime HEAD), so the log
reads as slime's does. Several processes (TP / PP ranks) append to one file; each line
is one `write` on an O_APPEND handle, so lines never interleave mid-line.
"""

from __future__ import annotations

import os
import sys
import time
import zlib
from typing import TextIO

TRAIN_ACTOR = "MegatronTrainRayActor"
ROLLOUT_MANAGER = "RolloutManager"
SGLANG_ENGINE = "SGLangEngine"

# Where slime emits each kind of line: (file name, line number).
SITES: dict[str, tuple[str, int]] = {
    "step": ("model.py", 918),
    "train_metric": ("train_metric_utils.py", 135),
    "train_perf": ("train_metric_utils.py", 401),
    "rollout_perf": ("rollout_metrics.py", 268),
    "finish_rollout": ("sglang_rollout.py", 446),
    "save_rollout": ("rollout_data_utils.py", 145),
    "save_train": ("train_data_utils.py", 240),
    "timer_start": ("timer.py", 24),
    "timer_end": ("timer.py", 32),
    "placement_wait": ("placement_group.py", 64),
    "placement_create": ("placement_group.py", 125),
    "args": ("arguments.py", 1780),
    "load_hf": ("checkpoint.py", 128),
    "rollout_import": ("rollout.py", 396),
    "engine_launch": ("sglang_engine.py", 173),
    "engine_shutdown": ("sglang_engine.py", 300),
    "ref_update": ("actor.py", 561),
    "reset_optimizer": ("model.py", 782),
}


class SlimeLog:
    """Writes driver and actor lines to a file (or stdout) in slime's formats."""

    def __init__(self, path: str | os.PathLike | None = None, pids: dict[str, int] | None = None,
                 clock=time.time) -> None:
        self.path = path
        self._fh: TextIO | None = None
        if path is not None:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            self._fh = open(path, "a", buffering=1)
        self.pids = dict(pids or {})
        self.clock = clock

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def _prefix(self, actor: str | None) -> str:
        if actor is None:
            return ""
        pid = self.pids.get(actor)
        if pid is None:
            pid = self.pids[actor] = 10_000 + zlib.crc32(actor.encode()) % 50_000
        return f"({actor} pid={pid}) "

    def write(self, text: str) -> None:
        stream = self._fh or sys.stdout
        stream.write(text if text.endswith("\n") else text + "\n")
        stream.flush()

    def timestamp(self, at: float | None = None) -> str:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.clock() if at is None else at))

    def info(self, message: str, site: str, actor: str | None = None, at: float | None = None) -> None:
        """A line from slime's logger: `[time] file.py:N - message`."""
        filename, lineno = SITES[site]
        prefix = self._prefix(actor)
        lines = message.split("\n")
        out = [f"{prefix}[{self.timestamp(at)}] {filename}:{lineno} - {lines[0]}"]
        out += [f"{prefix}{rest}" for rest in lines[1:]]
        self.write("\n".join(out))

    def print(self, message: str, actor: str | None = None) -> None:
        """A bare `print()` line (Megatron's), with the Ray actor prefix when printed by an actor."""
        prefix = self._prefix(actor)
        self.write("\n".join(f"{prefix}{line}" for line in message.split("\n")))

    def traceback(self, text: str, actor: str | None = None) -> None:
        self.print(text.rstrip("\n"), actor=actor)


def megatron_arguments_block(args: dict[str, object], title: str = "arguments") -> str:
    """Megatron's `_print_args`: name, dots to column 48, value; sorted case-insensitively."""
    lines = []
    for name, value in args.items():
        dots = "." * (48 - len(name))
        lines.append(f"  {name} {dots} {value}")
    lines.sort(key=lambda s: s.lower())
    return "\n".join(
        [f"------------------------ {title} ------------------------", *lines,
         f"-------------------- end of {title} ---------------------"]
    )
