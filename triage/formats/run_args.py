"""A run's arguments, from wherever the job left them.

slime / miles / Relax take their configuration as command-line flags
(`python3 train.py --actor-num-nodes 1 --colocate ...`), and Megatron prints every
argument once it has parsed them (the `arguments` block at the top of the log). A
run may leave either, both, or a `cmdline.txt` / manifest: this module reads each
and merges them, keeping where every value came from so evidence can say so.

Names are always normalised to Python attribute form (`--max-tokens-per-gpu` ->
`max_tokens_per_gpu`), the form Megatron prints and probes ask for.
"""

from __future__ import annotations

import ast
import re
import shlex
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from triage import safe_io
from triage.errors import CorruptArtifact

if TYPE_CHECKING:
    from triage.run.run import Run

# Sources, lowest priority first.
ARGUMENTS_BLOCK = "arguments_block"
CONFIG_FILE = "config_file"  # YAML configs, Hydra's composed .hydra/config.yaml
PRINTED_CONFIG = "printed_config"  # the resolved config a job printed at start-up (verl, NeMo-RL), defaults included
PYTHON_CONFIG = "python_config"  # GRPOConfig(...) / TrainingArguments(...) keywords in a script
LAUNCH_SCRIPT = "launch_script"  # a bash launch script's training command, variables expanded
HYDRA_OVERRIDES = "hydra_overrides"  # `a.b.c=v` on a command line
COMMAND_LINE = "command_line"
MANIFEST = "manifest"
DERIVED = "derived"  # implied by another argument, as the framework itself does

MAX_COMMAND_FILE_BYTES = 1 << 20
# argparse flags declared with action="append": repeating them accumulates values.
APPEND_FLAGS = frozenset({"rollout_sample_hook_path"})

_INT = re.compile(r"[-+]?\d+")
_FLOAT = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|[-+]?(?:inf|nan|infinity)", re.I)
# `AttnBackend.flash` (str() of an Enum member) or `<AttnBackend.flash: 2>` (its repr).
_ENUM_STR = re.compile(r"[A-Z][A-Za-z0-9_]*\.([a-z_][A-Za-z0-9_]*)")
_FILE_SUFFIXES = frozenset(
    {"py", "sh", "json", "jsonl", "yaml", "yml", "txt", "md", "pt", "bin", "parquet", "safetensors"})
_ENUM_REPR = re.compile(r"<[A-Z][A-Za-z0-9_]*\.([A-Za-z_][A-Za-z0-9_]*): [^>]*>")
_PYTHON = re.compile(r"(?:.*/)?python(?:\d+(?:\.\d+)*)?")
# unquoted shell operators: `|`, `||`, `&&`, `&`, `;`, `<`, and redirections (`> f`, `>>f`, `2>&1`)
_SHELL_OPERATOR = re.compile(r"\|\|?|&&?|;|<|\d?>>?(?:&\d)?[^\s<>|&]*")
_LAUNCHERS = frozenset({"torchrun", "deepspeed", "accelerate"})


def normalise_name(flag: str) -> str:
    """`--max-tokens-per-gpu` -> `max_tokens_per_gpu`."""
    return flag.strip().lstrip("-").replace("-", "_")


def convert_value(text: str) -> object:
    """A flag value or a printed argument as the type argparse would most likely have made.

    Ints and floats become numbers, None / True / False their constants, Python list /
    tuple / dict reprs lists and dicts, enum reprs (`AttnBackend.flash`) their member
    name; anything else stays the string it was (paths, `bf16`, `${VAR}`).
    """
    s = text.strip()
    if s == "None":
        return None
    if s == "True":
        return True
    if s == "False":
        return False
    if _INT.fullmatch(s):
        return int(s)
    if _FLOAT.fullmatch(s):
        return float(s)
    if s[:1] in "[({" and s[-1:] in "])}":
        try:
            value = ast.literal_eval(s)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            return s
        if isinstance(value, tuple):
            return list(value)
        return value
    enum = _ENUM_STR.fullmatch(s) or _ENUM_REPR.fullmatch(s)
    if enum and enum.group(1) not in _FILE_SUFFIXES:
        return enum.group(1)
    return s


def parse_arguments_block(raw: Mapping[str, str]) -> dict[str, object]:
    """Megatron's printed arguments (`name ..... value`) with their values typed."""
    return {normalise_name(name): convert_value(value) for name, value in raw.items()}


def parse_command_line(text: str) -> dict[str, object]:
    """The flags of a training command line, typed.

    Accepts what users paste or jobs print: line continuations, `VAR=1 python3 ...`,
    `ray job submit ... -- python3 train.py ...`, `torchrun ... train.py ...`, or bare
    flags. `--flag value`, `--flag=value`, flags with no value (True) and nargs lists
    (`--rollout-stop-token-ids 1 2 3` -> [1, 2, 3]); a repeated flag keeps its last
    value, as argparse does (flags declared as append accumulate).
    """
    joined = re.sub(r"\\\r?\n", " ", text)
    tokens = _split(joined)
    args = _after_program(tokens)
    return _parse_flags(_until_shell_operator(args))


def _until_shell_operator(tokens: list[str]) -> list[str]:
    """The tokens of one command: up to a pipe, redirection, `;`, `&&` or `&`."""
    for i, tok in enumerate(tokens):
        if _SHELL_OPERATOR.fullmatch(tok):
            return tokens[:i]
        if tok.endswith(";") and not tok.endswith("\\;"):
            return tokens[:i] + [tok[:-1]]
    return tokens


# A line continuation whose line break a copy lost: `--eval_steps 1000 \ --save_steps 1000 \` on one line
# (modelscope/ms-swift#3771). To a shell `\ ` escapes the space and glues it to the next flag; no command
# means that, so it is read as the break it was.
_LOST_BREAK = re.compile(r"\\\s+(?=--?[A-Za-z])")


def _split(text: str) -> list[str]:
    text = _LOST_BREAK.sub(" ", text)
    try:
        words = shlex.split(text, comments=False, posix=True)
    except ValueError:  # an unbalanced quote, or a paste ending in its continuation's `\`: split on whitespace
        words = text.split()
    return [w for w in words if w != "\\"]  # (a continuation left at the end of a pasted command)


# a dotted module name (`openrlhf.cli.train_ppo`), as a launcher or a here-document names what it runs
MODULE_NAME = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")


def _after_program(tokens: list[str]) -> list[str]:
    """The tokens after the script (or module) that a python / launcher invocation runs."""
    start = None
    for i, tok in enumerate(tokens):
        base = tok.rsplit("/", 1)[-1]
        if _PYTHON.fullmatch(base) or base in _LAUNCHERS:
            start = i + 1
            break
    if start is None:
        for tok in tokens:
            head = tok.strip().split(None, 1)
            if len(head) == 2 and _PYTHON.fullmatch(head[0].rsplit("/", 1)[-1]):
                # `bash -c "python3 train.py ..."`: the command is one quoted token.
                return _after_program(_split(tok))
        first_flag = next((i for i, t in enumerate(tokens) if t.startswith("--")), None)
        if first_flag is None:
            return []
        # `script.py --a 1` or bare flags
        return tokens[first_flag:]
    j = start
    module = False
    while j < len(tokens):
        tok = tokens[j]
        if tok in ("-m", "--module") and j + 1 < len(tokens) and not tokens[j + 1].startswith("-"):
            return tokens[j + 2:]
        if tok in ("-m", "--module"):
            # a launcher's switch that its script is a module (deepspeed/launcher/runner.py `--module`, torchrun's
            # `-m`), with launcher options after it: the first dotted name after them is the module
            module = True
            j += 1
            continue
        if module and MODULE_NAME.fullmatch(tok):
            return tokens[j + 1:]
        if tok.endswith(".py"):
            return tokens[j + 1:]
        if tok.startswith("-"):  # interpreter / launcher options such as -u, --nproc-per-node 8
            j += 1
            continue
        j += 1
    return []


def _is_flag(tok: str) -> bool:
    if tok.startswith("--") and len(tok) > 2:
        return True
    return len(tok) > 1 and tok[0] == "-" and tok[1].isalpha() and not _FLOAT.fullmatch(tok)


def _parse_flags(tokens: list[str]) -> dict[str, object]:
    out: dict[str, object] = {}
    i = 0
    n = len(tokens)
    while i < n:
        tok = tokens[i]
        if not _is_flag(tok):
            i += 1
            continue
        if "=" in tok:
            name, _, raw = tok.partition("=")
            values: list[object] = [convert_value(raw)]
            i += 1
        else:
            name = tok
            values = []
            i += 1
            while i < n and not _is_flag(tokens[i]) and tokens[i] != "--":
                values.append(convert_value(tokens[i]))
                i += 1
        key = normalise_name(name)
        if not key:
            continue
        value: object = True if not values else values[0] if len(values) == 1 else values
        if key in APPEND_FLAGS:
            prior = out.get(key, [])
            assert isinstance(prior, list)
            out[key] = prior + (values if values else [True])
        else:
            out[key] = value
    return out


class RunArgs(Mapping[str, object]):
    """A run's arguments, read-only, names normalised, each with the source it came from."""

    def __init__(self, values: Mapping[str, object] | None = None, sources: Mapping[str, str] | None = None) -> None:
        self._values: dict[str, object] = {normalise_name(k): v for k, v in (values or {}).items()}
        given = {normalise_name(k): s for k, s in (sources or {}).items()}
        self._sources: dict[str, str] = {k: given[k] for k in self._values if k in given}
        self._origins: dict[str, str] = {}  # canonical name -> the run's own name for it

    def __getitem__(self, name: str) -> object:
        return self._values[normalise_name(name)]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and normalise_name(name) in self._values

    def __bool__(self) -> bool:
        return bool(self._values)

    def __repr__(self) -> str:
        return f"RunArgs({len(self._values)} args)"

    def get(self, name: str, default: object = None) -> object:
        return self._values.get(normalise_name(name), default)

    def has(self, name: str) -> bool:
        return normalise_name(name) in self._values

    def source_of(self, name: str) -> str | None:
        """Where a value came from: arguments_block, command_line, manifest or derived."""
        return self._sources.get(normalise_name(name))

    def as_dict(self) -> dict[str, object]:
        return dict(self._values)

    def original_name(self, name: str) -> str:
        """The name the run itself used for an argument given under its canonical name
        (`n_samples_per_prompt` -> `actor_rollout_ref.rollout.n` in a verl run); the name itself otherwise."""
        key = normalise_name(name)
        return self._origins.get(key, key)


def collect_run_args(run: Run) -> RunArgs:
    """Every source of arguments a run has, merged; later sources override earlier ones.

    Lowest priority first: Megatron's arguments block in the log, the resolved config the log
    printed at start-up (verl's and NeMo-RL's pprint of it), YAML configs (Hydra's
    composed config), `GRPOConfig(...)` keywords of a training script, launch scripts'
    training commands (bash variables and arrays expanded), the command line found in
    the log, the command line file / manifest `command` (flags and Hydra overrides), the
    manifest's `args`. Then what the framework derives itself: `--load-debug-rollout-data`
    implies `debug_train_only`, `--dump-details D` names the debug dump templates. Last,
    each argument is also given its canonical name (triage/frameworks/args.yaml), its own
    name kept (`RunArgs.original_name`).
    """
    values: dict[str, object] = {}
    sources: dict[str, str] = {}

    def layer(found: Mapping[str, object], source: str) -> None:
        for key, value in found.items():
            name = normalise_name(key)
            values[name] = value
            sources[name] = source

    def command(text: str) -> None:
        layer(parse_command_overrides(text), HYDRA_OVERRIDES)
        layer(parse_command_line(text), COMMAND_LINE)

    artifacts = run.artifacts
    if artifacts.logs:
        log = run.log
        if log.arguments:
            layer(parse_arguments_block(log.arguments), ARGUMENTS_BLOCK)
        from triage.formats.printed_config import printed_config

        printed = printed_config(artifacts.logs)
        if printed is not None:
            layer(printed.values, PRINTED_CONFIG)
    for path in getattr(artifacts, "configs", ()):
        from triage.formats.hydra_overrides import read_config_yaml

        try:
            layer(read_config_yaml(path), CONFIG_FILE)
        except CorruptArtifact as exc:  # any *.yaml near the root is tried; one that is not a config is noted, not fatal
            artifacts.skipped.append(f"{path.name}: not read as a config ({exc})")
    for path in getattr(artifacts, "python_configs", ()):
        from triage.formats.python_config import read_python_config

        layer(read_python_config(path).values, PYTHON_CONFIG)
    for path in getattr(artifacts, "launch_scripts", ()):
        from triage.formats.launch_script import read_launch_script, script_arguments

        from triage.formats.hydra_overrides import DELETED

        flags, overrides = script_arguments(read_launch_script(path))
        layer({k: v for k, v in overrides.items() if v is not DELETED}, LAUNCH_SCRIPT)
        layer(flags, LAUNCH_SCRIPT)
    if artifacts.logs:
        reported = _hydra_report(run)
        if reported:
            layer(reported, HYDRA_OVERRIDES)
    if artifacts.logs and run.log.command_line:
        command(run.log.command_line)
    elif artifacts.logs and artifacts.command_line is None and not artifacts.command:
        from triage.formats.pasted_command import pasted_command

        if not getattr(artifacts, "launch_scripts", ()):
            _pasted_arguments(run, layer)
        pasted = pasted_command(run.pastes.values())
        if pasted is None:
            from triage.formats.pasted_command import pasted_flag_block

            pasted = pasted_flag_block(run.pastes.values())
        if pasted:
            command(pasted)
    if artifacts.command_line is not None:
        command(_read_command_file(artifacts.command_line))
    elif artifacts.command:
        command(artifacts.command)
    if run.manifest.args:
        layer(run.manifest.args, MANIFEST)

    _derive(values, sources)
    origins = _canonical_names(values, sources, getattr(run, "framework", None))
    out = RunArgs(values, sources)
    out._origins = origins
    return out


def _pasted_arguments(run: Run, layer) -> None:
    """A YAML config or a launch script (bash arrays, a shebang) pasted as the log: read as what it is."""
    from triage.formats.hydra_overrides import DELETED
    from triage.formats.launch_script import pasted_script_arguments

    from triage.formats.hydra_overrides import pasted_config
    from triage.formats.python_config import config_calls_in, mentions_config, parse_python_config

    for where, text in run.pastes.items():
        config = pasted_config(text)
        if config:
            layer(config, CONFIG_FILE)
            continue
        block = _pasted_arguments_block(text)
        if block:
            layer(parse_arguments_block(block), ARGUMENTS_BLOCK)
            continue
        if mentions_config(text.encode("utf-8", "replace")):  # `PPOConfig(...)` pasted from a script
            try:
                layer(parse_python_config(text, where).values, PYTHON_CONFIG)
                continue
            except CorruptArtifact:
                # not whole Python: the calls themselves, amid the prose; the log beside them is still read
                calls = config_calls_in(text, where)
                if calls.values:
                    layer(calls.values, PYTHON_CONFIG)
                    continue
        found = pasted_script_arguments(text, where)
        if found is not None:
            flags, overrides = found
            layer({k: v for k, v in overrides.items() if v is not DELETED}, LAUNCH_SCRIPT)
            layer(flags, LAUNCH_SCRIPT)


# Megatron's arguments block as it prints it (`  lr ............ 5e-05`, megatron/training/arguments.py
# _print_args), pasted without its `---- arguments ----` header (NVIDIA/Megatron-LM#1554)
_DOTTED_ARG = re.compile(r"^ {0,4}(?P<name>[A-Za-z_][\w.-]*) \.{3,} (?P<value>.*?)\s*$")
MIN_DOTTED_LINES = 3


def _pasted_arguments_block(text: str) -> dict[str, str]:
    found = {}
    for line in text.splitlines():
        m = _DOTTED_ARG.match(line)
        if m:
            found[m.group("name")] = m.group("value")
    return found if len(found) >= MIN_DOTTED_LINES else {}


def _hydra_report(run: Run) -> dict[str, object]:
    """The overrides in Hydra's `Error executing job with overrides: [...]`: whole in a paste, else
    as the log's error line kept them (capped in the middle); the first report read is taken."""
    from triage.formats.hydra_overrides import DELETED, overrides_in_error_report

    marker = "Error executing job with overrides: ["
    texts = [line for text in run.pastes.values() if marker in text
             for line in text.splitlines() if marker in line]
    texts += [line.text for line in run.log.errors if marker in line.text]
    for text in texts:
        found = overrides_in_error_report(text)
        if found:
            return {k: v for k, v in found.items() if v is not DELETED}
    return {}


def parse_command_overrides(text: str) -> dict[str, object]:
    """The Hydra overrides (`actor_rollout_ref.rollout.n=8`, `+a=1`) of a command line; `~a` drops nothing here."""
    from triage.formats.hydra_overrides import DELETED, split_overrides

    joined = re.sub(r"\\\r?\n", " ", text)
    overrides, _ = split_overrides(_after_program(_until_shell_operator(_split(joined))))
    return {k: v for k, v in overrides.items() if v is not DELETED}


def _canonical_names(values: dict[str, object], sources: dict[str, str], framework: object) -> dict[str, str]:
    """Add each argument under the canonical name the probes use (triage/frameworks/args.yaml),
    beside its own name; a canonical name the run already gives is never overwritten.
    Returns canonical -> original name."""
    from triage import frameworks

    fw = frameworks.for_run(framework if isinstance(framework, str) else None)
    table: dict[str, str] = {}
    if fw is not None:
        for canonical, names in fw.arg_names().items():
            for name in names:
                table.setdefault(normalise_name(name), canonical)
    else:
        table = frameworks.canonical_arg_names()
    origins: dict[str, str] = {}
    for name in list(values):
        canonical = table.get(name)
        if canonical is None or canonical == name or canonical in values:
            continue
        values[canonical] = values[name]
        sources[canonical] = sources.get(name, DERIVED)
        origins[canonical] = name
    return origins


def _derive(values: dict[str, object], sources: dict[str, str]) -> None:
    """What slime's argument validation sets from other arguments."""
    if values.get("load_debug_rollout_data") and sources.get("debug_train_only") != MANIFEST:
        values["debug_train_only"] = True
        sources["debug_train_only"] = DERIVED
    dump = values.get("dump_details")
    if isinstance(dump, str) and dump:
        for key, sub in (("save_debug_rollout_data", "rollout_data"), ("save_debug_train_data", "train_data")):
            if values.get(key) is None:
                values[key] = f"{dump.rstrip('/')}/{sub}/{{rollout_id}}.pt"
                sources[key] = DERIVED


def _read_command_file(path: Path) -> str:
    try:
        with safe_io.open_regular(path) as fh:  # a FIFO, device or /proc file is refused
            data = fh.read(MAX_COMMAND_FILE_BYTES + 1)
    except OSError as exc:
        raise CorruptArtifact(path, f"cannot read the command line file: {exc.strerror or exc}") from None
    if len(data) > MAX_COMMAND_FILE_BYTES:
        raise CorruptArtifact(
            path, f"command line file is larger than {MAX_COMMAND_FILE_BYTES >> 20} MB; expected one command")
    if b"\x00" in data:
        raise CorruptArtifact(path, "command line file is binary, expected the job's command as text")
    return data.decode("utf-8", "replace")
