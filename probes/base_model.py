"""Is the run's HF checkpoint a base (pretrain) model used with a chat template?

The guides: "If you are testing with a pretrain model, try switching to the instruct
version of the same architecture to check whether the garbled output is specific to
pretrain models." A base model asked a ChatML-formatted question answers with
continuations that look broken but are not a bug. The signs, strongest first:

1. the checkpoint's name (`...-Base`, `base`) or its config's `_name_or_path`;
   a name saying `Instruct` / `Chat` / `-it` settles it the other way;
2. no chat template (`chat_template` in tokenizer_config.json, `chat_template.jinja`,
   `chat_template.json`) while the run formats prompts with one (`--apply-chat-template`,
   or ChatML / Llama-3 markers in the printed rollouts);
3. a generation config without sampling defaults and with a single end token
   (instruct releases ship `do_sample`, `temperature` and several stop ids);
4. behaviour, when the files cannot tell (a base model shipped with its family's
   tokenizer and template): asked in the chat template, an instruct model closes its
   turn with the template's end-of-turn marker (`<|im_end|>`, `<|eot_id|>`, ...), a base
   model ends on its document end (`<|endoftext|>`) without ever closing the turn.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from triage.errors import TriageError, Unavailable
from triage.finding import Observation
from triage.metrics import flag_arg
from triage.probe import Cost, Probe
from triage.run.run import NEEDS_HELP
from triage.thresholds import threshold

from probes.rollout_text import CHAT_MARKERS, dump_samples, log_samples

if TYPE_CHECKING:
    from triage.run.run import Run

BASE_NAME = re.compile(r"(?i)(?:^|[-_. ])(?:base|pretrain(?:ed)?|pt)(?:$|[-_. ])")
INSTRUCT_NAME = re.compile(r"(?i)(instruct|(?:^|[-_. ])(?:chat|it|sft|rlhf|dpo)(?:$|[-_. ]))")
CHECKPOINT_ARGS = ("hf_checkpoint", "model_name_or_path", "base_model", "model_path")
MAX_JSON_BYTES = 16 * 1024 * 1024  # tokenizer_config.json with an inlined template is well under this


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        if not path.is_file() or path.stat().st_size > MAX_JSON_BYTES:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def checkpoint_location(run: Run) -> tuple[str | None, Path | None]:
    """(the name the run gave its HF checkpoint, the directory here), either possibly None."""
    for name in CHECKPOINT_ARGS:
        try:
            value = run.args.get(name)
        except TriageError:
            value = None
        if isinstance(value, str) and value.strip():
            resolved = run.resolve_path(value)
            if resolved is not None and resolved.is_dir():
                return value, resolved
            if run.artifacts.hf_checkpoints:
                return value, run.artifacts.hf_checkpoints[0]
            return value, None
    if run.artifacts.hf_checkpoints:
        d = run.artifacts.hf_checkpoints[0]
        return str(d), d
    return None, None


def chat_template_source(directory: Path) -> tuple[bool | None, str]:
    """(has a chat template, where it was looked for); None when there is no tokenizer config to tell."""
    for name in ("chat_template.jinja", "chat_template.json"):
        if (directory / name).is_file():
            return True, name
    config = read_json(directory / "tokenizer_config.json")
    if config is None:
        return None, "no readable tokenizer_config.json"
    template = config.get("chat_template")
    if isinstance(template, str) and template.strip():
        return True, "tokenizer_config.json:chat_template"
    if isinstance(template, list) and template:
        return True, "tokenizer_config.json:chat_template (named templates)"
    return False, "tokenizer_config.json has no chat_template"


END_OF_TURN = ("<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end|>", "<|END_OF_TURN_TOKEN|>")
SPECIAL_TOKEN = re.compile(r"<\|[A-Za-z_]+\|>|</s>|<end_of_turn>|<eos>")
MIN_RESPONSES = 8


def chat_template_text(directory: Path) -> str:
    jinja = directory / "chat_template.jinja"
    if jinja.is_file():
        try:
            return jinja.read_text(encoding="utf-8")[:MAX_JSON_BYTES]
        except (OSError, UnicodeDecodeError):
            return ""
    template = (read_json(directory / "tokenizer_config.json") or {}).get("chat_template")
    if isinstance(template, list):
        return " ".join(str(t.get("template", "")) for t in template if isinstance(t, dict))
    return template if isinstance(template, str) else ""


def turn_closing(run: Run, directory: Path) -> dict[str, Any] | None:
    """How the run's responses end, against the template's end-of-turn marker.

    None when it cannot tell: no end-of-turn marker in the template, too few responses,
    or responses printed with their special tokens trimmed.
    """
    template = chat_template_text(directory)
    marker = next((m for m in END_OF_TURN if m in template), None)
    if marker is None:
        return None
    from_dumps, _problems = dump_samples(run, per_dump=64, max_dumps=4)
    responses = [s.response for s in [*log_samples(run), *from_dumps] if s.has_chat_markup]
    with_specials = [r for r in responses if SPECIAL_TOKEN.search(r)]
    if len(with_specials) < MIN_RESPONSES:
        return None
    closed = sum(1 for r in with_specials if marker in r)
    return {"end_of_turn": marker, "responses": len(with_specials), "closing_the_turn": closed,
            "closed_fraction": round(closed / len(with_specials), 3),
            "example": with_specials[0][:120]}


def run_uses_chat_template(run: Run) -> tuple[bool, str]:
    """Whether the run formats prompts with a chat template, and how that is known."""
    if flag_arg(run, "apply_chat_template"):
        return True, "--apply-chat-template"
    for sample in log_samples(run)[:5]:
        if sample.has_chat_markup:
            return True, f"chat markers in the rollout printed at {sample.where}"
    for path, dump in run.rollout_dumps([], limit=1, with_eval=True):
        for sample in dump.samples[:5]:
            prompt = sample.get("prompt")
            text = prompt if isinstance(prompt, str) else json.dumps(prompt, default=str)
            if isinstance(prompt, list) or any(mk in text for mk in CHAT_MARKERS):
                return True, f"chat-formatted prompt in {path.name}"
    return False, "no --apply-chat-template and no chat markers in the rollouts"


def generation_hint(directory: Path) -> tuple[str | None, dict[str, Any]]:
    """'base' / 'instruct' / None from generation_config.json, with the fields read."""
    gen = read_json(directory / "generation_config.json")
    if gen is None:
        return None, {}
    fields = {k: gen.get(k) for k in ("do_sample", "temperature", "top_p", "eos_token_id", "bos_token_id") if k in gen}
    eos = gen.get("eos_token_id")
    several_eos = isinstance(eos, list) and len(eos) > 1
    sampling = bool(gen.get("do_sample")) or "temperature" in gen or "top_p" in gen
    if several_eos or sampling:
        return "instruct", fields
    if eos is not None:
        return "base", fields
    return None, fields


class BaseModelProbe(Probe):
    """Is the HF checkpoint a base (pretrain) model rather than an instruct one?"""

    name = "base_model"
    outcomes = ("base", "instruct")
    needs = ("hf_checkpoint",)
    cost = Cost.STATIC

    def examine(self, run: Run) -> Observation:
        given, directory = checkpoint_location(run)
        if given is None and directory is None:
            raise Unavailable("hf_checkpoint", "the run names no HF checkpoint and none is in its directory",
                              NEEDS_HELP["hf_checkpoint"])
        ev: dict[str, Any] = {"checkpoint": given}
        if directory is not None:
            ev["directory"] = str(directory)
        names = [Path(given).name] if given else []
        if directory is not None:
            config = read_json(directory / "config.json") or {}
            for key in ("_name_or_path", "name_or_path"):
                if isinstance(config.get(key), str) and config[key]:
                    names.append(Path(config[key]).name)
                    ev["config_name_or_path"] = config[key]
            names.append(directory.name)
        names = list(dict.fromkeys(n for n in names if n))
        ev["names"] = names
        says_base = [n for n in names if BASE_NAME.search(n) and not INSTRUCT_NAME.search(n)]
        says_instruct = [n for n in names if INSTRUCT_NAME.search(n)]
        uses, how = run_uses_chat_template(run)
        ev["run_uses_chat_template"] = uses
        ev["chat_template_use"] = how

        if says_base:
            return self.observe(
                "base",
                f"The checkpoint is a base (pretrain) model by its name ({says_base[0]})"
                + (f", and the run formats prompts with a chat template ({how})." if uses else "."),
                0.85,
                **ev,
            )
        if says_instruct:
            return self.observe("instruct", f"The checkpoint is an instruct model by its name ({says_instruct[0]}).",
                                0.75, **ev)
        if directory is None:
            raise Unavailable(
                "hf_checkpoint",
                f"the HF checkpoint {given!r} is not reachable from the run directory and its name says neither "
                "base nor instruct",
                NEEDS_HELP["hf_checkpoint"],
            )
        has_template, where = chat_template_source(directory)
        hint, gen_fields = generation_hint(directory)
        ev["chat_template"] = {"present": has_template, "where": where}
        if gen_fields:
            ev["generation_config"] = gen_fields
        if has_template is False:
            if uses:
                return self.observe(
                    "base",
                    f"The checkpoint's tokenizer has no chat template ({where}) while the run formats prompts with "
                    f"one ({how}): a pretrain model answering chat-formatted prompts.",
                    0.75,
                    **ev,
                )
            return self.observe(
                "base",
                f"The checkpoint's tokenizer has no chat template ({where})"
                + (" and its generation config has no sampling defaults" if hint == "base" else "")
                + ": a pretrain model.",
                0.65 if hint == "base" else 0.55,
                **ev,
            )
        if has_template is None and hint is None:
            raise Unavailable(
                "hf_checkpoint",
                f"{directory} has no tokenizer_config.json or generation_config.json to tell a base model from an "
                "instruct one, and its name says neither",
                NEEDS_HELP["hf_checkpoint"],
            )
        if has_template is None and hint == "base":
            return self.observe("base", "The checkpoint's generation config has a single end token and no sampling "
                                "defaults, as pretrain releases ship it.", 0.5, **ev)
        closing = turn_closing(run, directory) if uses else None
        if closing is not None:
            ev["turn_closing"] = closing
            if closing["closed_fraction"] < threshold("base_model.closed_fraction"):
                return self.observe(
                    "base",
                    f"Asked in the chat template, the model closed its turn with {closing['end_of_turn']} in "
                    f"{closing['closing_the_turn']} of {closing['responses']} responses: it does not follow the "
                    "template, as a pretrain model does not (the files alone look like an instruct model's).",
                    0.7,
                    **ev,
                )
        return self.observe(
            "instruct",
            "The checkpoint ships a chat template" + (f" ({where})" if has_template else "")
            + (" and instruct-style generation defaults" if hint == "instruct" else "")
            + ": not a base model.",
            0.7,
            **ev,
        )
