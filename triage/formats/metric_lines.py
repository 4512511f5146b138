"""Metric-line grammars of the frameworks other than slime, for the streaming log scan.

Each grammar reads one log message (ANSI codes, Ray actor prefix and `[rankN]:` already
removed by `slime_log.split_line`) and returns a `MetricRecord`, or None when the line
is not that grammar's. Nothing is evaluated: dict reprs go through `pyrepr`, JSON
through `json`.

  verl_console  `step:12 - actor/grad_norm:0.41 - critic/score/mean:0.5 - ...`
                (verl/utils/logger/aggregate_logger.py, LocalLogger: concat_dict_to_str)
  hf_dict       `{'loss': 0.1, 'grad_norm': 0.3, 'learning_rate': 1e-06, 'epoch': 0.1}`
                (transformers/trainer_callback.py, ProgressCallback.on_log prints the logs dict;
                TRL GRPO adds 'reward', 'kl', 'completions/mean_length', ...)
  swift_json    `{"loss": 0.1, ..., "global_step/max_steps": "5/100", "train_speed(iter/s)": 0.2}`
                (ms-swift's printed logs and logging.jsonl; also its Python-repr form)
  tqdm_postfix  `Train step of episode 0:  10%|█  | 1/10 [00:05<00:45,  5.0s/it, policy_loss=0.1, kl=0.01]`
                (OpenRLHF openrlhf/trainer/ppo_trainer.py: tqdm set_postfix)
  megatron_log  ` [2026-03-03 16:38:36] iteration        2/     624 | consumed samples:          256 | ...
                | learning rate: 9.999746E-07 | lm loss: 2.529132E+00 | grad norm: 75.173 |`
                (NVIDIA/Megatron-LM megatron/training/training.py, training_log); ms-swift's Megatron
                backend prints its GRPO metrics in the same line (`loss: … | kl: … | reward: …`,
                modelscope/ms-swift#8173): grammar `megatron_swift`
  nemo_progress `Training epoch 0, iteration 120/149 | lr: 3e-05 | consumed_samples: 121 | global_batch_size: 1 |
                global_step: 120 | reduced_train_loss: 1.233 | train_step_timing in s: 0.03146 | val_loss: 4.106`
                (NVIDIA/NeMo nemo/lightning/pytorch/callbacks/progress_printer.py, NeMo 2.0's Megatron strategy;
                the iteration counts within an epoch, `global_step` across them, which is the step)
  nemo_rl_block a step's metrics printed as a block over several lines (NVIDIA-NeMo/RL nemo_rl/algorithms/grpo.py,
                grpo_sync.py, ppo.py, sft.py, dpo.py, distillation.py):
                    ========================= Step 3/50 =========================
                    …
                    📊 Training Results:
                      • Loss: 0.0368
                      • Generation KL Error: 0.0006
                      • Avg Reward: 0.2832
                      • Mean Generation Length: 690.6426
                The scan keeps the step of the last header and reads the items on the lines right under
                `Training Results:` (`nemo_step`, `nemo_item`); the timing items after them are not metrics.

A record carries its kind (the MetricTable kind: verl, hf_log, hf_log_eval, hf_log_summary, swift,
openrlhf), its index (step; for the HF console, which prints no step, the record's
ordinal) and its numeric values.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from triage.formats.pyrepr import parse_metric_dict

__all__ = ["MetricRecord", "Unparsed", "parse_framework_metric", "GRAMMAR_FRAMEWORK", "nemo_step", "nemo_item",
           "NEMO_RESULTS"]


@dataclass(frozen=True, slots=True)
class MetricRecord:
    grammar: str
    kind: str
    index: int | None  # None: the grammar has no step; the scan numbers records in order
    values: dict[str, object]


class Unparsed(Exception):
    """A line that has a metric grammar's shape but does not parse (cut mid-write, garbled)."""


# which framework (adapter name) a grammar's records vote for
GRAMMAR_FRAMEWORK = {
    "slime_dict": "slime", "verl_console": "verl", "hf_dict": "hf_trainer", "swift_json": "ms_swift",
    "tqdm_postfix": "openrlhf", "megatron_log": "megatron", "megatron_swift": "ms_swift", "nemo_rl_block": "nemo_rl",
    "nemo_progress": "megatron",
}

_VERL = re.compile(r"(?:^|[\s\]>)])step:(?P<n>\d+) - (?P<rest>.+)$")
_NUMERIC_WRAPPER = re.compile(r"^(?:np\.|numpy\.|torch\.)?(?:float\d*|int\d*|tensor|array)\((?P<v>[^,()]+)(?:,[^()]*)?\)$")
# (a bar cut at the terminal's width has no closing `]`: OpenRLHF/OpenRLHF#762)
_TQDM = re.compile(
    r"(?P<i>\d+)/(?P<n>\d+|\?) \[[\d:]+(?:<[\d:?]+)?,\s*[^,\]]*(?:it/s|s/it)(?:, (?P<post>[^\]]*))?(?P<end>\]|\s*$)"
)
_MEGATRON = re.compile(r"\biteration\s+(?P<n>\d+)\s*/\s*\d+\s*\|(?P<rest>.*)$")
# keys only ms-swift's GRPO adds to Megatron's line (its trainer's names, as in `swift_json`)
_SWIFT_GRPO_KEYS = frozenset({"reward", "reward_std", "kl", "frac_reward_zero_std", "completions/mean_length"})
_POSTFIX_ITEM = re.compile(r"(?P<k>[A-Za-z_][\w/.\-]*)=(?P<v>[^,]+)")
# keys that make a printed dict a training log record rather than any dict a program printed
_HF_KEYS = frozenset({
    "loss", "grad_norm", "learning_rate", "epoch", "reward", "reward_std", "kl", "entropy", "train_loss",
    "train_runtime", "eval_loss", "completions/mean_length", "frac_reward_zero_std", "policy_loss",
    "clip_ratio/region_mean", "rewards/mean",
})


# NeMo-RL's step header (`f"\\n{'=' * 25} Step {current_step + 1}/{…} {'=' * 25}"`), the line that opens a step's
# results and one item of them (`f"  • Loss: {metrics['loss']:.4f}"`; DPO and the reward model print their metric
# fields' own names, `  • accuracy: 0.5312`)
_NEMO_STEP = re.compile(r"^\s*=+ Step (?P<n>\d+)/\d+ =+\s*$")
NEMO_RESULTS = "Training Results:"
_NEMO_ITEM = re.compile(r"^\s*\u2022 (?P<k>[A-Za-z][\w ./-]*?): (?P<v>\S+)\s*$")


def nemo_step(msg: str) -> int | None:
    """The step a NeMo-RL step header opens, or None when the line is not one."""
    m = _NEMO_STEP.match(msg)
    return int(m.group("n")) if m and len(m.group("n")) <= 18 else None


def nemo_item(msg: str) -> tuple[str, float] | None:
    """One `  • Name: value` item with a numeric value (`Total step time: 44.74s` is not one)."""
    m = _NEMO_ITEM.match(msg)
    if m is None:
        return None
    v = _number(m.group("v"))
    return None if v is None else (m.group("k"), v)


def _number(text: str) -> float | None:
    s = text.strip()
    try:
        return float(s)
    except ValueError:
        pass
    m = _NUMERIC_WRAPPER.match(s)
    if m:
        try:
            return float(m.group("v"))
        except ValueError:
            return None
    low = s.lower()
    if low in ("nan", "-nan", "inf", "-inf", "+inf"):
        return float(low.replace("-nan", "nan"))
    return None


def _key_values(items: list[str], sep: str) -> dict[str, object]:
    """`key<sep>value` items with a numeric value (`elapsed time: 3m 8s` and the like are not numbers)."""
    values: dict[str, object] = {}
    for item in items:
        key, found, raw = item.rpartition(sep)
        if not found or not key.strip():
            continue
        v = _number(raw)
        if v is not None:
            values[key.strip()] = v
    return values


def _verl(msg: str) -> MetricRecord | None:
    if "step:" not in msg:
        return None
    m = _VERL.search(msg)
    if m is None:
        return None
    values = _key_values(m.group("rest").split(" - "), ":")
    if not values:
        raise Unparsed("verl step line with no key:value")
    return MetricRecord("verl_console", "verl", int(m.group("n")), values)


def hf_record_role(values: dict[str, Any]) -> str:
    """What an HF Trainer record is: `eval`, the final `summary`, or a `train` step. Printed dicts and
    `trainer_state.json`'s rows share steps, so they are kept apart by this one rule (an `eval_*: null`
    is no evaluation: LLaMA-Factory writes `"eval_loss": null` into every training record,
    hiyouga/LlamaFactory#845)."""
    if any(str(k).startswith("eval_") and v is not None for k, v in values.items()):
        return "eval"
    if "train_runtime" in values or "train_loss" in values:
        return "summary"
    return "train"


_HF_KINDS = {"eval": "hf_log_eval", "summary": "hf_log_summary", "train": "hf_log"}
# Kinds whose records carry no step: the scan numbers them in print order (1, 2, …), which is not the
# trainer's step (the Trainer logs every `logging_steps`, and a paste may start anywhere).
ORDINAL_KINDS = frozenset(_HF_KINDS.values())


def _hf_kind(values: dict[str, object]) -> str:
    return _HF_KINDS[hf_record_role(values)]


def _swift_step(values: dict[str, object]) -> int | None:
    gm = values.get("global_step/max_steps")
    if isinstance(gm, str) and "/" in gm:
        head = gm.split("/", 1)[0].strip()
        if head.isdigit():
            return int(head)
    return None


def _dict_line(msg: str) -> MetricRecord | None:
    start = msg.find("{")
    if start < 0:
        return None
    end = msg.rfind("}")
    body = msg[start:end + 1] if end > start else msg[start:]
    head = body[:2]
    if head not in ("{'", '{"'):
        return None
    keys_hint = "'epoch'" in body or '"epoch"' in body or "global_step/max_steps" in body or "'loss'" in body \
        or "'train_runtime'" in body or "'eval_loss'" in body or '"loss"' in body
    values: dict[str, object] | None = None
    if head == '{"':
        try:
            raw = json.loads(body)
            values = raw if isinstance(raw, dict) else None
        except (ValueError, RecursionError):
            values = None
    if values is None:
        try:
            values = parse_metric_dict(body)
        except ValueError:
            if keys_hint:
                raise Unparsed("a logged dict that does not parse") from None
            return None
    if not any(k in _HF_KEYS for k in values) and "global_step/max_steps" not in values:
        return None
    step = _swift_step(values)
    if step is not None or "train_speed(iter/s)" in values or "memory(GiB)" in values:
        # (ms-swift adds its speed and memory to every record it logs, before it also printed
        # `global_step/max_steps`: modelscope/ms-swift#1208)
        return MetricRecord("swift_json", "swift", step, values)
    return MetricRecord("hf_dict", _hf_kind(values), None, values)


def _tqdm(msg: str) -> MetricRecord | None:
    if "=" not in msg:
        return None
    segments = msg.split("\r")
    for seg in reversed(segments):  # a tqdm bar rewritten in place: the last update counts
        m = None
        for m in _TQDM.finditer(seg):
            pass
        if m is None or not m.group("post"):
            continue
        values: dict[str, object] = {}
        items = list(_POSTFIX_ITEM.finditer(m.group("post")))
        if not m.group("end").startswith("]"):
            items = items[:-1]  # cut: the last value may have lost digits (`kl=0` of `kl=0.0012`)
        for item in items:
            v = _number(item.group("v"))
            if v is not None:
                values[item.group("k")] = v
        if values:
            return MetricRecord("tqdm_postfix", "openrlhf", int(m.group("i")), values)
    return None


def _nemo_progress(msg: str) -> MetricRecord | None:
    m = _MEGATRON.search(msg)
    if m is None:
        return None
    values = _key_values(m.group("rest").split("|"), ": ")
    if "reduced_train_loss" not in values:
        return None  # the line ends before it (a terminal's or a paste's cut): the records around it carry the run
    step = values.get("global_step")
    index = int(step) if isinstance(step, (int, float)) and step >= 0 else int(m.group("n"))
    return MetricRecord("nemo_progress", "megatron", index, values)


def _megatron(msg: str) -> MetricRecord | None:
    m = _MEGATRON.search(msg)
    if m is None:
        return None
    items = m.group("rest").split("|")
    values = _key_values(items, ": ")
    # Megatron-LM's first releases wrote `learning rate 1.010E-06 | lm loss 1.020020E+01 |` without the
    # colon (NVIDIA/Megatron-LM#5, 2019)
    values.update({k: v for k, v in _key_values([i.strip() for i in items if ": " not in i], " ").items()
                   if k not in values})
    if not values:
        raise Unparsed("a Megatron iteration line with no `key: value`")
    grammar = "megatron_swift" if _SWIFT_GRPO_KEYS & values.keys() else "megatron_log"
    return MetricRecord(grammar, "megatron", int(m.group("n")), values)


def parse_framework_metric(msg: str) -> MetricRecord | None:
    """The metric record in one log message, by the first grammar that reads it; None if none does.

    Raises `Unparsed` when a line has a grammar's shape but does not parse.
    """
    if "step:" in msg:
        rec = _verl(msg)
        if rec is not None:
            return rec
    if "{'" in msg or '{"' in msg:
        rec = _dict_line(msg)
        if rec is not None:
            return rec
    elif msg[:1] in ("'", '"') and ("': " in msg or '": ' in msg):
        # a record pasted without its opening brace, the copy starting at an item (gensyn-ai/rl-swarm#312:
        # `'rewards/…/std': 0.0, … 'reward': 0.0679, 'kl': 0.5806, 'epoch': 0.4}`)
        body = msg.rstrip().rstrip(",")
        rec = _dict_line("{" + body + ("" if body.endswith("}") else "}"))
        if rec is not None:
            return rec
    if "reduced_train_loss" in msg:
        rec = _nemo_progress(msg)
        if rec is not None:
            return rec
    if "elapsed time per iteration" in msg:  # in every version's line; `consumed samples:` came later
        rec = _megatron(msg)
        if rec is not None:
            return rec
    if "it/s" in msg or "s/it" in msg:
        return _tqdm(msg)
    return None

