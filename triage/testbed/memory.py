"""A GPU memory budget the testbed enforces, failing exactly as PyTorch's CUDA allocator does.

The testbed's "GPU" has `--testbed-gpu-memory-gib` of memory. Model and optimizer
states (and, colocated, the inference engine's weights and KV cache) take a fixed
share; activations cost a fixed amount per token of a micro-batch, more for a
training step than for a forward-only log-prob pass. Scaled so that a micro-batch of
about 500 tokens fits: with `--use-dynamic-batch-size`, a `--max-tokens-per-gpu` far
above the samples' length packs too many samples together and the step runs out of
memory with `torch.OutOfMemoryError: CUDA out of memory. Tried to allocate ...`.
"""

from __future__ import annotations

import torch

GIB = 1024**3
MIB = 1024**2
STATIC_SHARE = 0.72  # weights, grads, optimizer states of the (pretend) large model
ENGINE_SHARE = 0.05  # a colocated SGLang engine's weights and KV cache after offload
TRAIN_BYTES_PER_TOKEN = 40 * MIB
FORWARD_BYTES_PER_TOKEN = 12 * MIB


def _fmt(n: float) -> str:
    if n >= GIB:
        return f"{n / GIB:.2f} GiB"
    return f"{n / MIB:.2f} MiB"


class GpuMemory:
    def __init__(self, total_gib: float, device: int = 0, colocated: bool = False, engine_pid: int = 0) -> None:
        self.total = total_gib * GIB
        self.device = device
        self.colocated = colocated
        self.engine_pid = engine_pid
        self.static = self.total * STATIC_SHARE
        self.engine = self.total * ENGINE_SHARE if colocated else 0.0
        self.peak = self.static

    def activations(self, tokens: int, training: bool) -> None:
        """Account for one micro-batch's activations; raise CUDA's OOM when they do not fit."""
        need = tokens * (TRAIN_BYTES_PER_TOKEN if training else FORWARD_BYTES_PER_TOKEN)
        free = self.total - self.static - self.engine
        if need > free:
            reserved_unallocated = 0.02 * self.total
            in_use = self.static + reserved_unallocated
            other = f"Process {self.engine_pid} has {_fmt(self.engine)} memory in use. " if self.engine else ""
            raise torch.OutOfMemoryError(
                f"CUDA out of memory. Tried to allocate {_fmt(need)}. GPU {self.device} has a total capacity of "
                f"{_fmt(self.total)} of which {_fmt(max(free - reserved_unallocated, 0))} is free. {other}"
                f"Including non-PyTorch memory, this process has {_fmt(in_use)} memory in use. Of the allocated memory "
                f"{_fmt(self.static)} is allocated by PyTorch, and {_fmt(reserved_unallocated)} is reserved by PyTorch "
                "but unallocated. If reserved but unallocated memory is large try setting "
                "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for "
                "Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
            )
        self.peak = max(self.peak, self.static + self.engine + need)
