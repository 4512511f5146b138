"""Hydra / OmegaConf overrides and YAML configs (verl; OpenRLHF and axolotl YAML), as flat dotted keys.

verl is configured as `python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.n=8
data.train_batch_size=256 +trainer.val_before_train=False ~reward_model` (Hydra's override
grammar: `key=value`, `+key=value` adds, `++key=value` adds or overrides, `~key` deletes),
and Hydra saves the composed config in `outputs/<date>/<time>/.hydra/config.yaml` with
the overrides in `.hydra/overrides.yaml`. Both become `{"actor_rollout_ref.rollout.n": 8, ...}`.
Values are typed as YAML would type them (`8` int, `1e-6` float, `null`, `true`,
`[a,b]` a list); `${a.b}` interpolations are resolved where they name a known key and
left as written otherwise. Nothing is imported or run.
"""

from __future__ import annotations

from triage import safe_io

import re
from pathlib import Path
from typing import Any

import yaml

from triage.errors import CorruptArtifact

MAX_CONFIG_BYTES = 4 << 20
DELETED = object()  # `~key`: the key is removed from the config
_KEY = re.compile(r"^(?P<prefix>\+{0,2}|~)(?P<key>[A-Za-z_][\w.\-/@]*(?:\[\d+\])?)(?:=(?P<value>.*))?$", re.S)
_INTERP = re.compile(r"\$\{(?P<ref>[A-Za-z_][\w.]*)\}")
_FLOATISH = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)")


def _value(text: str) -> Any:
    """A Hydra override value, typed as YAML would (plus `1e-6`, which YAML 1.1 leaves a string)."""
    s = text.strip()
    if _FLOATISH.fullmatch(s):
        return float(s)
    try:
        value = yaml.safe_load(s) if s else ""
    except yaml.YAMLError:
        return s
    if isinstance(value, (dict, list, str, int, float, bool)) or value is None:
        return value
    return s


def is_override(token: str) -> bool:
    """`a.b=1`, `+a=1`, `++a=1`, `~a`: a Hydra override rather than a flag or a path."""
    if token.startswith("-") or "=" not in token and not token.startswith("~"):
        return False
    return bool(_KEY.match(token))


def parse_overrides(tokens: list[str]) -> dict[str, Any]:
    """Overrides as `{dotted.key: value}`; a `~key` maps to DELETED."""
    out: dict[str, Any] = {}
    for tok in tokens:
        m = _KEY.match(tok)
        if not m:
            continue
        key = m.group("key")
        if m.group("prefix") == "~":
            out[key] = DELETED
        elif m.group("value") is not None:
            out[key] = _value(m.group("value"))
    return out


def split_overrides(tokens: list[str]) -> tuple[dict[str, Any], list[str]]:
    """(overrides, the other tokens) of a command's words after the program."""
    overrides: list[str] = []
    rest: list[str] = []
    for i, tok in enumerate(tokens):
        prev = tokens[i - 1] if i else ""
        if is_override(tok) and not (prev.startswith("--") and "=" not in prev):
            overrides.append(tok)
        else:
            rest.append(tok)
    return parse_overrides(overrides), rest


# A config holds hundreds of keys; YAML aliases can make a small text name a subtree many times
# over (`&a` / `*a` nested), so the walk stops at this many.
MAX_FLAT_KEYS = 100_000


def flatten(obj: Any, prefix: str = "", out: dict[str, Any] | None = None, depth: int = 0) -> dict[str, Any]:
    """A nested mapping as dotted keys (lists stay values), at most MAX_FLAT_KEYS of them."""
    out = {} if out is None else out
    if isinstance(obj, dict) and depth < 16:
        for key, value in obj.items():
            if len(out) >= MAX_FLAT_KEYS:
                break
            name = f"{prefix}.{key}" if prefix else str(key)
            if isinstance(value, dict) and value:
                flatten(value, name, out, depth + 1)
            else:
                out[name] = value
    return out


def resolve_interpolations(flat: dict[str, Any]) -> dict[str, Any]:
    """`${a.b}` replaced by the value of `a.b` where it is known (a few rounds, for chains)."""
    for _ in range(4):
        changed = False
        for key, value in flat.items():
            if not isinstance(value, str) or "${" not in value:
                continue
            m = _INTERP.fullmatch(value.strip())
            if m and m.group("ref") in flat and not (isinstance(flat[m.group("ref")], str) and "${" in flat[m.group("ref")]):
                flat[key] = flat[m.group("ref")]
                changed = True
        if not changed:
            break
    return flat


def read_config_yaml(path: str | Path) -> dict[str, Any]:
    """A YAML config (Hydra's composed config.yaml, a verl / OpenRLHF / axolotl config), or ms-swift's `args.json`
    (swift/llm/argument/base_args/base_args.py, `save_args`: every argument of the run, written to its output
    directory), as dotted keys.

    Hydra's `overrides.yaml` (a list of override strings) is read as overrides.
    """
    p = Path(path)
    try:
        with safe_io.open_regular(p) as fh:  # a regular file inside the run; never more than the limit read
            data = fh.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise CorruptArtifact(p, f"cannot read config: {exc.strerror}") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise CorruptArtifact(p, f"config is larger than {MAX_CONFIG_BYTES >> 20} MB")
    if p.suffix == ".json":  # ms-swift's args.json: its arguments as one JSON object
        try:
            raw = safe_io.loads_json(data)
        except ValueError as exc:
            raise CorruptArtifact(p, f"config is not valid JSON: {str(exc).splitlines()[0]}") from None
        return resolve_interpolations(flatten(raw)) if isinstance(raw, dict) else {}
    try:
        raw = yaml.safe_load(data.decode("utf-8", "replace"))
    except yaml.YAMLError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise CorruptArtifact(p, f"config is not valid YAML: {first}") from None
    if isinstance(raw, list) and all(isinstance(t, str) for t in raw):
        return {k: v for k, v in parse_overrides(raw).items() if v is not DELETED}
    if not isinstance(raw, dict):
        return {}
    return resolve_interpolations(flatten(raw))


# Hydra's report of a job that raised (hydra/_internal/utils.py, run_and_report):
# `Error executing job with overrides: ['algorithm.adv_estimator=grpo', 'data.train_batch_size=16', ...]`,
# the overrides as Python prints a list of str. verl's entry points run under Hydra, so a verl
# crash pasted from its first line carries the run's arguments (verl-project/verl#1191).
_HYDRA_REPORT = re.compile(r"Error executing job with overrides: \[(?P<items>.*)")
_QUOTED = re.compile(r"'((?:[^'\\]|\\.)*)'|\"((?:[^\"\\]|\\.)*)\"")
CUT_MARK = " … "  # where a capped log line lost its middle (triage.formats.slime_log._cap)


def overrides_in_error_report(text: str) -> dict[str, Any]:
    """The overrides Hydra listed when the job raised, read item by item (no eval): a list cut by
    the paste or by a capped log line keeps its complete items, and an item that spans the cut is
    dropped; `~key` maps to DELETED as on a command line."""
    m = _HYDRA_REPORT.search(text)
    if m is None:
        return {}
    tokens = []
    for q in _QUOTED.finditer(m.group("items")):
        token = q.group(1) if q.group(1) is not None else q.group(2)
        if CUT_MARK in token or "\\" in token:
            continue  # spans the cut, or an escaped quote whose value the override grammar would misread
        if is_override(token):
            tokens.append(token)
    return parse_overrides(tokens)


MIN_KNOWN_KEYS = 2  # a mapping with fewer argument names the frameworks use is not a training config
_LINE_KEY = re.compile(r"^[ \t]*([A-Za-z_][\w-]*)[ \t]*:(?:[ \t]|$)", re.M)


def pasted_config(text: str) -> dict[str, Any]:
    """A YAML training config pasted as the log (a TRL recipe, an OpenRLHF or verl config:
    huggingface/trl#3347), as dotted keys; {} for text that is not one: not YAML, not a mapping,
    or a mapping holding fewer than MIN_KNOWN_KEYS argument names of the frameworks
    (triage/frameworks/args.yaml), as a log's `key: value` lines would."""
    from triage import frameworks

    known = frameworks.canonical_arg_names()
    # before parsing (a megabyte of `INFO: …` lines parses as YAML for seconds): the keys the text
    # opens its lines with must name at least MIN_KNOWN_KEYS arguments, by their last segment
    last = {name.rsplit(".", 1)[-1] for name in known}
    keyed = {m.group(1).replace("-", "_") for m in _LINE_KEY.finditer(text)}
    if len(keyed & last) < MIN_KNOWN_KEYS:
        return {}
    raw = _mapping(text)
    if raw is None:
        # a config amid log lines, or cut in its last line (hiyouga/LlamaFactory#7706, huggingface/open-r1#436):
        # each stretch of `key: value` lines read on its own, the first of them winning a key
        raw = {}
        for block in _yaml_blocks(text):
            for key, value in (_mapping(block) or {}).items():
                raw.setdefault(key, value)
    if len(raw) < 3:
        return {}
    flat = flatten(raw)
    if sum(1 for key in flat if key.replace("-", "_") in known) < MIN_KNOWN_KEYS:
        return {}
    return resolve_interpolations(flat)


def _mapping(text: str) -> dict[str, Any] | None:
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    return raw if isinstance(raw, dict) else None


# a top-level `key: value` line of a config; an exception's `SomeError: message` is not one
_TOP_KEY = re.compile(r"[A-Za-z_][\w.-]*[ \t]*:(?:[ \t]|$)")
_NOT_A_KEY = re.compile(r"\w*(?:Error|Exception|Warning)\b")
MIN_BLOCK_KEYS = 3


def _yaml_blocks(text: str) -> list[str]:
    """The stretches of a text that read as YAML mappings: top-level `key: value` lines with the
    indented, list and comment lines under them; any other line (a log line, a key cut before its
    colon) ends a stretch."""
    blocks: list[str] = []
    lines: list[str] = []
    keys = 0

    def close() -> None:
        nonlocal lines, keys
        if keys >= MIN_BLOCK_KEYS:
            blocks.append("\n".join(lines))
        lines, keys = [], 0

    for line in text.splitlines():
        if _TOP_KEY.match(line) and not _NOT_A_KEY.match(line):
            lines.append(line)
            keys += 1
        elif lines and (not line.strip() or line[:1] in (" ", "\t", "-", "#")):
            lines.append(line)
        else:
            close()
    close()
    return blocks
