"""Do most responses hit the length limit?

The axolotl guide: `completions/clipped_ratio` "> 0.8 means most completions hit
`max_completion_length`". slime logs the same as `rollout/truncated_ratio` (perf record)
or `rollout/truncated` (rollout record). Two root causes share this symptom, and the
evidence carries what separates them: stop tokens missing from the generation config
(responses never end: very long rollout times, `finish_reason=length`), or a limit
genuinely too small for the task (coherent responses that end when given more room).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, ConfigDict

from triage.anomaly import evidence_number, tail
from triage.errors import Unavailable
from triage.finding import Observation
from triage.metrics import number_arg
from triage.probe import Cost, Probe
from triage.run.run import NEEDS_HELP

if TYPE_CHECKING:
    from triage.run.run import Run

LIMIT_ARGS = ("rollout_max_response_len", "max_completion_length", "max_new_tokens", "max_response_length")


def response_length_limit(run: Run) -> tuple[str, int] | None:
    """The run's response-length limit as (argument name, value), when its args say."""
    for name in LIMIT_ARGS:
        value = number_arg(run, name)
        if value is not None and value > 0:
            return name, int(value)
    return None


class TruncationParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    threshold: float = 0.8  # the guide: clipped ratio > 0.8 means most completions hit the limit
    at_limit: float = 0.98  # without a ratio: mean length this close to the limit counts as truncated


class Truncation(Probe):
    """Share of responses cut at the length limit (truncated / clipped ratio > 0.8)."""

    name = "truncation"
    outcomes = ("mostly_truncated", "normal")
    needs = ("metrics",)
    cost = Cost.STATIC
    Params = TruncationParams

    def examine(self, run: Run) -> Observation:
        p: TruncationParams = self.params  # type: ignore[assignment]
        m = run.metrics
        ratio = m.get("truncated_ratio")
        lengths = m.get("response_length")
        max_lengths = m.get("response_length_max")
        limit = response_length_limit(run)
        ev: dict[str, Any] = {}
        if limit is not None:
            ev["limit"] = {"arg": limit[0], "value": limit[1]}
        if lengths is not None and len(lengths.finite()):
            lf = lengths.finite()
            ev["mean_response_length"] = {"metric": lf.source, "median": evidence_number(float(np.median(lf.values))),
                                          "last": evidence_number(float(lf.values[-1]))}
        if max_lengths is not None and len(max_lengths.finite()):
            mf = max_lengths.finite()
            ev["max_response_length"] = {"metric": mf.source, "max": evidence_number(float(mf.values.max()))}
        rt = m.get("rollout_time")
        if rt is not None and len(rt.finite()):
            ev["rollout_time_s"] = {"metric": rt.source, "median": evidence_number(float(np.median(rt.finite().values)))}

        if ratio is not None and len(ratio.finite()):
            r = ratio.finite()
            med = float(np.median(r.values))
            ev.update(
                metric=r.source,
                ratio=evidence_number(med),
                ratio_last=evidence_number(float(r.values[-1])),
                ratio_max=evidence_number(float(r.values.max())),
                records=len(r),
                steps_over_threshold=[int(s) for s in r.steps[r.values > p.threshold][:20]],
            )
            if med > p.threshold:
                return self.observe(
                    "mostly_truncated",
                    f"A median {med:.0%} of responses per record are cut at the length limit ({r.source}, "
                    f"{len(r)} records{self._limit_text(limit)}): generation runs into the limit instead of stopping.",
                    0.85,
                    **ev,
                )
            return self.observe(
                "normal",
                f"A median {med:.0%} of responses are truncated ({r.source}; over {p.threshold:.0%} would mean "
                "most hit the limit).",
                0.8,
                **ev,
            )
        if lengths is not None and limit is not None and len(lengths.finite()):
            recent = float(np.median(tail(lengths.finite().values)))
            share = recent / limit[1]
            ev["mean_length_over_limit"] = evidence_number(share)
            if share >= p.at_limit:
                return self.observe(
                    "mostly_truncated",
                    f"The mean response length ({recent:.0f} tokens, {lengths.source}) sits at the limit "
                    f"{limit[0]}={limit[1]}: responses are cut, not finished.",
                    0.7,
                    **ev,
                )
            return self.observe(
                "normal",
                f"The mean response length ({recent:.0f} tokens) is {share:.0%} of {limit[0]}={limit[1]}.",
                0.6,
                **ev,
            )
        raise Unavailable(
            "metrics",
            "no truncated / clipped ratio (rollout/truncated_ratio, rollout/truncated, completions/clipped_ratio), "
            "and no response length with a known limit",
            NEEDS_HELP["metrics"],
        )

    @staticmethod
    def _limit_text(limit: tuple[str, int] | None) -> str:
        return f"; limit {limit[0]}={limit[1]}" if limit is not None else ""
