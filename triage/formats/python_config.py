"""`GRPOConfig(...)` / `TrainingArguments(...)` keyword arguments, read from a training script with `ast`.

TRL and HF Trainer users configure a run in Python::

    LR = 1e-6
    training_args = GRPOConfig(output_dir="out", learning_rate=LR, num_generations=8,
                               max_completion_length=1024, per_device_train_batch_size=4)

The script is parsed, never imported or executed. Keyword values that are literals
(`ast.literal_eval`), or names bound once at module level to a literal, are read;
anything else (a function call, an f-string, `args.lr`) is left unknown and listed in
`unknown`. When a script builds several such configs, later ones override earlier ones.
"""

from __future__ import annotations

from triage import safe_io

import ast
import io
import re
import textwrap
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

from triage.errors import CorruptArtifact

MAX_SCRIPT_BYTES = 2 << 20
# The HF / TRL argument classes whose keywords are a run's arguments.
CONFIG_CLASSES = frozenset({
    "GRPOConfig", "PPOConfig", "RLOOConfig", "DPOConfig", "SFTConfig", "OnlineDPOConfig", "KTOConfig",
    "ORPOConfig", "GKDConfig", "TrainingArguments", "Seq2SeqTrainingArguments", "ScriptArguments",
    "ModelConfig", "GRPOScriptArguments", "RLHFArguments",
})


@dataclass
class PythonConfig:
    path: str
    values: dict[str, object] = field(default_factory=dict)
    unknown: list[str] = field(default_factory=list)  # keywords whose values are not literals
    classes: list[str] = field(default_factory=list)  # the config classes found, in order


def _call_name(func: ast.AST) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _module_literals(tree: ast.Module) -> dict[str, object]:
    """Module-level `NAME = <literal>` bound exactly once."""
    seen: dict[str, int] = {}
    values: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            seen[name] = seen.get(name, 0) + 1
            try:
                values[name] = ast.literal_eval(node.value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                values.pop(name, None)
    return {k: v for k, v in values.items() if seen.get(k) == 1}


def parse_python_config(text: str, path: str | Path = "<script>") -> PythonConfig:
    p = Path(path)
    try:
        tree = ast.parse(text, filename=str(p))
    except SyntaxError as exc:
        # a fragment pasted from inside a function keeps its indentation (`    training_args = GRPOConfig(` under
        # a notebook cell's `def`): read as its lines stand, without the common indentation
        dedented = textwrap.dedent(text)
        try:
            tree = ast.parse(dedented, filename=str(p)) if dedented != text else None
        except SyntaxError:
            tree = None
        if tree is None:
            raise CorruptArtifact(p, f"training script does not parse as Python (line {exc.lineno}): {exc.msg}") from None
    except (ValueError, RecursionError, MemoryError) as exc:
        raise CorruptArtifact(p, f"training script cannot be parsed: {type(exc).__name__}") from None
    constants = _module_literals(tree)
    out = PythonConfig(str(p))
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and _call_name(n.func) in CONFIG_CLASSES]
    calls.sort(key=lambda n: (n.lineno, n.col_offset))
    for call in calls:
        out.classes.append(_call_name(call.func) or "")
        for kw in call.keywords:
            if kw.arg is None:  # **kwargs
                continue
            try:
                value = ast.literal_eval(kw.value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                if isinstance(kw.value, ast.Name) and kw.value.id in constants:
                    value = constants[kw.value.id]
                else:
                    out.unknown.append(kw.arg)
                    out.values.pop(kw.arg, None)
                    continue
            if isinstance(value, tuple):
                value = list(value)
            out.values[kw.arg] = value
    return out


def read_python_config(path: str | Path) -> PythonConfig:
    p = Path(path)
    try:
        with safe_io.open_regular(p) as fh:  # a regular file inside the run; never more than the limit read
            data = fh.read(MAX_SCRIPT_BYTES + 1)
    except OSError as exc:
        raise CorruptArtifact(p, f"cannot read training script: {exc.strerror}") from None
    if len(data) > MAX_SCRIPT_BYTES:
        raise CorruptArtifact(p, f"training script is larger than {MAX_SCRIPT_BYTES >> 20} MB")
    if b"\x00" in data:
        raise CorruptArtifact(p, "training script is binary, expected Python source")
    return parse_python_config(data.decode("utf-8", "replace"), p)


# a config call inside a paste that is not whole Python (prose around it, other snippets): at most this
# many characters are read from the class name on for its closing parenthesis
MAX_CALL_CHARS = 64 << 10
_CALL_START = re.compile(r"\b(?:" + "|".join(sorted(CONFIG_CLASSES)) + r")\s*\(")


def _call_end(text: str) -> int | None:
    """Where the call that starts `text` closes (after its `)`), read with Python's tokenizer, so that
    parentheses inside strings and comments do not count; None when it does not close."""
    depth = 0
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.OP and tok.string in "([{":
                depth += 1
            elif tok.type == tokenize.OP and tok.string in ")]}":
                depth -= 1
                if depth == 0:
                    line, col = tok.end
                    return _offset(text, line, col)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None
    return None


def _offset(text: str, line: int, col: int) -> int:
    pos = 0
    for _ in range(line - 1):
        pos = text.index("\n", pos) + 1
    return pos + col


def config_calls_in(text: str, path: str | Path = "<paste>") -> PythonConfig:
    """The config calls a paste holds amid prose or other code (modelscope/unslothai issue threads paste
    `training_args = GRPOConfig(` … `)` under a sentence: unslothai/unsloth#4189, huggingface/trl#3306):
    each call, from its class name to its closing parenthesis, read as one expression."""
    out = PythonConfig(str(path))
    for m in _CALL_START.finditer(text):
        chunk = text[m.start(): m.start() + MAX_CALL_CHARS]
        end = _call_end(chunk)
        if end is None:
            continue
        try:
            found = parse_python_config(chunk[:end], path)
        except CorruptArtifact:
            continue
        out.classes.extend(found.classes)
        out.unknown.extend(found.unknown)
        out.values.update(found.values)
    return out


def mentions_config(head: bytes) -> bool:
    """Whether a .py file's text builds one of the config classes (cheap check before parsing)."""
    return any(name.encode() + b"(" in head for name in CONFIG_CLASSES)
