"""Replay the same step on one device and in the run's parallel layout: a difference beyond round-off is a layout bug.

The guides: "reduce to single GPU, single batch: eliminate distributed training
variables" (axolotl), and slime's `--load-debug-rollout-data` exists so that "the input
for the training part is fixed ... for example, by switching between different
parallelization strategies". This probe does exactly that with the run's own job:

1. reference: the step replayed at world size 1 (tp = pp = cp = ep = 1), twice, the
   second time in another reduction order (`--micro-batch-size` changed). Token ids
   cannot be perturbed by a tiny amount, so instead of TTrace's input perturbation the
   round-off tolerance of each compared quantity is estimated from these two
   references: `safety` times their difference, and at least `eps_factor` x the
   dtype's machine epsilon x the quantity's magnitude;
2. the step replayed in the run's layout (TP / PP as real multi-process jobs);
3. compared: per-token log-probs and reference log-probs (from the replays' train
   dumps), the loss terms and the gradient norm (their `step` lines);
4. if the layout differs beyond tolerance, bisect over the parallel dimensions that are
   > 1 (replaying with half of them enabled at a time) to name the one that breaks.

Outcomes: `parallel_differs` (with the dimension, the differences and tolerances) or
`consistent`; `unavailable` when the run is not parallel or its job cannot be
relaunched here (the evidence then carries the commands to run by hand).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from pydantic import BaseModel, ConfigDict

from triage.errors import TriageError, Unavailable
from triage.finding import Observation
from triage.probe import Cost, Probe
from triage.replay import launch as launching
from triage.replay.logged import dumped_rollouts
from triage.replay.step import max_abs_diff

if TYPE_CHECKING:
    from triage.run.run import Run

STEP_QUANTITIES = ("train/loss", "train/pg_loss", "train/grad_norm", "train/kl_loss", "train/entropy_loss")


class ReductionParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    rollout_id: int | None = None  # default: the first rollout the run dumped
    timeout_s: float = 300.0  # per launched replay
    safety: float = 10.0  # tolerance = safety x the difference between the two references ...
    eps_factor: float = 32.0  # ... and at least eps_factor x dtype epsilon x magnitude


Quantities = dict[str, Any]  # name -> float or list of per-sample tensors


def quantities(r: launching.LaunchResult) -> Quantities:
    q: Quantities = {}
    if r.log_probs is not None:
        q["log_probs"] = r.log_probs
    if r.ref_log_probs is not None:
        q["ref_log_probs"] = r.ref_log_probs
    step = r.first_step or {}
    for key in STEP_QUANTITIES:
        if key in step:
            q[key] = step[key]
    return q


def difference(a: Any, b: Any) -> float:
    if isinstance(a, list):
        return max_abs_diff(a, b) if len(a) == len(b) else math.inf
    if math.isnan(a) and math.isnan(b):
        return 0.0
    d = abs(a - b)
    return d if math.isfinite(d) else math.inf


def magnitude(a: Any) -> float:
    if isinstance(a, list):
        return max((float(t.abs().max()) for t in a if t.numel() and torch.isfinite(t).all()), default=0.0)
    return abs(a) if math.isfinite(a) else 0.0


def tolerances(ref: Quantities, alt: Quantities, eps: float, p: ReductionParams) -> dict[str, float]:
    out = {}
    for name, value in ref.items():
        floor = p.eps_factor * eps * max(1.0, magnitude(value))
        spread = difference(value, alt[name]) if name in alt else 0.0
        out[name] = max(floor, p.safety * spread) if math.isfinite(spread) else floor
    return out


def compare(ref: Quantities, other: Quantities, tol: dict[str, float]) -> dict[str, dict[str, float]]:
    """Quantities of `other` beyond tolerance from the reference: name -> {diff, tolerance}."""
    out = {}
    for name, value in ref.items():
        if name not in other:
            continue
        d = difference(value, other[name])
        if not d <= tol[name]:
            out[name] = {"max_abs_diff": d, "tolerance": tol[name]}
    return out


class SingleDeviceReduction(Probe):
    """Replay the step at world size 1 and in the run's parallel layout; bisect the dimension that breaks it."""

    name = "single_device_reduction"
    outcomes = ("parallel_differs", "consistent")
    needs = ("rollout_dump",)
    cost = Cost.CPU
    Params = ReductionParams
    executes_run_code = True  # every replay is the run's own job, relaunched: only with --allow-relaunch
    how_to_get = {"rollout_dump": "rerun with `--dump-details <dir>`: the replays train on the saved rollout"}

    def examine(self, run: Run) -> Observation:
        p: ReductionParams = self.params  # type: ignore[assignment]
        layout = launching.parallel_layout(run)
        dims = [d for d, size in layout.items() if size > 1]
        if not dims:
            raise Unavailable("parallel layout", "the run is not parallel (tp = pp = cp = ep = 1): there is no "
                              "layout to reduce to one device", None)
        dumps = dumped_rollouts(run)
        first = min(dumps)
        rid = p.rollout_id if p.rollout_id is not None else first
        if rid not in dumps:
            raise Unavailable("rollout_dump", f"no rollout dump for rollout {rid} (dumped: {sorted(dumps)})",
                              "rerun with `--dump-details <dir>`")
        single = {d: 1 for d in layout}
        try:
            spec = launching.job_spec(run)
        except Unavailable as exc:
            commands = self._commands(run, layout, single, rid)
            raise Unavailable(exc.artifact, exc.reason, commands) from None
        from triage.replay.model import run_dtype

        dtype = run_dtype(run)
        eps = float(torch.finfo(dtype).eps)
        mbs = run.args.get("micro_batch_size")
        alt_mbs = 1 if not (isinstance(mbs, int) and mbs == 1) else 2
        reorder = {"--micro-batch-size": alt_mbs, "--use-dynamic-batch-size": None}
        runs: list[dict[str, Any]] = []
        with launching.scratch_dir("reduce") as tmp:
            def replay(tag: str, sizes: dict[str, int], extra: dict[str, Any] | None = None) -> Quantities:
                try:
                    r = launching.run_replay(run, rid, Path(tmp) / tag, spec=spec, parallel=sizes, extra=extra,
                                             timeout_s=p.timeout_s, first_rollout=first)
                except launching.LaunchFailed as exc:
                    raise TriageError(f"the {tag} replay failed: {exc}") from None
                runs.append({"replay": tag, "layout": {k: v for k, v in sizes.items() if v > 1} or "single device",
                             "wall_s": round(r.wall_s, 2), "command": r.command})
                q = quantities(r)
                if not q:
                    raise TriageError(f"the {tag} replay produced neither log-probs nor a step line: {r.command}")
                return q

            ref = replay("single", single)
            alt = replay("single-reordered", single, reorder)
            tol = tolerances(ref, alt, eps, p)
            full = replay("run-layout", dict(layout))
            beyond = compare(ref, full, tol)
            evidence: dict[str, Any] = {
                "rollout_id": rid, "layout": {d: layout[d] for d in dims}, "dtype": str(dtype).replace("torch.", ""),
                "tolerance_method": (f"two single-device replays in different reduction orders (--micro-batch-size "
                                     f"{mbs if mbs is not None else 1} and {alt_mbs}): "
                                     f"{p.safety:g} x their difference, "
                                     f"at least {p.eps_factor:g} x {str(dtype).replace('torch.', '')} eps x magnitude"),
                "tolerances": tol, "replays": runs,
            }
            gpus, nodes = run.args.get("actor_num_gpus_per_node"), run.args.get("actor_num_nodes")
            if isinstance(gpus, int):
                world = gpus * (nodes if isinstance(nodes, int) else 1)
                mp = math.prod(layout.values())
                if world > mp:
                    evidence["note"] = f"the run's data-parallel size {world // mp} is replayed as 1 in every layout"
            if not beyond:
                evidence["largest_differences"] = {n: difference(ref[n], full[n]) for n in ref if n in full}
                return self.observe(
                    "consistent",
                    f"The step replayed in the run's layout ({self._fmt(evidence['layout'])}) matches the "
                    f"single-device replay within round-off tolerance on {', '.join(sorted(ref))}.",
                    0.8, **evidence)
            culprit = self._bisect(dims, layout, single, ref, tol, replay) if len(dims) > 1 else dims
            evidence["dimension"] = culprit[0] if len(culprit) == 1 else "+".join(culprit)
            evidence["differences"] = beyond
            worst = max(beyond, key=lambda n: beyond[n]["max_abs_diff"] / max(beyond[n]["tolerance"], 1e-30))
            return self.observe(
                "parallel_differs",
                f"With {self._fmt({d: layout[d] for d in culprit})} the replayed step differs from the single-device "
                f"replay beyond round-off: {worst} by {beyond[worst]['max_abs_diff']:.3g} "
                f"(tolerance {beyond[worst]['tolerance']:.2g}).",
                0.9, **evidence)

    @staticmethod
    def _fmt(sizes: dict[str, int]) -> str:
        return ", ".join(f"{d}={s}" for d, s in sizes.items())

    def _bisect(self, dims: list[str], layout: dict[str, int], single: dict[str, int], ref: Quantities,
                tol: dict[str, float], replay) -> list[str]:
        """The smallest set of dimensions found, by halving, whose layout alone differs from the reference."""
        suspects = list(dims)
        while len(suspects) > 1:
            half = suspects[: len(suspects) // 2]
            sizes = {**single, **{d: layout[d] for d in half}}
            q = replay("bisect-" + "+".join(half), sizes)
            if compare(ref, q, tol):
                suspects = half
                continue
            rest = suspects[len(suspects) // 2:]
            if len(rest) == 1:
                return rest
            sizes = {**single, **{d: layout[d] for d in rest}}
            q = replay("bisect-" + "+".join(rest), sizes)
            if not compare(ref, q, tol):
                return suspects  # neither half alone: the dimensions break it together
            suspects = rest
        return suspects

    def _commands(self, run: Run, layout: dict[str, int], single: dict[str, int], rid: int) -> str:
        """The two replays a user would run by hand, from the run's own command line."""
        spec = launching.display_spec(run)
        one = launching.planned_command(spec, run, single, "<scratch-1>")
        par = launching.planned_command(spec, run, dict(layout), "<scratch-2>")
        return f"{one}  and  {par}"
