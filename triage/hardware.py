"""What accelerators this process can use."""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=1)
def gpu_count() -> int:
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0
