"""Whether the checkpoints a run loads are there, complete, and the model the args describe.

The slime Q&A's first answer to garbled output from step 1: Megatron was not
loaded, because `--load` / `--ref-load` point at a directory without
`latest_checkpointed_iteration.txt` ("Megatron can only load a directory that has
it"). The checks, in the order a loader meets them:

1. the directory exists and has a usable tracker (`tracker_missing`);
2. the iteration the tracker (or `--ckpt-step`) names exists (`iteration_missing`);
3. that iteration holds every shard: torch_dist files named by `.metadata`, each as
   long as `.metadata` says, or every TP x PP legacy `mp_rank_*` directory; the HF
   checkpoint's safetensors and index agree (`shards_incomplete`);
4. the HF config.json agrees with the run's model args (`hf_mismatch`), the
   "configuration error" the debugging guides check by comparing args with the
   HF config.

slime's normal first run gives `--load` an empty save directory and starts from
`--ref-load`; that fallback is noted, not reported, unless the `--load` directory
holds saved iterations that the missing tracker hides. slime also loads a Hugging
Face checkpoint given as `--load` / `--ref-load`, and an `iter_XXXXXXX` directory
given as `--ref-load`; those are checked as what they are. A path that is not
reachable from here but that the job's log shows Megatron loading is fine.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from triage.errors import TriageError, Unavailable
from triage.finding import Observation
from triage.formats.checkpoints import (
    ITER_DIR,
    TRACKER,
    HFCheckpoint,
    MegatronCheckpoint,
    inspect_hf_checkpoint,
    inspect_iteration,
    inspect_megatron_checkpoint,
)
from triage.probe import Cost, Probe
from triage.run.run import NEEDS_HELP

if TYPE_CHECKING:
    from triage.run.run import Run

LOAD_ARGS = ("ref_load", "load")  # ref_load first: it is what initialises the weights on a fresh run

# run arg -> config.json keys (first present wins), and how to compare.
MODEL_ARGS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("hidden_size", ("hidden_size",), "int"),
    ("num_layers", ("num_hidden_layers",), "int"),
    ("num_attention_heads", ("num_attention_heads",), "int"),
    ("num_query_groups", ("num_key_value_heads",), "int"),
    ("ffn_hidden_size", ("intermediate_size",), "int"),
    ("kv_channels", ("head_dim",), "int"),
    ("rotary_base", ("rope_theta",), "float"),
    ("norm_epsilon", ("rms_norm_eps", "layer_norm_eps"), "float"),
    ("vocab_size", ("vocab_size",), "int"),
    ("padded_vocab_size", ("vocab_size",), "at_least"),
    ("num_experts", ("num_experts", "num_local_experts", "n_routed_experts"), "int"),
    ("moe_ffn_hidden_size", ("moe_intermediate_size",), "int"),
    ("untie_embeddings_and_output_weights", ("tie_word_embeddings",), "negated_bool"),
)


@dataclass
class _Checked:
    """One checkpoint directory examined, and what it means for the run."""

    outcome: str  # intact | tracker_missing | iteration_missing | shards_incomplete
    arg: str | None
    value: str | None
    ckpt: MegatronCheckpoint | None
    sentence: str
    evidence: dict[str, Any] = field(default_factory=dict)
    fallback_note: str | None = None


def _arg(run: Run, name: str) -> Any:
    try:
        args = run.args
        return args.get(name) if args else None
    except TriageError:
        return None


def _flag(value: Any) -> str:
    return "--" + value.replace("_", "-")


def _as_number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(str(value).strip())
    except ValueError:
        return None


def _as_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0", "yes", "no"):
        return value.strip().lower() in ("true", "1", "yes")
    if isinstance(value, int):
        return bool(value)
    return None


def _requested_dir(ckpt_step: Any) -> str | None:
    step = _as_number(ckpt_step)
    if step is not None and step >= 0 and float(step).is_integer():
        return f"iter_{int(step):07d}"
    return None


def _iteration_to_load(ckpt: MegatronCheckpoint, ckpt_step: Any) -> tuple[str | None, str]:
    """The iteration directory a loader opens: `--ckpt-step` (`--ref-ckpt-step`) wins over the tracker."""
    requested = _requested_dir(ckpt_step)
    if requested is not None:
        return requested, f"the requested step {int(_as_number(ckpt_step) or 0)}"
    return ckpt.named_dir, TRACKER


def _dir_evidence(arg: str | None, value: str | None, ckpt: MegatronCheckpoint) -> dict[str, Any]:
    out: dict[str, Any] = {"path": str(ckpt.path)}
    if arg:
        out["arg"] = _flag(arg)
        out["value"] = value
    out["exists"] = ckpt.exists
    out["tracker"] = ckpt.tracker_text if ckpt.tracker_exists else None
    names = ckpt.iteration_names
    out["iterations_present"] = names[-5:]
    out["iteration_count"] = len(names)
    if ckpt.problems:
        out["problems"] = ckpt.problems[:12]
    return out


def _loadable_without_tracker(arg: str | None, where: str, ckpt: MegatronCheckpoint, ev: dict[str, Any]) -> _Checked | None:
    """Directories slime loads although they have no tracker.

    slime loads a Hugging Face checkpoint given as --load / --ref-load straight into
    Megatron, and takes an `iter_XXXXXXX` directory given as --ref-load as that
    iteration. (Older slime versions, and Megatron alone, do neither.)
    """
    value = ev.get("value")
    if arg == "ref_load" and ITER_DIR.match(ckpt.path.name):
        layout = inspect_iteration(ckpt.path)
        ev["format"] = layout.format
        ev["layout"] = layout.summary()
        if layout.problems:
            return _Checked("shards_incomplete", arg, value, ckpt, f"{where}: {layout.problems[0]}", ev)
        return _Checked("intact", arg, value, ckpt, f"{where} is iteration {ckpt.path.name} ({layout.format}), complete", ev)
    if not (ckpt.path / "config.json").is_file():
        return None
    hf = inspect_hf_checkpoint(ckpt.path)
    if not hf.safetensors and not hf.has_pytorch_bin:
        return None
    ev["format"] = "hf"
    ev["note"] = "a Hugging Face checkpoint: slime loads it into Megatron directly (older versions do not)"
    if hf.problems:
        ev["problems"] = hf.problems[:12]
        return _Checked("shards_incomplete", arg, value, ckpt, f"{where} (a Hugging Face checkpoint): {hf.problems[0]}", ev)
    return _Checked("intact", arg, value, ckpt, f"{where} is a complete Hugging Face checkpoint", ev)


def _classify(arg: str | None, value: str | None, ckpt: MegatronCheckpoint, ckpt_step: Any) -> _Checked:
    where = f"{_flag(arg)} {value}" if arg else str(ckpt.path)
    ev = _dir_evidence(arg, value, ckpt)
    if not ckpt.exists:
        return _Checked("tracker_missing", arg, value, ckpt,
                        f"{where} does not exist (looked for it as given and under the run directory)", ev)
    if not ckpt.tracker_exists:
        loadable = _loadable_without_tracker(arg, where, ckpt, ev)
        if loadable is not None:
            return loadable
    if not ckpt.tracker_usable:
        what = f"has no {TRACKER}" if not ckpt.tracker_exists else f"has an unusable tracker ({ckpt.tracker_problem})"
        hidden = f", so its {len(ckpt.iterations)} saved iteration(s) are never loaded" if ckpt.iterations else ""
        return _Checked("tracker_missing", arg, value, ckpt, f"{where} {what}{hidden}", ev)
    target, source = _iteration_to_load(ckpt, ckpt_step)
    ev["iteration"] = target
    if target not in ckpt.iterations:
        present = ", ".join(ckpt.iteration_names[-3:]) or "none"
        return _Checked("iteration_missing", arg, value, ckpt,
                        f"{where}: {source} names {target}, which is not there (present: {present})", ev)
    layout = ckpt.iterations[target]
    ev["format"] = layout.format
    ev["layout"] = layout.summary()
    if layout.problems:
        return _Checked("shards_incomplete", arg, value, ckpt, f"{where}: {layout.problems[0]}", ev)
    return _Checked("intact", arg, value, ckpt, f"{where} loads {target} ({layout.format}), complete", ev)


def _compare_hf(run: Run, hf: HFCheckpoint) -> list[dict[str, Any]]:
    if not hf.config:
        return []
    mismatches = []
    for arg_name, keys, how in MODEL_ARGS:
        run_value = _arg(run, arg_name)
        note = None
        if arg_name == "num_query_groups" and _as_bool(_arg(run, "group_query_attention")) is False:
            # Megatron ignores --num-query-groups (default 1) unless --group-query-attention is on.
            run_value = _arg(run, "num_attention_heads")
            note = "--group-query-attention is off, so Megatron uses one key/value group per head"
        if run_value is None:
            continue
        key = next((k for k in keys if hf.get(k) is not None), None)
        if key is None:
            continue
        hf_value = hf.get(key)
        differ = False
        if how == "negated_bool":
            a, b = _as_bool(run_value), _as_bool(hf_value)
            differ = a is not None and b is not None and a == b
        else:
            a, b = _as_number(run_value), _as_number(hf_value)
            if a is None or b is None:
                continue
            if how == "int":
                differ = a != b
            elif how == "float":
                differ = not math.isclose(a, b, rel_tol=1e-6, abs_tol=0.0)
            elif how == "at_least":
                differ = a < b
        if differ:
            mismatches.append({"arg": _flag(arg_name), "run": run_value, "hf_key": key, "hf": hf_value}
                              | ({"note": note} if note else {}))
    return mismatches


def _hf_dirs(run: Run) -> tuple[list[Path], str | None]:
    value = _arg(run, "hf_checkpoint")
    unreachable = None
    dirs: list[Path] = []
    if isinstance(value, str) and value:
        resolved = run.resolve_path(value)
        if resolved is not None and resolved.is_dir():
            dirs.append(resolved)
        else:
            unreachable = value
    for p in run.artifacts.hf_checkpoints:
        if not any(_same(p, d) for d in dirs):
            dirs.append(p)
    return dirs, unreachable


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return a == b


class CheckpointIntegrity(Probe):
    """Whether --load / --ref-load hold a loadable, complete checkpoint that matches the model args."""

    name = "checkpoint_integrity"
    outcomes = ("intact", "tracker_missing", "iteration_missing", "shards_incomplete", "hf_mismatch")
    needs = ("checkpoint",)
    cost = Cost.STATIC

    def examine(self, run: Run) -> Observation:
        ep_hint = (_as_number(_arg(run, "expert_model_parallel_size")) or 1) > 1 and (
            _as_number(_arg(run, "pipeline_model_parallel_size")) or 1) == 1
        checked: list[_Checked] = []
        covered: list[Path] = []

        for arg in LOAD_ARGS:
            value = _arg(run, arg)
            if not isinstance(value, str) or not value:
                continue
            resolved = run.resolve_path(value)
            step = _arg(run, "ckpt_step" if arg == "load" else "ref_ckpt_step")
            requested = _requested_dir(step)
            ckpt = inspect_megatron_checkpoint(resolved if resolved is not None else Path(value), ep_hint=ep_hint,
                                               also=requested)
            checked.append(_classify(arg, value, ckpt, step))
            if resolved is not None:
                covered.append(resolved)
                if ITER_DIR.match(resolved.name):
                    covered.append(resolved.parent)  # the directory around an iteration given directly
        self._apply_log_confirmation(run, checked)
        self._apply_ref_load_fallback(checked)

        save = _arg(run, "save")
        save_dir = run.resolve_path(save) if isinstance(save, str) else None
        for path in run.artifacts.checkpoints:
            if any(_same(path, c) for c in covered):
                continue
            ckpt = inspect_megatron_checkpoint(path, ep_hint=ep_hint)
            is_save = save_dir is not None and _same(path, save_dir)
            checked.append(_classify("save" if is_save else None, save if is_save else None, ckpt, None))

        hf_dirs, hf_unreachable = _hf_dirs(run)
        hf_reports = [inspect_hf_checkpoint(d) for d in hf_dirs]
        log_lines = self._log_evidence(run)

        if not checked and not hf_reports:
            raise Unavailable(
                "checkpoint",
                "no checkpoint to examine: neither --load / --ref-load nor a checkpoint directory in the run",
                NEEDS_HELP["checkpoint"],
            )

        evidence: dict[str, Any] = {"checked": [c.evidence for c in checked]}
        notes = [c.fallback_note for c in checked if c.fallback_note]
        if hf_unreachable:
            notes.append(f"--hf-checkpoint {hf_unreachable} is not reachable from here: its config was not compared")
        if notes:
            evidence["notes"] = notes
        if log_lines:
            evidence["log_lines"] = log_lines
        if hf_reports:
            evidence["hf_checkpoints"] = [self._hf_evidence(h) for h in hf_reports]

        # What the run loads decides first; the HF checkpoint next; other directories (--save, found on disk) last.
        primary = [c for c in checked if c.arg in LOAD_ARGS]
        secondary = [c for c in checked if c.arg not in LOAD_ARGS]
        found = self._worst(run, primary, evidence, log_lines)
        if found is not None:
            return found
        if log_lines and not any(c.outcome == "intact" for c in primary):
            return self.observe(
                "tracker_missing", f"the log says Megatron found no checkpoint to load: {log_lines[0]}", 0.85, **evidence
            )
        hf_broken = [h for h in hf_reports if h.problems]
        if hf_broken:
            sentences = [f"HF checkpoint {h.path}: {h.problems[0]}" for h in hf_broken]
            return self.observe("shards_incomplete", self._join(sentences), 0.9, hf_path=str(hf_broken[0].path),
                                hf_problems=hf_broken[0].problems[:12], **evidence)
        for h in hf_reports:
            mismatches = _compare_hf(run, h)
            if mismatches:
                shown = "; ".join(f"{m['arg']} {m['run']} vs {m['hf_key']} {m['hf']}" for m in mismatches[:4])
                return self.observe(
                    "hf_mismatch",
                    f"the HF config.json at {h.path} disagrees with the run's model args: {shown}",
                    0.85, mismatches=mismatches, hf_path=str(h.path), **evidence,
                )
        found = self._worst(run, secondary, evidence, log_lines)
        if found is not None:
            return found

        parts = [c.sentence for c in checked]
        if hf_reports:
            compared = any(_arg(run, a) is not None for a, _k, _h in MODEL_ARGS)
            parts.append("the HF checkpoint is complete" + ("; its config matches the model args" if compared else ""))
        return self.observe("intact", self._join(parts), 0.8, **evidence)

    def _worst(self, run: Run, group: list[_Checked], evidence: dict[str, Any], log_lines: list[str]) -> Observation | None:
        for outcome in ("tracker_missing", "iteration_missing", "shards_incomplete"):
            hits = [c for c in group if c.outcome == outcome]
            if not hits:
                continue
            if outcome == "tracker_missing":
                summary = self._join([c.sentence + self._consequence(run, c) for c in hits])
                return self.observe(outcome, summary, self._confidence(hits, log_lines), **self._lead(evidence, hits))
            return self.observe(outcome, self._join([c.sentence for c in hits]), 0.9, **self._lead(evidence, hits))
        return None

    @staticmethod
    def _consequence(run: Run, c: _Checked) -> str:
        if c.arg == "load" and _arg(run, "ref_load"):
            return ": slime ignores it and starts again from --ref-load"
        if c.arg == "ref_load" and _arg(run, "load"):
            return ": Megatron loads nothing from it (the reference model, and a fresh actor, start from random weights)"
        if c.arg in LOAD_ARGS:
            return ": Megatron loads nothing from it and starts from random weights"
        return ": Megatron would load nothing from it"

    @staticmethod
    def _apply_log_confirmation(run: Run, checked: list[_Checked]) -> None:
        """A path not reachable from here that the job's log shows Megatron loading from is fine."""
        unreachable = [c for c in checked if c.ckpt is not None and not c.ckpt.exists and c.value]
        if not unreachable or not run.artifacts.logs:
            return
        try:
            loaded = run.log.notable_tagged("ckpt_loaded")
        except TriageError:
            return
        for c in unreachable:
            path = str(c.value).rstrip("/")
            line = next((ln for ln in loaded if path in ln.text), None)
            if line is None:
                continue
            c.outcome = "intact"
            c.sentence = f"{_flag(c.arg or '')} {c.value} is not reachable from here, but the log shows Megatron loading it"
            c.fallback_note = f"{_flag(c.arg or '')} {c.value} loaded according to {line.where()}: {line.text}"

    @staticmethod
    def _apply_ref_load_fallback(checked: list[_Checked]) -> None:
        """A --load without a tracker is slime's normal fresh start when --ref-load is loadable."""
        ref = next((c for c in checked if c.arg == "ref_load"), None)
        load = next((c for c in checked if c.arg == "load"), None)
        if ref is None or load is None or ref.outcome in ("tracker_missing", "iteration_missing"):
            return
        if load.outcome != "tracker_missing" or (load.ckpt is not None and load.ckpt.iterations):
            return
        load.outcome = "intact"
        load.fallback_note = (
            f"--load {load.value} has no {TRACKER}: slime starts from --ref-load {ref.value} (normal for a fresh run)"
        )
        load.sentence = f"--load {load.value} is empty, so the run starts from --ref-load"

    @staticmethod
    def _confidence(hits: list[_Checked], log_lines: list[str]) -> float:
        if log_lines or any(c.ckpt is not None and c.ckpt.exists for c in hits):
            return 0.9
        return 0.6  # a path missing here may exist on the cluster the job ran on

    @staticmethod
    def _lead(evidence: dict[str, Any], hits: list[_Checked]) -> dict[str, Any]:
        out = dict(evidence)
        if hits:
            first = hits[0].evidence
            for key in ("arg", "value", "path", "exists", "tracker", "iteration", "iterations_present", "problems"):
                if key in first:
                    out[key] = first[key]
        return out

    @staticmethod
    def _join(sentences: list[str]) -> str:
        return "; ".join(sentences[:3]) + ("; …" if len(sentences) > 3 else "")

    @staticmethod
    def _hf_evidence(h: HFCheckpoint) -> dict[str, Any]:
        out: dict[str, Any] = {"path": str(h.path), "safetensors_files": len(h.safetensors)}
        if h.config:
            out["config"] = {k: h.config[k] for k in ("model_type", "hidden_size", "num_hidden_layers",
                                                      "num_attention_heads", "num_key_value_heads", "vocab_size")
                             if k in h.config}
        if h.problems:
            out["problems"] = h.problems[:12]
        return out

    @staticmethod
    def _log_evidence(run: Run) -> list[str]:
        if not run.artifacts.logs:
            return []
        try:
            lines = run.log.notable_tagged("ckpt_not_found")
        except TriageError:
            return []
        return [f"{line.where()}: {line.text}" for line in lines[:5]]
