"""TensorBoard event files (`events.out.tfevents.*`): the scalars a run logged, into a MetricTable.

verl (`trainer.logger=['tensorboard']`), OpenRLHF (`--use_tensorboard`), slime
(`--use-tensorboard`) and the HF Trainer (`report_to='tensorboard'`, tags under `train/`)
write them. Read with the `tensorboard` package's record reader and Event proto; a
record cut mid-write or failing its checksum stops the triage with a one-line error
naming the file (the reader used by TensorBoard itself silently stops there instead).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from triage.errors import CorruptArtifact
from triage.safe_io import lfs_pointer
from triage.formats.metric_table import MetricTable

KIND = "tensorboard"
MAX_EVENT_FILES = 200
MAX_EVENT_FILE_BYTES = 2 << 30


def is_event_file(name: str) -> bool:
    return name.startswith("events.out.tfevents.")


def _scalar(value) -> float | None:  # noqa: ANN001 - a Summary.Value proto
    kind = value.WhichOneof("value")
    if kind == "simple_value":
        return float(value.simple_value)
    if kind == "tensor":
        from tensorboard.util import tensor_util

        try:
            arr = tensor_util.make_ndarray(value.tensor)
        except (ValueError, TypeError):
            return None
        if arr.size != 1 or arr.dtype.kind not in "fiub":
            return None
        return float(arr.reshape(-1)[0])
    return None


def read_event_file(path: Path, table: MetricTable) -> int:
    """Add one event file's scalars to `table` (kind "tensorboard", indexed by step); how many were read."""
    from tensorboard.compat.proto import event_pb2
    from tensorboard.compat.tensorflow_stub import errors as tf_errors
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import PyRecordReader_New

    try:
        size = path.stat().st_size
    except OSError as exc:
        raise CorruptArtifact(path, f"cannot read TensorBoard event file: {exc.strerror}") from None
    if size > MAX_EVENT_FILE_BYTES:
        raise CorruptArtifact(path, f"TensorBoard event file is {size} bytes, more than the {MAX_EVENT_FILE_BYTES >> 30} GB read")
    try:
        reader = PyRecordReader_New(str(path).encode())
    except tf_errors.OpError as exc:
        raise CorruptArtifact(path, f"cannot open TensorBoard event file: {exc.message}") from None
    read = 0
    records = 0
    try:
        while True:
            try:
                reader.GetNext()
            except tf_errors.OutOfRangeError:
                break
            except tf_errors.DataLossError as exc:
                what = "it is truncated mid-record" if "truncated" in str(exc.message) else "a record fails its checksum"
                raise CorruptArtifact(
                    path, f"TensorBoard event file is corrupt after {records} records: {what}") from None
            records += 1
            try:
                event = event_pb2.Event.FromString(reader.record())
            except Exception:  # noqa: BLE001 - the proto library's DecodeError and friends
                raise CorruptArtifact(path, f"TensorBoard record {records} is not an Event proto") from None
            if not event.HasField("summary"):
                continue
            step = int(event.step)
            row: dict[str, float] = {}
            for value in event.summary.value:
                v = _scalar(value)
                if v is not None:
                    row[value.tag] = v
            if row:
                table.add(KIND, step, row)
                read += len(row)
    finally:
        try:
            reader.file_handle.close()
        except Exception:  # noqa: BLE001
            pass
    return read


def read_event_files(paths: Iterable[Path], lfs_pointers: list[Path] | None = None) -> MetricTable:
    """Every event file's scalars, in one table; files in name order (their names carry the start time). A Git LFS
    pointer left in an event file's place (a clone of an HF Hub output folder without `git lfs pull`) holds no
    records: it is skipped and added to `lfs_pointers`, not read as a corrupt file."""
    table = MetricTable()
    for path in sorted(Path(p) for p in paths)[:MAX_EVENT_FILES]:
        if lfs_pointer(path):
            if lfs_pointers is not None:
                lfs_pointers.append(path)
            continue
        read_event_file(path, table)
    return table


