"""Launch scripts as users write them: bash variables, arrays and arithmetic, read without a shell.

slime's and verl's example scripts build the command from pieces::

    NUM_GPUS=8
    CKPT_ARGS=( --hf-checkpoint /models/Qwen3-4B --load /ckpt/run7 )
    ROLLOUT_ARGS=(
       --rollout-batch-size 32   # prompts per rollout
       --n-samples-per-prompt 8
       --global-batch-size $((32 * 8))
    )
    ray job submit ... -- python3 train.py --actor-num-gpus-per-node ${NUM_GPUS} "${CKPT_ARGS[@]}" "${ROLLOUT_ARGS[@]}"

Nothing is ever run. Statements are read in order: `NAME=value` (with `export`),
`NAME=( ... )` and `NAME+=( ... )` arrays, and commands. `$NAME`, `${NAME}`,
`${NAME:-default}`, `"${ARR[@]}"` and `$((...))` are expanded where every name is known
(arithmetic through `ast`, integers only, bash's `/` being integer division); anything
else (`$(cmd)`, an unset variable, `$((N * X))` with X unknown) is left as written, so
its value stays unknown. The training command is the last one that starts python,
torchrun, deepspeed, accelerate, `ray job submit` or `swift`; its flags and its Hydra
overrides (`a.b=1`) are returned.

An unbalanced quote or an unclosed array is refused with a one-line error naming the
file and the line it starts on.
"""

from __future__ import annotations

from triage import safe_io

import ast
import operator
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from triage.errors import CorruptArtifact

MAX_SCRIPT_BYTES = 1 << 20
MAX_STATEMENT_LINES = 2000
MAX_VALUE_CHARS = 64 << 10

_ASSIGN = re.compile(r"^\s*(?:export\s+|local\s+|declare\s+(?:-[a-zA-Z]+\s+)*|readonly\s+)?"
                     r"(?P<name>[A-Za-z_]\w*)(?P<plus>\+?)=(?P<rest>.*)$", re.S)
_ARRAY = re.compile(r"^\((?P<body>.*)\)\s*(?:#.*)?$", re.S)
_UNKNOWN_ARRAY = re.compile(r"\$\{[A-Za-z_]\w*\[[@*]\]\}")
_TRAIN_START = re.compile(r"(?:^|[\s/])(?:python[\d.]*|torchrun|deepspeed|accelerate|swift|verl|openrlhf)(?:\s|$)")
_READ_HEREDOC = re.compile(r"""^\s*read\s+(?:-[A-Za-z]+\s+(?:''\s+|""\s+)?)*(?P<name>[A-Za-z_]\w*)\s*"""
                           r"""<<-?\s*(?P<quote>['"]?)\w+(?P=quote)\s*$""")
_ARITH_OPS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
    ast.Div: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
    ast.LShift: operator.lshift, ast.RShift: operator.rshift,
}


class _Unknown(Exception):
    pass


@dataclass
class LaunchScript:
    """What a launch script sets: its variables and arrays, and the training command's tokens."""

    path: str
    variables: dict[str, str] = field(default_factory=dict)
    arrays: dict[str, list[str]] = field(default_factory=dict)
    command: list[str] | None = None  # the training command, expanded, as words
    command_line: int | None = None  # the line it starts on


def _arith(expr: str, variables: dict[str, str]) -> int:
    """`NUM_GPUS * 2` / `$NUM_GPUS*2`: an int where every name is known; _Unknown otherwise."""
    text = expr.replace("$", "")
    text = re.sub(r"\{([A-Za-z_]\w*)\}", r"\1", text)
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        raise _Unknown(expr) from None

    def ev(node: ast.AST) -> int:
        if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
            return node.value
        if isinstance(node, ast.Name):
            raw = variables.get(node.id)
            if raw is None or not re.fullmatch(r"-?\d+", raw.strip()):
                raise _Unknown(node.id)
            return int(raw)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            v = ev(node.operand)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.BinOp) and type(node.op) in _ARITH_OPS:
            left, right = ev(node.left), ev(node.right)
            if isinstance(node.op, (ast.FloorDiv, ast.Div, ast.Mod)) and right == 0:
                raise _Unknown(expr)
            if isinstance(node.op, ast.Pow) and (right < 0 or right > 64):
                raise _Unknown(expr)
            if isinstance(node.op, (ast.Div, ast.FloorDiv)):
                return int(left / right)  # bash truncates toward zero
            return _ARITH_OPS[type(node.op)](left, right)
        raise _Unknown(expr)

    return ev(tree.body)


class _Expander:
    """Expands one statement's text the way bash would, as far as what is known allows."""

    def __init__(self, variables: dict[str, str], arrays: dict[str, list[str]]) -> None:
        self.vars = variables
        self.arrays = arrays

    def _param(self, body: str, quoted: bool) -> str:
        """The text for `${body}`: a scalar, an array's words, or the expression as written."""
        m = re.fullmatch(r"([A-Za-z_]\w*)\[(?:@|\*)\]", body)
        if m:
            words = self.arrays.get(m.group(1))
            if words is None:
                return "${" + body + "}"
            return " ".join(shlex.quote(w) for w in words) if quoted else " ".join(words)
        m = re.fullmatch(r"([A-Za-z_]\w*)(?::?-(.*))?", body, re.S)
        if m:
            name, default = m.group(1), m.group(2)
            if name in self.vars and (self.vars[name] != "" or default is None):
                return self.vars[name]
            if name in self.arrays:
                return self.arrays[name][0] if self.arrays[name] else ""
            if default is not None:
                return self.expand_text(default)
        return "${" + body + "}"

    def expand_text(self, text: str) -> str:
        """Expansions in a text with no quoting of its own (a default value)."""
        return self.expand(text, for_words=False)

    def expand(self, text: str, for_words: bool = True) -> str:
        """`text` with expansions done; quotes kept so shlex can split it into words after.

        An array expanded inside double quotes ("${A[@]}") closes the quotes around its
        words, each quoted on its own: the words a shell would pass.
        """
        out: list[str] = []
        i, n = 0, len(text)
        state = None  # None | "'" | '"'
        while i < n:
            c = text[i]
            if state == "'":
                out.append(c)
                if c == "'":
                    state = None
                i += 1
                continue
            if c == "\\" and i + 1 < n:
                out.append(text[i:i + 2])
                i += 2
                continue
            if c in "'\"" and for_words:
                if state is None:
                    state = c
                elif state == c:
                    state = None
                out.append(c)
                i += 1
                continue
            if c == "$" and i + 1 < n:
                if text.startswith("$((", i):
                    end = _matching(text, i + 1, "(", ")")
                    if end is not None:
                        inner = text[i + 3:end - 1]
                        try:
                            out.append(str(_arith(self.expand_text(inner), self.vars)))
                        except _Unknown:
                            out.append("$((" + re.sub(r"\s+", "", inner) + "))")
                        i = end + 1
                        continue
                if text[i + 1] == "(":
                    end = _matching(text, i + 1, "(", ")")
                    j = n - 1 if end is None else end
                    out.append("$(" + re.sub(r"\s+", "_", text[i + 2:j]) + ")")  # command substitution: unknown
                    i = j + 1
                    continue
                if text[i + 1] == "{":
                    end = _matching(text, i + 1, "{", "}")
                    if end is not None:
                        body = text[i + 2:end]
                        value = self._param(body, quoted=state == '"')
                        if state == '"' and re.fullmatch(r"[A-Za-z_]\w*\[(?:@|\*)\]", body) and body.split("[")[0] in self.arrays:
                            out.append('"' + value + '"')  # close, the words, reopen
                        elif state == '"':
                            out.append(value.replace("\\", "\\\\").replace('"', '\\"'))
                        else:
                            out.append(value)
                        i = end + 1
                        continue
                m = re.compile(r"[A-Za-z_]\w*").match(text, i + 1)
                if m:
                    name = m.group(0)
                    if name in self.vars:
                        value = self.vars[name]
                        out.append(value.replace("\\", "\\\\").replace('"', '\\"') if state == '"' else value)
                    elif name in self.arrays and self.arrays[name]:
                        out.append(self.arrays[name][0])
                    else:
                        out.append("$" + name)
                    i = m.end()
                    continue
            out.append(c)
            i += 1
        return "".join(out)


def _matching(text: str, start: int, open_c: str, close_c: str) -> int | None:
    """Index of the bracket closing the one at `start`."""
    depth = 0
    for j in range(start, len(text)):
        if text[j] == open_c:
            depth += 1
        elif text[j] == close_c:
            depth -= 1
            if depth == 0:
                return j
    return None


def _open_state(text: str) -> tuple[str | None, int]:
    """The quote left open at the end of `text` (None if balanced), and the paren depth."""
    state = None
    depth = 0
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if state == "'":
            if c == "'":
                state = None
        elif c == "\\":
            i += 1
        elif state == '"':
            if c == '"':
                state = None
        elif c in "'\"":
            state = c
        elif c == "#" and (i == 0 or text[i - 1] in " \t\n;("):
            nl = text.find("\n", i)
            i = n if nl < 0 else nl
            continue
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        i += 1
    return state, depth


def _statements(text: str, path: Path) -> list[tuple[int, str]]:
    """Logical statements with the line each starts on: continuations joined, quotes and arrays closed."""
    out: list[tuple[int, str]] = []
    buf: list[str] = []
    start = 0
    lines = text.splitlines()
    for no, line in enumerate(lines, 1):
        if not buf:
            start = no
            if not line.strip() or line.lstrip().startswith("#"):
                continue
        buf.append(line)
        joined = "\n".join(buf)
        if joined.endswith("\\") and not joined.endswith("\\\\"):
            buf[-1] = line[:-1]
            continue
        state, depth = _open_state(joined)
        if state is None and depth <= 0:
            out.append((start, joined))
            buf = []
        elif len(buf) > MAX_STATEMENT_LINES:
            break
    if buf:
        state, depth = _open_state("\n".join(buf))
        if state is None and depth <= 0:
            # the last command continued past the end of the file (`--adam_offload \` as the last line: a paste cut
            # there, OpenRLHF/OpenRLHF#1066): bash runs it as it stands, and so it is read
            out.append((start, "\n".join(buf)))
            return out
        what = f"an unbalanced {state} quote" if state else "an unclosed `(`"
        raise CorruptArtifact(path, f"launch script has {what} starting at line {start}: cannot read its arguments")
    return out


def _words(text: str, path: Path, line: int) -> list[str]:
    try:
        lex = shlex.shlex(text, posix=True)
        lex.whitespace_split = True
        lex.commenters = "#"
        return list(lex)
    except ValueError as exc:
        raise CorruptArtifact(path, f"launch script line {line}: {exc}") from None


def read_launch_script(path: str | Path) -> LaunchScript:
    """Read a bash launch script's variables, arrays and training command; nothing is executed."""
    p = Path(path)
    try:
        with safe_io.open_regular(p) as fh:  # a regular file inside the run; never more than the limit read
            data = fh.read(MAX_SCRIPT_BYTES + 1)
    except OSError as exc:
        raise CorruptArtifact(p, f"cannot read launch script: {exc.strerror}") from None
    if len(data) > MAX_SCRIPT_BYTES:
        raise CorruptArtifact(p, f"launch script is larger than {MAX_SCRIPT_BYTES >> 20} MB")
    if b"\x00" in data:
        raise CorruptArtifact(p, "launch script is binary, expected a shell script")
    return parse_launch_script(data.decode("utf-8", "replace"), p)


def parse_launch_script(text: str, path: str | Path = "<script>") -> LaunchScript:
    p = Path(path)
    out = LaunchScript(str(p))
    ex = _Expander(out.variables, out.arrays)
    heredoc: str | None = None
    read_into: tuple[str, bool] | None = None  # (variable, expanded) of a `read … NAME <<TAG` here-document
    body: list[str] = []
    read_starts: dict[str, int] = {}  # each here-document variable and the line its `read` is on

    def keep_read() -> None:
        """The here-document's lines as the value of the variable `read` fills."""
        name, expand = read_into
        value = " ".join(body)
        out.variables[name] = (ex.expand(value) if expand else value)[:MAX_VALUE_CHARS]
        out.arrays.pop(name, None)

    for line_no, stmt in _statements(text, p):
        if heredoc is not None:
            if stmt.strip() == heredoc:
                heredoc = None
                if read_into is not None:
                    keep_read()
                read_into, body = None, []
            elif read_into is not None:
                body.append(stmt)
            continue
        m_here = re.search(r"<<-?\s*['\"]?(\w+)['\"]?", stmt)
        m_read = _READ_HEREDOC.match(stmt)
        if m_read:
            # the command kept in a variable, as OpenRLHF's example scripts write it (`read -r -d ''
            # training_commands <<EOF` … `EOF`, then `deepspeed --module $training_commands`); a quoted
            # delimiter leaves `$` in the body as written, as bash does
            read_into = (m_read.group("name"), not m_read.group("quote"))
            read_starts[m_read.group("name")] = line_no
        m = _ASSIGN.match(stmt)
        if m:
            name, plus, rest = m.group("name", "plus", "rest")
            rest = rest.strip()
            arr = _ARRAY.match(rest)
            if arr:
                words = _words(ex.expand(arr.group("body")), p, line_no)
                out.arrays[name] = (out.arrays.get(name, []) if plus else []) + words
                out.variables.pop(name, None)
                continue
            words = _words(ex.expand(rest), p, line_no) if rest else []
            if len(words) <= 1:  # `NAME=value`; `NAME=value cmd ...` is a command with an environment
                value = (words[0] if words else "")[:MAX_VALUE_CHARS]
                out.variables[name] = (out.variables.get(name, "") + value) if plus else value
                out.arrays.pop(name, None)
                continue
        if m_here:
            heredoc = m_here.group(1)
        expanded = ex.expand(stmt)
        if _TRAIN_START.search(expanded) or "ray job submit" in expanded:
            words = _words(expanded, p, line_no)
            if any(w.startswith("-") or ("=" in w and not w.startswith("=")) for w in words):
                out.command = words
                out.command_line = line_no
    if heredoc is not None and read_into is not None and body:
        # the file ends inside the here-document (a paste cut there): bash reads it to the end of the file
        keep_read()
    if out.command is None:
        from triage.formats.run_args import MODULE_NAME

        # no line runs it (a paste cut before `deepspeed --module $training_commands`): a here-document
        # variable that holds a module or script and its flags is the command it was kept for
        for name, line_no in read_starts.items():
            words = _words(out.variables.get(name, ""), p, line_no)
            if words and (MODULE_NAME.fullmatch(words[0]) or words[0].endswith(".py")) and \
                    any(w.startswith("--") for w in words[1:]):
                out.command = ["python3", "-m", *words] if not words[0].endswith(".py") else ["python3", *words]
                out.command_line = line_no
    return out


# a bash array assignment opening a line (`ROLLOUT_ARGS=(`), or a shebang: a script, not a log
_SCRIPT_SHAPE = re.compile(r"^(?:#!/(?:usr/)?bin/(?:env )?(?:ba)?sh\b|\s*(?:export\s+)?[A-Za-z_]\w*\+?=\()", re.M)


def pasted_script_arguments(text: str, where: str) -> tuple[dict[str, object], dict[str, object]] | None:
    """(flags, overrides) of a launch script pasted as text (THUDM/slime#1321 pasted its `*_ARGS=( … )`
    arrays alone); None when the text has no script's shape. Without a training command the arrays'
    own flags are the arguments, as slime's scripts pass every `*_ARGS` array to train.py. A paste
    cut mid-quote is read up to nothing rather than refused: the log beside it is still triaged; one
    cut inside an array (THUDM/slime#795) keeps the words the array holds up to the cut."""
    if not _SCRIPT_SHAPE.search(text):
        return None
    try:
        script = parse_launch_script(text, where)
    except CorruptArtifact:
        try:
            script = parse_launch_script(text + "\n)\n", where)
        except CorruptArtifact:
            return None
    if script.command:
        return script_arguments(script)
    from triage.formats.run_args import _parse_flags

    words = [w for name in script.arrays for w in script.arrays[name]]
    if not any(w.startswith("--") for w in words):
        return None
    return _parse_flags(words), {}


def script_arguments(script: LaunchScript) -> tuple[dict[str, object], dict[str, object]]:
    """(flags, Hydra overrides) of the script's training command."""
    from triage.formats.hydra_overrides import split_overrides
    from triage.formats.run_args import _after_program, _parse_flags, _until_shell_operator

    if not script.command:
        return {}, {}
    # an array the script never set here (set in a `source`d file): its words are unknown, dropped
    words = [w for w in _until_shell_operator(script.command) if not _UNKNOWN_ARRAY.fullmatch(w)]
    if "--" in words and "ray" in words[:3]:  # `ray job submit ... -- python3 train.py ...`
        words = words[words.index("--") + 1:]
    after = _after_program(words)
    if not after and words and words[0] in ("swift",):
        after = words[2:]
    overrides, rest = split_overrides(after)
    return _parse_flags(rest), overrides
