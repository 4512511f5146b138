"""slime's `Timer`: named wall-clock timers that log `Timer {name} start` / `end (elapsed: Xs)`.

Accumulated times feed the trainer's `perf N: {'perf/<name>_time': ...}` line and are
reset after it, as in `slime/observability/timer.py`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from triage.testbed.slime_log import TRAIN_ACTOR, SlimeLog


class Timer:
    def __init__(self, log: SlimeLog | None, enabled: bool = True, actor: str = TRAIN_ACTOR) -> None:
        self.log = log
        self.enabled = enabled  # slime logs timers on global rank 0 only
        self.actor = actor
        self.timers: dict[str, float] = {}
        self.start_time: dict[str, float] = {}
        self.seq_lens: list[int] = []

    def start(self, name: str) -> None:
        if name in self.start_time:
            raise AssertionError(f"Timer {name} already started.")
        self.start_time[name] = time.time()
        if self.enabled and self.log is not None:
            self.log.info(f"Timer {name} start", "timer_start", actor=self.actor)

    def end(self, name: str) -> None:
        if name not in self.start_time:
            raise AssertionError(f"Timer {name} not started.")
        elapsed = time.time() - self.start_time.pop(name)
        self.timers[name] = self.timers.get(name, 0.0) + elapsed
        if self.enabled and self.log is not None:
            self.log.info(f"Timer {name} end (elapsed: {elapsed:.1f}s)", "timer_end", actor=self.actor)

    def running(self, name: str) -> bool:
        return name in self.start_time

    @contextmanager
    def context(self, name: str) -> Iterator[None]:
        self.start(name)
        try:
            yield
        finally:
            self.end(name)

    @contextmanager
    def inverse(self, name: str) -> Iterator[None]:
        """slime's `inverse_timer`: stop `name` while the block runs, restart it after."""
        if self.running(name):
            self.end(name)
        try:
            yield
        finally:
            self.start(name)

    def log_dict(self) -> dict[str, float]:
        return dict(self.timers)

    def reset(self) -> None:
        self.timers = {}
        self.seq_lens = []
