"""Trainer checkpoint vs the engine's weights: which tensors differ, and why.

The guides' check for garbled rollouts ("save all parameters inside SGLang's
`load_weights` and compare them against the loaded checkpoint") done so that the
answer explains the difference instead of counting it:

1. Stream the checkpoint tensor by tensor, convert each to HF names and layouts
   (triage.weights.convert), fetch the engine tensor of the same name and compare:
   bit-equal at the lower of the two precisions, else max abs / max rel diff and the
   fraction of elements beyond `atol + rtol * |expected|`.
2. Keep a content fingerprint of every tensor on both sides (shape, dtype, values at
   fixed strided positions). A mismatched engine tensor whose fingerprint equals a
   *different* checkpoint tensor is relocated: a fixed layer offset across several
   tensors is a shifted pipeline stage, anything else a misnamed parameter.
3. Re-read the still unexplained ones next to the baseline (the initial / HF
   weights): equal to the baseline, not to the trained value, means the update
   never reached the engine.
4. Check the engine's rotary buffers against what the config implies.

When several explanations apply, the outcome is the first of (a fixed, documented
priority; the most structural explanation first, because it accounts for the
per-tensor symptoms that follow from it):

    shifted_layers > misnamed > stale_or_missing > zeroed > value_mismatch > buffers_differ > match

The evidence keeps every category's count, so a lower-priority finding is never hidden.
"""

from __future__ import annotations

import math
import re
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import torch

from triage.errors import BadInput, Unavailable
from triage.weights.convert import (
    Family,
    LayoutError,
    MegatronToHF,
    ModelDims,
    UnmappedParameter,
    expected_cos_sin_cache,
    expected_inv_freq,
    layer_of,
    layer_suffix,
    split_sglang,
)
from triage.weights.readers import WeightsReader

OUTCOMES = ("match", "shifted_layers", "misnamed", "stale_or_missing", "zeroed", "value_mismatch", "buffers_differ")
PRIORITY = ("shifted_layers", "misnamed", "stale_or_missing", "zeroed", "value_mismatch", "buffers_differ", "match")
BUFFER = re.compile(r"(inv_freq|cos_sin_cache|cos_cached|sin_cached|_float_tensor|k_scale|v_scale)$")
CHUNK_ELEMENTS = 1 << 22
MIN_SHIFTED_TENSORS = 2


# --- tolerances ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Tolerance:
    """Elementwise |engine - expected| <= atol + rtol * |expected| counts as equal."""

    rtol: float
    atol: float

    @staticmethod
    def coarser(a: torch.dtype, b: torch.dtype) -> torch.dtype:
        """The less precise of two dtypes: the one a comparison has to round to."""
        def eps(d: torch.dtype) -> float:
            return torch.finfo(d).eps if d.is_floating_point else 0.0
        return a if eps(a) >= eps(b) else b

    @classmethod
    def for_dtypes(cls, a: torch.dtype, b: torch.dtype, rtol: float | None = None,
                   atol: float | None = None) -> Tolerance:
        """Defaults from the coarser dtype: rtol = 2 eps (bf16 1.6e-2, fp16 2e-3), at least 1e-5."""
        d = cls.coarser(a, b)
        default_rtol = max(2 * torch.finfo(d).eps, 1e-5) if d.is_floating_point else 0.0
        return cls(rtol=default_rtol if rtol is None else rtol, atol=1e-6 if atol is None else atol)


# --- fingerprints --------------------------------------------------------------------------


@dataclass(frozen=True)
class Fingerprint:
    """Shape, dtype and values at fixed strided positions: enough to recognise a tensor by content."""

    shape: tuple[int, ...]
    dtype: torch.dtype
    sample: torch.Tensor = field(repr=False)
    constant: bool = False


def sample_positions(numel: int, k: int) -> torch.Tensor:
    m = min(k, numel)
    if m <= 0:
        return torch.zeros(0, dtype=torch.int64)
    return torch.arange(m, dtype=torch.int64) * (numel - 1) // max(m - 1, 1)


def fingerprint(t: torch.Tensor, k: int = 256) -> Fingerprint:
    idx = sample_positions(t.numel(), k)
    if t.is_contiguous():
        vals = t.reshape(-1)[idx]
    else:
        vals = t[torch.unravel_index(idx, t.shape)] if t.dim() else t.reshape(1)
    vals = vals.to(torch.float32)
    constant = bool(vals.numel() == 0 or (vals == vals[0]).all())
    return Fingerprint(tuple(t.shape), t.dtype, vals, constant)


@dataclass
class _ShapeGroup:
    names: list[str]
    samples: torch.Tensor  # [n, k]
    constant: torch.Tensor  # [n] bool
    dtypes: list[torch.dtype]


def _groups(fps: dict[str, Fingerprint]) -> dict[tuple[int, ...], _ShapeGroup]:
    by_shape: dict[tuple[int, ...], list[str]] = {}
    for name, fp in fps.items():
        by_shape.setdefault(fp.shape, []).append(name)
    return {
        shape: _ShapeGroup(names, torch.stack([fps[n].sample for n in names]),
                           torch.tensor([fps[n].constant for n in names]), [fps[n].dtype for n in names])
        for shape, names in by_shape.items()
    }


def best_content_match(fp: Fingerprint, groups: dict[tuple[int, ...], _ShapeGroup], exclude: str,
                       rtol: float | None, atol: float | None) -> tuple[str, float] | None:
    """The other tensor whose sampled values equal this one's (within tolerance), nearest first."""
    if fp.constant:
        return None
    g = groups.get(fp.shape)
    if g is None:
        return None
    tol = Tolerance.for_dtypes(fp.dtype, g.dtypes[0], rtol, atol)
    diff = (g.samples - fp.sample).abs()
    ok = (diff <= tol.atol + tol.rtol * g.samples.abs()).all(dim=1) & ~g.constant
    if not ok.any():
        return None
    worst = diff.max(dim=1).values.masked_fill(~ok, math.inf)
    for i in torch.argsort(worst).tolist():
        if not math.isfinite(float(worst[i])):
            break
        if g.names[i] != exclude:
            return g.names[i], float(worst[i])
    return None


# --- one tensor against another ------------------------------------------------------------


@dataclass
class TensorDiff:
    name: str
    shape: tuple[int, ...]
    engine_shape: tuple[int, ...]
    exact: bool = False
    max_abs: float = 0.0
    max_rel: float = 0.0
    mismatched_fraction: float = 0.0
    engine_zero: bool = False
    expected_zero: bool = False

    @property
    def shape_mismatch(self) -> bool:
        return self.shape != self.engine_shape

    @property
    def within_tolerance(self) -> bool:
        return not self.shape_mismatch and (self.exact or self.mismatched_fraction == 0.0)

    def report(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        if self.shape_mismatch:
            out.update(shape=list(self.shape), engine_shape=list(self.engine_shape))
            return out
        out.update(max_abs=_num(self.max_abs), max_rel=_num(self.max_rel),
                   mismatched_fraction=_num(round(self.mismatched_fraction, 6)))
        return out


def _num(x: float) -> float | str:
    return x if math.isfinite(x) else str(x)


def _bits_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bytewise equality of two contiguous tensors, compared as the widest integers both allow."""
    ua, ub = a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8)
    if ua.numel() != ub.numel():
        return False
    for wide, size in ((torch.int64, 8), (torch.int32, 4), (torch.int16, 2)):
        if ua.numel() % size == 0 and ua.data_ptr() % size == 0 and ub.data_ptr() % size == 0:
            return torch.equal(ua.view(wide), ub.view(wide))
    return torch.equal(ua, ub)


def _equal_at(a: torch.Tensor, b: torch.Tensor, dtype: torch.dtype) -> bool:
    if a.dtype == b.dtype:
        if a.is_contiguous() and b.is_contiguous() and _bits_equal(a, b):
            return True  # bit-equal: the common case, compared 8 bytes at a time
        return torch.equal(a, b)  # equal values with other bits (-0.0 / 0.0)
    fa, fb = a.reshape(-1), b.reshape(-1)
    for s in range(0, fa.numel(), CHUNK_ELEMENTS):
        x, y = fa[s:s + CHUNK_ELEMENTS].to(dtype), fb[s:s + CHUNK_ELEMENTS].to(dtype)
        if not (_bits_equal(x, y) or torch.equal(x, y)):
            return False
    return True


def compare_tensors(name: str, engine: torch.Tensor, expected: torch.Tensor, tol: Tolerance) -> TensorDiff:
    """Bit-equality at the coarser precision first; diff statistics only when that fails."""
    diff = TensorDiff(name, tuple(expected.shape), tuple(engine.shape))
    if diff.shape_mismatch:
        return diff
    if _equal_at(engine, expected, Tolerance.coarser(engine.dtype, expected.dtype)):
        diff.exact = True
        return diff
    fe, fx = engine.reshape(-1), expected.reshape(-1)
    n = fe.numel()
    max_abs = max_rel = 0.0
    bad = 0
    e_any = x_any = False
    floor = max(tol.atol, 1e-30)
    for s in range(0, n, CHUNK_ELEMENTS):
        a = fe[s:s + CHUNK_ELEMENTS].to(torch.float32)
        b = fx[s:s + CHUNK_ELEMENTS].to(torch.float32)
        e_any = e_any or bool(a.any())
        x_any = x_any or bool(b.any())
        d = (a - b).abs_()
        d = torch.where(torch.isnan(d), torch.full_like(d, math.inf), d)
        bound = b.abs().mul_(tol.rtol).add_(tol.atol)
        bad += int((d > bound).sum())
        max_abs = max(max_abs, float(d.max()))
        max_rel = max(max_rel, float((d / b.abs().clamp_min_(floor)).max()))
    diff.max_abs, diff.max_rel = max_abs, max_rel
    diff.mismatched_fraction = bad / n if n else 0.0
    diff.engine_zero, diff.expected_zero = not e_any, not x_any
    return diff


# --- the engine under HF names -----------------------------------------------------------


class EngineView:
    """The engine's tensors under HF names; SGLang's fused qkv_proj / gate_up_proj split into parts."""

    def __init__(self, reader: WeightsReader, dims: ModelDims | None) -> None:
        self.reader = reader
        self.parts: dict[str, tuple[str, int, int] | None] = {}  # hf name -> (engine name, row, rows)
        self.buffers: list[str] = []
        for info in reader.listing():
            if BUFFER.search(info.name):
                self.buffers.append(info.name)
                continue
            if dims is not None or "gate_up_proj" in info.name:
                try:
                    pieces = split_sglang(info.name, torch.empty(info.shape, dtype=info.dtype, device="meta"),
                                          dims or _HALVES)
                except LayoutError:
                    pieces = [(info.name, torch.empty(0))]
            else:
                pieces = [(info.name, torch.empty(0))]
            if len(pieces) == 1:
                self.parts[info.name] = None
                continue
            row = 0
            for hf, view in pieces:
                self.parts[hf] = (info.name, row, view.shape[0])
                row += view.shape[0]

    def __contains__(self, name: str) -> bool:
        return name in self.parts

    def names(self) -> list[str]:
        return list(self.parts)

    def _engine_name(self, name: str) -> str:
        p = self.parts[name]
        return name if p is None else p[0]

    def prefetch(self, name: str) -> None:
        if name in self.parts:
            self.reader.prefetch(self._engine_name(name))

    def get(self, name: str) -> torch.Tensor:
        p = self.parts[name]
        if p is None:
            return self.reader.get(name)
        return self.reader.get(p[0]).narrow(0, p[1], p[2])

    def get_buffer(self, name: str) -> torch.Tensor:
        return self.reader.get(name)

    def release(self, t: torch.Tensor) -> None:
        self.reader.release(t)


_HALVES = ModelDims(hidden_size=1, num_attention_heads=1, num_query_groups=1, head_dim=1)


# --- the comparison ------------------------------------------------------------------------


@dataclass
class WeightsComparison:
    outcome: str
    summary: str
    evidence: dict[str, Any]
    diffs: dict[str, TensorDiff] = field(default_factory=dict, repr=False)


@dataclass
class _State:
    expected_fp: dict[str, Fingerprint] = field(default_factory=dict)
    engine_fp: dict[str, Fingerprint] = field(default_factory=dict)
    diffs: dict[str, TensorDiff] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    unconverted: list[str] = field(default_factory=list)
    layout_errors: list[str] = field(default_factory=list)


def _plan(checkpoint: WeightsReader, converter: MegatronToHF | None) -> list[list[str]]:
    """The HF names each checkpoint tensor becomes, in streaming order (for read-ahead)."""
    plan = []
    for info in checkpoint.listing():
        if converter is None:
            plan.append([info.name])
            continue
        try:
            plan.append(converter.hf_names(info.name))
        except UnmappedParameter:
            plan.append([])
    return plan


def compare_weights(
    checkpoint: WeightsReader,
    engine: WeightsReader,
    *,
    dims: ModelDims | None,
    family: Family | None = None,
    baseline: WeightsReader | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    max_report: int = 10,
    sample_size: int = 256,
) -> WeightsComparison:
    """Compare a trainer checkpoint with an engine's weights (and optionally the baseline)."""
    t0 = time.perf_counter()
    converter = None
    if checkpoint.naming == "megatron":
        if dims is None or family is None:
            raise BadInput(f"{checkpoint.path}: converting Megatron weights needs the model's dims (an HF "
                           "config.json or the run's Megatron arguments)")
        converter = MegatronToHF(family, dims)
    view = EngineView(engine, dims)
    plan = _plan(checkpoint, converter)
    produced = {n for names in plan for n in names}
    tie = "lm_head.weight" in view and "lm_head.weight" not in produced and (dims is None or dims.tie_word_embeddings)
    st = _State()

    for i, (name, tensor) in enumerate(checkpoint.tensors()):
        for nxt in plan[i + 1] if i + 1 < len(plan) else ():
            view.prefetch(nxt)
        try:
            outs = converter.convert(name, tensor) if converter else [(name, tensor)]
        except UnmappedParameter:
            st.unconverted.append(name)
            continue
        except LayoutError as exc:
            st.layout_errors.append(str(exc))
            continue
        if tie and any(n == "model.embed_tokens.weight" for n, _ in outs):
            outs = outs + [("lm_head.weight", dict(outs)["model.embed_tokens.weight"])]
        for hf, expected in outs:
            _compare_one(st, view, hf, expected, rtol, atol, sample_size)
        del outs, tensor

    if not st.diffs:
        raise Unavailable(
            "engine_weights",
            f"no tensor of the checkpoint could be compared with the engine's: {len(st.missing)} names absent from "
            f"the engine dump, {len(st.unconverted)} checkpoint names without a conversion rule"
            + (f" (e.g. {st.unconverted[0]})" if st.unconverted else "")
            + (f"; {st.layout_errors[0]}" if st.layout_errors else ""),
            "check that the engine dump and the checkpoint are the same model; add rules to triage/weights/families.yaml",
        )
    return _explain(st, checkpoint, view, engine, baseline, dims, rtol, atol, max_report, sample_size, t0)


def _compare_one(st: _State, view: EngineView, hf: str, expected: torch.Tensor, rtol: float | None,
                 atol: float | None, k: int) -> None:
    st.expected_fp[hf] = fingerprint(expected, k)
    if hf not in view:
        st.missing.append(hf)
        return
    e = view.get(hf)
    st.engine_fp[hf] = fingerprint(e, k)
    tol = Tolerance.for_dtypes(e.dtype, expected.dtype, rtol, atol)
    st.diffs[hf] = compare_tensors(hf, e, expected, tol)
    view.release(e)
    del e


def _relocations(st: _State, suspects: Iterable[str], rtol: float | None, atol: float | None) -> dict[str, str]:
    """Engine name -> the other checkpoint name whose values it holds."""
    groups = _groups(st.expected_fp)
    found = {}
    for n in suspects:
        fp = st.engine_fp.get(n)
        if fp is None:
            continue
        hit = best_content_match(fp, groups, exclude=n, rtol=rtol, atol=atol)
        if hit is not None:
            found[n] = hit[0]
    return found


def _shift(relocated: dict[str, str]) -> tuple[int, dict[str, str]] | None:
    """The layer offset most relocations share (same parameter, other layer), if any."""
    offsets: Counter[int] = Counter()
    for n, m in relocated.items():
        ln, lm = layer_of(n), layer_of(m)
        if ln is not None and lm is not None and ln != lm and layer_suffix(n) == layer_suffix(m):
            offsets[lm - ln] += 1
    if not offsets:
        return None
    d, count = offsets.most_common(1)[0]
    if count < MIN_SHIFTED_TENSORS:
        return None
    members = {n: m for n, m in relocated.items()
               if layer_of(n) is not None and layer_of(m) == layer_of(n) + d and layer_suffix(n) == layer_suffix(m)}
    return d, members


def _fingerprint_extras(st: _State, view: EngineView, k: int) -> list[str]:
    """Engine tensors the checkpoint does not produce: fingerprinted, they may hold a relocated value."""
    extra = [n for n in view.names() if n not in st.expected_fp]
    for n in extra:
        e = view.get(n)
        st.engine_fp[n] = fingerprint(e, k)
        view.release(e)
        del e
    return extra


def _stale(st: _State, view: EngineView, baseline: WeightsReader, skip: set[str], rtol: float | None,
           atol: float | None) -> tuple[list[str], int]:
    """Engine tensors equal to the baseline (the initial weights) rather than the trained ones.

    Bit-equal to the baseline is stale even when within tolerance of the trained value
    (a small update that never arrived); otherwise the engine must be within tolerance
    of the baseline and nearer to it than to the checkpoint.
    """
    stale, checked = [], 0
    base_names = set(baseline.names())
    for n, d in st.diffs.items():
        if d.exact or n in skip or n not in base_names or d.shape_mismatch:
            continue
        e, b = view.get(n), baseline.get(n)
        db = compare_tensors(n, e, b, Tolerance.for_dtypes(e.dtype, b.dtype, rtol, atol))
        checked += 1
        view.release(e)
        baseline.release(b)
        del e, b
        if db.exact or (not d.within_tolerance and db.within_tolerance and db.max_abs < d.max_abs):
            stale.append(n)
    return stale, checked


@dataclass
class _Findings:
    extra: list[str]
    shift: tuple[int, dict[str, str]] | None
    misnamed: dict[str, str]
    stale: list[str]
    baseline_checked: int
    zeroed: list[str]
    mismatched: list[TensorDiff]
    buffers: list[dict[str, Any]]
    unchecked_buffers: list[str]

    @property
    def shifted(self) -> dict[str, str]:
        return self.shift[1] if self.shift else {}

    @property
    def bad_buffers(self) -> list[dict[str, Any]]:
        return [b for b in self.buffers if not b["equal"]]


def _explain(st: _State, checkpoint: WeightsReader, view: EngineView, engine: WeightsReader,
             baseline: WeightsReader | None, dims: ModelDims | None, rtol: float | None, atol: float | None,
             max_report: int, k: int, t0: float) -> WeightsComparison:
    extra = _fingerprint_extras(st, view, k)
    off = {n for n, d in st.diffs.items() if not d.within_tolerance}
    relocated = _relocations(st, sorted(off) + extra, rtol, atol)
    shift = _shift(relocated)
    misnamed = {n: m for n, m in relocated.items() if n not in (shift[1] if shift else {})}
    stale, checked = _stale(st, view, baseline, set(relocated), rtol, atol) if baseline else ([], 0)
    zeroed = [n for n in sorted(off) if st.diffs[n].engine_zero and not st.diffs[n].expected_zero
              and n not in relocated and n not in stale]
    explained = set(relocated) | set(stale) | set(zeroed)
    mismatched = sorted((st.diffs[n] for n in off if n not in explained),
                        key=lambda d: (d.shape_mismatch, d.mismatched_fraction, d.max_rel), reverse=True)
    buffers, unchecked = _check_buffers(view, dims, rtol, atol)
    f = _Findings(extra, shift, misnamed, stale, checked, zeroed, mismatched, buffers, unchecked)

    present = {
        "shifted_layers": bool(f.shifted),
        "misnamed": bool(f.misnamed),
        "stale_or_missing": bool(f.stale or st.missing),
        "zeroed": bool(f.zeroed),
        "value_mismatch": bool(f.mismatched),
        "buffers_differ": bool(f.bad_buffers),
        "match": True,
    }
    outcome = next(o for o in PRIORITY if present[o])
    ev = _evidence(st, f, relocated, checkpoint, engine, baseline, rtol, atol, max_report, t0)
    summary = _summary(outcome, ev, st, f, dims, baseline)
    if not ev["coverage_complete"]:
        skipped = len(st.unconverted) + len(st.layout_errors)
        first = (st.unconverted or st.layout_errors)[0]
        summary += f"; {skipped} checkpoint tensors were not compared (e.g. {first})"
    return WeightsComparison(outcome, summary, ev, st.diffs)


def _evidence(st: _State, f: _Findings, relocated: dict[str, str], checkpoint: WeightsReader,
              engine: WeightsReader, baseline: WeightsReader | None, rtol: float | None, atol: float | None,
              max_report: int, t0: float) -> dict[str, Any]:
    """The deciding numbers: counts of every category, the offending tensors, bytes and seconds."""
    seconds = time.perf_counter() - t0
    bytes_read = checkpoint.bytes_read + engine.bytes_read + (baseline.bytes_read if baseline else 0)
    near = [d for d in st.diffs.values() if d.within_tolerance and not d.exact]
    worst_near = max(near, key=lambda d: d.max_rel, default=None)
    ev: dict[str, Any] = {
        "checkpoint": checkpoint.describe() | {"tracker": checkpoint.tracker_used},
        "engine": engine.describe(),
        "baseline": str(baseline.path) if baseline else None,
        "tensors_compared": len(st.diffs),
        "tensors_exact": sum(1 for d in st.diffs.values() if d.exact),
        "tensors_within_tolerance": len(near),
        "worst_within_tolerance": worst_near.report() if worst_near else None,
        "counts": {"shifted": len(f.shifted), "misnamed": len(f.misnamed), "stale": len(f.stale),
                   "missing": len(st.missing), "zeroed": len(f.zeroed), "mismatched": len(f.mismatched),
                   "buffers_checked": len(f.buffers), "buffers_differ": len(f.bad_buffers)},
        "bytes_read": bytes_read,
        "seconds": round(seconds, 3),
        "mb_per_s": round(bytes_read / 1e6 / seconds, 1) if seconds > 0 else None,
        "tolerance": {"rtol": rtol if rtol is not None else "by dtype (2 eps of the coarser)",
                      "atol": atol if atol is not None else 1e-6},
        "baseline_checked": f.baseline_checked,
        "coverage_complete": not (st.unconverted or st.layout_errors),
    }
    if st.unconverted:
        ev["unconverted"] = st.unconverted[:max_report]
    if st.layout_errors:
        ev["layout_errors"] = st.layout_errors[:max_report]
    if f.extra:
        ev["engine_only"] = [n for n in f.extra if n not in relocated][:max_report]
    if f.unchecked_buffers:
        ev["buffers_unchecked"] = f.unchecked_buffers[:max_report]
    if f.shift:
        d = f.shift[0]
        eng_layers = sorted({x for n in f.shifted if (x := layer_of(n)) is not None})
        ev.update(offset=d, engine_layers=eng_layers, checkpoint_layers=[x + d for x in eng_layers],
                  stale_layers=sorted({x for n in f.stale if (x := layer_of(n)) is not None}))
    if f.misnamed:
        ev["pairs"] = [{"engine": n, "holds": m} for n, m in sorted(f.misnamed.items())][:max_report]
    if f.stale or st.missing:
        ev["stale"] = f.stale[:max_report]
        ev["missing"] = st.missing[:max_report]
    if f.zeroed:
        ev["zeroed"] = f.zeroed[:max_report]
    if f.mismatched:
        ev["worst"] = [d.report() for d in f.mismatched[:max_report]]
    if f.buffers:
        shown = f.bad_buffers or f.buffers
        ev["buffers"] = [{k: v for k, v in b.items() if k != "equal"} for b in shown][:max_report]
    return ev


def _check_buffers(view: EngineView, dims: ModelDims | None, rtol: float | None,
                   atol: float | None) -> tuple[list[dict[str, Any]], list[str]]:
    """Rotary buffers in the engine dump against what rope_theta and head_dim imply."""
    results, unchecked = [], []
    inv = expected_inv_freq(dims) if dims is not None else None
    for name in view.buffers:
        if inv is None or not (name.endswith("inv_freq") or name.endswith("cos_sin_cache")):
            unchecked.append(name)
            continue
        got = view.get_buffer(name)
        want = inv if name.endswith("inv_freq") else (
            expected_cos_sin_cache(inv, got.shape[0]) if got.dim() == 2 else None)
        if want is None:
            unchecked.append(name)
            continue
        d = compare_tensors(name, got, want, Tolerance.for_dtypes(got.dtype, torch.float32, rtol, atol))
        results.append({"name": name, "equal": d.within_tolerance, **d.report(),
                        "engine_head": [_num(round(float(x), 6)) for x in got.reshape(-1)[:4]],
                        "expected_head": [_num(round(float(x), 6)) for x in want.reshape(-1)[:4]]})
    return results, unchecked


def _layers_text(layers: list[int]) -> str:
    """`layer 3`, `layers 0-1`, `layers 0, 2, 5`."""
    if len(layers) == 1:
        return f"layer {layers[0]}"
    if layers == list(range(layers[0], layers[-1] + 1)):
        return f"layers {layers[0]}-{layers[-1]}"
    return "layers " + ", ".join(map(str, layers))


def _summary(outcome: str, ev: dict[str, Any], st: _State, f: _Findings, dims: ModelDims | None,
             baseline: WeightsReader | None) -> str:
    n = ev["tensors_compared"]
    if outcome == "shifted_layers":
        eng, ck = ev["engine_layers"], ev["checkpoint_layers"]
        d = ev["offset"]
        return (f"engine {_layers_text(eng)} {'holds' if len(eng) == 1 else 'hold'} checkpoint {_layers_text(ck)}: "
                f"a fixed shift of {d} layer{'s' if abs(d) != 1 else ''} across {len(f.shifted)} tensors, as when a "
                "pipeline stage's layer offset is not added to its local layer ids")
    if outcome == "misnamed":
        n0, m0 = next(iter(sorted(f.misnamed.items())))
        return f"{len(f.misnamed)} engine tensors hold values the checkpoint has under another name, e.g. {n0} holds {m0}"
    if outcome == "stale_or_missing":
        parts = []
        if f.stale:
            parts.append(f"{len(f.stale)} engine tensors still equal the initial weights in "
                         f"{baseline.path if baseline else '?'}, not the trained ones (e.g. {f.stale[0]})")
        if st.missing:
            parts.append(f"{len(st.missing)} checkpoint tensors are absent from the engine (e.g. {st.missing[0]})")
        return "; ".join(parts)
    if outcome == "zeroed":
        return f"{len(f.zeroed)} engine tensors are all zero while the checkpoint's are not, e.g. {f.zeroed[0]}"
    if outcome == "value_mismatch":
        w = f.mismatched[0]
        if w.shape_mismatch:
            return (f"{len(f.mismatched)} of {n} engine tensors differ from the checkpoint; {w.name} has shape "
                    f"{list(w.engine_shape)}, the checkpoint converts to {list(w.shape)}")
        base = "" if baseline else " (no baseline weights to tell stale tensors apart)"
        return (f"{len(f.mismatched)} of {n} engine tensors differ from the checkpoint beyond tolerance; worst "
                f"{w.name}: max abs diff {w.max_abs:.3g}, max rel diff {w.max_rel:.3g}, "
                f"{w.mismatched_fraction:.1%} of elements{base}")
    if outcome == "buffers_differ":
        b = f.bad_buffers[0]
        how = f"rope_theta={dims.rope_theta:g}, head_dim={dims.head_dim}" if dims else "the config"
        return (f"all {n} parameters match, but buffer {b['name']} differs from what {how} imply "
                f"(max abs diff {b.get('max_abs')})")
    return (f"all {n} engine tensors match the checkpoint ({ev['tensors_exact']} bit-equal, "
            f"{ev['tensors_within_tolerance']} within tolerance)")
