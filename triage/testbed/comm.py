"""The job's process group: real torch.distributed gloo collectives on 127.0.0.1, or none.

With one process every call is the identity. With two (TP=2 or PP=2) the calls are
gloo's, so PyTorch's own flight recorder (TORCH_FR_BUFFER_SIZE) records them, and a
rank that skips a collective (the dist.collective_mismatch plug) leaves its peer
waiting until the process group's timeout fires.
"""

from __future__ import annotations

import os
import pickle
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from triage.testbed.parallel_state import ParallelState

SETUP_TIMEOUT_S = 300.0  # the default group: start-up, rollout hand-off, checkpoint and weight gathers


class Comm:
    """The default group carries the job's control traffic; `train_group`, with a short timeout, the
    model-parallel collectives of the training step (Megatron's TP / PP groups)."""

    def __init__(self, rank: int = 0, world_size: int = 1, skip: tuple[int, str, int] | None = None,
                 train_group: Any = None) -> None:
        self.rank = rank
        self.world_size = world_size
        self.skip = skip
        self.calls: dict[str, int] = {}
        self.train_group = train_group

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @classmethod
    def init(cls, rank: int, world_size: int, port: int, timeout_s: float,
             skip: tuple[int, str, int] | None = None) -> Comm:
        group = None
        if world_size > 1:
            dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size,
                                    timeout=timedelta(seconds=SETUP_TIMEOUT_S))
            group = dist.new_group(ranks=list(range(world_size)), timeout=timedelta(seconds=timeout_s),
                                   group_desc="MODEL_PARALLEL")
        return cls(rank, world_size, skip, group)

    def parallel_state(self, tp: int, pp: int, row_parallel_reduce: str = "sum") -> ParallelState:
        if tp * pp != self.world_size:
            raise ValueError(f"tp={tp} x pp={pp} does not match {self.world_size} processes")
        state = ParallelState(tp_size=tp, tp_rank=self.rank % tp, pp_size=pp, pp_rank=self.rank // tp,
                              row_parallel_reduce=row_parallel_reduce)
        if tp > 1:
            state.tp_group = self.train_group if tp == self.world_size else None
        if pp > 1:
            state.pp_group = self.train_group if pp == self.world_size else None
        if (tp > 1 and state.tp_group is None) or (pp > 1 and state.pp_group is None):
            raise ValueError("the testbed runs one parallel dimension at a time (TP=2 or PP=2)")
        return state

    def _skipped(self, name: str) -> bool:
        self.calls[name] = self.calls.get(name, 0) + 1
        return bool(self.skip and self.skip[0] == self.rank and self.skip[1] == name and self.skip[2] == self.calls[name])

    def all_reduce_sum(self, t: torch.Tensor, name: str = "all_reduce") -> torch.Tensor:
        if not self.distributed or self._skipped(name):
            return t
        dist.all_reduce(t, op=dist.ReduceOp.SUM, group=self.train_group)
        return t

    def broadcast_object(self, obj: Any, src: int = 0) -> Any:
        if not self.distributed:
            return obj
        box = [obj if self.rank == src else None]
        dist.broadcast_object_list(box, src=src)
        return box[0]

    def gather_object(self, obj: Any, dst: int = 0) -> list[Any] | None:
        if not self.distributed:
            return [obj]
        out = [None] * self.world_size if self.rank == dst else None
        dist.gather_object(obj, out, dst=dst)
        return out

    def all_gather(self, t: torch.Tensor) -> list[torch.Tensor]:
        if not self.distributed:
            return [t]
        parts = [torch.empty_like(t) for _ in range(self.world_size)]
        dist.all_gather(parts, t.contiguous(), group=self.train_group)
        return parts

    def send(self, t: torch.Tensor, dst: int) -> None:
        dist.send(t.contiguous(), dst=dst, group=self.train_group)

    def recv(self, shape: tuple[int, ...], dtype: torch.dtype, src: int) -> torch.Tensor:
        t = torch.empty(shape, dtype=dtype)
        dist.recv(t, src=src, group=self.train_group)
        return t

    def barrier(self) -> None:
        if self.distributed:
            dist.barrier()

    def dump_flight_recorder(self, prefix: str) -> Path | None:
        """Write PyTorch's flight-recorder dump for this rank to `<prefix><rank>` (the pickle torch writes)."""
        if not self.distributed:
            return None
        import torch._C._distributed_c10d as c10d

        path = Path(f"{prefix}{self.rank}")
        path.parent.mkdir(parents=True, exist_ok=True)
        data = c10d._dump_fr_trace()
        # Keep the dump as torch produces it; only make sure it is a pickle of plain containers.
        pickle.loads(data)
        path.write_bytes(data)
        return path

    def shutdown(self) -> None:
        if self.distributed and dist.is_initialized():
            try:
                dist.destroy_process_group()
            except Exception:  # a timed-out group may refuse a clean shutdown
                pass


def flight_recorder_enabled() -> bool:
    return int(os.environ.get("TORCH_FR_BUFFER_SIZE", "0") or 0) > 0
