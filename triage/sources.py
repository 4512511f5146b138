"""Where a run comes from: a directory (path or run-id under the runs root) or a Ray job."""

from __future__ import annotations

import re

from triage.run import Run, open_run

RAY_SUBMISSION = re.compile(r"^(?:ray:)(?P<id>.+)$|^(?P<sub>raysubmit_[A-Za-z0-9]+)$")


def open_any_run(ref: str, runs_root: str | None = None, ray_address: str | None = None) -> Run:
    m = RAY_SUBMISSION.match(ref)
    if m:
        from triage.ray.source import open_ray_run

        return open_ray_run(m.group("id") or m.group("sub"), address=ray_address)
    return open_run(ref, runs_root)
