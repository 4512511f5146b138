"""inductor-cache-jsondecode: eight training ranks share /tmp/torchinductor_root; one rank reads a
cache entry another rank is still writing, and torch.compile fails with a JSONDecodeError in
inductor's cache code during the first log-prob pass.
"""

from __future__ import annotations

import random

from common import (ROLLOUT, TRAIN, Log, base_args, base_flags, example_dir, expected, finish_rollout, math_sample,
                    megatron_startup, multiline_command, placement, ray_submit_banner, rollout_perf, sglang_engines,
                    write_text)

NAME = "inductor-cache-jsondecode"
RANK5 = "MegatronTrainRayActor pid=2236"

FRAMES = """  File "/root/slime/slime/backends/megatron_utils/actor.py", line 363, in compute_log_prob
    return forward_only(
           ^^^^^^^^^^^^^
  File "/root/slime/slime/backends/megatron_utils/model.py", line 352, in forward_only
    forward_data_store += forward_backward_func(
                          ^^^^^^^^^^^^^^^^^^^^^^
  File "/root/Megatron-LM/megatron/core/pipeline_parallel/schedules.py", line 594, in forward_backward_no_pipelining
    output_tensor, num_tokens = forward_step(
                                ^^^^^^^^^^^^^
  File "/root/Megatron-LM/megatron/core/pipeline_parallel/schedules.py", line 423, in forward_step
    outputs = loss_func(output_tensor)
              ^^^^^^^^^^^^^^^^^^^^^^^^
  File "/root/slime/slime/backends/megatron_utils/loss.py", line 171, in get_log_probs_and_entropy
    log_prob, entropy = calculate_log_probs_and_entropy(
                        ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/usr/local/lib/python3.12/dist-packages/torch/_dynamo/eval_frame.py", line 841, in compile_wrapper
    raise e.with_traceback(None) from e.__cause__  # User compiler error
    ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:
JSONDecodeError: Expecting value: line 1 column 1 (char 0)

Set TORCHDYNAMO_VERBOSE=1 for the internal stack trace (please do this especially if you're reporting a bug to PyTorch). For even more developer context, set TORCH_LOGS="+dynamo\""""

INNER = """Traceback (most recent call last):
  File "/usr/local/lib/python3.12/dist-packages/torch/_inductor/runtime/autotune_cache.py", line 341, in _read
    best_config = json.loads(content)
                  ^^^^^^^^^^^^^^^^^^^
  File "/usr/lib/python3.12/json/__init__.py", line 346, in loads
    return _default_decoder.decode(s)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/usr/lib/python3.12/json/decoder.py", line 338, in decode
    obj, end = self.raw_decode(s, idx=_w(s, 0).end())
               ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/usr/lib/python3.12/json/decoder.py", line 356, in raw_decode
    raise JSONDecodeError("Expecting value", s, err.value) from None
json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)

The above exception was the direct cause of the following exception:
"""


def build() -> None:
    d = example_dir(NAME)
    flags = base_flags()
    args = base_args()
    write_text(d / "cmdline.txt", multiline_command(flags))
    log = Log("2026-08-09 13:05:00", seed=81)
    ray_submit_banner(log, "raysubmit_Vx3Lr9Fe2Jk6Cu8P")
    log.tick(6)
    placement(log, 8)
    sglang_engines(log, 4, 2, "/root/Qwen2.5-7B-Instruct/")
    log.tick(9)
    megatron_startup(log, args)
    log.raw(" loading distributed checkpoint from /root/Qwen2.5-7B-Instruct_torch_dist/ at iteration 0", TRAIN)
    log.tick(45)
    log.raw("  successfully loaded checkpoint from /root/Qwen2.5-7B-Instruct_torch_dist/ [ t 1/2, p 1/1 ] at iteration 0", TRAIN)
    log.timer("update_weights", "start", TRAIN)
    log.tick(7.0)
    log.timer("update_weights", "end", TRAIN, 7.0)
    log.timer("train_wait", "start", TRAIN)
    log.tick(98)
    p, a, label, reward = math_sample(1)
    finish_rollout(log, p, a, label, reward)
    perf = rollout_perf(random.Random(81), resp_mean=1203.4, resp_max=8192, trunc=0.01171875, rollout_time=97.6,
                        zero_std={"0": 15, "1": 3})
    log.metrics("perf", 0, perf, "rollout_metrics.py:268", ROLLOUT)
    log.tick(2)
    log.timer("train_wait", "end", TRAIN, 100.6)
    log.timer("train", "start", TRAIN)
    log.timer("data_preprocess", "start", TRAIN)
    log.timer("data_preprocess", "end", TRAIN, 1.2)
    log.timer("ref_log_probs", "start", TRAIN)
    log.tick(44)
    log.raw(f"[rank5]:W0809 13:09:31.204000 2236 torch/_inductor/utils.py:1250] [0/0] Not enough SMs to use max_autotune_gemm mode", RANK5)
    log.tick(3)
    log.raw("Traceback (most recent call last):")
    log.raw('  File "/root/slime/train.py", line 104, in <module>')
    log.raw("    train(args)")
    log.raw('  File "/root/slime/train.py", line 72, in train')
    log.raw("    ray.get(actor_model.async_train(rollout_id, rollout_data_ref))")
    log.raw('  File "/usr/local/lib/python3.12/dist-packages/ray/_private/worker.py", line 2961, in get')
    log.raw("    values, debugger_breakpoint = worker.get_objects(object_refs, timeout=timeout)")
    log.raw("                                  ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^")
    log.raw('  File "/usr/local/lib/python3.12/dist-packages/ray/_private/worker.py", line 1026, in get_objects')
    log.raw("    raise value.as_instanceof_cause()")
    log.raw("ray.exceptions.RayTaskError(BackendCompilerFailed): ray::MegatronTrainRayActor.train() (pid=2236, ip=10.0.0.11, "
            "actor_id=0f9e8d7c6b5a4f3e2d1c0b9a01000000, repr=<slime.backends.megatron_utils.actor.MegatronTrainRayActor "
            "object at 0x7f51a2b3c4d0>)")
    log.raw('  File "/root/slime/slime/backends/megatron_utils/actor.py", line 441, in train')
    log.raw("    self.compute_log_prob(data_iterator, num_microbatches, store_prefix=\"ref_\")")
    log.raw(FRAMES)
    log.raw("---------------------------------------")
    log.raw("Job 'raysubmit_Vx3Lr9Fe2Jk6Cu8P' failed")
    log.raw("---------------------------------------")
    # The rank's own stderr, printed by the actor while the driver was already exiting.
    log.raw(INNER, RANK5)
    write_text(d / "job.log", log.text())
    expected(d, "compile.cache_corrupt",
             "rank 5 fails in torch.compile: BackendCompilerFailed ... JSONDecodeError: Expecting value, raised from "
             "torch/_inductor/runtime/autotune_cache.py (inductor cache read/write conflict)")


if __name__ == "__main__":
    build()
