"""host-ram-oom-killed: an axolotl GRPO job tokenizes a 200k-row dataset with dataset_processes: 64
on a node with 256 GB of RAM; the kernel's OOM killer ends rank 0 and torchrun reports
`exitcode: -9` (Signal 9 (SIGKILL)). The SIGKILL alone would not say why: the node's kernel log,
kept beside the job log as `dmesg -T` prints it (torvalds/linux mm/oom_kill.c), names the OOM killer
and the same PID.
"""

from __future__ import annotations

from common import Log, example_dir, expected, write_text

NAME = "host-ram-oom-killed"

CONFIG = """base_model: Qwen/Qwen2.5-7B-Instruct
rl: grpo
chat_template: qwen_25
trl:
  beta: 0.04
  max_completion_length: 1024
  num_generations: 8
  use_vllm: true
  vllm_server_host: 10.0.0.21
  vllm_server_port: 8000
  reward_funcs:
    - rewards.accuracy_reward
    - rewards.format_reward
datasets:
  - path: /data/math-mix-200k.jsonl
    type: rewards.math_transform
dataset_processes: 64
dataset_prepared_path: /data/prepared/math-mix-200k
sequence_len: 2048
micro_batch_size: 4
gradient_accumulation_steps: 4
num_epochs: 1
learning_rate: 1.0e-06
lr_scheduler: cosine
warmup_ratio: 0.03
bf16: true
gradient_checkpointing: true
deepspeed: deepspeed_configs/zero2.json
output_dir: ./outputs/qwen7b-grpo-math
logging_steps: 1
"""


# `dmesg -T` on gpu-node-07 around the kill (torvalds/linux mm/oom_kill.c, mm/page_alloc.c show_mem).
DMESG = """[Sun Aug 10 08:17:29 2026] python3 invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0, oom_score_adj=0
[Sun Aug 10 08:17:29 2026] CPU: 41 PID: 4263 Comm: python3 Not tainted 5.15.0-105-generic #115-Ubuntu
[Sun Aug 10 08:17:29 2026] Mem-Info:
[Sun Aug 10 08:17:29 2026] active_anon:63012874 inactive_anon:1043262 isolated_anon:0
[Sun Aug 10 08:17:29 2026] Free swap  = 0kB
[Sun Aug 10 08:17:29 2026] Total swap = 0kB
[Sun Aug 10 08:17:31 2026] oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0-1,global_oom,task_memcg=/user.slice/user-0.slice/session-3.scope,task=python3,pid=4189,uid=0
[Sun Aug 10 08:17:31 2026] Out of memory: Killed process 4189 (python3) total-vm:301234567kB, anon-rss:251823104kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:500000kB oom_score_adj:0
[Sun Aug 10 08:17:32 2026] oom_reaper: reaped process 4189 (python3), now anon-rss:0kB, file-rss:0kB, shmem-rss:0kB
"""


def build() -> None:
    d = example_dir(NAME)
    write_text(d / "cmdline.txt", "accelerate launch --num_processes 7 -m axolotl.cli.train grpo-qwen7b-math.yml\n")
    write_text(d / "grpo-qwen7b-math.yml", CONFIG)
    log = Log("2026-08-10 08:14:01", seed=91)

    def ax(msg: str, where: str, level: str = "INFO", rank: int = 0, pid: int = 4189) -> None:
        log.raw(f"[{log.stamp()},{log.ms:03d}] [{level}] [{where}] [PID:{pid}] [RANK:{rank}] {msg}")

    log.raw(f"W0810 08:14:01.322000 4123 torch/distributed/run.py:792] ")
    log.raw(f"W0810 08:14:01.322000 4123 torch/distributed/run.py:792] *****************************************")
    log.raw(f"W0810 08:14:01.322000 4123 torch/distributed/run.py:792] Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your system being overloaded, please further tune the variable for optimal performance in your application as needed. ")
    log.raw(f"W0810 08:14:01.322000 4123 torch/distributed/run.py:792] *****************************************")
    log.tick(9)
    ax("config:\n" + CONFIG.rstrip(), "axolotl.cli.config.load_cfg:245")
    log.tick(2)
    ax("EOS: 151645 / <|im_end|>", "axolotl.loaders.tokenizer.load_tokenizer:292")
    ax("BOS: None / None", "axolotl.loaders.tokenizer.load_tokenizer:293")
    ax("PAD: 151643 / <|endoftext|>", "axolotl.loaders.tokenizer.load_tokenizer:294")
    ax("UNK: None / None", "axolotl.loaders.tokenizer.load_tokenizer:295")
    log.tick(1)
    ax("Unable to find prepared dataset in /data/prepared/math-mix-200k/5e1c0b9a2f", "axolotl.utils.data.rl._load_or_create_dataset_split:214")
    ax("Loading raw datasets...", "axolotl.utils.data.rl._load_or_create_dataset_split:217")
    log.tick(14)
    log.raw("Generating train split: 200000 examples [00:06, 31911.42 examples/s]")
    for pct, done, elapsed, rate in ((9, 18112, "00:19", 951.27), (23, 46208, "00:44", 1042.66), (41, 82048, "01:17", 1066.91),
                                     (58, 116032, "01:52", 1031.05), (71, 142016, "02:25", 979.43)):
        log.raw(f"Map (num_proc=64):  {pct}%|{'█' * (pct // 10)}{' ' * (10 - pct // 10)}| {done}/200000 [{elapsed}<01:41, {rate} examples/s]")
    log.tick(150)
    log.raw("W0810 08:17:32.118000 4123 torch/distributed/elastic/multiprocessing/api.py:900] Sending process 4190 closing signal SIGTERM")
    log.raw("W0810 08:17:32.118000 4123 torch/distributed/elastic/multiprocessing/api.py:900] Sending process 4191 closing signal SIGTERM")
    log.raw("W0810 08:17:32.119000 4123 torch/distributed/elastic/multiprocessing/api.py:900] Sending process 4192 closing signal SIGTERM")
    log.raw("W0810 08:17:32.119000 4123 torch/distributed/elastic/multiprocessing/api.py:900] Sending process 4193 closing signal SIGTERM")
    log.raw("W0810 08:17:32.119000 4123 torch/distributed/elastic/multiprocessing/api.py:900] Sending process 4194 closing signal SIGTERM")
    log.raw("W0810 08:17:32.120000 4123 torch/distributed/elastic/multiprocessing/api.py:900] Sending process 4195 closing signal SIGTERM")
    log.raw("E0810 08:17:33.201000 4123 torch/distributed/elastic/multiprocessing/api.py:874] failed (exitcode: -9) local_rank: 0 (pid: 4189) of binary: /usr/bin/python3")
    log.raw("""Traceback (most recent call last):
  File "/usr/local/bin/accelerate", line 8, in <module>
    sys.exit(main())
             ^^^^^^
  File "/usr/local/lib/python3.11/dist-packages/accelerate/commands/accelerate_cli.py", line 50, in main
    args.func(args)
  File "/usr/local/lib/python3.11/dist-packages/accelerate/commands/launch.py", line 1226, in launch_command
    multi_gpu_launcher(args)
  File "/usr/local/lib/python3.11/dist-packages/accelerate/commands/launch.py", line 853, in multi_gpu_launcher
    distrib_run.run(args)
  File "/usr/local/lib/python3.11/dist-packages/torch/distributed/run.py", line 909, in run
    elastic_launch(
  File "/usr/local/lib/python3.11/dist-packages/torch/distributed/launcher/api.py", line 138, in __call__
    return launch_agent(self._config, self._entrypoint, list(args))
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/usr/local/lib/python3.11/dist-packages/torch/distributed/launcher/api.py", line 269, in launch_agent
    raise ChildFailedError(
torch.distributed.elastic.multiprocessing.errors.ChildFailedError: 
========================================================
axolotl.cli.train FAILED
--------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
--------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-08-10_08:17:32
  host      : gpu-node-07
  rank      : 0 (local_rank: 0)
  exitcode  : -9 (pid: 4189)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 4189
========================================================""")
    write_text(d / "train.log", log.text())
    write_text(d / "dmesg.txt", DMESG)
    expected(d, "host.ram_exhausted",
             "the kernel: 'Out of memory: Killed process 4189 (python3)' (dmesg), the same PID torchrun reports as "
             "'exitcode: -9' / 'Signal 9 (SIGKILL) received by PID 4189', while tokenizing 200k rows with "
             "dataset_processes: 64 (host RAM, not GPU memory)")


if __name__ == "__main__":
    build()
