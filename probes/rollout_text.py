"""Read the rollouts the run already printed or dumped, and judge whether they are text.

The guides' first check: search the log for `Finish rollout` and "determine whether the
responses are coherent and sensible"; garbled output from the very first step points at
checkpoint loading or weight conversion. slime prints one sample per rollout as
`Finish rollout: ['<prompt><response>'], label: …, reward: …` (miles:
`Finish rollout: text_preview=…, label=…, reward_summary=…`); `--save-debug-rollout-data`
dumps hold every sample's `response`. Nothing is generated here: this is the static
half of the isolated-rollout check.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from triage.errors import Unavailable
from triage.finding import Observation
from triage.probe import Cost, Probe
from triage.run.run import NEEDS_HELP
from triage.text_quality import GARBLED_AT, GARBLED_FRACTION, TextVerdict, garble_score, judge_texts
from triage.thresholds import threshold

if TYPE_CHECKING:
    from triage.run.run import Run

# Where the assistant's turn starts in the chat templates the frameworks use.
ASSISTANT_MARKERS = (
    "<|im_start|>assistant\n",  # ChatML (Qwen)
    "<|start_header_id|>assistant<|end_header_id|>\n\n",  # Llama 3
    "<|start_header_id|>assistant<|end_header_id|>",
    "<|Assistant|>",  # DeepSeek
    "<|assistant|>\n",  # GLM / Phi
    "<|assistant|>",
    "[/INST]",  # Llama 2 / Mistral
    "<start_of_turn>model\n",  # Gemma
    "Assistant:",
)
CHAT_MARKERS = ("<|im_start|>", "<|start_header_id|>", "[INST]", "<|Assistant|>", "<|assistant|>", "<start_of_turn>")
_SLIME_TAIL = re.compile(r",\s*label:\s.*$", re.S)
_MILES = re.compile(r"text_preview=(.*?)(?:,\s*label=.*)?$", re.S)
MAX_EXAMPLE = 200


@dataclass(frozen=True)
class RolloutSample:
    """One generated response and where it was found."""

    text: str  # prompt + response as printed / dumped
    response: str
    where: str  # "job.log:123" or "rollout_data/0.pt#5"
    rollout: int | None  # rollout id when known
    has_chat_markup: bool


def _unrepr(body: str) -> str:
    """The printed list / string repr back to text; a line cut at the log's length cap is decoded by hand."""
    body = body.strip()
    try:
        value = ast.literal_eval(body)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        text = body.lstrip("[").lstrip("'\"")
        text = text.rstrip("]").rstrip("'\"")
        return text.replace("\\n", "\n").replace("\\t", "\t").replace("\\'", "'").replace('\\"', '"').replace("\\\\", "\\")
    if isinstance(value, (list, tuple)):
        return "".join(str(v) for v in value)
    return str(value)


def split_response(text: str) -> str:
    """The assistant's part of a printed prompt+response: after the last assistant marker."""
    best = -1
    marker_len = 0
    for marker in ASSISTANT_MARKERS:
        i = text.rfind(marker)
        if i > best:
            best, marker_len = i, len(marker)
    return text[best + marker_len :] if best >= 0 else text


def parse_finish_rollout(message: str) -> str | None:
    """The prompt+response text of a `Finish rollout: …` line (slime or miles), or None."""
    i = message.find("Finish rollout:")
    if i < 0:
        return None
    rest = message[i + len("Finish rollout:") :].strip()
    if not rest:
        return None
    miles = _MILES.match(rest)
    if rest.startswith("text_preview=") and miles:
        return _unrepr(miles.group(1))
    return _unrepr(_SLIME_TAIL.sub("", rest))


def log_samples(run: Run) -> list[RolloutSample]:
    """The samples the run's logs printed, in log order: slime's Finish-rollout lines (one per rollout), and the
    `[prompt]` / `[response]` prints of verl's reward manager in a log of a paste's size."""
    if not run.artifacts.logs:
        return []
    out = []
    for line in run.log.finish_rollouts:
        text = parse_finish_rollout(line.text)
        if text is None:
            continue
        out.append(RolloutSample(text, split_response(text), line.where(), None,
                                 any(mk in text for mk in CHAT_MARKERS)))
    if not out:
        from triage.formats.reward_prints import printed_samples

        for path, text in run.pastes.items():
            for sample in printed_samples(text):
                out.append(RolloutSample(sample.prompt + sample.response, sample.response, f"{path}:{sample.line_no}",
                                         None, any(mk in sample.prompt for mk in CHAT_MARKERS)))
    return out


def _dump_id(path: Any, rollout_id: Any) -> int | None:
    if isinstance(rollout_id, int):
        return rollout_id
    try:
        return int(str(getattr(path, "stem", "")).removeprefix("eval_"))
    except ValueError:
        return None


def dump_samples(run: Run, per_dump: int = 64, max_dumps: int = 8) -> tuple[list[RolloutSample], list[str]]:
    """Responses from the run's first `max_dumps` rollout dumps (lowest rollout id first).

    Only those dumps are read (a run may leave hundreds); an unreadable one is listed, not fatal.
    """
    problems: list[str] = []
    out = []
    for path, dump in run.rollout_dumps(problems, limit=max_dumps):
        rid = _dump_id(path, dump.rollout_id)
        for i, sample in enumerate(dump.samples[:per_dump]):
            response = sample.get("response")
            if not isinstance(response, str):
                continue
            prompt = sample.get("prompt")
            prompt_text = prompt if isinstance(prompt, str) else str(prompt or "")
            out.append(RolloutSample(prompt_text + response, response, f"{path.parent.name}/{path.name}#{i}", rid,
                                     any(mk in prompt_text for mk in CHAT_MARKERS)))
    return out, problems


def examples(samples: list[RolloutSample], n: int = 3) -> list[dict[str, Any]]:
    """The `n` worst-scoring responses, cut to 200 characters, with where they came from."""
    scored = sorted(((garble_score(s.response), s) for s in samples), key=lambda t: -t[0])[:n]
    return [
        {"score": round(score, 3), "where": s.where, "rollout": s.rollout,
         "response": s.response[:MAX_EXAMPLE] + ("…" if len(s.response) > MAX_EXAMPLE else "")}
        for score, s in scored
    ]


def verdict_evidence(verdict: TextVerdict) -> dict[str, Any]:
    return {
        "judged": verdict.count,
        "empty": verdict.empty,
        "mean_garble_score": verdict.mean_score,
        "garbled_fraction": verdict.garbled_fraction,
        "repetition_fraction": verdict.repetition_fraction,
    }


CONFIDENT_FRACTION = threshold("text.confident_fraction")  # triage/thresholds.yaml


class RolloutTextParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    threshold: float = GARBLED_AT  # a response scoring this or more is garbled
    garbled_fraction: float = GARBLED_FRACTION  # this share garbled makes the rollouts garbled
    confident_fraction: float = CONFIDENT_FRACTION  # ... reported with more confidence above it
    per_dump: int = 64  # samples read per rollout dump
    max_dumps: int = 8


class RolloutText(Probe):
    """Are the logged / dumped rollout responses coherent text or garbage (garble score)?"""

    name = "rollout_text"
    outcomes = ("coherent", "garbled")
    needs = ()
    cost = Cost.STATIC
    Params = RolloutTextParams

    def examine(self, run: Run) -> Observation:
        p: RolloutTextParams = self.params  # type: ignore[assignment]
        from_log = log_samples(run)
        from_dumps, problems = dump_samples(run, p.per_dump, p.max_dumps)
        samples = from_log + from_dumps
        if not samples:
            reason = "no `Finish rollout` samples in the log and no readable rollout dump"
            if problems:
                reason += f" ({problems[0]})"
            raise Unavailable("rollout_dump", reason, NEEDS_HELP["rollout_dump"])
        verdict = judge_texts((s.response for s in samples), threshold=p.threshold)
        if verdict.count == 0:
            raise Unavailable(
                "rollout_dump",
                f"all {verdict.empty} responses found are empty: there is no text to judge",
                NEEDS_HELP["rollout_dump"],
            )
        ev: dict[str, Any] = verdict_evidence(verdict)
        ev["sources"] = {"finish_rollout_lines": len(from_log), "dump_samples": len(from_dumps)}
        ev["examples"] = examples(samples)
        if problems:
            ev["unreadable_dumps"] = problems[:5]
        if from_log:
            first = from_log[0]
            ev["first_rollout"] = {"where": first.where, "score": round(garble_score(first.response), 3)}
        garbled = verdict.count > 0 and verdict.garbled_fraction >= p.garbled_fraction
        if garbled:
            worst = ev["examples"][0]
            return self.observe(
                "garbled",
                f"{verdict.garbled_fraction:.0%} of {verdict.count} rollout responses are garbled (mean garble score "
                f"{verdict.mean_score:.2f}); e.g. at {worst['where']}: {worst['response'][:80]!r}.",
                0.85 if verdict.garbled_fraction >= p.confident_fraction else 0.7,
                **ev,
            )
        return self.observe(
            "coherent",
            f"{verdict.count} rollout responses read as text: {verdict.garbled_fraction:.0%} garbled, mean garble "
            f"score {verdict.mean_score:.2f}.",
            0.75,
            **ev,
        )
