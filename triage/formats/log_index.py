"""What one streaming pass over a job's logs keeps: small, bounded, enough for every static probe."""

from __future__ import annotations

from dataclasses import dataclass, field

from triage.formats.metric_table import MetricTable

# How many lines of each kind the index keeps (first half and last half of the log).
MAX_ERROR_LINES = 4000
MAX_FINISH_ROLLOUTS = 100
MAX_NOTABLE = 2000
MAX_TRACEBACKS = 50


@dataclass(frozen=True)
class LogLine:
    """One log line as the triage quotes it back to the user."""

    path: str  # the file it came from
    line_no: int  # 1-based
    text: str  # the message: ANSI codes stripped, actor prefix removed, capped at 2000 chars
    source: str | None = None  # Ray actor prefix, e.g. "MegatronTrainRayActor pid=1234"
    timestamp: str | None = None
    level: str | None = None  # INFO / WARNING / ERROR where the format says
    tag: str | None = None  # for notable lines: what made the parser keep it

    def where(self) -> str:
        return f"{self.path}:{self.line_no}"


@dataclass(frozen=True)
class Traceback:
    path: str
    line_no: int  # line of "Traceback (most recent call last):"
    frames: tuple[str, ...]  # 'File "...", line N, in fn' lines, at most 40 (first 20 + last 20)
    exception: str  # the final "SomeError: message" line
    source: str | None = None


@dataclass(frozen=True)
class PlacementGroupWait:
    """`Waiting for placement group of N GPUs (elapsed Xs): T GPUs registered with Ray, A available.`"""

    line: LogLine
    gpus_needed: int
    elapsed_s: float
    gpus_registered: int
    gpus_available: int


@dataclass
class TimerStats:
    count: int = 0
    total_s: float = 0.0
    max_s: float = 0.0
    last_s: float = 0.0
    started_not_ended: int = 0


@dataclass
class LogIndex:
    files: list[str] = field(default_factory=list)
    bytes: int = 0
    lines: int = 0
    framework: str = "unknown"  # slime | miles | relax | verl | hf_trainer | ms_swift | openrlhf | unknown
    metrics: MetricTable = field(default_factory=MetricTable)  # kinds: step, critic-step, rollout, perf, eval, passrate, multi_turn
    arguments: dict[str, str] | None = None  # Megatron's arguments block, raw value strings
    command_line: str | None = None  # a training command line found in the log
    errors: list[LogLine] = field(default_factory=list)  # error-looking lines (bounded)
    tracebacks: list[Traceback] = field(default_factory=list)
    finish_rollouts: list[LogLine] = field(default_factory=list)  # "Finish rollout: ..." samples (bounded)
    notable: list[LogLine] = field(default_factory=list)  # tagged lines: checkpoint load/skip, "start from random", ...
    placement_group_waits: list[PlacementGroupWait] = field(default_factory=list)  # the last 20
    timers: dict[str, TimerStats] = field(default_factory=dict)
    first_timestamp: str | None = None
    last_timestamp: str | None = None
    truncated_tail: bool = False  # the last line has no newline (a log still being written, or cut)
    notebook_output: list[str] = field(default_factory=list)  # files read as a notebook's stream records
    skipped_long_lines: int = 0  # lines over the per-line cap, counted and not parsed
    unparsed_metric_lines: int = 0
    """Lines shaped like a metric record (`step N: {...}`, `step:N - k:v`, a logged `{'loss': ...}`)
    that no grammar could read (cut mid-write, garbled): counted, with up to 3 samples in
    `unparsed_samples` ("path: text"). A coverage figure: records the triage did not see."""
    unparsed_samples: list[str] = field(default_factory=list)
    parsed_by: dict[str, dict[str, int]] = field(default_factory=dict)
    """Per log file, which grammar read its metric records and how many: `{"driver.log":
    {"slime_dict": 120}}`. Grammars: slime_dict, verl_console, hf_dict, swift_json,
    tqdm_postfix (`triage.formats.metric_lines`). A file with `{}` held no metric record."""
    dropped_errors: int = 0  # error lines beyond MAX_ERROR_LINES (counted, not kept)
    last_lines: dict[str, int] = field(default_factory=dict)
    """Per log file, the number of its last line that is not blank: whether the log went on past a line."""

    def records_per_kind(self) -> dict[str, int]:
        """How many metric records of each kind the logs held (step, rollout, perf, eval, verl,
        hf, hf_eval, swift, openrlhf, ...): a coverage figure."""
        return {kind: self.metrics.count(kind) for kind in self.metrics.kinds()}

    def notable_tagged(self, tag: str) -> list[LogLine]:
        return [line for line in self.notable if line.tag == tag]
