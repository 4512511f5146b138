"""Framework adapters: their metric-line grammars on real-shaped lines, the vocabulary data, detection.

Each sample names the framework source whose output it mimics.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from triage import frameworks
from triage.formats.slime_log import scan_logs
from triage.frameworks import ErrorWording, Framework
from triage.metrics import CANONICAL
from triage.run.fragment import open_file_run

HERE = Path(__file__).parent
FRAMEWORK_NAMES = {"slime", "verl", "openrlhf", "trl", "ms_swift", "nemo_rl"}


def _log(tmp_path: Path, text: str, name: str = "job.log") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# --- the registry and the data files ----------------------------------------------------

def test_every_framework_family_is_registered_through_the_entry_point_group():
    reg = frameworks.registry()
    assert FRAMEWORK_NAMES <= set(reg)
    for fw in reg.values():
        assert isinstance(fw, Framework)
        assert fw.log_markers and fw.metric_grammars and fw.arg_sources
        assert all(isinstance(w, ErrorWording) and w.source for w in fw.error_wordings)
        for w in fw.error_wordings:
            w.regex()  # every wording compiles


def test_error_wordings_point_at_catalog_ids():
    catalog = yaml.safe_load((HERE.parent / "playbooks" / "verdicts.yaml").read_text())
    ids = {v["id"] for v in catalog["verdicts"]} if isinstance(catalog, dict) and "verdicts" in catalog else set()
    if not ids:  # the catalog as a list of verdicts
        ids = {v["id"] for v in catalog}
    wordings = frameworks.error_wordings()
    assert {name for name, _ in wordings} >= {"slime", "verl", "openrlhf", "trl"}
    unknown = {w.verdict for _, w in wordings} - ids
    assert not unknown, f"error wordings name ids missing from the catalog: {unknown}"


def test_metric_vocabulary_has_a_column_per_framework_and_a_source_per_cell():
    vocab = frameworks.metric_vocabulary()
    for name in ("grad_norm", "kl", "entropy", "reward", "reward_std", "truncated_ratio", "response_length",
                 "logp_diff", "loss", "lr", "is_ratio", "frac_reward_zero_std", "clip_ratio"):
        assert name in vocab, name
    columns = {fw for row in vocab.values() for fw in row}
    assert FRAMEWORK_NAMES <= columns
    for row in vocab.values():
        for cell in row.values():
            assert "/" in cell["source"] and cell["keys"]
    # the canonical names the probes ask for all come from the data file
    assert set(CANONICAL) == set(vocab)
    assert CANONICAL["grad_norm"][0] == ("step", "train/grad_norm")


def test_argument_vocabulary_maps_each_framework_name_to_the_canonical_one():
    names = frameworks.canonical_arg_names()
    assert names["actor_rollout_ref.rollout.n"] == "n_samples_per_prompt"  # verl ppo_trainer.yaml
    assert names["num_generations"] == "n_samples_per_prompt"  # trl grpo_config.py
    assert names["generate_max_len"] == "rollout_max_response_len"  # OpenRLHF train_ppo_ray.py
    assert names["actor_rollout_ref.actor.ppo_max_token_len_per_gpu"] == "max_tokens_per_gpu"


def test_each_framework_names_its_own_way_to_produce_a_missing_artifact():
    assert "trainer.logger" in frameworks.needs_help("verl", "metrics")
    assert "--use_tensorboard" in frameworks.needs_help("openrlhf", "metrics")
    assert "trainer_state.json" in frameworks.needs_help("hf_trainer", "trainer_state")
    assert "logging.jsonl" in frameworks.needs_help("ms_swift", "metrics")
    assert "--dump-details" in frameworks.needs_help("miles", "train_dump")
    assert "logger.tensorboard_enabled" in frameworks.needs_help("nemo_rl", "metrics")
    assert frameworks.needs_help("unknown", "metrics", "fallback") == "fallback"


def test_the_catalogs_slime_flags_become_each_frameworks_own_names():
    flags = ["--sglang-mem-fraction-static", "--offload", "--n-samples-per-prompt", "num_generations",
             "actor_rollout_ref.rollout.n", "NCCL_DEBUG=INFO"]
    reg = frameworks.registry()
    out, told, unnamed = reg["verl"].own_flags(flags)
    # verl/trainer/config/rollout/rollout.yaml; TRL's key is dropped, an environment variable kept
    assert out == ["actor_rollout_ref.rollout.gpu_memory_utilization", "actor_rollout_ref.rollout.n", "NCCL_DEBUG=INFO"]
    assert told[0] == ("--sglang-mem-fraction-static", ("actor_rollout_ref.rollout.gpu_memory_utilization",))
    assert unnamed == ["--offload"]
    out, _, unnamed = reg["trl"].own_flags(flags)
    assert out == ["vllm_gpu_memory_utilization", "num_generations", "NCCL_DEBUG=INFO"]  # trl grpo_config.py
    assert unnamed == ["--offload"]


def test_remedy_only_rows_name_a_remedys_kl_and_save_flags_but_never_a_runs_arguments(tmp_path):
    # verl's ppo_trainer.yaml: algorithm.kl_ctrl.kl_coef, trainer.save_freq; TRL's grpo_config.py: beta
    reg = frameworks.registry()
    out, told, unnamed = reg["verl"].own_flags(["--kl-coef", "--use-kl-loss", "--save-interval"])
    assert out == ["algorithm.kl_ctrl.kl_coef", "actor_rollout_ref.actor.use_kl_loss", "trainer.save_freq"]
    assert unnamed == []
    assert reg["trl"].own_flags(["--kl-coef"])[0] == ["beta"]
    # a verl run's KL coefficient is not slime's --kl-coef to the rules (no --ref-load asked of it)
    assert "algorithm.kl_ctrl.kl_coef" not in frameworks.canonical_arg_names()
    assert "kl_coef" not in reg["verl"].arg_names()
    assert frameworks.canonical_arg_names()["trainer.save_freq"] == "save_interval"


def test_a_verl_run_is_told_its_own_key_for_the_engines_memory(tmp_path, capsys):
    import json

    from triage.cli import main

    _log(tmp_path, (
        "(TaskRunner pid=1843) step:1 - actor/entropy:0.52 - actor/pg_loss:0.01 - critic/score/mean:0.2\n"
        "(WorkerDict pid=2211, ip=10.0.0.3) Traceback (most recent call last):\n"
        '(WorkerDict pid=2211, ip=10.0.0.3)   File "/usr/local/lib/python3.10/dist-packages/vllm/worker/model_runner.py", '
        "line 1500, in execute_model\n"
        "(WorkerDict pid=2211, ip=10.0.0.3)     hidden_states = model_executable(input_ids=input_ids)\n"
        "(WorkerDict pid=2211, ip=10.0.0.3) RuntimeError: CUDA error: an illegal memory access was encountered\n"))
    assert main(["run", str(tmp_path / "job.log"), "--json", "--no-cache"]) == 0
    rc = json.loads(capsys.readouterr().out)["root_cause"]
    assert rc["id"] == "engine.oom_illegal_memory"
    assert rc["flags"] == ["actor_rollout_ref.rollout.gpu_memory_utilization"]
    assert rc["remedy"].endswith(
        "In verl: `--sglang-mem-fraction-static` is `actor_rollout_ref.rollout.gpu_memory_utilization`.")


def test_an_engines_context_refusal_names_the_prompt_cap_and_the_engines_context_in_verls_keys(tmp_path, capsys):
    # ritzz-ai/GUI-R1#32: vLLM refused a prompt past its max_model_len in a verl run (it was told `--max-tokens-per-gpu`)
    import json

    from triage.cli import main

    _log(tmp_path, "(TaskRunner pid=1843) step:1 - actor/entropy:0.52 - actor/pg_loss:0.01\n"
                   "(WorkerDict pid=2211) ValueError: Prompt length of 4834 is longer than the maximum model length of 4096.\n")
    assert main(["run", str(tmp_path / "job.log"), "--json", "--no-cache"]) == 0
    rc = json.loads(capsys.readouterr().out)["root_cause"]
    assert rc["id"] == "config.sample_exceeds_limits"
    assert rc["flags"][0] == "data.max_prompt_length" and "actor_rollout_ref.rollout.max_model_len" in rc["flags"]
    assert "max_tokens_per_gpu" not in " ".join(rc["flags"]) and rc["remedy"].startswith("The engine refused a prompt")


@pytest.mark.parametrize("line", [
    # huggingface/open-r1#249; wyf3/llm_related#13 cut the same line after `generation`
    "[rank0]: ValueError: The global train batch size (7 x 1) must be evenly divisible by the number of generations per "
    "prompt (8). Given the current train batch size, the valid values for the number of generations are: [7].\n",
    "[rank0]: ValueError: The global train batch size (1 x 1) must be evenly divisible by the number of generation\n",
])
def test_trls_batch_check_is_answered_in_trls_keys(tmp_path, capsys, line):
    import json

    from triage.cli import main

    _log(tmp_path, '  File "/usr/local/lib/python3.11/site-packages/trl/trainer/grpo_trainer.py", line 412, in __init__\n'
                   + line)
    assert main(["run", str(tmp_path / "job.log"), "--json", "--no-cache"]) == 0
    rc = json.loads(capsys.readouterr().out)["root_cause"]
    assert rc["id"] == "config.batch_size_mismatch"
    assert rc["remedy"].startswith("Make the batch a multiple of num_generations")
    assert "num_generations" in rc["flags"] and not any(f.startswith("--") for f in rc["flags"])


def test_a_check_that_could_not_run_tells_a_trl_run_its_own_way(tmp_path, capsys):
    # huggingface/trl#5697's summary table: every completion clipped, no completions kept
    import json

    from triage.cli import main

    _log(tmp_path, "Step  loss  grad_norm  reward_mean  clipped_ratio  mean_length\n"
                   "1     0     0          0            1.0            256\n"
                   "2     0     0          0            1.0            256\n"
                   "10    0     0          0            1.0            256\n")
    (tmp_path / "run.py").write_text("from trl import GRPOConfig\nargs = GRPOConfig(output_dir='out', logging_steps=1)\n",
                                     encoding="utf-8")
    assert main(["run", str(tmp_path), "--json", "--no-cache"]) == 3
    report = json.loads(capsys.readouterr().out)
    told = {n["probe"]: n["command"] for n in report["not_checked"]}
    assert told["rollout_text"].startswith("rerun with `log_completions=True` and `report_to='wandb'`")
    assert told["config_rule"] == "keep `model_name_or_path` reachable from the run"
    assert not any("--save-debug-rollout-data" in (c["next_step"] or "") for c in report["candidates"])
    # the truncation playbook's own verdicts first, nearest first: not cut off by weights verdicts further on
    assert [c["id"] for c in report["candidates"][:2]] == ["rollout.missing_stop_token", "rollout.max_len_too_small"]


# --- verl --------------------------------------------------------------------------------

# verl/utils/logger/aggregate_logger.py (LocalLogger, concat_dict_to_str) behind Ray's actor prefix,
# with the ANSI colour codes Ray adds, once whole and once with the ESC byte lost.
VERL_LOG = (
    "\x1b[36m(TaskRunner pid=2601)\x1b[0m step:1 - global_seqlen/min:11632 - actor/entropy:0.5921 - "
    "actor/pg_loss:-0.0012 - actor/pg_clipfrac:0.0021 - actor/ppo_kl:0.0001 - actor/grad_norm:0.4137 - "
    "actor/lr:1e-06 - critic/score/mean:0.1875 - critic/rewards/mean:0.1875 - response_length/mean:412.5 - "
    "response_length/clip_ratio:0.0 - timing_s/gen:35.21 - training/global_step:1 - training/epoch:0\n"
    "[36m(TaskRunner pid=2601)[0m step:2 - actor/entropy:0.5877 - actor/grad_norm:0.3952 - "
    "critic/score/mean:0.2031 - response_length/mean:420.1 - response_length/clip_ratio:0.0039\n"
    "(WorkerDict pid=3011) [rank3]: step:2 - actor/grad_norm:nan\n"
    "(TaskRunner pid=2601) step:3 - actor/entropy:0.5801 - actor/grad_norm:0.4410 - critic/score/mean:0.25 - "
    "response_length/mean:433.0 - response_length/clip_ratio:0.0\n"
)


def test_unsloths_start_up_banner_names_the_hf_trainer_and_the_paste_is_read_not_refused(tmp_path, capsys):
    import json

    from triage.cli import main

    # unslothai/unsloth#2033: the start of a run, before any record
    _log(tmp_path, "🦥 Unsloth: Will patch your computer to enable 2x faster free finetuning.\n"
                   "🦥 Unsloth Zoo will now patch everything to make training faster!\n"
                   "INFO 03-15 21:22:25 __init__.py:190] Automatically detected platform cuda.\n")
    assert main(["run", str(tmp_path), "--json", "--no-cache"]) == 3
    report = json.loads(capsys.readouterr().out)
    assert report["run"]["framework"] == "hf_trainer" and report["root_cause"]["id"] == "inconclusive"


def test_an_open_r1_command_names_the_trl_run_and_its_remedy_keys(tmp_path, capsys):
    import json

    from triage.cli import main

    # huggingface/open-r1#672: the engine's refusal of a prompt, and the recipe's command beside it
    (tmp_path / "cmdline.txt").write_text(
        "accelerate launch --config_file recipes/accelerate_configs/zero3.yaml src/open_r1/grpo.py "
        "--config recipes/grpo/config_demo.yaml --vllm_mode colocate\n", encoding="utf-8")
    _log(tmp_path, "ValueError: The decoder prompt (length 4608) is longer than the maximum model length of 4096. "
                   "Make sure that `max_model_len` is no smaller than the number of text tokens.\n")
    assert main(["run", str(tmp_path), "--json", "--no-cache"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["run"]["framework"] == "hf_trainer"
    assert report["root_cause"]["id"] == "config.sample_exceeds_limits"
    assert "vllm_max_model_len" in report["root_cause"]["flags"]


def test_verls_skip_of_a_step_whose_gradient_is_not_finite_is_read_not_refused(tmp_path, capsys):
    import json

    from triage.cli import main

    # EvolvingLMMs-Lab/multimodal-search-r1#19: the recipe's phase lines and verl's own warning (dp_actor.py)
    _log(tmp_path, "[Global Step: 20] Update Actor Starts ...\n[Global Step: 20] Update Actor Ends ...\n"
                   " WARN: rank 0 grad_norm is not finite: inf\nWARN: rank 0 grad_norm is not finite: inf\n")
    assert scan_logs([tmp_path / "job.log"]).notable[0].tag == "nan_skip"
    assert main(["run", str(tmp_path), "--json", "--no-cache"]) == 3
    assert json.loads(capsys.readouterr().out)["run"]["framework"] == "verl"


def test_verl_console_lines_are_read_with_ray_prefixes_and_lost_ansi_escapes(tmp_path):
    index = scan_logs([_log(tmp_path, VERL_LOG)])
    assert index.framework == "verl"
    steps, values = index.metrics.series("verl", "actor/grad_norm")
    assert list(steps) == [1, 2, 2, 3]
    assert values[0] == pytest.approx(0.4137) and math.isnan(values[2])
    assert index.parsed_by[str(tmp_path / "job.log")] == {"verl_console": 4}
    assert index.records_per_kind() == {"verl": 4}
    assert index.unparsed_metric_lines == 0


def _hard_wrap(line: str, width: int) -> str:
    """A line as a terminal of `width` columns copies it: cut every `width` characters."""
    return "".join(line[i:i + width] + "\n" for i in range(0, len(line), width))


# verl-project/verl#1224's shape: a step line copied from a terminal that wrapped it, mid-number and mid-key
WRAPPED_STEP = ("(TaskRunner pid=3591053) step:1049 - global_seqlen/min:16832.000 - global_seqlen/balanced_max:16845.000 - "
                "actor/entropy_loss:0.001 - critic/vf_loss:0.087 - actor/pg_loss:0.090 - actor/ppo_kl:0.000 - "
                "actor/pg_clipfrac_lower:0.000 - actor/grad_norm:0.629 - response_length/clip_ratio:0.004 - "
                "critic/score/mean:0.104 - critic/values/max:0.62")


def test_a_verl_step_line_a_terminal_wrapped_is_read_whole(tmp_path):
    log = "Training Progress:  21%|██        | 1049/4984 [42:39<129:34:07, 118.54s/it]\n" + _hard_wrap(WRAPPED_STEP, 97)
    index = scan_logs([_log(tmp_path, log)])
    assert index.metrics.series("verl", "global_seqlen/balanced_max")[1][0] == 16845.0  # not 16, cut at the wrap
    assert index.metrics.series("verl", "actor/entropy_loss")[1][0] == 0.001
    assert index.metrics.series("verl", "critic/values/max")[1][0] == 0.62
    assert index.records_per_kind() == {"verl": 1}
    assert index.unparsed_metric_lines == 0


def test_lines_after_a_whole_verl_step_line_are_not_joined_to_it(tmp_path):
    # a narrower line of ` - ` items after a step line that was not wrapped (a different width) is its own
    line = WRAPPED_STEP[:120]
    log = (line + "\n"
           "(TaskRunner pid=3591053) step:1050 - actor/grad_norm:0.5 - critic/score/mean:0.2\n"
           " - actor/grad_norm:99.0 - a note a user typed under it that is wider than the line above, much wider\n")
    index = scan_logs([_log(tmp_path, log)])
    steps, values = index.metrics.series("verl", "actor/grad_norm")
    assert list(steps) == [1050] and list(values) == [0.5]
    assert index.records_per_kind() == {"verl": 2}


def test_verl_metrics_map_onto_canonical_names_with_their_source(tmp_path):
    run = open_file_run(str(_log(tmp_path, VERL_LOG)))
    m = run.metrics
    assert m.get("grad_norm").source == "verl:actor/grad_norm"
    assert m.get("reward").source == "verl:critic/score/mean"
    assert list(m.get("entropy").values) == pytest.approx([0.5921, 0.5877, 0.5801])
    assert m.get("truncated_ratio").key == "response_length/clip_ratio"
    records = m.records()
    assert records["grad_norm"] == {"records": 4, "key": "actor/grad_norm", "kind": "verl",
                                    "source": "log:verl_console"}
    assert run.framework == "verl"


def test_verls_file_logger_records_are_read_under_any_file_name(tmp_path):
    # verl/utils/tracking.py FileLogger writes `{"step": N, "data": {...}}` wherever VERL_FILE_LOGGER_PATH points
    # (agentic-backdoor/agentic-backdoor:rl-log/rl-grpo-qwen3-1.7B-clean.jsonl)
    import json

    from triage.run import open_run

    rows = [{"step": i, "data": {"actor/grad_norm": 0.3 + 0.01 * i, "critic/score/mean": 0.7}} for i in range(1, 6)]
    (tmp_path / "rl-grpo-qwen3-1.7B-clean.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    # a data set's rows beside it name no step, and are not read as metrics
    (tmp_path / "gsm8k-test.jsonl").write_text(json.dumps({"question": "2+2?", "answer": "4"}) + "\n")
    run = open_run(str(tmp_path))
    assert [p.name for p in run.artifacts.metric_jsonl] == ["rl-grpo-qwen3-1.7B-clean.jsonl"]
    grad = run.metrics.get("grad_norm")
    assert grad.source == "jsonl:actor/grad_norm" and list(grad.steps) == [1, 2, 3, 4, 5]


def test_verls_sft_trainer_metrics_are_its_loss_and_grad_norm(tmp_path):
    # verl/trainer/fsdp_sft_trainer.py logs train/loss, train/grad_norm, train/lr through the same
    # `step:N - k:v` console (verl-project/verl#6319: the loss NaN from step 2, the grad norm 0.0)
    log = "".join(
        f"step:{n} - perf/max_memory_allocated_gb:41.29 - train/loss:nan - train/grad_norm:0.0 - train/lr:1e-06 - "
        f"train/global_tokens:{70 + n}\n" for n in (2, 3, 4))
    run = open_file_run(str(_log(tmp_path, log)))
    assert run.metrics.get("loss").source == "verl:train/loss"
    assert run.metrics.get("grad_norm").source == "verl:train/grad_norm"
    assert list(run.metrics.get("lr").values) == pytest.approx([1e-06] * 3)


def test_a_dpo_runs_log_probs_are_read_as_the_policys_log_probs(tmp_path):
    # trl/trainer/dpo_trainer.py logs logps/chosen; NaN there under a loss of 0.0 (hiyouga/LlamaFactory#2078)
    log = ("{'loss': 0.6931, 'learning_rate': 1e-05, 'rewards/chosen': 0.0, 'logps/chosen': -140.5, 'epoch': 0.01}\n"
           "{'loss': 0.0, 'learning_rate': 1e-05, 'rewards/chosen': nan, 'logps/chosen': nan, 'epoch': 0.02}\n")
    s = open_file_run(str(_log(tmp_path, log))).metrics.get("log_probs")
    assert s.source == "hf_log:logps/chosen"
    assert s.values[0] == pytest.approx(-140.5) and math.isnan(s.values[1])


def test_a_callbacks_echo_of_the_trainers_record_is_one_step(tmp_path):
    # LLaMA-Factory's LogCallback logs each record again, rounded, beside the Trainer's own print
    # (llamafactory/train/callbacks.py; hiyouga/LlamaFactory#6286 and #2810): one step, not two
    log = (
        "[INFO|2024-12-08 01:09:59] llamafactory.train.callbacks:157 >> {'loss': 0.0000, 'learning_rate': 4.9985e-05, "
        "'epoch': 0.03}\n"
        "{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 4.998452110450943e-05, 'epoch': 0.03}\n"
        "  1%|█▌        | 80/6249 [09:17<13:46:10,  8.04s/it][INFO|2024-12-08 01:11:13] llamafactory.train.callbacks:157 "
        ">> {'loss': 0.0000, 'learning_rate': 4.9982e-05, 'epoch': 0.04}\n"
        "{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 4.998223113110496e-05, 'epoch': 0.04}\n"
        "03/12/2024 11:24:33 - INFO - llmtuner.extras.callbacks - {'loss': 0.0000, 'learning_rate': 4.9978e-05, "
        "'epoch': 0.05}\n"
        "{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 4.997783305842495e-05, 'epoch': 0.05}\n")
    run = open_file_run(str(_log(tmp_path, log)))
    assert list(run.metrics.get("loss").steps) == [1, 2, 3]
    assert list(run.metrics.get("grad_norm").steps) == [1, 2, 3]
    # records only a logger printed (the Trainer's own print turned off) are steps of their own
    logged = "".join(f"[INFO|2024-12-08 01:1{i}:00] llamafactory.train.callbacks:157 >> {{'loss': 0.0000, "
                     f"'learning_rate': 5e-05, 'epoch': 0.03}}\n" for i in range(3))
    run = open_file_run(str(_log(tmp_path, logged, "logged.log")))
    assert list(run.metrics.get("loss").steps) == [1, 2, 3]


def test_a_record_pasted_without_its_opening_brace_is_read(tmp_path):
    # gensyn-ai/rl-swarm#312: the copy starts at an item of the Trainer's dict; its reward and kl are read
    log = ("'rewards/final_correctness_reward_func/std': 0.0, 'reward': 0.0679, 'reward_std': 0.0104, "
           "'kl': 0.5806, 'epoch': 0.4}\n")
    m = open_file_run(str(_log(tmp_path, log))).metrics
    assert list(m.get("kl").values) == pytest.approx([0.5806])
    assert list(m.get("reward").values) == pytest.approx([0.0679])


# --- TRL / HF Trainer ----------------------------------------------------------------------

# transformers/trainer_callback.py (ProgressCallback.on_log prints the logs dict) for a TRL GRPO run
# (trl/trainer/grpo_trainer.py metric names), printed after a tqdm bar as the console shows it.
TRL_LOG = (
    "  0%|          | 0/100 [00:00<?, ?it/s]\n"
    "{'loss': 0.0, 'grad_norm': 0.8125, 'learning_rate': 1e-06, 'num_tokens': 52190.0, "
    "'completions/mean_length': 187.5, 'completions/clipped_ratio': 0.0, 'rewards/accuracy_reward/mean': 0.25, "
    "'reward': 0.25, 'reward_std': 0.3536, 'frac_reward_zero_std': 0.5, 'kl': 0.0, 'entropy': 0.6631, "
    "'clip_ratio/region_mean': 0.0, 'epoch': 0.01}\n"
    "  1%|          | 1/100 [00:09<15:22,  9.32s/it]{'loss': 0.0003, 'grad_norm': 1.0234, "
    "'learning_rate': 9.9e-07, 'reward': 0.3125, 'reward_std': 0.4014, 'kl': 0.0071, 'entropy': 0.6502, "
    "'epoch': 0.02}\n"
    "[rank0]: {'loss': 0.0001, 'grad_norm': nan, 'learning_rate': 9.8e-07, 'reward': 0.0, 'epoch': 0.03}\n"
    "{'train_runtime': 931.2, 'train_samples_per_second': 0.86, 'train_loss': 0.0002, 'epoch': 1.0}\n"
    "{'loss': 0.2, 'grad_norm': 0.5, 'learning_rate': 1e-06, 'epo\n"  # cut mid-write
)


def test_trl_console_dicts_are_read_safely_and_numbered_in_order(tmp_path):
    index = scan_logs([_log(tmp_path, TRL_LOG)])
    assert index.framework == "hf_trainer"
    steps, values = index.metrics.series("hf_log", "grad_norm")
    # the record cut mid-write at the end keeps its whole items (modelscope/ms-swift#4800's paste ends so)
    assert list(steps) == [1, 2, 3, 4]
    assert values[1] == pytest.approx(1.0234) and math.isnan(values[2]) and values[3] == 0.5
    assert index.metrics.count("hf_log_summary") == 1
    assert index.unparsed_metric_lines == 0
    run = open_file_run(str(tmp_path / "job.log"))
    assert run.metrics.get("frac_reward_zero_std").source == "hf_log:frac_reward_zero_std"
    assert run.metrics.get("clip_ratio").values[0] == 0.0


@pytest.mark.parametrize("cut, expected", [
    # modelscope/ms-swift#4800: a JSON record cut inside a key
    ('{"loss": 0.00544535, "grad_norm": 12.94114975, "learning_rate": 1e-06, "kl": 0.53551398, "epo',
     {"loss": 0.00544535, "grad_norm": 12.94114975, "kl": 0.53551398}),
    # cut inside a string value: the item before it is dropped too
    ("{'loss': 0.1, 'grad_norm': 0.5, 'learning_rate': 1e-06, 'kl': 0.2, 'elapsed_time': '5m",
     {"loss": 0.1, "grad_norm": 0.5, "kl": 0.2}),
])
def test_a_record_cut_at_the_end_of_a_paste_keeps_its_whole_items(tmp_path, cut, expected):
    whole = "{'loss': 0.2, 'grad_norm': 0.4, 'learning_rate': 1e-06, 'kl': 0.0, 'epoch': 0.01}\n"
    index = scan_logs([_log(tmp_path, whole + cut)])
    kind = index.metrics.kinds()[0]
    assert index.metrics.count(kind) == 2 and index.unparsed_metric_lines == 0
    for key, value in expected.items():
        assert index.metrics.series(kind, key)[1][-1] == pytest.approx(value)
    # cut inside the first item: nothing whole to keep, the line stays unparsed
    index = scan_logs([_log(tmp_path, whole + "{'loss': 0.1")])
    assert index.unparsed_metric_lines == 1 and len(index.unparsed_samples) == 1
    # every try failing: still one unparsed line with one sample, not one per try
    index = scan_logs([_log(tmp_path, whole + "{'loss': [1, 'a': 2, 'b': 3, 'c': 4, 'd")])
    assert index.unparsed_metric_lines == 1 and len(index.unparsed_samples) == 1


def test_ms_swifts_first_kl_is_read_by_the_step1_invariants(tmp_path):
    # modelscope/ms-swift#4800: ms-swift's GRPO trainer is TRL's and logs the same `kl`, 0 at the first step
    from probes.step1_invariants import Step1Invariants

    rec = ('[INFO:swift] {{"loss": 0.005, "grad_norm": 12.9, "learning_rate": 1e-06, "reward": 0.4, "kl": {kl}, '
           '"epoch": 0.01, "global_step/max_steps": "{n}/500"}}\n')
    _log(tmp_path, rec.format(kl=0.0, n=1) + rec.format(kl=0.5355, n=2))
    obs = Step1Invariants().examine(open_file_run(str(tmp_path / "job.log")))
    assert obs.outcome == "hold", obs.summary
    _log(tmp_path, rec.format(kl=0.3, n=1))
    assert Step1Invariants().examine(open_file_run(str(tmp_path / "job.log"))).outcome == "kl_nonzero"


def test_a_training_record_with_null_eval_keys_is_a_training_record(tmp_path):
    # hiyouga/LlamaFactory#845: LLaMA-Factory writes `"eval_loss": null` into every training record
    text = "".join(f'{{"loss": {0.05 - i / 100}, "eval_loss": null, "predict_loss": null, "reward": {i / 10}, '
                   f'"learning_rate": 7.3e-06, "epoch": {i / 10}}}\n' for i in range(3))
    text += '{"eval_loss": 0.9, "epoch": 0.3}\n'
    index = scan_logs([_log(tmp_path, text)])
    assert index.metrics.count("hf_log") == 3 and index.metrics.count("hf_log_eval") == 1
    assert list(index.metrics.series("hf_log", "reward")[1]) == pytest.approx([0.0, 0.1, 0.2])


def test_a_printed_config_dict_is_not_a_metric_record(tmp_path):
    index = scan_logs([_log(tmp_path, "{'model': 'Qwen/Qwen2.5-0.5B', 'lora_r': 16, 'bf16': True}\n"
                                      'loaded {"architectures": ["Qwen2ForCausalLM"], "hidden_size": 896}\n')])
    assert index.metrics.empty() and index.unparsed_metric_lines == 0


# --- ms-swift --------------------------------------------------------------------------------

# swift/trainers/mixin.py logs: printed dicts with global_step/max_steps, and the same records in
# output_dir/<version>/logging.jsonl (JSON lines).
SWIFT_LOG = (
    '[INFO:swift] {"loss": 0.01416, "grad_norm": 0.9375, "learning_rate": 1e-06, "memory(GiB)": 41.2, '
    '"train_speed(iter/s)": 0.031, "completions/mean_length": 512.3, "reward": 0.45, "reward_std": 0.31, '
    '"kl": 0.0004, "epoch": 0.01, "global_step/max_steps": "5/500", "percentage": "1.00%"}\n'
    "{'loss': 0.0119, 'grad_norm': 0.875, 'learning_rate': 1e-06, 'reward': 0.5, 'kl': 0.0009, "
    "'epoch': 0.02, 'global_step/max_steps': '10/500', 'elapsed_time': '5m 2s'}\n"
)


def test_ms_swift_json_and_repr_lines_carry_their_global_step(tmp_path):
    index = scan_logs([_log(tmp_path, SWIFT_LOG)])
    assert index.framework == "ms_swift"
    steps, values = index.metrics.series("swift", "reward")
    assert list(steps) == [5, 10] and list(values) == [0.45, 0.5]
    run = open_file_run(str(tmp_path / "job.log"))
    assert run.metrics.get("kl").source == "swift:kl"


# --- OpenRLHF ----------------------------------------------------------------------------------

# openrlhf/trainer/ppo_trainer.py: tqdm's postfix carries the step's status dict.
OPENRLHF_LOG = (
    "Episode [1/1]:   0%|          | 0/40 [00:00<?, ?it/s]\n"
    "Train step of episode 0:  50%|█████     | 1/2 [00:31<00:31, 31.2s/it, policy_loss=-0.0213, kl=0.000412, "
    "reward=0.375, return=0.371, response_length=634, total_length=780, actor_lr=5e-7]\r"
    "Train step of episode 0: 100%|██████████| 2/2 [01:02<00:00, 31.0s/it, policy_loss=-0.0194, kl=0.000531, "
    "reward=0.4375, return=0.43, response_length=640, total_length=790, actor_lr=5e-7]\n"
)


def test_openrlhf_progress_bar_postfix_is_a_metric_record(tmp_path):
    index = scan_logs([_log(tmp_path, OPENRLHF_LOG)])
    assert index.framework == "openrlhf"
    steps, values = index.metrics.series("openrlhf", "reward")
    assert list(steps) == [2] and list(values) == [0.4375]  # the bar rewritten in place: its last state
    run = open_file_run(str(tmp_path / "job.log"))
    assert run.metrics.get("lr").values[0] == pytest.approx(5e-7)
    assert run.metrics.get("response_length").source == "openrlhf:response_length"


def test_another_programs_progress_bar_is_read_but_names_no_framework(tmp_path):
    # a LoRA trainer's bar (Akegarasu/lora-scripts#107): the postfix is every tqdm loop's, not OpenRLHF's sign
    text = "steps:  10%|██████      | 780/7800 [05:04<45:36,  2.57it/s, loss=0.117]epoch 2/10\n"
    index = scan_logs([_log(tmp_path, text)])
    assert index.framework != "openrlhf"
    assert list(index.metrics.series("openrlhf", "loss")[1]) == [0.117]


def _nemo_step(n: int, loss: str, reward: str, kl: str = "0.0006", length: str = "616.4766") -> str:
    """One step of NeMo-RL's GRPO console, as nemo_rl/algorithms/grpo.py prints it (the lines of a real run's
    terminal output, sunbc0120/b200-nemo-rl results/terminal_output_raysubmit_EZUWDiwevHsLiJwV.txt, with its
    worker lines shortened)."""
    return (
        f"\n========================= Step {n}/50 =========================\n"
        "▶ Preparing batch...\n"
        "▶ Generating responses for batch of size 512...\n"
        "\x1b[36m(VllmGenerationWorker pid=588925, ip=10.228.0.122)\x1b[0m INFO 02-26 03:57:45 [gpu_worker.py:142] "
        "Sleep mode freed 97.68 GiB memory, 9.97 GiB memory is still in use.\n"
        "▶ Training policy...\n"
        f"Logged data to /data/nemo-rl-logs/exp_008/train_data_step{n}.jsonl\n"
        "\n📊 Training Results:\n"
        f"  • Loss: {loss}\n"
        f"  • Generation KL Error: {kl}\n"
        f"  • Avg Reward: {reward}\n"
        f"  • Mean Generation Length: {length}\n"
        "\n⏱️  Timing:\n"
        "  • Total step time: 44.74s\n"
        "  • generation: 32.82s (73.4%)\n"
        "\n🔍 Performance Metrics:\n"
        "  • Mean Total Tokens per Sample: 619.48\n"
        "  • Throughputs (per GPU):\n"
        "    - E2E (Samples/sec/gpu): 1.43\n"
    )


NEMO_VALIDATION = (
    "\n📊 Validation Results:\n"
    "    • Accuracy: 0.3047\n"
)


def test_nemo_rls_step_blocks_are_read_at_their_step_and_only_their_results(tmp_path):
    text = ("Final config:\n{'grpo': {'num_prompts_per_step': 32}}\n"
            + _nemo_step(1, "0.0219", "0.3184") + _nemo_step(2, "-0.0042", "0.2656", length="756.4512")
            + NEMO_VALIDATION + _nemo_step(3, "0.0368", "0.2832"))
    index = scan_logs([_log(tmp_path, text)])
    assert index.framework == "nemo_rl"
    assert index.parsed_by[str(tmp_path / "job.log")] == {"nemo_rl_block": 3}
    # the timing and throughput items, and the validation's, are not step metrics
    assert set(index.metrics.keys("nemo_rl")) == {"Loss", "Generation KL Error", "Avg Reward", "Mean Generation Length"}
    run = open_file_run(str(tmp_path / "job.log"))
    loss = run.metrics.get("loss")
    assert (loss.source, list(loss.steps), list(loss.values)) == ("nemo_rl:Loss", [1, 2, 3], [0.0219, -0.0042, 0.0368])
    assert loss.step_word == "step"
    assert list(run.metrics.get("reward").values) == [0.3184, 0.2656, 0.2832]
    # gen_kl_error is KL(P_gen || P_train) (nemo_rl/algorithms/loss/loss_functions.py)
    assert run.metrics.get("train_rollout_kl").source == "nemo_rl:Generation KL Error"
    assert list(run.metrics.get("response_length").values) == [616.4766, 756.4512, 616.4766]


def test_nemo_rl_results_without_a_step_header_are_not_given_one(tmp_path):
    block = _nemo_step(7, "0.01", "0.5")
    text = block[block.index("▶ Training policy"):]  # a paste that starts under the header
    index = scan_logs([_log(tmp_path, text)])
    assert index.metrics.count("nemo_rl") == 0


def test_a_nemo_rl_loss_gone_nan_is_the_runs_non_finite_onset(tmp_path, capsys):
    from triage.cli import main

    steps = [_nemo_step(n, "0.0219" if n < 6 else "nan", "0.31" if n < 6 else "0.0000") for n in range(1, 10)]
    _log(tmp_path, "".join(steps))
    assert main(["run", str(tmp_path / "job.log"), "--json", "--no-cache"]) == 0
    import json

    report = json.loads(capsys.readouterr().out)
    assert report["root_cause"]["id"].startswith("numerics.")
    onset = [f for f in report["path"] if f["probe"] == "nonfinite_onset"]
    assert onset and "step 6" in onset[0]["summary"]


# --- slime stays as it was ---------------------------------------------------------------------

def test_slime_metric_lines_still_go_through_the_slime_grammar(tmp_path):
    text = ("[2026-08-01 10:00:00] model.py:918 - step 0: {'train/loss': 0.1, 'train/grad_norm': 0.5}\n"
            "[2026-08-01 10:00:01] rollout.py:300 - rollout 0: {'rollout/raw_reward': 0.2}\n"
            "[2026-08-01 10:00:02] model.py:918 - step 1: {'train/loss': 0.1, 'train/grad_n\n")
    index = scan_logs([_log(tmp_path, text)])
    assert index.framework == "slime"
    # the record the file ends inside keeps its whole items
    assert index.parsed_by[str(tmp_path / "job.log")] == {"slime_dict": 3}
    assert index.unparsed_metric_lines == 0
    assert list(index.metrics.series("step", "train/loss")[0]) == [0, 1]
    assert list(index.metrics.series("step", "train/grad_norm")[0]) == [0]


def test_a_crash_log_without_metrics_is_recognised_by_its_markers(tmp_path):
    text = ("Traceback (most recent call last):\n"
            '  File "/opt/verl/verl/trainer/main_ppo.py", line 64, in main\n'
            "    run_ppo(config)\n"
            "ValueError: ppo_mini_batch_size 256 must be divisible by ...\n")
    assert scan_logs([_log(tmp_path, text)]).framework == "verl"


def test_a_pasted_trl_config_call_names_the_trainer(tmp_path):
    # huggingface/trl#204 pasted its `PPOConfig(…)` and the error under it
    text = ("config = PPOConfig(\n    model_name=\"small_glm\",\n    learning_rate=1e-5,\n    ppo_epochs=3,\n)\n"
            "RuntimeError: probability tensor contains either `inf`, `nan` or element < 0\n")
    assert scan_logs([_log(tmp_path, text)]).framework == "hf_trainer"


def test_a_command_line_file_names_the_framework_when_the_log_does_not(tmp_path):
    # a pasted error line says nothing of the framework; the command kept beside it does
    (tmp_path / "job.log").write_text("RuntimeError: CUDA error: out of memory\n", encoding="utf-8")
    (tmp_path / "cmdline.txt").write_text(
        "python3 -m verl.trainer.main_ppo trainer.nnodes=1 trainer.n_gpus_per_node=8\n", encoding="utf-8"
    )
    from triage.run import open_run

    assert open_run(str(tmp_path)).framework == "verl"


# --- Megatron's iteration line ------------------------------------------------------------------

# NVIDIA/Megatron-LM megatron/training/training.py (training_log): one line per logged iteration
MEGATRON_LOG = "".join(
    f" [2026-03-03 16:38:{30 + i:02d}] iteration {i:8d}/     624 | consumed samples: {128 * i:12d} | elapsed time per "
    f"iteration (ms): 3988.6 | learning rate: 9.999746E-07 | global batch size:   128 | lm loss: {2.5 - 0.1 * i:.6E} | "
    f"loss scale: 1.0 | grad norm: {0.5 + 0.01 * i:.3f} | number of skipped iterations:   0 | number of nan iterations:   0 |\n"
    for i in range(1, 4))
# ms-swift's Megatron backend adds its GRPO metrics to the same line (modelscope/ms-swift#8173)
SWIFT_MEGATRON_LOG = (
    " [2026-03-03 16:38:36] iteration        2/     624 | consumed samples:          256 | elapsed time per iteration "
    "(ms): 3988.6 | memory(GiB): 83.46 | elapsed time: 3m 8s | remaining time: 16h 12m 43s | learning rate: "
    "9.999746E-07 | global batch size:   128 | loss: -2.529132E-02 | kl: 1.107648E-02 | reward: 7.636719E-01 | "
    "reward_std: 5.223095E-01 | frac_reward_zero_std: 6.250000E-02 | grad norm: 75.173 |\n"
)


def test_megatrons_iteration_line_is_a_metric_record(tmp_path):
    index = scan_logs([_log(tmp_path, MEGATRON_LOG)])
    assert index.framework == "megatron"
    run = open_file_run(str(tmp_path / "job.log"))
    g = run.metrics.get("grad_norm")
    assert g.source == "megatron:grad norm" and list(g.steps) == [1, 2, 3]
    assert list(g.values) == pytest.approx([0.51, 0.52, 0.53])
    assert run.metrics.get("loss").values[0] == pytest.approx(2.4)
    assert run.metrics.get("lr").values[0] == pytest.approx(9.999746e-07)


# NeMo 2.0's progress printer (nemo/lightning/pytorch/callbacks/progress_printer.py): the iteration restarts each
# epoch, global_step does not (NVIDIA-BioNeMo/bionemo-recipes#740 pasted such lines; NeMo's own docs show the epoch turn)
NEMO_PROGRESS = (
    "Training epoch 0, iteration 18/19 | lr: 2.849e-06 | consumed_samples: 9728 | global_batch_size: 512 | "
    "global_step: 18 | reduced_train_loss: 11.03 | train_step_timing in s: 46.9\n"
    "(pretraining, pid=4112) Training epoch 1, iteration 0/999 | lr: 2.999e-06 | global_batch_size: 512 | "
    "global_step: 19 | reduced_train_loss: 10.98 | train_step_timing in s: 46.86 | consumed_samples: 10240\n"
    "Training epoch 1, iteration 1/999 | lr: 3.1e-06 | global_batch_size: 512 | global_st\n")


def test_nemos_progress_line_is_a_metric_record_stepped_by_its_global_step(tmp_path):
    index = scan_logs([_log(tmp_path, NEMO_PROGRESS)])
    assert index.framework == "megatron"
    run = open_file_run(str(tmp_path / "job.log"))
    loss = run.metrics.get("loss")
    assert loss.source == "megatron:reduced_train_loss" and list(loss.steps) == [18, 19]  # the cut third line adds none
    assert list(loss.values) == pytest.approx([11.03, 10.98])
    assert run.metrics.get("lr").values[1] == pytest.approx(2.999e-06)


def test_gpt_neoxs_iteration_line_gives_its_lm_loss(tmp_path):
    # EleutherAI/gpt-neox#947: GPT-NeoX's training_log writes `lm_loss`
    _log(tmp_path, "samples/sec: 1.702 | iteration        1/   55000 | elapsed time per iteration (ms): 18806.7 | "
                   "learning rate: 1.212E-09 | approx flops per GPU: 5.7TFLOPS | lm_loss: 2.275809E+00 | number of "
                   "skipped iterations:   0 | number of nan iterations:   0 |\n")
    loss = open_file_run(str(tmp_path / "job.log")).metrics.get("loss")
    assert loss.source == "megatron:lm_loss" and loss.values[0] == pytest.approx(2.275809)


def test_ms_swifts_megatron_backend_line_is_read_with_its_grpo_metrics(tmp_path):
    index = scan_logs([_log(tmp_path, SWIFT_MEGATRON_LOG)])
    assert index.framework == "ms_swift"
    run = open_file_run(str(tmp_path / "job.log"))
    assert run.metrics.get("reward").values[0] == pytest.approx(0.7636719)
    assert run.metrics.get("frac_reward_zero_std").values[0] == pytest.approx(0.0625)
    assert run.metrics.get("grad_norm").values[0] == pytest.approx(75.173)
    keys = set(index.metrics.keys("megatron"))
    assert "elapsed time" not in keys and "remaining time" not in keys  # `3m 8s` is not a number
    assert "memory(GiB)" in keys


def test_every_adapter_wording_is_read_by_the_signature_probe_to_its_id():
    from probes.error_signatures import WORDING_OUTCOMES, adapter_signatures, load_signatures

    crash = yaml.safe_load((HERE.parent / "playbooks" / "crash.yaml").read_text())
    node = crash["nodes"]["signature"]
    edges = node.get("on", node.get(True))  # (YAML 1.1 reads a bare `on` key as true)
    for name, wording in frameworks.error_wordings():
        outcome = WORDING_OUTCOMES[wording.verdict]
        target = edges[outcome]
        # straight to the id, or (an OOM) to the playbook that places it
        if target in crash["nodes"]:  # a node of its own (the batch arithmetic) that decides the id on every edge
            inner = crash["nodes"][target]
            target = set((inner.get("on") or inner.get(True)).values())
            assert target == {f"verdict:{wording.verdict}"}, (name, wording.verdict, target)
            continue
        assert target == f"verdict:{wording.verdict}" or target.startswith("playbook:"), (name, wording.verdict, target)
    adapters = adapter_signatures()
    assert len(adapters) == len(frameworks.error_wordings())
    assert set(adapters) <= set(load_signatures())


def test_a_wording_only_an_adapter_knows_decides(tmp_path):
    # verl-project/verl#5954: Ray counts GPUs as floats
    from triage.api import triage

    (tmp_path / "job.log").write_text(
        "ValueError: Total available GPUs 7.0 is less than total desired GPUs 8\n", encoding="utf-8")
    report = triage(str(tmp_path))
    assert report.root_cause.id == "sched.insufficient_gpus"
    step = next(s for s in report.path if s.probe == "error_signatures")
    assert step.outcome == "insufficient_gpus"
    assert step.evidence["signature"] == "verl:sched.insufficient_gpus"


def test_an_older_megatron_line_without_consumed_samples_is_read(tmp_path):
    # NVIDIA/Megatron-LM#60 (2021): fp16 loss-scale warm-up, no `consumed samples:` column yet
    old = "".join(
        f" iteration        {i}/  120000 | elapsed time per iteration (ms): 16491.5 | learning rate: 0.000E+00 | "
        f"loss scale: {2 ** (32 - i):.1f} | number of skipped iterations:   {i} | number of nan iterations:   0 |\n"
        for i in range(1, 4))
    index = scan_logs([_log(tmp_path, old)])
    assert index.framework == "megatron"
    steps, scales = index.metrics.series("megatron", "loss scale")
    assert list(steps) == [1, 2, 3] and list(scales) == [2.0 ** 31, 2.0 ** 30, 2.0 ** 29]


def test_megatrons_first_lines_without_colons_are_read(tmp_path):
    # NVIDIA/Megatron-LM#5 (2019): `learning rate 1.010E-06 | lm loss 1.020020E+01 |`, no colon after the name
    old = "".join(
        f" iteration      {i}00/   20000 | elapsed time per iteration (ms): 334.9 | learning rate 1.010E-06 | "
        f"lm loss {10.2 - i / 10:.6E} | nsp loss 5.515259E-01 |\n" for i in range(1, 4))
    index = scan_logs([_log(tmp_path, old)])
    steps, loss = index.metrics.series("megatron", "lm loss")
    assert list(steps) == [100, 200, 300] and list(loss) == pytest.approx([10.1, 10.0, 9.9])
    assert index.metrics.series("megatron", "elapsed time per iteration (ms)")[1][0] == 334.9


@pytest.mark.parametrize("line, text, level, ts", [
    # transformers' examples' logging format (huggingface/open-r1#543)
    ("[INFO|trainer.py:746] 2025-03-26 05:53:13,046 >> Using auto half precision backend",
     "Using auto half precision backend", "INFO", "2025-03-26 05:53:13.046"),
    # Python logging's `%(asctime)s - %(levelname)s - %(name)s - %(message)s` (TRL's and open-r1's scripts)
    ("2025-03-26 05:53:15 - WARNING - trl.extras.vllm_client - Server is not up yet.",
     "Server is not up yet.", "WARNING", "2025-03-26 05:53:15"),
    # LLaMA-Factory's (src/llamafactory/extras/logging.py)
    ("[INFO|2025-03-26 05:53:13] llamafactory.cli:12 >> Initializing", "Initializing", "INFO", "2025-03-26 05:53:13"),
])
def test_python_logging_formats_of_the_hf_stack_give_their_time_and_level(line, text, level, ts):
    from triage.formats.slime_log import split_line

    parsed = split_line(line)
    assert (parsed.text, parsed.level, parsed.timestamp) == (text, level, ts)


def test_trls_vllm_server_access_lines_are_a_trl_run(tmp_path):
    # huggingface/trl#3214 pasted only `trl vllm-serve`'s uvicorn access lines: triaged, not refused
    from triage.api import triage

    (tmp_path / "job.log").write_text(
        'INFO:     127.0.0.1:56516 - "POST /update_named_param/ HTTP/1.1" 200 OK\n' * 3
        + 'INFO:     127.0.0.1:48320 - "POST /close_communicator/ HTTP/1.1" 200 OK\n', encoding="utf-8")
    report = triage(str(tmp_path))
    assert report.run.framework == "hf_trainer" and report.root_cause.id == "inconclusive"


def test_a_progress_bar_cut_at_the_terminals_width_keeps_its_whole_values():
    # OpenRLHF/OpenRLHF#762: the bar lost its closing `]`, and its last value may have lost digits
    from triage.formats.metric_lines import parse_framework_metric

    rec = parse_framework_metric("Train epoch [1/1]:  11%|█ | 28/256 [01:16<05:31,  1.45s/it, pg=0.164, rm=0.0908, "
                                 "glen=518, tlen=914, kl=0")
    assert rec.index == 28 and rec.values == {"pg": 0.164, "rm": 0.0908, "glen": 518.0, "tlen": 914.0}


@pytest.mark.parametrize("text, framework", [
    ("Training Progress:   0%|          | 0/125 [04:45<?, ?it/s]", "verl"),  # verl-project/verl#3464
    ("Error executing job with overrides: ['algorithm.adv_estimator=grpo', 'trainer.total_epochs=1']", "verl"),
    ("(main_task pid=1748945) Unhandled error", "verl"),
    ("-- python3 /workspace/OpenRLHF/examples/train_ppo_ray.py --ref_num_nodes 1 --actor_num_gpus_per_node 4", "openrlhf"),
    ("UserWarning: KL divergence is starting to become negative: -2.44 - this might be a precursor for failed "
     "training.", "trl"),  # huggingface/trl#1857
    # frames and commands alone (huggingface/trl#3455, verl-project/verl#3450, modelscope/ms-swift#5019)
    ('File "/usr/local/lib/python3.11/site-packages/trl/scripts/grpo.py", line 104, in main', "trl"),
    ('File "/opt/tiger/myverl/verl/utils/reward_score/__init__.py", line 106, in default_compute_score', "verl"),
    ("CUDA_VISIBLE_DEVICES=0 swift export \\", "ms_swift"),
    ("CUDA_VISIBLE_DEVICES=0,1 swift rollout \\", "ms_swift"),  # modelscope/ms-swift#7200
    # TRL's client waiting for its vLLM server, under Python logging's default-like format (huggingface/open-r1#543)
    ("2025-03-26 05:53:13 - INFO - trl.extras.vllm_client - Server is not up yet. Retrying in 2.0 seconds...", "trl"),
    ("NPROC_PER_NODE=8 megatron rlhf --rlhf_type grpo \\", "ms_swift"),  # modelscope/ms-swift#8017
    ("[INFO:swift] Memory cleanup attempt 1: Freed 0.00 GB reserved", "ms_swift"),  # modelscope/ms-swift#6962
    # verl's environment report (scripts/diagnose.py) and its vLLM server actor (verl-project/verl#7416, #6608)
    ("----------verl Info-----------\nVersion      : 0.9.0", "verl"),
    ("(vLLMHttpServer pid=3847687) (Worker_TP1 pid=3849557) ERROR 06-04 22:25:57 [multiproc_executor.py:932] x", "verl"),
    # the Trainer's log_metrics block alone (hiyouga/LlamaFactory#4278)
    ("***** train metrics *****\n  epoch                    =        3.0\n  train_loss               =        0.0", "trl"),
    # NeMo-RL's step block and its entry points (nemo_rl/algorithms/grpo.py; NVIDIA-NeMo/RL README)
    ("📊 Training Results:\n  • Loss: 0.0219\n  • Generation KL Error: 0.0006", "nemo_rl"),
    ("uv run python examples/run_grpo.py --config examples/configs/grpo_math_1B.yaml", "nemo_rl"),
])
def test_each_frameworks_field_markers_name_it(text, framework):
    assert frameworks.detect(text).name == framework


@pytest.mark.parametrize("text, member", [
    # NVIDIA/TransformerEngine#2286: a miles job's traceback, every framework frame under miles/
    ('File "/host_home/primary_synced/miles/miles/backends/megatron_utils/actor.py", line 259, in train', "miles"),
    ('File "/root/slime/slime/backends/megatron_utils/actor.py", line 259, in train', "slime"),
    ("2026-08-01 10:00:00 | INFO     | relax.components.trainer:88 - step 1", "relax"),
    ("(MegatronTrainRayActor pid=12) [2026-08-01 10:00:00] actor.py:1 - Finish rollout", "slime"),  # no package named
    # a checkout named as the project spells itself (redai-studio/Relax#44's launch script)
    ("(MegatronTrainRayActor pid=12) export MODEL_CONFIG_DIR=${MODEL_DIR}/Relax/scripts/models", "relax"),
])
def test_a_family_adapter_names_the_member_its_paths_name(tmp_path, text, member):
    from triage.formats.slime_log import scan_logs

    log = tmp_path / "job.log"
    log.write_text(f"Traceback (most recent call last):\n  {text}\nRuntimeError: boom\n", encoding="utf-8")
    assert frameworks.registry()["slime"].member(text) == member
    assert scan_logs([log]).framework == member


def test_the_hf_trainers_dicts_under_axolotls_logger_are_an_axolotl_run(tmp_path):
    # axolotl-ai-cloud/axolotl#1613: the HF Trainer's printed dicts, axolotl's logger around them
    from triage.formats.slime_log import scan_logs

    log = tmp_path / "job.log"
    log.write_text("[2024-05-13 14:40:01,000] [INFO] [axolotl.train.train:170] [PID:123985] [RANK:0] Starting trainer...\n"
                   "{'loss': 1.25, 'grad_norm': 0.5, 'learning_rate': 2e-05, 'epoch': 0.1}\n"
                   "[2024-05-13 14:47:28,053] [INFO] [axolotl.train.log:61] [PID:123985] [RANK:0] Training Completed!!!\n",
                   encoding="utf-8")
    assert scan_logs([log]).framework == "axolotl"
    log.write_text("{'loss': 1.25, 'grad_norm': 0.5, 'learning_rate': 2e-05, 'epoch': 0.1}\n", encoding="utf-8")
    assert scan_logs([log]).framework == "hf_trainer"


def test_an_ms_swift_run_keeps_its_name_whatever_its_paths_say(tmp_path):
    # modelscope/ms-swift#3420's frames are under site-packages/swift/: the run is still `ms_swift`
    from triage.formats.slime_log import scan_logs

    log = tmp_path / "job.log"
    log.write_text("[rank0]: Traceback (most recent call last):\n"
                   '[rank0]:   File "/usr/local/lib/python3.10/site-packages/swift/cli/rlhf.py", line 5, in <module>\n'
                   "[rank0]:     rlhf_main()\n[rank0]: RuntimeError: boom\n", encoding="utf-8")
    assert scan_logs([log]).framework == "ms_swift"


def test_ms_swifts_dicts_before_global_step_are_its_own_records():
    # modelscope/ms-swift#1208: speed and memory in every record, no `global_step/max_steps` yet
    from triage.formats.metric_lines import parse_framework_metric

    rec = parse_framework_metric("{'loss': 6.52929688, 'acc': 0.1, 'learning_rate': 1e-05, 'epoch': 0.01, "
                                 "'memory(GiB)': 10.31, 'train_speed(iter/s)': 0.01689}")
    assert rec is not None and rec.grammar == "swift_json" and rec.values["loss"] == 6.52929688


def test_an_adapter_that_cannot_be_imported_is_skipped_and_the_others_read(tmp_path, monkeypatch, capsys):
    """An installed package's entry points naming a module the checkout lacks (or a plugin's own import error) cost
    that adapter only, with a warning naming it, not every triage."""
    from importlib import metadata

    real = metadata.entry_points

    def entry_points(group=None, **kw):
        found = list(real(group=group, **kw))
        if group == frameworks.ENTRY_POINT_GROUP:
            found.append(metadata.EntryPoint("gone", "triage.frameworks.no_such_module:FRAMEWORK", group))
        return found

    import json

    from triage.cli import main

    monkeypatch.setattr(metadata, "entry_points", entry_points)
    frameworks.registry.cache_clear()
    try:
        rc = main(["run", str(_log(tmp_path, VERL_LOG)), "--json", "--no-cache"])
        reg = frameworks.registry()
    finally:
        frameworks.registry.cache_clear()
    captured = capsys.readouterr()
    assert rc in (0, 3) and json.loads(captured.out)["run"]["framework"] == "verl"
    assert FRAMEWORK_NAMES <= set(reg) and "gone" not in reg
    assert "framework_adapter_skipped" in captured.err and "no_such_module" in captured.err


def test_a_megatron_record_broken_after_its_bars_is_read_whole(tmp_path):
    # NVIDIA-NeMo/Megatron-Bridge#5306 as pasted: one training_log line over four lines, each ending on a bar
    log = ("iteration 5/50 | elapsed time per iteration: 21392.5 ms |\n"
           "learning rate: 1.350000E-04 | global batch size: 4096 |\n"
           "loss scale: 1.0 | grad norm: nan |\n"
           "number of skipped iterations: 0 | number of nan iterations: 0\n"
           "\n"
           "iteration 6/50 | elapsed time per iteration: 21313.4 ms | lm loss: 2.5 | grad norm: 1.2 |\n"
           "[rank0]: some other line: 3 |\n")
    index = scan_logs([_log(tmp_path, log)])
    steps, values = index.metrics.series("megatron", "grad norm")
    assert list(steps) == [5, 6] and math.isnan(values[0]) and values[1] == 1.2
    assert index.metrics.series("megatron", "learning rate")[1][0] == 1.35e-04
    assert index.metrics.series("megatron", "lm loss")[1].tolist() == [2.5]  # the rank's line is no item of step 6
    assert index.unparsed_metric_lines == 0


def test_verls_sft_steps_after_their_progress_bars_are_each_a_record(tmp_path):
    # verl's fsdp_sft_trainer prints each step right after the bar, on its line: long lines, one record each, none a
    # wrapped continuation of the one before
    log = "".join(f"Epoch 2/2:  9{i}%|█████████▋| 12{i}/125 [12:2{i}<00:24,  6.06s/it]step:24{i} - "
                  f"train/loss:0.59{i}6565737724304 - train/lr(1e-3):4.385849505708084e-06\n" for i in range(5))
    index = scan_logs([_log(tmp_path, log)])
    steps, _values = index.metrics.series("verl", "train/loss")
    assert list(steps) == [240, 241, 242, 243, 244]
