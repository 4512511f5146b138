"""garbled-sglang-weight-update: the converter is right, the engine's weight update is not.

The trainer's checkpoint and the names the engine received agree tensor by tensor, but after the
weight update a group of the engine's tensors holds other values under the right names (what
bucketed `update_weights_from_tensor` calls do in sgl-project/sglang#14178: "small buckets ...
garbled answers; large buckets are fine"). The job runs sglang 0.5.5.post3, inside the range that
thread reports. Rollout 0, generated from the weights the engine loaded itself before the first
update, is coherent; every rollout after the first update is garbled.

`engine_weights/model.safetensors` is what the engine holds after the update, dumped with HF names.
"""

from __future__ import annotations

from collections import OrderedDict

from engine_version_regression import GarbledRun, build_run
from tensors import perturbed


def _corrupted_update(trained: dict) -> dict:
    """The trained weights under their HF names, except the MLP tensors of every layer, whose
    values the update path wrote wrong (same names, other values)."""
    corrupted = perturbed(OrderedDict((k, v) for k, v in trained.items() if ".mlp." in k), 2042, scale=0.5)
    return dict(sorted({**trained, **corrupted}.items()))


WEIGHT_UPDATE = GarbledRun(
    name="garbled-sglang-weight-update",
    model="Qwen3-tiny",
    image="lmsysorg/sglang:v0.5.5.post3",
    frozen=("megatron-core==0.14.0", "ray==2.49.2", "sgl-kernel==0.3.16.post3", "sglang==0.5.5.post3", "torch==2.8.0",
            "transformer-engine==2.8.0", "transformers==4.57.1"),
    engine_weights=_corrupted_update,
    perf=lambda rng: dict(resp_mean=380.0 + rng.uniform(-20, 20), resp_max=900, trunc=0.03 + rng.uniform(0, 0.02)),
    first_rollout_coherent=True,
    verdict="engine.weight_update_bug",
    why="engine_weights hold other values than the checkpoint under the same names (weights_compare: "
        "value_mismatch), rollouts garbled after the first update, and the job runs sglang==0.5.5.post3, in the "
        "range >=0.5.3,<=0.5.5.post3 of sgl-project/sglang#14178",
)


NAME = WEIGHT_UPDATE.name


def build() -> None:
    build_run(WEIGHT_UPDATE)


if __name__ == "__main__":
    build()
