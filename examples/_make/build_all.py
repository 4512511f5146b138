"""Rebuild every example run under examples/ from the scripts in this directory.

    python examples/_make/build_all.py            # all of them
    python examples/_make/build_all.py pp_offset  # one

Each script writes its run directory deterministically (fixed seeds, fixed save ids), so a
rebuild reproduces the committed files byte for byte; binary artifacts (.pt, .safetensors,
flight-recorder pickles) exist only through these scripts.
"""

from __future__ import annotations

import importlib
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

SCRIPTS = [
    "healthy_slime", "healthy_trl", "ckpt_not_loaded", "oom_max_tokens", "stuck_submission", "port_conflict",
    "inductor_cache", "host_ram", "missing_stop", "batch_mismatch", "no_pad_token", "trl_reward_zero",
    "trl_entropy_collapse", "cp_nondeterministic", "moe_permute", "chat_template", "lr_too_high", "bad_sample",
    "collective_mismatch", "base_model", "pp_offset", "inconclusive",
    "single_generation", "false_truncation", "growing_drift",
    "network_nccl", "gpu_fault", "disk_full", "slurm_time_limit", "verl_version_mismatch", "sample_budget",
    "release_leak", "crash_unrecognized", "stuck_on_cpus", "engine_version_regression", "engine_weight_update",
]


def main(argv: list[str]) -> int:
    names = argv or SCRIPTS
    for name in names:
        if name not in SCRIPTS:
            print(f"unknown example script {name!r}; one of: {', '.join(SCRIPTS)}", file=sys.stderr)
            return 2
        module = importlib.import_module(name)
        target = HERE.parent / module.NAME
        if target.exists():
            shutil.rmtree(target)  # start clean: no file of an older build survives
        module.build()
        size = sum(p.stat().st_size for p in target.rglob("*") if p.is_file())
        print(f"{module.NAME:32s} {size / 1024:7.1f} KB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
