"""oom-max-tokens-per-gpu: --use-dynamic-batch-size with --max-tokens-per-gpu 32768 while
--rollout-max-response-len is 8192 (cp 1). Rollouts 0-2 train, then rollout 3's long
responses pack 32k-token micro-batches and the training step runs out of GPU memory
in the MLP's activation.
"""

from __future__ import annotations

import random

from common import (ROLLOUT, TRAIN, Log, base_args, base_flags, example_dir, expected, finish_rollout, math_sample,
                    megatron_startup, multiline_command, placement, ray_submit_banner, rollout_perf, sglang_engines,
                    slime_rollout, train_perf, write_text)

NAME = "oom-max-tokens-per-gpu"
ACTOR3 = "MegatronTrainRayActor pid=2234"

REMOTE_FRAMES = """  File "/root/slime/slime/backends/megatron_utils/actor.py", line 433, in train
    self.train_actor(rollout_id, rollout_data)
  File "/root/slime/slime/backends/megatron_utils/actor.py", line 525, in train_actor
    train(
  File "/root/slime/slime/backends/megatron_utils/model.py", line 961, in train
    loss_dict, grad_norm = train_one_step(
                           ^^^^^^^^^^^^^^^
  File "/root/slime/slime/backends/megatron_utils/model.py", line 812, in train_one_step
    losses_reduced = forward_backward_func(
                     ^^^^^^^^^^^^^^^^^^^^^^
  File "/root/Megatron-LM/megatron/core/pipeline_parallel/schedules.py", line 594, in forward_backward_no_pipelining
    output_tensor, num_tokens = forward_step(
                                ^^^^^^^^^^^^^
  File "/root/Megatron-LM/megatron/core/pipeline_parallel/schedules.py", line 402, in forward_step
    output_tensor, loss_func = forward_step_func(data_iterator, model)
                               ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/root/slime/slime/backends/megatron_utils/model.py", line 741, in forward_step
    output_tensor = model(
                    ^^^^^^
  File "/usr/local/lib/python3.12/dist-packages/torch/nn/modules/module.py", line 1773, in _wrapped_call_impl
    return self._call_impl(*args, **kwargs)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/root/Megatron-LM/megatron/core/models/gpt/gpt_model.py", line 376, in forward
    hidden_states = self.decoder(
                    ^^^^^^^^^^^^^
  File "/root/Megatron-LM/megatron/core/transformer/transformer_block.py", line 552, in forward
    hidden_states = self._checkpointed_forward(
                    ^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/root/Megatron-LM/megatron/core/transformer/transformer_block.py", line 432, in _checkpointed_forward
    hidden_states, context = checkpoint_handler(
                             ^^^^^^^^^^^^^^^^^^^
  File "/root/Megatron-LM/megatron/core/tensor_parallel/random.py", line 480, in checkpoint
    return CheckpointFunction.apply(function, distribute_saved_activations, *args)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/root/Megatron-LM/megatron/core/transformer/transformer_layer.py", line 498, in _forward_mlp
    mlp_output_with_bias = self.mlp(pre_mlp_layernorm_output)
                           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/root/Megatron-LM/megatron/core/transformer/mlp.py", line 151, in forward
    intermediate_parallel = bias_swiglu_impl(intermediate_parallel, bias_parallel)
                            ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/root/Megatron-LM/megatron/core/fusions/fused_bias_swiglu.py", line 192, in bias_swiglu_impl
    output = SwiGLUFunction.apply(x, fp8_input_store, cpu_offload_input)
             ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/root/Megatron-LM/megatron/core/fusions/fused_bias_swiglu.py", line 113, in forward
    return swiglu(input)
           ^^^^^^^^^^^^^"""

OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 9.25 GiB. GPU 3 has a total capacity of 79.11 GiB "
       "of which 5.87 GiB is free. Process 1129403 has 73.22 GiB memory in use. Of the allocated memory 61.38 GiB is "
       "allocated by PyTorch, and 10.41 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is "
       "large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for "
       "Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)")


def build() -> None:
    d = example_dir(NAME)
    rng = random.Random(41)
    flags = base_flags()
    flags["max_tokens_per_gpu"] = 32768
    args = base_args()
    args["max_tokens_per_gpu"] = 32768
    write_text(d / "cmdline.txt", multiline_command(flags))

    log = Log("2026-08-04 09:30:00", seed=41)
    ray_submit_banner(log, "raysubmit_tY3Vn8cPqL2wHm5J")
    log.tick(6)
    placement(log, 8)
    sglang_engines(log, 4, 2, "/root/Qwen2.5-7B-Instruct/")
    log.tick(9)
    megatron_startup(log, args)
    log.raw(" loading distributed checkpoint from /root/Qwen2.5-7B-Instruct_torch_dist/ at iteration 0", TRAIN)
    log.tick(47)
    log.raw("  successfully loaded checkpoint from /root/Qwen2.5-7B-Instruct_torch_dist/ [ t 1/2, p 1/1 ] at iteration 0", TRAIN)
    log.timer("update_weights", "start", TRAIN)
    log.tick(7.0)
    log.timer("update_weights", "end", TRAIN, 7.0)
    log.timer("train_wait", "start", TRAIN)

    ref0 = -0.3041
    for rid in range(3):
        resp = 1460 + 310 * rid + rng.uniform(-40, 40)
        trunc = [0.01953125, 0.02734375, 0.0390625][rid]
        perf = rollout_perf(rng, resp_mean=resp, resp_max=8192, trunc=trunc, rollout_time=resp * 0.083,
                            zero_std={"0": 13 - rid, "1": 3 + rid})
        ref = ref0 + rng.uniform(-0.01, 0.01)
        logp = ref if rid == 0 else ref + 0.0011 * rid
        rollout = {
            "rollout/response_lengths": resp, "rollout/rewards": rng.choice([0.0, -1.862645149230957e-09]),
            "rollout/raw_reward": 0.29 + 0.02 * rid, "rollout/truncated": trunc,
            "rollout/rollout_log_probs": logp - 0.0043, "rollout/total_lengths": resp + 141.7,
            "rollout/log_probs": logp, "rollout/ref_log_probs": ref, "rollout/entropy": 0.371 - 0.002 * rid,
            "rollout/advantages": rng.uniform(-0.003, 0.003), "rollout/returns": rng.uniform(-0.003, 0.003),
        }
        step = {
            "train/loss": rng.uniform(-0.01, 0.01), "train/pg_loss": rng.uniform(-0.01, 0.01),
            "train/entropy_loss": rollout["rollout/entropy"], "train/pg_clipfrac": 0.0, "train/ppo_kl": 0.0,
            "train/train_rollout_logprob_abs_diff": 0.0128 + rng.uniform(-0.001, 0.001),
            "train/kl_loss": 0.0 if rid == 0 else 0.0001 * rid, "train/grad_norm": 0.12 + 0.03 * rng.random(),
            "train/lr-pg_0": 1e-06, "train/lr-pg_1": 1e-06, "train/global_batch_size": 256, "train/step": rid,
        }
        tperf = train_perf(rng, wait=perf["perf/rollout_time"] + 3, preprocess=1.2, ref=14.1 + 2 * rid, logp=14.6 + 2 * rid,
                           train=44.0 + 9 * rid, tokens=256 * (resp + 142))
        slime_rollout(log, rid, finish=math_sample(rid + 2, correct=rid != 1), perf=perf, rollout=rollout,
                      steps=[(rid, step)], tperf=tperf)

    # Rollout 3: the responses got longer; its first 32k-token micro-batch does not fit.
    rid = 3
    perf = rollout_perf(rng, resp_mean=2604.3, resp_max=8192, trunc=0.07421875, rollout_time=231.7,
                        zero_std={"0": 10, "1": 6})
    log.tick(perf["perf/rollout_time"])
    p, a, label, reward = math_sample(5)
    finish_rollout(log, p, a, label, reward)
    log.metrics("perf", rid, perf, "rollout_metrics.py:268", ROLLOUT)
    log.tick(2)
    log.timer("train_wait", "end", TRAIN, 234.9)
    log.timer("train", "start", TRAIN)
    log.timer("data_preprocess", "start", TRAIN)
    log.timer("data_preprocess", "end", TRAIN, 1.3)
    for name, secs in (("ref_log_probs", 21.7), ("log_probs", 22.4)):
        log.timer(name, "start", TRAIN)
        log.tick(secs)
        log.timer(name, "end", TRAIN, secs)
    rollout = {
        "rollout/response_lengths": 2604.3, "rollout/rewards": 0.0, "rollout/raw_reward": 0.3359375,
        "rollout/truncated": 0.07421875, "rollout/rollout_log_probs": -0.3019, "rollout/total_lengths": 2745.9,
        "rollout/log_probs": -0.2977, "rollout/ref_log_probs": -0.3012, "rollout/entropy": 0.3652,
        "rollout/advantages": 0.00118, "rollout/returns": 0.00118,
    }
    log.metrics("rollout", rid, rollout, "train_metric_utils.py:135", TRAIN)
    log.timer("actor_train", "start", TRAIN)
    log.tick(19)
    log.raw("[rank3]:[W804 10:05:31.418220514 CUDACachingAllocator.cpp:1003] Warning: expandable_segments not supported on this platform (function operator())", ACTOR3)
    log.tick(2)
    log.raw("Traceback (most recent call last):")
    log.raw('  File "/root/slime/train.py", line 104, in <module>')
    log.raw("    train(args)")
    log.raw('  File "/root/slime/train.py", line 72, in train')
    log.raw("    ray.get(actor_model.async_train(rollout_id, rollout_data_ref))")
    log.raw('  File "/usr/local/lib/python3.12/dist-packages/ray/_private/auto_init_hook.py", line 22, in auto_init_wrapper')
    log.raw("    return fn(*args, **kwargs)")
    log.raw("           ^^^^^^^^^^^^^^^^^^^")
    log.raw('  File "/usr/local/lib/python3.12/dist-packages/ray/_private/client_mode_hook.py", line 104, in wrapper')
    log.raw("    return func(*args, **kwargs)")
    log.raw("           ^^^^^^^^^^^^^^^^^^^^^")
    log.raw('  File "/usr/local/lib/python3.12/dist-packages/ray/_private/worker.py", line 2961, in get')
    log.raw("    values, debugger_breakpoint = worker.get_objects(object_refs, timeout=timeout)")
    log.raw("                                  ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^")
    log.raw('  File "/usr/local/lib/python3.12/dist-packages/ray/_private/worker.py", line 1026, in get_objects')
    log.raw("    raise value.as_instanceof_cause()")
    log.raw("ray.exceptions.RayTaskError(OutOfMemoryError): ray::MegatronTrainRayActor.train() (pid=2234, ip=10.0.0.11, "
            "actor_id=5c3e0f4d8b1a2e7f9d6c4b3a01000000, repr=<slime.backends.megatron_utils.actor.MegatronTrainRayActor "
            "object at 0x7f2b5c1d3e50>)")
    log.raw(REMOTE_FRAMES)
    log.raw(OOM)
    log.tick(1)
    log.raw("---------------------------------------")
    log.raw("Job 'raysubmit_tY3Vn8cPqL2wHm5J' failed")
    log.raw("---------------------------------------")
    log.raw("")
    log.raw("Status message: Job entrypoint command failed with exit code 1, last available logs (truncated to 20,000 chars):")
    write_text(d / "job.log", log.text())
    expected(d, "memory.max_tokens_per_gpu",
             "CUDA OOM in the train step (Timer actor_train open, frames in train_one_step / forward_backward); "
             "--max-tokens-per-gpu 32768 > rollout_max_response_len 8192 / cp 1 with --use-dynamic-batch-size")


if __name__ == "__main__":
    build()
