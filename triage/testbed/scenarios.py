"""Scenarios for the benchmark: a healthy job or one fault, run to the run directory it leaves.

    SCENARIOS["weights.pp_layer_offset"].expected == "weights.pp_layer_offset"
    run_dir = generate("weights.pp_layer_offset", out_dir)

A run directory is what a slime job leaves behind, with every path in it relative to
the directory (the job runs there):

    cmdline.txt          the job's command line (slime flags only)
    job.log              the job log (`ray job logs` of the driver and its actors)
    hf/ ref/ data/       --hf-checkpoint, --ref-load (torch_dist), --prompt-data
    ckpt/                --save: Megatron checkpoints (torch_dist or legacy mp_rank_*)
    dump/                --dump-details: rollout_data/{id}.pt, train_data/...
    engine_weights/      every weight the engine held after its last update (safetensors)
    flight_recorder/     per-rank flight-recorder dumps, when a collective timed out
    output/              the HF Trainer variant's output_dir (trainer_state.json, checkpoint-N/)
    .testbed/            how the run was made (scenario, exit code, the job's environment):
                         a record for the benchmark, never read to diagnose or to relaunch

Runs are cached under `<cache>/runs/<name>-<hash>`, the hash covering the scenario, the
testbed's source and the warmed-up models, so an unchanged scenario is never rerun.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from triage.testbed import prepare, warmup
from triage.testbed.cache import build_once, cache_root, content_hash, source_hash
from triage.testbed.faults import FAULTS

PROGRAM = "python3 -m triage.testbed.train"
LOG_NAME = "job.log"
META_DIR = ".testbed"
ENGINE_DUMP = "engine_weights"  # where the testbed dumps the engine's weights after every update
ENGINE_DUMP_MANIFEST = "engine_weights.json"  # the testbed engine's manifest inside that dump
# What only the testbed leaves in a run directory: slime never dumps the engine's weights, and
# `.testbed/` records how the run was made. `triage bench --mode real` triages runs without them.
TESTBED_ONLY = (ENGINE_DUMP, META_DIR)

MODEL_ARGS = {
    "--num-layers": "2", "--hidden-size": "64", "--ffn-hidden-size": "128", "--num-attention-heads": "4",
    "--group-query-attention": True, "--num-query-groups": "2", "--kv-channels": "16", "--swiglu": True,
    "--disable-bias-linear": True, "--untie-embeddings-and-output-weights": True, "--normalization": "RMSNorm",
    "--norm-epsilon": "1e-6", "--use-rotary-position-embeddings": True, "--rotary-base": "10000",
    "--vocab-size": "384", "--seq-length": "512", "--max-position-embeddings": "512",
}

BASE_FLAGS: dict[str, Any] = {
    "--actor-num-nodes": "1", "--actor-num-gpus-per-node": "1", "--rollout-num-gpus": "1",
    "--rollout-num-gpus-per-engine": "1",
    **MODEL_ARGS,
    "--add-qkv-bias": True,
    "--hf-checkpoint": "hf", "--ref-load": "ref", "--load": "ckpt", "--save": "ckpt", "--save-interval": "2",
    "--ckpt-format": "torch_dist",
    "--prompt-data": "data/prompts.jsonl", "--input-key": "prompt", "--label-key": "label",
    "--apply-chat-template": True, "--rollout-shuffle": True,
    "--custom-rm-path": "triage.testbed.rewards.addition_rm",
    "--num-rollout": "3", "--rollout-batch-size": "4", "--n-samples-per-prompt": "8",
    "--rollout-max-response-len": "8", "--rollout-temperature": "1.0", "--rollout-stop-token-ids": "2",
    "--num-steps-per-rollout": "1", "--micro-batch-size": "8",
    "--advantage-estimator": "grpo", "--use-kl-loss": True, "--kl-loss-coef": "0.00", "--kl-loss-type": "low_var_kl",
    "--entropy-coef": "0.00", "--eps-clip": "0.2", "--eps-clip-high": "0.28",
    "--optimizer": "adam", "--lr": "1e-5", "--lr-decay-style": "constant", "--weight-decay": "0.1",
    "--adam-beta1": "0.9", "--adam-beta2": "0.98", "--clip-grad": "1.0",
    "--tensor-model-parallel-size": "1", "--pipeline-model-parallel-size": "1",
    "--dump-details": "dump", "--seed": "1234", "--rollout-seed": "42",
}


@dataclass(frozen=True)
class Scenario:
    name: str
    fault: str | None  # a key of faults.FAULTS, None for a healthy control
    expected: str  # the verdict id of ROOT_CAUSES.md a correct triage reaches
    flags: dict[str, Any]  # the job's slime flags (relative paths), in order
    model: str = "qwen2-instruct"
    trainer: str = "megatron"  # megatron | hf
    setup: tuple[str, ...] = ()  # prepare.SETUPS steps, after the base layout
    description: str = ""
    env: dict[str, str] = field(default_factory=dict)  # the job's environment (cluster size, tracing)

    def argv(self) -> list[str]:
        out: list[str] = []
        for flag, value in self.flags.items():
            if value is None or value is False:
                continue
            out.append(flag)
            if value is not True:
                out.extend(str(value).split())
        return out

    def command_line(self) -> str:
        """The job's command line as its user typed it: slime's flags only (TRL's for the HF variant)."""
        from triage.testbed.arguments import recorded_command

        if self.trainer == "hf":
            from triage.testbed.hf_trainer import trl_command

            return trl_command(self.flags)
        return recorded_command(self.argv(), PROGRAM)

    def recipe(self) -> dict[str, Any]:
        return {"name": self.name, "fault": self.fault, "flags": self.flags, "model": self.model,
                "trainer": self.trainer, "setup": list(self.setup), "env": self.env}


def _merge(base: dict[str, Any], *overrides: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for o in overrides:
        for k, v in o.items():
            if v is None:
                out.pop(k, None)
            else:
                out[k] = v
    return out


LLAMA = {"--add-qkv-bias": None}
# A model-parallel collective waits as long as NCCL's default process-group timeout (10 minutes),
# so a loaded machine never times a healthy collective out; the testbed's short default (10 s)
# stays only where the fault is a collective that never completes.
PATIENT = {"--testbed-dist-timeout": "600"}
HANG_FAULTS = ("dist.collective_mismatch",)
# Two-process runs pay two interpreters' start-up: they run two rollouts, not three.
TP2 = {"--tensor-model-parallel-size": "2", "--actor-num-gpus-per-node": "2", "--num-rollout": "2", **PATIENT}
PP2 = {"--pipeline-model-parallel-size": "2", "--actor-num-gpus-per-node": "2", "--num-rollout": "2", **PATIENT}
DIST_ENV = {"TORCH_FR_BUFFER_SIZE": "2000", "TORCH_FR_DUMP_TEMP_FILE": "flight_recorder/nccl_trace_rank_"}


# A long healthy control: enough records for every health check of the `healthy` verdict
# (triage/thresholds.yaml: health.reward.min_records = 20 reward records, the most of any
# check), at a batch big enough to learn from. With 512 samples a step (32 prompts x 16) the
# grad norm settles at 1-3 and the reward rises over the 24 rollouts, as in real GRPO
# training; at 32 samples a step the grad norm sits around 10, the guides' "unstable" bar.
# A micro-batch of 16 samples fits the testbed GPU (memory.py: about 500 tokens).
LONG = {"--num-rollout": "24", "--rollout-batch-size": "32", "--n-samples-per-prompt": "16",
        "--micro-batch-size": "16", "--save-interval": "8", "--lr": "1e-4"}
# Advantages centred on the group mean but not divided by its std (Dr. GRPO's choice).
NO_STD = {"--disable-grpo-std-normalization": True}


def _healthy(name: str, description: str, overrides: dict[str, Any] | None = None, **kw: Any) -> Scenario:
    """A short healthy job (two or three rollouts): too few records for the health checks, so the
    right answer is `inconclusive`, and any fault verdict on it is wrong."""
    return Scenario(name=name, fault=None, expected="inconclusive", flags=_merge(BASE_FLAGS, overrides or {}),
                    description=description + "; too short for the health checks", **kw)


def _long_healthy(name: str, description: str, overrides: dict[str, Any] | None = None, **kw: Any) -> Scenario:
    """A healthy job long enough for every health check: the right answer is `healthy`."""
    return Scenario(name=name, fault=None, expected="healthy", flags=_merge(BASE_FLAGS, LONG, overrides or {}),
                    description=description, **kw)


def _faulty(name: str, base: dict[str, Any] | None = None, **kw: Any) -> Scenario:
    fault = FAULTS[name]
    flags = _merge(BASE_FLAGS, base or {}, fault.flags)
    env = dict(kw.pop("env", {}))
    if flags.get("--tensor-model-parallel-size", "1") != "1" or flags.get("--pipeline-model-parallel-size", "1") != "1":
        env = {**DIST_ENV, **env}
        flags["--num-rollout"] = "2"
        if name not in HANG_FAULTS:
            flags.update(PATIENT)
    setup = (fault.setup,) if fault.setup else ()
    return Scenario(name=name, fault=name, expected=fault.expected, flags=flags, setup=setup,
                    description=fault.what, env=env, **kw)


def _all() -> dict[str, Scenario]:
    items = [
        _healthy("healthy.qwen2", "Qwen2 instruct model, GRPO, one GPU each for training and rollout"),
        _healthy("healthy.qwen2.seed7", "as healthy.qwen2 with other seeds and prompts",
                 {"--seed": "7", "--rollout-seed": "7"}),
        _healthy("healthy.llama", "Llama instruct model (no QKV bias)", LLAMA, model="llama-instruct"),
        _healthy("healthy.colocate", "training and rollout colocated: the engine releases and resumes its memory",
                 {"--colocate": True, "--rollout-num-gpus": None}),
        _healthy("healthy.tp2", "tensor parallel 2 as two gloo processes", TP2, env=dict(DIST_ENV)),
        _healthy("healthy.pp2", "pipeline parallel 2 as two gloo processes", PP2, env=dict(DIST_ENV)),
        _healthy("healthy.legacy_ckpt", "legacy torch checkpoints and slime <= v0.3.1 train dumps",
                 {"--ckpt-format": "torch", "--testbed-train-dump-format": "legacy"}),
        _healthy("healthy.hf_trainer", "an HF Trainer / TRL GRPO run writing trainer_state.json",
                 {"--testbed-trainer": "hf", "--testbed-output-dir": "output", "--save": "output", "--load": None,
                  "--ref-load": None, "--use-kl-loss": None, "--kl-loss-coef": None, "--kl-loss-type": None,
                  "--dump-details": None}, trainer="hf"),
        # The healthy controls that count: 24 rollouts each, varied as real runs vary.
        _long_healthy("healthy.long.qwen2", "Qwen2 instruct, 24 rollouts of 32x16 samples, lr 1e-4, Dr. GRPO "
                      "advantages", NO_STD),
        _long_healthy("healthy.long.qwen2.seed7", "Qwen2 instruct, other seeds and prompts, GRPO std-normalised "
                      "advantages, lr warmup then cosine decay, KL loss 0.01",
                      {"--seed": "7", "--rollout-seed": "7", "--lr-warmup-iters": "3", "--lr-decay-style": "cosine",
                       "--lr-decay-iters": "24", "--min-lr": "1e-5", "--kl-loss-coef": "0.01"}),
        _long_healthy("healthy.long.llama", "Llama instruct (no QKV bias), other seeds, 24 rollouts",
                      {**LLAMA, **NO_STD, "--seed": "11", "--rollout-seed": "11"}, model="llama-instruct"),
        _long_healthy("healthy.long.colocate", "training and rollout colocated (the engine releases and resumes "
                      "its memory every rollout), other seeds, 24 rollouts",
                      {**NO_STD, "--colocate": True, "--rollout-num-gpus": None, "--seed": "3", "--rollout-seed": "5"}),
        _long_healthy("healthy.long.tp2", "tensor parallel 2 as two gloo processes, other seeds, 24 rollouts",
                      {**NO_STD, **PATIENT, "--tensor-model-parallel-size": "2", "--actor-num-gpus-per-node": "2",
                       "--seed": "21", "--rollout-seed": "21"}, env=dict(DIST_ENV)),
    ]
    for name in FAULTS:
        items.append(_faulty(name))
    return {s.name: s for s in items}


SCENARIOS: dict[str, Scenario] = _all()


def scenario_key(scenario: Scenario) -> str:
    return content_hash(scenario.recipe(), source_hash(), warmup.models_dir().name)


@contextlib.contextmanager
def _in_directory(path: Path, env: dict[str, str]):
    old_cwd = os.getcwd()
    old_env = {k: os.environ.get(k) for k in env}
    os.chdir(path)
    os.environ.update(env)
    try:
        yield
    finally:
        os.chdir(old_cwd)
        for k, v in old_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def run_scenario(scenario: Scenario, run_dir: Path) -> dict[str, Any]:
    """Prepare the inputs in `run_dir` and run the job there; returns what happened."""
    from triage.testbed import train

    layout = prepare.base_layout(prepare.RunLayout(run_dir, model=scenario.model,
                                                   prompt_seed=int(scenario.flags.get("--rollout-seed", "0"))))
    for step in scenario.setup:
        prepare.SETUPS[step](layout)
    if "--ref-load" not in scenario.flags:
        shutil.rmtree(layout.ref, ignore_errors=True)
    (run_dir / "cmdline.txt").write_text(scenario.command_line() + "\n")
    env = dict(scenario.env)
    if scenario.fault:
        env["TRIAGE_TESTBED_FAULT"] = scenario.fault
    hidden = [] if scenario.trainer == "hf" else ["--testbed-log", LOG_NAME, "--testbed-engine-dump", ENGINE_DUMP]
    t0 = time.time()
    with _in_directory(run_dir, env):
        code = train.main(scenario.argv() + hidden)
    wall = time.time() - t0
    meta = {"scenario": scenario.name, "fault": scenario.fault, "expected": scenario.expected, "exit_code": code,
            "wall_s": round(wall, 2), "env": env, "argv": scenario.argv() + hidden, "cwd": ".",
            "description": scenario.description}
    (run_dir / META_DIR).mkdir(exist_ok=True)
    (run_dir / META_DIR / "scenario.json").write_text(json.dumps(meta, indent=2) + "\n")
    return meta


def generate(name: str, out_dir: Path | str | None = None, force: bool = False) -> Path:
    """The run directory of scenario `name`: `out_dir/<name>` (a copy of the cached run), or the cached run itself."""
    if name not in SCENARIOS:
        raise KeyError(f"unknown scenario {name!r}: choose one of {', '.join(SCENARIOS)}")
    scenario = SCENARIOS[name]
    warmup.model_path(scenario.model)  # build the models outside the run's timing
    cached = cache_root() / "runs" / f"{name}-{scenario_key(scenario)}"
    if force and cached.exists():
        shutil.rmtree(cached)
    cached.parent.mkdir(parents=True, exist_ok=True)
    build_once(cached, lambda tmp: run_scenario(scenario, tmp), marker=f"{META_DIR}/complete")
    if out_dir is None:
        return cached
    dest = Path(out_dir) / name
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(cached, dest, symlinks=True)
    return dest


def job_environment(name: str) -> dict[str, str]:
    """The environment scenario `name`'s job ran in, from its definition here: what a relaunch of it gets.

    The testbed's "installed code" is its environment (the fault it plants, the cluster's size):
    a relaunched job must hit the same bug, as rerunning a real job in the same container
    would. It comes from the scenario's definition, never from the run directory
    (`.testbed/scenario.json` only records how the run was made, for the benchmark).
    """
    scenario = SCENARIOS[name]
    env = dict(scenario.env)
    if scenario.fault:
        env["TRIAGE_TESTBED_FAULT"] = scenario.fault
    return env


def scenario_meta(run_dir: Path | str) -> dict[str, Any]:
    return json.loads((Path(run_dir) / META_DIR / "scenario.json").read_text())
