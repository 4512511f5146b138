"""Replaying a training step: in-process on the run's model, or by relaunching the framework.

- `model`: the run's HF model rebuilt from its config with the weights a step saw.
- `step`: one GRPO step recomputed on a saved rollout (log-probs, reference log-probs, KL,
  loss, gradient norm).
- `hooks`: forward / backward hooks that find the first non-finite or overflowing tensor.
- `launch`: the run's own job relaunched with `--load-debug-rollout-data`, in its own or
  another parallel layout.
"""
