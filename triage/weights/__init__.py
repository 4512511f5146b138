"""Model weights: streaming checkpoint readers, Megatron -> HF conversion, and the weights compare.

- `readers`: HF safetensors, Megatron torch_dist and legacy checkpoints, torch state dicts,
  read tensor by tensor with memory bounded by the largest tensor.
- `convert`: Megatron -> HF (and HF -> SGLang fused) names and layouts, from families.yaml.
- `compare`: a trainer checkpoint against an engine's weights, with the difference explained.
"""

from triage.weights.compare import OUTCOMES, Tolerance, WeightsComparison, compare_weights
from triage.weights.convert import MegatronToHF, ModelDims, family_for, fuse_for_sglang, hf_to_sglang
from triage.weights.readers import TensorInfo, WeightsReader, open_checkpoint, open_weights

__all__ = [
    "OUTCOMES",
    "MegatronToHF",
    "ModelDims",
    "TensorInfo",
    "Tolerance",
    "WeightsComparison",
    "WeightsReader",
    "compare_weights",
    "family_for",
    "fuse_for_sglang",
    "hf_to_sglang",
    "open_checkpoint",
    "open_weights",
]
