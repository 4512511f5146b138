"""One view of a run's metric series, whatever framework logged them, wherever.

slime / miles / Relax log `step N: {'train/grad_norm': …}` and `rollout N: {'rollout/log_probs': …}`;
TRL / axolotl log `grad_norm`, `kl`, `entropy`, `reward`… in trainer_state.json's log_history
and on the console; verl `step:N - actor/grad_norm:…`; ms-swift JSON lines; OpenRLHF its
progress bar. Beyond the log: TensorBoard event files, W&B offline runs, JSONL and CSV files.
Probes ask for canonical names (`grad_norm`, `kl`, `entropy`, …) and get a `Series`
with the source key it came from, so evidence can quote the real metric name. What each
framework calls each canonical metric is data: `triage/frameworks/metrics.yaml`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from triage.formats.metric_table import MetricTable

if TYPE_CHECKING:
    from triage.run.run import Run

# Where records come from, by MetricTable kind: a log grammar's kinds, trainer_state.json's
# "hf", and the readers beyond the log.
EXTERNAL_KINDS = ("tensorboard", "wandb", "jsonl", "csv", "table", "wandb_summary")  # (the last: wandb_console.py)
PASTED_TABLE = "table"  # triage/formats/pasted_table.py
PASTED_RECORDS = "hf_paste"  # triage/formats/pasted_records.py
SOURCE_OF_KIND = {
    "step": "log:slime_dict", "critic-step": "log:slime_dict", "rollout": "log:slime_dict", "perf": "log:slime_dict",
    "eval": "log:slime_dict", "passrate": "log:slime_dict", "multi_turn": "log:slime_dict",
    "verl": "log:verl_console", "hf_log": "log:hf_dict", "hf_log_eval": "log:hf_dict", "hf_log_summary": "log:hf_dict",
    "swift": "log:swift_json", "openrlhf": "log:tqdm_postfix", "hf": "trainer_state",
    "tensorboard": "tensorboard", "wandb": "wandb", "jsonl": "jsonl", "csv": "csv", "table": "log:pasted_table",
    "hf_paste": "log:pasted_records", "wandb_summary": "log:wandb_summary", "nemo_rl": "log:nemo_rl_block",
}
# kinds a framework cell's kind also stands for: the HF Trainer's printed dicts and the
# log_history records a user pasted are the same records as trainer_state.json's, read when that
# file is absent.
_ALSO_KINDS = {"hf": ("hf_log", PASTED_RECORDS)}


def _candidates() -> dict[str, tuple[tuple[str, str], ...]]:
    """canonical name -> (kind, key) pairs, most specific first, from triage/frameworks/metrics.yaml.

    The log's and trainer_state's kinds come first, in the file's column order; then the
    same keys as tags of TensorBoard, W&B and JSONL records (also under `train/`, the
    prefix the HF Trainer's callbacks add).
    """
    from triage.frameworks import metric_vocabulary

    table: dict[str, tuple[tuple[str, str], ...]] = {}
    vocabulary = metric_vocabulary()
    own = {name: {spec.partition(":")[2] for cell in row.values() for spec in cell["keys"]}
           for name, row in vocabulary.items()}
    for name, row in vocabulary.items():
        seen: dict[tuple[str, str], None] = {}
        bare: dict[str, None] = {}
        for cell in row.values():
            for spec in cell["keys"]:
                kind, sep, key = spec.partition(":")
                if not sep:
                    raise ValueError(f"metrics.yaml: {name}: {spec!r} is not kind:key")
                seen[(kind, key)] = None
                for alt in _ALSO_KINDS.get(kind, ()):
                    seen[(alt, key)] = None
                bare[key] = None
        for ext in EXTERNAL_KINDS:
            for key in bare:
                seen[(ext, key)] = None
                if not key.startswith("train/"):
                    seen[(ext, f"train/{key}")] = None
        # A pasted table's header drops the key's namespace (`completions/clipped_ratio` is
        # headed `clipped_ratio`); a compound last segment still names one metric, a bare
        # `mean` or `max` does not, nor one that is another metric's whole key (verl's
        # `critic/grad_norm` is no table's `grad_norm` column: that is the policy's).
        for key in bare:
            last = key.rsplit("/", 1)[-1]
            if last != key and ("_" in last or "-" in last) \
                    and not any(last in keys for other, keys in own.items() if other != name):
                seen[(PASTED_TABLE, last)] = None
        table[name] = tuple(seen)
    return table


# canonical name -> candidate (kind, key) pairs, most specific first (see _candidates).
CANONICAL: dict[str, tuple[tuple[str, str], ...]] = _candidates()
# the columns a CSV metric file's header must name one of to be read (triage/formats/csv_metrics.py)
CSV_KEYS = frozenset(key for pairs in CANONICAL.values() for kind, key in pairs if kind == "csv")
TABLE_KEYS = frozenset(key for pairs in CANONICAL.values() for kind, key in pairs if kind == PASTED_TABLE)


@dataclass(frozen=True)
class Series:
    """One metric over steps: `steps[i]` is the record index (step / rollout id / HF global step)."""

    name: str
    source: str  # "kind:key", e.g. "step:train/grad_norm" or "hf:grad_norm"
    steps: np.ndarray
    values: np.ndarray

    def __len__(self) -> int:
        return int(self.values.shape[0])

    @property
    def step_word(self) -> str:
        """What a report calls one of `steps`: "step", or "record" where the records carry no step and the scan
        numbered them in print order (the HF Trainer's printed dicts: `ORDINAL_KINDS`)."""
        from triage.formats.metric_lines import ORDINAL_KINDS

        return "record" if self.source.split(":", 1)[0] in ORDINAL_KINDS else "step"

    @property
    def key(self) -> str:
        return self.source.split(":", 1)[1]

    def finite(self) -> Series:
        ok = np.isfinite(self.values)
        return Series(self.name, self.source, self.steps[ok], self.values[ok])


class Metrics:
    """All metric records of a run: the log's and trainer_state.json's together."""

    def __init__(self, table: MetricTable, pasted: dict[str, int] | None = None) -> None:
        self.table = table
        self.pasted = pasted or {}  # path -> records of the tables and typed or printed records in that paste

    @classmethod
    def from_run(cls, run: Run) -> Metrics:
        """The log's records, trainer_state.json's, and those of TensorBoard / W&B / JSONL files found."""
        table = MetricTable()
        pasted: dict[str, int] = {}
        if run.artifacts.logs:
            table.merge(run.log.metrics)
        state = run.trainer_state
        if state is not None:
            table.merge(state.metrics)
        a = run.artifacts
        tb = getattr(a, "tensorboard", None)
        if tb:
            from triage.formats.tensorboard import read_event_files

            pointers: list[Path] = []
            table.merge(read_event_files(tb, pointers))
            if pointers:
                run.notes.append(f"{len(pointers)} TensorBoard event file(s) are Git LFS pointers, not the files "
                                 f"({pointers[0].name}): not read; `git lfs pull` fetches them")
        wb = getattr(a, "wandb_runs", None)
        if wb:
            from triage.formats.wandb_offline import WandbUnavailable, read_wandb_runs

            try:
                table.merge(read_wandb_runs(wb))
            except WandbUnavailable as exc:  # the reader is not installed: those records are not seen
                run.notes.append(f"W&B run files were not read: {exc}")
        jl = getattr(a, "metric_jsonl", None)
        if jl:
            from triage.formats.jsonl_metrics import read_jsonl_metrics

            table.merge(read_jsonl_metrics(jl))
        csvs = getattr(a, "metric_csv", None)
        if csvs:
            from triage.formats.csv_metrics import read_csv_metrics

            table.merge(read_csv_metrics(csvs, CSV_KEYS.__contains__))
        if run.artifacts.logs:
            from triage.formats.pasted_table import pasted_tables

            counts: list[int] = []
            table.merge(pasted_tables(run.pastes.values(), TABLE_KEYS.__contains__,
                                      printed_dicts=not table.count("hf_log"), counts=counts))
            pasted = {path: n for path, n in zip(run.pastes, counts) if n}
            if not getattr(a, "trainer_states", None):  # (with the file itself, its records are read from it)
                from triage.formats.pasted_records import pasted_records

                table.merge(pasted_records(run.pastes.values()))
            from triage.formats.wandb_console import summary_records

            table.merge(summary_records(run.pastes.values()))
        return cls(table, pasted)

    def records(self) -> dict[str, dict[str, object]]:
        """Per canonical metric the run has: how many records, the key, and where they came from.

        `{"grad_norm": {"records": 120, "key": "actor/grad_norm", "kind": "verl",
        "source": "log:verl_console"}}`. Sources: `log:<grammar>` (slime_dict,
        verl_console, hf_dict, swift_json, tqdm_postfix), `trainer_state`, `tensorboard`,
        `wandb`, `jsonl`, `csv`. A coverage figure: which evidence the metric probes had.
        """
        out: dict[str, dict[str, object]] = {}
        for name in CANONICAL:
            series = self.get(name)
            if series is None:
                continue
            kind = series.source.split(":", 1)[0]
            out[name] = {"records": len(series), "key": series.key, "kind": kind,
                         "source": SOURCE_OF_KIND.get(kind, kind)}
        return out

    def records_per_kind(self) -> dict[str, int]:
        """How many records of each kind (step, rollout, verl, hf, tensorboard, wandb, ...) the run has."""
        return {kind: self.table.count(kind) for kind in self.table.kinds()}

    def empty(self) -> bool:
        return self.table.empty()

    def get(self, name: str) -> Series | None:
        """The canonical series `name`, or None when the run did not log it."""
        for kind, key in CANONICAL[name]:
            if self.table.has(kind, key):
                steps, values = self.table.series(kind, key)
                return Series(name, f"{kind}:{key}", steps, values)
        return None

    def raw(self, kind: str, key: str) -> Series | None:
        if not self.table.has(kind, key):
            return None
        steps, values = self.table.series(kind, key)
        return Series(key, f"{kind}:{key}", steps, values)

    def first(self, kind: str) -> tuple[int, dict[str, float]] | None:
        return self.table.first(kind)

    def available(self) -> list[str]:
        return [name for name in CANONICAL if self.get(name) is not None]


def number_arg(run: Run, *names: str) -> float | None:
    """The first of the run's arguments `names` that holds a number (args are often strings), else None.

    An argument source that cannot be read counts as absent: a metric probe must not fail
    because the command line is unreadable.
    """
    from triage.errors import TriageError

    for name in names:
        try:
            value = run.args.get(name)
        except TriageError:
            return None
        if isinstance(value, bool) or value is None:
            continue
        try:
            number = float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            continue
        if np.isfinite(number):
            return number
    return None


def flag_arg(run: Run, *names: str) -> bool | None:
    """Whether any of the boolean arguments `names` is on; None when none of them was given."""
    from triage.errors import TriageError

    seen = False
    for name in names:
        try:
            value = run.args.get(name)
        except TriageError:
            return None
        if value is None:
            continue
        seen = True
        if value is True or (isinstance(value, str) and value.strip().lower() in ("true", "1", "yes", "")):
            return True
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value != 0:
            return True
    return False if seen else None
