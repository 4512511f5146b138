"""The last good run of the same job: the baseline a failed run is compared with.

Looked for among the runs under the runs roots (`--runs-root`, `$TRIAGE_RUNS_ROOT`) and
in the store's history of triaged runs. A run is good when its manifest says it
`succeeded`, or its latest triage in the store was `healthy`. Of the good runs of the
same job (`identity.same_job`), the newest wins: by its directory's modification time
under a runs root, by the time of its triage in the store.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from triage.errors import TriageError
from triage.memory.identity import job_identity, same_job

if TYPE_CHECKING:
    from triage.memory.store import MemoryStore
    from triage.run.run import Run

# The newest directories under a runs root looked at; a runs root of thousands of runs is not opened whole.
MAX_SCANNED = 40


@dataclass
class Baseline:
    run: Run
    found_by: str  # "runs root" | "store"
    status: str  # why it is good
    when: float


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def find_baseline(run: Run, runs_roots: list[Path], store: MemoryStore | None) -> Baseline | None:
    from triage.run import open_run

    identity = job_identity(run)
    if not any(k in identity for k in ("name", "entrypoint", "model")):
        return None
    here = run.root.resolve()
    healthy = {}
    if store is not None:
        for h in store.healthy_runs():
            healthy.setdefault(str(Path(h["run_dir"]).resolve()), h)
    found: list[Baseline] = []
    for root in runs_roots:
        try:
            dirs = [d for d in root.iterdir() if d.is_dir() and not d.is_symlink()]
        except OSError:
            continue
        dirs.sort(key=_mtime, reverse=True)
        for d in dirs[:MAX_SCANNED]:
            if d.resolve() == here:
                continue
            try:
                other = open_run(str(d))
            except TriageError:
                continue
            if other.status == "succeeded":
                status = "its manifest says it succeeded"
            elif str(d.resolve()) in healthy:
                from triage.memory.store import iso

                status = f"triaged healthy on {iso(healthy[str(d.resolve())]['at'])[:10]}"
            else:
                continue
            if same_job(identity, job_identity(other)):
                other.ref = d.name  # its run-id under the runs root
                found.append(Baseline(other, "runs root", status, _mtime(d)))
                break  # newest first: the first good one is the last good run in this root
    seen = {str(b.run.root.resolve()) for b in found}
    for path, h in healthy.items():
        if path == str(here) or path in seen or not os.path.isdir(path):
            continue
        if not same_job(identity, h["identity"]):
            continue
        try:
            other = open_run(path)
        except TriageError:
            continue
        from triage.memory.store import iso

        other.ref = h["run_ref"]
        found.append(Baseline(other, "store", f"triaged healthy on {iso(h['at'])[:10]}", h["at"]))
        break  # healthy_runs is newest first
    if not found:
        return None
    return max(found, key=lambda b: b.when)
