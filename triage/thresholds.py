"""The numeric thresholds the probes judge a run by, read once from `thresholds.yaml`.

Each entry carries its value, its unit and its source (a guide passage, a paper, a
framework default), and how it was chosen where no source gives a number. A probe asks
by name:

    threshold("grad_norm.unstable")  ->  10.0

The file is checked when first read: an unknown field, a missing value / unit / source,
a value that is not a number, or a `source: none` without `chosen` stops with one line
naming the entry. Asking for a name the file does not hold is an error too.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from triage.errors import TriageError

THRESHOLDS_FILE = Path(__file__).with_name("thresholds.yaml")
FIELDS = ("value", "unit", "source", "chosen")
REQUIRED = ("value", "unit", "source")


class ThresholdError(TriageError):
    """The thresholds file is malformed, or a probe asked for a threshold it does not hold."""


@dataclass(frozen=True)
class Threshold:
    name: str
    value: float | int
    unit: str
    source: str
    chosen: str | None = None

    @property
    def sourced(self) -> bool:
        """Whether a source outside this project gives the figure (not only `chosen`)."""
        return self.source.strip().lower() != "none"


def _entry(name: Any, raw: Any, where: str) -> Threshold:
    if not isinstance(name, str) or not name:
        raise ThresholdError(f"{where}: threshold names must be non-empty strings, got {name!r}")
    if not isinstance(raw, dict):
        raise ThresholdError(f"{where}: {name}: expected a mapping of {', '.join(FIELDS)}")
    unknown = sorted(set(raw) - set(FIELDS))
    if unknown:
        raise ThresholdError(f"{where}: {name}: unknown field {unknown[0]!r} (allowed: {', '.join(FIELDS)})")
    missing = [f for f in REQUIRED if raw.get(f) in (None, "")]
    if missing:
        raise ThresholdError(f"{where}: {name}: missing {missing[0]}")
    value = raw["value"]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ThresholdError(f"{where}: {name}: value {value!r} is not a number")
    for text in ("unit", "source", "chosen"):
        if text in raw and not isinstance(raw[text], str):
            raise ThresholdError(f"{where}: {name}: {text} must be text")
    entry = Threshold(name, value, raw["unit"], raw["source"], raw.get("chosen"))
    if not entry.sourced and not (entry.chosen or "").strip():
        raise ThresholdError(f"{where}: {name}: source is none, so `chosen` must say how the value was chosen")
    return entry


def load_thresholds(path: Path = THRESHOLDS_FILE) -> dict[str, Threshold]:
    """Every entry of a thresholds file, checked; `ThresholdError` (one line) when it is malformed."""
    where = path.name
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ThresholdError(f"{where}: cannot read the thresholds file: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        raise ThresholdError(f"{where}: not valid YAML{at}") from None
    if not isinstance(raw, dict) or not raw:
        raise ThresholdError(f"{where}: expected a mapping of threshold names to entries")
    return {name: _entry(name, entry, where) for name, entry in raw.items()}


@lru_cache(maxsize=1)
def thresholds() -> dict[str, Threshold]:
    """The project's thresholds, read and checked once."""
    return load_thresholds()


def entry(name: str) -> Threshold:
    table = thresholds()
    if name not in table:
        raise ThresholdError(f"{THRESHOLDS_FILE.name}: no threshold named {name!r}")
    return table[name]


def threshold(name: str) -> float:
    """The value of a threshold, as a float."""
    return float(entry(name).value)


def count(name: str) -> int:
    """The value of a threshold that counts something (records, samples), as an int."""
    value = entry(name).value
    if isinstance(value, float) and not value.is_integer():
        raise ThresholdError(f"{THRESHOLDS_FILE.name}: {name}: value {value!r} is not a whole number")
    return int(value)
