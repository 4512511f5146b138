"""What a run is: a directory a job left behind (or a Ray job), read lazily."""

from triage.run.run import Run
from triage.run.source import open_run

__all__ = ["Run", "open_run"]
