"""One exception tree for everything the triage reports to a user.

    TriageError                 root: anything the triage can explain in one line
    ├── BadInput                the user's input cannot be used (exit code 2)
    │   ├── RunNotFound         the run-id / path names nothing usable
    │   ├── UnsafeRunRef        the run-id escapes the runs root
    │   ├── CorruptArtifact     an artifact is truncated, binary where text is expected, malformed
    │   │   └── RefusedFile     a file not read: not a regular file, outside the allowed roots, a
    │   │                       symlink loop, permission denied (also an OSError, so readers' OS
    │   │                       error handling applies)
    │   └── UnsafeArtifact      an artifact would need arbitrary code to load (hostile pickle)
    ├── CorruptCheckpoint       a checkpoint shard is truncated / corrupt: evidence about the run, a finding
    ├── PlaybookError           a playbook or the verdict catalog is malformed (exit code 2)
    └── Unavailable             raised inside a probe: what it needs is not there

Messages say what went wrong and what to do next, on one line. No message ever passes on
a library's advice to load a file unsafely (torch's "re-run with weights_only=False"):
`without_unsafe_advice` strips it from every TriageError's text.
"""

from __future__ import annotations

import re

# Sentences a library adds to a refused load that tell the reader how to load it anyway.
_UNSAFE_ADVICE = re.compile(
    r"weights_only|trusted source|trust the source|can still be loaded|arbitrary code execution|"
    r"add_safe_globals|safe_globals|allowlist|file an issue|documentation of torch\.load|pytorch\.org",
    re.I,
)
_SENTENCE_END = re.compile(r"(?<=[.!?:])\s+|\n+")


def without_unsafe_advice(text: str) -> str:
    """`text` without the sentences that advise loading unsafely (torch's weights_only=False)."""
    if not _UNSAFE_ADVICE.search(text):
        return text
    kept = [s.strip() for s in _SENTENCE_END.split(text) if s.strip() and not _UNSAFE_ADVICE.search(s)]
    return " ".join(kept) or "the weights-only unpickler refused the file"


class TriageError(Exception):
    """Root of every error the triage explains to its user."""

    def __str__(self) -> str:
        return without_unsafe_advice(Exception.__str__(self))


class BadInput(TriageError):
    """The user's input cannot be used; the CLI exits with code 2."""


class RunNotFound(BadInput):
    pass


class UnsafeRunRef(BadInput):
    pass


class CorruptArtifact(BadInput):
    def __init__(self, path: object, reason: str) -> None:
        self.path = str(path)
        self.reason = reason = without_unsafe_advice(reason)
        super().__init__(f"{path}: {reason}")


class RefusedFile(CorruptArtifact, OSError):
    """A file the triage did not read: a FIFO, device or socket, a /proc, /sys or /dev entry,
    a path outside the run and the allowed roots, a symlink loop, or one the OS refused.

    It is an OSError too (with `errno` and `strerror` set), so a reader that already turns
    OS errors into its own message or finding does the same for a refusal.
    """

    def __init__(self, path: object, reason: str, errno: int = 0) -> None:
        CorruptArtifact.__init__(self, path, reason)
        self.errno = errno
        self.strerror = reason
        self.filename = str(path)


class UnsafeArtifact(BadInput):
    def __init__(self, path: object, reason: str) -> None:
        self.path = str(path)
        self.reason = reason = without_unsafe_advice(reason)
        super().__init__(f"{path}: refused to load: {reason}")


class CorruptCheckpoint(TriageError):
    """A checkpoint file is truncated or corrupt. Unlike a bad dump or log, this can be the
    root cause itself, so a probe meeting it records a finding naming the file."""

    def __init__(self, path: object, reason: str) -> None:
        self.path = str(path)
        self.reason = reason = without_unsafe_advice(reason)
        super().__init__(f"{path}: {reason}")


class PlaybookError(TriageError):
    """A playbook or the catalog is malformed; the message names the file and node."""


class Unavailable(TriageError):
    """Raised by a probe when what it needs is missing.

    `artifact` names what is missing, `command` how a user would produce it.
    """

    def __init__(self, artifact: str, reason: str, command: str | None = None) -> None:
        self.artifact = artifact
        self.reason = reason = without_unsafe_advice(reason)
        self.command = command
        super().__init__(reason)
