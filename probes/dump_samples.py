"""Scan the rollout dumps for samples that would poison a batch.

The axolotl guide: "A single malformed or extremely long example can cause a spike";
NaN "in specific batches only" comes from "bad data (empty sequences)"; "look for empty
sequences, extreme token IDs, or unexpected padding patterns". slime's dump keeps every
sample of a rollout (`--save-debug-rollout-data` / `--dump-details`), with
`len(loss_mask) == len(rollout_log_probs) == response_length`. A sample is bad when:

- its response is empty (response_length 0), or has a loss mask while its length is 0;
- its loss mask / rollout log-probs disagree in length with its response;
- its length is far beyond the others of its rollout (robust z and a multiple of the median);
- its reward or one of its rollout log-probs is NaN / Inf (or the reward is missing);
- one of its token ids is negative or outside the model's vocabulary.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from triage.anomaly import median_mad
from triage.errors import TriageError, Unavailable
from triage.finding import Observation
from triage.formats.dumps import RolloutDump
from triage.metrics import number_arg
from triage.probe import Cost, Probe
from triage.run.run import NEEDS_HELP

from probes.base_model import read_json, checkpoint_location

if TYPE_CHECKING:
    from triage.run.run import Run


class DumpSampleParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    length_z: float = 8.0  # robust z of a response length over its rollout's lengths
    length_ratio: float = 4.0  # ... and at least this multiple of the median length
    max_dumps: int = 64  # rollout dumps scanned (lowest ids first)
    max_reported: int = 20


def _seq(value: Any) -> list | None:
    if value is None:
        return None
    tolist = getattr(value, "tolist", None)
    if callable(tolist) and not isinstance(value, (list, tuple)):
        out = tolist()
        return out if isinstance(out, list) else [out]
    if isinstance(value, (list, tuple)):
        return list(value)
    return None


def _nonfinite_at(values: list) -> int | None:
    for i, v in enumerate(values):
        try:
            if not math.isfinite(float(v)):
                return i
        except (TypeError, ValueError):
            return i
    return None


def vocab_size(run: Run) -> tuple[int, str] | None:
    """The model's vocabulary size and where it was read (HF config.json, else the run's args)."""
    _given, directory = checkpoint_location(run)
    if directory is not None:
        config = read_json(directory / "config.json") or {}
        value = config.get("vocab_size")
        if isinstance(value, int) and value > 0:
            return value, f"{directory.name}/config.json:vocab_size"
    for name in ("vocab_size", "padded_vocab_size"):
        value = number_arg(run, name)
        if value is not None and value > 0:
            return int(value), f"--{name.replace('_', '-')}"
    return None


def sample_problems(dump: RolloutDump, vocab: int | None, p: DumpSampleParams, reward_key: str | None) -> list[dict[str, Any]]:
    """Every bad sample of one dump: index, why, and the numbers that show it."""
    lengths = dump.response_lengths()
    rewards = dump.rewards(reward_key)
    statuses = dump.statuses()
    positive = [n for n in lengths if n > 0]
    med, mad = median_mad(positive) if positive else (math.nan, math.nan)
    out: list[dict[str, Any]] = []
    for i, sample in enumerate(dump.samples):
        why: list[tuple[str, str]] = []  # (kind, explanation)
        n = lengths[i]
        response = sample.get("response")
        mask = _seq(sample.get("loss_mask"))
        logps = _seq(sample.get("rollout_log_probs"))
        if n == 0 or (isinstance(response, str) and not response.strip() and "response" in sample):
            masked = int(sum(1 for m in mask if m)) if mask else 0
            why.append(("empty_response", f"empty response (response_length {n})"
                        + (f" with {masked} loss-masked tokens" if masked else "")))
        for name, seq in (("loss_mask", mask), ("rollout_log_probs", logps)):
            if seq is not None and n and len(seq) != n:
                why.append(("length_mismatch", f"len({name}) = {len(seq)} but response_length = {n}"))
        if positive and n > 0 and math.isfinite(med) and med > 0:
            z = (n - med) / max(mad, 0.05 * med, 1.0)
            if z >= p.length_z and n >= p.length_ratio * med:
                why.append(("extreme_length",
                            f"response_length {n} is {n / med:.1f}x the rollout's median {med:.0f} (robust z {z:.0f})"))
        reward = rewards[i]
        raw = sample.get("reward")
        if raw is None and "reward" in sample:
            why.append(("missing_reward", "reward is missing (None)"))
        elif reward is not None and not math.isfinite(reward):
            why.append(("nonfinite_reward", f"reward is {reward}"))
        if logps:
            bad = _nonfinite_at(logps)
            if bad is not None:
                why.append(("nonfinite_log_prob", f"rollout_log_probs[{bad}] is {logps[bad]}"))
        tokens = _seq(sample.get("tokens"))
        if tokens:
            ints = [t for t in tokens if isinstance(t, (int, float)) and not isinstance(t, bool)]
            low = min(ints) if ints else 0
            high = max(ints) if ints else 0
            if low < 0:
                why.append(("token_out_of_vocab", f"token id {int(low)} is negative"))
            if vocab is not None and high >= vocab:
                why.append(("token_out_of_vocab", f"token id {int(high)} is outside the vocabulary (size {vocab})"))
        if why:
            out.append({"rollout": dump.rollout_id, "sample": i, "why": [text for _k, text in why],
                        "kinds": [kind for kind, _t in why], "response_length": n,
                        "reward": reward if reward is None or math.isfinite(reward) else str(reward),
                        "status": statuses[i]})
    return out


class DumpSamples(Probe):
    """Bad samples in the rollout dumps: empty, extreme length, NaN reward / log-probs, out-of-vocab tokens."""

    name = "dump_samples"
    outcomes = ("bad_sample", "clean")
    needs = ("rollout_dump",)
    cost = Cost.STATIC
    Params = DumpSampleParams

    def examine(self, run: Run) -> Observation:
        p: DumpSampleParams = self.params  # type: ignore[assignment]
        paths = [q for q in run.rollout_dump_paths() if not q.name.startswith("eval_")]
        if not paths:
            raise Unavailable("rollout_dump", "the run has no rollout dumps", NEEDS_HELP["rollout_dump"])
        vocab = vocab_size(run)
        reward_key = None
        try:
            key = run.args.get("reward_key")
            reward_key = key if isinstance(key, str) and key else None
        except TriageError:
            pass
        problems: list[dict[str, Any]] = []
        unreadable: list[str] = []
        scanned = samples = 0
        for path, dump in run.rollout_dumps(unreadable, limit=p.max_dumps):
            scanned += 1
            samples += len(dump.samples)
            for problem in sample_problems(dump, vocab[0] if vocab else None, p, reward_key):
                problem["dump"] = f"{path.parent.name}/{path.name}"
                problems.append(problem)
        if scanned == 0:
            raise Unavailable("rollout_dump", f"no rollout dump could be read: {unreadable[0]}",
                              NEEDS_HELP["rollout_dump"])
        ev: dict[str, Any] = {"dumps_scanned": scanned, "samples_scanned": samples,
                              "vocab_size": {"value": vocab[0], "from": vocab[1]} if vocab else None}
        if len(paths) > scanned + len(unreadable):
            ev["dumps_not_scanned"] = len(paths) - scanned - len(unreadable)
        if unreadable:
            ev["unreadable_dumps"] = unreadable[:5]
        if not problems:
            return self.observe(
                "clean",
                f"All {samples} samples of {scanned} rollout dump(s) have a response, consistent lengths, finite "
                "rewards and log-probs" + (", and in-vocabulary token ids." if vocab else "."),
                0.8,
                **ev,
            )
        reasons = Counter(kind for pr in problems for kind in pr["kinds"])
        first = problems[0]
        ev.update(bad_samples=problems[: p.max_reported], bad_count=len(problems), reasons=dict(reasons))
        return self.observe(
            "bad_sample",
            f"{len(problems)} bad sample(s) in {scanned} rollout dump(s); first: rollout {first['rollout']} sample "
            f"{first['sample']} ({first['dump']}): {first['why'][0]}.",
            0.85,
            **ev,
        )

