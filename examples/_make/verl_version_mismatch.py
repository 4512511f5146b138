"""verl-vllm-version-mismatch: verl's FSDP workers start vLLM with `enable_sleep_mode=True`, which the
installed vLLM's EngineArgs does not take yet; `actor_rollout_init_model` fails inside vLLM's LLM()
(vllm/entrypoints/llm.py) and Ray wraps it in the driver's RayTaskError(TypeError)
(verl-project/verl verl/workers/rollout/vllm_rollout/vllm_rollout_spmd.py, verl/trainer/main_ppo.py).
"""

from __future__ import annotations

from common import Log, example_dir, expected, write_text

NAME = "verl-vllm-version-mismatch"
TASK = "TaskRunner pid=1893, ip=10.0.0.21"
WORKER = "WorkerDict pid=2410, ip=10.0.0.21"

CMD = """python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo \\
    data.train_files=/data/gsm8k/train.parquet data.val_files=/data/gsm8k/test.parquet \\
    data.train_batch_size=256 data.max_prompt_length=512 data.max_response_length=1024 \\
    actor_rollout_ref.model.path=Qwen/Qwen2.5-3B-Instruct actor_rollout_ref.actor.optim.lr=1e-6 \\
    actor_rollout_ref.actor.ppo_mini_batch_size=64 actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8 \\
    actor_rollout_ref.rollout.name=vllm actor_rollout_ref.rollout.n=5 \\
    actor_rollout_ref.rollout.gpu_memory_utilization=0.6 actor_rollout_ref.rollout.tensor_model_parallel_size=2 \\
    trainer.n_gpus_per_node=8 trainer.nnodes=1 trainer.total_epochs=15 trainer.logger=['console']
"""

REMOTE = '''  File "/workspace/verl/verl/single_controller/ray/base.py", line 663, in func
    return getattr(self.worker_dict[key], name)(*args, **kwargs)
  File "/workspace/verl/verl/single_controller/base/decorator.py", line 540, in inner
    return func(*args, **kwargs)
  File "/workspace/verl/verl/workers/fsdp_workers.py", line 612, in init_model
    self.rollout, self.rollout_sharding_manager = self._build_rollout(
  File "/workspace/verl/verl/workers/fsdp_workers.py", line 478, in _build_rollout
    rollout = vLLMRollout(model_path=local_path, config=self.config.rollout, tokenizer=self.tokenizer,
  File "/workspace/verl/verl/workers/rollout/vllm_rollout/vllm_rollout_spmd.py", line 150, in __init__
    self.inference_engine = LLM(
  File "/usr/local/lib/python3.10/dist-packages/vllm/utils.py", line 1022, in inner
    return fn(*args, **kwargs)
  File "/usr/local/lib/python3.10/dist-packages/vllm/entrypoints/llm.py", line 177, in __init__
    engine_args = EngineArgs('''


def build() -> None:
    d = example_dir(NAME)
    write_text(d / "cmdline.txt", CMD)
    log = Log("2026-08-16 11:20:00", seed=351)
    log.raw("2026-08-16 11:20:00,118\tINFO worker.py:1841 -- Started a local Ray instance. View the dashboard at 127.0.0.1:8265 ")
    log.raw("{'actor_rollout_ref': {'actor': {'ppo_mini_batch_size': 64, 'ppo_micro_batch_size_per_gpu': 8}, "
            "'rollout': {'name': 'vllm', 'n': 5, 'gpu_memory_utilization': 0.6, 'tensor_model_parallel_size': 2}}}", TASK)
    log.raw("Using dataset class: RLHFDataset", TASK)
    log.raw("dataset len: 7473", TASK)
    log.raw("Size of train dataloader: 29, Size of val dataloader: 1", TASK)
    log.raw("Total training steps: 435", TASK)
    log.raw("Model config after override: Qwen2Config {", WORKER)
    log.raw('  "architectures": ["Qwen2ForCausalLM"],', WORKER)
    log.raw("}", WORKER)
    log.raw("Qwen2ForCausalLM contains 3.09B parameters", WORKER)
    log.raw("Before building vllm rollout, memory allocated (GB): 1.44, memory reserved (GB): 1.52, "
            "device memory used/total (GB): 3.21/79.11", WORKER)
    log.raw("Traceback (most recent call last):", TASK)
    for line in ('  File "/workspace/verl/verl/trainer/main_ppo.py", line 187, in run',
                 "    trainer.init_workers()",
                 '  File "/workspace/verl/verl/trainer/ppo/ray_trainer.py", line 812, in init_workers',
                 "    self.actor_rollout_wg.init_model()",
                 '  File "/workspace/verl/verl/single_controller/ray/base.py", line 49, in __call__',
                 "    output = ray.get(output)"):
        log.raw(line, TASK)
    log.raw("ray.exceptions.RayTaskError(TypeError): ray::WorkerDict.actor_rollout_init_model() (pid=2410, ip=10.0.0.21, "
            "actor_id=7c0e19f2b3a44d5e6f70810901000000, repr=<verl.single_controller.ray.base.WorkerDict object at 0x7f2b44c1e0d0>)", TASK)
    for line in REMOTE.splitlines():
        log.raw(line, TASK)
    log.raw("TypeError: EngineArgs.__init__() got an unexpected keyword argument 'enable_sleep_mode'", TASK)
    write_text(d / "main_ppo.log", log.text())
    expected(d, "deps.version_mismatch",
             "verl passes enable_sleep_mode to vLLM's LLM(); the installed vLLM's EngineArgs rejects it "
             "(TypeError raised in vllm/entrypoints/llm.py, called from verl's vllm_rollout_spmd.py)")


if __name__ == "__main__":
    build()
