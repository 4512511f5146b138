"""oom_context: where the CUDA OOM happened, from slime's timers, the traceback and the actor."""

from __future__ import annotations

from pathlib import Path

import pytest

from probes.oom_context import OomContext
from triage.errors import Unavailable
from triage.run import open_run

T = "(MegatronTrainRayActor pid=2345)"
OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 18.55 GiB. GPU 0 has a total capacity of 79.11 GiB "
    "of which 6.02 GiB is free. Including non-PyTorch memory, this process has 73.07 GiB memory in use."
)

ROLLOUT_0 = f"""\
[2026-08-01 10:00:00] train.py:12 - Start training
{T} [2026-08-01 10:00:20] timer.py:24 - Timer train_wait start
(RolloutManager pid=2290) [2026-08-01 10:04:00] rollout.py:420 - perf 0: {{'rollout/response_len/mean': 812.0, 'perf/rollout_time': 230.1}}
{T} [2026-08-01 10:04:01] timer.py:33 - Timer train_wait end (elapsed: 221.0s)
{T} [2026-08-01 10:04:01] timer.py:24 - Timer train start
{T} [2026-08-01 10:04:02] timer.py:24 - Timer log_probs start
{T} [2026-08-01 10:04:40] timer.py:33 - Timer log_probs end (elapsed: 38.0s)
{T} [2026-08-01 10:04:41] data.py:317 - rollout 0: {{'rollout/log_probs': -0.41, 'rollout/ref_log_probs': -0.41, 'rollout/total_lengths': 1100.0}}
{T} [2026-08-01 10:04:41] timer.py:24 - Timer actor_train start
{T} [2026-08-01 10:06:00] model.py:896 - step 0: {{'train/loss': 0.01, 'train/grad_norm': 0.21, 'train/ppo_kl': 0.0}}
{T} [2026-08-01 10:06:01] timer.py:33 - Timer actor_train end (elapsed: 80.0s)
{T} [2026-08-01 10:06:01] timer.py:33 - Timer train end (elapsed: 120.0s)
"""


def traceback(prefix: str, frames: list[tuple[str, int, str]], error: str = OOM) -> str:
    lines = [f"{prefix} Traceback (most recent call last):"]
    for path, no, fn in frames:
        lines.append(f'{prefix}   File "{path}", line {no}, in {fn}')
        lines.append(f"{prefix}     ...")
    lines.append(f"{prefix} {error}")
    return "\n".join(lines) + "\n"


def make_run(tmp_path: Path, log: str, flags: str = ""):
    (tmp_path / "job.log").write_text(log, encoding="utf-8")
    (tmp_path / "cmdline.txt").write_text(
        f"python3 train.py --actor-num-nodes 1 --actor-num-gpus-per-node 8 --rollout-num-gpus 8 {flags}\n", encoding="utf-8"
    )
    return open_run(str(tmp_path))


def test_oom_in_the_engine(tmp_path):
    log = ROLLOUT_0.split("{T} [2026-08-01 10:04:01]".format(T=T))[0] + traceback(
        "(SGLangEngine pid=3101)",
        [("/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/scheduler.py", 2712, "run_scheduler_process"),
         ("/usr/local/lib/python3.12/dist-packages/sglang/srt/model_executor/model_runner.py", 1810, "forward_decode")],
    )
    obs = OomContext().examine(make_run(tmp_path, log))
    assert obs.outcome == "engine_side"
    assert obs.evidence["in_engine"] is True
    assert obs.evidence["line"]["source"].startswith("SGLangEngine pid=3101")
    assert obs.evidence["last_step"] is None


@pytest.mark.parametrize("line", [
    # vLLM v1's engine core and its multiprocessing workers, by their prefixes (noonghunna/club-3090#16,
    # vllm-project/vllm#18446), and its sampler warm-up named in the message (vllm-project/vllm#14452)
    "(EngineCore pid=112) ERROR 05-01 14:39:06 [core.py:1131] " + OOM,
    "(VllmWorker rank=7 pid=240) Cuda failure 'out of memory'",
    "ERROR 03-16 06:12:38 [multiproc_executor.py:375] RuntimeError: CUDA out of memory occurred when warming up sampler "
    "with 1024 dummy requests. Please try lowering `max_num_seqs` or `gpu_memory_utilization` when initializing the engine.",
])
def test_oom_in_a_vllm_engine_is_the_engines_and_says_so(tmp_path, line):
    obs = OomContext().examine(make_run(tmp_path, line + "\n"))
    assert obs.outcome == "engine_side"
    assert "inside the vLLM engine" in obs.summary


def test_an_engine_without_room_for_its_kv_cache_is_told_its_own_remedy(tmp_path, monkeypatch, capsys):
    # sgl-project/sglang#4330: SGLang refuses to start and asks for a larger fraction; the catalog's
    # engine-OOM remedy (lower it) would send the user the other way
    log = ("(SGLangEngine pid=3101) [2026-08-01 10:00:05] RuntimeError: Not enough memory. Please try to increase "
           "--mem-fraction-static.\n")
    obs = OomContext().examine(make_run(tmp_path, log))
    assert obs.outcome == "engine_side"
    assert "too small" in obs.summary and "--sglang-mem-fraction-static" in obs.evidence["remedy"]
    import json

    from triage.cli import main

    assert main(["run", str(tmp_path), "--json", "--no-cache"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["root_cause"]["id"] == "engine.oom_illegal_memory"
    assert report["root_cause"]["remedy"].startswith("SGLang found no GPU memory left for its KV cache")
    assert report["root_cause"]["flags"] == ["--sglang-mem-fraction-static"]


def test_sglangs_kv_pool_full_for_an_admitted_batch_is_not_told_to_shrink_the_pool(tmp_path, capsys):
    # sgl-project/sglang#34676: the scheduler admitted a batch the pool then could not allocate; lowering the
    # memory fraction (the catalog's engine remedy) shrinks the pool
    log = ("RuntimeError: Prefill out of memory. Try to lower your batch size.\nTry to allocate 8192 tokens.\n"
           "Available full tokens: 8070656 (full_available_size=7936 + full_evictable_size_=8062720)\n")
    obs = OomContext().examine(make_run(tmp_path, log))
    assert obs.outcome == "engine_side" and "KV-cache pool" in obs.summary
    import json

    from triage.cli import main

    assert main(["run", str(tmp_path), "--json", "--no-cache"]) == 0
    rc = json.loads(capsys.readouterr().out)["root_cause"]
    assert rc["id"] == "engine.oom_illegal_memory"
    assert rc["remedy"].startswith("SGLang's KV-cache pool") and "lowering it shrinks the pool" in rc["remedy"]


def test_a_vllm_engine_without_room_for_its_kv_cache_is_not_named_sglang(tmp_path, capsys):
    # verl-project/verl#2245: vLLM v1's check_enough_kv_cache_memory; no slime flag applies to it
    log = ('  File "/usr/local/lib/python3.10/dist-packages/vllm/v1/core/kv_cache_utils.py", line 480, in '
           "check_enough_kv_cache_memory\n"
           "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
           "initializing the engine.\n")
    import json

    from triage.cli import main

    make_run(tmp_path, log)
    assert main(["run", str(tmp_path), "--json", "--no-cache"]) == 0
    rc = json.loads(capsys.readouterr().out)["root_cause"]
    assert rc["id"] == "engine.oom_illegal_memory" and "SGLang" not in rc["title"]
    assert rc["flags"] == [] and rc["remedy"].startswith("vLLM found no GPU memory left for its KV cache blocks")


def test_an_oom_in_vllms_sleep_mode_allocator_is_the_engines(tmp_path):
    # modelscope/ms-swift#7324: csrc/cumem_allocator.cpp is the allocator of a vLLM engine that sleeps and wakes
    (tmp_path / "job.log").write_text("RuntimeError: CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:62\n",
                                      encoding="utf-8")
    obs = OomContext().examine(open_run(str(tmp_path)))
    assert obs.outcome == "engine_side", obs.summary


def test_an_oom_in_the_memory_savers_resume_is_the_colocated_switch(tmp_path):
    # fzyzcjy/torch_memory_saver#99: the engine's memory could not be re-created for the next rollout
    (tmp_path / "job.log").write_text(
        "[torch_memory_saver.cpp] cudaError error: 2 (out of memory)  file=csrc/core.cpp func=resume line=172\n")
    obs = OomContext().examine(open_run(str(tmp_path)))  # (no arguments: the resume itself says colocated)
    assert obs.outcome == "phase_switch", obs.summary
    assert obs.evidence["colocate"] == "shown by torch_memory_saver's resume"
    assert "the engine resumed" in obs.summary


def test_oom_in_the_log_prob_pass_by_timer(tmp_path):
    log = ROLLOUT_0 + (
        f"{T} [2026-08-01 10:06:02] timer.py:24 - Timer update_weights start\n"
        f"{T} [2026-08-01 10:06:30] timer.py:33 - Timer update_weights end (elapsed: 28.0s)\n"
        f"{T} [2026-08-01 10:06:30] timer.py:24 - Timer train_wait start\n"
        f"{T} [2026-08-01 10:10:00] timer.py:33 - Timer train_wait end (elapsed: 210.0s)\n"
        f"{T} [2026-08-01 10:10:00] timer.py:24 - Timer train start\n"
        f"{T} [2026-08-01 10:10:01] timer.py:24 - Timer log_probs start\n"
    ) + traceback(T, [("/root/slime/slime/backends/megatron_utils/actor.py", 363, "compute_log_prob"),
                      ("/root/slime/slime/backends/megatron_utils/model.py", 240, "forward_only")])
    obs = OomContext().examine(make_run(tmp_path, log))
    assert obs.outcome == "logprob_pass"
    ev = obs.evidence
    assert "log_probs" in ev["open_timers"] and "train" in ev["open_timers"]
    assert ev["phase_by_timers"] == "logprob_pass"
    assert ev["last_step"] == 0 and ev["last_rollout"] == 0
    assert "log_probs" in obs.summary


def test_oom_in_trl_log_prob_computation_by_frames(tmp_path):
    log = traceback(
        "",
        [("/opt/axolotl/src/axolotl/train.py", 210, "train"),
         ("/usr/local/lib/python3.11/site-packages/trl/trainer/grpo_trainer.py", 1620, "_generate_and_score_completions"),
         ("/usr/local/lib/python3.11/site-packages/trl/trainer/grpo_trainer.py", 880, "_get_per_token_logps_and_entropies")],
    ).replace("\n ", "\n").lstrip()
    obs = OomContext().examine(make_run(tmp_path, log))
    assert obs.outcome == "logprob_pass"
    assert obs.evidence["phase_by_frames"] == "logprob_pass"
    assert any("_get_per_token_logps_and_entropies" in f for f in obs.evidence["frames"])


def test_colocated_oom_at_the_first_switch(tmp_path):
    log = ROLLOUT_0 + f"{T} [2026-08-01 10:06:02] timer.py:24 - Timer update_weights start\n" + traceback(
        T, [("/root/slime/slime/backends/megatron_utils/actor.py", 612, "update_weights"),
            ("/root/slime/slime/backends/megatron_utils/update_weight/update_weight_from_tensor.py", 120, "update_weights")]
    )
    obs = OomContext().examine(make_run(tmp_path, log, "--colocate"))
    assert obs.outcome == "phase_switch"
    ev = obs.evidence
    assert ev["colocate"] is True and ev["switch"] == "first"
    assert ev["open_timers"] == ["update_weights"]
    assert ev["last_step"] == 0
    assert "first switch" in obs.summary


def test_same_oom_in_a_disaggregated_run_is_not_a_phase_switch(tmp_path):
    log = ROLLOUT_0 + f"{T} [2026-08-01 10:06:02] timer.py:24 - Timer update_weights start\n" + traceback(
        T, [("/root/slime/slime/backends/megatron_utils/actor.py", 612, "update_weights")]
    )
    obs = OomContext().examine(make_run(tmp_path, log))
    assert obs.outcome == "training_step"
    assert obs.evidence["colocate"] is False and obs.evidence["switch"] == "not colocated"
    assert "not colocated" in obs.summary


def test_oom_in_the_training_step(tmp_path):
    log = ROLLOUT_0.split(f"{T} [2026-08-01 10:06:00]")[0] + traceback(
        T, [("/root/slime/slime/backends/megatron_utils/model.py", 680, "train_one_step"),
            ("/root/Megatron-LM/megatron/core/pipeline_parallel/schedules.py", 520, "forward_backward_no_pipelining"),
            ("/usr/local/lib/python3.12/dist-packages/torch/autograd/__init__.py", 347, "backward")]
    )
    obs = OomContext().examine(make_run(tmp_path, log, "--colocate"))
    assert obs.outcome == "training_step"
    ev = obs.evidence
    assert ev["open_timers"] == ["actor_train", "train"]
    assert ev["last_step"] is None and ev["last_rollout"] == 0
    assert ev["line"]["text"].startswith("torch.OutOfMemoryError")
    assert obs.confidence >= 0.8


def test_no_oom_is_unavailable(tmp_path):
    with pytest.raises(Unavailable) as exc:
        OomContext().examine(make_run(tmp_path, ROLLOUT_0))
    assert "no CUDA out-of-memory" in exc.value.reason


def test_phase_marker_line_places_the_oom_when_timers_and_frames_are_silent(tmp_path):
    log = (
        "[2026-08-01 10:00:00] train.py:12 - Start training\n"
        f"{T} [2026-08-01 10:06:00] model.py:896 - step 0: {{'train/loss': 0.01, 'train/grad_norm': 0.2}}\n"
        f"{T} [2026-08-01 10:06:05] memory_utils.py:49 - [Rank 0] Memory-Usage before wake_up model: "
        "{'gpu': '0', 'total_GB': 79.11, 'free_GB': 70.1, 'used_GB': 9.0}\n"
    ) + traceback(T, [("/usr/local/lib/python3.12/dist-packages/torch/nn/modules/module.py", 1751, "_call_impl")])
    obs = OomContext().examine(make_run(tmp_path, log, "--colocate"))
    assert obs.outcome == "phase_switch"
    ev = obs.evidence
    assert ev["open_timers"] == [] and ev["phase_by_frames"] is None
    assert "wake_up" in ev["last_phase_event"]["text"]
    assert ev["last_phase_event"]["where"].endswith("job.log:3")


# slime's print_memory (THUDM/slime slime/utils/memory_utils.py): `[Rank N] Memory-Usage <phase>: {...}`,
# printed at every offload / wake-up of a colocated run.
def _memory(rank: int, phase: str, used: float) -> str:
    return (f"{T} [2026-08-01 10:10:00] memory_utils.py:49 - [Rank {rank}] Memory-Usage {phase}: {{'gpu': '0', "
            f"'total_GB': 79.11, 'free_GB': {79.11 - used:.2f}, 'used_GB': {used}, 'allocated_GB': 0.52, 'reserved_GB': 0.6}}\n")


def _cycles(used: list[float]) -> str:
    out = ROLLOUT_0
    for i, u in enumerate(used):
        out += _memory(0, "after offload model", u)
        out += f"(RolloutManager pid=2290) [2026-08-01 10:1{i}:00] rollout.py:420 - rollout {i + 1}: {{'rollout/response_len/mean': 800.0}}\n"
        out += f"{T} [2026-08-01 10:1{i}:30] model.py:896 - step {i + 1}: {{'train/loss': 0.01, 'train/grad_norm': 0.2}}\n"
    return out


RESUME_OOM = [("/root/slime/slime/backends/sglang_utils/sglang_engine.py", 337, "resume_memory_occupation"),
              ("/usr/local/lib/python3.12/dist-packages/torch_memory_saver/entrypoint.py", 120, "resume")]


def test_memory_rising_every_cycle_then_an_oom_is_a_release_leak(tmp_path):
    log = _cycles([12.4, 16.9, 21.3, 25.8, 30.2]) + traceback("(SGLangEngine pid=3101)", RESUME_OOM)
    obs = OomContext().examine(make_run(tmp_path, log, "--colocate"))
    assert obs.outcome == "release_leak", obs.summary
    trend = obs.evidence["memory_trend"]
    assert trend["used_gb"] == [12.4, 16.9, 21.3, 25.8, 30.2]
    assert trend["growth_gb"] == pytest.approx(17.8)
    assert trend["phase"] == "after offload model (rank 0)"
    assert obs.evidence["last_rollout"] == 5


def test_flat_memory_then_an_oom_at_resume_is_not_a_leak(tmp_path):
    log = _cycles([12.4, 12.41, 12.39, 12.4]) + traceback("(SGLangEngine pid=3101)", RESUME_OOM)
    obs = OomContext().examine(make_run(tmp_path, log, "--colocate"))
    assert obs.outcome != "release_leak"
    assert obs.evidence["memory_trend"] is None


def test_memory_that_levelled_off_before_the_oom_is_no_leak(tmp_path):
    # LLM360/miles:logs/cp2_ep4.log: 20.45, 21.64, then 22.69 on four cycles, and an OOM in the training forward pass
    log = _cycles([20.45, 21.64, 22.69, 22.69, 22.69, 22.69]) + traceback("(SGLangEngine pid=3101)", RESUME_OOM)
    obs = OomContext().examine(make_run(tmp_path, log, "--colocate"))
    assert obs.outcome != "release_leak", obs.summary
    assert obs.evidence["memory_trend"] is None


def test_a_busy_phase_that_grows_while_every_release_gives_memory_back_is_no_leak(tmp_path):
    # LLM360/miles:logs/cp2_ep4.log: `after wake_up model` 80.48, 86.29, 87.28 GB; `before wake_up model` (what each
    # release left) 20.45, 21.64, 22.69, 22.69, 22.69
    log = ROLLOUT_0
    for i, (released, busy) in enumerate(zip([20.45, 21.64, 22.69, 22.69, 22.69], [80.48, 86.29, 86.9, 87.1, 87.28])):
        log += _memory(0, "before wake_up model", released) + _memory(0, "after wake_up model", busy)
        log += f"{T} [2026-08-01 10:1{i}:30] model.py:896 - step {i + 1}: {{'train/loss': 0.01, 'train/grad_norm': 0.2}}\n"
    obs = OomContext().examine(make_run(tmp_path, log + traceback("(SGLangEngine pid=3101)", RESUME_OOM), "--colocate"))
    assert obs.outcome != "release_leak", obs.summary
    # with what the releases left still rising, the busy phase's growth is read as before
    rising = ROLLOUT_0
    for i, (released, busy) in enumerate(zip([20.45, 21.64, 22.69, 23.9, 25.1], [80.48, 86.29, 86.9, 87.1, 87.28])):
        rising += _memory(0, "before wake_up model", released) + _memory(0, "after wake_up model", busy)
    obs = OomContext().examine(make_run(tmp_path, rising + traceback("(SGLangEngine pid=3101)", RESUME_OOM), "--colocate"))
    assert obs.outcome == "release_leak", obs.summary
    assert obs.evidence["memory_trend"]["phase"] == "before wake_up model (rank 0)"


@pytest.mark.parametrize("line, used, phase", [
    # verl-project/verl verl/utils/debug/performance.py log_gpu_memory_usage
    ("After offload actor model during update_actor, memory allocated (GB): 0.51, memory reserved (GB): 0.62, "
     "device memory used/total (GB): {u}/79.11", [10.0, 13.0, 16.5, 20.0], "After offload actor model"),
    # vllm v1/worker/gpu_worker.py sleep(): what each sleep left on the GPU, rising step after step (NVIDIA-NeMo/RL#2619)
    ("INFO 05-02 10:10:00 [gpu_worker.py:104] Sleep mode freed 43.82 GiB memory, {u} GiB memory is still in use.",
     [4.11, 11.57, 18.2, 25.0], "after sleep (vLLM)"),
])
def test_verls_and_vllms_memory_lines_count_too(tmp_path, line, used, phase):
    lines = "".join(f"(WorkerDict pid=812) {line.format(u=u)}\n(TaskRunner pid=700) step:{i + 1} - actor/pg_loss:0.01\n"
                    for i, u in enumerate(used))
    log = ROLLOUT_0 + lines + traceback("(WorkerDict pid=812)", [("/workspace/verl/verl/workers/fsdp_workers.py", 700, "wake_up")])
    obs = OomContext().examine(make_run(tmp_path, log, "--colocate"))
    assert obs.outcome == "release_leak", obs.summary
    trend = obs.evidence["memory_trend"]
    assert trend["used_gb"] == used and trend["phase"].startswith(phase)


@pytest.mark.parametrize("path, fn", [
    ("/workspace/verl/verl/utils/torch_functional.py", "logprobs_from_logits"),  # verl
    ("/opt/OpenRLHF/openrlhf/models/utils.py", "log_probs_from_logits"),  # OpenRLHF
    ("/root/slime/slime/utils/ppo_utils.py", "calculate_log_probs_and_entropy"),  # slime
    ("/usr/lib/python3/site-packages/trl/trainer/utils.py", "selective_log_softmax"),  # TRL
    ("/opt/nemo-rl/nemo_rl/models/policy/dtensor_policy_worker_v2.py", "get_logprobs"),  # NeMo-RL (RL#3793)
])
def test_each_frameworks_log_prob_function_places_the_oom(tmp_path, path, fn):
    log = traceback("", [("/app/train.py", 10, "main"), (path, 120, fn)]).replace("\n ", "\n").lstrip()
    obs = OomContext().examine(make_run(tmp_path, log))
    assert obs.outcome == "logprob_pass"


def test_an_oom_before_any_step_that_nothing_places_is_not_said_to_be_in_a_training_step(tmp_path):
    # NVIDIA-NeMo/RL#2702: an OOM in the workers' set-up, with no timer, step record or phase frame
    log = traceback("(MegatronPolicyWorker pid=35477)", [("/opt/nemo-rl/nemo_rl/algorithms/grpo.py", 724, "setup")])
    obs = OomContext().examine(make_run(tmp_path, log))
    assert obs.outcome == "training_step"
    assert "before any train step record in the log" in obs.summary and "(set-up or a training step)" in obs.summary
    assert "in the training step" not in obs.summary


def test_frames_pasted_below_the_error_line_place_the_oom(tmp_path):
    log = (
        f"{OOM}\n"
        "                               ^^^^^^^^^^^^^^\n"
        "    log_prob = compute_log_probs(logits.clone(), tokens, tp_group)\n"
        '   File "/root/slime/slime/utils/ppo_utils.py", line 672, in calculate_log_probs_and_entropy\n'
    )
    obs = OomContext().examine(make_run(tmp_path, log))
    assert obs.outcome == "logprob_pass"
    assert obs.evidence["frames_below_error"] is True


def test_memory_saver_oom_in_a_verl_run_is_the_engines(tmp_path):
    # verl-project/verl#1431: SGLang's torch_memory_saver cannot map its memory (CUresult 2 = out of memory)
    (tmp_path / "job.log").write_text(
        " [torch_memory_saver.cpp] CUresult error  result=2 file=csrc/torch_memory_saver.cpp func=cu_mem_create line=103\n",
        encoding="utf-8",
    )
    (tmp_path / "cmdline.txt").write_text(
        "python3 -m verl.trainer.main_ppo trainer.nnodes=1 trainer.n_gpus_per_node=4 "
        "actor_rollout_ref.rollout.name=sglang actor_rollout_ref.rollout.gpu_memory_utilization=0.6\n",
        encoding="utf-8",
    )
    obs = OomContext().examine(open_run(str(tmp_path)))
    assert obs.outcome == "engine_side"
    assert obs.evidence["in_engine"] is True


# verl's hybrid engine waking vLLM for rollout (verl-project/verl#575, #302): the traceback as pasted,
# its `Traceback` header cut off and each line behind Ray's actor prefix
VERL_WAKE = [
    ("/verl/verl/workers/fsdp_workers.py", 463, "generate_sequences", "with self.rollout_sharding_manager:"),
    ("/verl/verl/workers/sharding_manager/fsdp_vllm.py", 79, "__enter__", "self.inference_engine.wake_up()"),
    ("/usr/local/lib/python3.11/dist-packages/vllm/entrypoints/llm.py", 1244, "wake_up", "self.llm_engine.wake_up()"),
    ("/usr/local/lib/python3.11/dist-packages/vllm/executor/executor_base.py", 216, "wake_up",
     'self.collective_rpc("wake_up")'),
]


def headerless(frames, error: str, prefix: str = "(main_task pid=1748945)") -> str:
    lines = []
    for path, no, fn, code in frames:
        lines += [f'{prefix}   File "{path}", line {no}, in {fn}', f"{prefix}     {code}"]
    return "\n".join(lines + [f"{prefix} {error}"]) + "\n"


@pytest.mark.parametrize("error", [OOM, "RuntimeError: CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:62"])
def test_an_oom_inside_the_engines_wake_up_is_the_colocated_switch_without_args_or_metrics(tmp_path, error):
    (tmp_path / "job.log").write_text(headerless(VERL_WAKE, error), encoding="utf-8")
    obs = OomContext().examine(open_run(str(tmp_path)))
    assert obs.outcome == "phase_switch"
    assert obs.evidence["oom_in_engine_wake"] is True
    assert obs.evidence["colocate"] == "shown by the engine's sleep / wake-up frames"
    assert 'File "/usr/local/lib/python3.11/dist-packages/vllm/executor/executor_base.py", line 216, in wake_up' in (
        obs.evidence["frames"])


def test_an_oom_in_a_weight_sync_alone_does_not_show_colocation(tmp_path):
    frames = [("/verl/verl/workers/fsdp_workers.py", 500, "update_weights", "self.sync()")]
    (tmp_path / "job.log").write_text(headerless(frames, OOM), encoding="utf-8")
    obs = OomContext().examine(open_run(str(tmp_path)))
    assert obs.outcome == "training_step"
    assert obs.evidence["oom_in_engine_wake"] is False
    assert obs.evidence["switch"] == "unknown colocation"


def test_frames_above_the_error_are_read_only_when_they_touch_it(tmp_path):
    text = headerless(VERL_WAKE, "some other line").replace("(main_task pid=1748945) some other line\n", "")
    (tmp_path / "job.log").write_text(text + "\nINFO unrelated\n" + OOM + "\n", encoding="utf-8")
    obs = OomContext().examine(open_run(str(tmp_path)))
    assert obs.evidence["frames"] == []
    assert obs.outcome != "phase_switch"


# sgl-project/sglang#14092, as pasted: the engine's memory saver fails to create memory while verl's
# trainer waits on its request to resume the engine; Ray logs the trainer's timeout after the OOM.
SAVER_OOM = ("(SGLangHttpServer pid=250977) [torch_memory_saver.cpp] CUresult error: 2 (out of memory)  "
             "file=csrc/utils.h func=cu_mem_create line=194\n")
RESUME_TIMEOUT = ("(WorkerDict pid=209740) WARNING:2025-11-28 16:00:45,396:Async request to resume_memory_occupation "
                  "timed out (attempt {n})\n")


def test_an_engine_oom_under_a_resume_request_that_timed_out_is_the_colocated_switch(tmp_path):
    (tmp_path / "job.log").write_text(SAVER_OOM + RESUME_TIMEOUT.format(n=1) + RESUME_TIMEOUT.format(n=2),
                                      encoding="utf-8")
    obs = OomContext().examine(open_run(str(tmp_path)))
    assert obs.outcome == "phase_switch", obs.summary
    assert obs.evidence["oom_in_engine_wake"] is True
    assert obs.evidence["colocate"] == "shown by the trainer's request to resume the engine's memory"
    assert obs.evidence["resume_request"]["where"].endswith("job.log:2")


def test_a_resume_timeout_after_another_phase_marker_does_not_place_the_oom(tmp_path):
    # a weight update logged between the OOM and the timeout: the OOM came before that phase
    update = "(WorkerDict pid=209740) INFO:2025-11-28 16:00:40,000:update_weights from the trainer\n"
    (tmp_path / "job.log").write_text(SAVER_OOM + update + RESUME_TIMEOUT.format(n=1), encoding="utf-8")
    obs = OomContext().examine(open_run(str(tmp_path)))
    assert obs.outcome == "engine_side", obs.summary
    assert obs.evidence["oom_in_engine_wake"] is False


def test_a_resume_that_succeeded_after_the_oom_does_not_place_it(tmp_path):
    done = "(WorkerDict pid=209740) INFO:2025-11-28 16:00:45,396:resume_memory_occupation done in 2.1s\n"
    (tmp_path / "job.log").write_text(SAVER_OOM + done, encoding="utf-8")
    obs = OomContext().examine(open_run(str(tmp_path)))
    assert obs.outcome == "engine_side", obs.summary


def test_torch_memory_savers_oom_is_the_engines_outside_the_slime_family(tmp_path):
    # fzyzcjy/torch_memory_saver#4: an SGLang engine launched with the memory saver; result=2 is
    # CUDA_ERROR_OUT_OF_MEMORY. slime also puts its trainer under the saver, so there the line alone places nothing
    line = "[torch_memory_saver.cpp] CUresult error  result=2 file=csrc/torch_memory_saver.cpp func=cu_mem_create line=103 (5)\n"
    (tmp_path / "job.log").write_text(line, encoding="utf-8")
    obs = OomContext().examine(open_run(str(tmp_path)))
    assert obs.outcome == "engine_side" and "inside the SGLang engine" in obs.summary
    slime = tmp_path / "slime"
    slime.mkdir()
    (slime / "job.log").write_text(f"{T} [2026-08-01 10:00:20] timer.py:24 - Timer train_wait start\n" + line,
                                   encoding="utf-8")
    run = open_run(str(slime))
    assert run.framework == "slime"
    assert OomContext().examine(run).outcome != "engine_side"


def test_frames_pasted_under_the_rest_of_the_oom_message_place_it(tmp_path):
    # skypilot-org/skypilot#10269: torch's message wrapped onto a second line, then the frame the user kept
    log = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.84 GiB.\n"
           "GPU 0 has a total capacity of 79.19 GiB of which 3.79 GiB is free.\n"
           "  ...\n"
           '  File "slime/utils/ppo_utils.py", line 219, in vocab_parallel_softmax\n'
           "    normalized_logits = logits.sub_(logits_max) if inplace else logits - logits_max\n")
    (tmp_path / "job.log").write_text(log, encoding="utf-8")
    obs = OomContext().examine(open_run(str(tmp_path)))
    assert obs.outcome == "logprob_pass"
    assert any("vocab_parallel_softmax" in f for f in obs.evidence["frames"])


@pytest.mark.parametrize("log", [
    # vLLM V0's worker check, logged without its ValueError (vllm-project/vllm#10517)
    "The model's max seq len (29000) is larger than the maximum number of tokens that can be stored in KV cache "
    "(23648). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.\n",
    # vLLM V1's, the message wrapped by a terminal (SergiioB/intel-arc-pro-b70-inference-cookbook#4)
    "(EngineCore pid=316) ValueError: To serve at least one request with the model's max seq len (100000), (4.26 GiB KV cach\n"
    "e is needed, which is larger than the available KV cache memory (4.25 GiB). Based on the avai\n",
])
def test_a_kv_cache_too_small_for_one_sequence_asks_for_a_shorter_context_not_a_smaller_share(tmp_path, capsys, log):
    import json

    from triage.cli import main

    make_run(tmp_path, log)
    assert main(["run", str(tmp_path), "--json", "--no-cache"]) == 0
    rc = json.loads(capsys.readouterr().out)["root_cause"]
    assert rc["id"] == "engine.oom_illegal_memory"
    assert rc["remedy"].startswith("vLLM's KV cache, sized from its memory share once the weights are loaded, cannot "
                                   "hold one sequence of its max_model_len: lower max_model_len")
    assert "Lower --sglang-mem-fraction-static" not in rc["remedy"]


def test_a_pasted_oom_with_no_step_record_is_not_said_to_come_before_any_step(tmp_path):
    # NVIDIA-NeMo/RL#3244: the user pasted the OOM alone, from a run that failed at step 13
    from triage.sources import open_text_run
    log = traceback("(MegatronPolicyWorker pid=35477)",
                    [("/opt/nemo-rl/nemo_rl/models/policy/workers/megatron_policy_worker.py", 900, "train")])
    obs = OomContext().examine(open_text_run(log))
    assert "with no train step record in the fragment" in obs.summary
    assert "before any train step" not in obs.summary


def test_an_oom_in_vllms_sleep_allocator_after_openrlhfs_training_bar_is_the_switch_back(tmp_path):
    # TideDra/lmm-r1#43 (OpenRLHF): the first epoch's bar ends, then vLLM's sleep-mode allocator runs out as it wakes up
    from triage.sources import open_text_run
    log = ("Train epoch [1/1]:  88%|########8 | 7/8 [01:46<00:14, 14.28s/it, pg=-0.795, rm=0.525, glen=1080.0, kl=0, "
           "act_lr=5.88e-9]\n"
           "Train epoch [1/1]: 100%|##########| 8/8 [02:00<00:00, 14.50s/it, pg=0.319, rm=0.163, glen=965, kl=0, "
           "act_lr=6.72e-9]\n"
           "(LLMRayActor pid=347862) CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:62\n")
    obs = OomContext().examine(open_text_run(log))
    assert obs.outcome == "phase_switch", obs.summary
    assert obs.evidence["last_step"] == 8
    assert "sleep-mode allocator" in obs.evidence["colocate"]
    # the same OOM with no training before it is the engine's own start
    obs = OomContext().examine(open_text_run(log.splitlines(keepends=True)[-1]))
    assert obs.outcome == "engine_side", obs.summary


def test_an_oom_of_an_inference_server_launched_alone_is_the_engines(tmp_path):
    # vllm-project/vllm-ascend#5020: `vllm serve` with a memory fraction over what the card had, then the OOM
    from triage.sources import open_text_run
    log = ("vllm serve Qwen/Qwen3-Next-80B-A3B-Instruct \\\\\n--tensor-parallel-size 4 --max-model-len 4096 \\\\\n"
           "--gpu-memory-utilization 0.85\n"
           "RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB (NPU 0; 60.96 GiB total capacity; 55.91 GiB "
           "already allocated)\n")
    obs = OomContext().examine(open_text_run(log))
    assert obs.outcome == "engine_side", obs.summary
    assert "vLLM engine" in obs.summary
    # the same OOM under a training command is the trainer's until something names the engine
    obs = OomContext().examine(open_text_run(log.replace("vllm serve", "python3 train.py")))
    assert obs.outcome != "engine_side", obs.summary
    # opendatalab/MinerU#3418: a VLM's OOM in SGLang's server, its launcher reporting the child that failed
    oom = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 42.00 MiB. GPU 0 has a total capacity of "
           "23.49 GiB of which 55.38 MiB is free.\n\n")
    obs = OomContext().examine(open_text_run(
        oom + "[2025-09-07 06:10:23] Received sigquit from a child process. It usually means the child failed.\nKilled\n"))
    assert obs.outcome == "engine_side" and "SGLang engine" in obs.summary, obs.summary
    assert OomContext().examine(open_text_run(oom + "Killed\n")).outcome != "engine_side"


def test_an_oom_in_verls_actor_update_is_the_training_step(tmp_path):
    # verl's FSDP worker updating the actor (verl/workers/fsdp_workers.py update_actor)
    log = traceback(
        "(WorkerDict pid=118848)",
        [("/workspace/verl/verl/single_controller/ray/base.py", 432, "func"),
         ("/workspace/verl/verl/workers/fsdp_workers.py", 611, "update_actor"),
         ("/workspace/verl/verl/workers/actor/dp_actor.py", 402, "update_policy")],
    )
    obs = OomContext().examine(make_run(tmp_path, log))
    assert obs.outcome == "training_step"
    assert "no timer or frame names" not in obs.summary


def test_the_sleep_allocators_oom_over_a_wake_up_traceback_is_the_colocated_switch(tmp_path):
    # unslothai/unsloth#3302: a GRPO run resumed from its checkpoint; the engine slept, then its wake-up failed in
    # vLLM's sleep-mode allocator, whose message comes before Python's traceback of the call
    log = ("INFO 09-10 12:12:34 [gpu_worker.py:115] Sleep mode freed 9.19 GiB memory, 7.66 GiB memory is still in use.\n"
           "CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:62\n"
           "Traceback (most recent call last):\n"
           '  File "/home/u/RL/train_reasoning.py", line 303, in <module>\n'
           "    trainer.train(resume_from_checkpoint=True)\n"
           '  File "/home/u/RL/unsloth_compiled_cache/UnslothGRPOTrainer.py", line 1795, in _prepare_inputs\n'
           "    self.llm.wake_up()\n"
           '  File "/home/u/.venv/lib/python3.12/site-packages/vllm/entrypoints/llm.py", line 1572, in wake_up\n'
           "    self.llm_engine.wake_up(tags)\n")
    (tmp_path / "job.log").write_text(log, encoding="utf-8")
    obs = OomContext().examine(open_run(str(tmp_path)))
    assert obs.outcome == "phase_switch", obs.summary
    assert "the engine resumed for the next rollout" in obs.summary
