"""A notebook's saved output as a log: the text of its stream records, unwrapped as it is read.

Kaggle's log of a notebook run (the `.log` it offers for download) is a JSON array written one
record per line:

    [{"stream_name":"stderr","time":7.22,"data":"0.00s - Debugger warning: …\\n"}
    ,{"stream_name":"stdout","time":19.54,"data":"{'loss': 0.0, 'grad_norm': 0.41, …}\\n"}
    …
    ]

(Rusheel86/Chaos-Economy's vsr-new.log, a TRL GRPO run.) The scan reads the `data` text of each
record in order, so its line numbers count the lines of the output, not of the array. A line that
is not a whole record (an array cut mid-record) is read as it is. Memory stays one record.
"""

from __future__ import annotations

import io
from typing import BinaryIO

from triage import safe_io

__all__ = ["MAGIC", "NotebookStream", "is_notebook_stream"]

MAGIC = b'[{"stream_name":'
# a record longer than this is read in pieces, each as it is (a notebook's output line of several MB)
MAX_RECORD_BYTES = 8 << 20


def is_notebook_stream(head: bytes) -> bool:
    """Whether a file's first bytes open a notebook's stream array."""
    return head.lstrip(b"\xef\xbb\xbf").startswith(MAGIC)


class NotebookStream(io.RawIOBase):
    """The concatenated `data` of the stream records of `raw`, as a readable binary stream."""

    def __init__(self, raw: BinaryIO) -> None:
        super().__init__()
        self._raw = raw
        self._buf = bytearray()
        self._eof = False

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:  # type: ignore[override]
        want = len(b)
        while len(self._buf) < want and not self._eof:
            line = self._raw.readline(MAX_RECORD_BYTES)
            if not line:
                self._eof = True
                break
            self._buf += _record_text(line)
        n = min(want, len(self._buf))
        b[:n] = self._buf[:n]
        del self._buf[:n]
        return n

    def close(self) -> None:
        try:
            self._raw.close()
        finally:
            super().close()


def _record_text(line: bytes) -> bytes:
    body = line.strip()
    if body[:1] in (b"[", b","):
        body = body[1:]
    if body.endswith(b"}]"):
        body = body[:-1]
    if body in (b"", b"]"):
        return b""
    try:
        record = safe_io.loads_json(body)
    except ValueError:
        return line  # not a whole record (the array cut mid-record): read as it is
    data = record.get("data") if isinstance(record, dict) else None
    return data.encode("utf-8", "replace") if isinstance(data, str) else b""
