"""Known bugs: the run's package versions against the known-bug index.

The versions come from `Run.versions` (package lists, environment reports, version
banners, image tags: triage/versions.py); the index from triage/known_bugs.yaml plus the
user's files. A node names the verdicts it asks about (`params: {verdicts: [...]}`):
`match` means an entry pointing at one of them holds the run's version, with the entry,
the installed version and where it was read, the affected range, the fixed version and the
thread in the evidence. Entries that match but point elsewhere are listed as
`other_matches`. A run that names no version at all is `unavailable` (saying what was
looked at), never `no_match`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from triage.errors import TriageError, Unavailable
from triage.finding import Observation
from triage.known_bugs import index_digest, load_index
from triage.probe import Cost, Probe

if TYPE_CHECKING:
    from triage.run.run import Run

MODEL_ARGS = ("hf_checkpoint", "model_name_or_path", "model_path", "model", "served_model_name")


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    verdicts: tuple[str, ...] = ()  # the verdicts this node asks about; empty: any
    # only entries that name an incompatible pair (`with`): where nothing of the run was seen to go wrong, a release
    # that broke a behaviour is no finding, a pair that does not work together is (verl-project/verl#2031 pasted only
    # verl's environment report, and vLLM 0.8.3's broken GRPO rollouts in unsloth had been its verdict)
    pairs_only: bool = False
    # The index in use, as a digest: part of the findings-cache key, so adding an entry
    # (or a --known-bugs file) reruns the probe on an unchanged run.
    index_digest: str = Field(default_factory=index_digest)


def run_model(run: Run) -> str | None:
    """The model the run trains or serves, by name or path, where its arguments give it."""
    from probes.config_rule import arg_str

    return arg_str(run, *MODEL_ARGS)


class KnownBugs(Probe):
    """Whether the run's package versions fall in a known-bad range of the known-bug index."""

    name = "known_bugs"
    outcomes = ("match", "no_match")
    needs = ()
    cost = Cost.STATIC
    Params = Params
    how_to_get = {
        "versions": "keep `pip freeze > pip_freeze.txt` (or `pip list`, `conda list`) in the run directory, "
                    "or the job log from its start (version banners)",
    }

    def examine(self, run: Run) -> Observation:
        params: Params = self.params  # type: ignore[assignment]
        versions = run.versions
        if not versions:
            raise Unavailable("versions", versions.note(), self.how_to_get["versions"])
        index = load_index()
        try:
            model = run_model(run)
        except TriageError:
            model = None
        matches = index.match(versions, model)
        wanted = [m for m in matches if (not params.verdicts or m.bug.verdict in params.verdicts)
                  and (not params.pairs_only or m.bug.with_)]
        others = [m for m in matches if m not in wanted]
        evidence: dict[str, Any] = {
            "versions": versions.as_dict(),
            "versions_read_at": {k: r.where for k, r in sorted(versions.records.items())},
            "verdicts_asked": list(params.verdicts),
            "index": {"entries": len(index.bugs), "files": list(index.files), "digest": index.digest},
            "model": model,
        }
        if versions.conflicts:
            evidence["version_conflicts"] = [
                {"package": kept.package, "kept": kept.version, "kept_from": kept.where, "other": other.version,
                 "other_from": other.where} for kept, other in versions.conflicts[:10]
            ]
        if others:
            evidence["other_matches"] = [m.evidence() for m in others]
        if not wanted:
            scope = (f" pointing at {', '.join(params.verdicts)}" if params.verdicts else "") + \
                (" that name an incompatible pair" if params.pairs_only else "")
            extra = f" ({len(others)} other entr{'y' if len(others) == 1 else 'ies'} match)" if others else ""
            return self.observe(
                "no_match",
                f"None of the {len(index.bugs)} known-bug entries{scope} holds the run's versions "
                f"({_versions_words(versions.as_dict(), params, index)}){extra}.",
                0.7,
                **evidence,
            )
        evidence["matches"] = [m.evidence() for m in wanted]
        first = wanted[0]
        fixed = f"fixed in {first.bug.fixed}" if first.bug.fixed else "no fixed release named"
        caveat = "" if first.model_checked else f" (the entry concerns {', '.join(first.bug.models)}; the run's model is unknown)"
        more = f"; {len(wanted) - 1} more entr{'y' if len(wanted) == 2 else 'ies'} match" if len(wanted) > 1 else ""
        return self.observe(
            "match",
            f"{first.bug.package} {first.installed} (read at {first.where}) is in the known-bad range {first.bug.affected} "
            f"of {first.bug.thread} ({fixed}){caveat}{more}: {first.bug.symptom}",
            0.8 if first.model_checked else 0.6,
            **evidence,
        )


def _versions_words(versions: dict[str, str], params: Params, index: Any) -> str:
    relevant = {b.package for b in index.bugs if not params.verdicts or b.verdict in params.verdicts}
    shown = [f"{k} {v}" for k, v in versions.items() if k in relevant and v] or [f"{k} {v}" for k, v in versions.items() if v]
    return ", ".join(shown[:6]) + (", …" if len(shown) > 6 else "")
