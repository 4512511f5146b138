"""Compare the trainer's checkpoint with the weights a live SGLang engine holds, over HTTP.

The engine-side half of the guides' garbled-rollout check, for when no dump of the
engine's weights exists but the engine is still up (`--engine http://HOST:PORT`). The
comparison (triage/weights/live.py) reads the engine's per-parameter checksums in one
request where they can be recomputed here (CPU engines) and `/get_weights_by_name`
where that works (Llama-like models); a GPU engine's checksums are a different hash and
the probe says so (`hash_incomparable`) rather than compare unlike things.

Outcomes are those of weights_compare, explained the same way, plus `hash_incomparable`.
Nothing sent changes the engine; the evidence lists every request made.

Where it reads: the checkpoint, baseline and model dims exactly as weights_compare finds
them (--load / --save / discovered checkpoints / --ref-load; --hf-checkpoint; config.json
or Megatron args); the engines from `--engine` (repeatable) or the manifest's `engines:`.
Every listed engine is compared; the outcome is the most telling one among them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from probes.weights_compare import baseline_weights, model_of, trainer_checkpoint
from triage.engines import (
    EngineDisconnected,
    EngineError,
    EngineProtocolError,
    EngineRejected,
    EngineTimeout,
    EngineUnreachable,
)
from triage.errors import Unavailable
from triage.finding import Observation
from triage.probe import Cost, Probe
from triage.weights.live import OUTCOMES, PRIORITY, compare_live
from triage.weights.readers import open_checkpoint, open_weights

if TYPE_CHECKING:
    from triage.engines.sglang import SGLangEngine
    from triage.run.run import Run

CONFIDENCE = {
    "match": 0.9, "shifted_layers": 0.9, "misnamed": 0.85, "stale_or_missing": 0.85, "zeroed": 0.9,
    "value_mismatch": 0.7, "buffers_differ": 0.85, "hash_incomparable": 0.3,
}
ENGINE_HELP = "start the engine, or pass the address it serves on: --engine http://HOST:PORT"


def connect(url: str, run: Run, **kwargs: Any) -> SGLangEngine:
    """The adapter for one of the run's engines (writes only with --allow-engine-writes)."""
    from triage.engines.sglang import SGLangEngine

    return SGLangEngine(url, allow_writes=run.engine_writes_allowed, **kwargs)


def open_engine(url: str, run: Run, **kwargs: Any) -> SGLangEngine:
    """Connect and make the first request; an engine that cannot be reached is `unavailable`, naming the address."""
    try:
        engine = connect(url, run, **kwargs)
    except EngineUnreachable as exc:
        raise Unavailable("engine", f"cannot use the engine address {url!r}: {exc.reason}", ENGINE_HELP) from None
    try:
        first_contact(engine)
    except BaseException:
        engine.close()
        raise
    return engine


def first_contact(engine: SGLangEngine) -> None:
    """The first request: an engine that never answers is `unavailable`, naming the address tried."""
    try:
        engine.server_info()
    except (EngineUnreachable, EngineTimeout, EngineDisconnected) as exc:
        raise Unavailable("engine", f"no SGLang engine answers at {engine.address}: {exc.reason}",
                          ENGINE_HELP) from None
    except (EngineRejected, EngineProtocolError) as exc:
        raise Unavailable("engine", f"{engine.address} is not an SGLang server that answers /get_server_info "
                          f"({exc.reason})", ENGINE_HELP) from None


def with_requests(exc: EngineError, engine: SGLangEngine) -> EngineError:
    """The same error, its message carrying how many requests had been made (the finding keeps only the text)."""
    n = len(engine.requests)
    done = ", ".join(f"{r.method} {r.path} {r.status or '-'}" for r in engine.requests[-4:])
    return EngineError(exc.address, f"{exc.reason} [after {n} request{'s' if n != 1 else ''} to the engine; "
                                    f"last: {done}]")


class LiveWeights(Probe):
    """Compare the trainer's checkpoint with the weights a live SGLang engine holds, over HTTP."""

    name = "live_weights"
    outcomes = OUTCOMES
    needs = ("engine",)
    cost = Cost.CPU
    live_engine: ClassVar[bool] = True  # talks to a live engine: its findings must not be cached
    contacts_engine = True  # reads checksums / weights by name; sends nothing that changes the engine

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)

        via: str = Field("auto", pattern="^(auto|checksums|by_name)$",
                         description="auto: checksums where recomputable here, else get_weights_by_name")
        rows: int = Field(4, ge=1, le=64, description="leading rows read per tensor through get_weights_by_name")
        max_report: int = Field(10, ge=1, le=1000, description="tensors listed per category in the evidence")
        max_by_name: int = Field(512, ge=1, le=10000, description="most get_weights_by_name requests per engine")
        timeout_s: float = Field(30.0, gt=0, le=600, description="per-request timeout")
        iteration: int | None = Field(None, ge=0, description="Megatron iteration to read; default the tracker's")

    def examine(self, run: Run) -> Observation:
        p: Any = self.params
        if not run.engines:
            raise Unavailable("engine", "no live engine was named", ENGINE_HELP)
        ckpt_path = trainer_checkpoint(run)
        baseline_path = baseline_weights(run, exclude=(ckpt_path,))
        results = []
        for url in dict.fromkeys(run.engines):
            engine = open_engine(url, run, timeout=p.timeout_s)
            try:
                checkpoint = open_checkpoint(ckpt_path, p.iteration)
                baseline = open_weights(baseline_path) if baseline_path else None
                info = engine.model_info()
                served = [Path(x) for x in (info.model_path, info.tokenizer_path) if x and Path(x).is_dir()]
                dims, family = model_of(run, checkpoint, [baseline_path, ckpt_path, *served])
                result = compare_live(engine, checkpoint, dims=dims, family=family, baseline=baseline, via=p.via,
                                      rows=p.rows, max_report=p.max_report, max_by_name=p.max_by_name)
                result.evidence["family"] = family.name if family else None
                result.evidence["dims_from"] = dims.source if dims else None
                if result.outcome == "shifted_layers" and dims is not None and dims.num_layers:
                    pp = run.args.get("pipeline_model_parallel_size") or (checkpoint.saved_args or {}).get(
                        "pipeline_model_parallel_size")
                    if isinstance(pp, int) and pp > 1:
                        result.evidence["pp_size"] = pp
                        result.evidence["stage_offsets"] = [r * dims.num_layers // pp for r in range(pp)]
                results.append(result)
            except EngineError as exc:
                raise with_requests(exc, engine) from None
            finally:
                engine.close()
        order = PRIORITY + ("hash_incomparable",)
        worst = min(results, key=lambda r: order.index(r.outcome))
        evidence = dict(worst.evidence)
        if len(results) > 1:
            evidence["engines"] = [{"engine": r.evidence["engine"], "outcome": r.outcome} for r in results]
            evidence["request_count"] = sum(r.evidence.get("request_count", 0) for r in results)
        return self.observe(worst.outcome, worst.summary, CONFIDENCE[worst.outcome], **evidence)
