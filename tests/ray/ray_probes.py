"""Test-only probes that run on Ray workers: they sleep, record where and when they ran, and can be killed.

Each writes marker files under `params.markers`: `<tag>.<n>.start` (its pid, start time
and the Ray resources it was given) when attempt n starts, `<tag>.<n>.done` when it
finishes, so a test can see what ran, where, for how long, and kill it mid-run.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from triage.probe import Cost, Probe


class MarkerParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    tag: str
    markers: str
    seconds: float = 0.0
    sleep_attempts: int = 99  # attempts after this one return at once


def _assigned_resources() -> dict[str, float]:
    try:
        import ray

        return {k: float(v) for k, v in ray.get_runtime_context().get_assigned_resources().items()}
    except Exception:  # noqa: BLE001 - in-process: no Ray
        return {}


class _Marking(Probe):
    Params = MarkerParams

    def examine(self, run):
        p: MarkerParams = self.params  # type: ignore[assignment]
        d = Path(p.markers)
        attempt = len(list(d.glob(f"{p.tag}.*.start"))) + 1
        started = time.time()
        (d / f"{p.tag}.{attempt}.start").write_text(json.dumps(
            {"pid": os.getpid(), "at": started, "resources": _assigned_resources()}))
        if attempt <= p.sleep_attempts:
            time.sleep(p.seconds)
        (d / f"{p.tag}.{attempt}.done").write_text(json.dumps({"at": time.time()}))
        return self.observe(self.outcomes[0], f"{p.tag} ran (attempt {attempt})", confidence=0.9,
                            attempt=attempt, pid=os.getpid(), resources=_assigned_resources())


class Sleeper(_Marking):
    """Sleeps, then says done."""

    name = "sleeper"
    outcomes = ("done", "never")


class Quick(_Marking):
    """Answers at once."""

    name = "quick"
    outcomes = ("yes", "no")


class CpuHeavy(_Marking):
    """A CPU-cost probe: dearer than a static one."""

    name = "cpu_heavy"
    outcomes = ("done", "never")
    cost = Cost.CPU


class GpuOnly(_Marking):
    """Needs a GPU."""

    name = "gpu_only"
    outcomes = ("ok", "bad")
    cost = Cost.GPU


PROBES = {cls.name: cls for cls in (Sleeper, Quick, CpuHeavy, GpuOnly)}
