"""Safe reading of the Python dict reprs that slime / miles / Relax log as metrics.

`logger.info(f"step {n}: {log_dict}")` prints `repr(log_dict)`: single-quoted keys,
floats as Python writes them (`1e-06`, `nan`, `inf`, `-inf`), sometimes booleans,
None, nested lists, and now and then a value that was never converted to a plain
float (`np.float64(1.5)`, `tensor(0.3, device='cuda:0')`).

Nothing here evaluates code. The common flat case goes through a C JSON parser
after a quote swap (a metric line is parsed on every step of every run, so it has
to be cheap): orjson, 4x faster than the standard library's, where it reads the
text as the standard one would; anything else is parsed with `ast.parse` and walked,
accepting only literal nodes, the names nan / inf, and the numeric wrappers above.
"""

from __future__ import annotations

import ast
import json
import math
import re

from triage.safe_io import MAX_INT_DIGITS, json_int

try:
    import orjson as _orjson
except ImportError:  # pragma: no cover - a dependency; the standard parser gives the same answer
    _orjson = None

# A log line is capped long before this; a larger "dict" is not a metric record.
MAX_REPR_CHARS = 1 << 20

# Wrappers whose single positional argument is the number (numpy scalars, torch tensors).
_NUMERIC_WRAPPERS = frozenset(
    {
        "float", "int", "bool", "tensor", "Tensor",
        "float16", "float32", "float64", "bfloat16", "half", "double",
        "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
        "float_", "int_", "bool_", "longdouble", "array",
    }
)
_NAMES = {"nan": math.nan, "inf": math.inf, "NaN": math.nan, "Infinity": math.inf}
_JSON_WORDS = {"nan": "NaN", "-nan": "NaN", "inf": "Infinity", "-inf": "-Infinity",
               "True": "true", "False": "false", "None": "null"}
_JSON = json.JSONDecoder(parse_int=json_int)  # integers past int64 read as floats: no OverflowError later
_SPECIAL_TOKEN = re.compile(r"(?<![\w.])(-?nan|-?inf|True|False|None)(?![\w.])")


def parse_metric_dict(text: str) -> dict[str, object]:
    """The dict a metric line printed, with str keys.

    Raises ValueError (one line) for anything that is not a complete dict literal:
    a line cut mid-write, a call that is not a numeric wrapper, a name that is not
    nan / inf / True / False / None.
    """
    body = text.strip()
    if not body.startswith("{"):
        raise ValueError(f"not a dict repr: starts with {body[:20]!r}")
    if not body.endswith("}"):
        raise ValueError(f"dict repr is truncated: ends with {body[-20:]!r}")
    if len(body) > MAX_REPR_CHARS:
        raise ValueError(f"dict repr too long ({len(body)} chars)")
    fast = _parse_json_like(body)
    if fast is not None:
        return fast
    return _parse_literal(body)


def parse_metric_record(text: str) -> dict[str, object]:
    """`parse_metric_dict` for a metric table (triage.formats.metric_table), on the path every step's
    line takes: a flat repr goes straight through orjson after the quote swap, without the check
    that orjson's dict is the standard parser's (`_flat`), since the table reads both alike (a
    container is no number to it, an integer past int64 is stored as a float either way). Anything
    else is `parse_metric_dict`'s, with its errors."""
    if _orjson is not None and text[-1:] == "}" and text[:1] == "{" and '"' not in text and "\\" not in text \
            and len(text) <= MAX_REPR_CHARS:
        try:
            value = _orjson.loads(text.replace("'", '"'))
        except _orjson.JSONDecodeError:
            pass
        else:
            if type(value) is dict:
                return value
    return parse_metric_dict(text)


def _parse_json_like(body: str) -> dict[str, object] | None:
    """The flat `{'key': number, ...}` case through json; None when it does not apply.

    A repr with a double quote or a backslash in it may hold a string with a quote
    character, which the quote swap would break: that goes to the literal parser.
    """
    if '"' in body or "\\" in body:
        return None
    value = _json(body.replace("'", '"'))
    if value is None and ("nan" in body or "inf" in body or "True" in body or "False" in body or "None" in body):
        # Rewrite the Python words outside string literals only (the even parts).
        parts = body.split("'")
        if len(parts) % 2 == 0:
            return None  # unbalanced quotes: let the literal parser say what is wrong
        for i in range(0, len(parts), 2):
            part = parts[i]
            if "nan" in part or "inf" in part or "True" in part or "False" in part or "None" in part:
                parts[i] = _SPECIAL_TOKEN.sub(_json_word, part)
        value = _json('"'.join(parts))
    return value


_INT_BOUND = 10**MAX_INT_DIGITS  # json_int reads longer integers as floats


def _json(text: str) -> dict[str, object] | None:
    if _orjson is not None:
        try:
            value = _orjson.loads(text)
        except _orjson.JSONDecodeError:
            pass  # NaN, 1e400, a lone surrogate, trailing text: the standard parser reads or refuses it
        else:
            if type(value) is dict and _flat(value):
                return value
    try:
        value, end = _JSON.raw_decode(text)
    except (ValueError, RecursionError):  # nested past the parser's depth: the literal parser says so
        return None
    if end != len(text) or not isinstance(value, dict):
        return None
    return value


def _flat(value: dict[str, object]) -> bool:
    """Whether orjson's dict is the standard parser's too: no container (whose integers
    would need checking), no integer past MAX_INT_DIGITS digits (json_int makes it a float)."""
    for v in value.values():
        t = type(v)
        if t is float or t is str or t is bool or v is None:
            continue
        if t is not int or not -_INT_BOUND < v < _INT_BOUND:
            return False
    return True


def _json_word(m: re.Match[str]) -> str:
    return _JSON_WORDS[m.group(1)]


def _parse_literal(body: str) -> dict[str, object]:
    try:
        tree = ast.parse(body, mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"not a complete dict literal: {exc.msg} at column {exc.offset}") from None
    except (ValueError, RecursionError, MemoryError) as exc:
        raise ValueError(f"not a dict literal: {type(exc).__name__}") from None
    if not isinstance(tree.body, ast.Dict):
        raise ValueError(f"not a dict literal: {type(tree.body).__name__}")
    try:
        value = _literal(tree.body, depth=0)
    except RecursionError:
        raise ValueError("dict literal nested too deeply") from None
    assert isinstance(value, dict)
    return value


def _bounded_int(n: int) -> int | float:
    """An integer past int64 as a float (inf past float range), so a metric table never overflows."""
    if n.bit_length() <= 63:
        return n
    if n.bit_length() < 1024:
        return float(n)
    return math.inf if n > 0 else -math.inf


def _literal(node: ast.AST, depth: int) -> object:
    if depth > 32:
        raise ValueError("dict literal nested too deeply")
    if isinstance(node, ast.Constant):
        if type(node.value) is int:
            return _bounded_int(node.value)
        if isinstance(node.value, (int, float, str, bool, type(None))):
            return node.value
        raise ValueError(f"unsupported constant {type(node.value).__name__} in metric dict")
    if isinstance(node, ast.Name):
        if node.id in _NAMES:
            return _NAMES[node.id]
        raise ValueError(f"unsupported name {node.id!r} in metric dict")
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _literal(node.operand, depth + 1)
        if isinstance(inner, (int, float)) and not isinstance(inner, bool):
            return -inner if isinstance(node.op, ast.USub) else inner
        raise ValueError("unary sign on a non-number in metric dict")
    if isinstance(node, ast.Dict):
        out: dict[str, object] = {}
        for key, val in zip(node.keys, node.values):
            if key is None:
                raise ValueError("dict unpacking (**) in metric dict")
            k = _literal(key, depth + 1)
            if isinstance(k, (dict, list)):
                raise ValueError("unhashable key in metric dict")
            out[k if isinstance(k, str) else str(k)] = _literal(val, depth + 1)
        return out
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return [_literal(elt, depth + 1) for elt in node.elts]
    if isinstance(node, ast.Call):
        name = _call_name(node.func)
        if name in _NUMERIC_WRAPPERS and len(node.args) == 1:
            return _literal(node.args[0], depth + 1)
        raise ValueError(f"unsupported call {name or '?'}(...) in metric dict")
    raise ValueError(f"unsupported {type(node).__name__} in metric dict")


def _call_name(func: ast.AST) -> str | None:
    """`tensor`, `np.float64`, `torch.tensor` -> the last component."""
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute) and isinstance(func.value, (ast.Name, ast.Attribute)):
        return func.attr
    return None
