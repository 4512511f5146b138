"""Debug dumps: the real layouts load, hostile and broken files are refused with one line."""

from __future__ import annotations

import os
import pickle

import pytest
import torch

from triage.errors import CorruptArtifact, UnsafeArtifact
from triage.formats.dumps import load_rollout_dump, load_train_dump, reward_value, safe_torch_load


class _RunsShell:
    """Pickles as a call to os.system: loading it without protection would create a file."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


class _WritesFile:
    """Pickles as a call to open() + write via builtins.exec."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (exec, (f"open({self.marker!r}, 'w').write('pwned')",))


def _sample(i, reward=1.0, status="completed", **extra):
    response_length = 3 + i
    return {
        "group_index": i // 2,
        "index": i,
        "prompt": "1+1=",
        "tokens": list(range(5 + response_length)),
        "response": "2" * response_length,
        "response_length": response_length,
        "label": "2",
        "reward": reward,
        "loss_mask": [1] * response_length,
        "rollout_log_probs": [-0.5] * response_length,
        "status": status,
        "metadata": {},
        **extra,
    }


# --- safe_torch_load ---------------------------------------------------------------


@pytest.mark.parametrize("payload_cls", [_RunsShell, _WritesFile])
def test_hostile_pickle_is_refused_and_its_code_never_runs(tmp_path, payload_cls):
    marker = tmp_path / "pwned"
    path = tmp_path / "rollout_data" / "0.pt"
    path.parent.mkdir()
    torch.save({"rollout_id": 0, "samples": [payload_cls(marker)]}, path)

    with pytest.raises(UnsafeArtifact) as err:
        load_rollout_dump(path)

    assert not marker.exists()
    assert "needs arbitrary code to unpickle" in str(err.value)
    assert ("system" in err.value.reason) or ("exec" in err.value.reason)
    assert "\n" not in str(err.value)


def test_hostile_raw_pickle_not_written_by_torch_save_is_refused(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "0.pt"
    path.write_bytes(pickle.dumps({"rollout_id": 0, "samples": [_RunsShell(marker)]}, protocol=2))
    with pytest.raises(UnsafeArtifact, match="system"):
        safe_torch_load(path)
    assert not marker.exists()


def test_truncated_dump_is_corrupt_not_a_traceback(tmp_path):
    path = tmp_path / "0.pt"
    torch.save({"rollout_id": 0, "samples": [_sample(0)]}, path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CorruptArtifact, match="truncated"):
        load_rollout_dump(path)


@pytest.mark.parametrize(
    ("content", "message"),
    [(b"", "empty"), (b"this is a log line, not a tensor file\n", "not a torch.save file")],
)
def test_empty_and_non_torch_files_are_corrupt(tmp_path, content, message):
    path = tmp_path / "0.pt"
    path.write_bytes(content)
    with pytest.raises(CorruptArtifact, match=message) as err:
        safe_torch_load(path)
    assert "\n" not in str(err.value)


def test_missing_file_and_directory_are_corrupt(tmp_path):
    with pytest.raises(CorruptArtifact, match="does not exist"):
        safe_torch_load(tmp_path / "nope.pt")
    with pytest.raises(CorruptArtifact, match="is a directory"):
        safe_torch_load(tmp_path)


def test_tensors_load_on_cpu(tmp_path):
    path = tmp_path / "x.pt"
    torch.save({"t": torch.arange(4.0)}, path)
    out = safe_torch_load(path)
    assert out["t"].device.type == "cpu"
    assert out["t"].tolist() == [0.0, 1.0, 2.0, 3.0]


# --- rollout dumps -------------------------------------------------------------------


def test_rollout_dump_exposes_lengths_rewards_statuses(tmp_path):
    path = tmp_path / "rollout_data" / "3.pt"
    path.parent.mkdir()
    samples = [
        _sample(0, reward=1.0),
        _sample(1, reward=0.0, status="truncated"),
        _sample(2, reward={"acc": 1, "format": 0.5}, rollout_routed_experts=torch.zeros(5, 2, dtype=torch.int32)),
    ]
    samples[1]["response_length"] = None  # fall back to the loss mask's length
    torch.save({"rollout_id": 3, "samples": samples}, path)

    dump = load_rollout_dump(path)

    assert dump.rollout_id == 3
    assert len(dump) == 3
    assert dump.response_lengths() == [3, 4, 5]
    assert dump.rewards() == [1.0, 0.0, 1.0]
    assert dump.rewards(reward_key="format") == [1.0, 0.0, 0.5]  # a plain float reward has no keys to pick from
    assert dump.statuses() == ["completed", "truncated", "completed"]
    assert dump.status_counts() == {"completed": 2, "truncated": 1}
    assert dump.has_routed_experts()
    assert not dump.is_eval


def test_eval_dump_is_recognised_and_routed_experts_absent(tmp_path):
    path = tmp_path / "eval_0.pt"
    torch.save({"rollout_id": 0, "samples": [_sample(0)]}, path)
    dump = load_rollout_dump(path)
    assert dump.is_eval
    assert not dump.has_routed_experts()


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ([1, 2, 3], "found a list"),
        ({"rollout_id": 0}, "'samples' list missing"),
        ({"rollout_id": 0, "samples": ["text"]}, "sample 0 is a str"),
    ],
)
def test_rollout_dump_with_wrong_shape_says_what_was_expected(tmp_path, payload, message):
    path = tmp_path / "0.pt"
    torch.save(payload, path)
    with pytest.raises(CorruptArtifact, match=message):
        load_rollout_dump(path)


def test_reward_value_prefers_reward_key_then_first_number():
    assert reward_value({"label": "x", "score": 2}) == 2.0
    assert reward_value({"score": 2, "acc": 0}, "acc") == 0.0
    assert reward_value(torch.tensor(0.25)) == 0.25
    assert reward_value(None) is None


# --- train dumps ---------------------------------------------------------------------


def test_legacy_train_dump_columns_become_per_sample_lists(tmp_path):
    path = tmp_path / "train_data" / "2_1.pt"
    path.parent.mkdir()
    rollout_data = {
        "tokens": [torch.tensor([1, 2, 3, 4]), torch.tensor([5, 6, 7, 8, 9])],
        "response_lengths": [2, 3],
        "total_lengths": [4, 5],
        "loss_masks": [torch.tensor([1, 1]), torch.tensor([1, 0, 1])],
        "log_probs": [torch.tensor([-0.1, -0.2]), torch.tensor([-0.3, -0.4, -0.5])],
        "ref_log_probs": [torch.tensor([-0.1, -0.2]), torch.tensor([-0.3, -0.4, -0.5])],
        "rollout_log_probs": [[-0.11, -0.21], [-0.31, -0.41, -0.51]],
        "advantages": [torch.tensor([0.5, 0.5]), torch.tensor([-0.5, -0.5, -0.5])],
        "rewards": [1.0, 0.0],
        "micro_batch_indices": [[0, 1]],
    }
    torch.save({"rollout_id": 2, "rank": 1, "rollout_data": rollout_data, "cp_size": 1}, path)

    dump = load_train_dump(path)

    assert (dump.layout, dump.rollout_id, dump.rank, dump.num_samples) == ("legacy", 2, 1, 2)
    assert dump.tokens == [[1, 2, 3, 4], [5, 6, 7, 8, 9]]
    assert dump.loss_mask == [[1, 1], [1, 0, 1]]
    assert dump.log_probs[1] == pytest.approx([-0.3, -0.4, -0.5])
    assert dump.rollout_log_probs[0] == pytest.approx([-0.11, -0.21])
    assert dump.advantages[0] == pytest.approx([0.5, 0.5])
    assert dump.response_lengths == [2, 3]
    assert dump.scalars["rewards"] == [1.0, 0.0]
    assert dump.cp_size == 1
    assert dump.get("values") is None


def test_slime_v2_train_dump(tmp_path):
    path = tmp_path / "train_data" / "7.pt"
    path.parent.mkdir()
    samples = [
        {"data_parallel_rank": 1, "sample_index": 0, "rollout_position": 0,
         "tokens": torch.tensor([1, 2, 3]), "response_lengths": 2, "loss_masks": torch.tensor([1, 1]),
         "log_probs": torch.tensor([-1.0, -2.0]), "ref_log_probs": torch.tensor([-1.0, -2.5]), "rewards": 1.0},
        {"data_parallel_rank": 0, "sample_index": 1, "rollout_position": 1,
         "tokens": torch.tensor([4, 5, 6, 7]), "response_lengths": 3, "loss_masks": torch.tensor([1, 1, 0]),
         "log_probs": torch.tensor([-0.5, -0.5, -0.5]), "ref_log_probs": torch.tensor([-0.5, -0.5, -0.5]), "rewards": 0.0},
    ]
    torch.save({"format_version": 2, "rollout_id": 7, "rank": 0, "samples": samples,
                "dp_shards": [{"rank": 0, "data_parallel_rank": 0, "sample_indices": [1]}], "raw_reward": [1.0, 0.0]}, path)

    dump = load_train_dump(path)

    assert (dump.layout, dump.rollout_id, dump.num_samples) == ("v2", 7, 2)
    assert dump.ref_log_probs[0] == pytest.approx([-1.0, -2.5])
    assert dump.loss_mask == [[1, 1], [1, 1, 0]]
    assert dump.response_lengths == [2, 3]
    assert dump.scalars["raw_reward"] == [1.0, 0.0]
    assert dump.rollout_log_probs is None
    assert "dp_shards" in dump.extra_keys


def test_relax_train_dump_with_samples_of_lists(tmp_path):
    path = tmp_path / "1_0.pt"
    torch.save({"rollout_id": 1, "rank": 0, "samples": [
        {"sample_index": 0, "tokens": [1, 2, 3], "loss_masks": [1, 1], "log_probs": [-0.2, -0.3],
         "advantages": [1.0, 1.0], "decoded_tokens": ["a", "b", "c"]},
    ]}, path)
    dump = load_train_dump(path)
    assert dump.layout == "relax"
    assert dump.log_probs == [pytest.approx([-0.2, -0.3])]
    assert dump.response_lengths == [2]


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"rollout_id": 0, "rank": 0}, "expected a train dump"),
        ({"format_version": 3, "samples": []}, "format_version 3"),
        ("just a string", "found a str"),
    ],
)
def test_train_dump_with_wrong_shape_is_corrupt(tmp_path, payload, message):
    path = tmp_path / "0_0.pt"
    torch.save(payload, path)
    with pytest.raises(CorruptArtifact, match=message):
        load_train_dump(path)


def test_hostile_train_dump_is_refused(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "0_0.pt"
    torch.save({"rollout_id": 0, "rank": 0, "rollout_data": {"tokens": [_RunsShell(marker)]}}, path)
    with pytest.raises(UnsafeArtifact):
        load_train_dump(path)
    assert not marker.exists()


# --- a run's rollout dumps, as the probes read them ----------------------------------


def _run_with_dumps(tmp_path, names, hostile=None):
    from triage.run import open_run

    d = tmp_path / "run"
    (d / "rollout_data").mkdir(parents=True)
    (d / "job.log").write_text("[2026-08-01 10:00:00] train.py:1 - hello\n")
    for name in names:
        rid = int(name.removeprefix("eval_"))
        sample = _RunsShell(hostile) if name == "2" and hostile else _sample(0)
        torch.save({"rollout_id": rid, "samples": [sample]}, d / "rollout_data" / f"{name}.pt")
    return d, open_run(str(d))


def test_run_dumps_come_in_rollout_order_eval_last_and_stop_at_the_limit(tmp_path):
    _, run = _run_with_dumps(tmp_path, ["10", "eval_0", "2", "1"])
    problems: list[str] = []
    assert [p.name for p, _ in run.rollout_dumps(problems)] == ["1.pt", "2.pt", "10.pt"]
    assert [p.name for p, _ in run.rollout_dumps(problems, limit=2)] == ["1.pt", "2.pt"]
    assert [d.rollout_id for _, d in run.rollout_dumps(problems, with_eval=True)] == [1, 2, 10, 0]
    assert problems == []


def test_a_dump_that_cannot_be_read_is_listed_and_the_next_one_read(tmp_path, monkeypatch):
    import triage.formats.dumps as dumps
    from triage.errors import TriageError

    _, run = _run_with_dumps(tmp_path, ["1", "2", "3"])
    real = dumps.load_rollout_dump

    def load(path):
        if path.name == "1.pt":
            raise TriageError(f"{path}: still being written by rank 0")
        return real(path)

    monkeypatch.setattr(dumps, "load_rollout_dump", load)
    problems: list[str] = []
    assert [p.name for p, _ in run.rollout_dumps(problems, limit=2)] == ["2.pt", "3.pt"]
    assert len(problems) == 1 and problems[0].endswith("1.pt: still being written by rank 0")


def test_a_hostile_dump_stops_every_probe_that_reads_dumps(tmp_path):
    """The reward check once listed a refused dump and went on; now it stops as the others do."""
    from probes.reward_signal import RewardParams, dump_answers

    marker = tmp_path / "pwned"
    _, run = _run_with_dumps(tmp_path, ["1", "2"], hostile=marker)  # 2.pt runs a shell if unpickled
    with pytest.raises(UnsafeArtifact, match="2.pt"):
        dump_answers(run, RewardParams())
    assert not marker.exists()
