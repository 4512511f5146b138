"""Whether the ranks' NCCL watchdog reports name the same collective (a hang without flight-recorder dumps).

When a collective times out, the ProcessGroupNCCL watchdog of each rank still alive logs the
work it was waiting on (pytorch/pytorch torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp,
`WorkNCCL::checkTimeout` and `operator<<(WorkNCCL)`):

    [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7219, OpType=BROADCAST,
    NumelIn=64, NumelOut=64, Timeout(ms)=3000000) ran for 3000097 milliseconds before timing out.

torch >= 2.2 adds the process group to the prefix (`[PG ID 0 PG GUID 0(default_pg) Rank 3]`), or
to the line that follows (`... Rank 3]  failure detected by watchdog at work sequence id: 7219`).
A work's sequence number counts the collectives of one process group, so ranks of one group that
wait at the same number called the same collective there, or should have: the same number with
another op or another element count is a rank calling a different collective, which is what the
flight recorder's dumps show for a collective mismatch (modelscope/ms-swift#10183: a BROADCAST of
64 elements on three ranks and of 24,084,544 on the fourth, fixed in the framework). Ranks that
wait at one number with the same op and count agree: the hang is not a disagreement there.

Only reports of one process group are compared: a report whose group is not printed is compared
with others whose group is not printed either (ranks numbered alike in two groups would then be
mixed; a log without group names comes from one torch and usually from one group's timeout).

With TORCH_DISTRIBUTED_DEBUG=DETAIL, PyTorch compares the ranks' collectives itself before each one
runs (torch/csrc/distributed/c10d/ProcessGroupWrapper.cpp, `runCollectiveChecks`) and raises with
both fingerprints when they differ:

    RuntimeError: Detected mismatch between collectives on ranks. Rank 1 is running collective:
    CollectiveFingerPrint(SequenceNumber=3104, OpType=ALLREDUCE, TensorShape=[195812480], …), but
    Rank 0 is running collective: CollectiveFingerPrint(SequenceNumber=3104, OpType=ALLREDUCE,
    TensorShape=[51123456], …)

That is the same comparison made by the backend, with what each rank called: a mismatch observed
(modelscope/ms-swift#9443, aurekaresearch/OpenDDE#23), read before the watchdogs' reports.

NCCL's network transports see the same disagreement from below: a peer that sends more bytes than this
rank posted for the operation is refused (src/transport/net_socket.cc, net_ib.cc: `NET/Socket : peer
10.0.5.194<41988> message truncated : receiving 4 bytes instead of 2.`, newer releases adding "there may be
a mismatch in collective sizes or environment settings (e.g. NCCL_PROTO, NCCL_ALGO) between ranks"). The
two ranks ran one collective with different sizes, or with different protocol settings (NVIDIA/nccl#626,
the maintainers: "You're not calling NCCL consistently between ranks"; NVIDIA/nccl#605).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from triage.errors import Unavailable
from triage.finding import UNSEEN_OUTCOMES, Observation
from triage.probe import Cost, Probe

from probes.error_signatures import rank_of

if TYPE_CHECKING:
    from triage.formats.log_index import LogLine
    from triage.run.run import Run

_PG = r"\[PG (?:ID )?(?P<pg>\S+) PG GUID (?P<guid>[^\s(\]]+)(?:\((?P<desc>[^)]*)\))? Rank (?P<prank>\d+)\]"
_CAUGHT = "Watchdog caught collective operation timeout"
_WATCHDOG = re.compile(
    r"(?:" + _PG + r"|\[Rank (?P<rank>\d+)\])\s*" + _CAUGHT + ": "
    r"WorkNCCL\(SeqNum=(?P<seq>\d+), OpType=(?P<op>\w+)(?:, NumelIn=(?P<numel_in>-?\d+), NumelOut=(?P<numel_out>-?\d+))?"
)
# the line after the report in torch >= 2.2 (ProcessGroupNCCL.cpp, watchdogHandler): its group, rank and work
# (torch 2.3-2.4's words: `[PG ID 0 PG GUID 0(default_pg) Rank 0] Exception (either an error or timeout) detected by
# watchdog at work: 122, last enqueued NCCL work: 127, …`, huggingface/accelerate#3250)
_DETECTED = re.compile(_PG + r"\s+(?:failure detected by watchdog at work sequence id|"
                       r"Exception \(either an error or timeout\) detected by watchdog at work): (?P<seq>\d+)")
# ProcessGroupWrapper's report: each rank's fingerprint, up to the next rank's or the end of the message
_WRAPPER = "Detected mismatch between collectives on ranks"
# NCCL's network transport refusing a message larger than the operation this rank posted
_TRUNCATED = re.compile(r"NET/(?:Socket|IB) ?: (?:peer (?P<peer>\S+) )?message truncated\b"
                        r"(?: ?: receiving (?P<got>\d+) bytes instead of (?P<posted>\d+))?")
# torch >= 2.3's other words for a rank's watchdog report, naming the work's sequence number and not its collective
# (`… Exception (either an error or timeout) detected by watchdog at work: 1`, `[Rank 1] Timeout at NCCL work: 1, last
# enqueued NCCL work: 1, …`: axolotl-ai-cloud/axolotl#2267)
_OPLESS_REPORT = re.compile(r"detected by watchdog at work: \d+|\bTimeout at NCCL work: \d+")
_FINGERPRINT = re.compile(r"Rank (?P<rank>\d+) is running (?:inconsistent )?collective: CollectiveFingerPrint\((?P<fp>.*?)"
                          r"(?=, but Rank \d+ is running|\)\.|\)\s*$)")
_FP_FIELDS = re.compile(r"(?P<key>SequenceNumber|OpType|TensorShape|TensorDtypes)=(?P<value>\[[^\]]*\]|[^,)\s]+)")


@dataclass(frozen=True)
class _Report:
    group: str | None  # the process group's GUID (or id) when printed
    rank: int
    seq: int
    op: str
    numel_in: int | None
    numel_out: int | None
    where: str
    # the rank torch's `[rankN]:` prefix names (the job's), where the report's `[Rank N]` is the group's own
    global_rank: int | None = None

    def who(self) -> str:
        if self.global_rank is None or self.global_rank == self.rank:
            return f"rank {self.rank}"
        return f"rank {self.rank} of its group (global rank {self.global_rank})"

    def collective(self) -> tuple[str, int | None, int | None]:
        return self.op, self.numel_in, self.numel_out

    def describe(self) -> str:
        size = "" if self.numel_in is None else f" of {self.numel_in} elements"
        return f"{self.who()}: {self.op}{size} at SeqNum {self.seq} ({self.where})"


def _reports(lines: list[LogLine]) -> list[_Report]:
    groups: dict[tuple[int, int], str] = {}  # (rank, seq) -> group, from the `failure detected` lines
    for line in lines:
        m = _DETECTED.search(line.text)
        if m:
            groups[(int(m.group("prank")), int(m.group("seq")))] = m.group("guid")
    found: dict[tuple[str | None, int, int], _Report] = {}
    for line in lines:
        m = _WATCHDOG.search(line.text)
        if m is None:
            continue
        rank = int(m.group("prank") or m.group("rank"))
        seq = int(m.group("seq"))
        group = m.group("guid") or groups.get((rank, seq))
        numel_in, numel_out = m.group("numel_in"), m.group("numel_out")
        # the line's own rank, its `[rankN]:` prefix first (the job's), where `[Rank N]` is the group's
        report = _Report(group, rank, seq, m.group("op"), None if numel_in is None else int(numel_in),
                         None if numel_out is None else int(numel_out), line.where(), rank_of(line))
        found.setdefault((group, rank, seq), report)  # a rank's repeated report (Ray's dedup, retries) once
    return list(found.values())


class WatchdogReports(Probe):
    """Whether the NCCL watchdog reports of several ranks name one collective at one sequence number."""

    name = "watchdog_reports"
    outcomes = ("collective_mismatch", "consistent")
    needs = ("log",)
    cost = Cost.STATIC

    def examine(self, run: Run) -> Observation:
        wrapper = self._wrapper_report(run.log.errors) or self._truncated_message(run.log.errors)
        if wrapper is not None:
            return wrapper
        reports = _reports(run.log.errors)
        by_work: dict[tuple[str | None, int], list[_Report]] = {}
        for r in reports:
            by_work.setdefault((r.group, r.seq), []).append(r)
        for (group, seq), rs in list(by_work.items()):
            # a report whose group is not printed (its rank's follow-up line cut off) joins the one group named at its
            # sequence number when it names the same work there: it can only agree, never make a mismatch
            # (huggingface/open-r1#658: rank 1's `[PG ID 0 PG GUID 0(default_pg) Rank 1]` follow-up, rank 2's not pasted)
            named = {g for g, sq in by_work if sq == seq and g is not None}
            if group is None and len(named) == 1:
                target = by_work[(next(iter(named)), seq)]
                same = [r for r in rs if all((r.op, r.numel_in) == (t.op, t.numel_in) for t in target)]
                if same:
                    target.extend(same)
                    left = [r for r in rs if r not in same]
                    if left:
                        by_work[(group, seq)] = left
                    else:
                        del by_work[(group, seq)]
        shared = {key: rs for key, rs in by_work.items() if len({r.rank for r in rs}) >= 2}
        if not shared and (apart := self._apart(reports)) is not None:
            return apart
        if not shared:
            ranks = sorted({r.who() for r in reports})
            if ranks:
                seen = f" (reports from {', '.join(ranks)})"
            elif any(_CAUGHT in line.text for line in run.log.errors):
                # a report whose work is cut off or elided (`WorkNCCL(..., OpType=ALLREDUCE …)`, a paste's `...`): the
                # report is there, its sequence number is not
                seen = " (the log's watchdog reports do not name their work's sequence number)"
            elif any(_OPLESS_REPORT.search(line.text) for line in run.log.errors):
                seen = " (the log's watchdog reports name their work's sequence number, not its collective)"
            else:
                seen = " (no watchdog report in the log)"
            raise Unavailable(
                "log",
                "no two ranks' NCCL watchdog reports name the same work of one process group" + seen,
                "keep every rank's log (each rank's watchdog names the collective it waited on), or the "
                "flight-recorder dumps (TORCH_NCCL_TRACE_BUFFER_SIZE=2000 TORCH_NCCL_DUMP_ON_TIMEOUT=1)",
            )
        for (group, seq), rs in sorted(shared.items(), key=lambda kv: kv[0][1]):
            kinds: dict[tuple[str, int | None, int | None], list[_Report]] = {}
            for r in sorted(rs, key=lambda r: r.rank):
                kinds.setdefault(r.collective(), []).append(r)
            if len(kinds) > 1:
                calls = {f"{op}" + ("" if n_in is None else f" NumelIn={n_in} NumelOut={n_out}"): [r.rank for r in members]
                         for (op, n_in, n_out), members in kinds.items()}
                return self.observe(
                    "collective_mismatch",
                    f"At collective SeqNum {seq}{_group_text(group)} the ranks' watchdogs waited on different "
                    f"collectives: {'; '.join(f'{c} on rank {_ranks(rk)}' for c, rk in calls.items())}. Ranks of one "
                    "process group count the same collectives, so one of them called another collective there.",
                    confidence=0.85,
                    seq=seq,
                    process_group=group,
                    collectives=calls,
                    reports=[r.describe() for members in kinds.values() for r in members],
                )
        (group, seq), rs = min(shared.items(), key=lambda kv: kv[0][1])
        r0 = rs[0]
        return self.observe(
            "consistent",
            f"The watchdogs of rank {_ranks(sorted({r.rank for r in rs}))} waited on the same collective "
            f"({r0.op}{'' if r0.numel_in is None else f' of {r0.numel_in} elements'}) at SeqNum {seq}{_group_text(group)}: "
            "they agree on the collective they hang in. A rank that never reached it prints no report, so a rank "
            "missing from it is not ruled out.",
            confidence=0.6,
            seq=seq,
            process_group=group,
            ranks=sorted({r.rank for r in rs}),
            reports=[r.describe() for r in rs],
            # the flight recorder's own case (examples/nccl-collective-mismatch: rank 1 never reached collective
            # #2481) leaves no watchdog report of that rank; agreement among those that reported says nothing of it
            # (verl-project/verl#1158: ranks 3 and 7 of eight agreeing on an ALLTOALL)
            **{UNSEEN_OUTCOMES: ["collective_mismatch"]},
        )

    def _apart(self, reports: list[_Report]) -> Observation | None:
        """Ranks of one named process group whose watchdogs wait at different sequence numbers: they did not call the
        same number of collectives on it (Sunshine535/nips-grpo-dynamics' 2gpu_pipeline.log: `[PG ID 3 PG GUID 4
        Rank 0]` at SeqNum 404, an ALLGATHER_BASE of 1,140,480 elements, `Rank 1` at 405, one of 1,216,512). A
        collective completes on a rank only with every rank's part, so one rank past a number the other still waits
        at, on another collective, called one more, or another, collective there. The same collective one number
        apart is a rank that lags, not a mismatch."""
        by_group: dict[str, dict[int, _Report]] = {}
        for r in sorted(reports, key=lambda r: r.seq):
            if r.group is not None:
                by_group.setdefault(r.group, {}).setdefault(r.rank, r)  # each rank's earliest report
        for group, ranks in sorted(by_group.items()):
            seqs = {r.seq for r in ranks.values()}
            # (the same collective one number apart is a rank that lags: a broadcast's root completes before its
            # receivers, vllm-project/vllm#23448's ranks 0 and 3 at 5730 and 5729, each a BROADCAST of 3,612,672)
            if len(ranks) < 2 or len(seqs) < 2 or len({r.collective() for r in ranks.values()}) < 2:
                continue
            members = sorted(ranks.values(), key=lambda r: r.rank)
            return self.observe(
                "collective_mismatch",
                f"In process group {group} the ranks' watchdogs wait at different collectives: "
                f"{'; '.join(r.describe() for r in members)}. Ranks of one group count the same collectives, and a "
                "collective completes only with every rank's part, so the ranks did not call the same collectives.",
                confidence=0.7,
                process_group=group,
                seqs={str(r.rank): r.seq for r in members},
                reports=[r.describe() for r in members],
            )
        return None

    def _wrapper_report(self, lines: list[LogLine]) -> Observation | None:
        """PyTorch's own comparison of the ranks' collectives (TORCH_DISTRIBUTED_DEBUG=DETAIL), when it raised."""
        for line in lines:
            if _WRAPPER not in line.text:
                continue
            calls = {}
            for m in _FINGERPRINT.finditer(line.text):
                fields = {f.group("key"): f.group("value") for f in _FP_FIELDS.finditer(m.group("fp"))}
                calls.setdefault(int(m.group("rank")), fields)
            if len(calls) < 2:
                continue  # the fingerprints were cut off: the backend's words alone name no collective
            described = "; ".join(
                f"rank {rank}: {f.get('OpType', '?')}" + (f" TensorShape={f['TensorShape']}" if "TensorShape" in f else "")
                + (f" at SequenceNumber {f['SequenceNumber']}" if "SequenceNumber" in f else "")
                for rank, f in calls.items())
            return self.observe(
                "collective_mismatch",
                f"PyTorch's collective check (TORCH_DISTRIBUTED_DEBUG=DETAIL) found the ranks calling different "
                f"collectives at {line.where()}: {described}. One rank called another collective, or the same one "
                "with another tensor, where the others called theirs.",
                confidence=0.9,
                source="ProcessGroupWrapper",
                collectives={str(rank): f for rank, f in calls.items()},
                where=line.where(),
            )
        return None

    def _truncated_message(self, lines: list[LogLine]) -> Observation | None:
        """NCCL's network transport receiving more than this rank's operation posted: the peer's collective differs."""
        for line in lines:
            m = _TRUNCATED.search(line.text)
            if m is None:
                continue
            peer = f" from peer {m.group('peer')}" if m.group("peer") else ""
            sizes = {} if m.group("got") is None else {"received_bytes": int(m.group("got")),
                                                       "posted_bytes": int(m.group("posted"))}
            received = (f"received {sizes['received_bytes']} bytes{peer} where this rank's operation posted "
                        f"{sizes['posted_bytes']}" if sizes else f"received a message{peer} larger than this rank's "
                        "operation posted")
            return self.observe(
                "collective_mismatch",
                f"NCCL {received} ({line.where()}): the two ranks ran one collective with different sizes, or with "
                "different NCCL settings (NCCL_PROTO, NCCL_ALGO) between them.",
                confidence=0.75,
                source="NCCL net transport",
                rank=rank_of(line),
                where=line.where(),
                **sizes,
            )
        return None


def _group_text(group: str | None) -> str:
    return "" if group is None else f" of process group {group}"


def _ranks(ranks: list[int]) -> str:
    return ", ".join(map(str, ranks))
