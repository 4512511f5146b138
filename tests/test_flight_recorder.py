"""Flight-recorder dumps in PyTorch's real structure: reading, the first disagreement, and the probe."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import textwrap

import pytest

from probes.flight_recorder import FlightRecorder
from triage.errors import CorruptArtifact, Unavailable, UnsafeArtifact
from triage.formats.flight_recorder import analyse, load_fr_dump, load_fr_dumps
from triage.run import open_run

GROUPS = {"0": ("default_pg", [0, 1, 2, 3]), "1": ("TENSOR_MODEL_PARALLEL_GROUP", [0, 1]),
          "2": ("TENSOR_MODEL_PARALLEL_GROUP", [2, 3])}


def entry(record_id, pg_name, seq, op="all_reduce", state="completed", sizes=((1024,),), pg_id=None, t=0):
    desc = GROUPS[pg_name][0]
    return {
        "record_id": record_id,
        "pg_id": int(pg_id if pg_id is not None else pg_name),
        "process_group": (pg_name, desc),
        "thread_name": "pt_main_thread",
        "thread_id": "139",
        "collective_seq_id": seq,
        "p2p_seq_id": 0,
        "op_id": seq,
        "profiling_name": f"nccl:{op}",
        "time_created_ns": 1_000_000 + t,
        "input_sizes": [list(s) for s in sizes],
        "input_dtypes": ["BFloat16"] * len(sizes),
        "output_sizes": [list(s) for s in sizes],
        "output_dtypes": ["BFloat16"] * len(sizes),
        "state": state,
        "time_discovered_started_ns": 1_000_100 + t if state != "scheduled" else None,
        "time_discovered_completed_ns": 1_000_200 + t if state == "completed" else None,
        "retired": state == "completed",
        "timeout_ms": 600000,
        "is_p2p": False,
        "frames": [{"name": "all_reduce", "filename": "torch/distributed/distributed_c10d.py", "line": 2696},
                   {"name": "train_step", "filename": "megatron/training.py", "line": 812}],
    }


def dump(rank, entries, groups=("0",)):
    status = {}
    for g in groups:
        mine = [e for e in entries if e["process_group"][0] == g]
        status[str(int(g))] = {
            "last_enqueued_collective": max((e["collective_seq_id"] for e in mine), default=-1),
            "last_started_collective": max((e["collective_seq_id"] for e in mine if e["state"] != "scheduled"), default=-1),
            "last_completed_collective": max((e["collective_seq_id"] for e in mine if e["state"] == "completed"), default=-1),
        }
    return {
        "version": "2.10",
        "comm_lib_version": "2.21.5",
        "pg_config": {g: {"name": g, "desc": GROUPS[g][0], "ranks": str(GROUPS[g][1])} for g in groups},
        "pg_status": status,
        "entries": entries,
    }


def write_dumps(directory, dumps, prefix="nccl_trace_rank_"):
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for rank, payload in dumps.items():
        path = directory / f"{prefix}{rank}"
        path.write_bytes(pickle.dumps(payload, protocol=2))
        paths.append(path)
    return paths


def healthy_entries(n, last_state="completed"):
    return [entry(i, "0", i + 1, state=last_state if i == n - 1 else "completed", t=i) for i in range(n)]


# --- reading ---------------------------------------------------------------------------


def test_rank_comes_from_the_file_name_and_entries_are_read(tmp_path):
    (path,) = write_dumps(tmp_path, {3: dump(3, healthy_entries(2))})
    trace = load_fr_dump(path)
    assert trace.rank == 3
    assert trace.version == "2.10"
    assert [e.profiling_name for e in trace.entries] == ["nccl:all_reduce", "nccl:all_reduce"]
    assert trace.entries[0].op == "all_reduce"
    assert trace.entries[0].frames[1] == "train_step megatron/training.py:812"
    assert trace.pg_status["0"]["last_completed_collective"] == 2


def test_json_dump_with_string_status_values(tmp_path):
    payload = dump(1, healthy_entries(3))
    payload["pg_status"] = {k: {kk: str(vv) for kk, vv in v.items()} for k, v in payload["pg_status"].items()}
    path = tmp_path / "fr_trace_rank_1.json"
    path.write_text(json.dumps(payload))
    trace = load_fr_dump(path)
    assert trace.rank == 1
    assert trace.pg_status["0"]["last_completed_collective"] == 3
    assert trace.entries[2].pg_name == "0"


def test_hostile_dump_is_refused_without_running(tmp_path):
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    path = tmp_path / "nccl_trace_rank_0"
    path.write_bytes(pickle.dumps({"version": "2.10", "entries": [Evil()]}, protocol=2))
    with pytest.raises(UnsafeArtifact, match="system"):
        load_fr_dump(path)
    assert not marker.exists()


@pytest.mark.parametrize(
    ("content", "message"),
    [(b"", "empty"), (b"\x80\x02}q\x00(X\x07\x00\x00\x00version", "cut short"), (b"{\"entries\": [", "malformed"),
     (pickle.dumps([1, 2, 3]), "not a flight-recorder dump")],
)
def test_broken_dumps_are_corrupt(tmp_path, content, message):
    path = tmp_path / "nccl_trace_rank_0"
    path.write_bytes(content)
    with pytest.raises(CorruptArtifact, match=message):
        load_fr_dump(path)


def test_dump_without_rank_in_name_is_refused(tmp_path):
    path = tmp_path / "nccl_trace"
    path.write_bytes(pickle.dumps(dump(0, healthy_entries(1)), protocol=2))
    with pytest.raises(CorruptArtifact, match="which rank"):
        load_fr_dump(path)


def test_real_dump_written_by_pytorch_is_read(tmp_path):
    """A dump from PyTorch's own recorder (gloo, one rank) reads with the restricted unpickler."""
    script = textwrap.dedent(f"""
        import os
        os.environ["TORCH_FR_BUFFER_SIZE"] = "64"
        import torch, torch.distributed as dist
        dist.init_process_group("gloo", init_method="file://{tmp_path}/store", rank=0, world_size=1)
        t = torch.ones(8)
        dist.all_reduce(t)
        dist.broadcast(t, 0)
        # The recorder retires gloo's work from gloo's own thread, a moment after the call
        # returns: wait until it has (our own dump, read here with plain pickle).
        import pickle, time
        for _ in range(1200):  # up to a minute on a loaded machine
            raw = torch._C._distributed_c10d._dump_fr_trace()
            if pickle.loads(raw)["pg_status"]["0"]["last_completed_collective"] == 2:
                break
            time.sleep(0.05)
        open("{tmp_path}/fr_trace_rank_0", "wb").write(raw)
        dist.destroy_process_group()
    """)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120, capture_output=True)

    (trace,) = load_fr_dumps([tmp_path / "fr_trace_rank_0"])

    assert [e.op for e in trace.entries] == ["all_reduce", "broadcast"]
    assert [e.collective_seq_id for e in trace.entries] == [1, 2]
    assert trace.entries[0].input_sizes == ((8,),)
    analysis = analyse([trace])
    assert analysis.consistent
    assert analysis.groups[0].last_completed == {0: 2}


# --- analysis --------------------------------------------------------------------------


def test_rank_that_never_scheduled_the_collective_others_wait_in(tmp_path):
    stuck = healthy_entries(5, last_state="started")
    behind = healthy_entries(4)
    paths = write_dumps(tmp_path, {0: dump(0, stuck), 1: dump(1, stuck), 2: dump(2, stuck), 3: dump(3, behind)})

    analysis = analyse(load_fr_dumps(paths))

    m = analysis.first_mismatch
    assert (m.pg_name, m.collective_seq_id, m.collective, m.kind) == ("0", 5, "nccl:all_reduce", "not_scheduled")
    assert m.ranks_behind == [3]
    group = analysis.groups[0]
    assert group.last_completed == {0: 4, 1: 4, 2: 4, 3: 4}
    assert group.last_started == {0: 5, 1: 5, 2: 5, 3: 4}
    assert group.in_flight() == {0: 5, 1: 5, 2: 5}
    assert "rank(s) 3 never reached collective #5" in m.describe()


def test_different_op_at_the_same_sequence_id(tmp_path):
    base = healthy_entries(3)
    odd = [dict(e) for e in base]
    odd[2] = entry(2, "0", 3, op="broadcast", state="started", t=2)
    paths = write_dumps(tmp_path, {0: dump(0, base), 1: dump(1, odd)})
    m = analyse(load_fr_dumps(paths)).first_mismatch
    assert (m.collective_seq_id, m.kind) == (3, "op")
    assert m.ranks_differing == {1: "nccl:broadcast"}


def test_different_sizes_at_the_same_sequence_id(tmp_path):
    base = healthy_entries(3)
    odd = [dict(e) for e in base]
    odd[1] = entry(1, "0", 2, sizes=((2048,),), t=1)
    paths = write_dumps(tmp_path, {0: dump(0, base), 1: dump(1, base), 2: dump(2, odd), 3: dump(3, base)})
    m = analyse(load_fr_dumps(paths)).first_mismatch
    assert (m.collective_seq_id, m.kind) == (2, "sizes")
    assert list(m.ranks_differing) == [2]
    assert "2048" in m.ranks_differing[2]


def test_ring_buffer_window_is_respected(tmp_path):
    long = [entry(i, "0", i + 1, t=i) for i in range(12)]
    short = [e for e in long if e["collective_seq_id"] >= 10]  # older entries overwritten in the ring
    paths = write_dumps(tmp_path, {0: dump(0, short), 1: dump(1, long)})
    assert analyse(load_fr_dumps(paths)).consistent


def test_earliest_mismatch_across_groups_is_reported_first(tmp_path):
    tp_a = [entry(0, "1", 1, t=0), entry(1, "1", 2, state="started", t=50)]
    tp_a_behind = [entry(0, "1", 1, t=0)]
    dp = [entry(10, "0", 1, t=10), entry(11, "0", 2, state="started", t=100)]
    dp_behind = [entry(10, "0", 1, t=10)]
    dumps = {
        0: dump(0, tp_a + dp, groups=("0", "1")),
        1: dump(1, tp_a_behind + dp_behind, groups=("0", "1")),
        2: dump(2, dp, groups=("0",)),
        3: dump(3, dp, groups=("0",)),
    }
    analysis = analyse(load_fr_dumps(write_dumps(tmp_path, dumps)))
    assert len(analysis.mismatches) == 2
    first = analysis.first_mismatch
    assert (first.pg_name, first.collective_seq_id, first.ranks_behind) == ("1", 2, [1])


def test_groups_sharing_a_name_are_told_apart_by_their_members(tmp_path):
    """`split_group` can give two groups one name; their member lists keep them apart."""
    dumps = {}
    for rank in range(4):
        members = [0, 1] if rank < 2 else [2, 3]
        n = 3 if rank < 2 else 7  # the two groups have issued different numbers of collectives
        payload = dump(rank, [entry(i, "1", i + 1, t=i) for i in range(n)], groups=("1",))
        payload["pg_config"] = {"1": {"name": "1", "desc": "TENSOR_MODEL_PARALLEL_GROUP", "ranks": str(members)}}
        dumps[rank] = payload
    analysis = analyse(load_fr_dumps(write_dumps(tmp_path, dumps)))
    assert analysis.consistent
    assert [(g.pg_name, g.expected_ranks) for g in analysis.groups] == [("1", [0, 1]), ("1", [2, 3])]
    assert analysis.groups[1].last_completed == {2: 7, 3: 7}


def test_missing_dump_of_a_member_while_the_others_wait(tmp_path):
    stuck = healthy_entries(5, last_state="started")
    paths = write_dumps(tmp_path, {0: dump(0, stuck), 1: dump(1, stuck), 2: dump(2, stuck)})
    analysis = analyse(load_fr_dumps(paths))
    assert analysis.missing_dumps == [3]
    m = analysis.first_mismatch
    assert (m.kind, m.collective_seq_id, m.ranks_behind) == ("no_dump", 5, [3])


def test_two_dumps_for_one_rank_are_refused(tmp_path):
    a = write_dumps(tmp_path / "a", {0: dump(0, healthy_entries(1))})
    b = write_dumps(tmp_path / "b", {0: dump(0, healthy_entries(1))})
    with pytest.raises(CorruptArtifact, match="second dump for rank 0"):
        load_fr_dumps(a + b)


# --- the probe -------------------------------------------------------------------------


def _run_with(tmp_path, dumps):
    run_dir = tmp_path / "run"
    write_dumps(run_dir / "flight_recorder", dumps)
    return open_run(str(run_dir))


def test_probe_names_group_sequence_collective_and_ranks_behind(tmp_path):
    stuck = healthy_entries(5, last_state="started")
    run = _run_with(tmp_path, {0: dump(0, stuck), 1: dump(1, stuck), 2: dump(2, stuck), 3: dump(3, healthy_entries(4))})

    obs = FlightRecorder().examine(run)

    assert obs.outcome == "collective_mismatch"
    ev = obs.evidence
    assert (ev["process_group"], ev["sequence_id"], ev["collective"]) == ("0", 5, "nccl:all_reduce")
    assert ev["ranks_behind"] == [3]
    assert ev["last_completed"] == {"0": 4, "1": 4, "2": 4, "3": 4}
    assert ev["last_enqueued"]["3"] == 4 and ev["last_enqueued"]["0"] == 5
    assert ev["dumps"] == 4
    assert ev["behind_at"] == {"3": "#4 nccl:all_reduce (completed) at train_step megatron/training.py:812"}
    assert ev["frames"][0] == "all_reduce torch/distributed/distributed_c10d.py:2696"
    assert obs.confidence >= 0.9


def test_probe_consistent_when_all_ranks_agree(tmp_path):
    run = _run_with(tmp_path, {r: dump(r, healthy_entries(6)) for r in range(4)})
    obs = FlightRecorder().examine(run)
    assert obs.outcome == "consistent"
    assert obs.evidence["groups"][0]["last_completed_range"] == [6, 6]
    assert "4 rank dump(s) agree" in obs.summary


def test_probe_goes_on_when_one_dump_is_corrupt(tmp_path):
    stuck = healthy_entries(3, last_state="started")
    run_dir = tmp_path / "run"
    write_dumps(run_dir / "flight_recorder", {0: dump(0, stuck), 1: dump(1, healthy_entries(2))})
    (run_dir / "flight_recorder" / "nccl_trace_rank_2").write_bytes(b"\x80\x02}q\x00(")
    obs = FlightRecorder().examine(open_run(str(run_dir)))
    assert obs.outcome == "collective_mismatch"
    assert obs.evidence["ranks_behind"] == [1]
    assert "nccl_trace_rank_2" in obs.evidence["unreadable"][0]


def test_probe_unavailable_without_dumps(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "job.log").write_text("[2026-08-01 10:00:00] train.py:1 - hello\n")
    with pytest.raises(Unavailable) as err:
        FlightRecorder().examine(open_run(str(run_dir)))
    assert err.value.artifact == "flight_recorder"
    assert "TORCH_NCCL_DUMP_ON_TIMEOUT=1" in err.value.command


def test_recorder_trigger_pipe_is_not_read(tmp_path):
    pipe = tmp_path / "nccl_trace_rank_0.pipe"
    os.mkfifo(pipe)
    with pytest.raises(CorruptArtifact, match="not a regular file"):
        load_fr_dump(pipe)
