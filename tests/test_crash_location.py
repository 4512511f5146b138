"""crash_location: an unrecognised crash located — first exception, component, rank, node, frame, step, count.

The logs below are shaped as the frameworks print them: Ray's actor prefixes and its
`RayTaskError(...)` envelope (ray-project/ray python/ray/exceptions.py, RayTaskError.__str__),
torchrun's `[rankN]:` prefixes (torch/distributed/elastic), slime's `[Rank N] Memory-Usage`
lines (THUDM/slime slime/utils/memory_utils.py) and `step N: {...}` records, SGLang's
`Scheduler hit an exception:` (sgl-project/sglang python/sglang/srt/managers/scheduler.py),
verl's TaskRunner and `step:N - ` records (verl-project/verl verl/trainer/main_ppo.py,
verl/utils/tracking.py). None of the errors is one the signature table names.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from probes.crash_location import CrashLocation
from probes.error_signatures import ErrorSignatures
from triage.errors import Unavailable
from triage.formats.tracebacks import normalise, read_text, went_on_after
from triage.run import open_run

TRAIN = "MegatronTrainRayActor pid=2236, ip=10.0.0.11"

SLIME_HEAD = f"""\
[2026-08-01 10:00:00] train.py:41 - Start training
({TRAIN}) [2026-08-01 10:02:00] memory_utils.py:49 - [Rank 2] Memory-Usage after wake_up model: {{'gpu': '0', 'total_GB': 79.11, 'free_GB': 30.1, 'used_GB': 49.01}}
({TRAIN}) [2026-08-01 10:03:00] model.py:918 - step 4: {{'train/loss': 0.012, 'train/grad_norm': 0.41}}
({TRAIN}) [2026-08-01 10:05:00] model.py:918 - step 5: {{'train/loss': 0.011, 'train/grad_norm': 0.39}}
"""

TRAINER = SLIME_HEAD + f"""\
Traceback (most recent call last):
  File "/root/slime/train.py", line 104, in <module>
    train(args)
  File "/root/slime/train.py", line 72, in train
    ray.get(actor_model.async_train(rollout_id, rollout_data_ref))
  File "/usr/local/lib/python3.12/dist-packages/ray/_private/worker.py", line 2961, in get
    values, debugger_breakpoint = worker.get_objects(object_refs, timeout=timeout)
  File "/usr/local/lib/python3.12/dist-packages/ray/_private/worker.py", line 1026, in get_objects
    raise value.as_instanceof_cause()
ray.exceptions.RayTaskError(KeyError): \x1b[36mray::MegatronTrainRayActor.train()\x1b[39m (pid=2236, ip=10.0.0.11, actor_id=0f9e8d7c6b5a4f3e2d1c0b9a01000000, repr=<slime.backends.megatron_utils.actor.MegatronTrainRayActor object at 0x7f51a2b3c4d0>)
  File "/root/slime/slime/backends/megatron_utils/actor.py", line 441, in train
    self.train_actor(rollout_id, rollout_data)
  File "/root/slime/slime/backends/megatron_utils/loss.py", line 212, in compute_advantages_and_returns
    old = rollout_data["rollout_log_probs"]
          ~~~~~~~~~~~~^^^^^^^^^^^^^^^^^^^^^
KeyError: 'rollout_log_probs'
"""

ENGINE = """\
(SGLangEngine pid=3101, ip=10.0.0.12) [2026-08-01 10:06:00 TP1] Decode batch. #running-req: 64, #token: 81920, token usage: 0.41, gen throughput (token/s): 5120.33
(RolloutManager pid=2290, ip=10.0.0.10) [2026-08-01 10:06:10] rollout.py:310 - rollout 7: {'rollout/response_len/mean': 1203.4}
(SGLangEngine pid=3101, ip=10.0.0.12) [2026-08-01 10:06:30 TP1] Scheduler hit an exception: Traceback (most recent call last):
(SGLangEngine pid=3101, ip=10.0.0.12)   File "/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/scheduler.py", line 2512, in run_scheduler_process
(SGLangEngine pid=3101, ip=10.0.0.12)     scheduler.event_loop_overlap()
(SGLangEngine pid=3101, ip=10.0.0.12)   File "/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/scheduler.py", line 771, in event_loop_overlap
(SGLangEngine pid=3101, ip=10.0.0.12)     batch_result = self.run_batch(batch)
(SGLangEngine pid=3101, ip=10.0.0.12)   File "/usr/local/lib/python3.12/dist-packages/sglang/srt/layers/sampler.py", line 104, in forward
(SGLangEngine pid=3101, ip=10.0.0.12)     batch_next_token_ids = torch.multinomial(probs, num_samples=1)
(SGLangEngine pid=3101, ip=10.0.0.12) RuntimeError: probability tensor contains either `inf`, `nan` or element < 0
"""

DRIVER = """\
(RolloutManager pid=2290, ip=10.0.0.10) [2026-08-01 10:06:10] rollout.py:310 - rollout 3: {'rollout/response_len/mean': 1203.4}
(RolloutManager pid=2290, ip=10.0.0.10) Traceback (most recent call last):
(RolloutManager pid=2290, ip=10.0.0.10)   File "/root/slime/slime/ray/rollout.py", line 388, in generate
(RolloutManager pid=2290, ip=10.0.0.10)     data = self._convert_samples_to_train_data(samples)
(RolloutManager pid=2290, ip=10.0.0.10)   File "/root/slime/slime/ray/rollout.py", line 512, in _convert_samples_to_train_data
(RolloutManager pid=2290, ip=10.0.0.10)     "loss_masks": [s.loss_mask for s in samples],
(RolloutManager pid=2290, ip=10.0.0.10) AttributeError: 'NoneType' object has no attribute 'loss_mask'
"""

RAY = """\
[2026-08-01 10:00:00] train.py:41 - Start training
[2026-08-01 10:03:00] model.py:918 - step 9: {'train/loss': 0.012}
Traceback (most recent call last):
  File "/root/slime/train.py", line 72, in train
    ray.get(rollout_manager.generate.remote(rollout_id))
  File "/usr/local/lib/python3.12/dist-packages/ray/_private/auto_init_hook.py", line 21, in auto_init_wrapper
    return fn(*args, **kwargs)
  File "/usr/local/lib/python3.12/dist-packages/ray/_private/worker.py", line 2963, in get
    raise value
ray.exceptions.ObjectLostError: Failed to retrieve object 00ffffffffffffffffffffffffffffffffffffff0100000001e1f505. All copies of 00ffffffffffffffffffffffffffffffffffffff0100000001e1f505 have been lost due to node failure. Check cluster logs (`/tmp/ray/session_latest/logs`) for more information about the failure.
"""

DATA = """\
(TaskRunner pid=1893, ip=10.0.0.21) step:11 - actor/pg_loss:0.012 - actor/grad_norm:0.31 - critic/score/mean:0.42
(TaskRunner pid=1893, ip=10.0.0.21) Traceback (most recent call last):
(TaskRunner pid=1893, ip=10.0.0.21)   File "/workspace/verl/verl/trainer/ppo/ray_trainer.py", line 1012, in fit
(TaskRunner pid=1893, ip=10.0.0.21)     for batch_dict in self.train_dataloader:
(TaskRunner pid=1893, ip=10.0.0.21)   File "/usr/local/lib/python3.10/dist-packages/torchdata/stateful_dataloader/stateful_dataloader.py", line 450, in __next__
(TaskRunner pid=1893, ip=10.0.0.21)     return super().__next__()
(TaskRunner pid=1893, ip=10.0.0.21)   File "/usr/local/lib/python3.10/dist-packages/torch/utils/data/dataloader.py", line 733, in __next__
(TaskRunner pid=1893, ip=10.0.0.21)     data = self._next_data()
(TaskRunner pid=1893, ip=10.0.0.21)   File "/workspace/verl/verl/utils/dataset/rl_dataset.py", line 240, in __getitem__
(TaskRunner pid=1893, ip=10.0.0.21)     messages = self._build_messages(row_dict)
(TaskRunner pid=1893, ip=10.0.0.21)   File "/workspace/verl/verl/utils/dataset/rl_dataset.py", line 201, in _build_messages
(TaskRunner pid=1893, ip=10.0.0.21)     messages: list = example.pop(self.prompt_key)
(TaskRunner pid=1893, ip=10.0.0.21) KeyError: 'prompt'
"""

REWARD = """\
(RolloutManager pid=2290, ip=10.0.0.10) [2026-08-01 10:06:10] rollout.py:310 - rollout 12: {'rollout/response_len/mean': 1203.4}
(RolloutManager pid=2290, ip=10.0.0.10) Traceback (most recent call last):
(RolloutManager pid=2290, ip=10.0.0.10)   File "/root/slime/slime/rollout/sglang_rollout.py", line 401, in generate_and_rm
(RolloutManager pid=2290, ip=10.0.0.10)     sample.reward = await async_rm(args, sample)
(RolloutManager pid=2290, ip=10.0.0.10)   File "/root/slime/slime/rollout/rm_hub/__init__.py", line 60, in async_rm
(RolloutManager pid=2290, ip=10.0.0.10)     return compute_score_dapo(response, label)
(RolloutManager pid=2290, ip=10.0.0.10)   File "/root/slime/slime/rollout/rm_hub/math_dapo_utils.py", line 268, in compute_score
(RolloutManager pid=2290, ip=10.0.0.10)     pred = re.findall(r"Answer:\\s*(.+)", solution_str)
(RolloutManager pid=2290, ip=10.0.0.10)   File "/usr/lib/python3.12/re/__init__.py", line 217, in findall
(RolloutManager pid=2290, ip=10.0.0.10)     return _compile(pattern, flags).findall(string)
(RolloutManager pid=2290, ip=10.0.0.10) TypeError: expected string or bytes-like object, got 'NoneType'
"""

# component, exception type, rank, node, frame function, step / rollout (kind, n)
COMPONENTS = [
    ("trainer", TRAINER, "trainer", "KeyError", 2, "10.0.0.11", "compute_advantages_and_returns", ("step", 5)),
    ("engine", ENGINE, "inference engine", "RuntimeError", 1, "10.0.0.12", "forward", ("rollout", 7)),
    ("driver", DRIVER, "rollout manager / driver", "AttributeError", None, "10.0.0.10", "_convert_samples_to_train_data", ("rollout", 3)),
    ("ray", RAY, "Ray", "ray.exceptions.ObjectLostError", None, None, "train", ("step", 9)),
    ("data", DATA, "data loading", "KeyError", None, "10.0.0.21", "_build_messages", ("step", 11)),
    ("reward", REWARD, "reward function", "TypeError", None, "10.0.0.10", "compute_score", ("rollout", 12)),
]


def scanned_traceback(tmp_path: Path, text: str):
    """The one traceback the log scan reads in `text`, written as the run's job.log."""
    from triage.formats.slime_log import scan_logs

    (tmp_path / "job.log").write_text(text, encoding="utf-8")
    [tb] = scan_logs([tmp_path / "job.log"]).tracebacks
    return tb


def locate(tmp_path: Path, log: str):
    (tmp_path / "job.log").write_text(log, encoding="utf-8")
    run = open_run(str(tmp_path))
    try:
        sig = ErrorSignatures().examine(run)
    except Unavailable as exc:  # a traceback cut before its exception: no signature can be ruled out
        sig = exc
    return sig, CrashLocation().examine(run)


@pytest.mark.parametrize(("name", "log", "component", "exc", "rank", "node", "frame", "when"), COMPONENTS,
                         ids=[c[0] for c in COMPONENTS])
def test_each_component_is_located(tmp_path, name, log, component, exc, rank, node, frame, when):
    sig, obs = locate(tmp_path, log)
    assert sig.outcome == "other_error", f"{name}: a signature claimed it: {sig.evidence.get('signature')}"
    assert obs.outcome == "located", obs.summary
    ev = obs.evidence
    assert ev["component"] == component, ev["component_reason"]
    assert ev["exception_type"] == exc
    assert ev["rank"] == rank
    assert ev["node"] == node
    assert ev["frame"] is not None and ev["frame"].endswith(f"in {frame}")
    assert ev[when[0]] == when[1]
    assert component in obs.summary


def test_the_root_of_a_ray_envelope_is_the_remote_error(tmp_path):
    _, obs = locate(tmp_path, TRAINER)
    ev = obs.evidence
    assert ev["exception"] == "KeyError: 'rollout_log_probs'"
    assert [b["type"] for b in ev["chain"]] == ["ray.exceptions.RayTaskError(KeyError)", "KeyError"]
    assert ev["actor"] == "MegatronTrainRayActor" and ev["pid"] == 2236
    assert ev["where"].endswith(f"job.log:{TRAINER.splitlines().index(chr(75) + 'eyError: ' + repr('rollout_log_probs')) + 1}")


def test_ansi_leftovers_and_prefixes_are_read_through(tmp_path):
    log = DRIVER.replace("(RolloutManager pid=2290, ip=10.0.0.10) ", "[36m(RolloutManager pid=2290, ip=10.0.0.10)[0m ")
    _, obs = locate(tmp_path, log)
    assert obs.evidence["exception_type"] == "AttributeError"
    assert obs.evidence["node"] == "10.0.0.10"


CHAINED = """\
[rank0]: Traceback (most recent call last):
[rank0]:   File "/workspace/OpenRLHF/openrlhf/trainer/ppo_utils/experience_maker.py", line 310, in make_experience
[rank0]:     reward = self.reward_cache[key]
[rank0]: KeyError: 'sample-17'
[rank0]:
[rank0]: During handling of the above exception, another exception occurred:
[rank0]:
[rank0]: Traceback (most recent call last):
[rank0]:   File "/workspace/OpenRLHF/openrlhf/trainer/ppo_utils/experience_maker.py", line 314, in make_experience
[rank0]:     raise RuntimeError(f"no cached experience for {key}")
[rank0]: RuntimeError: no cached experience for sample-17
"""


def test_chained_blocks_keep_the_first_exception(tmp_path):
    _, obs = locate(tmp_path, CHAINED)
    ev = obs.evidence
    assert ev["exception"] == "KeyError: 'sample-17'"
    assert [b["link"] for b in ev["chain"]] == [None, "context"]
    assert ev["rank"] == 0 and ev["component"] == "trainer"


def _rank_copies(n: int) -> str:
    out = []
    for r in range(n):
        out += [
            f"[rank{r}]: Traceback (most recent call last):",
            f'[rank{r}]:   File "/usr/local/lib/python3.11/dist-packages/trl/trainer/grpo_trainer.py", line 1288, in _prepare_inputs',
            f"[rank{r}]:     advantages = advantages[process_slice]",
            f'[rank{r}]:   File "/usr/local/lib/python3.11/dist-packages/torch/_tensor.py", line 41, in wrapped',
            f"[rank{r}]:     return f(*args, **kwargs)",
            f"[rank{r}]: IndexError: index {4096 + r} is out of bounds for dimension 0 with size 4096 (rank {r})",
        ]
    return "\n".join(out) + "\n"


def test_sixty_four_ranks_are_one_finding_with_count_64(tmp_path):
    _, obs = locate(tmp_path, _rank_copies(64))
    ev = obs.evidence
    assert ev["distinct_errors"] == 1
    assert ev["count"] == 64 and ev["ranks_hit"] == 64
    assert ev["ranks"] == list(range(64))
    assert ev["component"] == "trainer" and ev["frame"].endswith("in _prepare_inputs")
    assert "64 processes hit the same error" in obs.summary


def test_rays_repeated_count_is_counted():
    text = (
        "(TrainRayActor pid=11, ip=10.0.0.1) Traceback (most recent call last):\n"
        '(TrainRayActor pid=11, ip=10.0.0.1)   File "/root/miles/miles/backends/fsdp_utils/actor.py", line 90, in train\n'
        "(TrainRayActor pid=11, ip=10.0.0.1) ValueError: bad packing [repeated 7x across cluster]\n"
    )
    group = next(iter(read_text(text).groups.values()))
    assert group.count == 8


def test_a_later_nccl_timeout_and_actor_death_do_not_hide_the_first_error(tmp_path):
    cascade = "".join(
        f"(MegatronTrainRayActor pid={2240 + r}, ip=10.0.0.11) [rank{r}]:[E801 10:20:03.551 ProcessGroupNCCL.cpp:1616] "
        f"[PG ID 0 PG GUID 0(default_pg) Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=812, "
        "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600021 milliseconds before timing out.\n"
        for r in range(4)
    ) + (
        "Traceback (most recent call last):\n"
        '  File "/root/slime/train.py", line 72, in train\n'
        "    ray.get(actor_model.async_train(rollout_id, rollout_data_ref))\n"
        "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n"
    )
    sig, obs = locate(tmp_path, TRAINER + cascade)
    assert sig.outcome == "other_error"  # the NCCL timeouts after the KeyError are its cascade, not the cause
    ev = obs.evidence
    assert ev["exception_type"] == "KeyError"
    assert any("ActorDiedError" in c["exception"] for c in ev["cascade_after"])


def test_a_log_without_any_error_is_not_located(tmp_path):
    _, obs = locate(tmp_path, SLIME_HEAD)
    assert obs.outcome == "not_located"


def test_normalised_signature_masks_numbers_paths_and_addresses():
    a = normalise("tensor at 0x7f51a2b3c4d0 on rank 3: /root/ckpt/iter_0000012/x.pt has 4096 rows")
    b = normalise("tensor at 0x7f00deadbeef on rank 17: /mnt/other/iter_0000099/y.pt has 8192 rows")
    assert a == b
    # torch's advice under a CUDA error, whole or cut where a paste ended (verl-project/verl#4145, #6690)
    whole = normalise("CUDA error: invalid argument CUDA kernel errors might be asynchronously reported at some other "
                      "API call. For debugging consider passing CUDA_LAUNCH_BLOCKING=1 Compile with `TORCH_USE_CUDA_DSA` "
                      "to enable device-side assertions.")
    cut = normalise("CUDA error: invalid argument CUDA kernel errors might be asynchronously reported at some other "
                    "API call. For debugging consider passing CUDA_LAUNCH_BLOCKING=1 Compile with `TORCH_USE_CUDA_D")
    assert whole == cut == normalise("CUDA error: invalid argument")


@pytest.mark.parametrize(("name", "log", "component", "exc", "rank", "node", "frame", "when"), COMPONENTS,
                         ids=[c[0] for c in COMPONENTS])
def test_each_component_crash_walks_to_crash_unrecognized(tmp_path, capsys, name, log, component, exc, rank, node, frame, when):
    import json

    from triage.cli import main

    (tmp_path / "job.log").write_text(log, encoding="utf-8")
    code = main(["run", str(tmp_path), "--json", "--no-cache"])
    report = json.loads(capsys.readouterr().out)
    assert report["root_cause"]["id"] == "crash.unrecognized", [(s["node"], s["outcome"]) for s in report["path"]]
    assert code == 0
    located = next(s for s in report["path"] if s["probe"] == "crash_location")
    ev = located["evidence"]
    assert (ev["component"], ev["exception_type"], ev["rank"], ev["node"], ev[when[0]]) == (component, exc, rank, node, when[1])
    assert ev["frame"].endswith(f"in {frame}")


def test_a_traceback_cut_mid_way_is_placed_but_not_called_unrecognised(tmp_path, capsys):
    # a pasted fragment that stops inside the frames (issue threads often cut the paste there): where it
    # crashed is known, what it crashed on is not, so no verdict says that no known cause explains it
    import json

    from triage.cli import main

    cut = "\n".join(DATA.splitlines()[:-3]) + "\n"
    sig, obs = locate(tmp_path, cut)
    assert isinstance(sig, Unavailable) and "cut before its exception line" in str(sig)
    assert obs.outcome == "cut_off"
    ev = obs.evidence
    assert ev["exception_type"] is None and "cut before its exception" in ev["exception"]
    assert ev["component"] == "data loading"
    assert ev["frame"].endswith("in __getitem__")
    assert "paste the traceback's last lines" in obs.summary
    main(["run", str(tmp_path), "--json", "--no-cache"])
    report = json.loads(capsys.readouterr().out)
    assert report["root_cause"]["id"] == "inconclusive"


@pytest.mark.parametrize("kept", [2, 0], ids=["remote-frames-cut", "cut-under-the-envelope"])
def test_a_remote_traceback_cut_under_rays_envelope_is_cut_not_the_envelope(tmp_path, capsys, kept):
    # verl-project/verl#1776: `RayTaskError(NotImplementedError): ray::WorkerDict…() (pid=…)` above remote
    # frames the paste cut mid-line. The envelope names the remote task and the error's type, not the error:
    # no verdict can rest on it, and the report says which type Ray named
    import json

    from triage.cli import main

    lines = TRAINER.splitlines()
    env = next(i for i, line in enumerate(lines) if line.startswith("ray.exceptions.RayTaskError(KeyError)"))
    cut = "\n".join(lines[: env + 1 + kept]) + "\n"
    sig, obs = locate(tmp_path, cut)
    assert isinstance(sig, Unavailable) and "cut before its exception line" in str(sig)
    assert obs.outcome == "cut_off"
    assert obs.evidence["remote_error_type"] == "KeyError"
    assert "the remote task raised a KeyError, not why" in obs.summary
    main(["run", str(tmp_path), "--json", "--no-cache"])
    assert json.loads(capsys.readouterr().out)["root_cause"]["id"] == "inconclusive"


# IPython's traceback (ipython/ipython IPython/core/ultratb.py), as a notebook user pastes it: IPython 8
# (`Cell In[N], line M`, `File PATH:LINE, in FUNC(ARGS)`, numbered code lines, `(...)` elisions) and
# IPython 7 (`<ipython-input-N-…> in <module>`, `PATH in FUNC(ARGS)`); unslothai/notebooks#16
NOTEBOOK = """\
---------------------------------------------------------------------------
TypeError                                 Traceback (most recent call last)
Cell In[6], line 14
      1 trainer = GRPOTrainer(
   (...)     12     train_dataset = dataset,
     13 )
---> 14 trainer.train()

File ~/env/lib/python3.11/site-packages/transformers/trainer.py:2245, in Trainer.train(self, resume_from_checkpoint, trial, ignore_keys_for_eval, **kwargs)
   2243         hf_hub_utils.enable_progress_bars()
   2244 else:
-> 2245     return inner_training_loop(
   2246         args=args,
   2247     )

File ~/env/lib/python3.11/site-packages/trl/trainer/grpo_trainer.py:981, in GRPOTrainer._prepare_inputs(self, inputs)
    980 if mode == "train":
--> 981     inputs = self._generate_and_score_completions(inputs)

KeyError: 'prompt'
"""
NOTEBOOK_7 = """\
---------------------------------------------------------------------------
KeyError                                  Traceback (most recent call last)
<ipython-input-6-3f2b1c9d8e7a> in <module>
----> 1 trainer.train()

/usr/local/lib/python3.7/dist-packages/transformers/trainer.py in train(self, resume_from_checkpoint, trial, **kwargs)
   1325
-> 1326                 tr_loss += self.training_step(model, inputs)

KeyError: 'prompt'
"""


@pytest.mark.parametrize("log", [NOTEBOOK, NOTEBOOK_7], ids=["ipython8", "ipython7"])
def test_a_notebooks_traceback_is_read_with_its_frames(tmp_path, log):
    _, obs = locate(tmp_path, log)
    assert obs.outcome == "located"
    ev = obs.evidence
    assert ev["exception"] == "KeyError: 'prompt'"
    assert ev["where"].endswith(f"job.log:{log.splitlines().index(chr(75) + 'eyError: ' + repr('prompt')) + 1}")
    assert ev["innermost_frame"].endswith(("grpo_trainer.py\", line 981, in GRPOTrainer._prepare_inputs",
                                           "trainer.py\", line 0, in train"))


def _rich_traceback(tmp_path: Path, width: int, locals_: bool) -> str:
    """A chained error raised in a verl reward module, drawn by rich's own traceback renderer (as typer and
    other CLIs print it) at a terminal width."""
    import importlib.util
    import io

    from rich.console import Console
    from rich.traceback import Traceback

    pkg = tmp_path / "env" / "site-packages" / "verl" / "utils" / "reward_score"
    pkg.mkdir(parents=True)
    (pkg / "gsm8k.py").write_text(
        "def compute_score(solution_str, ground_truth):\n    return ground_truth['solution']\n\n"
        "def reward(x):\n    try:\n        return compute_score('a', x)\n"
        "    except KeyError as e:\n        raise ValueError('reward failed') from e\n")
    spec = importlib.util.spec_from_file_location("gsm8k_rich", pkg / "gsm8k.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = io.StringIO()
    try:
        module.reward({})
    except ValueError:
        Console(width=width, file=out, color_system=None).print(Traceback(show_locals=locals_, width=width))
    return out.getvalue()


@pytest.mark.parametrize(("width", "locals_"), [(120, False), (90, True), (45, False)],
                         ids=["wide", "locals", "narrow-wrapped"])
def test_a_rich_traceback_is_read_with_its_frames(tmp_path, width, locals_):
    # rich's boxed format (Textualize/rich rich/traceback.py): frames as `PATH:LINE in FUNC` inside the box,
    # wrapped at the box's width when narrow, nested `locals` boxes; the chain's first error decides
    log = _rich_traceback(tmp_path, width, locals_)
    assert "\u2771" in log and "Traceback (most recent call last)" in log
    sig, obs = locate(tmp_path / "env", log)
    assert obs.outcome == "located"
    ev = obs.evidence
    assert ev["exception"] == "KeyError: 'solution'"
    assert ev["where"].endswith(f"job.log:{log.splitlines().index(chr(75) + 'eyError: ' + repr('solution')) + 1}")
    assert ev["innermost_frame"].endswith('reward_score/gsm8k.py", line 2, in compute_score')
    assert sig.outcome == "reward_fn_failed"


def test_a_rich_traceback_without_frames_read_is_still_located(tmp_path):
    # a box whose lines are code only (the frame lines cut off by the paste): the exception under it is
    # still the error, with no frame made up
    log = ("\u256d\u2500\u2500 Traceback (most recent call last) \u2500\u2500\u256e\n"
           "\u2502 \u2771 11 \u2502   trainer.train()  \u2502\n"
           "\u2570\u2500\u2500\u2500\u2500\u2500\u2500\u2500\u2500\u2500\u2500\u256f\n"
           "RuntimeError: CUDA driver initialization failed\n")
    _, obs = locate(tmp_path, log)
    assert obs.evidence["exception"] == "RuntimeError: CUDA driver initialization failed"
    assert obs.evidence.get("innermost_frame") in (None, "")


def test_a_notebook_traceback_cut_above_its_header_and_exception_is_not_refused(tmp_path, capsys):
    # unslothai/unsloth#4360: a VS Code notebook's frames (Windows paths, linked code markers), pasted
    # without header or exception: read as a traceback cut before its exception, not refused
    import json

    from triage.cli import main

    frames = (
        "File c:\\Users\\u\\venv\\Lib\\site-packages\\torch\\utils\\checkpoint.py:512, in checkpoint(function, "
        "use_reentrant, *args, **kwargs)\n"
        "    511 next(gen)\n"
        "--> [512](file:///C:/Users/u/venv/Lib/site-packages/torch/utils/checkpoint.py:512) ret = function(*args, **kwargs)\n"
        "    513 # Runs post-forward logic\n\n"
        "File c:\\Users\\u\\venv\\Lib\\site-packages\\torch\\nn\\modules\\module.py:1776, in "
        "Module._wrapped_call_impl(self, *args, **kwargs)\n"
        "-> [1776](file:///C:/Users/u/venv/Lib/site-packages/torch/nn/modules/module.py:1776)     return self._call_impl(*a\n")
    (tmp_path / "job.log").write_text(frames, encoding="utf-8")
    assert main(["run", str(tmp_path / "job.log"), "--json", "--no-cache"]) == 3
    report = json.loads(capsys.readouterr().out)
    assert report["root_cause"]["id"] == "inconclusive"
    cut = next(s for s in report["path"] if s["probe"] == "crash_location")
    assert cut["outcome"] == "cut_off"
    assert cut["evidence"]["innermost_frame"].endswith('module.py", line 1776, in Module._wrapped_call_impl')


def test_a_traceback_whose_first_lines_lost_the_rank_prefix_is_one_traceback(tmp_path):
    # AkaliKong/MiniOneRec#15: the header printed bare, the frames and exception under `[rank0]:`
    log = ("Traceback (most recent call last):\n"
           '[rank0]:   File "/work/rl.py", line 307, in train\n'
           "[rank0]:     trainer.train()\n"
           '[rank0]:   File "/env/lib/python3.10/site-packages/transformers/trainer.py", line 2375, in _inner_training_loop\n'
           "[rank0]:     for step, inputs in enumerate(epoch_iterator):\n"
           "[rank0]: KeyError: 'prompt'\n")
    _, obs = locate(tmp_path, log)
    ev = obs.evidence
    assert ev["exception"] == "KeyError: 'prompt'" and ev["rank"] == 0
    assert ev["innermost_frame"].endswith("line 2375, in _inner_training_loop")
    assert ev["traceback_starts"].endswith("job.log:1")


def test_a_frame_cut_at_the_start_of_a_paste_ties_its_package_to_the_error(tmp_path, capsys):
    # shibing624/MedicalGPT#444 as pasted: the first frame cut before `File "`, the rest under `[rank0]:`;
    # TRL's trainer calling transformers' Trainer with a keyword the installed version lacks
    import json

    from triage.cli import main

    log = ('/env/lib/python3.10/site-packages/trl/trainer/grpo_trainer.py", line 269, in __init__\n'
           "[rank0]:     super().__init__(\n"
           "[rank0]: TypeError: Trainer.__init__() got an unexpected keyword argument 'processing_class'\n")
    (tmp_path / "job.log").write_text(log, encoding="utf-8")
    main(["run", str(tmp_path / "job.log"), "--json", "--no-cache"])
    report = json.loads(capsys.readouterr().out)
    assert report["root_cause"]["id"] == "deps.version_mismatch"
    sig = next(s for s in report["path"] if s["probe"] == "error_signatures")
    assert sig["evidence"]["signature"] == "dependency_api_mismatch"


def test_frame_lines_a_terminal_wrapped_at_its_width_are_joined(tmp_path):
    # alibaba/ROLL#348, copied from a terminal 90 columns wide: frame lines broken mid-path, mid-number
    # and before the function; the code line under a frame stays a code line
    log = ("Traceback (most recent call last):\n"
           '  File "/fs/ROLL/examples/start_rlvr_vl_custom_pipeline.py", line 34, in\n'
           "<module>\n"
           "    main()\n"
           '  File "/fs/anaconda3/envs/qwen/lib/python3.10/site-packages/torch/utils/\n'
           '_contextlib.py", line 116, in decorate_context\n'
           "    return func(*args, **kwargs)\n"
           '  File "/fs/ROLL/roll/pipeline/rlvr/rlvr_custom_vlm_pipeline.py", line 52\n'
           "4, in run\n"
           "    self.do_checkpoint(global_step=global_step)\n"
           "RuntimeError: checkpoint failed\n")
    tb = read_text(log)
    frames = next(iter(tb.groups.values())).first.root.frames
    assert [(f.file.rsplit("/", 1)[-1], f.line, f.function) for f in frames] == [
        ("start_rlvr_vl_custom_pipeline.py", 34, "<module>"), ("_contextlib.py", 116, "decorate_context"),
        ("rlvr_custom_vlm_pipeline.py", 524, "run")]
    # a frame whose function a Markdown renderer ate (`<module>`) is no wrap: the exception under it stays one
    tb = read_text('Traceback (most recent call last):\n  File "pretrain_gpt.py", line 28, in\nKeyError: \'a\'\n')
    root = next(iter(tb.groups.values())).first.root
    assert (root.type, root.message, [f.line for f in root.frames]) == ("KeyError", "'a'", [28])


def test_a_gzipped_log_is_read_the_same(tmp_path):
    import gzip

    with gzip.open(tmp_path / "job.log", "wt", encoding="utf-8") as fh:  # gzip content, as rotated logs are kept
        fh.write(REWARD)
    obs = CrashLocation().examine(open_run(str(tmp_path)))
    assert obs.evidence["component"] == "reward function"
    assert obs.evidence["where"].endswith(f"job.log:{len(REWARD.splitlines())}")


def test_an_error_the_job_survived_is_not_the_crash(tmp_path):
    survived = (
        "(RolloutManager pid=2290, ip=10.0.0.10) Traceback (most recent call last):\n"
        '(RolloutManager pid=2290, ip=10.0.0.10)   File "/root/slime/slime/utils/http_utils.py", line 120, in post\n'
        "(RolloutManager pid=2290, ip=10.0.0.10) ConnectionError: engine 3 did not answer (will retry)\n"
    )
    later = "".join(f"({TRAIN}) [2026-08-01 10:0{6 + i}:00] model.py:918 - step {6 + i}: {{'train/loss': 0.01}}\n" for i in range(3))
    _, obs = locate(tmp_path, SLIME_HEAD + survived + later + TRAINER[len(SLIME_HEAD):])
    ev = obs.evidence
    assert ev["exception_type"] == "KeyError"
    assert [e["exception"] for e in ev["survived_errors"]] == ["ConnectionError: engine 3 did not answer (will retry)"]


def test_a_traceback_whose_header_was_cut_is_read_from_its_frames(tmp_path):
    # OpenRLHF/OpenRLHF#702 as the user pasted it (the field corpus keeps it verbatim): Ray's
    # creation-task message instead of the usual header, frames indented by one space
    paste = Path(__file__).resolve().parent.parent / "field" / "openrlhf-702-vllm070-worker-use-ray-removed" / "job.log"
    text = paste.read_text(encoding="utf-8")
    reader = read_text(text)
    root = next(g.first.root for g in reader.groups.values() if g.first.root.type == "TypeError")
    assert "worker_use_ray" in root.message
    assert root.frames[-1].file == "vllm/entrypoints/llm.py"
    # with its frames, the keyword vLLM dropped reads as a version mismatch, not an unknown crash
    (tmp_path / "job.log").write_text(text, encoding="utf-8")
    obs = ErrorSignatures().examine(open_run(str(tmp_path)))
    assert obs.outcome == "version_mismatch", obs.summary


def test_a_cut_traceback_gives_way_to_the_error_line_another_paste_holds(tmp_path):
    # OpenRLHF/OpenRLHF#728's two pastes: the error line alone, then the frames without it
    (tmp_path / "job.log").write_text(
        "ValueError: placement group bundle index 6 is invalid. Valid placement group indexes: 0-4\n", encoding="utf-8")
    (tmp_path / "job-2.log").write_text(
        "(LLMRayActor pid=146238)   File \"openrlhf/trainer/ray/vllm_engine.py\", line 43, in __init__\n"
        "(LLMRayActor pid=146238)     self.llm = LLM(*args, **kwargs)\n", encoding="utf-8")
    obs = CrashLocation().examine(open_run(str(tmp_path)))
    assert obs.outcome == "located"
    assert obs.evidence["exception"].startswith("ValueError: placement group bundle index 6 is invalid")
    assert obs.evidence["cut_traceback"]["frame"].endswith("in __init__")


def test_an_exception_line_that_lost_its_prefix_closes_the_frames_above_it(tmp_path):
    (tmp_path / "job.log").write_text(
        "(LLMRayActor pid=146238) Traceback (most recent call last):\n"
        "(LLMRayActor pid=146238)   File \"openrlhf/trainer/ray/vllm_engine.py\", line 43, in __init__\n"
        "(LLMRayActor pid=146238)     self.llm = LLM(*args, **kwargs)\n"
        "ValueError: placement group bundle index 6 is invalid. Valid placement group indexes: 0-4\n"
        "INFO some later line\n", encoding="utf-8")
    obs = CrashLocation().examine(open_run(str(tmp_path)))
    assert obs.outcome == "located"
    assert obs.evidence["exception_type"] == "ValueError"
    assert obs.evidence["frame"].endswith("in __init__")
    assert obs.evidence["actor"] == "LLMRayActor"


VERL_302 = (  # verl-project/verl#302's paste, cut inside vLLM's wake-up
    "(main_task pid=1748945) Unhandled error (suppress with 'RAY_IGNORE_UNHANDLED_ERRORS=1'): "
    "ray::WorkerDict.actor_rollout_generate_sequences() (pid=1751030, ip=10.65.194.91)\n"
    "(main_task pid=1748945)   File \"/verl/verl/workers/fsdp_workers.py\", line 463, in generate_sequences\n"
    "(main_task pid=1748945)     with self.rollout_sharding_manager:\n"
    "(main_task pid=1748945)   File \"/verl/verl/workers/sharding_manager/fsdp_vllm.py\", line 79, in __enter__\n"
    "(main_task pid=1748945)     self.inference_engine.wake_up()\n"
    "(main_task pid=1748945)   File \"miniconda/envs/verl/lib/python3.10/site-packages/vllm/entrypoints/llm.py\", "
    "line 1244, in wake_up\n"
    "(main_task pid=1748945)     self.llm_engine.wake_up()\n"
)


def test_a_paste_cut_inside_the_engines_wake_up_ranks_the_phase_switch_first(tmp_path, capsys):
    import json

    from triage.cli import main

    (tmp_path / "job.log").write_text(VERL_302, encoding="utf-8")
    main(["run", str(tmp_path), "--json", "--no-cache"])
    report = json.loads(capsys.readouterr().out)
    assert report["root_cause"]["id"] == "inconclusive"
    signatures = next(s for s in report["path"] if s["probe"] == "error_signatures")
    assert signatures["outcome"] == "unavailable"  # the error's words are cut: no signature is ruled out
    assert "cut before its exception line" in signatures["summary"]
    first = report["candidates"][0]
    assert first["id"] == "memory.colocate_second_step"
    assert "sleep / wake-up" in first["supports"][0]


def test_a_paste_cut_elsewhere_suggests_nothing(tmp_path, capsys):
    import json

    from triage.cli import main

    (tmp_path / "job.log").write_text(VERL_302.split("(main_task pid=1748945)   File \"/verl/verl/workers/sharding")[0],
                                      encoding="utf-8")
    main(["run", str(tmp_path), "--json", "--no-cache"])
    report = json.loads(capsys.readouterr().out)
    located = next(s for s in report["path"] if s["probe"] == "crash_location")
    assert located["outcome"] == "cut_off" and "suggests" not in located["evidence"]
    assert all(c["id"] != "memory.colocate_second_step" or not c["supports"] for c in report["candidates"])


def test_the_message_logged_above_a_cut_traceback_is_the_error(tmp_path):
    # sgl-project/sglang#748 as pasted: the server logs the warmup's error, then a traceback the paste cut
    log = (
        "[gpu_id=0] max_total_num_tokens=38165, max_prefill_tokens=16384, max_running_requests=64, context_len=32768\n"
        "Initialization failed. warmup error: HTTPConnectionPool(host='0.0.0.0', port=30000): Max retries exceeded with "
        "url: /generate (Caused by NewConnectionError('<urllib3.connection.HTTPConnection object at 0x7f655bc34400>: "
        "Failed to establish a new connection: [Errno 111] Connection refused'))\n"
        "Exception in thread Thread-1 (_wait_and_warmup):\n"
        "Traceback (most recent call last):\n"
        '  File "/usr/local/lib/python3.10/dist-packages/urllib3/connection.py", line 196, in _new_conn\n'
        "    sock = connection.create_connection(\n"
    )
    _sig, obs = locate(tmp_path, log)
    assert obs.outcome == "located", obs.summary
    assert obs.evidence["where"].endswith("job.log:2")
    assert obs.evidence["exception"].startswith("Initialization failed. warmup error:")
    assert obs.evidence["cut_traceback"]["where"].endswith("job.log:6")


def test_a_header_above_a_cut_traceback_does_not_stand_for_its_error(tmp_path):
    # vLLM's `Invocation of collective_rpc method failed` names no error: the words are in the cut part
    pre = "(LLMRayActor pid=585804) (EngineCore_DP0 pid=586112) ERROR 03-05 00:25:45 [core.py:1094] "
    log = (pre + "Invocation of collective_rpc method failed\n" + pre + "Traceback (most recent call last):\n"
           + pre + '  File "/usr/lib/python3.12/site-packages/vllm/v1/engine/core.py", line 1091, in _handle_client_request\n'
           + pre + "    result = method(*self._convert_msgspec_args(method, args))\n")
    _sig, obs = locate(tmp_path, log)
    assert obs.outcome == "cut_off", obs.summary


def test_a_traceback_that_lost_its_indentation_keeps_its_frames(tmp_path):
    # OpenRLHF/OpenRLHF#922 as pasted: Ray's prefix on every line, no indentation, `^^^^` markers
    pre = "(ActorModelRayActor pid=700388) "
    log = "".join(pre + x + "\n" for x in (
        'File "~/.venv/lib/python3.12/site-packages/openrlhf/trainer/ray/vllm_engine.py", line 58, in init_process_group',
        "return self.llm.collective_rpc(",
        "^^^^^^^^^^^^^^^^^^^^^^^^",
        'File "~/.venv/lib/python3.12/site-packages/vllm/entrypoints/llm.py", line 495, in collective_rpc',
        "executor = self.llm_engine.model_executor",
        "^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        "AttributeError: 'LLMEngine' object has no attribute 'model_executor'",
    ))
    sig, obs = locate(tmp_path, log)
    assert obs.outcome == "located", obs.summary
    assert obs.evidence["exception_type"] == "AttributeError"
    assert "collective_rpc" in obs.evidence["innermost_frame"]
    # raised in vLLM's code called from OpenRLHF's: the catalog's "one framework's call into another"
    assert sig.outcome == "version_mismatch", sig.summary
    assert sig.evidence["signature"] == "cross_package_attribute"


@pytest.mark.parametrize(("frames", "exc", "component"), [
    # a Megatron converter run on its own (alibaba/Pai-Megatron-Patch#167): not a rollout driver
    (['  File "/root/Pai-Megatron-Patch/toolkits/model_checkpoints_convertor/qwen/hf2mcore_1.5_v2.py", line 461, in '
      "save_mgmodel\n", "    q = q.view(32, -1, 128, 4096)\n"],
     "RuntimeError: shape '[32, -1, 128, 4096]' is invalid for input of size 12288", "checkpoint conversion"),
    # PEFT merging an adapter (huggingface/peft#297)
    (['  File "hf_decoder_model.py", line 415, in merge_lora_weights\n', "    self.get_backend_model().merge_and_unload()\n",
      '  File "lib/python3.9/site-packages/peft/tuners/lora.py", line 275, in merge_and_unload\n',
      "    target.weight.data += (\n"],
     "RuntimeError: The size of tensor a (0) must match the size of tensor b (2048) at non-singleton dimension 1",
     "checkpoint conversion"),
    # FSDP wrapping the model in a single-process script (declare-lab/flan-alpaca#10)
    (['  File "/work/training.py", line 20, in main\n', "    model = FSDP(model)\n",
      '  File "/usr/lib/python3.10/site-packages/torch/distributed/fsdp/flat_param.py", line 440, in _init_flat_param\n',
      '    raise ValueError("`FlatParameter` requires uniform `requires_grad`")\n'],
     "ValueError: `FlatParameter` requires uniform `requires_grad`", "trainer"),
    # NeMo-RL's policy worker streaming weights to its engine (NVIDIA-NeMo/RL#1477): the trainer's side, not the driver
    (['  File "/work/RL-main/nemo_rl/models/policy/utils.py", line 464, in stream_weights_via_ipc_zmq_impl\n',
      "    send_buffer_group_overlap(\n",
      '  File "/work/RL-main/nemo_rl/models/policy/utils.py", line 399, in send_buffer_group_overlap\n',
      "    zmq_socket.recv()\n"],
     "zmq.error.Again: Resource temporarily unavailable", "trainer"),
    # transformers converting a slow tokenizer while loading it is no checkpoint conversion
    (['  File "/home/u/evaluate.py", line 12, in <module>\n', "    tok = AutoTokenizer.from_pretrained(path)\n",
      '  File "/usr/lib/python3.10/site-packages/transformers/convert_slow_tokenizer.py", line 40, in import_protobuf\n',
      "    from sentencepiece import sentencepiece_model_pb2\n"],
     "ImportError: requires the protobuf library but it was not found in your environment", "main process"),
    # a script of the user's with no framework's driver in its frames
    (['  File "/home/u/evaluate.py", line 12, in <module>\n', "    score(rows)\n"],
     "ZeroDivisionError: division by zero", "main process"),
    # the same with a rollout framework's frames is that framework's driver
    (['  File "/root/slime/slime/ray/placement_group.py", line 64, in create_placement_groups\n', "    split(config)\n"],
     "ZeroDivisionError: division by zero", "rollout manager / driver"),
])
def test_a_process_with_no_actor_and_no_rank_is_named_by_its_frames(tmp_path, frames, exc, component):
    log = "Traceback (most recent call last):\n" + "".join(frames) + exc + "\n"
    _sig, obs = locate(tmp_path, log)
    assert obs.outcome == "located", obs.summary
    assert obs.evidence["component"] == component, obs.summary


@pytest.mark.parametrize(("log", "packages"), [
    # huggingface/transformers#25988: the Trainer reads a field the installed accelerate's plugin does not have yet;
    # the outer frame is the user's script, so the owner of the class says which other package it is
    ("Traceback (most recent call last):\n"
     '  File "/workspace/run/run_llm.py", line 644, in main\n'
     "    trainer = Trainer(\n"
     '  File "/usr/local/lib/python3.10/site-packages/transformers/trainer.py", line 3900, in '
     "create_accelerator_and_postprocess\n"
     "    self.is_fsdp_enabled and self.accelerator.state.fsdp_plugin.activation_checkpointing\n"
     "AttributeError: 'FullyShardedDataParallelPlugin' object has no attribute 'activation_checkpointing'\n", None),
    # THUDM/slime#1741 as pasted: slime reads a field of SGLang's ServerArgs that the installed SGLang does not
    # have (fixed in slime with a getattr); the paste cut the attribute's closing quote
    ('File "/code/slime/backends/sglang_utils/sglang_engine.py", line 192, in _init_normal\n'
     "self.process = launch_server_process(ServerArgs(**server_args_dict))\n"
     'File "/code/slime/backends/sglang_utils/sglang_engine.py", line 54, in launch_server_process\n'
     "if server_args.encoder_only:\n"
     "AttributeError: 'ServerArgs' object has no attribute 'encoder_only\n", ["sglang", "slime"]),
    # zjysteven/lmms-finetune#64: pasted alone, no frame to say who read it (a newer accelerate's call)
    ("AttributeError: 'DeepSpeedZeroOptimizer_Stage3' object has no attribute 'train'\n", ["deepspeed"]),
    # baaivision/Emu3#74: a model's remote code calls a method transformers 4.51 removed from its cache
    ('  File "/r/.cache/huggingface/modules/transformers_modules/BAAI/Emu3-Gen/40b3/modeling_emu3.py", line 1287, in '
     "prepare_inputs_for_generation\n"
     "    max_cache_length = past_key_values.get_max_length()\n"
     "AttributeError: 'DynamicCache' object has no attribute 'get_max_length'. Did you mean: 'get_seq_length'?\n",
     ["transformers", "transformers_modules"]),
    # huggingface/transformers#45850: a model config of transformers' own, pasted alone
    ("AttributeError: 'BertConfig' object has no attribute 'pad_token_id'\n", ["transformers"]),
])
def test_a_class_another_package_defines_read_in_a_packages_frame_is_one_package_calling_another(tmp_path, log,
                                                                                                  packages):
    sig, _obs = locate(tmp_path, log)
    assert sig.outcome == "version_mismatch", sig.summary
    assert sig.evidence["signature"] == "cross_package_attribute"
    if packages is not None:
        assert sig.evidence["packages"] == packages


def test_an_object_of_the_jobs_own_class_pasted_alone_is_not_another_packages(tmp_path):
    sig, _obs = locate(tmp_path, "AttributeError: 'Scorer' object has no attribute 'grade'\n")
    assert sig.outcome == "other_error", sig.summary


def test_deepspeeds_report_of_a_failed_rank_is_an_error_exit_whose_cause_is_elsewhere(tmp_path):
    # hiyouga/LlamaFactory#2444: the launcher's line is all the paste holds; the rank's own error is not in it
    log = ("[2024-02-07 10:11:12,000] [ERROR] [launch.py:321:sigkill_handler] ['/env/py38/bin/python', '-u', "
           "'../LLaMA-Factory/src/train_bash.py', '--stage', 'ppo', '--bf16'] exits with return code = 1\n")
    sig, obs = locate(tmp_path, log)
    assert sig.outcome == "other_error", sig.summary
    assert obs.outcome == "not_located", obs.summary
    assert "only the report of a process that died" in obs.summary


def test_a_ray_worker_death_alone_is_an_error_exit_whose_cause_is_elsewhere(tmp_path):
    # THUDM/slime#1740 as pasted: Ray's report of the dead worker, nothing of the worker's own error
    log = ("error: The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR\n"
           "Worker exit detail: Worker exits unexpectedly. Worker exits with an exit code 1.\n"
           "The worker may have exceeded K8s pod memory limits. The process receives a SIGTERM.\n")
    sig, obs = locate(tmp_path, log)
    # Ray's hint under Kubernetes names a SIGTERM and the pod's memory limit as its likely cause: a suspect, not a cause
    assert sig.outcome == "terminated", sig.summary
    assert sig.evidence["signature"] == "ray_worker_k8s_exit"
    assert obs.outcome == "not_located", obs.summary
    assert "only the report of a process that died" in obs.summary
    assert obs.evidence["consequence"]["where"].endswith("job.log:1")
    from probes.symptom import Symptom
    from triage.run import open_run
    assert Symptom().examine(open_run(str(tmp_path))).outcome == "error_exit"


@pytest.mark.parametrize("last, expected", [
    ("tor", None),  # modelscope/ms-swift#3666: the paste ends mid-word
    ("ray.e", None),  # volcengine/verl#2995
    ("ray.exceptions.RayTaskErr", None),  # volcengine/verl#184
    ("AssertionError", "AssertionError"),  # `assert x` without a message prints the name alone
    ("KeyboardInterrupt", "KeyboardInterrupt"),
    ("torch.distributed.DistBackendError", "torch.distributed.DistBackendError"),
    ("socket.timeout: timed out", "socket.timeout"),  # with a message, any name is an exception's
])
def test_a_bare_word_under_the_frames_is_not_an_exception(last, expected):
    text = (
        "Traceback (most recent call last):\n"
        '  File "/workspace/verl/verl/trainer/main_ppo.py", line 64, in main\n'
        "    run_ppo(config)\n"
        f"{last}\n"
    )
    group = next(iter(read_text(text).groups.values()))
    assert group.first.root.type == expected


def test_a_traceback_pasted_with_every_line_shifted_keeps_its_exception(tmp_path):
    # verl-project/verl#4676 as pasted: one extra space before every line, the header cut away
    text = (
        '   File "/root/verl/verl/utils/kernel/kernels.py", line 626, in efficient_entropy_forward\n'
        "     efficient_entropy_kernel_general_mainloop[mainloop_grid](\n"
        '   File "/usr/local/lib/python3.12/dist-packages/triton/runtime/_allocation.py", line 20, in __call__\n'
        '     raise RuntimeError("Kernel requires a runtime memory allocation, but no allocator was set. " +\n'
        " RuntimeError: Kernel requires a runtime memory allocation, but no allocator was set.\n"
    )
    group = next(iter(read_text(text).groups.values()))
    assert group.first.root.type == "RuntimeError"
    assert group.first.root.frames[-1].function == "__call__"
    tb = scanned_traceback(tmp_path, text)
    assert tb.exception.startswith("RuntimeError: Kernel requires") and len(tb.frames) == 2


def test_an_exception_line_less_indented_than_its_code_under_an_unindented_frame_is_read(tmp_path):
    # verl-project/verl#7610 as pasted: the frame at 0 spaces, its code at 6, the exception at 2
    text = ('File "verl/model_merger/fsdp_model_merger.py", line 202, in _load_and_merge_state_dicts\n'
            "      state_dict[key] = torch.cat(state_dict[key], dim=0)\n"
            "  RuntimeError: zero-dimensional tensor (at position 0) cannot be concatenated\n")
    group = next(iter(read_text(text).groups.values()))
    assert group.first.root.type == "RuntimeError"
    assert group.first.root.frames[-1].function == "_load_and_merge_state_dicts"
    tb = scanned_traceback(tmp_path, text)
    assert tb.exception.startswith("RuntimeError: zero-dimensional tensor")
    # a code line that reads like `name: value` under a normally indented frame stays code
    text = ('Traceback (most recent call last):\n  File "a.py", line 3, in f\n    else:\n'
            '  File "b.py", line 9, in g\n    x.y: int = 3\nValueError: bad\n')
    group = next(iter(read_text(text).groups.values()))
    assert group.first.root.type == "ValueError" and len(group.first.root.frames) == 2


def test_an_exception_line_at_the_frames_indentation_under_deeper_code_is_read_by_the_scan(tmp_path):
    # vllm-project/vllm#12526: vLLM's worker logger prints the traceback with the exception line at the
    # frames' indentation
    p = "(VllmWorkerProcess pid=963948) ERROR 01-28 20:19:24 multiproc_worker_utils.py:240] "
    text = (p + '  File "/x/torch/distributed/distributed_c10d.py", line 4255, in _create_process_group_wrapper\n'
            + p + "    helper_pg = ProcessGroupGloo(store, rank, world_size, timeout=timeout)\n"
            + p + "                ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
            + p + "  torch.distributed.DistStoreError: wait timeout after 600000ms, keys: /default_pg/0//1//cuda\n")
    tb = scanned_traceback(tmp_path, text)
    assert tb.exception.startswith("torch.distributed.DistStoreError: wait timeout") and len(tb.frames) == 1
    # a line at the code's own indentation stays code, whatever it reads like
    text = ('Traceback (most recent call last):\n  File "a.py", line 3, in f\n    d = {\n'
            "    KeyError: handler,\nValueError: bad\n")
    tb = scanned_traceback(tmp_path, text)
    assert tb.exception == "ValueError: bad"


@pytest.mark.parametrize(("text", "exception", "frames"), [
    # pytorch/pytorch#163329: dynamo's exception class names no error; the markers alone skipped the line
    ('  File "/usr/local/lib/python3.10/dist-packages/torch/_dynamo/convert_frame.py", line 981, in _compile\n'
     "    raise FailOnRecompileLimitHit(\n"
     "torch._dynamo.exc.FailOnRecompileLimitHit: recompile_limit reached with one_graph=True.\nstep 3 done\n",
     "torch._dynamo.exc.FailOnRecompileLimitHit: recompile_limit reached", 1),
    # a blank line inside the traceback is passed over (a chained section's), not read as its end
    ('Traceback (most recent call last):\n  File "/x/torch/_dynamo/symbolic_convert.py", line 101, in call\n'
     "    unimplemented(msg)\n\n"
     '  File "/x/torch/_dynamo/exc.py", line 9, in unimplemented\n    raise Unsupported(msg)\n'
     "torch._dynamo.exc.Unsupported: call_function UserDefinedObjectVariable(partial)\n",
     "torch._dynamo.exc.Unsupported: call_function", 2),
])
def test_an_exception_line_with_no_error_word_ends_its_traceback_in_the_scan(tmp_path, text, exception, frames):
    tb = scanned_traceback(tmp_path, text)
    assert tb.exception.startswith(exception) and len(tb.frames) == frames


def test_a_users_line_under_a_cut_traceback_is_not_read_as_its_exception(tmp_path):
    text = ('Traceback (most recent call last):\n  File "/w/verl/trainer/main_ppo.py", line 64, in main\n'
            "    run_ppo(config)\nEnvironment: Ubuntu 22.04, 8 x H100\n")
    tb = scanned_traceback(tmp_path, text)
    assert tb.exception == ""


def test_a_chain_pasted_from_its_first_exception_line_starts_there(tmp_path):
    # pettingllms-ai/PettingLLMs#8: OmegaConf's error without its traceback, the cause line, then the wrapper's
    text = ("omegaconf.errors.ConfigAttributeError: Key 'optimizer' is not in struct\n"
            "    full_key: models.model_0.ppo_trainer_config.actor_rollout_ref.actor.optim.optimizer\n"
            "    object_type=dict\n\n"
            "The above exception was the direct cause of the following exception:\n\n"
            "ray::train_multi_agents() \n"
            '  File "/code/PettingLLMs/pettingllms/trainer/train.py", line 164, in train_multi_agents\n'
            "    trainer.init_workers()\n"
            '  File "/code/PettingLLMs/pettingllms/trainer/multi_agents_ppo_trainer.py", line 266, in init_workers\n'
            '    raise RuntimeError(f"Failed to initialize trainer {model_name}") from e\n'
            "RuntimeError: Failed to initialize trainer shared_model\n")
    (tmp_path / "job.log").write_text(text, encoding="utf-8")
    from triage.run import open_run

    [group] = open_run(str(tmp_path)).tracebacks.groups.values()
    assert [b.type for b in group.first.blocks] == ["omegaconf.errors.ConfigAttributeError", "RuntimeError"]
    assert group.first.root.line_no == 1 and group.first.blocks[1].link == "cause"
    # a lone exception line with no cause line under it opens no chain
    assert not read_text("ValueError: bad value\nsomething else\n").groups


def test_an_egg_installed_framework_is_known_and_a_mount_point_is_not_the_codes_role():
    from probes.crash_location import component_of
    from triage.formats.tracebacks import package_of

    egg = "/usr/local/python3.9.10/lib/python3.9/site-packages/ms_swift-2.5.2-py3.9.egg/swift/llm/sft.py"
    assert package_of(egg) == "swift"
    # modelscope/ms-swift#2407: an egg install, the dataset prepared in swift's own code
    text = ("Traceback (most recent call last):\n"
            f'  File "{egg}", line 392, in prepare_dataset\n'
            "    td0, tkwargs0 = template.encode(train_dataset[0])\n"
            "KeyError: 'label'\n")
    chain = next(iter(read_text(text).groups.values())).first
    assert component_of(chain)[0] == "data loading"
    # modelscope/ms-swift#9863: a `/dataset/` mount point above the trainer's code is no data loading
    text = ("Traceback (most recent call last):\n"
            '  File "/mnt/tidalfs-alsg01/dataset/rednote/work/swift/megatron/pipelines/train/sft.py", line 68, in run\n'
            "    self.trainer.train()\n"
            "RuntimeError: boom\n")
    chain = next(iter(read_text(text).groups.values())).first
    assert component_of(chain)[0] != "data loading"
    # THUDM/slime#1784: the Megatron backend's data.py logs rollout metrics in the trainer
    text = ('File "slime/backends/megatron_utils/data.py", line 520, in log_rollout_data\n'
            "    correct_response_lengths.append(response_lengths[i])\n"
            "IndexError: list index out of range\n")
    chain = next(iter(read_text(text).groups.values())).first
    assert component_of(chain)[0] == "trainer"


def test_vllms_logger_prefix_on_each_traceback_line_is_read_through():
    # verl-project/verl#5889: vLLM logs the worker's traceback line by line behind its own prefix
    # (`[multiproc_executor.py:597]` is no ANSI leftover); OpenRLHF/OpenRLHF#313: vLLM < 0.6's prefix
    from triage.formats.slime_log import split_line
    from triage.formats.tracebacks import split_origin

    p = "(vLLMHttpServer pid=1835067) ERROR 04-07 12:12:08 [multiproc_executor.py:597] "
    text = (p + "Traceback (most recent call last):\n"
            + p + '  File "/x/site-packages/vllm/v1/worker/gpu_worker.py", line 169, in init_device\n'
            + p + "    init_worker_distributed_environment(self.vllm_config, self.rank,\n"
            + p + "RuntimeError: The server socket has failed to listen on any local network address.\n")
    root = next(iter(read_text(text).groups.values())).first.root
    assert root.type == "RuntimeError" and root.frames[-1].function == "init_device"
    assert split_origin(p + "x")[0] == "x"
    old = split_line("(RayWorkerWrapper pid=4183, ip=10.3.32.122) ERROR 06-03 23:13:39 worker_base.py:148] "
                     "Error executing method start_worker_execution_loop.")
    assert (old.level, old.text) == ("ERROR", "Error executing method start_worker_execution_loop.")


@pytest.mark.parametrize(("log", "component"), [
    # intelligent-machine-learning/dlrover#977: Megatron-LM's own tree (megatron/checkpointing.py) and
    # entry script, pasted with no actor or rank prefix
    ("Traceback (most recent call last):\n"
     '  File "/workspace/Megatron-LM-23.06/examples/../pretrain_gpt.py", line 116, in <module>\n'
     "    pretrain(train_valid_test_datasets_provider,\n"
     '  File "/workspace/Megatron-LM-23.06/megatron/checkpointing.py", line 526, in load_checkpoint\n'
     "    iteration = state_dict['iteration']\n"
     "KeyError: 'iteration'\n", "trainer"),
    # sgl-project/sglang#6555: the server's warmup request timed out; the frames of the exception that
    # timeout caused are the server's own
    ("Traceback (most recent call last):\n"
     '  File "/usr/local/lib/python3.10/dist-packages/urllib3/connectionpool.py", line 536, in _make_request\n'
     "    response = conn.getresponse()\n"
     "TimeoutError: timed out\n\n"
     "During handling of the above exception, another exception occurred:\n\n"
     "Traceback (most recent call last):\n"
     '  File "/sgl-workspace/sglang/python/sglang/srt/entrypoints/http_server.py", line 1324, in _execute_server_warmup\n'
     "    res = requests.post(url + request_name, json=json_data, headers=headers, timeout=600)\n"
     "requests.exceptions.ReadTimeout: HTTPConnectionPool(host='0.0.0.0', port=8000): Read timed out.\n",
     "inference engine"),
    # huggingface/trl#3394: one process, the HF Trainer's loop and TRL's trainer; no driver anywhere
    ("Traceback (most recent call last):\n"
     '  File "/home/u/train_grpo.py", line 40, in <module>\n'
     "    trainer.train()\n"
     '  File "/env/lib/python3.11/site-packages/transformers/trainer.py", line 2245, in train\n'
     "    return inner_training_loop(\n"
     '  File "/env/lib/python3.11/site-packages/trl/trainer/grpo_trainer.py", line 981, in _prepare_inputs\n'
     "    inputs = self._generate_and_score_completions(inputs)\n"
     "ValueError: not enough values to unpack (expected 2, got 1)\n", "trainer"),
])
def test_a_bare_paste_names_its_component_by_the_frames(tmp_path, log, component):
    _, obs = locate(tmp_path, log)
    assert obs.outcome == "located", obs.summary
    assert obs.evidence["component"] == component, obs.evidence["component_reason"]


@pytest.mark.parametrize("log, actor", [
    # OpenRLHF/OpenRLHF#305: the driver's ray.get on the critic, which had died; its own error is in its log
    ("Traceback (most recent call last):\n"
     '  File "/openrlhf/trainer/ppo_trainer.py", line 241, in ppo_train\n'
     "    status = ray.get(critic_status_ref)\n"
     "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n"
     "        class_name: CriticModelRayActor\n"
     "        actor_id: 3f1b0c5e6a\n", "CriticModelRayActor"),
    # PeterGriffinJin/Search-R1#45: the same death wrapped by the driver task that called the actor
    # (`RayTaskError(ActorDiedError)`), with Ray's list of possible reasons (an OOM killer among them) as its message
    ("Traceback (most recent call last):\n"
     '  File "/verl/trainer/main_ppo.py", line 103, in main\n'
     "    ray.get(main_task.remote(config))\n"
     "ray.exceptions.RayTaskError(ActorDiedError): ray::main_task() (pid=109108, ip=10.226.129.21)\n"
     "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n"
     "        class_name: WorkerDict\n"
     "The actor is dead because its worker process has died. Worker exit type: UNEXPECTED_SYSTEM_EXIT Worker "
     "exit detail: Worker unexpectedly exits with a connection error code 2. (1) The process is killed by "
     "SIGKILL by OOM killer due to high memory usage. (2) ray stop --force is called.\n", "WorkerDict"),
], ids=["ActorDiedError", "RayTaskError(ActorDiedError)"])
def test_a_traceback_that_only_reports_a_dead_actor_locates_nothing_but_names_the_actor(tmp_path, log, actor):
    _, obs = locate(tmp_path, log)
    assert obs.outcome == "not_located", obs.summary
    assert obs.evidence["died_actor"] == actor
    assert "only the report of a process that died" in obs.summary


def test_a_traceback_behind_a_timestamp_on_every_line_is_read_whole(tmp_path):
    # verl-project/verl#5558: the job's logger wrote `[YYYY-MM-DD HH:MM:SS] ` before each traceback line
    ts = "[2026-03-11 17:47:54] "
    log = "".join(ts + line + "\n" for line in (
        "Traceback (most recent call last):",
        '  File "/appdata/verl/verl/trainer/main_ppo.py", line 317, in run',
        "    trainer.fit()",
        '  File "/appdata/verl/verl/workers/reward_manager/naive.py", line 89, in __call__',
        "    score = self.compute_score(data_source=data_source)",
        "KeyError: 'ground_truth'",
    ))
    _, obs = locate(tmp_path, log)
    assert obs.outcome == "located", obs.summary
    assert obs.evidence["exception_type"] == "KeyError"
    assert obs.evidence["frame"].endswith("in __call__")


def test_an_unindented_frames_annotated_code_line_is_code_and_a_stamped_line_after_is_no_message(tmp_path):
    # sgl-project/sglang#8974 as pasted: frames and code unindented, `self.comm: ncclComm_t = …` a code line
    log = ('File "/sgl-workspace/sglang/python/sglang/srt/distributed/device_communicators/pynccl.py", line 110, in __init__\n'
           "self.comm: ncclComm_t = self.nccl.ncclCommInitRank(\n"
           'File "/sgl-workspace/sglang/python/sglang/srt/distributed/device_communicators/pynccl_wrapper.py", line 350, '
           "in NCCL_CHECK\n"
           'raise RuntimeError(f"NCCL error: {error_str}")\n'
           "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)\n"
           "[2025-08-08 09:09:09] Received sigquit from a child process. It usually means the child failed.\n")
    sig, obs = locate(tmp_path, log)
    assert sig.evidence["line"]["text"].startswith("RuntimeError: NCCL error") and sig.evidence["line"]["where"].endswith(":5")
    assert obs.evidence["exception"] == ("RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO "
                                         "for details)")


def test_a_progress_bar_under_the_exception_is_not_its_message(tmp_path):
    # mark1879/Baichuan-13B-Finetuning#21: tqdm redraws its bar under the exception
    log = ('  File "/root/miniconda3/lib/python3.8/site-packages/torch/cuda/amp/grad_scaler.py", line 212, in _unscale_grads_\n'
           '    raise ValueError("Attempting to unscale FP16 gradients.")\n'
           "ValueError: Attempting to unscale FP16 gradients.\n"
           "  0%|          | 0/6931 [00:01<?, ?it/s]\n")
    _, obs = locate(tmp_path, log)
    assert obs.evidence["exception"] == "ValueError: Attempting to unscale FP16 gradients."


def test_a_vllm_record_after_the_exception_is_not_its_message(tmp_path):
    # vllm-project/vllm#16259: vLLM's logger prints the traceback line by line, then the executor's next record
    log = (
        "ERROR 04-29 00:53:54 [core.py:398] Traceback (most recent call last):\n"
        'ERROR 04-29 00:53:54 [core.py:398]   File "/usr/local/lib/python3.12/dist-packages/ray/air/config.py", '
        "line 17, in <module>\n"
        "ERROR 04-29 00:53:54 [core.py:398]     import pyarrow.fs\n"
        "ERROR 04-29 00:53:54 [core.py:398] ModuleNotFoundError: No module named 'pyarrow'\n"
        "INFO 04-29 00:53:54 [ray_distributed_executor.py:127] Shutting down Ray distributed executor.\n"
        "ERROR 04-29 00:53:54 [async_llm.py:399] AsyncLLM output_handler failed.\n"
    )
    _, obs = locate(tmp_path, log)
    assert obs.evidence["exception"] == "ModuleNotFoundError: No module named 'pyarrow'"
    # a message that goes on under the same record head is still one message
    _, obs = locate(tmp_path, log.replace("INFO 04-29 00:53:54 [ray_distributed_executor.py:127] ",
                                          "ERROR 04-29 00:53:54 [core.py:398] "))
    assert obs.evidence["exception"].endswith("'pyarrow' Shutting down Ray distributed executor.")


def test_a_ci_runners_timestamp_and_an_actor_name_with_parentheses_are_read_through(tmp_path):
    # vllm-project/vllm#43375 (Buildkite's `[ISO time] ` before each line) and alibaba/ROLL#193 (`ActorWorker(actor_train-1)`)
    log = (
        "[2026-08-21T19:42:40Z] (ActorWorker(actor_train-1) pid=18175, ip=10.0.0.7) Traceback (most recent call last):\n"
        '[2026-08-21T19:42:40Z] (ActorWorker(actor_train-1) pid=18175, ip=10.0.0.7)   File '
        '"/opt/roll/roll/pipeline/rlvr/actor_worker.py", line 88, in train_step\n'
        "[2026-08-21T19:42:40Z] (ActorWorker(actor_train-1) pid=18175, ip=10.0.0.7)     loss.backward()\n"
        "[2026-08-21T19:42:40Z] (ActorWorker(actor_train-1) pid=18175, ip=10.0.0.7) RuntimeError: shape mismatch\n"
    )
    _, obs = locate(tmp_path, log)
    ev = obs.evidence
    assert ev["exception"] == "RuntimeError: shape mismatch"
    assert (ev["actor"], ev["pid"], ev["node"]) == ("ActorWorker(actor_train-1)", 18175, "10.0.0.7")
    assert ev["frame"].endswith("in train_step") and ev["where"].endswith("job.log:4")


def test_a_log_viewers_full_width_timestamp_is_read_through_to_the_actor(tmp_path):
    # alibaba/ChatLearn#179 as pasted: `【time】` before Ray's prefix on every line
    head = "【2024-12-13 15:37:21】(VLLMPolicyInference pid=13628, ip=10.66.159.53) "
    log = (head + 'File "/nfs/volume-1555/ChatLearn/chatlearn/models/vllm_module.py", line 672, in generate_vllm\n'
           + head + "cached_outputs = self.cached_scheduler_outputs[virtual_engine]\n"
           + head + "^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
           + head + "AttributeError: 'VLLMPolicyInference' object has no attribute 'cached_scheduler_outputs'\n")
    _, obs = locate(tmp_path, log)
    ev = obs.evidence
    assert ev["exception"] == "AttributeError: 'VLLMPolicyInference' object has no attribute 'cached_scheduler_outputs'"
    assert (ev["actor"], ev["pid"], ev["node"]) == ("VLLMPolicyInference", 13628, "10.66.159.53")
    assert ev["where"].endswith("job.log:4")


def test_a_fatal_line_without_a_traceback_is_placed_by_the_actor_that_printed_it(tmp_path):
    # sgl-project/sglang#21460: a CUDA assert under the engine's Ray prefix, no traceback
    line = ("(SGLangEngine pid=12595) /pytorch/aten/src/ATen/native/cuda/TensorCompare.cu:112: _assert_async_cuda_kernel: "
            "block: [0,0,0], thread: [0,0,0] Assertion `NaN detected! draft_extend_for_prefill` failed.\n")
    _, obs = locate(tmp_path, line)
    assert (obs.outcome, obs.evidence["component"]) == ("located", "inference engine")
    # with no actor named, nothing says whose process it was
    _, obs = locate(tmp_path, line.replace("(SGLangEngine pid=12595) ", ""))
    assert obs.evidence["component"] == "unknown"


def test_an_error_python_reports_from_a_finalizer_is_not_the_crash(tmp_path):
    # huggingface/open-r1#658: sys.unraisablehook's report comes first; the job's own error after it is the crash
    log = ("Exception ignored in: <finalize object at 0x7f7d7b9bc920; dead>\n"
           "Traceback (most recent call last):\n"
           '  File "/usr/lib/python3.12/site-packages/math_verify/utils.py", line 43, in handler\n'
           '    raise TimeoutError("Operation timed out!")\n'
           "TimeoutError: Operation timed out!\n"
           "Traceback (most recent call last):\n"
           '  File "/opt/open-r1/src/open_r1/grpo.py", line 88, in main\n'
           "    trainer.train()\n"
           "RuntimeError: CUDA error: an illegal instruction was encountered\n")
    _, obs = locate(tmp_path, log)
    assert obs.evidence["exception_type"] == "RuntimeError" and obs.evidence["where"].endswith("job.log:9")


def test_an_actor_no_pattern_knows_is_not_called_the_driver(tmp_path):
    # a project's own actor name: the driver's lines carry no prefix, so this one is not the driver's
    log = ("(PolicyGradientShard pid=311, ip=10.0.0.7) Traceback (most recent call last):\n"
           '(PolicyGradientShard pid=311, ip=10.0.0.7)   File "/opt/proj/shard.py", line 40, in run\n'
           "(PolicyGradientShard pid=311, ip=10.0.0.7)     self.step()\n"
           "(PolicyGradientShard pid=311, ip=10.0.0.7) ValueError: shard has no rows\n")
    _sig, obs = locate(tmp_path, log)
    assert obs.evidence["component"] == "unknown"
    assert "PolicyGradientShard" in obs.evidence["component_reason"] and obs.summary.startswith("The process crashed")
    # vLLM's Ray executor's GPU worker is the engine (NVIDIA-NeMo/RL#2618)
    _sig, obs = locate(tmp_path, log.replace("PolicyGradientShard", "RayWorkerWrapper"))
    assert obs.evidence["component"] == "inference engine"


def test_an_import_error_under_rays_envelope_ranks_a_version_first(tmp_path, capsys):
    # rllm-org/rllm#318 (a module verl 0.6.1 deprecated) and microsoft/agent-lightning#144: the envelope names a
    # ModuleNotFoundError, the paste ends there. Not a verdict without the module's name, the first candidate
    import json

    from triage.cli import main

    lines = TRAINER.splitlines()
    env = next(i for i, line in enumerate(lines) if line.startswith("ray.exceptions.RayTaskError(KeyError)"))
    cut = "\n".join(lines[:env] + [lines[env].replace("(KeyError)", "(ModuleNotFoundError)")]) + "\n"
    _sig, obs = locate(tmp_path, cut)
    assert obs.outcome == "cut_off" and obs.evidence["remote_error_type"] == "ModuleNotFoundError"
    assert obs.evidence["suggests"][0]["verdict"] == "deps.version_mismatch"
    assert main(["run", str(tmp_path), "--json", "--no-cache"]) == 3
    report = json.loads(capsys.readouterr().out)
    assert report["candidates"][0]["id"] == "deps.version_mismatch"
    assert "ModuleNotFoundError" in report["candidates"][0]["supports"][0]
    # a KeyError under the same envelope suggests nothing
    _sig, obs = locate(tmp_path, "\n".join(lines[: env + 1]) + "\n")
    assert "suggests" not in obs.evidence


def test_a_worker_traceback_quoted_by_multiprocessing_ends_at_its_closing_quotes(tmp_path):
    # multiprocessing.pool's RemoteTraceback quotes the worker's traceback between `"""` lines
    # (BunsenFeng/model_collaboration#76): the quotes are not the exception's words
    log = ('multiprocessing.pool.RemoteTraceback: \n"""\nTraceback (most recent call last):\n'
           '  File "/usr/lib/python3.10/multiprocessing/pool.py", line 125, in worker\n'
           "    result = (True, func(*args, **kwds))\n"
           '  File "/home/u/proj/dpo.py", line 40, in train\n    run()\nValueError: boom happened\n"""\n\n'
           "The above exception was the direct cause of the following exception:\n\n"
           'Traceback (most recent call last):\n  File "/home/u/proj/main.py", line 5, in <module>\n'
           "    pool.map(train, xs)\nValueError: boom happened\n")
    _sig, obs = locate(tmp_path, log)
    assert obs.evidence["exception"] == "ValueError: boom happened"
    assert obs.evidence["where"].endswith("job.log:8")


def test_a_headless_traceback_trimmed_unevenly_is_one_traceback_of_the_engine(tmp_path):
    # THUDM/slime#1741: frames at 0 and 1 spaces, their code lines at 1 and 0; the innermost frame is slime's
    # module that launches the SGLang engine
    log = ('File "/code/slime/backends/sglang_utils/sglang_engine.py", line 164, in init\n'
           ' self._init_normal(server_args_dict)\n'
           ' File "/code/slime/backends/sglang_utils/sglang_engine.py", line 192, in _init_normal\n'
           'self.process = launch_server_process(ServerArgs(**server_args_dict))\n'
           'File "/code/slime/backends/sglang_utils/sglang_engine.py", line 54, in launch_server_process\n'
           'if server_args.encoder_only:\n'
           "AttributeError: 'ServerArgs' object has no attribute 'encoder_only\n")
    _, obs = locate(tmp_path, log)
    ev = obs.evidence
    assert obs.outcome == "located"
    assert ev["tracebacks"] == 1 and ev["distinct_errors"] == 1
    assert ev["component"] == "inference engine"
    assert ev["innermost_frame"].endswith('sglang_engine.py", line 54, in launch_server_process')


@pytest.mark.parametrize("threads", ["one", "all"])
def test_faulthandlers_stack_is_read_as_the_crash_frames(tmp_path, threads):
    # Python's faulthandler writes the fatal signal's stack most recent call first, under `Stack (most recent call
    # first):` when only the crashing thread is dumped (PeterGriffinJin/Search-R1#134: a vLLM worker's floating
    # point exception) and `Current thread 0x… (most recent call first):` with every thread; the dump is made here
    # by a real interpreter that crashes, behind Ray's actor prefix as a Ray worker prints it
    import subprocess
    import sys

    script = tmp_path / "worker.py"
    script.write_text(
        "import ctypes, faulthandler, sys\n"
        "faulthandler.enable(all_threads=sys.argv[1] == 'all')\n"
        "def apply():\n    ctypes.string_at(0)\n"
        "def forward():\n    apply()\n"
        "forward()\n", encoding="utf-8")
    dump = subprocess.run([sys.executable, str(script), threads], capture_output=True, text=True, timeout=60).stderr
    assert ("Stack (most recent call first):" if threads == "one" else "Current thread 0x") in dump
    log = "".join(f"(WorkerDict pid=358504) {line}\n" for line in dump.splitlines())
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    _, obs = locate(run_dir, log)
    ev = obs.evidence
    assert ev["exception"].startswith("Fatal Python error: Segmentation fault")
    assert ev["tracebacks"] == 1
    assert ev["innermost_frame"].endswith("in string_at")
    assert "in apply" in str(ev)


def test_ray_unhandled_errors_header_names_the_actor_that_raised(tmp_path):
    # OpenRLHF/OpenRLHF#922's shape: Ray prints, in the process that held the task's result, a remote error no one
    # waited for (`Unhandled error … ray::LLMRayActor.init_process_group() (pid=…, ip=…)`), its frames under the
    # printer's own prefix (python/ray/_private/worker.py); the error is the remote actor's
    p = "(ActorModelRayActor pid=700388) "
    log = (f"{p}Unhandled error (suppress with 'RAY_IGNORE_UNHANDLED_ERRORS=1'): ray::LLMRayActor.init_process_group() "
           "(pid=700386, ip=10.0.0.7, actor_id=fee8a2f8a218213cf461587c02000000, repr=<openrlhf.trainer.ray.vllm_engine."
           "LLMRayActor object at 0x7f>)\n"
           f"{p}^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
           f'{p}File "/env/lib/python3.12/site-packages/openrlhf/trainer/ray/vllm_engine.py", line 58, in init_process_group\n'
           f"{p}return self.llm.collective_rpc(\n"
           f'{p}File "/env/lib/python3.12/site-packages/vllm/entrypoints/llm.py", line 495, in collective_rpc\n'
           f"{p}executor = self.llm_engine.model_executor\n"
           f"{p}ValueError: a failure no signature lists\n")
    _, obs = locate(tmp_path, log)
    ev = obs.evidence
    assert obs.outcome == "located"
    assert ev["component"] == "inference engine"
    assert ev["node"] == "10.0.0.7"
    assert "LLMRayActor" in obs.summary and "ActorModelRayActor" not in obs.summary


def test_an_exception_group_is_located_on_the_error_it_gathered(tmp_path):
    # Python 3.11+ draws an exception group's tracebacks behind `  | ` (asyncio / anyio task groups: Starlette under
    # SGLang's HTTP server, sgl-project/sglang#19514); the traceback is written by a real interpreter
    import subprocess
    import sys

    script = tmp_path / "server.py"
    script.write_text(
        "import asyncio\n"
        "async def handler():\n"
        "    content = {'meta_info': {}}\n"
        "    return content['meta_info']['prompt_tokens']\n"
        "async def main():\n"
        "    async with asyncio.TaskGroup() as tg:\n"
        "        tg.create_task(handler())\n"
        "asyncio.run(main())\n", encoding="utf-8")
    err = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60).stderr
    assert "  | KeyError: 'prompt_tokens'" in err and "Exception Group Traceback" in err
    _, obs = locate(tmp_path, "[2026-02-21 17:48:27] ERROR:    Exception in ASGI application\n" + err)
    ev = obs.evidence
    assert ev["exception"] == "KeyError: 'prompt_tokens'"
    assert ev["frame"].endswith("in handler")


def test_a_processs_own_error_line_before_a_wrapper_that_reraises_it_is_the_crash(tmp_path):
    # OpenRLHF/OpenRLHF#159: the critic's device-side assert (no traceback with it), then the driver's ray.get re-raising
    log = ("(CriticModelRayActor pid=1501276) ../aten/src/ATen/native/cuda/Indexing.cu:1146: indexSelectLargeIndex: "
           "block: [205,0,0], thread: [39,0,0] Assertion `srcIndex < srcSelectDimSize` failed.\n"
           "Traceback (most recent call last):\n"
           '  File "/opt/openrlhf/training/train_ppo_ray.py", line 78, in train\n'
           "    ray.get(refs)\n"
           '  File "/usr/lib/python3.11/site-packages/ray/_private/worker.py", line 2563, in get\n'
           "    raise value.as_instanceof_cause()\n"
           "ray.exceptions.RayTaskError(RuntimeError): ray::ActorModelRayActor.fit()\n")
    _, obs = locate(tmp_path, log)
    ev = obs.evidence
    assert ev["where"].endswith("job.log:1") and "srcIndex < srcSelectDimSize" in ev["exception"]
    assert ev["component"] == "trainer"


def test_an_actors_rank_is_read_from_its_own_prefixed_line_the_first_rank_on_it():
    from triage.formats.tracebacks import rank_mentions

    data = (b"(A pid=1) x [Rank 2] y [Rank 3]\n"
            b"(B pid=4, ip=1.2.3.4) [Rank x] then [Rank 5]\n"  # the first complete mention on the line
            b"[Rank 7] no prefix\n"
            b"(C pid=9) nothing\n"
            b"(D pid=10)[Rank 1]\n"  # no space after the prefix: not Ray's
            b"  (E pid=11) [Rank 2]\n"  # not at the line's start
            b"(F pid=12) [Rank 6]")
    assert rank_mentions(data, 0, len(data)) == [(1, 2), (4, 5), (12, 6)]


def test_a_trainers_own_config_read_by_the_same_package_is_no_version(tmp_path):
    # the same class read by its own package's code, under a user's script: nothing says another package is older
    log = ("Traceback (most recent call last):\n"
           '  File "/home/u/train.py", line 30, in main\n'
           "    trainer = GRPOTrainer(model, args=cfg)\n"
           '  File "/usr/lib/python3.11/site-packages/trl/trainer/grpo_trainer.py", line 300, in __init__\n'
           "    self.num_iterations = args.num_iterations\n"
           "AttributeError: 'GRPOConfig' object has no attribute 'num_iterations'\n")
    sig, _obs = locate(tmp_path, log)
    assert sig.outcome != "version_mismatch", sig.summary


def test_a_framework_checked_out_inside_anothers_folder_names_the_file():
    # areal-project/AReaL#240: AReaL's checkout under a folder named verl
    from triage.formats.tracebacks import package_of

    assert package_of("/workspace/verl/RLDecisionAgent/AReaL/areal/engine/sglang_remote.py") == "areal"
    assert package_of("/root/slime/slime/backends/sglang_utils/sglang_engine.py") == "slime"
    assert package_of("/root/slime_plugins/models/glm4.py") is None


def test_spawns_report_of_a_child_whose_traceback_is_cut_is_not_the_crash(tmp_path):
    # deepspeedai/DeepSpeed#6005: the parent's empty ProcessRaisedException, the child's traceback cut under it
    log = ("Traceback (most recent call last):\n"
           '  File "/test/oss.py", line 322, in <module>\n'
           "    mp.spawn(\n"
           '  File "/env/lib/python3.10/site-packages/torch/multiprocessing/spawn.py", line 190, in join\n'
           "    raise ProcessRaisedException(msg, error_index, failed_process.pid)\n"
           "torch.multiprocessing.spawn.ProcessRaisedException:\n\n"
           "-- Process 0 terminated with the following error:\n"
           "Traceback (most recent call last):\n"
           '  File "/env/lib/python3.10/site-packages/torch/multiprocessing/spawn.py", line 77, in _wrap\n'
           "    fn(i, *args)\n"
           '  File "/test/oss.py", line 160, in train\n'
           "    model = DDP(model, device_ids=device_ids)\n")
    _sig, obs = locate(tmp_path, log)
    assert obs.outcome == "cut_off", obs.summary
    assert "oss.py:160" in obs.summary


def test_a_cython_bindings_frame_is_its_librarys_and_the_crash_is_placed_above_it(tmp_path):
    # flashinfer-ai/flashinfer#2034: tvm_ffi's Cython dispatch under flashinfer's MoE kernel call
    from triage.formats.tracebacks import package_of

    assert package_of("python/tvm_ffi/cython/function.pxi") == "tvm_ffi"
    assert package_of("grpc/_cython/_cygrpc/aio/call.pyx.pxi") == "grpc"
    assert package_of("/home/u/build/ext/fast.pyx") == "a compiled extension"  # a machine's folders name no package
    log = ("Traceback (most recent call last):\n"
           '  File "/w/.venv/lib/python3.12/site-packages/flashinfer/fused_moe/core.py", line 1570, in trtllm_moe_op\n'
           "    moe_op.trtllm_moe(\n"
           '  File "python/tvm_ffi/cython/function.pxi", line 814, in core.Function.__call__\n'
           "RuntimeError: Error in function 'run'\n")
    _sig, obs = locate(tmp_path, log)
    assert obs.evidence["frame"].endswith("in trtllm_moe_op") and obs.evidence["frame_package"] == "flashinfer"
    assert obs.evidence["innermost_frame"].endswith("in core.Function.__call__")


@pytest.mark.parametrize("first", [
    # gcc under ninja (NVIDIA/TransformerEngine#1309)
    "/env/lib/python3.9/site-packages/torch/include/ATen/cudnn/cudnn-wrapper.h:3:10: fatal error: cudnn.h: No such file "
    "or directory\n    3 | #include <cudnn.h>\ncompilation terminated.\nninja: build stopped: subcommand failed.\n",
    # CMake's configure step (NVIDIA/TransformerEngine#954)
    "CMake Error at cmake/FindCUDNN.cmake:19 (find_library):\n  Could not find cudnn_LIBRARY using the following names: "
    "cudnn, libcudnn.so.\n-- Configuring incomplete, errors occurred!\n",
])
def test_a_build_that_stopped_is_located_at_its_compilers_error_not_the_setup_scripts(tmp_path, first):
    log = first + ("Traceback (most recent call last):\n"
                   '  File "/usr/lib/python3.9/subprocess.py", line 528, in run\n'
                   "    raise CalledProcessError(retcode, process.args,\n"
                   "subprocess.CalledProcessError: Command '['ninja', '-v']' returned non-zero exit status 1.\n")
    sig, obs = locate(tmp_path, log)
    assert obs.outcome == "located", obs.summary
    assert obs.summary.startswith("The job stopped on `" + first.split("\n")[0][:40])
    assert sig.evidence["line"]["where"].endswith(":1"), sig.summary


def test_slurms_refusal_to_run_the_job_is_located(tmp_path):
    # NVIDIA-NeMo/RL#3052: a time limit over the partition's, refused at submission
    _sig, obs = locate(tmp_path, "sbatch: error: Batch job submission failed: Requested time limit is invalid (missing or "
                                 "exceeds some limit)\n")
    assert obs.outcome == "located", obs.summary
    assert "Batch job submission failed" in obs.summary


def test_a_tasks_envelope_alone_is_not_called_a_death(tmp_path):
    # NVIDIA-NeMo/RL#1633: Ray's report that a remote method raised; the worker lived on
    # (as pasted from pytest's report, `E   ` before it)
    _sig, obs = locate(tmp_path, "E                       ray.exceptions.RayTaskError: ray::MegatronPolicyWorker.generate() (pid=2680520, "
                                 "ip=172.17.0.2, repr=MegatronPolicyWorker[rank=0])\n")
    assert obs.outcome == "not_located", obs.summary
    assert "remote task ray::MegatronPolicyWorker.generate() raised" in obs.summary
    assert "died" not in obs.summary and "dmesg" not in obs.summary


def test_the_raylets_own_failure_is_located_over_the_drivers_report_of_its_death(tmp_path):
    # ray-project/ray#36884: the driver's LocalRayletDiedError first, the raylet's `Check failed` after it
    log = ("Traceback (most recent call last):\n"
           '  File "/home/ray/anaconda3/lib/python3.10/site-packages/ray/_private/worker.py", line 2523, in get\n'
           "    raise value\n"
           "ray.exceptions.LocalRayletDiedError: The task's local raylet died. Check raylet.out for more information.\n"
           "(raylet) [2023-06-27 07:56:04,042 C 1257 1257] (raylet) local_task_manager.cc:431:  Check failed: "
           "task.GetTaskSpecification().PlacementGroupBundleId().first != PlacementGroupID::Nil()\n")
    _sig, obs = locate(tmp_path, log)
    assert obs.outcome == "located" and "Check failed" in obs.summary and ":5" in obs.evidence["where"], obs.summary


def test_abseils_banner_for_a_crash_signal_is_located_and_for_sigterm_is_not(tmp_path):
    # verl-project/verl#5659: SIGABRT ends the worker; Ray's own SIGTERM at shutdown does not (vllm-project/vllm#13437)
    _sig, obs = locate(tmp_path, "*** SIGABRT received at time=1773825404 on cpu 49 ***\n")
    assert obs.outcome == "located", obs.summary
    _sig, obs = locate(tmp_path, "*** SIGTERM received at time=1739834838 on cpu 88 ***\n")
    assert obs.outcome == "not_located", obs.summary


def test_two_vllm_workers_lines_are_two_processes(tmp_path):
    # vllm-project/vllm#16150: rank 2's line under rank 5's exception is not its message
    pre5 = "(VllmWorker rank=5 pid=9469) ERROR 04-07 10:56:15 [multiproc_executor.py:383] "
    log = (pre5 + "Traceback (most recent call last):\n"
           + pre5 + '  File "/usr/local/lib/python3.10/dist-packages/torch/_inductor/output_code.py", line 466, in __call__\n'
           + pre5 + "    return self.current_callable(inputs)\n"
           + pre5 + "ValueError: too many values to unpack (expected 12)\n"
           "(VllmWorker rank=2 pid=9252) ERROR 04-07 10:56:15 [multiproc_executor.py:383] WorkerProc hit an exception: %s\n")
    _sig, obs = locate(tmp_path, log)
    assert obs.evidence["exception"] == "ValueError: too many values to unpack (expected 12)", obs.summary
    assert obs.evidence["pid"] == 9469


@pytest.mark.parametrize("head", ["RuntimeError: ", "FAILED tests/test_ppo.py::test_peft - RuntimeError: "])
def test_an_exception_whose_message_starts_on_the_next_line_is_quoted_with_it(tmp_path, head):
    # safetensors' shared-tensor refusal (huggingface/trl#5150 in pytest's summary, Improbable-AI/curiosity_redteam#6)
    log = (head + "\n            Some tensors share memory, this will lead to duplicate memory on disk and potential "
           "differences when loading them again: [{'lm_head.weight', 'wte.weight'}].\n")
    _sig, obs = locate(tmp_path, log)
    assert obs.outcome == "located", obs.summary
    assert "RuntimeError: Some tensors share memory" in obs.summary


def test_step_records_after_a_caught_traceback_count_from_the_start():
    # yuzhaouoe/GUI-Cursor-Moving:verl_demo.log: an agent-loop worker logs a parse failure it caught at the first
    # rollout, its message quoting the environment's `step 0 - …`, and verl goes on logging `step:N - …` records
    text = (
        "(CursorLoopWorker pid=57714) ERROR:2026-03-26 21:59:41,854:Traceback (most recent call last):\n"
        '(CursorLoopWorker pid=57714)   File "/mnt/cursor/env_and_state.py", line 470, in update_state\n'
        "(CursorLoopWorker pid=57714)     self._extract_action_and_update_cursor(observation, text_input, output_text)\n"
        "(CursorLoopWorker pid=57714) ValueError: step 0 - extract action failed from: <think>\n"
        + "".join(f"(TaskRunner pid=38606) step:{i} - actor/grad_norm:0.91 - critic/score/mean:0.57\n" for i in range(1, 5))
    )
    reader = read_text(text)
    chain = next(iter(reader.groups.values())).first
    assert chain.last_step is None  # the message's `step 0 - ` is no step record
    assert reader.final_records[next(iter(reader.final_records))][0] == 4
    assert went_on_after(reader, chain, 2, recorded_before=True)


def test_a_progress_bar_after_a_traceback_still_needs_a_step_before_it():
    # modelscope/ms-swift#7228: a bar's count printed after a crash says where the bar stood
    text = ("Traceback (most recent call last):\n"
            '  File "/root/train.py", line 9, in <module>\n    main()\n'
            "RuntimeError: boom\n"
            "Train:  12%|█▏        | 8/120 [00:41<09:37,  5.16s/it]\n")
    reader = read_text(text)
    chain = next(iter(reader.groups.values())).first
    assert not went_on_after(reader, chain, 2, recorded_before=True)


def test_a_function_named_for_its_rollout_and_its_reward_is_no_reward_code(tmp_path):
    # sushantmehta-code/tinker-cookbook:logs/wandb/run-20251219_190422-8zwal4ai/files/output.log: the policy's sampling
    # call raised under `do_group_rollout_and_filter_constant_reward`
    app = "/Users/u/tinker-cookbook-main/tinker_cookbook"
    log = ("Traceback (most recent call last):\n"
           f'  File "{app}/rl/train.py", line 674, in do_group_rollout_and_filter_constant_reward\n'
           "    trajectory_group = await do_group_rollout(env_group_builder, policy)\n"
           f'  File "{app}/rl/rollouts.py", line 20, in do_single_rollout\n'
           "    ac_with_logprobs = await policy(ob, stop_condition)\n"
           f'  File "{app}/completers.py", line 64, in __call__\n'
           "    sample_result = await self.sampling_client.sample_async(\n"
           "tinker.BadRequestError: Error code: 400 - {'detail': \"Prompt length plus max_tokens exceeds the "
           "model's context window: 20847 prompt tokens + 16384 max_tokens > 32768.\"}\n")
    (tmp_path / "output.log").write_text(log)
    obs = CrashLocation().examine(open_run(str(tmp_path)))
    assert obs.evidence["component"] != "reward function", obs.summary
    # a reward function's own frame is still read as one
    (tmp_path / "output.log").write_text(log.replace("completers.py\", line 64, in __call__",
                                                     "rewards.py\", line 64, in compute_reward"))
    obs = CrashLocation().examine(open_run(str(tmp_path)))
    assert obs.evidence["component"] == "reward function", obs.summary


def test_a_tests_own_assertion_is_the_test_harness_and_its_runners_lines_are_no_message(tmp_path):
    # shun8686/for_debug:scripts/log/test_ascend_deepseek_v3.2_w8a8_1p1d_32p_in64k_out1k_30ms.py.log: SGLang's Ascend
    # nightly test failing its throughput bar through unittest; its `E`, separator and `ERROR:` line follow the exception
    log = ("Traceback (most recent call last):\n"
           '  File "/usr/local/lib/python3.11/site-packages/sglang/test/test_utils.py", line 1704, in <lambda>\n'
           "    lambda: super(CustomTestCase, self)._callTestMethod(method),\n"
           '  File "/data/sglang/test/nightly/ascend/performance/test_ascend_disaggregation_utils.py", line 391, in '
           "run_throughput\n    self.assertGreaterEqual(\n"
           '  File "/usr/local/lib/python3.11/unittest/case.py", line 703, in fail\n'
           "    raise self.failureException(msg)\n"
           "AssertionError: 445.51 not greater than or equal to 496.3225806451613\n"
           "E\n" + "=" * 70 + "\nERROR: test_throughput (__main__.Test_DeepSeek_V3_2_W8A8_1P1D.test_throughput)\n"
           + "-" * 70 + "\n")
    (tmp_path / "test.log").write_text(log)
    obs = CrashLocation().examine(open_run(str(tmp_path)))
    assert obs.evidence["component"] == "test harness", obs.summary
    assert obs.evidence["exception"] == "AssertionError: 445.51 not greater than or equal to 496.3225806451613"
    # a message's own second line is still its own
    tb = read_text('Traceback (most recent call last):\n  File "t.py", line 3, in <module>\n    f()\n'
                   "ValueError: bad shape\n  expected (4, 8)\n")
    assert next(iter(tb.groups.values())).first.root.message == "bad shape expected (4, 8)"


@pytest.mark.parametrize("after", [
    # another rank's c10 warning, 962 lines later in elena-lyulina/Megatron-LM-Attention-Benchmark's 2624217.out
    "[W626 11:33:32.292598340 ProcessGroupNCCL.cpp:1569] Warning: WARNING: destroy_process_group() was not called",
    # a job script's shell errors under its helper's traceback (the same repository's 2339785.err)
    "cat: '': No such file or directory",
    "/var/spool/slurmd/job2339785/slurm_script: line 374: python: command not found",
    # another thread's traceback header (CPython threading's excepthook; rllm-org/rllm#176)
    "Exception in thread Thread-9 (runner):",
])
def test_another_programs_line_under_an_exception_is_no_part_of_its_message(after):
    tb = read_text('Traceback (most recent call last):\n  File "train.py", line 3, in <module>\n    main()\n'
                   f"AssertionError\n{after}\n")
    assert next(iter(tb.groups.values())).first.root.message == ""


def test_a_loading_bars_count_is_no_step_and_a_training_bars_is():
    # Sustella/qwen_sapiens:wandb/run-20260429_085550-nuxtgd3c/files/output.log: `Loading weights: 100%|…| 760/760`
    # at start-up, then a state_dict error: "step 760" had been quoted
    tb = ('Traceback (most recent call last):\n  File "train.py", line 756, in train\n    projector.load_state_dict(sd)\n'
          "RuntimeError: Error(s) in loading state_dict for PoseFeatureProjector\n")
    bar = "Loading weights: 100%|██████████| 760/760 [00:01<00:00, 512.33it/s]\n"
    chain = next(iter(read_text(bar + tb).groups.values())).first
    assert chain.last_step is None
    # the Trainer's own bar, which has no description, counts its steps
    bar = " 12%|█▏        | 37/300 [05:12<36:51,  8.45s/it]\n"
    chain = next(iter(read_text(bar + tb).groups.values())).first
    assert chain.last_step == 37
    # OpenRLHF's step bar with tqdm's postfix counts, a micro-batch `forward` bar under it does not (TideDra/lmm-r1#84)
    bars = ("Steps [Episode 1]:  11%|█         | 16/150 [3:38:05<30:26:30, 817.84s/it, policy_loss=-0.0976, kl=0, "
            "reward=0.301]\nforward: 100%|██████████| 32/32 [00:24<00:00,  1.65it/s]\n")
    chain = next(iter(read_text(bars + tb).groups.values())).first
    assert chain.last_step == 16


def test_a_ray_worker_prefix_without_an_actor_is_not_the_driver(tmp_path):
    # THUDM/slime#1656: the model spec of a plugin failing while the training actor is built; Ray prefixes the
    # worker's lines `(pid=N, ip=…)` before the actor has its name, and the driver's lines carry no prefix
    pre = "(pid=35379, ip=10.0.0.21) "
    log = (f"{pre}Traceback (most recent call last):\n"
           f'{pre}  File "/root/slime/slime_plugins/models/glm4.py", line 11, in get_glm_spec\n'
           f"{pre}    post_self_attn_layernorm=args.post_self_attn_layernorm,\n"
           f"{pre}AttributeError: 'Namespace' object has no attribute 'post_self_attn_layernorm'\n")
    _sig, obs = locate(tmp_path, log)
    assert obs.outcome == "located", obs.summary
    assert obs.evidence["component"] == "Ray worker"
    assert "pid=35379" in obs.evidence["component_reason"] and "not the driver" in obs.evidence["component_reason"]
    assert obs.summary.startswith("The Ray worker crashed on `AttributeError")


def test_a_converter_run_under_torchrun_is_checkpoint_conversion(tmp_path):
    # THUDM/slime#1780: slime's tools/convert_hf_to_torch_dist.py on rank 0, failing in mbridge's name mapping
    log = ("[rank0]: Traceback (most recent call last):\n"
           '[rank0]:   File "/root/slime/tools/convert_hf_to_torch_dist.py", line 145, in <module>\n'
           "[rank0]:     main()\n"
           '[rank0]:   File "/root/slime/tools/convert_hf_to_torch_dist.py", line 119, in main\n'
           "[rank0]:     bridge.load_weights(model, hf_model_path)\n"
           '[rank0]:   File "/usr/local/lib/python3.12/dist-packages/mbridge/core/bridge.py", line 172, in load_weights\n'
           "[rank0]:     names = self._weight_name_mapping_mcore_to_hf(name)\n"
           '[rank0]:   File "/root/slime/slime_plugins/mbridge/glm4moe.py", line 86, in _weight_name_mapping_mcore_to_hf\n'
           '[rank0]:     raise NotImplementedError(f"Unsupported parameter name: {mcore_weights_name}")\n'
           "[rank0]: NotImplementedError: Unsupported parameter name: decoder.layers.0.post_self_attn_layernorm.weight\n")
    _sig, obs = locate(tmp_path, log)
    assert obs.evidence["component"] == "checkpoint conversion", obs.summary
    assert obs.evidence["rank"] == 0
    assert "convert_hf_to_torch_dist.py" in obs.evidence["component_reason"]


def test_a_trainer_calling_a_converter_function_stays_the_trainer(tmp_path):
    # a training script's own entry frame: the rank prefix names the trainer even where a converter's file is deeper
    log = ("[rank1]: Traceback (most recent call last):\n"
           '[rank1]:   File "/work/train.py", line 80, in <module>\n'
           "[rank1]:     sync()\n"
           '[rank1]:   File "/work/utils/convert_weights.py", line 12, in sync\n'
           "[rank1]:     x = y.view(3, -1)\n"
           "[rank1]: RuntimeError: shape '[3, -1]' is invalid for input of size 10\n")
    _sig, obs = locate(tmp_path, log)
    assert obs.evidence["component"] == "trainer", obs.summary


def test_slimes_report_that_its_sglang_server_died_gives_way_to_the_servers_own_error(tmp_path):
    # THUDM/slime#1998 as pasted: the server's CUDA graph capture failing, then slime's health wait raising
    log = ("RuntimeError: Runtime check failed at /sgl-workspace/sglang/python/sglang/jit_kernel/include/sgl_kernel/"
           "distributed/custom_all_reduce.cuh:37: CUDA error: invalid argument\n"
           "Exception: Capture cuda graph failed\n"
           "ray::SGLangEngine.init()\n"
           "...\n"
           'File "/root/slime/backends/sglang_utils/sglang_engine.py", line 95, in _wait_server_healthy\n'
           '    raise Exception("Server process terminated unexpectedly.")\n'
           "Exception: Server process terminated unexpectedly.\n")
    _sig, obs = locate(tmp_path, log)
    assert obs.outcome == "located", obs.summary
    assert obs.evidence["where"].endswith("job.log:1"), obs.summary
    assert "custom_all_reduce.cuh:37: CUDA error: invalid argument" in obs.evidence["exception"]


def test_a_crash_after_records_that_carry_no_step_is_not_placed_before_the_first(tmp_path):
    # Sunshine535/nips-grpo-dynamics: the HF Trainer's printed dicts, the run's summary, then the script's own crash
    records = "".join(f"{{'loss': 0.0{i}, 'grad_norm': 0.1, 'learning_rate': 1e-06, 'reward': 0.9, 'epoch': 0.{i}}}\n"
                      for i in range(1, 8))
    log = (records + "{'train_runtime': 768.0, 'train_loss': 0.02, 'epoch': 1.0}\n"
           "Traceback (most recent call last):\n"
           '  File "/work/run_gate.py", line 88, in <module>\n'
           "    json.dump(results, fh)\n"
           "TypeError: Object of type bool_ is not JSON serializable\n")
    _sig, obs = locate(tmp_path, log)
    assert obs.outcome == "located", obs.summary
    assert "before the first step record" not in obs.summary
    assert obs.summary.endswith("with no step number in the log to place it.")
