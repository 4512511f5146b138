"""The gate of the `healthy` verdict: every health check ran over enough records, and passed.

A run is healthy only on positive evidence (ROOT_CAUSES.md, `healthy`). Each health
question is answered where it is defined — the probe that owns it (`grad_norm_health`,
`reward_signal`, `truncation`, `nonfinite_onset`, `step1_invariants`) — and this probe
only collects the answers:

- `passed`: every required check ran and passed;
- `insufficient`: some required check could not run (too few records, a metric the run
  never logged); the report names what it lacked and how to produce it;
- `failed`: a check ran and failed although the symptom classifier saw nothing (the
  classifier and the check disagree: the walk says so instead of guessing).

The step-1 invariants are required only where the run logs them (slime's
`log_probs` / `ref_log_probs` / KL at rollout 0; TRL and verl do not), and so are the
policy-drift (entropy, KL, log-prob gap) and learning-rate checks: where they ran, they
must pass.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from triage.errors import BadInput, TriageError, Unavailable
from triage.finding import Observation
from triage.health import CheckResult, unavailable
from triage.probe import Cost, Probe
from triage.run.run import NEEDS_HELP

if TYPE_CHECKING:
    from triage.run.run import Run


@dataclass(frozen=True)
class HealthQuestion:
    name: str
    probe: str  # the probe that owns the question
    passing: tuple[str, ...]  # its outcomes that mean the check passed
    required: bool = True  # False: checked only where the run logs what it needs
    says: str = ""  # what a pass of it tells the reader, for the healthy verdict's explanation


QUESTIONS = (
    HealthQuestion("step1_invariants", "step1_invariants", ("hold",), required=False,
                   says="the step-1 invariants hold (log_probs equal ref_log_probs, KL is zero)"),
    HealthQuestion("grad_norm", "grad_norm_health", ("healthy",), says="grad_norm stays in its healthy range"),
    HealthQuestion("reward_signal", "reward_signal", ("improving", "flat"), says="rewards carry a learning signal"),
    HealthQuestion("truncation", "truncation", ("normal",), says="responses are not cut at a length wall"),
    HealthQuestion("nonfinite", "nonfinite_onset", ("none",), says="the update never goes NaN or Inf"),
    HealthQuestion("policy_drift", "policy_drift", ("none",), required=False,
                   says="entropy, KL and the log-prob gap show no drift"),
    HealthQuestion("lr_schedule", "lr_schedule", ("plausible",), required=False,
                   says="the learning rate follows a plausible schedule"),
)


# the checks only a run with rollouts can answer (a reward's signal, responses cut at a length limit)
ROLLOUT_QUESTIONS = ("reward_signal", "truncation")


def _answer(question: HealthQuestion, run: Run) -> CheckResult:
    """Ask the owning probe, through its own `check(run)` when it has one, else its `examine`."""
    from triage.probe import registry

    cls = registry()[question.probe]
    check: Callable[[Run], CheckResult] | None = getattr(__import__(cls.__module__, fromlist=["check"]), "check", None)
    if check is not None:
        result = check(run)
        return CheckResult(question.name, result.available, result.passed, result.records, result.needed, result.detail)
    try:
        obs = cls().examine(run)
    except Unavailable as exc:
        return unavailable(question.name, 0, 0, exc.reason)
    except BadInput:
        raise
    except TriageError as exc:
        return unavailable(question.name, 0, 0, f"could not be read: {exc}")
    records = int(obs.evidence.get("records") or obs.evidence.get("n") or 0)
    return CheckResult(question.name, True, obs.outcome in question.passing, records, 0, obs.summary)


class HealthChecks(Probe):
    """Whether every health check (grad norm, reward signal, truncation, NaN, step-1) ran on enough records and passed."""

    name = "health_checks"
    outcomes = ("passed", "insufficient", "failed")
    needs = ("metrics",)
    cost = Cost.STATIC
    how_to_get = {"metrics": NEEDS_HELP["metrics"]}

    def examine(self, run: Run) -> Observation:
        from probes.grad_norm_health import supervised_run

        supervised = supervised_run(run)
        questions = [dataclasses.replace(q, required=False) if supervised and q.name in ROLLOUT_QUESTIONS else q
                     for q in QUESTIONS]
        results = [(q, _answer(q, run)) for q in questions]
        checks = [r.as_evidence() | {"required": q.required} for q, r in results]
        ran = [r for _, r in results if r.available]
        failed = [r for r in ran if not r.passed]
        lacking = [r for q, r in results if q.required and not r.available]
        evidence = {"checks": checks, "ran": len(ran), "required": sum(q.required for q in questions)}
        if supervised:
            from probes.grad_norm_health import preference_run

            kind = "a preference run on fixed pairs (DPO)" if preference_run(run) else "a supervised run"
            evidence["supervised"] = (f"{' and '.join(ROLLOUT_QUESTIONS)} do not apply: {kind}, with no RL "
                                      "metric, argument or framework")
        if failed:
            names = ", ".join(f"{r.name} ({r.detail.rstrip('.')})" for r in failed)
            return self.observe("failed", f"health check{'s' if len(failed) > 1 else ''} failed: {names}", 0.6,
                                **evidence)
        if lacking:
            names = "; ".join(f"{r.name}: {r.detail.rstrip('.')}" for r in lacking)
            evidence["missing"] = [r.name for r in lacking]
            evidence["command"] = NEEDS_HELP["metrics"]
            return self.observe("insufficient", f"{len(lacking)} health check{'s' if len(lacking) > 1 else ''} "
                                f"could not run: {names}", 0.0, **evidence)
        summary = "every health check ran and passed: " + ", ".join(r.name for r in ran)
        if supervised:
            summary += f" ({evidence['supervised']})"
        return self.observe("passed", summary, 0.85, **evidence)


def healthy_explanation(evidence: dict) -> str | None:
    """The healthy verdict's explanation in terms of the checks that ran and passed on this run (and those that did
    not apply), not the catalog's full list: a supervised run was told its rewards carry a learning signal."""
    checks = evidence.get("checks")
    if not isinstance(checks, list):
        return None
    says = {q.name: q.says for q in QUESTIONS}
    passed = [says[c["name"]] for c in checks if isinstance(c, dict) and c.get("passed") and says.get(c.get("name"))]
    if not passed:
        return None
    listed = passed[0] if len(passed) == 1 else ", ".join(passed[:-1]) + " and " + passed[-1]
    text = ("Nothing is wrong that the triage can see, on positive evidence: the training metrics were read over "
            f"enough records for every health check that applies to run, and each passed: {listed}.")
    if isinstance(evidence.get("supervised"), str):
        text += f" Not asked: {evidence['supervised']}."
    return (text + " The log holds no fatal error, and the job ended or is still progressing. A run whose metrics "
            "could not be read is inconclusive, never healthy.")
