"""Find where a replayed training step first goes non-finite or leaves its dtype's safe range.

The axolotl guide's first NaN step is `torch.autograd.set_detect_anomaly(True)`; it names
the backward function that produced a NaN, not the module, and says nothing about the
forward pass or about values that are still finite but about to overflow (fp16 tops out
at 65504). `TensorWatch` looks at every module's output in the forward pass and at every
gradient in the backward pass, and keeps the first one that is NaN / Inf or whose
magnitude is beyond `safe_fraction` of the dtype's largest finite value, with what the
module read: the absolute min / max of its inputs and of its weights.

Frameworks often compute inside one module with functional calls (`F.linear(x, self.w)`
rather than a child `nn.Linear`), so module hooks alone would blame the parent. The watch
therefore also sees every torch function called during the forward pass (a
`TorchFunctionMode`) and names the parameter an overflowing op read: the overflow of
`F.linear(h, self.linear_fc1.weight.to(fp16))` inside `MLP.forward` is reported as
`decoder.layers.1.mlp.linear_fc1` (op `linear`), not as `decoder.layers.1.mlp`.

Rows of an output or gradient whose leading dimension is the micro-batch are mapped to
the samples of that micro-batch (`TensorWatch.samples`), so an anomaly says which
samples carry it.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

# Functions that only move or select values of their inputs (checked already): not inspected.
_MOVING = frozenset({
    "view", "reshape", "view_as", "transpose", "permute", "__getitem__", "chunk", "split", "narrow", "contiguous",
    "expand", "expand_as", "unsqueeze", "squeeze", "flatten", "unflatten", "t", "detach", "clone", "repeat_interleave",
    "repeat", "cat", "stack", "select", "index_select", "gather", "masked_fill", "__setitem__", "size", "dim",
})
_ARITHMETIC = frozenset({
    "__mul__", "__rmul__", "__add__", "__radd__", "__sub__", "__rsub__", "__matmul__", "__rmatmul__",
    "__truediv__", "__rtruediv__", "__neg__", "__pow__", "__rpow__", "__iadd__", "__imul__",
})
# Functions that return a view or a cast of their first argument: a parameter passed
# through one of these is still "that parameter" when a later op reads it.
_DERIVING = frozenset({
    "to", "float", "half", "bfloat16", "double", "type", "type_as", "contiguous", "t", "detach", "clone",
    "view", "reshape", "view_as", "transpose", "permute", "__getitem__", "chunk", "split", "narrow",
})


def _flatten(obj: Any, depth: int = 0) -> Iterator[torch.Tensor]:
    """Tensors inside a module's output: a tensor, a tuple / list, a dict or an HF ModelOutput."""
    if depth > 3:
        return
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (tuple, list)):
        for item in obj:
            yield from _flatten(item, depth + 1)
    elif isinstance(obj, dict):
        for item in obj.values():
            yield from _flatten(item, depth + 1)


def _floats(obj: Any) -> list[torch.Tensor]:
    return [t for t in _flatten(obj) if t.is_floating_point() and t.numel() > 0]


def safe_limit(dtype: torch.dtype, safe_fraction: float) -> float:
    """The largest magnitude considered safe for a dtype: a fraction of its largest finite value."""
    return float(torch.finfo(dtype).max) * safe_fraction


def abs_range(tensors: Sequence[torch.Tensor]) -> tuple[float, float] | None:
    """(min |x|, max |x|) over the finite values of some tensors; None if there are none."""
    lo, hi = math.inf, -math.inf
    for t in tensors:
        with torch.no_grad():
            a = t.detach().abs()
            finite = a[torch.isfinite(a)]
            if finite.numel():
                lo = min(lo, float(finite.min()))
                hi = max(hi, float(finite.max()))
    return (lo, hi) if hi >= 0 else None


@dataclass(frozen=True)
class Verdict:
    """What is wrong with one tensor: `nonfinite` (NaN / Inf) or `beyond_range`."""

    kind: str
    nonfinite: int
    finite_abs_max: float
    rows: tuple[int, ...]  # indices along dim 0 that hold the bad values


def inspect(t: torch.Tensor, limit: float) -> Verdict | None:
    """None when every value of `t` is finite and within `limit`."""
    with torch.no_grad():
        x = t.detach()
        top = float(torch.linalg.vector_norm(x, math.inf))  # max |x|, NaN if any NaN: one pass, no copy
        if top <= limit:
            return None
        finite = torch.isfinite(x)
        n_bad = int((~finite).sum())
        a = x.abs().masked_fill(~finite, 0)
        top = float(a.max()) if a.numel() else 0.0
        if n_bad == 0 and top <= limit:
            return None
        bad = (~finite) | (a > limit)
        rows: tuple[int, ...] = ()
        if x.dim() >= 1:
            per_row = bad.reshape(x.shape[0], -1).any(dim=1) if x.dim() > 1 else bad
            rows = tuple(int(i) for i in per_row.nonzero().flatten().tolist()[:64])
        return Verdict("nonfinite" if n_bad else "beyond_range", n_bad, top, rows)


@dataclass(frozen=True)
class Anomaly:
    """The first place a replayed step went wrong."""

    module: str  # dotted name of the module (or of the parameter's owner for an op that read one)
    op: str  # the module's class, or the torch function for an op inside a module
    phase: str  # "forward" | "backward"
    kind: str  # "nonfinite" | "beyond_range"
    dtype: str
    step: int | None
    sample_indices: tuple[int, ...]  # samples of the micro-batch whose rows hold the bad values
    nonfinite_count: int
    finite_abs_max: float
    safe_limit: float
    module_type: str = ""  # the innermost module's class when `op` is a function
    weights: tuple[str, ...] = ()  # parameters the module / op read
    input_abs_min: float | None = None
    input_abs_max: float | None = None
    weight_abs_min: float | None = None
    weight_abs_max: float | None = None
    micro_batch: tuple[int, ...] = field(default=(), compare=False)

    def describe(self) -> str:
        what = "NaN/Inf" if self.kind == "nonfinite" else f"values beyond {self.safe_limit:.4g}"
        where = f"{self.module} ({self.op})" if self.module else self.op
        grad = "gradient of " if self.phase == "backward" else "output of "
        return f"{what} first in the {grad}{where}, {self.dtype}"

    def evidence(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("micro_batch", None)
        out["sample_indices"] = list(self.sample_indices)
        out["weights"] = list(self.weights)
        return {k: v for k, v in out.items() if v not in (None, "", [])}


class _OpWatch(TorchFunctionMode):
    """Sees every torch function of the forward pass; reports the first bad float output."""

    def __init__(self, watch: TensorWatch) -> None:
        super().__init__()
        self.watch = watch
        # id(tensor) -> (weakref, parameter name) for parameters and their casts / views
        self.derived: dict[int, tuple[weakref.ref, str]] = {}

    def param_name(self, t: Any) -> str | None:
        if not isinstance(t, torch.Tensor):
            return None
        hit = self.derived.get(id(t))
        if hit is not None and hit[0]() is t:
            return hit[1]
        return self.watch.param_names.get(id(t))

    def _remember(self, out: Any, name: str) -> None:
        for t in _flatten(out):
            try:
                self.derived[id(t)] = (weakref.ref(t), name)
            except TypeError:
                pass
        if len(self.derived) > 100_000:  # stale ids of freed casts
            self.derived = {k: v for k, v in self.derived.items() if v[0]() is not None}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        w = self.watch
        # only ops run by the model's modules, never inside a backward pass
        if w.busy or not w.active or not w.in_module or torch._C._current_graph_task_id() != -1:
            return out
        fname = getattr(func, "__name__", str(func))
        if fname.startswith("__") and fname not in _ARITHMETIC:  # property reads (.data, .T), comparisons, ...
            return out
        w.busy = True
        try:
            first = self.param_name(args[0]) if args else None
            if first is not None and fname in _DERIVING:
                self._remember(out, first)
                return out
            if w.found_forward is None and fname not in _MOVING:
                floats = _floats(out)
                for t in floats:
                    verdict = inspect(t, safe_limit(t.dtype, w.safe_fraction))
                    if verdict is not None:
                        params = [n for n in (self.param_name(a) for a in _flatten(list(args) + list(kwargs.values())))
                                  if n is not None]
                        inputs = [a for a in _flatten(list(args) + list(kwargs.values()))
                                  if a.is_floating_point() and self.param_name(a) is None]
                        w.record_op(fname, t, verdict, params, inputs)
                        break
        finally:
            w.busy = False
        return out


class TensorWatch:
    """Hooks on every module (and parameter) of `model`; `found` is the first anomaly.

    Use as a context manager around a replay; set `step` and `samples` (the global sample
    indices of the micro-batch, in row order) before each micro-batch.
    """

    def __init__(self, model: nn.Module, safe_fraction: float = 0.5, trace_ops: bool = True) -> None:
        self.model = model
        self.safe_fraction = safe_fraction
        self.trace_ops = trace_ops
        self.step: int | None = None
        self.samples: list[int] = []
        self.found_forward: Anomaly | None = None
        self.found_backward: Anomaly | None = None
        self.busy = False
        self.active = False
        self._handles: list[Any] = []
        self._stack: list[tuple[str, nn.Module]] = []
        self._mode: _OpWatch | None = None
        self.param_names: dict[int, str] = {id(p): n for n, p in model.named_parameters()}
        self._owner: dict[str, nn.Module] = dict(model.named_modules())

    # -- results ------------------------------------------------------------------------------
    @property
    def found(self) -> Anomaly | None:
        """The first anomaly: the forward one if any (a bad forward value poisons the backward)."""
        return self.found_forward or self.found_backward

    def reset(self) -> None:
        self.found_forward = None
        self.found_backward = None

    # -- installation ---------------------------------------------------------------------------
    def __enter__(self) -> TensorWatch:
        for name, module in self.model.named_modules():
            self._handles.append(module.register_forward_pre_hook(self._pre_hook(name)))
            self._handles.append(module.register_forward_hook(self._post_hook(name)))
        for name, p in self.model.named_parameters():
            if p.requires_grad:
                self._handles.append(p.register_hook(self._param_grad_hook(name)))
        if self.trace_ops:
            self._mode = _OpWatch(self)
            self._mode.__enter__()
        self.active = True
        return self

    def __exit__(self, *exc: Any) -> None:
        self.active = False
        if self._mode is not None:
            self._mode.__exit__(*exc)
            self._mode = None
        for h in self._handles:
            h.remove()
        self._handles.clear()
        self._stack.clear()

    @property
    def in_module(self) -> bool:
        return bool(self._stack)

    # -- helpers --------------------------------------------------------------------------------
    def _rows_to_samples(self, t: torch.Tensor, rows: tuple[int, ...]) -> tuple[int, ...]:
        if self.samples and t.dim() >= 1 and t.shape[0] == len(self.samples):
            return tuple(self.samples[r] for r in rows)
        if len(self.samples) == 1:
            return (self.samples[0],)
        return ()

    def _weights_of(self, names: Sequence[str]) -> tuple[float | None, float | None]:
        params = dict(self.model.named_parameters())
        rng = abs_range([params[n] for n in names if n in params])
        return rng if rng is not None else (None, None)

    def _anomaly(self, module: str, op: str, phase: str, t: torch.Tensor, verdict: Verdict, module_type: str,
                 weights: Sequence[str], inputs: Sequence[torch.Tensor]) -> Anomaly:
        in_rng = abs_range(list(inputs)) if inputs else None
        w_lo, w_hi = self._weights_of(weights)
        return Anomaly(
            module=module, op=op, phase=phase, kind=verdict.kind, dtype=str(t.dtype).replace("torch.", ""),
            step=self.step, sample_indices=self._rows_to_samples(t, verdict.rows),
            nonfinite_count=verdict.nonfinite, finite_abs_max=verdict.finite_abs_max,
            safe_limit=safe_limit(t.dtype, self.safe_fraction), module_type=module_type, weights=tuple(weights),
            input_abs_min=in_rng[0] if in_rng else None, input_abs_max=in_rng[1] if in_rng else None,
            weight_abs_min=w_lo, weight_abs_max=w_hi, micro_batch=tuple(self.samples),
        )

    def record_op(self, fname: str, t: torch.Tensor, verdict: Verdict, params: list[str],
                  inputs: list[torch.Tensor]) -> None:
        """An op inside the current module produced a bad value: name it after the parameter it read."""
        inner_name, inner = self._stack[-1] if self._stack else ("", self.model)
        if params:
            owner = params[0].rsplit(".", 1)[0] if "." in params[0] else ""
            module = owner
        else:
            module = inner_name
        self.found_forward = self._anomaly(module, fname, "forward", t, verdict, type(inner).__name__,
                                           params, inputs)

    def _pre_hook(self, name: str):
        def hook(module: nn.Module, args: Any) -> None:
            self._stack.append((name, module))
        return hook

    def _post_hook(self, name: str):
        def hook(module: nn.Module, args: Any, output: Any) -> None:
            if self._stack and self._stack[-1][1] is module:
                self._stack.pop()
            if self.busy or not self.active:
                return
            self.busy = True
            try:
                outputs = _floats(output)
                if self.found_forward is None:
                    for t in outputs:
                        verdict = inspect(t, safe_limit(t.dtype, self.safe_fraction))
                        if verdict is not None:
                            weights = [f"{name}.{n}" if name else n for n, _ in module.named_parameters(recurse=False)]
                            self.found_forward = self._anomaly(name, type(module).__name__, "forward", t, verdict,
                                                               type(module).__name__, weights, _floats(args))
                            break
                for t in outputs:
                    if t.requires_grad:
                        t.register_hook(self._grad_hook(name, module))
            finally:
                self.busy = False
        return hook

    def _grad_hook(self, name: str, module: nn.Module):
        def hook(grad: torch.Tensor) -> None:
            if self.found_backward is not None or self.busy or not grad.is_floating_point():
                return
            self.busy = True
            try:
                verdict = inspect(grad, safe_limit(grad.dtype, self.safe_fraction))
                if verdict is not None:
                    weights = [f"{name}.{n}" if name else n for n, _ in module.named_parameters(recurse=False)]
                    self.found_backward = self._anomaly(name, type(module).__name__, "backward", grad, verdict,
                                                        type(module).__name__, weights, [grad])
            finally:
                self.busy = False
        return hook

    def _param_grad_hook(self, pname: str):
        def hook(grad: torch.Tensor) -> None:
            if self.found_backward is not None or self.busy:
                return
            self.busy = True
            try:
                verdict = inspect(grad, safe_limit(grad.dtype, self.safe_fraction))
                if verdict is not None:
                    owner = pname.rsplit(".", 1)[0] if "." in pname else ""
                    module = self._owner.get(owner, self.model)
                    a = self._anomaly(owner, f"grad of {pname.rsplit('.', 1)[-1]}", "backward", grad, verdict,
                                      type(module).__name__, [pname], [grad])
                    # a parameter's gradient has no batch rows
                    self.found_backward = Anomaly(**{**asdict(a), "sample_indices": ()})
            finally:
                self.busy = False
        return hook
