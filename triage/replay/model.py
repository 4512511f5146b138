"""The run's model, rebuilt in-process: an HF transformers model from the run's config with its trained weights.

slime trains a Megatron model and serves an HF-layout one; both compute the same
function. A replay that does not need the framework's own code builds the HF model from
the `--hf-checkpoint`'s config.json and loads the weights the run had at the step being
replayed: a Megatron checkpoint (torch_dist or legacy, read tensor by tensor by
`triage.weights` and converted to HF names and layouts) or HF safetensors. Nothing is
downloaded and no repository code runs (`trust_remote_code` stays off).

Which weights a step saw:
- at the run's first step: what the actor loaded at start. The log says it
  (` loading distributed checkpoint from DIR at iteration N`); slime falls back to
  `--ref-load` when `--load` has no tracker, so a fresh run starts from the reference.
- the reference: `--ref-load` (else the HF checkpoint).
- at rollout R > first: slime saves with the rollout id as the iteration, so the
  newest `--save` iteration below R holds the weights rollout R started from.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from triage.errors import BadInput, CorruptArtifact, Unavailable

if TYPE_CHECKING:
    from torch import nn

    from triage.run.run import Run

TRACKER = "latest_checkpointed_iteration.txt"
_ITER = re.compile(r"^iter_(\d{7})$")
_LOADED = re.compile(
    r"loading (?:release )?(?:distributed )?checkpoint from (?P<path>\S+?)(?: at iteration (?P<it>\d+))?\s*$"
    r"|Load checkpoint from HuggingFace model into Megatron \(path=(?P<hf>[^)]+)\)"
)
CPU_MAX_PARAMETERS = 3_000_000_000  # beyond this a CPU replay takes too long to be a triage step


class WeightsMismatch(BadInput):
    """The weights do not fill the model the config describes."""


@dataclass(frozen=True)
class WeightSource:
    """Where a replay takes its weights from, and how the evidence names it."""

    path: Path
    iteration: int | None = None  # a Megatron iteration; None: the tracker's
    label: str = ""

    def describe(self) -> str:
        return self.label or str(self.path)


@dataclass
class ReplayModel:
    model: nn.Module
    config_dir: Path
    source: WeightSource
    dtype: torch.dtype
    device: str
    num_parameters: int
    architecture: str
    converted_from_megatron: bool = False
    hf_to_megatron: dict[str, str] = field(default_factory=dict)  # HF parameter -> its Megatron source

    def describe(self) -> str:
        return (f"{self.architecture} ({self.num_parameters / 1e6:.2f}M parameters, "
                f"{str(self.dtype).replace('torch.', '')}, {self.device}) with weights from {self.source.describe()}")


# --- the run's model and dtype -----------------------------------------------------------------


def hf_config_dir(run: Run) -> Path:
    """The directory of the run's HF config.json: `--hf-checkpoint`, else a discovered HF checkpoint."""
    for cand in [run.resolve_path(run.args.get("hf_checkpoint")), *run.artifacts.hf_checkpoints]:
        if cand is not None and cand.is_dir() and (cand / "config.json").is_file():
            return cand
    raise Unavailable(
        "hf_checkpoint",
        "no HF config.json reachable from the run: the replay builds the model from it",
        "keep the --hf-checkpoint directory (config.json, tokenizer) reachable from the run",
    )


def run_dtype(run: Run) -> torch.dtype:
    """The dtype the run computed in: `--fp16` / `--bf16` (Megatron), else float32."""
    args = run.args
    if args.get("fp16") is True:
        return torch.float16
    if args.get("bf16") is True:
        return torch.bfloat16
    return torch.float32


def _auto_config(config_dir: Path):
    """The run's config through transformers' built-in classes only: `auto_map` (the run's own code) is ignored."""
    from transformers import AutoConfig
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    from triage.weights.convert import load_hf_config

    raw = load_hf_config(config_dir) or {}
    model_type = raw.get("model_type")
    if raw.get("auto_map") and model_type not in CONFIG_MAPPING:
        raise Unavailable(
            "model code",
            f"config.json's model_type {model_type!r} has no built-in transformers class, only the model code "
            "its auto_map names; the in-process replay never runs code from the run",
            "replay through the framework itself with --load-debug-rollout-data (triage run --allow-relaunch)",
        )
    try:
        return AutoConfig.from_pretrained(str(config_dir), local_files_only=True, trust_remote_code=False)
    except (OSError, ValueError, KeyError) as exc:
        raise CorruptArtifact(config_dir / "config.json",
                              f"transformers cannot read it: {str(exc).splitlines()[0]}") from None


def _instantiate(config, dtype: torch.dtype, device: str):
    from transformers import AutoModelForCausalLM

    try:
        with torch.device(device):
            return AutoModelForCausalLM.from_config(config, dtype=dtype, trust_remote_code=False)
    except ValueError as exc:
        raise Unavailable(
            "model code",
            f"transformers has no built-in causal-LM class for model_type {getattr(config, 'model_type', None)!r} "
            f"({str(exc).splitlines()[0]}); the in-process replay never runs repository code",
            "replay through the framework itself with --load-debug-rollout-data",
        ) from None


def parameter_count(config_dir: Path) -> int:
    """Parameters of the model a config.json describes, counted without allocating it."""
    config = _auto_config(config_dir)
    model = _instantiate(config, torch.float32, "meta")
    return sum(p.numel() for p in model.parameters())


def choose_device(num_parameters: int, dtype: torch.dtype) -> str:
    """`cuda` when a GPU is here and the model is big for a CPU replay; `cpu` otherwise.

    Raises Unavailable for a model too big for a CPU replay on a machine without a GPU.
    """
    from triage.hardware import gpu_count

    if gpu_count() > 0:
        free, _total = torch.cuda.mem_get_info()
        need = num_parameters * (torch.finfo(dtype).bits // 8) * 4  # weights, grads, activations, reference
        if need < free:
            return "cuda"
    if num_parameters > CPU_MAX_PARAMETERS:
        raise Unavailable(
            "gpu",
            f"the model has {num_parameters / 1e9:.1f}B parameters: too big to replay a step on CPU "
            f"(limit {CPU_MAX_PARAMETERS / 1e9:.0f}B) and no GPU is available here",
            "run the triage where a GPU is available (--executor ray on a GPU cluster)",
        )
    return "cpu"


# --- loading weights ---------------------------------------------------------------------------


def load_model(config_dir: Path, source: WeightSource, dtype: torch.dtype = torch.float32,
               device: str = "cpu") -> ReplayModel:
    """The HF model of `config_dir` holding the weights of `source`, in eval mode, gradients on."""
    from triage.weights.convert import MegatronToHF, ModelDims, family_for, load_hf_config
    from triage.weights.readers import open_checkpoint

    config = _auto_config(config_dir)
    model = _instantiate(config, dtype, device)
    model.eval()
    try:
        reader = open_checkpoint(source.path, source.iteration)
    except BadInput as exc:
        raise Unavailable("checkpoint", f"cannot open {source.describe()}: {exc}",
                          "point --load / --ref-load at the run's Megatron checkpoint directory") from None
    converter = None
    if reader.naming == "megatron":
        raw = load_hf_config(config_dir) or {}
        dims = ModelDims.from_hf_config(raw, source=str(config_dir / "config.json"))
        converter = MegatronToHF(family_for(dims.model_type), dims)
    state = model.state_dict(keep_vars=True)
    loaded: set[str] = set()
    unexpected: list[str] = []
    origin: dict[str, str] = {}
    with torch.no_grad():
        for name, tensor in reader.tensors():
            pairs = converter.convert(name, tensor) if converter is not None else [(name, tensor)]
            for hf_name, value in pairs:
                target = state.get(hf_name)
                if target is None:
                    unexpected.append(hf_name)
                    continue
                if tuple(target.shape) != tuple(value.shape):
                    raise WeightsMismatch(f"{source.describe()}: {hf_name} has shape {tuple(value.shape)}, "
                                          f"the model from {config_dir / 'config.json'} expects {tuple(target.shape)}")
                target.data.copy_(value.to(target.dtype))
                loaded.add(hf_name)
                if converter is not None:
                    origin[hf_name] = name
    tied = bool(getattr(config, "tie_word_embeddings", False))
    missing = [n for n in state if n not in loaded and not (tied and n == "lm_head.weight")]
    if missing:
        raise WeightsMismatch(f"{source.describe()} lacks {len(missing)} parameter(s) the model needs, "
                              f"e.g. {', '.join(missing[:3])}")
    if tied and "lm_head.weight" not in loaded and hasattr(model, "tie_weights"):
        model.tie_weights()
    num = sum(p.numel() for p in model.parameters())
    return ReplayModel(model=model, config_dir=config_dir, source=source, dtype=dtype, device=device,
                       num_parameters=num, architecture=type(model).__name__,
                       converted_from_megatron=converter is not None, hf_to_megatron=origin)


# --- which weights a step saw ------------------------------------------------------------------


def _same_dir(a: Path | None, b: Path | None) -> bool:
    if a is None or b is None:
        return False
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False


def _arg_path(run: Run, key: str) -> Path | None:
    p = run.resolve_path(run.args.get(key))
    return p if p is not None and p.exists() else None


def reference_source(run: Run) -> WeightSource:
    """The reference model's weights: `--ref-load`, else the HF checkpoint."""
    ref = _arg_path(run, "ref_load")
    if ref is not None and ((ref / TRACKER).is_file() or any(ref.glob("*.safetensors"))):
        return WeightSource(ref, None, f"--ref-load {run.args.get('ref_load')}")
    hf = _arg_path(run, "hf_checkpoint")
    if hf is not None:
        return WeightSource(hf, None, f"--hf-checkpoint {run.args.get('hf_checkpoint')}")
    if ref is not None:
        return WeightSource(ref, None, f"--ref-load {run.args.get('ref_load')}")
    raise Unavailable("checkpoint", "neither --ref-load nor --hf-checkpoint resolves to weights here",
                      "keep the --ref-load / --hf-checkpoint directories reachable from the run")


def initial_source(run: Run) -> WeightSource:
    """The weights the actor trained its first step with, as the log says it loaded them."""
    if run.artifacts.logs:
        for line in run.log.notable_tagged("ckpt_loaded"):
            m = _LOADED.search(line.text)
            if not m:
                continue
            raw = (m.group("path") or m.group("hf") or "").strip()
            path = run.resolve_path(raw)
            if path is None:
                continue
            it = int(m.group("it")) if m.group("it") else None
            if _same_dir(path, _arg_path(run, "ref_load")):
                break
            return WeightSource(path, it, f"{raw} (iteration {it}), as the log says the actor loaded"
                                if it is not None else f"{raw}, as the log says the actor loaded")
    return reference_source(run)


def saved_iterations(path: Path) -> list[int]:
    if not path.is_dir():
        return []
    return sorted(int(m.group(1)) for c in path.iterdir() if c.is_dir() and (m := _ITER.match(c.name)))


def source_for_rollout(run: Run, rollout_id: int, first_rollout: int = 0) -> WeightSource:
    """The weights rollout `rollout_id` trained from: the initial ones, or the newest save before it."""
    if rollout_id > first_rollout:
        save = _arg_path(run, "save")
        if save is not None:
            before = [i for i in saved_iterations(save) if i < rollout_id]
            if before:
                it = before[-1]
                exact = "" if it == rollout_id - 1 else f"; the nearest save before rollout {rollout_id}"
                return WeightSource(save, it, f"--save {run.args.get('save')} iteration {it}{exact}")
    return initial_source(run)


def describe_parameters(model: ReplayModel, names: list[str]) -> list[str]:
    """HF parameter names with their Megatron source where the weights were converted."""
    return [f"{n} (Megatron {model.hf_to_megatron[n]})" if n in model.hf_to_megatron else n for n in names]


def model_summary(m: ReplayModel) -> dict[str, Any]:
    return {"architecture": m.architecture, "parameters": m.num_parameters,
            "dtype": str(m.dtype).replace("torch.", ""), "device": m.device, "weights": m.source.describe()}


def weight_differences(a: WeightSource, b: WeightSource, max_bytes: int, top: int = 5) -> list[dict[str, Any]]:
    """The tensors that differ most between two checkpoints of the same naming; [] when too big to read."""
    from triage.weights.readers import open_checkpoint

    if _same_dir(a.path, b.path) and a.iteration == b.iteration:
        return []
    ra, rb = open_checkpoint(a.path, a.iteration), open_checkpoint(b.path, b.iteration)
    if ra.naming != rb.naming:
        return []
    if sum(i.nbytes for i in ra.listing()) > max_bytes or sum(i.nbytes for i in rb.listing()) > max_bytes:
        return []
    other = dict(rb.tensors())
    out: list[dict[str, Any]] = []
    for name, t in ra.tensors():
        u = other.pop(name, None)
        if u is None:
            out.append({"name": name, "difference": f"only in {a.describe()}"})
        elif tuple(u.shape) != tuple(t.shape):
            out.append({"name": name, "difference": f"shape {tuple(t.shape)} vs {tuple(u.shape)}"})
        else:
            d = float((t.float() - u.float()).abs().max()) if t.numel() else 0.0
            if d > 0 or not math.isfinite(d):
                out.append({"name": name, "max_abs_diff": d})
    out += [{"name": n, "difference": f"only in {b.describe()}"} for n in other]
    out.sort(key=lambda r: -r.get("max_abs_diff", math.inf))
    return out[:top]
