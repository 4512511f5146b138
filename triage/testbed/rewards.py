"""Reward functions, with slime's custom reward signature: `async def rm(args, sample, **kwargs)`.

`--custom-rm-path triage.testbed.rewards.addition_rm` scores the toy task against the
sample's label. `metadata_answer_rm` is the kind of reward function a user writes for
a dataset that carries the answer under `metadata.answer`: pointed at prompt data that
does not have that field, it can never find the answer and scores everything 0.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
from typing import Any

from triage.testbed import task


async def addition_rm(args: Any, sample: Any, **kwargs: Any) -> float:
    return task.score(sample.response, sample.label)


async def metadata_answer_rm(args: Any, sample: Any, **kwargs: Any) -> float:
    try:
        answer = sample.metadata["answer"]
    except (KeyError, TypeError):
        return 0.0
    return task.score(sample.response, answer)


def load_function(path: str):
    """`package.module.function` -> the function (slime's `load_function`)."""
    module, _, name = path.rpartition(".")
    if not module:
        raise ValueError(f"reward function path {path!r} is not module.function")
    return getattr(importlib.import_module(module), name)


def reward_function(args: Any):
    if args.custom_rm_path:
        return load_function(args.custom_rm_path)
    if args.rm_type in (None, "", "math", "deepscaler", "addition"):
        return addition_rm
    raise ValueError(f"unknown --rm-type {args.rm_type!r}")


def compute_rewards(fn, args: Any, samples: list[Any]) -> list[Any]:
    """Score samples with a sync or async reward function, all in one event loop."""

    async def run_all():
        outs = []
        for sample in samples:
            out = fn(args, sample)
            outs.append(await out if inspect.isawaitable(out) else out)
        return outs

    return asyncio.run(run_all())
