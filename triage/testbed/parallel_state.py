"""Which slice of the model this process holds, and the tensor-parallel collectives.

Named after megatron-core's `parallel_state` / `tensor_parallel.mappings`: a column-
parallel linear copies its input to every TP rank (all-reduce of the gradient on the
way back), a row-parallel linear sums its partial outputs (all-reduce forward), the
vocab-parallel output layer gathers logits. With one process every collective is
the identity, so the same model code serves TP=1 and TP=2.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass
class ParallelState:
    tp_size: int = 1
    tp_rank: int = 0
    pp_size: int = 1
    pp_rank: int = 0
    tp_group: object = None  # a torch.distributed ProcessGroup, None when tp_size == 1
    pp_group: object = None
    # How the row-parallel partial outputs are combined: "sum" is right; the
    # parallel.sharding_bug fault sets "mean", which treats partial sums as replicas.
    row_parallel_reduce: str = "sum"

    @property
    def is_first_stage(self) -> bool:
        return self.pp_rank == 0

    @property
    def is_last_stage(self) -> bool:
        return self.pp_rank == self.pp_size - 1

    @property
    def global_rank(self) -> int:
        return self.pp_rank * self.tp_size + self.tp_rank

    def layer_range(self, num_layers: int) -> tuple[int, int]:
        """Global ids [start, end) of the layers this pipeline stage holds."""
        if num_layers % self.pp_size:
            raise ValueError(f"num_layers={num_layers} is not divisible by pipeline-model-parallel-size={self.pp_size}")
        per_stage = num_layers // self.pp_size
        return self.pp_rank * per_stage, (self.pp_rank + 1) * per_stage

    def layer_offset(self, num_layers: int) -> int:
        return self.layer_range(num_layers)[0]


SINGLE = ParallelState()


def _all_reduce(x: torch.Tensor, state: ParallelState, mode: str = "sum") -> torch.Tensor:
    if state.tp_size == 1:
        return x
    out = x.contiguous().clone()
    dist.all_reduce(out, op=dist.ReduceOp.SUM, group=state.tp_group)
    if mode == "mean":
        out = out / state.tp_size
    return out


class _CopyToTensorParallel(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, state):
        ctx.state = state
        return x

    @staticmethod
    def backward(ctx, grad):
        return _all_reduce(grad, ctx.state), None


class _ReduceFromTensorParallel(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, state, mode):
        return _all_reduce(x, state, mode)

    @staticmethod
    def backward(ctx, grad):
        return grad, None, None


class _GatherFromTensorParallel(torch.autograd.Function):
    """All-gather along the last dimension; the gradient keeps this rank's slice."""

    @staticmethod
    def forward(ctx, x, state):
        ctx.state = state
        if state.tp_size == 1:
            return x
        parts = [torch.empty_like(x) for _ in range(state.tp_size)]
        dist.all_gather(parts, x.contiguous(), group=state.tp_group)
        return torch.cat(parts, dim=-1)

    @staticmethod
    def backward(ctx, grad):
        state = ctx.state
        if state.tp_size == 1:
            return grad, None
        return grad.chunk(state.tp_size, dim=-1)[state.tp_rank].contiguous(), None


def copy_to_tensor_parallel(x: torch.Tensor, state: ParallelState) -> torch.Tensor:
    return x if state.tp_size == 1 else _CopyToTensorParallel.apply(x, state)


def reduce_from_tensor_parallel(x: torch.Tensor, state: ParallelState, mode: str | None = None) -> torch.Tensor:
    """Sum the TP partial outputs; `mode=None` uses the state's row-parallel reduction."""
    return x if state.tp_size == 1 else _ReduceFromTensorParallel.apply(x, state, mode or state.row_parallel_reduce)


def gather_from_tensor_parallel(x: torch.Tensor, state: ParallelState) -> torch.Tensor:
    return x if state.tp_size == 1 else _GatherFromTensorParallel.apply(x, state)
