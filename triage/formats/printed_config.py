"""The configuration a job printed at start-up, read back as its arguments.

- verl prints its resolved Hydra config with `pprint` (verl/trainer/main_ppo.py, TaskRunner.run:
  `pprint(OmegaConf.to_container(config, resolve=True))`), every line behind Ray's `(TaskRunner pid=…)`
  prefix. pprint sorts the keys, so the dump opens with `{'actor_rollout_ref': `.
- NeMo-RL's example entry points print `Final config:` and then the config with `pprint.pprint`
  (NVIDIA-NeMo/RL examples/run_grpo.py, run_sft.py, run_dpo.py, run_distillation.py).

The dump is read from the head of the log (`versions.LOG_HEAD_BYTES`, where start-up prints), its lines
taken while they come from the source that began it and are shaped as pprint's (another actor's or
thread's lines printed between them are passed over), joined, and parsed as a Python literal by `pyrepr` (nothing is evaluated). A dump that does not close
within `MAX_CONFIG_LINES` / `MAX_CONFIG_CHARS`, or does not parse, gives nothing. The config's nested keys
become dotted names (`actor_rollout_ref.rollout.n`), as Hydra's composed `config.yaml` gives them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from triage.formats.hydra_overrides import flatten
from triage.formats.pyrepr import parse_metric_dict
from triage.formats.slime_log import split_line

__all__ = ["PrintedConfig", "printed_config", "OPENERS"]

# what begins a dump: its first line, or a title line over it (then the dict starts on the next line of its source)
OPENERS: tuple[tuple[bytes, bool], ...] = ((b"{'actor_rollout_ref': ", False), (b"Final config:", True))
# pprint indents every line after the first, which goes on with a key, a value or a closing bracket (not a
# warning's indented source line printed by another thread between them: `  from vllm.version import …`)
_CONTINUATION = re.compile(r"\s+(?:['\"\[\]{}()<\-\d.]|(?:None|True|False|nan|inf)\b)")
# the logs whose heads are searched, in the run's order (a config is printed once, by the driver)
MAX_LOGS_READ = 16
# verl's resolved config is about 300 pprint lines and 20 KB; NeMo-RL's about 250
MAX_CONFIG_LINES = 4000
MAX_CONFIG_CHARS = 512 << 10


@dataclass(frozen=True)
class PrintedConfig:
    values: dict[str, object]  # dotted name -> value
    where: str  # "path:line" where the dump begins (its title line, where it has one)


def printed_config(paths: list[Path]) -> PrintedConfig | None:
    """The first configuration dump found in the heads of the first `MAX_LOGS_READ` of `paths`, or None."""
    from triage.versions import LOG_HEAD_BYTES, head_bytes

    for path in paths[:MAX_LOGS_READ]:
        data = head_bytes(Path(path), LOG_HEAD_BYTES)
        if not data:
            continue
        for opener, titled in OPENERS:
            pos = data.find(opener)
            if pos < 0:
                continue
            start = data.rfind(b"\n", 0, pos) + 1
            found = _read_dump(data, start, titled)
            if found is not None:
                line_no = data.count(b"\n", 0, start) + 1
                return PrintedConfig(found, f"{path}:{line_no}")
    return None


def _read_dump(data: bytes, start: int, titled: bool) -> dict[str, object] | None:
    parts: list[str] = []
    chars = 0
    source: str | None = None
    first = True
    pos = start
    for _ in range(MAX_CONFIG_LINES):
        if pos >= len(data):
            return None
        end = data.find(b"\n", pos)
        end = len(data) if end < 0 else end
        line = split_line(data[pos:end].decode("utf-8", "replace"))
        pos = end + 1
        if first:
            first = False
            source = line.source
            if titled:
                continue
        if line.source != source:
            continue  # another process's line between the dump's
        text = line.text.rstrip()
        if not parts:
            if not text.lstrip().startswith("{"):
                return None  # the title is not followed by a dict
        elif not _CONTINUATION.match(text):
            continue  # not a pprint line: another thread's print between them (a warning's source line)
        parts.append(text)
        chars += len(text) + 1
        if chars > MAX_CONFIG_CHARS:
            return None
        if text.endswith("}"):
            try:
                value = parse_metric_dict("\n".join(parts))
            except ValueError:
                continue  # a nested dict closed at the end of its line: the dump goes on
            return flatten(value) if isinstance(value, dict) else None
    return None
