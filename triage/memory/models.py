"""What the report carries from the team's memory: the changes since the last good run, and history."""

from __future__ import annotations

from pydantic import BaseModel, Field

# Kinds of change, in the order the report lists them (after those that bear on a verdict).
ARGUMENT, VERSION, DATA_PATH, CHECKPOINT_PATH, OUTPUT_PATH = "argument", "version", "data_path", "checkpoint_path", "output_path"
KIND_ORDER = (ARGUMENT, VERSION, DATA_PATH, CHECKPOINT_PATH, OUTPUT_PATH)


class Change(BaseModel):
    kind: str  # argument | version | data_path | checkpoint_path | output_path
    name: str  # the normalised argument name, or the package
    baseline: str | None  # the value in the last good run (None: absent there)
    run: str | None  # the value in this run (None: absent here)
    note: str | None = None  # "×10", "upgrade", "downgrade", ...
    bears_on: list[str] = Field(default_factory=list)  # catalog ids this change is evidence for

    def line(self) -> str:
        was = "(unset)" if self.baseline is None else self.baseline
        now = "(unset)" if self.run is None else self.run
        text = f"{self.name}: {was} → {now}"
        if self.note:
            text += f" ({self.note})"
        return text


class Divergence(BaseModel):
    metric: str  # canonical metric name
    source: str  # kind:key in this run
    step: int  # the first aligned step where it left the baseline's band, and stayed out
    run_value: float | None
    baseline_value: float  # the baseline's local median at that step
    tolerance: float  # the band's half-width at that step


class ChangeSummary(BaseModel):
    baseline: str  # the baseline run's directory
    baseline_ref: str
    found_by: str  # "given" (--baseline), "runs root", "store"
    baseline_status: str  # why it counts as good: "succeeded" / "triaged healthy ..."
    changes: list[Change] = Field(default_factory=list)
    divergence: Divergence | None = None
    other_divergences: list[Divergence] = Field(default_factory=list)
    new_errors: list[str] = Field(default_factory=list)
    aligned_steps: int = 0  # steps both runs logged metrics for
    rule: str = ""  # how divergence was judged (the tolerance, named)

    def bears_on(self) -> dict[str, list[Change]]:
        out: dict[str, list[Change]] = {}
        for c in self.changes:
            for vid in c.bears_on:
                out.setdefault(vid, []).append(c)
        return out

    def lines(self, limit: int = 12) -> list[str]:
        """The section's lines, the changes that bear on a verdict first."""
        out = []
        for c in self.changes[:limit]:
            tag = f" — bears on {', '.join(c.bears_on)}" if c.bears_on else ""
            out.append(f"{c.kind.replace('_', ' ')}: {c.line()}{tag}")
        if len(self.changes) > limit:
            out.append(f"… and {len(self.changes) - limit} more change(s)")
        if self.divergence is not None:
            d = self.divergence
            now = "non-finite" if d.run_value is None else f"{d.run_value:.4g}"
            out.append(f"first divergence: {d.metric} from step {d.step} ({now} vs the baseline's "
                       f"{d.baseline_value:.4g} ± {d.tolerance:.3g})")
        elif self.aligned_steps:
            out.append(f"no metric left the baseline's band over {self.aligned_steps} aligned step(s)")
        for e in self.new_errors[:5]:
            out.append(f"new error: {e}")
        return out


class ConfirmedCause(BaseModel):
    verdict: str  # the catalog id users confirmed as the real cause
    given: str  # the verdict the triage gave
    by: str
    at: str  # ISO time, UTC
    note: str | None = None
    triage_id: str
    run: str | None = None


class History(BaseModel):
    triage_id: str | None = None  # the id `triage confirm` and the Slack buttons name
    signature: str | None = None  # the run's normalised error signature
    seen_runs: int = 0  # other runs triaged with the same signature
    confirmed: list[ConfirmedCause] = Field(default_factory=list)  # newest first

    def line(self) -> str | None:
        if not self.confirmed:
            return None
        c = self.confirmed[0]
        return f"seen before: {self.seen_runs} run(s), confirmed as {c.verdict} by {c.by} on {c.at[:10]}" + (
            f" ({c.note})" if c.note else "")
