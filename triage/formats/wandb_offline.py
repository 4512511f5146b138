"""W&B runs written offline (`wandb/offline-run-*/run-*.wandb`): their logged history, into a MetricTable.

verl (`trainer.logger=['wandb']`), OpenRLHF (`--use_wandb`), slime (`--use-wandb`) and
the HF Trainer (`report_to='wandb'`, tags under `train/`) log there; with `WANDB_MODE=offline`
the run stays in the run directory as a `.wandb` transaction log.

The file is read by the wandb package's own reader, never by guessing its format: the
`wandb-core` program installed with the package (`wandb leet inspect --json`), which
prints each record as JSON. It is started from the installed package only, with
observability off and `WANDB_MODE=offline` (it reads one local file, nothing else), and
its output is streamed: memory stays flat whatever the run's length.

A `.wandb` file whose records fail their checksum, or that is not a W&B file at all,
stops the triage with a one-line error naming it. A file the reader finds merely
incomplete (it ends at a record boundary: a job killed between two writes) is read as far
as it goes; one cut inside a record fails that record's checksum and is refused like any
corruption. An empty file (killed before its first record) holds no metrics.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Iterable
from importlib.util import find_spec
from pathlib import Path

from triage.errors import CorruptArtifact, TriageError
from triage.formats.metric_table import MetricTable

KIND = "wandb"
MAX_RUNS = 50
READ_TIMEOUT_S = 120
MAX_RECORD_CHARS = 4 << 20  # a record line longer than this is not a metric row


class WandbUnavailable(TriageError):
    """The wandb package (its wandb-core reader) is not installed here."""


def _core_path() -> Path:
    spec = find_spec("wandb")
    if spec is None or not spec.origin:
        raise WandbUnavailable("the wandb package is not installed: cannot read W&B offline runs")
    core = Path(spec.origin).parent / "bin" / "wandb-core"
    if not core.is_file():
        raise WandbUnavailable(f"the wandb package has no wandb-core reader at {core}")
    return core


def _history_row(record: dict) -> tuple[int, dict[str, object]] | None:
    hist = record.get("history")
    if not isinstance(hist, dict):
        return None
    item = hist.get("item")
    if not isinstance(item, dict):
        return None
    step = None
    s = hist.get("step")
    if isinstance(s, dict) and isinstance(s.get("num"), int):
        step = s["num"]
    elif isinstance(item.get("_step"), int):
        step = item["_step"]
    if step is None:
        return None
    row: dict[str, object] = {}
    for key, value in item.items():
        if key.startswith("_"):
            continue
        if isinstance(value, bool):
            continue
        if isinstance(value, (int, float)):
            row[key] = float(value)
        elif isinstance(value, str) and value in ("NaN", "Infinity", "-Infinity"):
            row[key] = float(value.replace("Infinity", "inf"))
    return step, row


def read_wandb_file(path: Path, table: MetricTable) -> int:
    """Add one `.wandb` file's history rows to `table` (kind "wandb", indexed by step); how many rows."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise CorruptArtifact(path, f"cannot read W&B run file: {exc.strerror}") from None
    if size == 0:
        return 0  # killed before its first record: nothing logged
    core = _core_path()
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env.update(WANDB_MODE="offline", WANDB_SILENT="true")
    with tempfile.TemporaryDirectory(prefix="triage-wandb-") as scratch:
        env["HOME"] = scratch  # the reader's own config file lives in a scratch home
        env["XDG_CONFIG_HOME"] = scratch
        cmd = [str(core), "leet", "inspect", "--no-observability", "--json", "--run-file", str(path), scratch]
        try:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                    env=env, cwd=scratch, text=True, errors="replace")
        except OSError as exc:
            raise WandbUnavailable(f"cannot start the wandb reader {core}: {exc.strerror}") from None
        rows = 0
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                if len(line) > MAX_RECORD_CHARS or '"history"' not in line:
                    continue
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                got = _history_row(record) if isinstance(record, dict) else None
                if got is None:
                    continue
                step, row = got
                if row:
                    table.add(KIND, step, row)
                    rows += 1
            _, err = proc.communicate(timeout=READ_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise CorruptArtifact(path, f"the wandb reader did not finish within {READ_TIMEOUT_S} s") from None
    err = (err or "").strip()
    if proc.returncode != 0 or "corrupt" in err or "bad header" in err:
        reason = next((ln for ln in err.splitlines() if ln.strip()), f"exit code {proc.returncode}")
        reason = reason.removeprefix("Error: ").removeprefix("wandb leet inspect: ")
        raise CorruptArtifact(path, f"not a readable W&B run file: {reason[:300]}")
    return rows


def read_wandb_runs(paths: Iterable[Path]) -> MetricTable:
    """The history of every `.wandb` file given (or found in the offline-run directories given)."""
    files: list[Path] = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            files.extend(sorted(p.glob("*.wandb")))
        else:
            files.append(p)
    table = MetricTable()
    for f in files[:MAX_RUNS]:
        read_wandb_file(f, table)
    return table
