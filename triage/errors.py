"""One exception tree for everything the triage reports to a user.

    TriageError                 root: anything the triage can explain in one line
    ├── BadInput                the user's input cannot be used (exit code 2)
    │   ├── RunNotFound         the run-id / path names nothing usable
    │   ├── UnsafeRunRef        the run-id escapes the runs root
    │   ├── CorruptArtifact     an artifact is truncated, binary where text is expected, malformed
    │   └── UnsafeArtifact      an artifact would need arbitrary code to load (hostile pickle)
    ├── CorruptCheckpoint       a checkpoint shard is truncated / corrupt: evidence about the run, a finding
    ├── PlaybookError           a playbook or the verdict catalog is malformed (exit code 2)
    └── Unavailable             raised inside a probe: what it needs is not there

Messages say what went wrong and what to do next, on one line.
"""

from __future__ import annotations


class TriageError(Exception):
    """Root of every error the triage explains to its user."""


class BadInput(TriageError):
    """The user's input cannot be used; the CLI exits with code 2."""


class RunNotFound(BadInput):
    pass


class UnsafeRunRef(BadInput):
    pass


class CorruptArtifact(BadInput):
    def __init__(self, path: object, reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{path}: {reason}")


class UnsafeArtifact(BadInput):
    def __init__(self, path: object, reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{path}: refused to load: {reason}")


class CorruptCheckpoint(TriageError):
    """A checkpoint file is truncated or corrupt. Unlike a bad dump or log, this can be the
    root cause itself, so a probe meeting it records a finding naming the file."""

    def __init__(self, path: object, reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{path}: {reason}")


class PlaybookError(TriageError):
    """A playbook or the catalog is malformed; the message names the file and node."""


class Unavailable(TriageError):
    """Raised by a probe when what it needs is missing.

    `artifact` names what is missing, `command` how a user would produce it.
    """

    def __init__(self, artifact: str, reason: str, command: str | None = None) -> None:
        self.artifact = artifact
        self.reason = reason
        self.command = command
        super().__init__(reason)
