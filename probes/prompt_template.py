"""Does the training data follow the model's chat template?

The guides' `data.chat_template_mismatch`: prompts rendered with another model's chat
roles (`<|user|>`, `### Instruction:`, `[INST]`, `Human:`), or plain text sent to a chat
model without `--apply-chat-template`, put the policy off its own format from step 1:
low rewards, odd responses, turns that never close. This probe reads the prompts the
run actually sent (the rollout dumps' sample `prompt`, else the `Finish rollout: [...]`
samples of the log) and the role markers of the checkpoint's chat template
(`chat_template.jinja`, `chat_template.json` or tokenizer_config.json's `chat_template`).

It also holds what the `stop_tokens` rule needs from the same files: the template's
end-of-turn token and the ids of token strings (tokenizer.json / tokenizer_config.json).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from triage.errors import TriageError, Unavailable
from triage.finding import Observation
from triage.probe import Cost, Probe
from triage.run.run import NEEDS_HELP

from probes.base_model import checkpoint_location, read_json
from probes.rollout_text import parse_finish_rollout

if TYPE_CHECKING:
    from triage.run.run import Run

MAX_TEMPLATE_CHARS = 1_000_000
HEAD = 200


# --- chat template families ------------------------------------------------------------


@dataclass(frozen=True)
class Family:
    """One chat-template family: how its turns open, which roles it names, how a turn ends."""

    name: str
    signature: str  # literal text whose presence in a template names the family
    opener: re.Pattern[str]  # a well-formed turn opener in a rendered prompt; group 1 is the role
    bare: re.Pattern[str]  # any use of the family's markers in a rendered prompt
    assistant_roles: tuple[str, ...]
    end_of_turn: str | None  # None: the tokenizer's eos_token closes the turn
    example: str  # a marker as the evidence names it


FAMILIES: tuple[Family, ...] = (
    Family("chatml", "<|im_start|>", re.compile(r"<\|im_start\|>(system|user|assistant|tool|developer|function)\n"),
           re.compile(r"<\|im_start\|>|<\|im_end\|>"), ("assistant",), "<|im_end|>", "<|im_start|>user"),
    Family("llama3", "<|start_header_id|>",
           re.compile(r"<\|start_header_id\|>(system|user|assistant|ipython|tool)<\|end_header_id\|>"),
           re.compile(r"<\|start_header_id\|>|<\|end_header_id\|>|<\|eot_id\|>"), ("assistant",), "<|eot_id|>",
           "<|start_header_id|>user<|end_header_id|>"),
    Family("gemma", "<start_of_turn>", re.compile(r"<start_of_turn>(user|model|system)\n"),
           re.compile(r"<start_of_turn>|<end_of_turn>"), ("model",), "<end_of_turn>", "<start_of_turn>user"),
    Family("deepseek", "<｜User｜>", re.compile(r"<｜(User|Assistant)｜>"), re.compile(r"<｜(?:User|Assistant)｜>"),
           ("Assistant",), None, "<｜User｜>"),
    Family("deepseek_ascii", "<|User|>", re.compile(r"<\|(User|Assistant)\|>"), re.compile(r"<\|(?:User|Assistant)\|>"),
           ("Assistant",), None, "<|User|>"),
    Family("phi", "<|user|>", re.compile(r"<\|(system|user|assistant)\|>"), re.compile(r"<\|(?:system|user|assistant)\|>"),
           ("assistant",), "<|end|>", "<|user|>"),
    Family("inst", "[INST]", re.compile(r"\[(INST|/INST)\]"), re.compile(r"\[/?INST\]"), ("/INST",), None, "[INST]"),
    Family("alpaca", "### Instruction:", re.compile(r"(?m)^### (Instruction|Input|Response):"),
           re.compile(r"(?m)^### (?:Instruction|Input|Response):"), ("Response",), None, "### Instruction:"),
    Family("human_assistant", "Human:", re.compile(r"(?m)^\s*(Human|Assistant|USER|ASSISTANT):"),
           re.compile(r"(?m)^\s*(?:Human|Assistant|USER|ASSISTANT):"), ("Assistant", "ASSISTANT"), None, "Human:"),
)
_BY_NAME = {f.name: f for f in FAMILIES}

# When the checkpoint itself is not reachable, its name still says which template an
# instruct / chat model of a known line was trained with (each line's published model card
# and tokenizer_config.json); a base model's name matches none of these.
NAME_FAMILIES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"qwen[\d.]*-.*(instruct|chat)|qwen3-(?!.*base)", re.I), "chatml"),
    (re.compile(r"llama-?3[\d.]*-.*instruct", re.I), "llama3"),
    (re.compile(r"gemma-?[\d.]*-.*-it\b", re.I), "gemma"),
    (re.compile(r"(mistral|mixtral)-.*instruct|llama-?2-.*chat", re.I), "inst"),
)


def family_by_name(given: str | None) -> Family | None:
    """The chat-template family a checkpoint's name implies, for a known instruct line."""
    name = Path(str(given or "").rstrip("/")).name
    for pattern, family in NAME_FAMILIES:
        if name and pattern.search(name):
            return _BY_NAME[family]
    return None


def chat_template(directory: Path) -> tuple[str, str] | None:
    """(template text, file it came from) of an HF checkpoint; None when it has none."""
    jinja = directory / "chat_template.jinja"
    if jinja.is_file():
        try:
            text = jinja.read_text(encoding="utf-8")[:MAX_TEMPLATE_CHARS]
        except (OSError, UnicodeDecodeError):
            text = ""
        if text.strip():
            return text, "chat_template.jinja"
    for name in ("chat_template.json", "tokenizer_config.json"):
        value = (read_json(directory / name) or {}).get("chat_template")
        if isinstance(value, list):  # named templates: the default one, else all of them
            named = {str(t.get("name")): str(t.get("template", "")) for t in value if isinstance(t, dict)}
            value = named.get("default") or "\n".join(named.values())
        if isinstance(value, str) and value.strip():
            return value[:MAX_TEMPLATE_CHARS], f"{name}:chat_template"
    return None


def template_family(template: str) -> Family | None:
    """The family whose markers the template writes (the earliest signature in it)."""
    found = [(template.find(f.signature), f) for f in FAMILIES if f.signature in template]
    return min(found, key=lambda t: t[0])[1] if found else None


def eos_token(directory: Path) -> str | None:
    token = (read_json(directory / "tokenizer_config.json") or {}).get("eos_token")
    if isinstance(token, dict):
        token = token.get("content")
    return token if isinstance(token, str) and token else None


# What the template writes right after a message's content: `content + '<|im_end|>'`,
# `content | trim + '<|eot_id|>'`, `{{ content }}<end_of_turn>`, `content + eos_token`.
_AFTER_CONTENT = re.compile(
    r"content['\"\]]*\)?\s*(?:\|\s*\w+\s*)*(?:\+\s*(?:(['\"])(?P<lit>.*?)\1|(?P<eos>eos_token))|}}(?P<raw>[^{]{1,40}))",
    re.S,
)
_TOKEN = re.compile(r"<[|｜]?[^<>\s]{1,40}[|｜]?>|\[/?[A-Z_]+\]")


def end_of_turn(directory: Path, template: str) -> tuple[str | None, str]:
    """(the token that closes a turn in this template, how it was found)."""
    family = template_family(template)
    if family is not None and family.end_of_turn and family.end_of_turn in template:
        return family.end_of_turn, f"{family.name} template writes {family.end_of_turn} after each message"
    candidates: list[str] = []
    for m in _AFTER_CONTENT.finditer(template):
        if m.group("eos"):
            candidates.append("eos_token")
            continue
        literal = m.group("lit") or m.group("raw") or ""
        token = _TOKEN.search(literal)
        if token and token.group(0) not in ("[INST]", "[/INST]"):
            candidates.append(token.group(0))
    if candidates:
        first = Counter(candidates).most_common(1)[0][0]
        if first != "eos_token":
            return first, "the token the template writes right after a message's content"
    eos = eos_token(directory)
    if eos and ("eos_token" in template or eos in template):
        return eos, "the template closes turns with eos_token (tokenizer_config.json)"
    return None, "no end-of-turn token found after the message content in the template"


def token_ids(directory: Path) -> dict[str, int]:
    """Token string -> id from tokenizer.json (added tokens, then the vocabulary) and tokenizer_config.json."""
    out: dict[str, int] = {}
    tok = read_json(directory / "tokenizer.json") or {}
    model = tok.get("model")
    vocab = model.get("vocab") if isinstance(model, dict) else None
    if isinstance(vocab, dict):
        out.update({k: v for k, v in vocab.items() if isinstance(k, str) and isinstance(v, int)})
    elif isinstance(vocab, list):  # Unigram: [[piece, score], ...]
        out.update({p[0]: i for i, p in enumerate(vocab) if isinstance(p, list) and p and isinstance(p[0], str)})
    for added in tok.get("added_tokens") or []:
        if isinstance(added, dict) and isinstance(added.get("content"), str) and isinstance(added.get("id"), int):
            out[added["content"]] = added["id"]
    decoder = (read_json(directory / "tokenizer_config.json") or {}).get("added_tokens_decoder")
    if isinstance(decoder, dict):
        for key, entry in decoder.items():
            if isinstance(entry, dict) and isinstance(entry.get("content"), str) and str(key).isdigit():
                out[entry["content"]] = int(key)
    return out


# --- the prompts the run sent ----------------------------------------------------------


@dataclass(frozen=True)
class SentPrompt:
    """One prompt as sent: its text (or messages), where it was found."""

    text: str
    messages: tuple[dict[str, Any], ...] | None
    where: str
    with_response: bool  # a Finish-rollout sample: the response follows the prompt


def _messages(value: Any) -> tuple[dict[str, Any], ...] | None:
    if isinstance(value, (list, tuple)) and value and all(isinstance(m, dict) and "content" in m for m in value):
        return tuple(value)
    return None


def sent_prompts(run: Run, max_dumps: int = 4, per_dump: int = 32) -> tuple[list[SentPrompt], list[str]]:
    """The prompts of the first rollout dumps, else the log's Finish-rollout samples; and unreadable dumps."""
    problems: list[str] = []
    out: list[SentPrompt] = []
    for path, dump in run.rollout_dumps(problems, limit=max_dumps):
        for i, sample in enumerate(dump.samples[:per_dump]):
            prompt = sample.get("prompt")
            messages = _messages(prompt)
            if messages is not None:
                text = "\n".join(str(m.get("content", "")) for m in messages)
            elif isinstance(prompt, str):
                text = prompt
            else:
                continue
            out.append(SentPrompt(text, messages, f"{path.parent.name}/{path.name}#{i}", False))
    if out:
        return out, problems
    if run.artifacts.logs:
        for line in run.log.finish_rollouts:
            text = parse_finish_rollout(line.text)
            if text:
                out.append(SentPrompt(text, None, line.where(), True))
    return out, problems


def uses_chat_template(run: Run, family: Family | None, apply_flag: bool) -> tuple[bool, str]:
    """Whether the run formats prompts with a chat template: the flag, or the family's markers in what it sent."""
    if apply_flag:
        return True, "--apply-chat-template"
    if family is None:
        return False, "no --apply-chat-template"
    try:
        prompts, _ = sent_prompts(run, max_dumps=2, per_dump=8)
    except TriageError:
        return False, "no --apply-chat-template"
    marked = [p for p in prompts if family.opener.search(p.text)]
    if marked:
        return True, f"{family.example} markers in {len(marked)} of {len(prompts)} prompts sent ({marked[0].where})"
    return False, "no --apply-chat-template and no chat markers in the prompts sent"


# --- classifying one prompt ------------------------------------------------------------


def _in_structure(text: str, family: Family, with_response: bool) -> bool:
    """The family's markers all open well-formed turns, and the last turn opened is the assistant's."""
    bare = len(family.bare.findall(text))
    openers = list(family.opener.finditer(text))
    if not openers:
        return False
    if family.end_of_turn is not None:
        closers = text.count(family.end_of_turn)
        # every turn but the assistant's open one is closed (a Finish-rollout sample may close it too)
        if bare != len(openers) + closers or closers < len(openers) - 1:
            return False
    elif family.name != "inst" and bare != len(openers):
        return False
    if family.name == "inst":
        return "[/INST]" in text and text.rfind("[/INST]") > text.rfind("[INST]")
    return openers[-1].group(1) in family.assistant_roles or with_response


def classify(prompt: SentPrompt, family: Family) -> tuple[str, list[str]]:
    """(follows_template | foreign_template | untemplated | own_out_of_structure, markers found)."""
    text = prompt.text
    if prompt.with_response and family.end_of_turn and not family.opener.search(text):
        text = text.replace(family.end_of_turn, "")  # the model closing its own answer, not the prompt's markup
    foreign = [f for f in FAMILIES if f is not family and f.bare.search(text)
               and not (family.name == "deepseek" and f.name == "deepseek_ascii")]
    own = bool(family.bare.search(text))
    found = [f.example for f in foreign] + ([family.example] if own else [])
    if prompt.messages is not None:
        # a list of messages is rendered by the template itself; only role markers inside it are foreign
        return ("foreign_template" if (foreign or own) else "follows_template"), found
    if own and not foreign:
        return ("follows_template" if _in_structure(text, family, prompt.with_response) else "own_out_of_structure"), found
    if foreign and not own:
        return "foreign_template", found
    if foreign and own:
        # the template's own turns wrapping another template's roles inside a message
        return "foreign_template", found
    return "untemplated", found


# --- the probe -------------------------------------------------------------------------


class PromptTemplateParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    max_dumps: int = 4
    per_dump: int = 32
    examples: int = 3


class PromptTemplate(Probe):
    """Does the training data follow the model's chat template?"""

    name = "prompt_template"
    outcomes = ("follows_template", "foreign_template", "untemplated")
    needs = ("hf_checkpoint",)
    cost = Cost.STATIC
    Params = PromptTemplateParams

    def examine(self, run: Run) -> Observation:
        p: PromptTemplateParams = self.params  # type: ignore[assignment]
        given, directory = checkpoint_location(run)
        found = chat_template(directory) if directory is not None else None
        if found is not None:
            template, template_source = found
            family = template_family(template)
        elif family_by_name(given) is not None:
            family = family_by_name(given)
            template_source = f"the checkpoint's name ({Path(str(given).rstrip('/')).name}; its files are not reachable)"
        elif directory is None:
            raise Unavailable("hf_checkpoint", f"the HF checkpoint {given or ''} is not reachable from the run".replace("  ", " "),
                              NEEDS_HELP["hf_checkpoint"])
        else:
            raise Unavailable("hf_checkpoint", f"{directory} has no chat template (chat_template.jinja, "
                              "chat_template.json, tokenizer_config.json:chat_template)",
                              "keep the checkpoint's tokenizer_config.json with its chat_template")
        if family is None:
            raise Unavailable("hf_checkpoint", f"the chat template in {template_source} writes no role markers this "
                              "probe knows (ChatML, Llama 3, Gemma, DeepSeek, Phi, [INST])",
                              "compare the prompts with the template by hand")
        prompts, problems = sent_prompts(run, p.max_dumps, p.per_dump)
        if not prompts:
            raise Unavailable("rollout_dumps", "no rollout dump with sample prompts and no `Finish rollout` line in the log"
                              + (f" ({problems[0]})" if problems else ""),
                              "rerun with --save-debug-rollout-data, or keep the driver log with its Finish rollout lines")
        try:
            apply_flag = bool(run.args.get("apply_chat_template"))
        except TriageError:
            apply_flag = False

        classes: dict[str, list[tuple[SentPrompt, list[str]]]] = {}
        for prompt in prompts:
            cls, markers = classify(prompt, family)
            classes.setdefault(cls, []).append((prompt, markers))
        counts = {k: len(v) for k, v in classes.items()}
        n = len(prompts)
        foreign_n = counts.get("foreign_template", 0) + counts.get("own_out_of_structure", 0)
        follows_n = counts.get("follows_template", 0)
        plain_n = counts.get("untemplated", 0)
        if foreign_n and foreign_n >= max(follows_n, plain_n):
            outcome = "foreign_template"
            picked = classes.get("foreign_template", []) + classes.get("own_out_of_structure", [])
            share = foreign_n / n
        elif plain_n > follows_n:
            outcome, picked, share = "untemplated", classes["untemplated"], plain_n / n
        else:
            outcome, picked, share = "follows_template", classes.get("follows_template", []), follows_n / n

        markers_found = sorted({m for items in classes.values() for _p, ms in items for m in ms})
        evidence: dict[str, Any] = {
            "prompts_checked": n,
            "counts": counts,
            "source": "rollout dumps" if not prompts[0].with_response else "Finish rollout lines",
            "template_family": family.name,
            "template_source": template_source,
            "expected_markers": [family.example] + ([family.end_of_turn] if family.end_of_turn else []),
            "markers_found": markers_found,
            "apply_chat_template": apply_flag,
            "examples": [{"where": sp.where, "head": sp.text[:HEAD] + ("…" if len(sp.text) > HEAD else ""),
                          "markers": ms} for sp, ms in picked[: p.examples]],
        }
        if problems:
            evidence["unreadable_dumps"] = problems[:3]
        what = "prompts" if not prompts[0].with_response else "logged samples"
        if outcome == "foreign_template":
            other = sorted({m for _sp, ms in picked for m in ms if m != family.example})
            how = (f"another template's role markers ({', '.join(other)})" if other
                   else f"this template's markers ({family.example}) out of its structure")
            return self.observe(
                "foreign_template",
                f"{foreign_n} of {n} {what} carry {how}, not the checkpoint's {family.name} chat template "
                f"({family.example} ...)" + ("" if apply_flag else "; --apply-chat-template is off") + ".",
                round(0.6 + 0.35 * share, 3),
                **evidence,
            )
        if outcome == "untemplated":
            note = ("--apply-chat-template is off" if not apply_flag
                    else "--apply-chat-template is on, yet the recorded prompts show no markers")
            return self.observe(
                "untemplated",
                f"{plain_n} of {n} {what} are plain text without the chat model's {family.name} turns ({note}).",
                round((0.55 if not apply_flag else 0.3) + 0.35 * share, 3),
                **evidence,
            )
        return self.observe(
            "follows_template",
            f"{follows_n} of {n} {what} follow the checkpoint's {family.name} chat template ({family.example} ...).",
            round(0.5 + 0.4 * share, 3),
            **evidence,
        )
