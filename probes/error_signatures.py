"""The error that stopped the job, matched against every error message the guides list.

The signatures are data (`signatures.yaml` next to this module): id, regexes, outcome,
guide source and a one-sentence explanation. A job that fails usually prints many
errors: the failing rank's own error, then NCCL aborts and watchdog timeouts on every
other rank, then Ray's wrappers in the driver. The decisive one is the root, not the
cascade, so the rule is:

1. the earliest line (in log order) matched by a *root* signature decides;
2. only when no root signature matches does the earliest *cascade* signature (NCCL
   abort / collective timeout) decide, and only when no unlisted error came before it
   (then that error is the one to locate: `other_error`);
3. with no signature at all, the earliest traceback or fatal error line is
   `other_error`, quoted in the evidence; with none of those, `none`.

A process killed from outside is decided by what says why (`KILL_FAMILY`): memory named
anywhere (the kernel's OOM killer, a cgroup OOM kill, Ray's memory monitor) is
`host_oom_killed`; else the scheduler's own message or a SIGTERM is `sched_ended`; a bare
SIGKILL is only `killed`, which is not memory evidence. Hardware signatures marked
`one_node` count only when their lines come from one node. Each pattern names the
framework source of its wording, quoted in the evidence with the rank and node.

"Log order" is (position of the file in the run's log list, line number): the line
order within a file is the only order every log format keeps (traceback lines carry
no timestamp).
"""

from __future__ import annotations

import bisect
import dataclasses
import os
import re
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import yaml

from triage import safe_io
from triage.errors import TriageError, Unavailable
from triage.finding import UNJUDGED_OUTCOMES, Observation
from triage.formats.log_index import LogIndex, LogLine
from triage.formats.pasted_table import PASTE_BYTES
from triage.formats.slime_log import MAX_TEXT_CHARS, TYPED_EXCEPTION, split_line
from triage.probe import Cost, Probe
from triage.thresholds import count

if TYPE_CHECKING:
    from triage.formats.tracebacks import Chain
    from triage.run.run import Run

SIGNATURE_FILE = "signatures.yaml"
OUTCOMES = (
    "cuda_oom",
    "host_oom_killed",
    "killed",
    "terminated",
    "sched_ended",
    "network_failure",
    "connection_closed",
    "gpu_fault",
    "disk_full",
    "version_mismatch",
    "sample_too_long",
    "batch_size_mismatch",
    "degenerate_groups",
    "nccl_abort",
    "illegal_memory_access",
    "engine_port_conflict",
    "inductor_cache",
    "hf_model_not_found",
    "no_pad_token",
    "eos_boundary",
    "ref_load_missing",
    "nan_check_failed",
    "insufficient_gpus",
    "weight_name_refused",
    "weight_update_refused",
    "converter_no_mapping",
    "reward_fn_failed",
    "groups_filtered_out",
    "no_chat_template",
    "port_unreachable",
    "server_unavailable",
    "hf_config_mismatch",
    # transformers' "cannot find the model" from one process, of a model not shown to exist: a wrong path, a gated repo,
    # an offline setting or a stale cache word it the same (openvla/openvla#82, xyz9911/FLAME#2, lllyasviel/FramePack#66),
    # so the catalog's concurrent read is a suspect, not the cause
    "hf_model_unconfirmed",
    "other_error",
    "none",
)
# Outcomes the probe derives from a signature's match and what surrounds it, never a signature's own.
DERIVED_OUTCOMES = ("hf_model_unconfirmed",)
# Outcomes a signature may name; the last two are what is left when none matches.
SIGNATURE_OUTCOMES = tuple(o for o in OUTCOMES[:-2] if o not in DERIVED_OUTCOMES)

# Outcomes of a process ended from outside, strongest evidence of why first: memory named
# (kernel OOM killer, cgroup, Ray's memory monitor), then the scheduler's own message, then a
# SIGTERM a process reports (a SIGKILL after it makes it the scheduler's pattern), then a bare
# SIGKILL (which alone says nothing about why).
KILL_FAMILY = ("host_oom_killed", "sched_ended", "terminated", "killed")

# srun's report of a task that ended badly (SchedMD/slurm src/srun/step_launch.c: `srun: error: learnfair0824: task 5:
# Exited with exit code 1`, or the signal's name, `tasks 1,3: Aborted`), after which it ends the step: a crash of that
# task, whose own error decides where the log has it (facebookresearch/deit#102, ecmwf/WeatherGenerator#1572)
SRUN_TASK_FAILED = (r"^srun: error: \S+: tasks? [\d,\-]+: (?:Exited with exit code [1-9]|Aborted|Segmentation fault"
                    r"|Bus error|Illegal instruction|Floating point exception)")

# A line in Python's warnings format (warnings.formatwarning: `{file}:{lineno}: {category}: {message}`, the category
# named like a warning): the program printed it and went on, so where the log holds another error it is not where
# the job stopped, whatever error it quotes (modelopt's `import_utils.py:32: UserWarning: Failed to import diffusers plugin due to: ImportError('peft>=0.17.0
# is required …')` in elena-lyulina/Megatron-LM-Attention-Benchmark's logs, one of a run that then hit its time limit)
PY_WARNING_LINE = re.compile(r"\.pyx?:\d+: (?:[A-Za-z_]\w*\.)*[A-Z]\w*Warning: ")
# ... and one that says so itself (modelopt's `You may ignore this warning if you do not need this plugin.`; PEFT's
# `Unable to fetch remote file due to the following error [Errno -3] Temporary failure in name resolution - silently
# ignoring the lookup for the file config.json`, peft/utils/other.py, at a checkpoint save of an offline node in
# vivsn289/Benchmarking-vanilla-llm-to-validate-forgetting's finetune.log, 33 training records after it)
IGNORABLE_WARNING = re.compile(r"\bmay (?:safely )?ignore this warning|\bcan (?:safely )?be ignored|\bsafe to ignore\b"
                               r"|\bsilently ignoring\b", re.I)

# Errors that report another process's death rather than a cause of their own: the
# launcher's summary (torchrun's ChildFailedError) and Ray's actor-death wrappers.
CONSEQUENCE_LINE = re.compile(
    r"\bChildFailedError\b|\bfailed \(exitcode: (?!-(?:4|6|7|8|11)\))-?\d+\) local_rank: \d+|\bActorDiedError\b|\bRayActorError\b|\bActorUnavailableError\b|\bWorkerCrashedError\b"
    r"|\bOwnerDiedError\b|\bLocalRayletDiedError\b|\bRayTaskError\b|\bsigkill_handler\].*\bexits with return code = (?!-9\b)-?\d+"
    # torch.multiprocessing.spawn's report of a child that raised (spawn.py: `ProcessRaisedException:` and `-- Process 0
    # terminated with the following error:` above the child's own traceback): deepspeedai/DeepSpeed#6005
    r"|\bProcessRaisedException\b"
    # Ray's words for a worker process that died (ActorDiedError's message, or its owner's death:
    # ray-project/ray gcs_actor_manager.cc, OWNER_DIED; the raylet's report of a task's worker): the
    # job ends on them, but why the process died is said elsewhere
    r"|The actor is dead because its (?:worker process|owner) has died"
    r"|A worker died or was killed while executing a task by an unexpected system error"
    # a child command's exit reported by the Python that ran it (a build's compiler or CMake: NVIDIA/TransformerEngine#954)
    r"|\bCalledProcessError: Command '.*' returned non-zero exit status \d+"
    # srun's report of a task that ended badly: the task's own error, where the log has it, is its own line
    r"|" + SRUN_TASK_FAILED
)

# How far back (lines, same file) a signature's context may be found when the
# matched line has no traceback frames of its own.
CONTEXT_WINDOW = 60

TEXT_KEY = 200

# A line that ends a job even though no guide lists it: an exception line
# (`RuntimeError: …`, `ray.exceptions.RayTaskError(ValueError): …`) or a hard crash.
# a `raise SomeError(` code line: a statement of Python source, in a frame, a paste or a script printed into its log
RAISE_CODE = r"^\s*raise [A-Z]\w*(?:Error|Exception)\("


FATAL_LINE = re.compile(
    # (`raise Exception(msg)` prints a bare `Exception: msg`: huggingface/trl#3587)
    r"^(?:[\w.]+\.)?(?:[A-Z]\w*(?:Error|Exception|Interrupt)|Exception)\b(?:\([^)]*\))?:"
    # an exception class named otherwise, raised from a package's `errors` / `exceptions` module
    # (`huggingface_hub.errors.OfflineModeIsEnabled: Cannot reach …`, huggingface/kernels#553)
    r"|^(?:[a-z_][\w]*\.)+(?:errors|exceptions)\.[A-Z]\w*: \S"
    # bitsandbytes' CUDA check of its own kernels' calls, printed before any Python error (csrc/ops.cuh
    # CUDA_CHECK_RETURN: `Error an illegal memory access was encountered at line 74 in file /…/csrc/ops.cu`,
    # bitsandbytes-foundation/bitsandbytes#553; `Error invalid device ordinal at line 359 in file …pythonInterface.c`,
    # jllllll/bitsandbytes-windows-webui#7)
    r"|^Error .+ at line \d+ in file \S+\.(?:cu|c|cpp|cuh)\s*$"
    # Triton's kernel that needs more shared memory (or registers) than the GPU has, raised from its autotuner or
    # compiler (`triton.runtime.autotuner.OutOfResources: out of resource: shared memory, Required: 65538, Hardware
    # limit: 65536.`): vllm-project/vllm#2513, state-spaces/mamba#387
    r"|^(?:triton\.[\w.]+\.)?OutOfResources: out of resource: "
    # huggingface_hub's offline refusal, raised from its `utils._http` module in releases before `errors` existed
    # (huggingface/optimum-neuron#535)
    r"|\bOfflineModeIsEnabled: \S"
    # c10's CUDA check as the first line of the error's message, the RuntimeError's type cut off or printed on the line
    # above (c10/cuda/CUDAException.h: `CUDA error: {cudaGetErrorString}`; ROCm's hipified build: `HIP error: …`,
    # sgl-project/sglang#24011)
    r"|^(?:CUDA|HIP) error: \S"
    # ProcessGroupNCCL's watchdog rethrowing the rank's own CUDA error, which ends the process
    # (`Process group watchdog thread terminated with exception: CUDA error: an illegal memory access was
    # encountered`: vllm-project/vllm#6042, sgl-project/sglang#14193; the other ranks' timeouts are its cascade)
    r"|watchdog thread terminated with exception: (?:CUDA|HIP) error: \S"
    # an exception raised without a message prints its name alone (`assert x` -> `AssertionError`),
    # also below a traceback whose head the paste cut off (modelscope/ms-swift#4418: `[rank1]: AssertionError`)
    r"|^(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception)\s*$"
    r"|Fatal Python error"
    # vLLM's multiprocessing worker, the exception's message before its traceback on one line (`Exception in worker
    # VllmWorkerProcess while processing method M: <message>, Traceback …`, vllm-project/vllm#5531)
    r"|\bException in worker \S+ while processing method \w+: \S"
    # SGLang's piecewise CUDA graph capture logging the exception it re-raises, then the hint to disable it
    # (model_executor/forward_context or compilation/piecewise_context_manager.py: `logger.error("Piecewise CUDA Graph
    # failed with error: %s\n%s", e, …)`; the scheduler's traceback under it is the same exception, often cut:
    # sgl-project/sglang#27811, #23351)
    r"|\bPiecewise CUDA Graph failed with error: \S"
    # ROCm's HSA runtime ending a process whose kernel touched memory it may not (ROCR-Runtime: `Memory access fault
    # by GPU node-2 (Agent handle: 0x…) on address 0x…. Reason: Unknown.`, AMD's illegal memory access; iree-org/wave#466)
    r"|\bMemory access fault by GPU node-\d+"
    # abseil's failure signal handler (Ray's workers install it): `*** SIGABRT received at time=1773825404 on cpu 49 ***`
    # (verl-project/verl#5659, after `Cannot load symbol cublasLtGetVersion`)
    # (not SIGTERM: Ray's workers print it when Ray ends them at a normal shutdown, vllm-project/vllm#13437, fixed by
    # vllm-project/vllm#13502's "please ignore because this is the expected termination process in Ray"; a SIGTERM
    # from elsewhere is the kill family's)
    r"|\*\*\* SIG(?!TERM\b)[A-Z]+ received at time=\d+"
    # glog's failure signal handler in its older form (`*** SIGABRT (@0x7fff6d9bf7fa) received by PID 2316 (TID …)`),
    # libc++'s terminate handler (macOS: `libc++abi.dylib: terminating with uncaught exception of type …`), the Ray
    # driver's report that its raylet died (`Raylet is terminated. Termination is unexpected. Possible reasons …`,
    # ray-project/ray#60048) and a process that gives up on its GCS (`Failed to connect to GCS within 60 seconds. GCS
    # may have been killed. … The program will terminate.`, ray-project/kuberay#3897); ray-project/ray#7724
    r"|\*\*\* SIG(?!TERM\b)[A-Z]+ \(@0x[0-9a-f]+\) received by PID \d+"
    r"|\bterminating with uncaught exception of type\b"
    r"|\bRaylet is terminated\. Termination is unexpected\b"
    r"|\bFailed to connect to GCS within \d+ seconds\. GCS may have been killed\b"
    r"|Segmentation fault"
    # the fatal-signal banner of PyTorch's and vLLM's native handlers (`!!!!!!! Segfault encountered
    # !!!!!!!`, then `File "<unknown>", line 0, in …` native frames: modelscope/ms-swift#8306)
    r"|\bSegfault encountered\b"
    # UCX's fatal signal handler (openucx/ucx src/ucs/debug/debug.c: `[host:pid:tid:0] Caught signal 7 (Bus error:
    # nonexistent physical address)`, then `==== backtrace`), NCCL over UCX (NVIDIA/Megatron-LM#516)
    r"|:\d+\] Caught signal \d+ \("
    # the same handler's line without its `[host:pid:tid:0]` prefix (a paste's inline code, ROCm/rocm-systems#3700: Docker's
    # 64 MB /dev/shm), and torch elastic's report of a worker a crash signal ended (`ProcessFailure(…, message='Signal 7
    # (SIGBUS) received by PID 54')`, intelligent-machine-learning/dlrover#1046); SIGKILL and SIGTERM are the kill family's
    r"|\bCaught signal (?:4|6|7|8|11) \((?:Illegal instruction|Aborted|Bus error|Floating point exception|Segmentation fault)"
    r"|\bSignal (?:4|6|7|8|11) \(SIG(?:ILL|ABRT|BUS|FPE|SEGV)\) received by PID \d+"
    r"|core dumped"
    # SGLang's launcher taking the engine down after a child process died (its SIGQUIT handler,
    # python/sglang/srt/entrypoints/engine.py; sgl-project/sglang#3685: `proces` in older releases)
    r"|Received sigquit from a child proces"
    # SGLang's scheduler watchdog: no forward step finished within --watchdog-timeout, so it dumps its
    # stacks and takes the server down (managers/scheduler.py; sgl-project/sglang#3752): the hang comes first
    r"|\bWatchdog timeout \(self\.watchdog_timeout="
    r"|terminate called after throwing"
    # the message of that uncaught C++ exception (libstdc++'s verbose terminate handler prints
    # `  what():  <message>` right under it: gloo's `[enforce fail at …pair.cc:446] …`, sgl-project/sglang#6763)
    r"|^\s*what\(\):\s+\S"
    # glog's fatal check (CHECK() aborts the process): `Check failed: …` in Ray's core worker and raylet
    # (THUDM/slime#72)
    r"|\bCheck failed: "
    r"|\bChildFailedError\b"
    # Ray's core worker that cannot register with its raylet exits (core_worker.cc: `Failed to register worker to
    # Raylet: IOError: …`, logged at ERROR before QuickExit; Jiayi-Pan/TinyZero#7, LeapLabTHU/Absolute-Zero-Reasoner#15)
    r"|\bFailed to register worker to Raylet\b"
    # argparse ends the program on a bad command line (`prog: error: argument command: invalid choice: 'vllm-serve'`,
    # `error: unrecognized arguments: …`; exit 2): a CLI of another version, or a typo (huggingface/trl#3139); a value
    # its type refused (`error: argument --moe-layer-freq: invalid moe_freq_type value: …`, THUDM/slime#386; `error:
    # argument --compilation-config/-O: 1 validation error for CompilationConfig`, VectorInstitute/vector-inference#157)
    r"|^\S[^:]*: error: (?:argument [^:]+: \S|unrecognized arguments: |the following arguments are required: )"
    # torch elastic's summary of a worker that failed (torch/distributed/elastic/multiprocessing/api.py:
    # `failed (exitcode: -11) local_rank: 3 (pid: 2916310) of binary: …`, modelscope/ms-swift#4302): a
    # negative code is the signal that ended the worker, a crash of that rank when it is not a kill
    # (SIGILL, SIGABRT, SIGBUS, SIGFPE, SIGSEGV); any other code reports a worker whose own error is
    # its own line (CONSEQUENCE_LINE)
    r"|\bfailed \(exitcode: -?\d+\) local_rank: \d+"
    # DeepSpeed's launcher on a rank that exited with an error (launch.py sigkill_handler: `[ERROR]
    # [launch.py:321:sigkill_handler] [cmd…] exits with return code = 1`, hiyouga/LlamaFactory#2444): the rank's own
    # error is its own line (CONSEQUENCE_LINE); -9 is the kill family's
    r"|\bsigkill_handler\].*\bexits with return code = -?\d+"
    # CPython refusing the script it was given (Modules/main.c: `python: can't open file '…': [Errno 2] No such file or
    # directory`): a module name passed as a path, a working directory without it (OpenRLHF/OpenRLHF#573)
    r"|\bpython[\d.]*: can't open file '"
    # a build that stopped: the compiler's error at a source line (gcc / clang `file:line:col: fatal error: cudnn.h: No
    # such file or directory`, NVIDIA/TransformerEngine#918, #1309; nvcc's `file.cu(12): error: …`) and CMake's
    # (`CMake Error at cmake/FindCUDNN.cmake:19 (find_library):`, NVIDIA/TransformerEngine#954, #1216); the
    # `subprocess.CalledProcessError` of the setup script that ran them is their consequence (CONSEQUENCE_LINE)
    r"|^\S+?(?::\d+:\d+:|\(\d+\):) (?:fatal )?error: \S"
    r"|^CMake Error(?: at \S+:\d+|:) ?\S"
    # the compiler driver's own error with no source position (`cc1plus: fatal error: cuda_runtime.h: No such file or
    # directory` under a torch extension's JIT build: deepspeedai/DeepSpeed#4889, no CUDA toolkit headers) and the
    # link step's (`collect2: error: ld returned 1 exit status`)
    r"|^(?:cc1(?:plus)?|(?:[\w.-]+-)?(?:gcc|g\+\+|c\+\+)(?:-\d+)?|clang(?:\+\+)?): (?:fatal )?error: \S"
    r"|^collect2: error: ld returned \d+ exit status"
    # Slurm refusing the job before it ran (src/sbatch/sbatch.c `Batch job submission failed: %s`; srun's and salloc's
    # `Unable to allocate resources: %s`, `Job submit/allocate failed: %s`): NVIDIA-NeMo/RL#3052, a time limit over the
    # partition's (`Requested time limit is invalid (missing or exceeds some limit)`)
    r"|^s(?:batch|run|alloc): error: (?:Batch job submission failed|Unable to allocate resources|Job submit/allocate failed): \S"
    r"|The actor is dead because its (?:worker process|owner) has died"
    r"|A worker died or was killed while executing a task by an unexpected system error"
    # NCCL's CUDACHECK: a CUDA call inside NCCL failed, and the collective returns ncclUnhandledCudaError;
    # NCCL's init refusing two ranks on one GPU (init.cc: `Duplicate GPU detected : rank 1 and rank 0 both on
    # CUDA device 40`, ncclInvalidUsage)
    r"|NCCL WARN Cuda failure\b|NCCL WARN Duplicate GPU detected\b"
    # NCCL's own call failing on this rank, named by its enum (torch >= 2.4: `NCCL error: …/NCCLUtils.hpp:268, NCCL
    # version 2.22.3 ncclSystemError: System call (e.g. socket, malloc) or external library call failed …`,
    # huggingface/trl#4737)
    r"|\bnccl(?:SystemError|UnhandledCudaError|InternalError|InvalidUsage|InvalidArgument): \S"
    # Ascend's runtime (CANN) reporting a device error: its error-code banner (`EZ9999: Inner Error!`, `EE9999[PID: 43311]
    # The error from device(chipId:1, …)`, the 9999 codes are the runtime's inner and device errors) and an ACL call
    # failing with a 507xxx runtime code (`aclrtSynchronizeStream(stream) failed: 507015`); Ascend CANN's error-code
    # reference; hw-native-sys/PTOAS#482, Ascend/pytorch#166, hw-native-sys/simpler#2395
    r"|\bE[A-Z]9999(?:\[PID: \d+\])?:? "
    r"|\baclrt\w+(?:\([^)]*\))? failed: 507\d{3}\b"
    # torch's report of an NCCL call that failed on this rank (`NCCL error in: …NCCLUtils.hpp:268, unhandled
    # cuda error`, then NCCL's own name of the result: `ncclUnhandledCudaError: Call to CUDA function failed.`),
    # also when a caller logs it without the exception's type (SGLang's `Failed to initialize custom process
    # group: NCCL error in: …`, areal-project/AReaL#177)
    r"|\bNCCL error in: \S|^nccl(?:UnhandledCuda|System|Internal|Remote)Error: "
    # torch_memory_saver's checks print the failed CUDA call and exit the process (`[torch_memory_saver.cpp]
    # CUresult error  result=1 file=csrc/torch_memory_saver.cpp func=resume`, fzyzcjy/torch_memory_saver#35,
    # verl-project/verl#1911; `CUresult error: 1 (invalid argument) … func=free`, THUDM/slime#1895)
    r"|\[torch_memory_saver\.cpp\] \w+ error\b"
    # vLLM's custom all-reduce CUDACHECK prints the failed call and exits (csrc/custom_all_reduce.cuh: `Failed: Cuda
    # error /workspace/csrc/custom_all_reduce.cuh:164 'invalid argument'`, vllm-project/vllm#56180), and torch_npu's
    # failed call on Ascend (`NPU function error: call failed, error code is 50`, huggingface/trl#5142)
    r"|\bFailed: Cuda error \S+:\d+ '|\bNPU function error: call failed, error code is \d+"
    # Hydra's report of the exception that ended the app (hydra/_internal/utils.py, run_and_report),
    # printed right before its traceback: verl's entry points run under Hydra
    r"|^Error executing job with overrides: "
    # Hydra's short report of an override the composed config does not take (hydra/_internal/config_loader_impl.py
    # `Could not override 'a.b.n'.`, the run never starts; the type is printed only with HYDRA_FULL_ERROR=1):
    # verl-project/verl#4262, PRIME-RL/TTRL#24
    r"|^Could not override '[^']+'\."
    # its other refusals of an override, and OmegaConf's of a key the struct config does not hold, printed alone the same
    # way (`Could not append to config. An item is already at 'trainer.val_before_train'.`, verl-project/verl#820; `Key
    # 'dim_x' is not in struct` under Hydra's `To append to your config use +env.dim_x=6`, mll-lab-nu/RAGEN#49)
    r"|^Could not append to config\. An item is already at '|^Key '[^']+' is not in struct\s*$"
    # torch's strict load_state_dict refusing the keys (`RuntimeError: Error(s) in loading state_dict for GPTModel:`,
    # then a tab-indented line per kind), pasted without the line that named its type (NVIDIA/Megatron-LM#900)
    r"|^\s*(?:Missing|Unexpected) key\(s\) in state_dict: \S"
    # and its line for a tensor of another shape (torch/nn/modules/module.py _load_from_state_dict: `size mismatch for
    # {key}: copying a param with shape {…} from checkpoint, the shape in current model is {…}.`; OpenRLHF/OpenRLHF#651:
    # LoRA weights saved empty, `torch.Size([0])`, under ZeRO-3)
    r"|^\s*size mismatch for \S+: copying a param with shape "
    # pyarrow's ArrowInvalid, the one exception of its hierarchy not named `…Error` (a parquet file that is a Git LFS
    # pointer: `Parquet magic bytes not found in footer`, policy-gradient/GRPO-Zero#1)
    r"|^(?:pyarrow\.lib\.)?ArrowInvalid: \S"
    # srun failing to start a job step (SchedMD/slurm src/srun: `srun: error: Unable to create step for job N: Requested
    # node configuration is not available`, verl-project/verl#548): nothing of the job ran there
    r"|^srun: error: Unable to create step for job\b"
    # srun's report of a task that failed, before `Terminating StepId=…` and slurmstepd's `*** STEP … CANCELLED AT … ***`
    r"|" + SRUN_TASK_FAILED +
    # pyxis (Slurm's container plugin) failing to import or start the job's container image (`slurmstepd: error: pyxis:
    # failed to import docker image`, NVIDIA/pyxis#127: a squashfs path without `/` or `./` taken for a registry's image)
    r"|^slurmstepd: error: pyxis: (?!\s)"
    # Docker refusing the container (`docker: Error response from daemon: could not select device driver "" with
    # capabilities: [[gpu]].`, the NVIDIA container toolkit not installed: OpenBMB/XAgent#273) and the NVIDIA container
    # CLI failing to set the GPUs up in it (`nvidia-container-cli: initialization error: nvml error: driver not loaded`,
    # dstackai/dstack#1080; `mount error: …`, dstackai/dstack#1855)
    r"|^docker: Error response from daemon: \S"
    r"|\bnvidia-container-cli: (?:initialization|mount|detection|ldcache) error: \S"
    # slurmstepd unable to run the batch script or a task's program (src/slurmd/slurmstepd/exec_wait.c / mgr.c: `slurmstepd:
    # error: execve(): /tmp/slurmd/job00089/slurm_script: No such file or directory`): nothing of the job ran
    # (ArjunaCluster/ArjunaUsers#46, the nodes' spool directory)
    r"|^slurmstepd: error: execve\(\): \S"
    # Ray failing to set up an actor's runtime_env (pip / conda / working_dir): the actor is never created
    # (src/ray/raylet/agent_manager.cc `Failed to create runtime env`, gcs_actor_scheduler.cc `… as the runtime environment
    # setup failed`, the job's `runtime_env setup failed`; ray-project/ray#20483, #22472, #38312); the raylet's report that
    # a worker process died before it registered (worker_pool.cc, RLinf/RLinf#227: the environment over ARG_MAX)
    r"|\bFailed to create runtime env\b|\bruntime[_ ]env(?:ironment)? setup failed\b"
    r"|\bhave not registered within the timeout\. The process is dead, probably it crashed during start\b"
    # NCCL's last connect retry (misc/socket.cc logs each at INFO: `socketPollConnect: connect returned No route to
    # host, retrying (34/34) after sleep for 3400 msec`); the connection fails after it (hiyouga/LlamaFactory#8045)
    r"|\bconnect returned [\w ]+, retrying \((\d+)/\1\)"
    # LLVM's report_fatal_error, which aborts the process: a Triton kernel that cannot be compiled for the GPU
    # (`LLVM ERROR: Failed to compute parent layout`, fp16 on a V100: verl-project/verl#1633)
    r"|\bLLVM ERROR: \S"
    # an OSError printed as the job's last words without its type (`print(e)`, `str(e)`):
    # `[Errno 2] No such file or directory: '…/model_optim_rng.pt'`
    r"|^\[Errno \d+\] "
    # an I/O error a caller logged with its own words first (Megatron's async checkpoint writer: `Local process 0
    # encountered an error: [Errno 5] Input/output error`, THUDM/slime#326), or a file system mounted read-only
    r"|\[Errno (?:5|30)\] (?:Input/output error|Read-only file system)"
    # a CUDA device-side assert (`Indexing.cu:1284: indexSelectLargeIndex: block: [37,0,0], thread: [92,0,0]
    # Assertion `srcIndex < srcSelectDimSize` failed.`): the kernel's assert() kills the CUDA context
    r"|\bblock: \[\d+,\d+,\d+\], thread: \[\d+,\d+,\d+\] Assertion `.*` failed"
    # torch's asynchronous device-side assert, as the kernel prints it (aten/src/ATen/native/cuda/TensorCompare.cu:
    # `_assert_async_cuda_kernel: Assertion `probability tensor contains either inf, nan or element < 0` failed`,
    # raised by torch.multinomial's check; THUDM/slime#2209)
    r"|\b_assert_async_cuda_kernel: Assertion `.*` failed"
    # SGLang's launcher reporting a child process that died (srt/utils: `Subprocess scheduler_0 crashed with exit
    # code -3. Triggering SIGQUIT for cleanup...`, THUDM/slime#2209)
    r"|\bSubprocess \w+ crashed with exit code -?\d+"
    # a pasted `raise SomeError("…")` code line outside any traceback: the statement the job died on
    # (inside a traceback the code lines are frames, never error lines)
    r"|" + RAISE_CODE
)


class SignatureTableError(TriageError):
    """The shipped signature table is malformed (a packaging error, named precisely)."""


@dataclass(frozen=True)
class Signature:
    """One row of the signature table."""

    id: str
    outcome: str
    role: Literal["root", "cascade"]
    patterns: tuple[re.Pattern[str], ...]
    context: tuple[re.Pattern[str], ...]
    source: str
    explanation: str
    # where each pattern's wording comes from (repo + file, or a thread), one per pattern
    pattern_sources: tuple[str, ...] = ()
    # "window": the context may be on error lines shortly before; "frames": only the line and its frames
    context_scope: Literal["window", "frames"] = "window"
    # a hardware fault is local: the match counts only when its lines come from one node
    one_node: bool = False
    # the error was raised in one package's code called from another's: the innermost frame is in a
    # package of `_PACKAGE` and an outer frame in a different one (one framework's call into another)
    cross_package: bool = False
    # a framework adapter's wording (triage.frameworks): read only on a line no entry of the shipped
    # table words, so the table's conditions (context, frames) are never bypassed by a looser wording
    adapter: bool = False
    # the remedy this wording calls for where the catalog's, written for the id's usual case, would
    # mislead (a taken rendezvous port is not an SGLang server's), with the flags it names
    remedy: str = ""
    flags: tuple[str, ...] = ()
    # context that rules the entry out (in the same scope as `context`): the same words from another
    # component (an SGLang server's own port, not torch.distributed's rendezvous)
    unless: tuple[re.Pattern[str], ...] = ()
    # every context pattern must hold (each on some text of the scope), not any one of them
    context_all: bool = False
    # the line reports a state a monitor saw (a threshold crossed), not an operation that failed: it stands for
    # the stop only where the job stopped there, its log ending at the monitor's last report or an error after it
    # with no progress between (`_states_gone_past`)
    state: bool = False
    # the catalog id this wording points at among the causes its outcome leaves open, where the catalog asks for
    # more evidence than the words before deciding it (an engine's own re-layout refusing an update is the engine's
    # bug, not a converter's name): a candidate's rank, never a verdict
    suggests: str = ""
    # other outcomes of this table the words leave open: their causes are not ruled out by the branch the outcome takes
    # (Ray's `RayTaskError(OutOfMemoryError)` names a class that torch's GPU OOM and Ray's host-memory kill share)
    leaves_open: tuple[str, ...] = ()

    def excluded(self, texts: Iterable[str]) -> bool:
        return bool(self.unless) and any(p.search(t) for t in texts for p in self.unless)

    def frames_hold(self, frames: Iterable[str], text: str = "") -> bool:
        return not self.cross_package or crosses_packages(tuple(frames), text)

    def matches(self, text: str) -> bool:
        return any(p.search(text) for p in self.patterns)

    def matching_source(self, text: str) -> str:
        """The source of the first pattern that matches `text` (the entry's source if none names one)."""
        for i, p in enumerate(self.patterns):
            if p.search(text):
                return self.pattern_sources[i] if i < len(self.pattern_sources) and self.pattern_sources[i] else self.source
        return self.source

    def context_holds(self, texts: Iterable[str]) -> bool:
        if not self.context:
            return True
        if self.context_all:
            texts = list(texts)
            return all(any(p.search(t) for t in texts) for p in self.context)
        return any(p.search(t) for t in texts for p in self.context)


@dataclass(frozen=True)
class SignatureMatch:
    """A log line attributed to a signature, with where it sits in log order."""

    signature: Signature
    line: LogLine
    order: tuple[int, int]
    frames: tuple[str, ...] = ()


# a connection that was up and went (a store or a peer gone), not one that could not be made: what the survivors of a
# process's death report
_PEER_GONE = re.compile(r"RendezvousConnectionError|connection to the C10d store has failed|Connection reset by peer"
                        r"|Broken pipe|Connection closed by (?:remote host|peer)", re.I)
# a communication library's or a connection's own error: where it comes first, a lost connection after it is its detail
_COMMUNICATION = re.compile(r"NCCL|nccl|DistBackendError|[Ss]ocket|[Cc]onnect|[Nn]etwork|Rendezvous|TCPStore|Gloo|gloo")


@dataclass
class ErrorScan:
    """Every signature match and every fatal line of a log, in log order."""

    matches: list[SignatureMatch] = field(default_factory=list)
    # lines no signature explains that still end a job: (line, order, frames)
    fatal_lines: list[tuple[LogLine, tuple[int, int], tuple[str, ...]]] = field(default_factory=list)

    def of_outcome(self, outcome: str) -> list[SignatureMatch]:
        return [m for m in self.matches if m.signature.outcome == outcome]

    def decisive(self) -> SignatureMatch | None:
        """The root of the failure by the module's rule: earliest root, else earliest cascade.

        Two refinements. A process killed from outside (the kill family) is decided by
        what says why: memory evidence anywhere in the log, else the scheduler's own
        message or SIGTERM, else the bare SIGKILL. And a cascade, or a bare SIGKILL, that
        comes after an error no signature lists is that error's consequence: then nothing
        here decides (None), and the unlisted error is the one to locate.
        """
        first_fatal = min((f[1] for f in self.fatal_lines if not CONSEQUENCE_LINE.search(f[0].text)), default=None)
        roots = [m for m in self.matches if m.signature.role == "root"]
        if roots:
            chosen = min(roots, key=lambda m: m.order)
            if chosen.signature.outcome in KILL_FAMILY:
                family = [m for m in roots if m.signature.outcome in KILL_FAMILY]
                for outcome in KILL_FAMILY:  # strongest evidence first
                    of_kind = [m for m in family if m.signature.outcome == outcome]
                    if of_kind:
                        chosen = min(of_kind, key=lambda m: m.order)
                        break
                outcome = chosen.signature.outcome
                if outcome in ("terminated", "killed") and first_fatal is not None and first_fatal < chosen.order:
                    return None
                if outcome == "terminated" and any(m.signature.outcome == "killed" and m.order > chosen.order
                                                   for m in family):
                    # SIGTERM, then SIGKILL after a grace period: how a scheduler ends a job (the catalog's
                    # sched.time_limit)
                    return dataclasses.replace(chosen, signature=dataclasses.replace(
                        chosen.signature, outcome="sched_ended", explanation=_TERM_THEN_KILL))
            # a lost connection after an error of the job's own is that error's consequence: the peers and the store
            # go when a process dies (elena-lyulina/Megatron-LM-Attention-Benchmark's 1856383.err: every rank's
            # `pretrain_gpt.py: error: unrecognized arguments: --keep-last-n-checkpoints 5` at line 677, then the
            # elastic agent's `RendezvousConnectionError: The connection to the C10d store has failed` at 25164)
            # (an earlier error that is itself a collective's or a connection's, `DistBackendError: NCCL error … unhandled
            # system error` above its `socketStartConnect: Connect to … failed`, is the same failure's report: verl#726)
            if chosen.signature.outcome == "network_failure" and _PEER_GONE.search(chosen.line.text) and any(
                    f[1] < chosen.order and not CONSEQUENCE_LINE.search(f[0].text) and not _COMMUNICATION.search(f[0].text)
                    for f in self.fatal_lines):
                return None
            return chosen
        if self.matches:
            chosen = min(self.matches, key=lambda m: m.order)
            if first_fatal is not None and first_fatal < chosen.order:
                return None
            return chosen
        return None


_TERM_THEN_KILL = ("The job's processes received SIGTERM and then SIGKILL, a grace period apart: how a scheduler "
                   "ends a job (a time limit, a preemption, a cancellation).")


def _compile(entry_id: str, field_name: str, raw: Any) -> tuple[re.Pattern[str], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(r, str) for r in raw):
        raise SignatureTableError(f"{SIGNATURE_FILE}: signature {entry_id!r}: {field_name} must be a list of regexes")
    out = []
    for r in raw:
        try:
            out.append(re.compile(r))
        except re.error as exc:
            raise SignatureTableError(f"{SIGNATURE_FILE}: signature {entry_id!r}: bad regex {r!r}: {exc}") from None
    return tuple(out)


def _patterns(entry_id: str, raw: Any) -> tuple[tuple[re.Pattern[str], ...], tuple[str, ...]]:
    """`patterns:` as regexes and their sources: each item a regex, or `{re: ..., source: ...}`."""
    if not isinstance(raw, list):
        raise SignatureTableError(f"{SIGNATURE_FILE}: signature {entry_id!r}: patterns must be a list")
    regexes: list[Any] = []
    sources: list[str] = []
    for item in raw:
        if isinstance(item, dict):
            unknown = sorted(set(item) - {"re", "source"})
            if unknown or not isinstance(item.get("re"), str):
                raise SignatureTableError(
                    f"{SIGNATURE_FILE}: signature {entry_id!r}: a pattern must be a regex or {{re, source}}, got {item!r}")
            regexes.append(item["re"])
            sources.append(str(item.get("source") or ""))
        else:
            regexes.append(item)
            sources.append("")
    return _compile(entry_id, "patterns", regexes), tuple(sources)


def parse_signatures(raw: Any) -> tuple[Signature, ...]:
    """Validate the table's YAML content; a defect names the entry."""
    if not isinstance(raw, dict) or not isinstance(raw.get("signatures"), list):
        raise SignatureTableError(f"{SIGNATURE_FILE}: expected a mapping with a 'signatures' list")
    out: list[Signature] = []
    seen: set[str] = set()
    for i, entry in enumerate(raw["signatures"]):
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
            raise SignatureTableError(f"{SIGNATURE_FILE}: entry #{i} has no id")
        sid = entry["id"]
        if sid in seen:
            raise SignatureTableError(f"{SIGNATURE_FILE}: signature {sid!r} is defined twice")
        seen.add(sid)
        outcome = entry.get("outcome")
        if outcome not in SIGNATURE_OUTCOMES:
            raise SignatureTableError(
                f"{SIGNATURE_FILE}: signature {sid!r}: outcome {outcome!r} is not one of {', '.join(SIGNATURE_OUTCOMES)}"
            )
        role = entry.get("role", "root")
        if role not in ("root", "cascade"):
            raise SignatureTableError(f"{SIGNATURE_FILE}: signature {sid!r}: role must be root or cascade")
        patterns, pattern_sources = _patterns(sid, entry.get("patterns"))
        if not patterns:
            raise SignatureTableError(f"{SIGNATURE_FILE}: signature {sid!r} has no patterns")
        scope = entry.get("context_scope", "window")
        if scope not in ("window", "frames"):
            raise SignatureTableError(f"{SIGNATURE_FILE}: signature {sid!r}: context_scope must be window or frames")
        flags = entry.get("flags", [])
        if not isinstance(entry.get("remedy", ""), str) or not isinstance(flags, list) \
                or not all(isinstance(f, str) for f in flags):
            raise SignatureTableError(f"{SIGNATURE_FILE}: signature {sid!r}: remedy must be text and flags a list of names")
        out.append(
            Signature(
                id=sid,
                outcome=outcome,
                role=role,
                patterns=patterns,
                context=_compile(sid, "context", entry.get("context")),
                source=str(entry.get("source", "")),
                explanation=str(entry.get("explanation", "")),
                pattern_sources=pattern_sources,
                context_scope=scope,
                one_node=bool(entry.get("one_node", False)),
                cross_package=bool(entry.get("cross_package", False)),
                remedy=entry.get("remedy", ""),
                flags=tuple(flags),
                unless=_compile(sid, "unless", entry.get("unless")),
                context_all=bool(entry.get("context_all", False)),
                state=bool(entry.get("state", False)),
                suggests=str(entry.get("suggests", "")),
                leaves_open=tuple(str(o) for o in entry.get("leaves_open", []) or ()),
            )
        )
    return tuple(out)


@lru_cache(maxsize=1)
def load_signatures() -> tuple[Signature, ...]:
    """The shipped signature table, parsed once, then the framework adapters' error wordings."""
    text = resources.files("probes").joinpath(SIGNATURE_FILE).read_text(encoding="utf-8")
    return parse_signatures(yaml.safe_load(text)) + adapter_signatures()


# The outcome an adapter's wording is read as, by the catalog id it names: the outcome whose
# edge in playbooks/crash.yaml leads to that id (cuda_oom: through the OOM playbook, which places
# the OOM; tests/test_frameworks_adapters.py checks each edge).
WORDING_OUTCOMES = {
    "config.batch_size_mismatch": "batch_size_mismatch",
    "config.sample_exceeds_limits": "sample_too_long",
    "engine.oom_illegal_memory": "illegal_memory_access",
    "engine.port_conflict": "engine_port_conflict",
    "host.ram_exhausted": "host_oom_killed",
    "memory.colocate_second_step": "cuda_oom",
    "sched.insufficient_gpus": "insufficient_gpus",
    "tokenizer.no_pad_token": "no_pad_token",
    "compile.cache_corrupt": "inductor_cache",
}


@lru_cache(maxsize=1)
def adapter_signatures() -> tuple[Signature, ...]:
    """Each framework adapter's error wordings (triage.frameworks) as signatures after the shipped
    table's: the table's entry decides where both match, a wording only the framework prints adds
    its own. A wording naming an id no outcome leads to is a packaging error."""
    from triage import frameworks

    out = []
    seen: dict[str, int] = {}
    for name, wording in frameworks.error_wordings():
        outcome = WORDING_OUTCOMES.get(wording.verdict)
        if outcome is None:
            raise SignatureTableError(f"the {name} adapter's error wording {wording.pattern!r} names "
                                      f"{wording.verdict}, which no signature outcome leads to")
        sid = f"{name}:{wording.verdict}"
        seen[sid] = seen.get(sid, 0) + 1
        out.append(Signature(
            id=sid if seen[sid] == 1 else f"{sid}#{seen[sid]}", outcome=outcome, role="root", adapter=True,
            patterns=(wording.regex(),), context=(), source=wording.source, pattern_sources=(wording.source,),
            explanation=f"The {name} adapter's wording of {wording.verdict}, as {wording.source} prints it.",
        ))
    return tuple(out)


@lru_cache(maxsize=1)
def any_signature() -> re.Pattern[str]:
    """One regex matching any signature line: a log reader may use it to keep such lines."""
    return re.compile("|".join(f"(?:{p.pattern})" for s in load_signatures() for p in s.patterns))


def quote(line: LogLine) -> dict[str, Any]:
    """A log line as evidence: where it is, what it says, which actor printed it."""
    return {"where": line.where(), "text": line.text, "source": line.source}


# A note the user typed where they cut the paste (`... (many NCCL timeout errors from different
# ranks) ...`, volcengine/verl#3873): between ellipses, it says what was left out, not what the job printed.
_ELISION = re.compile(r"^\s*(?:\.{3,}|…)(?:.*(?:\.{3,}|…))?\s*$")
# An exception's name as it stands in a user's words, a pytest report or a quote, before its message: ASCII classes
# and bounded names (`\w` takes CJK characters too, and a line of `中Error中Error…` would make every position's
# look-ahead run to the line's end), then its arguments (`RayTaskError(ValueError)`)
_QUALIFIED_NAME = r"(?:[A-Za-z_][A-Za-z0-9_]{0,60}\.){0,8}[A-Z][A-Za-z0-9_]{0,60}"
_NAME_ARGS = r"(?:\([^)\n]{0,200}\))?"
_EXCEPTION_AHEAD = rf"{_QUALIFIED_NAME}(?:Error|Exception)\b{_NAME_ARGS}: \S"

# A user's words in CJK before the exception on the same line (`使用transformers==4.35.2时会报错：AttributeError: …`,
# DLLXW/baby-llama2-chinese#45; `…会出现TypeError: PPOConfig.__init__() got …`, RethinkFun/trian_ppo#1; an opening quote
# between them, `报错"ImportError: cannot import name …"`, waltonfuture/MM-UPT#1): the line is read from the exception on,
# as if the user had pasted it on a line of its own
_CJK_PROSE_BEFORE = re.compile(
    r"^(?P<prose>.*[\u2e80-\u9fff\uac00-\ud7af\uff00-\uffef][\s：:，,\"“「`]*)"
    # (or an import error's message without its type: `报错信息为：No module named 'vllm_ascend.distributed…'`,
    # vllm-project/vllm-ascend#1093)
    rf"(?={_EXCEPTION_AHEAD}|No module named '|cannot import name ')")

# An exception the user quoted in their own words, in inline code or double quotes (`…it will trigger the following
# error: \`AssertionError: Expects tensor to be on the compute device cuda:0, was on cpu.\``, verl-project/verl#4799;
# `such as "omegaconf.errors.ConfigAttributeError: Key 'launch_reward_fn_async' is not in struct."`, cmu-l3/l1#21;
# `reports an error: "ValueError: Please make sure to properly initialize your accelerator …"`, huggingface/trl#2329):
# read as the exception on a line of its own. Only on a line no program printed (`_typed_by_user`), and with words
# before the quote (a line that is the quote alone is read as it is).
_QUOTED_EXCEPTION = re.compile(
    rf"(?<![^\s:(（,，])[`\"] ?(?P<exc>{_QUALIFIED_NAME}(?:Error|Exception){_NAME_ARGS}: [^`\"\n]{{1,1500}})[`\"]")


# pytest's report of a test's failure: its `E       RuntimeError: …` lines under the test's source and its short
# summary's `FAILED tests/x.py::test_y - ModuleNotFoundError: No module named '…'` (and `ERROR …` for a module that
# failed to collect), pasted from a CI run (NVIDIA/Megatron-LM#5025, NovaSky-AI/SkyRL#1248): read from the
# exception on, as the exception line it reports
_PYTEST_PREFIX = re.compile(
    rf"^(?:E {{2,}}|(?:FAILED|ERROR) [^\s]+ - )(?={_QUALIFIED_NAME}(?:Error|Exception|Interrupt)\b{_NAME_ARGS}:?(?: |$))")


# The user's words ending in `error:` right before the exception, unquoted (`…when save ckpt, got error:OSError: [Errno
# 39] Directory not empty:`, huggingface/transformers#36099; `… results in error: AssertionError: …`,
# verl-project/verl#4657; a few words between, `the error will occur: RuntimeError: …`, togethercomputer/OpenChatKit#86),
# or an issue title's `[Bug] ` tag: the line is read from the exception on, as for a quoted one (`_typed_by_user`).
# So are the words of one that fails on it (`POST /wake_up fails with AttributeError: …`,
# vllm-project/vllm#49237; `… in nemo i get """cannot import name 'L2Norm' from 'megatron.core…'"""`, an import
# error without its type, NVIDIA-NeMo/Speech#13520), behind at most three quote marks; and a title's words set off
# from the exception by a spaced colon (`using vllm0.6.2 with chatglm2-6B : TypeError: ChatGLMTokenizer._pad() got …`,
# vllm-project/vllm#10761).
_ERROR_WORD_BEFORE = re.compile(
    rf"^(?P<prose>.{{0,400}}?(?:\b[Ee]rror\b[^:：\n\"'`]{{0,30}}?[:：]\s*|\[(?:BUG|Bug|bug)\]\s*|\S\s+[:：]\s+|"
    r"\b(?:[Ii] (?:get|got)|fail(?:s|ed)? with|crash(?:es|ed)? with|raise[sd]?|thr(?:ows?|ew))\s*[:：]?\s*[\"'`]{0,3}))"
    rf"(?={_EXCEPTION_AHEAD}|No module named '|cannot import name '\w+' from ')")


def _unquoted(text: str) -> str:
    """An exception read from a user's words without the quote marks that close it (three double quotes, a
    backtick)."""
    return re.sub(r'\s*(?:"{1,3}|`{1,3})\s*$', "", text) if text.rstrip().endswith(('"', "`")) else text


# A line a user set in Markdown bold (`**AssertionError: Attempted to load weight …**`, StarsfieldAI/R1-V#191): read
# without the markers
# (Markdown's: no space or third marker inside the pair, so abseil's `*** SIGABRT received … ***` banner is not one)
_BOLD = re.compile(r"^(\*\*|__)(?![*_\s])(?P<body>.+?)(?<![*_\s])\1\s*$")
# A debugger's report of the exception it stopped on: VS Code's `Exception has occurred: AttributeError`, the message
# on the line under it (vllm-project/vllm#21776): read as the exception with its message (`_with_messages_below`)
# (with its note when it paused elsewhere: `       (note: full exception trace is shown but execution is paused at: …)`)
_DEBUGGER_HEAD = re.compile(r"^Exception has occurred: (?P<type>[A-Za-z_][\w.]*)(?:\s*$|\s{2,}\(note: )")


def _typed_by_user(line: LogLine) -> bool:
    """A line no program printed (no logger head, time or process prefix) that does not start with an exception."""
    return line.level is None and line.source is None and line.timestamp is None and not TYPED_EXCEPTION.match(line.text)


def _quoted_exception(line: LogLine) -> str | None:
    if not _typed_by_user(line):
        return None
    m = _QUOTED_EXCEPTION.search(line.text)
    if m is None or not any(c.isalpha() for c in line.text[:m.start()]):
        return None
    return m.group("exc")


_EXCEPTION_REPR = re.compile(r"^\s*(?P<type>(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception))\((?P<q>['\"])(?P<msg>.*)(?P=q)\)\s*$")


def _candidate_lines(log: LogIndex) -> tuple[list[LogLine], dict[tuple[str, int], tuple[str, ...]]]:
    """Error, notable and traceback-ending lines, deduplicated, with the frames each line ends."""
    lines: dict[tuple[str, int], LogLine] = {}
    for line in [*log.errors, *log.notable]:
        if line.text[:1] in (".", "…", " ") and _ELISION.match(line.text):
            continue
        if line.text[:2] in ("**", "__") and (m := _BOLD.match(line.text)):
            line = dataclasses.replace(line, text=m.group("body"))
        if line.text.rstrip()[-2:] in ('")', "')") and (m := _EXCEPTION_REPR.match(line.text)):
            # an exception printed as its repr, as Hydra's instantiate re-raises one (`Error in call to target
            # '…':\nAttributeError("'GRPOConfig' object has no attribute 'top_p'")`, gensyn-ai/rl-swarm#368)
            line = dataclasses.replace(line, text=f"{m.group('type')}: {m.group('msg')}")
        elif line.text[:10] == "Exception " and (m := _DEBUGGER_HEAD.match(line.text)):
            line = dataclasses.replace(line, text=f"{m.group('type')}:")
        elif line.text[:1] in ("E", "F") and (m := _PYTEST_PREFIX.match(line.text)):
            line = dataclasses.replace(line, text=line.text[m.end():])
        elif not line.text.isascii() and (m := _CJK_PROSE_BEFORE.match(line.text)):
            line = dataclasses.replace(line, text=line.text[m.end("prose"):])
        elif ("`" in line.text or '"' in line.text) and (quoted := _quoted_exception(line)) is not None:
            line = dataclasses.replace(line, text=quoted)
        elif ("rror" in line.text or "xception" in line.text or "import name" in line.text or "No module" in line.text) \
                and _typed_by_user(line) and (m := _ERROR_WORD_BEFORE.match(line.text)):
            rest = line.text[m.end("prose"):]
            line = dataclasses.replace(line, text=_unquoted(rest) if m.group("prose")[-1:] in "\"'`" else rest)
        lines.setdefault((line.path, line.line_no), line)
    # Match a traceback's final line to the error line it was also kept as (texts may be
    # capped at different lengths, so compare their starts).
    by_text: dict[tuple[str, str], list[int]] = {}
    for (path, no), line in lines.items():
        by_text.setdefault((path, line.text.strip()[:TEXT_KEY]), []).append(no)
    for nos in by_text.values():
        nos.sort()
    frames: dict[tuple[str, int], tuple[str, ...]] = {}
    by_path: dict[str, list[int]] = {}
    for path, no in lines:
        by_path.setdefault(path, []).append(no)
    for nos in by_path.values():
        nos.sort()
    for tb in log.tracebacks:
        exc = tb.exception.strip()
        head = lines.get((tb.path, tb.line_no))
        if not exc and tb.frames and head is not None and head.text.lstrip().startswith("Traceback"):
            # (a headed traceback cut before its end: frames pasted below an error without a header are read
            # as that, bottom-up, by the OOM check)
            above = _exception_above(lines, by_path.get(tb.path, []), tb.path, tb.line_no, frames, tb.source)
            if above is not None:
                frames[above] = tuple(tb.frames)
                continue
        nos = by_text.get((tb.path, exc[:TEXT_KEY]), [])
        i = bisect.bisect_left(nos, tb.line_no)
        if i < len(nos):
            key = (tb.path, nos[i])
        else:
            key = (tb.path, tb.line_no)
            held = lines.get(key)
            if held is None:
                lines[key] = LogLine(path=tb.path, line_no=tb.line_no, text=exc, source=tb.source)
            elif exc and held.text.lstrip().startswith("Traceback"):
                # an exception line with no error word in it (`StopIteration` ending every rank's traceback when the
                # data ran out, elena-lyulina/Megatron-LM-Attention-Benchmark's 2327228.err) kept no error line of
                # its own: the traceback's header stands for it, with the exception's words, not read as cut
                lines[key] = dataclasses.replace(held, text=exc)
        frames[key] = tuple(tb.frames)
    _with_messages_below(log, lines)
    return list(lines.values()), frames


# An exception raised with a message that starts with a newline prints its type alone on its line and the words
# under it (safetensors' `RuntimeError:` over `Some tensors share memory, …`: huggingface/trl#5150,
# Improbable-AI/curiosity_redteam#6)
_EMPTY_MESSAGE = re.compile(rf"^{_QUALIFIED_NAME}(?:Error|Exception){_NAME_ARGS}:$")


def _with_messages_below(log: LogIndex, lines: dict[tuple[str, int], LogLine]) -> None:
    """Give an exception line with no message the line under it, in a log the size of a paste (read whole once;
    a larger log keeps the type alone). After the frames are tied to the lines, which match on the type's line."""
    texts: dict[str, list[str] | None] = {}
    for key, line in lines.items():
        if not line.text.endswith(":") or not _EMPTY_MESSAGE.match(line.text):
            continue
        if line.path not in texts:
            texts[line.path] = None
            try:
                texts[line.path] = safe_io.read_text(Path(line.path), PASTE_BYTES, "pasted log").splitlines()
            except (OSError, UnicodeDecodeError, TriageError):
                pass
        below = texts[line.path]
        if below is None or line.line_no >= len(below):
            continue
        words = split_line(below[line.line_no]).text.strip()
        if words and not TYPED_EXCEPTION.match(words) and not words.startswith(("Traceback", 'File "')):
            lines[key] = dataclasses.replace(line, text=f"{line.text} {words}"[:MAX_TEXT_CHARS])


# How far above a cut traceback an exception line a paste put first may stand (verl-project/verl#6256:
# `KeyError: 'embed_tokens.weight'`, a blank line and vLLM's `WorkerProc hit an exception.` above it)
EXCEPTION_ABOVE_LINES = 5


def _exception_above(lines: dict[tuple[str, int], LogLine], nos: list[int], path: str, start: int,
                     frames: dict[tuple[str, int], tuple[str, ...]], source: str | None = None) -> tuple[str, int] | None:
    """The exception line a user pasted above the traceback that raised it, the traceback cut before its own
    end: the nearest candidate line within `EXCEPTION_ABOVE_LINES` above `start` that reads `Type: message`,
    when no traceback ends at it already and its prefix does not say another rank or process printed it
    (pytorch/pytorch#173679: `[rank19]: torch._inductor.exc.InductorError: …` above `[rank9]: Traceback …`, two ranks'
    reports; dhcode-cpp/X-R1#45: `[rank0]: RuntimeError: …` above the launcher's own traceback, which has no prefix)."""
    i = bisect.bisect_left(nos, start) - 1
    while i >= 0 and start - nos[i] <= EXCEPTION_ABOVE_LINES:
        key = (path, nos[i])
        if TYPED_EXCEPTION.match(lines[key].text.strip()):
            if lines[key].source and lines[key].source != source:
                return None
            return None if key in frames else key
        i -= 1
    return None


def _may_be_fatal(line: LogLine) -> bool:
    """A line logged at WARNING or below reports something the job survived."""
    return (line.level or "").upper() not in ("WARNING", "WARN", "INFO", "DEBUG")


_SCAN_CACHE: dict[int, tuple[weakref.ref[LogIndex], ErrorScan]] = {}


def scan(log: LogIndex, signatures: tuple[Signature, ...] | None = None) -> ErrorScan:
    """Attribute every candidate line to the first signature it matches; keep the fatal rest.

    Several probes ask for the same log's scan; the shipped table's result is kept per
    log index while that index lives.
    """
    if signatures is None:
        cached = _SCAN_CACHE.get(id(log))
        if cached is not None and cached[0]() is log:
            return cached[1]
        result = _scan(log, load_signatures(), any_signature())
        key = id(log)
        _SCAN_CACHE[key] = (weakref.ref(log, lambda _ref: _SCAN_CACHE.pop(key, None)), result)
        return result
    return _scan(log, signatures, None)


def _scan(log: LogIndex, sigs: tuple[Signature, ...], prefilter: re.Pattern[str] | None) -> ErrorScan:
    file_pos = {path: i for i, path in enumerate(log.files)}
    lines, frames = _candidate_lines(log)

    def order(line: LogLine) -> tuple[int, int]:
        return (file_pos.get(line.path, len(file_pos)), line.line_no)

    lines.sort(key=order)
    by_file: dict[str, list[LogLine]] = {}
    for line in lines:
        by_file.setdefault(line.path, []).append(line)
    numbers = {path: [ln.line_no for ln in file_lines] for path, file_lines in by_file.items()}

    def context_texts(line: LogLine, scope: str = "window") -> list[str]:
        # (the actor that printed the line is context too: `(SGLangEngine pid=3102)`)
        texts = [line.text, *frames.get((line.path, line.line_no), ()), *((line.source,) if line.source else ())]
        if scope == "frames":
            return texts
        nos, file_lines = numbers[line.path], by_file[line.path]
        lo = bisect.bisect_left(nos, line.line_no - CONTEXT_WINDOW)
        hi = bisect.bisect_left(nos, line.line_no)
        return texts + [other.text for other in file_lines[lo:hi]]

    result = ErrorScan()
    tb_keys = set(frames)
    # lines a frames-scoped signature matched whose frames the index could not tie to them
    pending: list[LogLine] = []
    for line in lines:
        key = (line.path, line.line_no)
        sig = None
        if prefilter is None or prefilter.search(line.text):
            worded = False  # a shipped entry's pattern matched the line (its conditions may not have held)
            for s in sigs:
                if s.adapter and worded:
                    break
                if not s.matches(line.text):
                    continue
                worded = worded or not s.adapter
                if (not s.context or s.context_holds(context_texts(line, s.context_scope))) \
                        and s.frames_hold(frames.get(key, ()), line.text) \
                        and not (s.unless and s.excluded(context_texts(line, s.context_scope))):
                    sig = s
                    break
            # (frames the index tied but could not read, say unindented ones, count as none)
            if sig is None and not frames.get(key) and any(s.context_scope == "frames" and s.matches(line.text) for s in sigs):
                pending.append(line)
        if sig is not None:
            result.matches.append(SignatureMatch(sig, line, order(line), frames.get(key, ())))
        elif key in tb_keys or (_may_be_fatal(line) and FATAL_LINE.search(line.text)):
            result.fatal_lines.append((line, order(line), frames.get(key, ())))
    if pending:
        result = _with_remote_frames(log, sigs, result, pending, order)
    return _states_gone_past(log, _local_faults_only(_headers_give_way(_source_listed(log, _warnings_go_on(
        _teardown_after_training(result))))))


# What the ranks print as a finished job tears its process groups down: the TCPStore's host exits first and the others'
# c10d reads of it are reset, NCCL's communicators are aborted (stark-sim/megatron-deepspeed-lock-clock's
# dual32_run_v2.log: `[after training is done]`, then `TCPStore.cpp:125] [c10d] recvValue failed … Connection reset by
# peer` on rank 1 and the launcher's `exits successfully` for every process)
TEARDOWN_OUTCOMES = frozenset({"connection_closed", "network_failure", "nccl_abort"})


# Ray's reports of a worker that ended, as a finished job's actors are shut down (verl's `Final validation metrics:`,
# then the raylet's `A worker died or was killed … Worker exits unexpectedly by a signal. SystemExit is raised (sys.exit
# is called). … The process receives a SIGTERM.`: a committed verl PPO run its author called finished)
TEARDOWN_SIGNATURES = frozenset({"ray_worker_vanished", "ray_worker_k8s_exit"})


def _teardown_after_training(result: ErrorScan) -> ErrorScan:
    """A connection or collective failing, or Ray reporting a worker's end, after the trainer's own words that
    training ended is its teardown."""
    if not any(m.signature.outcome in TEARDOWN_OUTCOMES or m.signature.id in TEARDOWN_SIGNATURES
               for m in result.matches) and not any(CONSEQUENCE_LINE.search(f[0].text) for f in result.fatal_lines):
        return result
    after: dict[str, bool] = {}

    def finished_before(line: LogLine) -> bool:
        key = f"{line.path}:{line.line_no}"
        if key not in after:
            after[key] = _finished_before(line) is not None
        return after[key]

    def teardown(m: SignatureMatch) -> bool:
        if m.signature.outcome not in TEARDOWN_OUTCOMES and m.signature.id not in TEARDOWN_SIGNATURES:
            return False
        return finished_before(m.line)

    return dataclasses.replace(
        result, matches=[m for m in result.matches if not teardown(m)],
        fatal_lines=[f for f in result.fatal_lines if not (CONSEQUENCE_LINE.search(f[0].text) and finished_before(f[0]))])


_RAISE_CODE = re.compile(RAISE_CODE)


def _source_listed(log: LogIndex, result: ErrorScan) -> ErrorScan:
    """A `raise X(` code line the log goes on from for more than `HEADER_REACH` lines is a program's source printed
    into its log, not an error: modded-nanogpt's records open with the script itself (AkramjitS/gpt-lab-diffusion's
    `raise ValueError(f"No files found matching pattern: …")` at line 479 of a run that trained to `step:1000/1000`).
    One near its file's end (a paste cut under a frame's code line) is still the job's last line."""
    def listed(line: LogLine) -> bool:
        last = log.last_lines.get(line.path)
        return (_RAISE_CODE.match(line.text) is not None and last is not None
                and last - line.line_no > HEADER_REACH)

    if not any(listed(m.line) for m in result.matches) and not any(listed(f[0]) for f in result.fatal_lines):
        return result
    return ErrorScan(matches=[m for m in result.matches if not listed(m.line)],
                     fatal_lines=[f for f in result.fatal_lines if not listed(f[0])])


def _warnings_go_on(result: ErrorScan) -> ErrorScan:
    """A Python warning (`PY_WARNING_LINE`) is printed by a program that goes on: it gives way to any error of the log
    that is not one, and one that says it may be ignored is never the error. A warning alone still tells what the
    program went on without (torch's `UserWarning: CUDA initialization: The NVIDIA driver on your system is too old`,
    IEIT-Yuan/Yuan-2.0#65)."""
    def warning(line: LogLine) -> bool:
        return PY_WARNING_LINE.search(line.text) is not None

    if not any(warning(m.line) for m in result.matches) and not any(warning(f[0]) for f in result.fatal_lines):
        return result
    others = any(not warning(m.line) for m in result.matches) or any(not warning(f[0]) for f in result.fatal_lines)

    def gone(line: LogLine) -> bool:
        return warning(line) and (others or IGNORABLE_WARNING.search(line.text) is not None)

    return ErrorScan(matches=[m for m in result.matches if not gone(m.line)],
                     fatal_lines=[f for f in result.fatal_lines if not gone(f[0])])


# Log lines that show the job moving on (besides `Finish rollout: …` samples).
PROGRESS_TAGS = ("rollout_progress", "train_progress", "ckpt_saved", "weights_update")


def progress_lines(log: LogIndex) -> dict[str, list[int]]:
    """Per log file, the numbers of the lines that show the job moving on: `Finish rollout` samples and the
    progress lines the index kept (`PROGRESS_TAGS`)."""
    out: dict[str, list[int]] = {}
    for line in [*log.finish_rollouts, *(n for n in log.notable if n.tag in PROGRESS_TAGS)]:
        out.setdefault(line.path, []).append(line.line_no)
    return out


# What fails on a volume over Ray's threshold: the runtime env set up in the session directory, an object that must
# spill, a write (ray-project/ray file_system_monitor.cc: "Object creation will fail if spilling is required")
STATE_CONSEQUENCE = re.compile(r"RuntimeEnvSetupError|Failed to (?:set up|create) runtime env|OutOfDiskError|"
                               r"ObjectStoreFullError|[Ss]pill|No space left|\[Errno 28\]|Disk quota")


def _states_gone_past(log: LogIndex, result: ErrorScan) -> ErrorScan:
    """A monitor's report of a state (`Signature.state`) the log went on past is not what stopped the job: Ray's
    disk monitor warns every 10 s over its 95% threshold while the job trains on (verl-project/verl#5474: 136 GB
    free, the trainer starting after it). The log went on past it when it records progress after the last report
    (as many progress lines as tell an error the job survived, `symptom.survived_after`), or when it goes on with
    no error after the first, or with errors of its own that are not what a full volume fails
    (`STATE_CONSEQUENCE`). Where the log ends at the monitor's last report (OpenRLHF/OpenRLHF#638) or such an error
    follows it with no progress between (a runtime env that could not be set up), it stands."""
    states = [m for m in result.matches if m.signature.state]
    if not states:
        return result
    went_on = count("symptom.survived_after")
    progress = progress_lines(log)
    gone_past: set[str] = set()
    for path in {m.line.path for m in states}:
        mine = [m.line.line_no for m in states if m.line.path == path]
        last_report = max(mine)
        last_line = log.last_lines.get(path)
        if last_line is None or last_line <= last_report:
            continue  # the log ends at the monitor's last report (or its length is not known)
        if sum(1 for n in progress.get(path, []) if n > last_report) >= went_on:
            gone_past.add(path)
            continue
        first = min(mine)
        # (with the frames each ends: a traceback cut in Ray's `spill_objects_handler` is the spilling that failed,
        # alpa-projects/alpa#763)
        after = [" ".join((m.line.text, *m.frames)) for m in result.matches
                 if m.line.path == path and m.line.line_no > first and not m.signature.state] \
            + [" ".join((line.text, *frames)) for line, _order, frames in result.fatal_lines
               if line.path == path and line.line_no > first]
        # an error after it that is not the disk's (a worker that never registered, verl's `failed to get
        # register_center_actor` in zhiyuanhubj/logic-rl-formula's log with 88 GB free) is the job's own
        if not after or not any(STATE_CONSEQUENCE.search(text) for text in after):
            gone_past.add(path)
    if not gone_past:
        return result
    return dataclasses.replace(
        result, matches=[m for m in result.matches if not (m.signature.state and m.line.path in gone_past)])


def _headers_give_way(result: ErrorScan) -> ErrorScan:
    """A header printed before an error's own words is not an error of its own when those words follow:
    C++'s `terminate called after throwing an instance of 'X'` before `  what():  <message>` (libstdc++'s
    verbose terminate handler), transformers' `Failed to import X because of the following error (look up to
    see its traceback):` before the import's own error, Hydra's `Error executing job with overrides: [...]` before the traceback
    of the exception that ended the app, a `raise X(` code line of a frame above the exception it
    raised. With the words in the log, they decide; a header alone is still the job's last line. A header
    a signature matched gives way too: `raise RuntimeError(f"NCCL error: {error_str}")` above the exception
    it raised is a template, not the error's words (NVIDIA-NeMo/RL#564 was read as an aborted collective)."""
    later: dict[str, list[int]] = {}
    for m in result.matches:
        if not _HEADER.search(m.line.text):
            later.setdefault(m.line.path, []).append(m.line.line_no)
    for f in result.fatal_lines:
        if not _HEADER.search(f[0].text):
            later.setdefault(f[0].path, []).append(f[0].line_no)

    def gives_way(line: LogLine) -> bool:
        return bool(_HEADER.search(line.text)) and any(
            line.line_no < n <= line.line_no + HEADER_REACH for n in later.get(line.path, ()))

    kept = [f for f in result.fatal_lines if not gives_way(f[0])]
    matches = [m for m in result.matches if not gives_way(m.line)]
    if len(kept) == len(result.fatal_lines) and len(matches) == len(result.matches):
        return result
    return ErrorScan(matches=matches, fatal_lines=kept)


_HEADER = re.compile(r"terminate called after throwing an instance of |^Error executing job with overrides: "
                     r"|" + RAISE_CODE +  # a frame's code line above the exception it raised
                     # transformers' lazy import wrapping the error that stopped it, whose words follow on the next
                     # line (utils/import_utils.py `_LazyModule._get_module`: `Failed to import transformers.trainer
                     # because of the following error (look up to see its traceback):\n<the error>`; project-baize/
                     # baize-chatbot#24, OpenRLHF/OpenRLHF#355, marin-community/marin#731)
                     r"|Failed to import [\w.]+ because of the following error \(look up to see its traceback\):\s*$")
# how far below its header the error's own line may be: `what():` is the next line; Hydra's traceback
# runs as long as the stack, and 400 lines hold about 100 frames (file line, code line, `^^^` markers)
HEADER_REACH = 400


def _with_remote_frames(log: LogIndex, sigs: tuple[Signature, ...], result: ErrorScan, pending: list[LogLine],
                        order: Any) -> ErrorScan:
    """Read the frames of `pending` exception lines from the log's tracebacks (Ray prints a remote
    error's frames after its `RayTaskError(...)` line, where the index does not tie them to the
    error) and match those lines again with them."""
    from pathlib import Path

    from triage.formats.tracebacks import read_tracebacks

    want = {(line.path, line.line_no) for line in pending}
    try:
        found = read_tracebacks([Path(f) for f in log.files], want).found
    except OSError:
        return result
    extra: list[SignatureMatch] = []
    for line in pending:
        got = found.get((line.path, line.line_no))
        if not got:
            continue
        sig = next((s for s in sigs if s.matches(line.text) and (not s.context or s.context_holds([line.text, *got]))
                    and s.frames_hold(got, line.text) and not s.excluded([line.text, *got])), None)
        if sig is not None:
            extra.append(SignatureMatch(sig, line, order(line), got))
    if not extra:
        return result
    taken = {(m.line.path, m.line.line_no) for m in extra}
    return ErrorScan(
        matches=sorted(result.matches + extra, key=lambda m: m.order),
        fatal_lines=[f for f in result.fatal_lines if (f[0].path, f[0].line_no) not in taken],
    )


_IP = re.compile(r"\bip=([\w.:-]+)")
_HOST = re.compile(
    r"\b(?:host|node|hostname)\s*[:=]\s*([\w.-]+)|\bON ([\w.-]+) CANCELLED\b|^([\w.-]+):\d+:\d+ \[\d+\] NCCL "
)


def node_of(line: LogLine) -> str | None:
    """The node a log line comes from, where its prefix or text says (Ray's `ip=`, a host name)."""
    for text in (line.source or "", line.text):
        if m := _IP.search(text):
            return m.group(1)
    if m := _HOST.search(line.text):
        return next(g for g in m.groups() if g)
    return None


# (also torch elastic's `local_rank: 3` in its summary of a failed worker: modelscope/ms-swift#4867)
_RANK_OF = re.compile(r"(?:\b|local_)(?:default)?[Rr]ank[ =:\[]*(\d+)")


def rank_of(line: LogLine) -> int | None:
    """The rank a log line comes from: its `[rankN]:` prefix, or a `rank N` in its text."""
    for text in (line.source or "", line.text):
        if m := _RANK_OF.search(text):
            return int(m.group(1))
    return None


def _local_faults_only(result: ErrorScan) -> ErrorScan:
    """Drop the matches of one-node signatures whose lines come from several nodes: the same
    "hardware" error on every node is software. Their lines stay as unlisted fatal lines."""
    demoted: list[SignatureMatch] = []
    for sig_id in {m.signature.id for m in result.matches if m.signature.one_node}:
        ms = [m for m in result.matches if m.signature.id == sig_id]
        nodes = {n for m in ms if (n := node_of(m.line)) is not None}
        if len(nodes) > 1:
            demoted.extend(ms)
    if not demoted:
        return result
    gone = {id(m) for m in demoted}
    return ErrorScan(
        matches=[m for m in result.matches if id(m) not in gone],
        fatal_lines=sorted(result.fatal_lines + [(m.line, m.order, m.frames) for m in demoted], key=lambda f: f[1]),
    )


# --- details the report quotes, per outcome ------------------------------------------

_SIZE = r"([\d.]+ [KMGT]?i?B)"
_TRIED = re.compile(rf"Tried to allocate {_SIZE}")
_CAPACITY = re.compile(rf"GPU (\d+) has a total capacity of {_SIZE} of which {_SIZE} is free")
_CAPACITY_OLD = re.compile(rf"{_SIZE} total capacity; {_SIZE} already allocated; {_SIZE} free")
_PID = re.compile(r"\bpid[:=]?\s*\(?(\d+)")
_RANK = re.compile(r"\b[Rr]ank[ =:]*(\d+)")
_ITERATION = re.compile(r"\biteration #?(\d+)")
_HF_PATH = (
    re.compile(r"(\S+) does not appear to have a file named config\.json"),
    re.compile(r"Can't load the configuration of '([^']+)'"),
    re.compile(r"(\S+) is not a local folder and is not a valid model identifier"),
    re.compile(r"Can't load tokenizer for '([^']+)'"),
)
_REF_LOAD_PATH = re.compile(r"ref_load (\S+) does not exist")


def _details(run: Run | None, outcome: str, matches: list[SignatureMatch]) -> dict[str, Any]:
    first = matches[0].line.text
    out: dict[str, Any] = {}
    if outcome == "cuda_oom":
        for m in matches:
            if (t := _TRIED.search(m.line.text)) and "tried_to_allocate" not in out:
                out["tried_to_allocate"] = t.group(1)
            if (c := _CAPACITY.search(m.line.text)) and "gpu_total" not in out:
                out.update(gpu=int(c.group(1)), gpu_total=c.group(2), gpu_free=c.group(3))
            elif (c := _CAPACITY_OLD.search(m.line.text)) and "gpu_total" not in out:
                out.update(gpu_total=c.group(1), gpu_allocated=c.group(2), gpu_free=c.group(3))
    elif outcome == "host_oom_killed":
        pids = sorted({p.group(1) for m in matches if (p := _PID.search(m.line.text))})
        if pids:
            out["pids"] = pids[:16]
        saving = next((f for m in matches for f in (m.line.text, *m.frames) if _SAVING.search(f)), None)
        if saving is not None:
            # the catalog's remedy is the data pipeline's; a kill while a checkpoint was gathered and written is the
            # save's (verl-project/verl#1964: a 32B model's `_save_checkpoint`, hiyouga/EasyR1#50)
            out["phase"] = f"checkpoint save ({short(saving.strip())})"
            out["remedy"] = ("The host ran out of RAM while a checkpoint was being gathered and written: save less at "
                             "once (the model without the optimizer state, fewer ranks writing together, a sharded "
                             "format instead of one gathered state dict), keep less offloaded to CPU memory during the "
                             "save, or give the node more RAM.")
            out["flags"] = []
    elif outcome in ("nccl_abort", "nan_check_failed"):
        ranks = sorted({int(r.group(1)) for m in matches if (r := _RANK.search(m.line.text))})
        if ranks:
            out["ranks"] = ranks[:64]
        if outcome == "nan_check_failed" and (it := _ITERATION.search(first)):
            out["iteration"] = int(it.group(1))
    elif outcome == "hf_model_not_found":
        for rx in _HF_PATH:
            if p := rx.search(first):
                path = p.group(1).strip("'\"")
                out["model_path"] = path
                if run is not None:
                    out["exists_here"] = run.resolve_path(path) is not None
                break
    elif outcome == "ref_load_missing" and (p := _REF_LOAD_PATH.search(first)):
        out["ref_load"] = p.group(1)
    elif outcome in ("gpu_fault", "network_failure", "connection_closed", "disk_full", "sched_ended", "terminated",
                     "killed"):
        nodes = sorted({n for m in matches if (n := node_of(m.line)) is not None})
        if nodes:
            out["nodes"] = nodes[:16]
        if outcome == "gpu_fault" and (x := _XID.search(" ".join(m.line.text for m in matches))):
            out["xid"] = int(x.group(1) or x.group(2))
        if outcome == "disk_full" and (d := _DISK_PATH.search(first)):
            out["path"] = d.group(1)
        if outcome in ("network_failure", "connection_closed") and (a := _PEER.search(first)):
            out["peer"] = a.group(1)
        if outcome in ("killed", "terminated"):
            out["confirm"] = ("look for the kernel's `Out of memory: Killed process` in `dmesg -T` on the node, and for the "
                              "scheduler's record of the job (`sacct -j JOB -o State,ExitCode,MaxRSS`, `kubectl describe pod`)")
        if outcome == "sched_ended" and _TIME_LIMIT.search(first) and (done := _finished_before(matches[0].line)):
            out["training_finished"] = done
            out["remedy"] = (f"The training had finished before the time limit ({done['where']}: `{done['text']}`): "
                             "the job hung at its exit until the scheduler ended it, and more time would not help. Find "
                             "what its processes waited on after the last step (`py-spy dump --pid` on a rank; a profiler "
                             "still writing, a process group never destroyed, a logger or data-loader worker never "
                             "joined); the last checkpoint is the result.")
    elif outcome == "version_mismatch":
        texts = [first, *matches[0].frames]
        out["packages"] = sorted({m.group(1).replace("/", ".") for t in texts for m in _PACKAGE.finditer(t)}
                                 | {owner for pattern, owner in _CLASS_OWNER if pattern.search(first)})
        if not out["packages"] and _TRL_TRAINER.search(first):
            out["packages"] = ["transformers", "trl"]
        if "_unsloth_" in first:  # a method unsloth put on transformers' Trainer (unsloth_patch_signature)
            out["packages"] = sorted({*out["packages"], "transformers", "unsloth"})
        if sym := _UNDEFINED_SYMBOL.search(first):
            out["symbol"] = sym.group("symbol")
            if sym.group("library"):
                out["library"] = sym.group("library")
            if lib := _SYMBOL_LIBRARY.match(sym.group("symbol")):
                # the namespace of a mangled C++ name says which library the extension was built against
                out["built_against"] = _SYMBOL_NAMESPACES[lib.group(1)]
    elif outcome == "sample_too_long":
        nums = [int(n) for n in re.findall(r"\b(\d{3,})\b", first)]
        if nums:
            out["token_counts"] = nums[:4]
        if run is not None and PACKING_ASSERTION.search(first) and (overrun := packing_overrun(run)) is not None:
            out["packing_budget"] = overrun
    return out


_XID = re.compile(r"\bXid \([^)]*\):\s*(\d+)|\bXid (\d+)\b")
_DISK_PATH = re.compile(r"(?:device|exceeded)[:,]?\s*'([^']+)'")
_PEER = re.compile(r"(?:Connect to|peer \[?|host )\s*([\w.:-]+(?:<\d+>)?)")

_TIME_LIMIT = re.compile(r"\bDUE TO TIME LIMIT\b|\bwalltime \d+ exceeded limit\b")
# A trainer's own words that its training loop ended: Megatron's `print_datetime('after training is done')`
# (megatron/training/training.py), the HF Trainer's `Training completed. Do not forget to share your model on
# huggingface.co/models =)` (transformers trainer.py, _inner_training_loop), verl's `Final validation metrics:`
# (verl/trainer/ppo/ray_trainer.py, fit at its last step). Before a time limit they say the job hung at its exit
# (NVIDIA-NeMo/Megatron-Bridge#1656: "After training completes successfully, the job does not terminate cleanly and
# hangs until there is a slurm timeout").
_TRAINING_FINISHED = re.compile(r"\[after training is done\]|Training completed\. Do not forget to share your model"
                                r"|Final validation metrics: ")
FINISHED_TAIL_BYTES = 4 << 20  # how far before the end of a log its trainer's last words are looked for


@lru_cache(maxsize=8)
def _tail_lines(path: str, size: int, mtime_ns: int) -> tuple[tuple[str, ...], bool] | None:
    """The lines of a log's last FINISHED_TAIL_BYTES and whether they start inside it, read once per file version
    however many of its lines ask (`size` and `mtime_ns` key the version)."""
    try:
        data, start = safe_io.read_tail(Path(path), FINISHED_TAIL_BYTES)
    except (OSError, TriageError):
        return None
    tail = data.decode("utf-8", "replace")
    return tuple(tail.splitlines()[1 if start else 0:]), start > 0  # (a tail read from inside starts mid-line)


def _finished_before(line: LogLine) -> dict[str, str] | None:
    """The trainer's words that training ended, on a line above `line`, in the last FINISHED_TAIL_BYTES of its log."""
    try:
        st = os.stat(line.path)
    except OSError:
        return None
    read = _tail_lines(line.path, st.st_size, st.st_mtime_ns)
    if read is None:
        return None
    lines, start = read
    at = next((k for k in range(len(lines) - 1, -1, -1) if line.text and line.text in lines[k]), None)
    if at is None:
        return None
    for k in range(at - 1, -1, -1):
        if _TRAINING_FINISHED.search(lines[k]):
            where = f"{Path(line.path).name}:{k + 1}" if not start else f"{at - k} lines above it"
            return {"where": where, "text": split_line(lines[k]).text.strip()[:200]}
    return None


def crosses_packages(frames: tuple[str, ...], text: str = "") -> bool:
    """The innermost frame is in a known package and an outer frame in another one, or the object the
    error names is of a class another known package defines (`text`: the exception line)."""
    if not frames:
        # pasted alone, with no frame to say who reached it: an object of a class a known package defines is that
        # package's, read by other code (zjysteven/lmms-finetune#64: `'DeepSpeedZeroOptimizer_Stage3' object has no
        # attribute 'train'`, a newer accelerate's call; fixed by upgrading accelerate)
        return any(pattern.search(text) for pattern, _pkg in _CLASS_OWNER)
    inner = _PACKAGE.search(frames[-1])
    if inner is None:
        return False
    owner = next((pkg for pattern, pkg in _CLASS_OWNER if pattern.search(text)), None)
    if owner is not None and owner != inner.group(1):
        return True
    return any((m := _PACKAGE.search(f)) is not None and m.group(1) != inner.group(1) for f in frames[:-1])


# (a package's own path segment or module name: not a word inside another name, such as a virtualenv called
# `ms-swift-new` whose path holds torch's frames, modelscope/ms-swift#4398)
_PACKAGE = re.compile(
    r"(?<![\w.-])(transformers|megatron[/.](?:core|training|bridge|legacy)|mbridge|transformer_engine|sglang|sgl_kernel|vllm"
    r"|deepspeed|flash_attn|peft|accelerate|trl|verl|slime|miles|openrlhf|swift|tensordict|bitsandbytes|xgrammar"
    r"|outlines|axolotl|unsloth(?:_zoo)?|mindspeed(?:_llm|_rl|_mm)?|torch_npu|vllm_ascend"
    # a model's own code, run with trust_remote_code from transformers' dynamic-module cache
    # (~/.cache/huggingface/modules/transformers_modules/<org>/<model>/modeling_*.py): written against one transformers
    r"|transformers_modules)(?![\w-])")
# classes whose name says which package defines them: an attribute of one read in another package's frame is
# one package's call into another (trl's add_hooks on deepspeed's DeepSpeedZeRoOffload, renamed in deepspeed
# 0.16.4: huggingface/trl#2962; accelerate's on bitsandbytes' optimizers has its outer frames instead)
_CLASS_OWNER: tuple[tuple[re.Pattern[str], str], ...] = (
    # accelerate's plugin and state dataclasses (accelerate/utils/dataclasses.py, accelerate/state.py), read by
    # transformers' Trainer (huggingface/transformers#25988: `FullyShardedDataParallelPlugin` without
    # `activation_checkpointing` under accelerate 0.22)
    (re.compile(r"'(?:FullyShardedDataParallelPlugin|DeepSpeedPlugin|MegatronLMPlugin|TorchDynamoPlugin"
                r"|AcceleratorState|PartialState|GradientState)' object has no attribute"), "accelerate"),
    # the Accelerator's public attributes, which the Trainer and the frameworks read (OpenBMB/MiniCPM-V#668:
    # `deepspeed_engine_wrapped` under another accelerate, "our accelerate is 0.30.1"); not its private state, which
    # only its own code reads (huggingface/accelerate#3867: `_cp_context` never set, a bug of accelerate 1.12.0)
    (re.compile(r"'Accelerator' object has no attribute '(?!_)"), "accelerate"),
    (re.compile(r"'DeepSpeed\w*' object has no attribute"), "deepspeed"),
    (re.compile(r"'(?:Peft\w*|Lora\w*)' object has no attribute"), "peft"),
    (re.compile(r"'(?:\w*LLMEngine|EngineCore\w*)' object has no attribute"), "vllm"),
    # the engines' and trainers' argument dataclasses, read field by field by the frameworks that launch them:
    # sglang/srt/server_args.py `class ServerArgs` (THUDM/slime#1741: slime read `encoder_only`, a field of later
    # SGLang releases; fixed in slime with a getattr), transformers/training_args.py `class TrainingArguments`,
    # trl/trainer/*_config.py (`GRPOConfig`, `DPOConfig`, …, subclasses of TrainingArguments)
    (re.compile(r"'ServerArgs' object has no attribute"), "sglang"),
    (re.compile(r"'(?:Seq2Seq)?TrainingArguments' object has no attribute"), "transformers"),
    (re.compile(r"'(?:GRPO|DPO|PPO|SFT|KTO|ORPO|CPO|RLOO|Reward|OnlineDPO|BCO|GKD|PRM|XPO|Nash)Config' object has no "
                r"attribute"), "trl"),
    # transformers' KV caches (cache_utils.py), whose methods a model's remote code calls (baaivision/Emu3#74:
    # `'DynamicCache' object has no attribute 'get_max_length'`, removed in transformers 4.51), and the model configs
    # of its architectures (configuration_*.py: huggingface/transformers#45850, `'BertConfig' object has no attribute
    # 'pad_token_id'` under v5; #36683, `'Gemma3Config' object has no attribute 'vocab_size'` read by an older vLLM)
    (re.compile(r"'(?:Dynamic|Static|Hybrid|SlidingWindow|Offloaded|Quantized|EncoderDecoder)Cache' object has no "
                r"attribute"), "transformers"),
    (re.compile(r"'(?:PretrainedConfig|PreTrainedConfig|(?:Bert|Roberta|GPT2|Llama|Qwen|Mistral|Mixtral|Gemma|Phi|Deepseek"
                r"|Glm|InternLM|Olmo|T5|Bloom|Falcon|Baichuan)[A-Za-z0-9_]*Config)' object has no attribute"), "transformers"),
)
# `ImportError: /path/lib.so: undefined symbol: _ZN5torch3jit…` (the dynamic loader's message through CPython)
_UNDEFINED_SYMBOL = re.compile(r"(?:(?P<library>/\S+\.so(?:\.[\w.]+)?): )?undefined symbol: (?P<symbol>\w+)")
# Itanium-mangled names: `_ZN` + length-prefixed namespace (`3c10`, `2at`, `5torch`)
_SYMBOL_LIBRARY = re.compile(r"_ZN(?:K|V|VK)?(3c10|2at|5torch)")
_SYMBOL_NAMESPACES = {"3c10": "torch (c10)", "2at": "torch (ATen)", "5torch": "torch"}
# a TRL trainer missing an attribute of transformers' Trainer: the pair is TRL and transformers
_TRL_TRAINER = re.compile(r"'\w*Trainer' object has no attribute|\w+Trainer\.(?!__init__)\w+\(\) (?:takes \d|missing \d)")


_SUMMARY = {
    "cuda_oom": "CUDA out of memory",
    "host_oom_killed": "the host ran out of RAM and a process was killed",
    "nccl_abort": "a collective (NCCL, or gloo on CPU) was aborted or timed out",
    "illegal_memory_access": "CUDA reported an illegal memory access",
    "engine_port_conflict": "a server could not be reached or could not bind its port",
    "port_unreachable": "a client could not reach a server on its own node (loopback)",
    "server_unavailable": "the rollout server (or its router) answered 503: nothing healthy behind it took the request",
    "inductor_cache": "torch.compile hit a corrupt compile-cache entry (inductor's JSONDecodeError, vLLM's corrupted "
                      "compilation artifact) or a cache on a shared filesystem that changed under it",
    "hf_model_not_found": "transformers could not find the model or its config",
    "no_pad_token": "the tokenizer has no padding token",
    "eos_boundary": "the chat template's end boundary came before its start",
    "ref_load_missing": "KL is on but the reference checkpoint (--ref-load) does not exist",
    "nan_check_failed": "the trainer's own NaN / Inf check stopped training (Megatron's, DeepSpeed's fp16 loss scaler or "
                        "autograd's anomaly mode)",
    "killed": "a process was killed with SIGKILL, and nothing in the log says why",
    "sched_ended": "the scheduler ended the job",
    "terminated": "a process received SIGTERM, and nothing in the log says who sent it",
    "network_failure": "a network connection between nodes (or to the router) could not be made",
    "connection_closed": "a peer closed or reset a connection (the network, or a rank that left the collectives)",
    "gpu_fault": "a GPU failed in hardware",
    "disk_full": "a filesystem was full",
    "version_mismatch": "a package called an API its installed dependency does not have",
    "sample_too_long": "a sample was longer than a hard token budget",
    "batch_size_mismatch": "the framework refused its batch sizes",
    "degenerate_groups": "the trainer refused one sample per prompt (group advantages need at least two)",
    "insufficient_gpus": "the job asked for more GPUs than the Ray cluster has",
    "weight_name_refused": "the engine refused a parameter name the trainer sent in a weight update",
    "weight_update_refused": "the engine refused a tensor of a weight update and holds partly updated weights",
    "converter_no_mapping": "the model converter has no name mapping for some of the model's parameters",
    "groups_filtered_out": "dynamic sampling found too few groups whose samples' rewards differ",
    "no_chat_template": "the tokenizer has no chat template (a base model's) and the run applies one",
    "reward_fn_failed": "the reward function could not score a sample from what the sample carries",
    "hf_config_mismatch": "the framework refused model arguments that differ from the checkpoint's HF config",
}


def cut_traceback_line(line: LogLine) -> bool:
    """Whether a fatal line stands for a traceback cut before its exception line: its header alone,
    or nothing (frames pasted without header or exception): it names no error of its own. Hydra's
    `Error executing job with overrides: […]` is such a header too: Hydra prints the exception under
    it, so one still standing alone (`_headers_give_way`) had its error cut off (verl-project/verl#1929)."""
    text = line.text.strip()
    if "Traceback (most recent call last):" in text and _MESSAGE_BEFORE_HEADER.search(text):
        return False  # the error's message came first, on the header's own line
    # (a progress bar's leftovers may follow the header on its line: OpenRLHF/OpenRLHF#95)
    return not text or "Traceback (most recent call last):" in text or text.startswith("Error executing job with overrides: ")


# vLLM's multiprocessing worker writes the exception's message before its traceback on one line
# (vllm/executor/multiproc_worker_utils.py _run_worker_process: `Exception in worker %s while processing
# method %s: %s, %s` with the error and traceback.format_exc(); vllm-project/vllm#5531)
_MESSAGE_BEFORE_HEADER = re.compile(r"while processing method \w+: \S.*?, Traceback \(most recent call last\):")


def _envelope_of(cut: Chain | None, line: LogLine) -> bool:
    """Whether a fatal line is Ray's envelope (`RayTaskError(X): ray::A.m() (pid=…)`) of a remote
    traceback the paste cut before its exception line: it names the remote task and the error's type,
    not the error (verl-project/verl#1776: `RayTaskError(NotImplementedError)` above frames cut
    mid-line)."""
    return cut is not None and str(cut.path) == str(line.path) and any(
        b.is_wrapper and b.line_no == line.line_no for b in cut.blocks)


def stopped_on(line: LogLine) -> str:
    """How a summary names the line a job stopped on: quoted, or, for a traceback cut before its
    exception line, said so, since its header names no error (radixark/miles#308)."""
    if cut_traceback_line(line):
        if line.text.strip().startswith("Error executing job with overrides: "):  # its exception cut off under it
            return f"`{short(line.text.strip(), 80)}` with its exception cut off"
        return "a traceback cut before its exception line"
    return f"`{short(line.text.strip())}`"


def short(text: str, limit: int = 160) -> str:
    """A log line cut for a one-sentence summary (the evidence keeps it whole)."""
    text = text.strip()
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit - 1)
    return text[: cut if cut > limit // 2 else limit - 1] + "…"


def _who(line: LogLine) -> str:
    return f" on {line.source}" if line.source else ""


_MISSING_FILE = re.compile(r"FileNotFoundError|No such file or directory")
REF_LOAD_PATH = Signature(
    id="ref_load_path_missing",
    outcome="ref_load_missing",
    role="root",
    patterns=(_MISSING_FILE,),
    context=(),
    source="slime arguments validation / Megatron checkpoint loading (KL on needs --ref-load); 001, 004",
    explanation="A file under the run's --ref-load directory is missing, so the reference model for KL cannot be loaded.",
)


def with_ref_load_paths(run: Run, result: ErrorScan) -> ErrorScan:
    """Add missing-file errors that name the run's own --ref-load path (the message need not say "ref_load")."""
    try:
        ref_load = run.args.get("ref_load") if run.args else None
    except TriageError:
        return result
    if not isinstance(ref_load, str) or len(ref_load.strip("/")) < 2:
        return result
    ref = ref_load.rstrip("/")
    extra = [
        SignatureMatch(REF_LOAD_PATH, line, order, frames)
        for line, order, frames in result.fatal_lines
        if _MISSING_FILE.search(line.text) and ref in line.text
    ]
    if not extra:
        return result
    taken = {id(m.line) for m in extra}
    return ErrorScan(
        matches=sorted(result.matches + extra, key=lambda m: m.order),
        fatal_lines=[f for f in result.fatal_lines if id(f[0]) not in taken],
    )


# slime's packing assertion (`_get_capped_partitions`, THUDM/slime#1839) has generic words; without the
# frame that names it, the run's own arguments may still show that one sample can exceed the packing
# budget: slime packs micro-batches of at most max_tokens_per_gpu * context_parallel_size tokens
# (slime/backends/megatron_utils/data.py), and a sample holds up to its prompt plus
# rollout_max_response_len tokens.
PACKING_ASSERTION = re.compile(r"AssertionError(?::\s*|\(\s*[\"'])This should never happen")


def packing_overrun(run: Run) -> dict[str, Any] | None:
    """The arguments that let one sample exceed slime's packing budget, or None (unknown or within it)."""
    from probes.config_rule import arg_int

    try:
        if not run.args:
            return None
    except TriageError:
        return None
    mtpg = arg_int(run, "max_tokens_per_gpu")
    response = arg_int(run, "rollout_max_response_len")
    if mtpg is None or response is None:
        return None
    cp = arg_int(run, "context_parallel_size") or 1
    prompt = arg_int(run, "rollout_max_prompt_len")
    longest = response + (prompt or 0)
    if longest <= mtpg * cp:
        return None
    what = (f"rollout_max_response_len {response} + rollout_max_prompt_len {prompt} = {longest}" if prompt
            else f"rollout_max_response_len {response}")
    return {"max_tokens_per_gpu": mtpg, "context_parallel_size": cp, "rollout_max_response_len": response,
            "rollout_max_prompt_len": prompt, "longest_sample_tokens": longest,
            "arithmetic": f"{what} > max_tokens_per_gpu*cp_size = {mtpg}*{cp} = {mtpg * cp}"}


def with_packing_budget(run: Run, result: ErrorScan) -> ErrorScan:
    """Attribute slime's packing assertion to the sample budget when the frames do not name it but the
    run's arguments let one sample exceed the budget."""
    if result.of_outcome("sample_too_long"):
        return result
    lines = [(line, order, frames) for line, order, frames in result.fatal_lines if PACKING_ASSERTION.search(line.text)]
    if not lines:
        return result
    overrun = packing_overrun(run)
    if overrun is None:
        return result
    sig = Signature(
        id="packing_budget_by_args",
        outcome="sample_too_long",
        role="root",
        patterns=(PACKING_ASSERTION,),
        context=(),
        source="THUDM/slime slime/backends/megatron_utils/data.py _get_capped_partitions; THUDM/slime#1839",
        explanation=("slime's packing assertion, with arguments that let one sample exceed the per-GPU packing "
                     f"budget ({overrun['arithmetic']})."),
        pattern_sources=("THUDM/slime slime/backends/megatron_utils/data.py (raise AssertionError(\"This should never "
                         "happen.\")); THUDM/slime#1839",),
    )
    extra = [SignatureMatch(sig, line, order, frames) for line, order, frames in lines]
    taken = {id(m.line) for m in extra}
    return ErrorScan(
        matches=sorted(result.matches + extra, key=lambda m: m.order),
        fatal_lines=[f for f in result.fatal_lines if id(f[0]) not in taken],
    )


# a signature whose words say more than its outcome's sentence (an interrupt is a signal from outside, not SIGTERM)
_SIGNATURE_SUMMARY = {
    "keyboard_interrupt": "the job was interrupted (KeyboardInterrupt, SIGINT), and nothing in the log says it failed "
                          "on its own",
    "ray_wrapped_oom": "a Ray task failed on an `OutOfMemoryError` whose class alone Ray names: torch's (GPU memory) or "
                       "Ray's memory monitor's (host RAM), which the exception under it tells apart",
    # Ray lists causes it cannot tell apart; no SIGKILL was seen (hkust-nlp/simpleRL-reason#98)
    "ray_worker_vanished": "a Ray worker vanished without exiting on its own (Ray names the OOM killer's SIGKILL, "
                           "`ray stop --force` or a crash as the possible causes), and nothing in the log says which",
}


# a package missing altogether, not one without an API: the wording of a version mismatch that is an absent install
# (OpenRLHF/OpenRLHF#790 was told "a package called an API its installed dependency does not have" for
# `No module named 'flash_attn'`)
_NPU_OOM = re.compile(r"\bNPU out of memory|\brtMalloc execute failed")
# a frame or line of a checkpoint being written (verl's `_save_checkpoint` / `save_checkpoint`, torch.save, HF's
# save_pretrained / save_model, DeepSpeed's save_checkpoint)
_SAVING = re.compile(r"\b(?:_?save_checkpoint|save_pretrained|save_model|torch\.save|_save)\b|\bsave_checkpoint\(")
_NOT_INSTALLED = re.compile(r"No module named '[\w]+'|\bis not installed\b")


def _summary(sig: Signature, text: str = "") -> str:
    if sig.outcome == "version_mismatch" and _NOT_INSTALLED.search(text):
        return "a package the job imports is not installed in the environment that ran it"
    if sig.outcome == "cuda_oom" and _NPU_OOM.search(text):
        return "an Ascend NPU ran out of memory"
    return _SIGNATURE_SUMMARY.get(sig.id) or _SUMMARY[sig.outcome]


class ErrorSignatures(Probe):
    """The error that stopped the job, classified by the guides' error messages (root before cascade)."""

    name = "error_signatures"
    outcomes = OUTCOMES
    needs = ("log",)
    cost = Cost.STATIC

    def examine(self, run: Run) -> Observation:
        log = run.log
        result = with_packing_budget(run, with_ref_load_paths(run, scan(log)))
        base: dict[str, Any] = {"log_files": len(log.files), "error_lines_seen": len(log.errors) + log.dropped_errors}
        chosen = result.decisive()
        if chosen is not None and chosen.signature.state:
            # a monitor's report of the state, and the write that then failed in it: the failure is quoted
            # (Westwood-Lin/TinyZero-Reproduction: Ray's `over 95% full, available space: 1.04582 GB`, then
            # safetensors' `IoError(Os { code: 28, … "No space left on device" })` saving the checkpoint)
            chosen = next((m for m in result.matches if not m.signature.state
                           and m.signature.outcome == chosen.signature.outcome), chosen)
        if chosen is not None:
            return self._signature_observation(run, result, chosen, base)
        from probes.crash_location import pasted_cut_traceback  # (it builds on this module)

        cut = pasted_cut_traceback(run)
        fatal = [f for f in result.fatal_lines if not cut_traceback_line(f[0]) and not _envelope_of(cut, f[0])]
        if fatal:
            # a report of another process's death (Ray prints the raylet's first) names no cause of its own
            causes = [f for f in fatal if not CONSEQUENCE_LINE.search(f[0].text)] or fatal
            line, _order, frames = min(causes, key=lambda f: f[1])
            return self.observe(
                "other_error",
                f"The job stopped on an error no guide lists: {stopped_on(line)} at {line.where()}{_who(line)}.",
                0.6,
                line=quote(line),
                frames=list(frames[-6:]),
                count=len(fatal),
                first_where=line.where(),
                last_where=max(fatal, key=lambda f: f[1])[0].where(),
                **base,
            )
        where = cut.where if cut is not None else (
            min(result.fatal_lines, key=lambda f: f[1])[0].where() if result.fatal_lines else None)
        if where is not None:  # the error's own words are not in the log: no signature can be ruled out
            raise Unavailable(
                "log",
                f"the traceback at {where} is cut before its exception line, so the error's words are not in the log",
                "paste the traceback down to its last line (the exception and its message)",
            )
        return self.observe(
            "none",
            f"No fatal error in {len(log.files)} log file(s): no exception line and no error message the guides list.",
            0.7 if not log.truncated_tail else 0.5,
            log_truncated=log.truncated_tail,
            **base,
        )

    def _signature_observation(
        self, run: Run, result: ErrorScan, chosen: SignatureMatch, base: dict[str, Any]
    ) -> Observation:
        sig = chosen.signature
        same = sorted((m for m in result.matches if m.signature.outcome == sig.outcome), key=lambda m: m.order)
        if chosen not in same:  # an outcome the lines decide together (SIGTERM, then SIGKILL: `decisive`)
            same.insert(0, chosen)
        others: dict[str, list[SignatureMatch]] = {}
        for m in result.matches:
            if m.signature.outcome != sig.outcome:
                others.setdefault(m.signature.id, []).append(m)
        also_seen = [
            {
                "signature": sid,
                "outcome": ms[0].signature.outcome,
                "role": ms[0].signature.role,
                "count": len(ms),
                "first_where": min(ms, key=lambda m: m.order).line.where(),
            }
            for sid, ms in sorted(others.items(), key=lambda kv: min(m.order for m in kv[1]))
        ]
        cascade_note = ""
        if sig.role == "root" and any(s["role"] == "cascade" for s in also_seen):
            cascade_note = " (the NCCL aborts / timeouts also in the log are its cascade on the other ranks)"
        elif sig.role == "cascade":
            cascade_note = " (no other error the guides list explains it)"
        confidence = 0.9 if sig.role == "root" else 0.6
        said = _summary(sig, chosen.line.text)
        summary = (
            f"{said[0].upper()}{said[1:]}: "
            f"`{short(chosen.line.text)}` at {chosen.line.where()}{_who(chosen.line)}{cascade_note}."
        )
        details = _details(run, sig.outcome, same)
        if sig.id == "keyboard_interrupt":
            # SIGINT is no memory killer's signal (the kernel's and Ray's send SIGKILL, a pod's limit SIGTERM): who
            # sent it is a user or a launcher, which the scheduler's record tells (JuncyLu/trl_DAPO's Ctrl-C at step 6)
            details.pop("confirm", None)
            summary += (" Who sent it: the scheduler's record of the job (`sacct -j JOB -o State,ExitCode`, "
                        "`kubectl describe pod`), or a user's Ctrl-C.")
        if "confirm" in details:
            summary += f" To tell memory from a scheduler: {details['confirm']}."
        outcome = sig.outcome
        if outcome == "hf_model_not_found" and details.get("exists_here") is not True \
                and len({m.line.source or rank_of(m.line) for m in same} - {None}) < 2:
            # the catalog's cause is several processes reading files that exist: nothing here shows either
            outcome = "hf_model_unconfirmed"
            summary += (" Nothing here shows the model's files exist or several processes reading them at once: a wrong "
                        "path, a gated or private repository, an offline setting or a stale cache give the same words.")
            confidence = 0.6
        return self.observe(
            outcome,
            summary,
            confidence,
            signature=sig.id,
            explanation=sig.explanation,
            guide=sig.source,
            pattern_source=sig.matching_source(chosen.line.text),
            rank=rank_of(chosen.line),
            node=node_of(chosen.line),
            line=quote(chosen.line),
            frames=list(chosen.frames[-6:]),
            count=len(same),
            first_where=same[0].line.where(),
            last_where=same[-1].line.where(),
            also_seen=also_seen,
            rule="the earliest root error decides; NCCL aborts and timeouts decide only when nothing else explains them",
            **({"remedy": sig.remedy, "flags": list(sig.flags)} if sig.remedy else {}),
            **({"suggests": [{"verdict": sig.suggests, "because": sig.explanation}]} if sig.suggests else {}),
            **({UNJUDGED_OUTCOMES: list(sig.leaves_open)} if sig.leaves_open else {}),
            **details,
            **base,
        )
