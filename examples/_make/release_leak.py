"""memory-release-leak: a colocated slime run (training and SGLang share the GPUs) with speculative
decoding. slime prints the GPU's memory each time the trainer offloads (`[Rank 0] Memory-Usage after
offload model: {...}`, THUDM/slime slime/utils/memory_utils.py print_memory): the memory left in use
grows by about 3.5 GB every rollout, because the engine does not return all of it on release
(THUDM/slime#1022). At rollout 6 the engine cannot resume its memory and fails with a CUDA OOM.
"""

from __future__ import annotations

import random

from common import TRAIN, Log, base_args, base_flags, engine, example_dir, expected, multiline_command, write_text
from field_common import healthy_rollouts

NAME = "memory-release-leak"
JOB = "raysubmit_Ml6Rk2Zp8Vd4Hc1N"
USED = (14.21, 17.68, 21.13, 24.62, 28.05, 31.52)


def _memory(log: Log, phase: str, used: float) -> None:
    info = {"gpu": "0", "total_GB": 79.11, "free_GB": round(79.11 - used, 2), "used_GB": used, "allocated_GB": 0.52,
            "reserved_GB": 0.61, "host_total_GB": 2015.56, "host_available_GB": 1712.3, "host_used_GB": 290.11,
            "host_free_GB": 1211.75}
    log.log(f"[Rank 0] Memory-Usage {phase}: {info}", "memory_utils.py:49", TRAIN)


def build() -> None:
    d = example_dir(NAME)
    rng = random.Random(371)
    flags = base_flags()
    flags.update(sglang_speculative_algorithm="EAGLE", sglang_speculative_num_steps=3)
    args = base_args()
    args.update(sglang_speculative_algorithm="EAGLE", sglang_speculative_num_steps=3)
    write_text(d / "cmdline.txt", multiline_command(flags))
    log = Log("2026-08-18 09:00:00", seed=371)
    # the rollouts, each followed by the trainer's offload before the next generation
    healthy_rollouts(log, args, rng, 1, job=JOB)
    for rid, used in enumerate(USED):
        _memory(log, "before offload model", used + 40.3)
        _memory(log, "after offload model", used)
        if rid + 1 < len(USED):
            healthy_tail = random.Random(rid)
            log.tick(95)
            log.log(f"rollout {rid + 1}: {{'rollout/response_lengths': {1100 + 17 * rid + healthy_tail.uniform(-30, 30)!r}, "
                    f"'rollout/raw_reward': {0.43 + 0.01 * rid!r}}}", "train_metric_utils.py:135", TRAIN)
            log.log(f"step {rid + 1}: {{'train/loss': {healthy_tail.uniform(-0.01, 0.01)!r}, 'train/grad_norm': "
                    f"{0.37 * healthy_tail.uniform(0.85, 1.15)!r}, 'train/step': {rid + 1}}}", "model.py:918", TRAIN)
    log.tick(4)
    eng = engine(3310)
    log.raw("Traceback (most recent call last):", eng)
    for line in ('  File "/root/slime/slime/backends/sglang_utils/sglang_engine.py", line 337, in resume_memory_occupation',
                 '    return self._make_request("resume_memory_occupation", {"tags": tags})',
                 '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/scheduler_update_weights_mixin.py", line 118, in resume_memory_occupation',
                 "    self.memory_saver_adapter.resume(GPU_MEMORY_TYPE_KV_CACHE)",
                 '  File "/usr/local/lib/python3.12/dist-packages/torch_memory_saver/entrypoint.py", line 120, in resume',
                 "    self._impl.resume(tag=tag)"):
        log.raw(line, eng)
    log.raw("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 22.03 GiB. GPU 0 has a total capacity of 79.11 GiB "
            "of which 14.27 GiB is free. Including non-PyTorch memory, this process has 33.29 GiB memory in use.", eng)
    write_text(d / "job.log", log.text())
    expected(d, "memory.release_leak",
             "`Memory-Usage after offload model` used_GB 14.2 → 31.5 over six rollouts (+3.5 GB each), then the engine's "
             "resume_memory_occupation OOMs at rollout 6, not at the first switch")


if __name__ == "__main__":
    build()
