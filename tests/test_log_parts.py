"""A large log scanned in parts at once gives the index of one pass, wherever the cuts fall."""

from __future__ import annotations

import os
import pickle
from dataclasses import fields
from pathlib import Path

import pytest

from triage.formats import log_parts, slime_log
from triage.formats.slime_log import scan_logs

A = "(MegatronTrainRayActor pid=1234) "
R = "(RolloutManager pid=3456) "
E = "(SGLangEngine pid=77, ip=10.0.0.3) "


def _ts(i: int) -> str:
    return f"2026-08-01 {10 + i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d}"


def block(i: int) -> list[str]:
    """One step of a slime job, with an HF-Trainer dict (numbered by order, no step) and a retry error."""
    return [
        R + f"[{_ts(i)}] timer.py:24 - Timer generate start",
        E + f"[{_ts(i)} TP0] Decode batch. #running-req: {i % 64}, #token: 81234, token usage: 0.41, cuda graph: True",
        A + f"[{_ts(i)}] memory_utils.py:49 - [Rank 0] Memory-Usage before train: {{'gpu': '0', 'free_GB': 12.5}}",
        A + f"[{_ts(i)}] model.py:918 - step {i}: {{'train/loss': {i / 7!r}, 'train/grad_norm': {i}.5, 'x': nan}}",
        R + f"[{_ts(i)}] timer.py:32 - Timer generate end (elapsed: {0.1 * (i % 7) + 0.01!r}s)",
        f"{{'loss': {i / 3!r}, 'grad_norm': 1.0, 'learning_rate': 1e-06, 'epoch': {i / 100!r}}}",
        R + f"[{_ts(i)}] http_utils.py:80 - Error: ReadTimeout('timed out'), retrying... (attempt {i})",
        R + f"[{_ts(i)}] sglang_rollout.py:447 - Finish rollout: ['sample {i}'], label: 2, reward: 1.0",
        A + f"[{_ts(i)}] timer.py:24 - Timer update_weights start",
        A + f"[{_ts(i)}] timer.py:32 - Timer update_weights end (elapsed: 3.0s)",
    ]


# multi-line constructs a cut may fall into
SPECIAL = [
    A + "------------------------ arguments ------------------------",
    A + "  lr .............................................. 1e-06",
    E + "[2026-08-01 10:00:01 TP0] Load weight end. type=Qwen3ForCausalLM, avail mem=61.20 GB",
    A + "  max_tokens_per_gpu .............................. 9216",
    A + "-------------------- end of arguments ---------------------",
    "+ python3 train.py --actor-num-nodes 1 \\",
    "    --lr 1e-6 \\",
    "    --colocate",
    A + "Traceback (most recent call last):",
    E + "[2026-08-01 10:03:12 TP0] Decode batch. #running-req: 3, #token: 1200, token usage: 0.01, cuda graph: True",
    A + '  File "/root/slime/train.py", line 88, in <module>',
    A + "    train(args)",
    A + '  File "/root/slime/slime/backends/megatron_utils/actor.py", line 300, in train',
    A + "RuntimeError: CUDA error: an illegal memory access was encountered",
    R + "[2026-08-01 10:03:14] timer.py:24 - Timer save start",
    "[2026-08-01 10:00:02] placement_group.py:64 - Waiting for placement group of 16 GPUs (elapsed 30s): "
    "8 GPUs registered with Ray, 8 available.",
    # an HF Trainer dict a terminal wrapped onto three lines
    "{'loss': 0.0, 'grad_norm': 4.9e-06, 'learning_rate': 1e-06, 'completions/max_terminated_length':",
    " 85.0, 'reward': 0.0065, 'reward_std': 0.006, 'sampling/importance_sampling_ratio/min'",
    ": 3.2e-21, 'epoch': 0.5}",
    # NeMo-RL's step block (nemo_rl/algorithms/grpo.py): the step of its header, the items right under the results
    "========================= Step 4/50 =========================",
    "▶ Training policy...",
    "📊 Training Results:",
    "  • Loss: 0.0219",
    "  • Generation KL Error: 0.0006",
    "  • Avg Reward: 0.3184",
    "⏱️  Timing:",
    "  • Mean Total Tokens per Sample: 619.48",
    # a verl step line a terminal wrapped at 90 columns, and a Megatron record broken after its bars: the record is
    # held while its lines are read (slime_log's record_wrap walk)
    *(lambda line: [line[i:i + 90] for i in range(0, len(line), 90)])(
        "(TaskRunner pid=3456) step:7 - actor/entropy:0.5921 - actor/grad_norm:0.4137 - critic/score/mean:0.1875 - "
        "response_length/mean:412.5 - response_length/clip_ratio:0.0 - actor/pg_loss:0.0123"),
    "iteration 5/50 | elapsed time per iteration: 21392.5 ms |",
    "learning rate: 1.350000E-04 | global batch size: 4096 |",
    "loss scale: 1.0 | grad norm: 3.2 |",
]


def log_text(n: int, special_at: int) -> str:
    lines = [line for i in range(n) for line in block(i)]
    return "\n".join(lines[:special_at] + SPECIAL + lines[special_at:]) + "\n"


class _InProcess:
    """A part's worker run in this process (the pickled round trip included), so that a test
    can shrink the bounds of the index (MAX_ERROR_LINES, ...) for the workers too."""

    def __init__(self, path: Path, start: int, stop: int | None, automaton: str, where: str | None = None) -> None:
        self.out = pickle.dumps(log_parts.scan_part(path, start, stop, automaton == "on", where))
        self.returncode = 0

    def communicate(self) -> tuple[bytes, bytes]:
        return self.out, b""

    def poll(self) -> int:
        return 0


@pytest.fixture
def parts(monkeypatch):
    """Scans in parts whatever the file's size; counts the later parts joined and read here."""
    seen = {"joined": 0, "read_here": 0}
    real_join = log_parts._join

    def join(scan, part):
        seen["joined"] += 1
        real_join(scan, part)

    real_read = slime_log._FileScan.read_to

    def read_to(self, fh, stop):
        if self.ix.timer_elapsed is None and fh.tell() > 0:  # a later part, read by this process
            seen["read_here"] += 1
        real_read(self, fh, stop)

    monkeypatch.setattr(log_parts, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(log_parts, "WORKER_START_S", 0)  # cuts at the size's fractions, where the tests look
    monkeypatch.setattr(log_parts, "_usable_cpus", lambda: 2)
    monkeypatch.setattr(log_parts, "_join", join)
    monkeypatch.setattr(slime_log._FileScan, "read_to", read_to)
    return seen


def one_pass(paths: list[Path]) -> slime_log.LogIndex:
    saved = log_parts.SCAN_PARTS
    log_parts.SCAN_PARTS = 1
    try:
        return scan_logs(paths)
    finally:
        log_parts.SCAN_PARTS = saved


def assert_same(a: slime_log.LogIndex, b: slime_log.LogIndex) -> None:
    for f in fields(a):
        if f.name != "metrics":
            assert getattr(a, f.name) == getattr(b, f.name), f.name
    assert a.metrics.kinds() == b.metrics.kinds()
    for kind in a.metrics.kinds():
        assert a.metrics.count(kind) == b.metrics.count(kind), kind
        assert repr(a.metrics.first(kind)) == repr(b.metrics.first(kind)), kind
        assert a.metrics.keys(kind) == b.metrics.keys(kind), kind
        for key in a.metrics.keys(kind):
            ia, va = a.metrics.series(kind, key)
            ib, vb = b.metrics.series(kind, key)
            assert ia.tobytes() == ib.tobytes() and va.tobytes() == vb.tobytes(), (kind, key)


@pytest.mark.parametrize("n_parts", [2, 3])
def test_parts_give_one_pass_index_wherever_the_cut_falls(tmp_path, monkeypatch, parts, n_parts):
    """The arguments block, a continued command line, a traceback, a wrapped dict and an open timer are moved
    across the cut line by line: a part after something left open is read here, the others joined."""
    monkeypatch.setattr(log_parts, "_start", _InProcess)
    monkeypatch.setattr(log_parts, "SCAN_PARTS", n_parts)
    monkeypatch.setattr(slime_log, "MAX_ERROR_LINES", 6)  # the head/tail samples are joined too
    monkeypatch.setattr(slime_log, "MAX_NOTABLE", 40)
    monkeypatch.setattr(slime_log, "MAX_FINISH_ROLLOUTS", 4)
    n = 25 * n_parts  # past the head sample (SAMPLE_LINES) at each cut
    lines = n * len(block(0))
    path = tmp_path / "driver.log"
    for cut in range(1, n_parts):
        near = lines * cut // n_parts
        for special_at in range(near - len(SPECIAL) - 6, near + 6):
            path.write_text(log_text(n, special_at), encoding="utf-8")
            expected = one_pass([path])
            assert expected.metrics.count("nemo_rl") == 1
            assert expected.metrics.series("verl", "actor/pg_loss")[1].tolist() == [0.0123]
            assert expected.metrics.series("megatron", "grad norm")[1].tolist() == [3.2]
            assert_same(scan_logs([path]), expected)
    assert parts["joined"] > parts["read_here"] > 0


def test_parts_after_another_file_and_a_cut_inside_a_line_free_log(tmp_path, monkeypatch, parts):
    """State carried over from an earlier file (a kept command line, timers, numbered HF records)
    decides as one pass would whether a later part's own choices hold."""
    monkeypatch.setattr(log_parts, "_start", _InProcess)
    first = tmp_path / "a.log"
    first.write_text(log_text(3, 0), encoding="utf-8")
    second = tmp_path / "b.log"
    second.write_text(log_text(50, 150), encoding="utf-8")
    assert_same(scan_logs([first, second]), one_pass([first, second]))
    assert parts["joined"]


def test_worker_processes_and_a_failed_worker(tmp_path, monkeypatch, parts):
    """Real worker processes; a worker that cannot start leaves its part to this process."""
    path = tmp_path / "driver.log"
    path.write_text(log_text(400, 500), encoding="utf-8")
    expected = one_pass([path])
    assert_same(scan_logs([path]), expected)
    assert parts == {"joined": 1, "read_here": 0}

    monkeypatch.setattr(log_parts, "_start", lambda *args: None)
    assert_same(scan_logs([path]), expected)
    assert parts == {"joined": 1, "read_here": 1}


def test_small_gzip_and_unreadable_files_are_read_in_one_pass(tmp_path, monkeypatch):
    import gzip

    monkeypatch.setattr(log_parts, "PARALLEL_MIN_BYTES", 1 << 30)
    path = tmp_path / "driver.log"
    path.write_text(log_text(5, 0), encoding="utf-8")
    assert log_parts._cuts(path) == []
    monkeypatch.setattr(log_parts, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(log_parts, "_usable_cpus", lambda: 2)
    assert len(log_parts._cuts(path)) == log_parts.SCAN_PARTS - 1
    packed = tmp_path / "driver.log.gz"
    packed.write_bytes(gzip.compress(path.read_bytes()))
    assert log_parts._cuts(packed) == []
    assert log_parts._cuts(tmp_path / "missing.log") == []
    os.mkfifo(tmp_path / "pipe")
    assert log_parts._cuts(tmp_path / "pipe") == []  # refused, not waited on
    monkeypatch.setattr(log_parts, "_usable_cpus", lambda: 1)
    assert log_parts._cuts(path) == []


def test_a_worker_imports_nothing_from_the_callers_working_directory(tmp_path, monkeypatch, parts):
    """Run from inside a run directory that carries a module named like the worker's, the worker
    still runs the triage's own code: the planted module never executes."""
    run_dir = tmp_path / "run"
    planted = run_dir / "triage" / "formats"
    planted.mkdir(parents=True)
    marker = tmp_path / "planted-ran"
    for pkg in (run_dir / "triage", planted):
        (pkg / "__init__.py").write_text(f"open({str(marker)!r}, 'w').write('x')\n", encoding="utf-8")
    (planted / "log_parts.py").write_text(f"open({str(marker)!r}, 'w').write('x')\n", encoding="utf-8")
    path = run_dir / "driver.log"
    path.write_text(log_text(400, 500), encoding="utf-8")
    monkeypatch.chdir(run_dir)
    expected = one_pass([Path("driver.log")])
    assert_same(scan_logs([Path("driver.log")]), expected)
    assert parts["joined"] == 1
    assert not marker.exists()
