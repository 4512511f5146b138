"""One large log scanned in parts at once, with the answer of a single pass.

The scan of a multi-gigabyte driver log is bound by one core: the marker search,
the newline count and the parsing of the marked lines all run in one thread. Here
the file is cut at line ends into parts; this process scans the first part while a
worker process (a fresh interpreter, `python -m triage.formats.log_parts`: no fork
inside a service's or a Ray worker's process, which the earlier notes found fragile)
scans each later part from a blank state. Each worker's index is then joined after
what came before it, its line numbers and orders shifted, as if one pass had read on.

A part scanned from a blank state equals the same lines read after the earlier
parts only when nothing was left open at the cut. When something was (a traceback
whose end comes after the cut, an arguments block or a continued command line, the
head sample still being taken), or when a part's choices depended on what came
before (which training command is kept, which timers fit under MAX_TIMERS, numbering
of records that carry no step), that part's result is dropped and this process reads
the part itself, on from the state it is in. The same happens when a worker cannot
start or fails. Either way the index is the one `_FileScan.run` builds.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from triage import safe_io
from triage.formats.log_index import LogIndex
from triage.formats.notebook_stream import is_notebook_stream
from triage.formats.slime_log import (
    MAX_LINE_BYTES,
    MAX_TIMERS,
    MAX_UNPARSED_SAMPLES,
    SNIFF_BYTES,
    TimerStats,
    _FileScan,
    _HeadTail,
    _Index,
    _NeedleFinder,
    _NEEDLES,
)

__all__ = ["scan_file", "PARALLEL_MIN_BYTES", "SCAN_PARTS"]

# Below this a file is read in one pass: the figure of the issue that asked for parts
# ("only for large files, e.g. > 256 MB"); a part is then at least 0.6 s of scanning,
# against a worker's start of 0.15 s (WORKER_START_S).
PARALLEL_MIN_BYTES = 256 << 20
# Halves: the scan's machine in benchmarks/bench_ingest.py has 2 cores, and each part
# after the first costs a process of its own (~40 MB resident, the size of a scan).
SCAN_PARTS = 2
# A worker's start (a fresh interpreter importing this module: 0.15 s measured on the
# benchmark machine) at the scan's pace there (about 200 MB/s a core, bench_ingest.py):
# the first part, read here at once, is made longer by what a worker reads meanwhile.
WORKER_START_S = 0.15
PART_BYTES_PER_S = 200 << 20

T = TypeVar("T")


def scan_file(scan: _FileScan) -> None:
    """`scan.run()`, in parts at once when the file is large enough and plain (not gzip, not sparse)."""
    cuts = _cuts(scan.path)
    if not cuts:
        scan.run()
        return
    automaton = "on" if scan.finder._ac is not None else "off"
    stops = [*cuts[1:], None]
    workers = [_start(scan.path, start, stop, automaton, scan.where) for start, stop in zip(cuts, stops)]
    try:
        scan.out.files.append(scan.where)
        with scan._open() as fh:
            scan.read_to(fh, cuts[0])  # the first part, here, while the workers read the others
            for start, stop, worker in zip(cuts, stops, workers):
                part = _result(worker)
                if part is not None and _joinable(scan, part):
                    _join(scan, part)
                    continue
                fh.seek(start)  # read the part here, on from the state the scan is in
                scan.read_to(fh, stop)
        scan.end_of_file()
        scan.account()
    finally:
        for worker in workers:
            if worker is not None and worker.poll() is None:
                worker.kill()
                worker.wait()


def _cuts(path: Path) -> list[int]:
    """Where the parts after the first start (each right after a newline); [] for one pass."""
    if SCAN_PARTS < 2 or not sys.executable or _usable_cpus() < 2:
        return []
    try:
        with safe_io.open_regular(path, buffering=0) as fh:  # (a FIFO or device is refused, never waited on)
            fd = fh.fileno()
            size = os.fstat(fd).st_size
            head = os.pread(fd, 32, 0)
            if size < PARALLEL_MIN_BYTES or head[:2] == b"\x1f\x8b" or is_notebook_stream(head) or _sparse(fd, size):
                return []  # small; gzip or a notebook's records (no offset to start a part at); sparse
            # this process starts at once, a worker WORKER_START_S later: the first part is longer by
            # half of what a worker reads meanwhile (halves: both end together)
            head_start = min(int(WORKER_START_S * PART_BYTES_PER_S) // 2, size // (2 * SCAN_PARTS))
            cuts: list[int] = []
            for i in range(1, SCAN_PARTS):
                at = max(size * i // SCAN_PARTS + head_start, cuts[-1] if cuts else 0)
                nl = os.pread(fd, MAX_LINE_BYTES + 1, at).find(b"\n")
                if nl < 0:
                    return []  # a line too long to cut after: one pass
                cut = at + nl + 1
                if cut >= size or (cuts and cut <= cuts[-1]):
                    return []
                cuts.append(cut)
    except OSError:
        return []  # the one pass says what is wrong with the file
    return cuts


def _usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _sparse(fd: int, size: int) -> bool:
    end = safe_io.written_end(fd)
    return end is not None and end < size


def _start(path: Path, start: int, stop: int | None, automaton: str, where: str | None = None) -> subprocess.Popen[bytes] | None:
    root = str(Path(__file__).resolve().parent.parent.parent)  # the directory holding `triage`
    env = dict(os.environ)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    # Nothing of the caller's working directory (which may be a run's) is importable: the
    # worker starts in the triage's own directory with the safe path (`-P`, Python 3.11).
    env["PYTHONSAFEPATH"] = "1"
    cmd = [sys.executable, "-P", "-m", "triage.formats.log_parts", os.path.abspath(path), str(start),
           "" if stop is None else str(stop), automaton, str(path) if where is None else where]
    try:
        return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                env=env, close_fds=True, cwd=root)
    except OSError:
        return None


def _result(worker: subprocess.Popen[bytes] | None) -> dict | None:
    """A worker's part, or None when it failed (the part is then read here)."""
    if worker is None:
        return None
    out, _ = worker.communicate()
    if worker.returncode != 0 or not out:
        return None
    try:
        # the output of the worker this process started, not data from the log's author
        part = pickle.loads(out)
    except Exception:  # noqa: BLE001 - any broken output means: read the part here
        return None
    return part if isinstance(part, dict) and isinstance(part.get("index"), _Index) else None


# -- a worker ---------------------------------------------------------------------------


def scan_part(path: Path, start: int, stop: int | None, use_automaton: bool | None, where: str | None = None) -> dict:
    """One part of a file from a blank state: what `_join` needs to put it after the parts before.
    `where` is the file's name as the caller's index gives it (the worker opens it by `path`)."""
    index = _Index()
    index.timer_elapsed = {}
    scan = _FileScan(path, index, _NeedleFinder(_NEEDLES, use_automaton))
    if where is not None:
        scan.where = where
    scan.head_left = 0  # the head sample and the binary check are the first part's
    scan.sniff = False
    with scan._open() as fh:
        fh.seek(start)
        scan.read_to(fh, stop)
    return {  # the end of the file (open tracebacks, the tail sample) is settled after the join
        "index": index, "lines": scan.lines,
        "grammar_counts": scan.grammar_counts, "tail_sample": scan.tail_sample,
        "tracebacks": scan.tracebacks, "walk": scan.walk, "walk_source": scan.walk_source,
        "walk_budget": scan.walk_budget, "arguments": scan.arguments, "command_parts": scan.command_parts,
        "walk_head": scan.walk_head,
        # a record held while the lines it may go on in are read (a wrapped verl step line, a Megatron record
        # broken after its bars), left open at the part's end
        "wrap": (scan.walk_record, scan.walk_message, scan.wrap_mode),
        "nemo": (scan.nemo_step, scan.nemo_at, scan.nemo_values, scan.nemo_orphans),
    }


def _main(argv: list[str]) -> int:
    path, start, stop, automaton, where = argv
    part = scan_part(Path(path), int(start), int(stop) if stop else None, automaton == "on", where)
    sys.stdout.buffer.write(pickle.dumps(part, protocol=pickle.HIGHEST_PROTOCOL))
    return 0


# -- joining a part after the scan so far ------------------------------------------------


def _joinable(scan: _FileScan, part: dict) -> bool:
    """Whether the part, read from a blank state, reads the same after what the scan holds now."""
    ix, theirs = scan.ix, part["index"]
    if scan.tracebacks or scan.walk is not None or scan.head_left > 0 or scan.hf_pending is not None \
            or scan.lines in scan.ignored_at.values():
        return False  # something open at the cut that the part's lines would have continued
    if theirs.saw_command and scan.out.command_line is not None:
        return False
    # a NeMo-RL step block open at the cut, or results the part read before its first step header (the step
    # is the scan's last header's)
    if scan.nemo_values or (part["nemo"][3] and scan.nemo_step is not None):
        return False
    if theirs.timers_refused or len(scan.out.timers.keys() | theirs.out.timers.keys()) > MAX_TIMERS:
        return False
    for kind, n in theirs.ordinals.items():  # records numbered in order: shifted, unless mixed with stepped ones
        if ix.ordinals.get(kind) and theirs.out.metrics.count(kind) != n:
            return False
    return True


def _join(scan: _FileScan, part: dict) -> None:
    ix, theirs = scan.ix, part["index"]
    out, other = scan.out, theirs.out
    lines = scan.lines  # the part's line numbers count from its first line

    def line_at(item):  # a LogLine, Traceback or PlacementGroupWait of the part, renumbered
        if hasattr(item, "line_no"):
            return dataclasses.replace(item, line_no=item.line_no + lines)
        return dataclasses.replace(item, line=line_at(item.line))

    seq = ix.seq
    _extend(ix.errors, theirs.errors, line_at)
    _extend(ix.finish, theirs.finish, lambda item: (item[0], item[1] + lines, item[2]))
    _extend(ix.tracebacks, theirs.tracebacks, line_at)
    for tag, kept in theirs.notable.items():
        _extend(ix.notable[tag], kept, lambda item: (item[0] + seq, item[1], item[2] + lines, *item[3:]))
    ix.seq += theirs.seq
    ix.waits.extend(line_at(w) for w in theirs.waits)
    _join_timers(ix, theirs)
    for votes, more in ((ix.votes, theirs.votes), (ix.foreign_votes, theirs.foreign_votes)):
        for key, n in more.items():
            votes[key] = votes.get(key, 0) + n
    shift = {kind: ix.ordinals.get(kind, 0) for kind in theirs.ordinals}
    for kind, n in theirs.ordinals.items():
        ix.ordinals[kind] = ix.ordinals.get(kind, 0) + n
    out.metrics.merge(other.metrics, shift, drain=True)
    if theirs.saw_command:  # (the scan had kept none: `_joinable`)
        out.command_line = other.command_line
        ix.command_is_train = theirs.command_is_train
    _join_index(out, other)

    scan.lines += part["lines"]
    for grammar, n in part["grammar_counts"].items():
        scan.grammar_counts[grammar] = scan.grammar_counts.get(grammar, 0) + n
    tail = part["tail_sample"]
    scan.tail_sample = tail if len(tail) >= SNIFF_BYTES else (scan.tail_sample + tail)[-SNIFF_BYTES:]
    # what the part left open at its own end (a later part's cut), renumbered
    for key, tb in part["tracebacks"].items():
        tb.line_no += lines
        scan.tracebacks[key] = tb
    scan.walk, scan.walk_source, scan.walk_budget = part["walk"], part["walk_source"], part["walk_budget"]
    scan.arguments, scan.command_parts = part["arguments"], part["command_parts"]
    head = part["walk_head"]
    scan.walk_head = None if head is None else (head[0] + lines, head[1], head[2])
    scan.walk_record, scan.walk_message, scan.wrap_mode = part["wrap"]
    step, at, values, orphans = part["nemo"]
    scan.nemo_orphans += orphans
    if step is not None:  # the part's last step header, and the block it left open at its end
        scan.nemo_step, scan.nemo_at, scan.nemo_values = step, at + lines if at >= 0 else -1, values


def _join_index(out: LogIndex, other: LogIndex) -> None:
    out.bytes += other.bytes
    if other.arguments is not None:
        out.arguments = other.arguments  # the last block wins
    for ts in (other.first_timestamp, other.last_timestamp):
        if ts is not None:
            if out.first_timestamp is None or ts < out.first_timestamp:
                out.first_timestamp = ts
            if out.last_timestamp is None or ts > out.last_timestamp:
                out.last_timestamp = ts
    out.truncated_tail = out.truncated_tail or other.truncated_tail
    out.notebook_output.extend(f for f in other.notebook_output if f not in out.notebook_output)
    out.skipped_long_lines += other.skipped_long_lines
    out.unparsed_metric_lines += other.unparsed_metric_lines
    out.unparsed_samples.extend(other.unparsed_samples[: MAX_UNPARSED_SAMPLES - len(out.unparsed_samples)])


def _join_timers(ix: _Index, theirs: _Index) -> None:
    """Timer counts and sums as one pass would have made them.

    An open count runs c -> max(c - 1, 0) on an end and c + 1 on a start; a part read
    from 0 that met `a` ends with nothing open and finished with `b` open maps any count
    c at its start to max(c - a, 0) + b. The sums are added on one elapsed time at a
    time, in order, so that the floats come out bit for bit as one pass adds them.
    """
    for name, stats in theirs.out.timers.items():
        mine = ix.out.timers.get(name)
        if mine is None:
            ix.out.timers[name] = TimerStats(stats.count, stats.total_s, stats.max_s, stats.last_s)
            ix.timer_open[name] = theirs.timer_open[name]
            continue
        ix.timer_open[name] = max(ix.timer_open[name] - theirs.timer_unmatched.get(name, 0), 0) \
            + theirs.timer_open[name]
        for elapsed in (theirs.timer_elapsed or {}).get(name, ()):
            mine.count += 1
            mine.total_s += elapsed
            mine.last_s = elapsed
            if elapsed > mine.max_s:
                mine.max_s = elapsed


def _extend(mine: _HeadTail[T], theirs: _HeadTail[T], shift: Callable[[T], T]) -> None:
    """`mine` as if each item `theirs` saw had been added to it, in order.

    `theirs.head` holds its first items and `theirs.tail` its last; what it dropped
    between them would have been dropped here too.
    """
    items = [shift(item) for item in theirs.head]
    room = mine.half - len(mine.head)
    if room > 0:  # then mine.tail is still empty
        mine.head.extend(items[:room])
        items = items[room:]
    mine.tail.extend(items)
    mine.tail.extend(shift(item) for item in theirs.tail)
    mine.seen += theirs.seen


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
