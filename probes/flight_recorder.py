"""Where the ranks of a hung job stopped agreeing, from PyTorch's flight-recorder dumps.

A hang in a collective is one rank (or a few) calling a different collective, or
none, while the others wait: ranks stuck at different collective sequence ids,
or at the same id with different ops or tensor sizes (the axolotl guide's
"NCCL communicator was aborted"). Each rank's dump keeps its last collectives per
process group; lining them up by sequence id names the group, the collective and
the ranks that are behind, as PyTorch's own `torchfrtrace` does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from triage.errors import CorruptArtifact, Unavailable
from triage.finding import Observation
from triage.formats.flight_recorder import FRAnalysis, GroupReport, RankTrace, analyse, load_fr_dump
from triage.probe import Cost, Probe
from triage.run.run import NEEDS_HELP

if TYPE_CHECKING:
    from triage.run.run import Run


def _per_rank(values: dict[int, int | None]) -> dict[str, int | None]:
    return {str(r): v for r, v in sorted(values.items())}


def _group_evidence(g: GroupReport) -> dict[str, Any]:
    done = [v for v in g.last_completed.values() if v is not None]
    return {
        "process_group": g.pg_name,
        "desc": g.pg_desc,
        "ranks": len(g.expected_ranks),
        "last_completed_range": [min(done), max(done)] if done else None,
        "in_flight": {str(r): s for r, s in sorted(g.in_flight().items())},
    }


class FlightRecorder(Probe):
    """Where ranks' collective sequences part ways in the flight-recorder dumps of a hang."""

    name = "flight_recorder"
    outcomes = ("collective_mismatch", "consistent")
    needs = ("flight_recorder",)
    cost = Cost.STATIC

    def examine(self, run: Run) -> Observation:
        paths = list(run.artifacts.flight_recorder)
        if not paths:
            raise Unavailable("flight_recorder", "no flight-recorder dumps in the run", NEEDS_HELP["flight_recorder"])
        traces: dict[int, RankTrace] = {}
        unreadable: list[str] = []
        for path in sorted(paths):
            try:
                trace = load_fr_dump(path)
            except CorruptArtifact as exc:  # one bad dump must not hide what the others say
                unreadable.append(str(exc))
                continue
            if trace.rank in traces:
                unreadable.append(f"{path}: a second dump for rank {trace.rank}, ignored")
                continue
            traces[trace.rank] = trace
        if not traces:
            raise Unavailable(
                "flight_recorder",
                f"no readable flight-recorder dump ({unreadable[0] if unreadable else 'none found'})",
                NEEDS_HELP["flight_recorder"],
            )
        analysis = analyse([traces[r] for r in sorted(traces)])
        return self._observe(analysis, unreadable)

    def _observe(self, analysis: FRAnalysis, unreadable: list[str]) -> Observation:
        common: dict[str, Any] = {
            "dumps": len(analysis.ranks),
            "ranks": analysis.ranks,
            "groups_checked": len(analysis.groups),
        }
        if analysis.missing_dumps:
            common["missing_dumps"] = analysis.missing_dumps
        if unreadable:
            common["unreadable"] = unreadable[:8]
        first = analysis.first_mismatch
        if first is not None:
            group = next(g for g in analysis.groups if g.mismatch is first)
            others = [m.describe() for m in analysis.mismatches if m is not first]
            if others:
                common["other_mismatches"] = others[:5]
            return self.observe(
                "collective_mismatch",
                first.describe(),
                0.7 if first.kind == "no_dump" else 0.9,
                process_group=first.pg_name,
                pg_desc=first.pg_desc,
                sequence_id=first.collective_seq_id,
                collective=first.collective,
                mismatch=first.kind,
                ranks_behind=first.ranks_behind,
                ranks_differing={str(r): v for r, v in sorted(first.ranks_differing.items())},
                behind_at={str(r): v for r, v in sorted(first.behind_at.items())},
                frames=list(first.frames),
                last_completed=_per_rank(group.last_completed),
                last_started=_per_rank(group.last_started),
                last_enqueued=_per_rank(group.last_enqueued),
                **common,
            )
        stuck = {g.pg_name: g.in_flight() for g in analysis.groups if g.in_flight()}
        summary = (
            f"{len(analysis.ranks)} rank dump(s) agree on every collective in {len(analysis.groups)} process group(s)"
        )
        if stuck:
            name, ranks = next(iter(stuck.items()))
            summary += f"; ranks {', '.join(map(str, sorted(ranks)))} are all inside collective #{max(ranks.values())} of group {name}"
        return self.observe(
            "consistent",
            summary,
            0.7,
            groups=[_group_evidence(g) for g in analysis.groups[:16]],
            **common,
        )
