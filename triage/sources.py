"""Where a run comes from: a directory (path or run-id under the runs root), a Ray job, a single
file (`triage run job.log`), or a fragment on standard input (`triage run -`)."""

from __future__ import annotations

import os
import re

from triage.run import Run, open_run

RAY_SUBMISSION = re.compile(r"^(?:ray:)(?P<id>.+)$|^(?P<sub>raysubmit_[A-Za-z0-9]+)$")


def open_any_run(ref: str, runs_root: str | None = None, ray_address: str | None = None,
                 allow_paths: list[str] | tuple[str, ...] = ()) -> Run:
    m = RAY_SUBMISSION.match(ref)
    if m:
        from triage.ray.source import open_ray_run

        return open_ray_run(m.group("id") or m.group("sub"), address=ray_address)
    if ref == "-":  # a fragment on standard input
        import sys

        from triage.run.fragment import open_stdin_run

        return open_stdin_run(sys.stdin.buffer)
    if "\x00" not in ref and os.path.isfile(os.path.expanduser(ref)):  # a single log (or metrics / args file)
        from triage.run.fragment import open_file_run
        from triage.run.source import runs_roots

        return open_file_run(ref, runs_roots(runs_root))
    return open_run(ref, runs_root, allow_paths)


def open_text_run(text: str, name: str = "fragment.log") -> Run:
    """A run made of a pasted log fragment or an uploaded log file's text (for the Slack service)."""
    from triage.run.fragment import open_text_run as _open

    return _open(text, name)
