"""Compare the trainer's checkpoint with the weights the inference engine holds.

The guides' test for garbled rollouts from the first step: "save all parameters
inside the model's SGLang `load_weights` and compare them against the loaded
checkpoint" (slime / Relax debugging guides). This probe does the comparison and
explains the difference:

- `shifted_layers`: a stage's engine layers equal checkpoint layers at a fixed offset
  (the PP layer offset not added when converting names);
- `misnamed`: a tensor's values are found under another name;
- `stale_or_missing`: engine tensors equal the initial (HF) weights, or are absent;
- `zeroed`: engine tensors all zero while the checkpoint's are not;
- `value_mismatch`: tensors differ with no structural explanation (max abs / rel diff);
- `buffers_differ`: parameters match, rotary buffers do not (released and not restored);
- `match`.

Where it reads:
- the checkpoint: `--load` (when its tracker file exists), `--save`, the run's discovered
  Megatron checkpoints, then `--ref-load`; Megatron torch_dist or legacy, or HF weights;
- the engine: `<run>/engine_weights/` (safetensors with HF or SGLang names, or a torch
  state dict), as the discovery or the manifest's `engine_weights` names it;
- the baseline (to recognise stale tensors): `--hf-checkpoint`, else a discovered HF
  checkpoint;
- the model's dims: a config.json next to the engine dump, the baseline or the
  checkpoint, else the checkpoint's saved Megatron args, else the run's flags.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from triage.errors import BadInput, Unavailable
from triage.finding import Observation
from triage.probe import Cost, Probe
from triage.weights.compare import OUTCOMES, compare_weights
from triage.weights.convert import Family, ModelDims, family_for, load_hf_config
from triage.weights.readers import (
    WeightsReader,
    is_megatron_dir,
    open_checkpoint,
    open_weights,
)

if TYPE_CHECKING:
    from triage.run.run import Run

MEGATRON_MODEL_ARGS = (
    "hidden_size", "num_attention_heads", "num_query_groups", "group_query_attention", "kv_channels",
    "num_layers", "vocab_size", "num_experts", "untie_embeddings_and_output_weights", "rotary_base",
    "rotary_percent", "max_position_embeddings", "qk_layernorm", "add_qkv_bias", "swiglu",
)

CONFIDENCE = {
    "match": 0.9, "shifted_layers": 0.9, "misnamed": 0.85, "stale_or_missing": 0.85, "zeroed": 0.9,
    "value_mismatch": 0.7, "buffers_differ": 0.85,
}


class WeightsCompare(Probe):
    """Compare the trainer's checkpoint with the engine's loaded weights and explain any difference."""

    name = "weights_compare"
    outcomes = OUTCOMES
    needs = ("checkpoint", "engine_weights")
    cost = Cost.CPU

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)

        rtol: float | None = Field(None, ge=0, description="relative tolerance; default 2 eps of the coarser dtype")
        atol: float | None = Field(None, ge=0, description="absolute tolerance; default 1e-6")
        max_report: int = Field(10, ge=1, le=1000, description="tensors listed per category in the evidence")
        sample_size: int = Field(256, ge=8, le=65536, description="values sampled per tensor for content fingerprints")
        iteration: int | None = Field(None, ge=0, description="Megatron iteration to read; default the tracker's")

    def examine(self, run: Run) -> Observation:
        p = self.params
        engine_path = engine_dump(run)
        ckpt_path = trainer_checkpoint(run)
        baseline_path = baseline_weights(run, exclude=(ckpt_path, engine_path))
        checkpoint = open_checkpoint(ckpt_path, p.iteration)  # type: ignore[attr-defined]
        engine = open_weights(engine_path)
        baseline = open_weights(baseline_path) if baseline_path else None
        dims, family = model_of(run, checkpoint, [engine_path, baseline_path, ckpt_path])
        result = compare_weights(
            checkpoint, engine, dims=dims, family=family, baseline=baseline,
            rtol=p.rtol, atol=p.atol, max_report=p.max_report, sample_size=p.sample_size,  # type: ignore[attr-defined]
        )
        evidence = dict(result.evidence)
        evidence["family"] = family.name if family else None
        evidence["dims_from"] = dims.source if dims else None
        if result.outcome == "shifted_layers" and dims is not None and dims.num_layers:
            pp = run.args.get("pipeline_model_parallel_size") or (checkpoint.saved_args or {}).get(
                "pipeline_model_parallel_size")
            if isinstance(pp, int) and pp > 1:
                evidence["pp_size"] = pp
                evidence["stage_offsets"] = [r * dims.num_layers // pp for r in range(pp)]
        confidence = CONFIDENCE[result.outcome]
        if not evidence["coverage_complete"]:  # tensors the rules could not convert were never compared
            confidence = min(confidence, 0.5)
        return self.observe(result.outcome, result.summary, confidence, **evidence)


# --- where things are ------------------------------------------------------------------------


def _has_weights(d: Path) -> bool:
    return any(d.glob("*.safetensors")) or any(c.suffix in (".pt", ".bin", ".pth") for c in d.iterdir() if c.is_file())


def engine_dump(run: Run) -> Path:
    """The directory (or file) of the engine's dumped weights."""
    for p in run.artifacts.engine_weights:
        if p.is_file() or (p.is_dir() and _has_weights(p)):
            return p
        if p.is_dir():  # one dump per rank: the first rank's is the whole model as load_weights received it
            for sub in sorted(c for c in p.iterdir() if c.is_dir()):
                if _has_weights(sub):
                    return sub
    why = ("the engine dump directory holds no *.safetensors / .pt weights" if run.artifacts.engine_weights
           else "no dump of the engine's loaded weights in the run")
    if run.engines:
        why += f" (a live engine is listed, {run.engines[0]}, but reading weights over HTTP is not done here)"
    raise Unavailable(
        "engine_weights", why,
        f"dump the engine's weights from its load_weights into {run.root / 'engine_weights'}/, "
        "or pass --engine http://HOST:PORT",
    )


def trainer_checkpoint(run: Run) -> Path:
    """The trainer checkpoint to compare: --load with a tracker, --save, discovered ones, --ref-load."""
    candidates: list[Path] = []
    load = run.resolve_path(run.args.get("load"))
    if load is not None and (load / "latest_checkpointed_iteration.txt").is_file():
        candidates.append(load)
    for value in (run.args.get("save"),):
        p = run.resolve_path(value)
        if p is not None:
            candidates.append(p)
    candidates += list(run.artifacts.checkpoints)
    for key in ("load", "ref_load"):
        p = run.resolve_path(run.args.get(key))
        if p is not None:
            candidates.append(p)
    for c in candidates:
        if c.is_dir() and (is_megatron_dir(c) or (c / ".metadata").exists() or _has_weights(c)):
            return c
    raise Unavailable(
        "checkpoint",
        "no trainer checkpoint found (--load / --save / --ref-load resolve to nothing readable here)",
        "point --load / --ref-load / --save at the run's Megatron checkpoint directory",
    )


def baseline_weights(run: Run, exclude: tuple[Path, ...]) -> Path | None:
    """The initial weights: --hf-checkpoint, else a discovered HF checkpoint that is neither side."""
    skip = {p.resolve() for p in exclude}
    cands = [run.resolve_path(run.args.get("hf_checkpoint"))] + list(run.artifacts.hf_checkpoints)
    for c in cands:
        if c is not None and c.resolve() not in skip and c.is_dir() and _has_weights(c):
            return c
    return None


def model_of(run: Run, checkpoint: WeightsReader, dirs: list[Path | None]) -> tuple[ModelDims | None, Family | None]:
    """Dims and family from the first config.json found, else the saved / the run's Megatron args."""
    for d in [*dirs, *run.artifacts.hf_checkpoints]:
        if d is None:
            continue
        where = d if d.is_dir() else d.parent
        cfg = load_hf_config(where)
        if cfg:
            dims = ModelDims.from_hf_config(cfg, source=str(where / "config.json"))
            if checkpoint.naming != "megatron":
                return dims, None  # HF names on both sides: no conversion
            return dims, family_for(dims.model_type) if dims.model_type else family_for(None, {})
    args: dict[str, Any] | None = checkpoint.saved_args
    source = f"{checkpoint.path} saved args"
    if not args or not args.get("hidden_size"):
        args = {k: run.args.get(k) for k in MEGATRON_MODEL_ARGS if run.args.get(k) is not None}
        source = "the run's arguments"
    if not args.get("hidden_size"):
        if checkpoint.naming == "megatron":
            raise Unavailable(
                "hf_checkpoint",
                "no config.json and no Megatron model arguments: cannot convert the checkpoint's fused tensors",
                "keep the --hf-checkpoint directory (config.json) reachable from the run, or put its config.json "
                "next to the engine dump",
            )
        return None, None
    try:
        return ModelDims.from_megatron_args(args, source), family_for(None, args)
    except BadInput as exc:
        raise Unavailable("hf_checkpoint", str(exc), "keep the --hf-checkpoint directory reachable from the run") from None
