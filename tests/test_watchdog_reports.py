"""The ranks' NCCL watchdog reports as a second witness of a collective mismatch, when no flight recorder was kept.

The lines are ProcessGroupNCCL's own wording (pytorch/pytorch torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp,
WorkNCCL::checkTimeout, watchdogHandler) in the shapes torch < 2.2 and torch >= 2.2 print them.
"""

from __future__ import annotations

import json

import pytest

from triage.cli import main


def _watchdog(rank: int, seq: int, op: str, numel: int, pg: str | None = None) -> str:
    head = f"[PG ID {pg} PG GUID {pg}(default_pg) Rank {rank}]" if pg is not None else f"[Rank {rank}]"
    return (f"[rank{rank}]:[E918 19:29:24.436955737 ProcessGroupNCCL.cpp:689] {head} Watchdog caught collective operation "
            f"timeout: WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn={numel}, NumelOut={numel}, Timeout(ms)=600000) ran for "
            "600097 milliseconds before timing out.\n")


def _detected(rank: int, seq: int, pg: str) -> str:
    return (f"[rank{rank}]:[E918 19:29:24.440481846 ProcessGroupNCCL.cpp:2303] [PG ID {pg} PG GUID {pg}(default_pg) "
            f"Rank {rank}]  failure detected by watchdog at work sequence id: {seq} PG status: last enqueued work: "
            f"{seq + 1}, last completed work: {seq - 1}\n")


def _triage(tmp_path, capsys, text: str) -> tuple[int, dict]:
    log = tmp_path / "job.log"
    log.write_text(text)
    rc = main(["run", str(log), "--json", "--no-cache"])
    return rc, json.loads(capsys.readouterr().out)


def _step(report: dict, probe: str) -> dict:
    return next(p for p in report["path"] if p["probe"] == probe)


def test_ranks_waiting_on_different_sizes_at_one_sequence_number_are_a_collective_mismatch(tmp_path, capsys):
    # modelscope/ms-swift#10183's shape: three ranks broadcast 64 elements, the fourth 24,084,544
    text = "".join(_watchdog(r, 7219, "BROADCAST", 64) + _detected(r, 7219, "0") for r in (0, 1, 3))
    text += _watchdog(2, 7219, "BROADCAST", 24084544) + _detected(2, 7219, "0")
    rc, report = _triage(tmp_path, capsys, text)
    assert report["root_cause"]["id"] == "dist.collective_mismatch"
    step = _step(report, "watchdog_reports")
    assert step["outcome"] == "collective_mismatch"
    assert step["evidence"]["seq"] == 7219
    assert step["evidence"]["collectives"] == {"BROADCAST NumelIn=64 NumelOut=64": [0, 1, 3],
                                               "BROADCAST NumelIn=24084544 NumelOut=24084544": [2]}
    assert "rank 2" in step["summary"]
    assert _step(report, "flight_recorder")["outcome"] == "unavailable"
    assert rc == 0


def test_another_op_at_the_same_sequence_number_is_a_mismatch_in_the_older_wording(tmp_path, capsys):
    text = (f"(ActorModelRayActor pid=1, ip=10.0.1.75) [E ProcessGroupNCCL.cpp:475] {_watchdog(0, 3856, 'ALLREDUCE', 1).split('] ', 1)[1]}"
            f"(ActorModelRayActor pid=2, ip=10.0.1.76) [E ProcessGroupNCCL.cpp:475] {_watchdog(1, 3856, 'ALLGATHER', 1).split('] ', 1)[1]}")
    _rc, report = _triage(tmp_path, capsys, text)
    assert report["root_cause"]["id"] == "dist.collective_mismatch"
    assert _step(report, "watchdog_reports")["evidence"]["collectives"] == {
        "ALLREDUCE NumelIn=1 NumelOut=1": [0], "ALLGATHER NumelIn=1 NumelOut=1": [1]}


def test_ranks_that_wait_on_the_same_collective_agree_and_the_hang_stays_undecided(tmp_path, capsys):
    text = "".join(_watchdog(r, 512, "ALLREDUCE", 593920, pg="0") for r in range(4))
    _rc, report = _triage(tmp_path, capsys, text)
    assert report["root_cause"]["id"] == "inconclusive"
    step = _step(report, "watchdog_reports")
    assert step["outcome"] == "consistent"
    assert step["evidence"]["ranks"] == [0, 1, 2, 3]
    # a rank that never reached the collective prints no report: the mismatch is not ruled out by their agreement
    assert "dist.collective_mismatch" not in {r["verdict"] for r in report["ruled_out"]}
    assert "dist.collective_mismatch" in [c["id"] for c in report["candidates"]]


def test_reports_of_two_process_groups_are_never_compared(tmp_path, capsys):
    # the same sequence number in two groups is two different collectives: no verdict from it
    text = _watchdog(0, 40, "ALLREDUCE", 1024, pg="1") + _watchdog(1, 40, "ALLGATHER", 8, pg="2")
    _rc, report = _triage(tmp_path, capsys, text)
    assert report["root_cause"]["id"] == "inconclusive"
    step = _step(report, "watchdog_reports")
    assert step["outcome"] == "unavailable"
    assert "no two ranks" in step["summary"]


def test_a_report_whose_group_line_was_cut_joins_the_one_group_at_its_number_only_to_agree(tmp_path, capsys):
    # huggingface/open-r1#658: rank 1's follow-up names the default group, rank 2's was not pasted
    text = _watchdog(2, 49296, "_ALLGATHER_BASE", 192) + _watchdog(1, 49296, "_ALLGATHER_BASE", 192) + \
        _detected(1, 49296, "0")
    _rc, report = _triage(tmp_path, capsys, text)
    step = _step(report, "watchdog_reports")
    assert step["outcome"] == "consistent" and step["evidence"]["ranks"] == [1, 2]
    # another collective at that number is not joined to the group: no mismatch is made from a group not printed
    text = _watchdog(2, 49296, "ALLREDUCE", 8) + _watchdog(1, 49296, "_ALLGATHER_BASE", 192) + _detected(1, 49296, "0")
    _rc, report = _triage(tmp_path, capsys, text)
    assert report["root_cause"]["id"] == "inconclusive"
    assert _step(report, "watchdog_reports")["outcome"] == "unavailable"


def test_ranks_of_one_group_named_in_torch_2_3s_words_waiting_at_different_numbers_disagree(tmp_path, capsys):
    # huggingface/accelerate#3250: FSDP's state-dict gather on one rank, the other rank past it
    def older(rank: int, seq: int) -> str:
        return (f"[rank{rank}]:[E1122 06:40:00.504952916 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) Rank "
                f"{rank}] Exception (either an error or timeout) detected by watchdog at work: {seq}, last enqueued NCCL "
                f"work: {seq + 5}, last completed NCCL work: {seq - 1}.\n")
    text = (_watchdog(0, 122, "_REDUCE_SCATTER_BASE", 106343680) + older(0, 122)
            + _watchdog(1, 126, "_ALLGATHER_BASE", 378702080) + older(1, 126))
    _rc, report = _triage(tmp_path, capsys, text)
    assert report["root_cause"]["id"] == "dist.collective_mismatch"
    assert _step(report, "watchdog_reports")["outcome"] == "collective_mismatch"


@pytest.mark.parametrize("text", [
    _watchdog(3, 7219, "BROADCAST", 64),  # one rank's report
    _watchdog(3, 7219, "BROADCAST", 64) + _watchdog(3, 7219, "BROADCAST", 24084544),  # one rank twice
])
def test_one_rank_alone_decides_nothing(tmp_path, capsys, text):
    _rc, report = _triage(tmp_path, capsys, text)
    assert report["root_cause"]["id"] == "inconclusive"
    assert _step(report, "watchdog_reports")["outcome"] == "unavailable"


def test_a_reset_connection_with_watchdogs_in_agreement_is_not_called_the_network(tmp_path, capsys):
    # a peer closing its connection: only the full dumps clear the collectives, two agreeing watchdogs do not
    text = ("[rank1]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Read error [10.0.0.2]:"
            "12345: Connection reset by peer\n") + "".join(_watchdog(r, 9, "ALLREDUCE", 1, pg="0") for r in (0, 1))
    _rc, report = _triage(tmp_path, capsys, text)
    assert report["root_cause"]["id"] == "inconclusive"
    assert _step(report, "watchdog_reports")["outcome"] == "consistent"


def test_the_pre_2_2_c10d_connect_timeout_is_the_network(tmp_path, capsys):
    # OpenRLHF/OpenRLHF#265: the vLLM workers could not reach the store at the docker bridge address
    text = ("(RayWorkerVllm pid=207931, ip=10.0.1.75) [E socket.cpp:922] [c10d] The client socket has timed out after "
            "1800s while trying to connect to (172.17.0.2, 44737).\n"
            "(ActorModelRayActor pid=207260, ip=10.0.1.75) [E ProcessGroupNCCL.cpp:475] [Rank 3] Watchdog caught "
            "collective operation timeout: WorkNCCL(SeqNum=3856, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
            "Timeout(ms)=1800000) ran for 1800268 milliseconds before timing out.\n")
    _rc, report = _triage(tmp_path, capsys, text)
    assert report["root_cause"]["id"] == "infra.network"


def test_a_reports_group_rank_is_told_apart_from_the_jobs_rank(tmp_path, capsys):
    # verl-project/verl#1309 as pasted: a collector's timestamp, Ray's prefix, torch's `[rank15]:`, and the
    # watchdog's `[Rank 1]` of the tensor-parallel group the collective ran in
    line = ("[2025-05-10 00:18:21] (WorkerDict pid=1230, ip=train-worker-0) [rank15]:[E510 00:18:19.328053719 "
            "ProcessGroupNCCL.cpp:629] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, "
            "OpType=BROADCAST, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600021 milliseconds before timing out.\n")
    rc, report = _triage(tmp_path, capsys, line)
    assert rc == 3
    assert "(reports from rank 1 of its group (global rank 15))" in report["root_cause"]["explanation"]
    sig = _step(report, "error_signatures")
    # the collector's timestamp is no prefix: Ray's names the node, torch's the job's rank
    assert sig["evidence"]["node"] == "train-worker-0" and sig["evidence"]["rank"] == 15


def test_a_report_without_its_sequence_number_is_not_called_absent(tmp_path, capsys):
    # alan-turing-institute/autocast#381: the report pasted with its work elided; the report is quoted, so the
    # reason the reports were not compared must not say there is none
    text = ("[Rank 0] Watchdog caught collective operation timeout:\n"
            "  WorkNCCL(..., OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000)\n"
            "  ran for 1800090 milliseconds before timing out.\n")
    _rc, report = _triage(tmp_path, capsys, text)
    step = _step(report, "watchdog_reports")
    assert step["outcome"] == "unavailable"
    assert "do not name their work's sequence number" in step["summary"]
    assert "no watchdog report in the log" not in json.dumps(report)


_OPTIONS = ("TensorDtypes=BFloat16, TensorDeviceTypes=TensorOptions(dtype=float (default), device=cuda, layout=Strided "
            "(default), requires_grad=false (default), pinned_memory=false (default), memory_format=(nullopt))")


def test_pytorchs_own_collective_check_is_the_mismatch_with_each_ranks_call(tmp_path, capsys):
    # modelscope/ms-swift#9443: TORCH_DISTRIBUTED_DEBUG=DETAIL's ProcessGroupWrapper compared the fingerprints itself
    text = ("[rank1]: RuntimeError: Detected mismatch between collectives on ranks. Rank 1 is running collective: "
            f"CollectiveFingerPrint(SequenceNumber=3104, OpType=ALLREDUCE, TensorShape=[195812480], {_OPTIONS}), but "
            f"Rank 0 is running collective: CollectiveFingerPrint(SequenceNumber=3104, OpType=ALLREDUCE, "
            f"TensorShape=[51123456], {_OPTIONS}).Collectives differ in the following aspects: \t Tensor Tensor shapes: "
            "195812480vs 51123456\n")
    rc, report = _triage(tmp_path, capsys, text)
    assert (rc, report["root_cause"]["id"]) == (0, "dist.collective_mismatch")
    step = _step(report, "watchdog_reports")
    assert step["evidence"]["collectives"] == {
        "1": {"SequenceNumber": "3104", "OpType": "ALLREDUCE", "TensorShape": "[195812480]", "TensorDtypes": "BFloat16"},
        "0": {"SequenceNumber": "3104", "OpType": "ALLREDUCE", "TensorShape": "[51123456]", "TensorDtypes": "BFloat16"}}
    assert "rank 1: ALLREDUCE TensorShape=[195812480]" in step["summary"]
    # cut before the second rank's fingerprint, the check's words alone name no collective: undecided
    rc, report = _triage(tmp_path, capsys, text.split(", but Rank 0")[0] + "\n")
    assert report["root_cause"]["id"] == "inconclusive"


def test_nccls_truncated_message_is_the_ranks_collectives_disagreeing_in_size(tmp_path, capsys):
    # sail-sg/zero-bubble-pipeline-parallelism#60: NCCL's socket transport refused a larger message than its rank posted
    text = ("lzm-h200-10:74737:75914 [1] transport/net_socket.cc:488 NCCL WARN NET/Socket : peer 10.0.5.194<41988> "
            "message truncated : receiving 4 bytes instead of 2. If you believe your socket network is in healthy state, "
            "there may be a mismatch in collective sizes or environment settings (e.g. NCCL_PROTO, NCCL_ALGO) between "
            "ranks\n"
            "lzm-h200-10:74737:74737 [1] init.cc:290 NCCL WARN Attempt to use communicator before the previous "
            "operation returned ncclSuccess\n")
    rc, report = _triage(tmp_path, capsys, text)
    assert (rc, report["root_cause"]["id"]) == (0, "dist.collective_mismatch")
    step = _step(report, "watchdog_reports")
    assert (step["evidence"]["received_bytes"], step["evidence"]["posted_bytes"]) == (4, 2)
    assert "NCCL received 4 bytes from peer 10.0.5.194<41988> where this rank's operation posted 2" in step["summary"]
    # NVIDIA/nccl#626: the sizes on the line below, the transport's words alone
    text = ("transport/net_socket.cc:424 NCCL WARN NET/Socket : peer 192.168.161.30<59210> message truncated :\n"
            "receiving 1048576 bytes instead of 65536\n")
    rc, report = _triage(tmp_path, capsys, text)
    assert (rc, report["root_cause"]["id"]) == (0, "dist.collective_mismatch")


def test_reports_that_name_their_work_but_not_its_collective_are_not_called_absent(tmp_path, capsys):
    # axolotl-ai-cloud/axolotl#2267: torch >= 2.3's words name the work's sequence number, not its op
    text = ("[E114 16:14:58.940745885 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) Rank 0] Exception "
            "(either an error or timeout) detected by watchdog at work: 1, last enqueued NCCL work: 1, last completed "
            "NCCL work: -1.\n"
            "[E114 16:14:58.940745885 ProcessGroupNCCL.cpp:630] [PG ID 0 PG GUID 0(default_pg) Rank 1] Timeout at NCCL "
            "work: 1, last enqueued NCCL work: 1, last completed NCCL work: -1.\n")
    _rc, report = _triage(tmp_path, capsys, text)
    step = _step(report, "watchdog_reports")
    assert step["outcome"] == "unavailable"
    assert "name their work's sequence number, not its collective" in step["summary"]
    assert "no watchdog report in the log" not in json.dumps(report)


def test_ranks_of_one_group_waiting_at_different_sequence_numbers_are_a_collective_mismatch(tmp_path, capsys):
    # Sunshine535/nips-grpo-dynamics:results/logs/2gpu_pipeline.log: rank 0 at SeqNum 404 (last completed 403), rank 1
    # at 405 (last completed 404), each an _ALLGATHER_BASE of its own size
    text = (_watchdog(0, 404, "_ALLGATHER_BASE", 1140480, pg="4") + _detected(0, 404, "4")
            + _watchdog(1, 405, "_ALLGATHER_BASE", 1216512, pg="4") + _detected(1, 405, "4"))
    rc, report = _triage(tmp_path, capsys, text)
    assert report["root_cause"]["id"] == "dist.collective_mismatch" and rc == 0
    step = _step(report, "watchdog_reports")
    assert step["outcome"] == "collective_mismatch"
    assert step["evidence"]["seqs"] == {"0": 404, "1": 405}
    assert "wait at different collectives" in step["summary"]


def test_the_same_collective_one_number_apart_is_a_rank_that_lags(tmp_path, capsys):
    # vllm-project/vllm#23448: ranks 0 and 3 of one group at 5730 and 5729, each a BROADCAST of 3,612,672 elements
    text = (_watchdog(0, 5730, "BROADCAST", 3612672, pg="67") + _detected(0, 5730, "67")
            + _watchdog(3, 5729, "BROADCAST", 3612672, pg="67") + _detected(3, 5729, "67"))
    _rc, report = _triage(tmp_path, capsys, text)
    assert report["root_cause"]["id"] != "dist.collective_mismatch"
