"""PyTorch flight-recorder dumps (one per rank) and where the ranks' collectives part ways.

The recorder (`TORCH_NCCL_TRACE_BUFFER_SIZE` / `TORCH_FR_BUFFER_SIZE`, dumped on a
watchdog timeout with `TORCH_NCCL_DUMP_ON_TIMEOUT=1`, or by `_dump_nccl_trace` /
`_dump_fr_trace`) writes, per rank, a pickle (or JSON) of plain containers::

    {"version": "2.10", "comm_lib_version": ..., 
     "pg_config": {pg_name: {"name", "desc", "ranks": "[0, 1, ...]"}},
     "pg_status": {str(pg_id): {"last_enqueued_collective", "last_started_collective", "last_completed_collective"}},
     "entries": [{"record_id", "pg_id", "process_group": (pg_name, desc), "collective_seq_id", "p2p_seq_id",
                  "is_p2p", "op_id", "profiling_name": "nccl:all_reduce", "input_sizes", "input_dtypes",
                  "output_sizes", "output_dtypes", "state": "scheduled"|"started"|"completed",
                  "time_created_ns", "retired", "timeout_ms", "frames": [{"name", "filename", "line"}]}]}

The file carries no rank: PyTorch's own analyzer (`torchfrtrace`) takes it from the
trailing digits of the file name (`nccl_trace_rank_3`), and so does this reader.
Pickled dumps need no classes at all, so they are read with an unpickler that
refuses every global: a dump that names one is refused, never executed.
"""

from __future__ import annotations

import io
import json
import pickle
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from triage import safe_io
from triage.errors import CorruptArtifact, UnsafeArtifact

MAX_DUMP_BYTES = 1024 * 1024 * 1024
_TRAILING_RANK = re.compile(r"(\d+)(?:\.(?:pkl|pickle|json|bin))?$")
# Collectives whose inputs must have the same shape and dtype on every rank.
SAME_SHAPE_OPS = {
    "all_reduce", "allreduce", "broadcast", "_broadcast_oop", "reduce", "_reduce_oop", "all_gather",
    "_all_gather_base", "all_gather_into_tensor", "reduce_scatter", "_reduce_scatter_base",
    "reduce_scatter_tensor", "all_reduce_barrier", "barrier",
}


class _NoGlobals(pickle.Unpickler):
    """Plain dicts, lists, tuples, strings and numbers need no global; anything else is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"global {module}.{name}")


@dataclass(frozen=True)
class FREntry:
    record_id: int
    pg_id: str
    pg_name: str
    pg_desc: str
    collective_seq_id: int
    p2p_seq_id: int
    is_p2p: bool
    profiling_name: str
    state: str
    input_sizes: tuple
    input_dtypes: tuple
    output_sizes: tuple
    time_created_ns: int
    retired: bool
    frames: tuple[str, ...]  # "fn file:line", innermost first, at most 8

    @property
    def op(self) -> str:
        """`nccl:all_reduce` -> `all_reduce`; `nccl:send 0->1` -> `send`."""
        name = self.profiling_name.split(":", 1)[-1]
        return name.split(" ", 1)[0]


@dataclass
class RankTrace:
    rank: int
    path: Path
    version: str | None
    pg_config: dict[str, dict[str, Any]]
    pg_status: dict[str, dict[str, int | None]]
    entries: list[FREntry]

    def groups(self) -> list[str]:
        return sorted({e.pg_name for e in self.entries})


def _int(value: Any, default: int | None = None) -> int | None:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return default
    return default


def _freeze(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    return value


def _ranks_of(config: dict[str, Any]) -> list[int] | None:
    raw = config.get("ranks")
    if isinstance(raw, (list, tuple)):
        return [r for r in (_int(x) for x in raw) if r is not None]
    if isinstance(raw, str):
        return [int(x) for x in re.findall(r"-?\d+", raw)]
    return None


def _read_raw(path: Path) -> dict[str, Any]:
    try:
        data = safe_io.read_bytes(path, MAX_DUMP_BYTES, "flight-recorder dump")
    except OSError as exc:  # RefusedFile too: not a regular file, outside the run, too large
        raise CorruptArtifact(path, f"cannot read: {exc.strerror or exc}") from None
    if not data:
        raise CorruptArtifact(path, "flight-recorder dump is empty (0 bytes): the rank was killed while dumping")
    if data.lstrip()[:1] == b"{":
        try:
            raw = safe_io.loads_json(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise CorruptArtifact(path, f"flight-recorder JSON dump is malformed: {exc}") from None
    else:
        try:
            raw = _NoGlobals(io.BytesIO(data)).load()
        except pickle.UnpicklingError as exc:
            message = str(exc)
            if message.startswith("global "):
                raise UnsafeArtifact(
                    path,
                    f"the file needs arbitrary code to unpickle ({message[7:]}); "
                    "a flight-recorder dump holds plain containers only",
                ) from None
            raise CorruptArtifact(path, f"not a flight-recorder dump: {message[:200]}") from None
        except (EOFError, ValueError, IndexError, KeyError, TypeError, AttributeError, MemoryError, RecursionError) as exc:
            raise CorruptArtifact(
                path, f"not a flight-recorder dump, or one cut short ({type(exc).__name__})"
            ) from None
    if not isinstance(raw, dict) or "entries" not in raw and "pg_status" not in raw:
        raise CorruptArtifact(path, "not a flight-recorder dump: expected a dict with 'entries' and 'pg_status'")
    return raw


def _entry(raw: dict[str, Any]) -> FREntry:
    group = raw.get("process_group")
    if isinstance(group, (list, tuple)) and group:
        pg_name = str(group[0])
        pg_desc = str(group[1]) if len(group) > 1 else ""
    else:
        pg_name, pg_desc = str(raw.get("pg_id", "?")), ""
    frames = []
    for f in (raw.get("frames") or [])[:8]:
        if isinstance(f, dict):
            frames.append(f"{f.get('name', '?')} {f.get('filename', '?')}:{f.get('line', '?')}")
    return FREntry(
        record_id=_int(raw.get("record_id"), -1) or 0,
        pg_id=str(raw.get("pg_id", "")),
        pg_name=pg_name,
        pg_desc=pg_desc,
        collective_seq_id=_int(raw.get("collective_seq_id"), 0) or 0,
        p2p_seq_id=_int(raw.get("p2p_seq_id"), 0) or 0,
        is_p2p=bool(raw.get("is_p2p", False)),
        profiling_name=str(raw.get("profiling_name", "?")),
        state=str(raw.get("state", "scheduled")),
        input_sizes=_freeze(raw.get("input_sizes") or ()),
        input_dtypes=_freeze(raw.get("input_dtypes") or ()),
        output_sizes=_freeze(raw.get("output_sizes") or ()),
        time_created_ns=_int(raw.get("time_created_ns"), 0) or 0,
        retired=bool(raw.get("retired", False)),
        frames=tuple(frames),
    )


def load_fr_dump(path: str | Path, rank: int | None = None) -> RankTrace:
    p = Path(path)
    if not p.exists():
        raise CorruptArtifact(p, "flight-recorder dump does not exist")
    if not p.is_file():  # e.g. the recorder's trigger pipe (`*.pipe`), which would block a read
        raise CorruptArtifact(p, "not a regular file: expected a flight-recorder dump")
    raw = _read_raw(p)
    if rank is None:
        rank = _int(raw.get("rank"))
    if rank is None:
        m = _TRAILING_RANK.search(p.name)
        if not m:
            raise CorruptArtifact(p, "cannot tell which rank wrote this dump: its name does not end in the rank (nccl_trace_rank_<N>)")
        rank = int(m.group(1))
    entries_raw = raw.get("entries") or []
    if not isinstance(entries_raw, list):
        raise CorruptArtifact(p, "flight-recorder 'entries' is not a list")
    entries = [_entry(e) for e in entries_raw if isinstance(e, dict)]
    pg_config = {str(k): v for k, v in (raw.get("pg_config") or {}).items() if isinstance(v, dict)}
    pg_status: dict[str, dict[str, int | None]] = {}
    for pg_id, status in (raw.get("pg_status") or {}).items():
        if isinstance(status, dict):
            pg_status[str(pg_id)] = {k: _int(v) for k, v in status.items()}
    version = raw.get("version")
    return RankTrace(rank=rank, path=p, version=str(version) if version is not None else None,
                     pg_config=pg_config, pg_status=pg_status, entries=entries)


def load_fr_dumps(paths: Iterable[str | Path]) -> list[RankTrace]:
    """Every rank's dump, ordered by rank; two dumps claiming one rank is an error."""
    traces: dict[int, RankTrace] = {}
    for path in sorted(Path(p) for p in paths):
        trace = load_fr_dump(path)
        if trace.rank in traces:
            raise CorruptArtifact(path, f"a second dump for rank {trace.rank} (first: {traces[trace.rank].path.name})")
        traces[trace.rank] = trace
    return [traces[r] for r in sorted(traces)]


# --- analysis -------------------------------------------------------------------


@dataclass
class Mismatch:
    """The first collective sequence id at which the ranks of one group disagree."""

    pg_name: str
    pg_desc: str
    collective_seq_id: int
    collective: str  # the profiling name most ranks recorded there, e.g. "nccl:all_reduce"
    kind: str  # not_scheduled | op | sizes | dtypes | no_dump
    ranks_behind: list[int]  # ranks that never scheduled it (or left no dump)
    ranks_differing: dict[int, str]  # rank -> what it recorded instead
    time_created_ns: int = 0
    frames: tuple[str, ...] = ()  # where the waiting ranks issued it, innermost first
    behind_at: dict[int, str] = field(default_factory=dict)  # rank behind -> its last collective in this group

    def describe(self) -> str:
        where = f"process group {self.pg_name}" + (f" ({self.pg_desc})" if self.pg_desc else "")
        if self.kind == "not_scheduled":
            return (f"{where}: rank(s) {_ranks(self.ranks_behind)} never reached collective #{self.collective_seq_id} "
                    f"({self.collective}) that the other ranks are in")
        if self.kind == "no_dump":
            return (f"{where}: ranks wait in collective #{self.collective_seq_id} ({self.collective}); "
                    f"rank(s) {_ranks(self.ranks_behind)} left no dump")
        what = {"op": "different collectives", "sizes": "different tensor sizes", "dtypes": "different dtypes"}[self.kind]
        detail = "; ".join(f"rank {r}: {v}" for r, v in sorted(self.ranks_differing.items())[:4])
        return f"{where}: at collective #{self.collective_seq_id} ({self.collective}) ranks issued {what} ({detail})"


@dataclass
class GroupReport:
    pg_name: str
    pg_desc: str
    expected_ranks: list[int]
    dumped_ranks: list[int]
    last_enqueued: dict[int, int | None] = field(default_factory=dict)
    last_started: dict[int, int | None] = field(default_factory=dict)
    last_completed: dict[int, int | None] = field(default_factory=dict)
    mismatch: Mismatch | None = None

    def in_flight(self) -> dict[int, int]:
        """Ranks with a collective enqueued and not completed: rank -> that sequence id."""
        out = {}
        for r, enq in self.last_enqueued.items():
            done = self.last_completed.get(r)
            if enq is not None and enq > (done if done is not None else -1) and enq > 0:
                out[r] = enq
        return out


@dataclass
class FRAnalysis:
    ranks: list[int]
    missing_dumps: list[int]
    groups: list[GroupReport]

    @property
    def mismatches(self) -> list[Mismatch]:
        return [g.mismatch for g in self.groups if g.mismatch is not None]

    @property
    def first_mismatch(self) -> Mismatch | None:
        """The disagreement whose collective was created first: later ones are usually its echo."""
        found = self.mismatches
        if not found:
            return None
        return min(found, key=lambda m: (m.time_created_ns or 1 << 62, m.kind == "no_dump", m.pg_name))

    @property
    def consistent(self) -> bool:
        return not self.mismatches


def _caller(frames: tuple[str, ...]) -> str:
    """The innermost frame outside torch itself: the training code that issued the collective."""
    return next((f for f in frames if "torch/" not in f and "torch\\" not in f), frames[0])


def _ranks(ranks: list[int]) -> str:
    return ", ".join(map(str, ranks[:16])) + (" …" if len(ranks) > 16 else "")


def _status_for(trace: RankTrace, pg_name: str) -> dict[str, int | None] | None:
    pg_ids = {e.pg_id for e in trace.entries if e.pg_name == pg_name}
    for pg_id in pg_ids:
        if pg_id in trace.pg_status:
            return trace.pg_status[pg_id]
    return None


def _members(trace: RankTrace, pg_name: str) -> tuple[int, ...] | None:
    """The group's ranks as this rank's own pg_config records them.

    Two groups can share a name (`split_group`); their member lists tell them apart,
    as PyTorch's analyzer does.
    """
    config = trace.pg_config.get(pg_name)
    ranks = _ranks_of(config) if config is not None else None
    return tuple(sorted(set(ranks))) if ranks else None


def _world(traces: list[RankTrace]) -> list[int]:
    ranks = {t.rank for t in traces}
    for t in traces:
        for config in t.pg_config.values():
            if config.get("desc") == "default_pg":
                ranks.update(_ranks_of(config) or [])
    return sorted(ranks)


def _find_mismatch(pg_name: str, desc: str, per_rank: dict[int, dict[int, FREntry]],
                   expected: list[int], dumped: list[int], enqueued: dict[int, int | None]) -> Mismatch | None:
    present = {r: seqs for r, seqs in per_rank.items() if seqs}
    if not present:
        return None
    # The ring buffer forgets old entries: compare only where every rank still remembers.
    lo = max(min(seqs) for seqs in present.values())
    hi = max(max(seqs) for seqs in present.values())
    for seq in range(lo, hi + 1):
        at = {r: present[r].get(seq) for r in dumped}
        recorded = {r: e for r, e in at.items() if e is not None}
        if not recorded:
            continue
        names = Counter(e.profiling_name for e in recorded.values())
        common_name = names.most_common(1)[0][0]
        created = min(e.time_created_ns for e in recorded.values())
        # A rank whose status counts past `seq` issued it; its buffer merely forgot the entry.
        behind = sorted(r for r, e in at.items() if e is None and (enqueued.get(r) is None or enqueued[r] < seq))
        if behind:
            first = next(iter(recorded.values()))
            behind_at = {}
            for r in behind:
                seqs = present.get(r) or {}
                last = seqs[max(seqs)] if seqs else None
                behind_at[r] = (f"#{last.collective_seq_id} {last.profiling_name} ({last.state})"
                                + (f" at {_caller(last.frames)}" if last.frames else "")) if last else "no collective recorded"
            return Mismatch(pg_name, desc, seq, common_name, "not_scheduled", behind, {}, created,
                            frames=first.frames, behind_at=behind_at)
        if len(names) > 1:
            differing = {r: e.profiling_name for r, e in recorded.items() if e.profiling_name != common_name}
            return Mismatch(pg_name, desc, seq, common_name, "op", [], differing, created)
        op = next(iter(recorded.values())).op
        if op in SAME_SHAPE_OPS:
            for attr, kind in (("input_sizes", "sizes"), ("input_dtypes", "dtypes")):
                values = Counter(getattr(e, attr) for e in recorded.values())
                if len(values) > 1:
                    common = values.most_common(1)[0][0]
                    differing = {r: f"{list(getattr(e, attr))} (others {list(common)})"
                                 for r, e in recorded.items() if getattr(e, attr) != common}
                    return Mismatch(pg_name, desc, seq, common_name, kind, [], differing, created)
    no_dump = sorted(set(expected) - set(dumped))
    if no_dump:
        last = {r: max(seqs) for r, seqs in present.items()}
        waiting = [r for r, s in last.items() if present[r][s].state != "completed" and not present[r][s].retired]
        if waiting:
            seq = max(last[r] for r in waiting)
            entry = next(present[r][seq] for r in waiting if seq in present[r])
            return Mismatch(pg_name, desc, seq, entry.profiling_name, "no_dump", no_dump, {}, entry.time_created_ns)
    return None


def analyse(traces: list[RankTrace]) -> FRAnalysis:
    """Per process group: each rank's last sequence ids, and the first collective where ranks part ways."""
    world = _world(traces)
    dumped_all = sorted(t.rank for t in traces)
    # group key (name, members or None) -> (desc, ranks whose dump has entries in it)
    groups: dict[tuple[str, tuple[int, ...] | None], tuple[str, set[int]]] = {}
    for t in traces:
        for e in t.entries:
            key = (e.pg_name, _members(t, e.pg_name))
            desc, seen = groups.setdefault(key, (e.pg_desc, set()))
            seen.add(t.rank)
    reports: list[GroupReport] = []
    for key in sorted(groups, key=lambda k: (_int(k[0], 1 << 30), k[0], k[1] or ())):
        pg_name, members = key
        desc, seen = groups[key]
        if members is not None:
            expected = list(members)
        elif desc == "default_pg":
            expected = world
        else:
            expected = sorted(seen)
        dumped = sorted(r for r in dumped_all if r in seen or (r in expected and members is not None))
        dumped = [r for r in dumped if _members(_trace_of(traces, r), pg_name) in (members, None)]
        report = GroupReport(pg_name, desc, expected, dumped)
        per_rank: dict[int, dict[int, FREntry]] = {}
        for r in dumped:
            t = _trace_of(traces, r)
            mine = [e for e in t.entries if e.pg_name == pg_name and not e.is_p2p]
            per_rank[r] = {e.collective_seq_id: e for e in mine}
            status = _status_for(t, pg_name)
            completed = [e.collective_seq_id for e in mine if e.state == "completed"]
            started = [e.collective_seq_id for e in mine if e.state in ("started", "completed")]
            if status:
                report.last_enqueued[r] = status.get("last_enqueued_collective")
                report.last_started[r] = status.get("last_started_collective")
                report.last_completed[r] = status.get("last_completed_collective")
            else:
                report.last_enqueued[r] = max(per_rank[r], default=None)
                report.last_started[r] = max(started, default=None)
                report.last_completed[r] = max(completed, default=None)
        report.mismatch = _find_mismatch(pg_name, desc, per_rank, expected, dumped, report.last_enqueued)
        reports.append(report)
    return FRAnalysis(ranks=dumped_all, missing_dumps=sorted(set(world) - set(dumped_all)), groups=reports)


def _trace_of(traces: list[RankTrace], rank: int) -> RankTrace:
    return next(t for t in traces if t.rank == rank)
