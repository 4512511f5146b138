"""A run's arguments: Megatron's printed block, command lines, the manifest, merged."""

from __future__ import annotations

import math

import pytest
import yaml

from triage.errors import CorruptArtifact
from triage.formats.run_args import (
    RunArgs,
    convert_value,
    normalise_name,
    parse_arguments_block,
    parse_command_line,
)
from triage.run import open_run


def test_normalise_name():
    assert normalise_name("--max-tokens-per-gpu") == "max_tokens_per_gpu"
    assert normalise_name("max_tokens_per_gpu") == "max_tokens_per_gpu"
    assert normalise_name(" -lr ") == "lr"


def test_megatron_printed_values_are_typed():
    block = parse_arguments_block({
        "load": "None", "bf16": "True", "fp16": "False", "tensor_model_parallel_size": "8", "lr": "1e-06",
        "rollout_stop_token_ids": "[151643, 151645]", "attention_backend": "AttnBackend.flash",
        "moe_router_dtype": "<RouterDtype.fp32: 'fp32'>", "params_dtype": "torch.bfloat16", "hf_checkpoint": "/root/Qwen3-4B",
        "precision": "bf16", "weight_decay": "0.1", "min_lr": "-inf", "data_path": "['/data/a.jsonl', 'b']",
        "model_name": "Qwen2.5-0.5B", "config": "Reward.py",
    })
    assert block == {
        "load": None, "bf16": True, "fp16": False, "tensor_model_parallel_size": 8, "lr": 1e-06,
        "rollout_stop_token_ids": [151643, 151645], "attention_backend": "flash", "moe_router_dtype": "fp32",
        "params_dtype": "torch.bfloat16", "hf_checkpoint": "/root/Qwen3-4B", "precision": "bf16", "weight_decay": 0.1,
        "min_lr": -math.inf, "data_path": ["/data/a.jsonl", "b"], "model_name": "Qwen2.5-0.5B", "config": "Reward.py",
    }
    assert isinstance(block["tensor_model_parallel_size"], int)


def test_unparseable_list_stays_a_string():
    assert convert_value("[1, 2") == "[1, 2"
    assert convert_value("(lambda: 1)") == "(lambda: 1)"


def test_slime_script_command_line():
    cmd = r"""CUDA_DEVICE_MAX_CONNECTIONS=1 PYTHONPATH=/root/Megatron-LM python3 train.py \
   --actor-num-nodes 1 \
   --actor-num-gpus-per-node 8 \
   --colocate \
   --hf-checkpoint ${MODEL_DIR}/Qwen3-4B \
   --rollout-stop-token-ids 151643 151645 \
   --lr=1e-6 \
   --rollout-temperature 0.8 \
   --eps-clip -0.2 \
   --rollout-stop '</answer>' '<|im_end|>' \
   --use-kl-loss
"""
    args = parse_command_line(cmd)
    assert args == {
        "actor_num_nodes": 1, "actor_num_gpus_per_node": 8, "colocate": True,
        "hf_checkpoint": "${MODEL_DIR}/Qwen3-4B", "rollout_stop_token_ids": [151643, 151645], "lr": 1e-6,
        "rollout_temperature": 0.8, "eps_clip": -0.2, "rollout_stop": ["</answer>", "<|im_end|>"], "use_kl_loss": True,
    }


def test_ray_job_submit_entrypoint():
    cmd = ("ray job submit --address=http://127.0.0.1:8265 --runtime-env-json='{\"env_vars\": {\"A\": \"1\"}}' "
           "-- python3 train_async.py --actor-num-nodes 2 --debug-rollout-only")
    assert parse_command_line(cmd) == {"actor_num_nodes": 2, "debug_rollout_only": True}


def test_continuations_a_copy_flattened_or_left_at_the_end_are_breaks_not_values():
    # modelscope/ms-swift#3771: `--eval_steps 1000 \ --save_steps 1000 \` on one line; a paste ending in `\`
    cmd = "swift rlhf --eval_steps 1000 \\ --save_steps 1000 \\ --learning_rate 1e-6 \\ --save_total_limit 2 \\"
    assert parse_command_line(cmd) == {"eval_steps": 1000, "save_steps": 1000, "learning_rate": 1e-6,
                                       "save_total_limit": 2}
    assert parse_command_line("python3 train.py --lr 1e-6 \\") == {"lr": 1e-6}
    assert parse_command_line("python3 train.py --name a\\ b --x 1") == {"name": "a b", "x": 1}  # an escaped space


def test_module_launchers_quoted_commands_and_repeats():
    assert parse_command_line("python -m slime.train --lr 1e-5 --lr 2e-5") == {"lr": 2e-5}  # argparse keeps the last
    assert parse_command_line("torchrun --nproc-per-node 8 train.py --tp 2") == {"tp": 2}
    assert parse_command_line("bash -c 'python3 train.py --seed 3'") == {"seed": 3}
    assert parse_command_line("--rollout-batch-size 32 --colocate") == {"rollout_batch_size": 32, "colocate": True}
    hooks = parse_command_line("python3 train.py --rollout-sample-hook-path a.h --rollout-sample-hook-path b.h")
    assert hooks == {"rollout_sample_hook_path": ["a.h", "b.h"]}  # declared with action="append"
    assert parse_command_line("python3 train.py --prompt \"it's") == {"prompt": "\"it's"}  # unbalanced quote
    # a launcher's switch that its script is a module (deepspeed/launcher/runner.py `--module`, torchrun's `-m`), with
    # or without launcher options between it and the module (OpenRLHF's examples run `deepspeed --module …`)
    assert parse_command_line("deepspeed --module openrlhf.cli.train_sft --max_len 2048") == {"max_len": 2048}
    assert parse_command_line("deepspeed --module --num_gpus 8 openrlhf.cli.train_sft --max_len 2048") == {"max_len": 2048}
    assert parse_command_line("torchrun --nproc_per_node 8 -m train --lr 1") == {"lr": 1}


def test_run_args_mapping():
    args = RunArgs({"max-tokens-per-gpu": 9216, "colocate": True}, {"max-tokens-per-gpu": "command_line"})
    assert args.get("--max-tokens-per-gpu") == 9216 and args["max_tokens_per_gpu"] == 9216
    assert args.has("colocate") and "colocate" in args and not args.has("lr")
    assert args.get("lr", 1e-6) == 1e-6
    assert args.source_of("max_tokens_per_gpu") == "command_line" and args.source_of("colocate") is None
    assert args.source_of("lr") is None
    assert bool(args) and not RunArgs()
    assert sorted(args) == ["colocate", "max_tokens_per_gpu"] and len(args) == 2
    with pytest.raises(TypeError):
        args["lr"] = 1  # type: ignore[index]
    snapshot = args.as_dict()
    snapshot["lr"] = 1
    assert not args.has("lr")


LOG = "\n".join([
    "+ ray job submit -- python3 train.py --actor-num-nodes 1 --lr 2e-6 --load /ckpt",
    "(MegatronTrainRayActor pid=1) ------------------------ arguments ------------------------",
    "(MegatronTrainRayActor pid=1)   actor_num_nodes ................................. 1",
    "(MegatronTrainRayActor pid=1)   load ............................................ /ckpt",
    "(MegatronTrainRayActor pid=1)   lr .............................................. 1e-06",
    "(MegatronTrainRayActor pid=1)   max_tokens_per_gpu .............................. 4096",
    "(MegatronTrainRayActor pid=1)   use_dynamic_batch_size .......................... False",
    "(MegatronTrainRayActor pid=1) -------------------- end of arguments ---------------------",
]) + "\n"


def make_run(tmp_path, log=None, cmdline=None, manifest=None):
    root = tmp_path / "run"
    root.mkdir(parents=True)
    if log is not None:
        (root / "driver.log").write_text(log)
    if cmdline is not None:
        (root / "cmdline.txt").write_text(cmdline)
    if manifest is not None:
        (root / "triage.yaml").write_text(yaml.safe_dump(manifest))
    return open_run(str(root))


def test_sources_merge_lowest_priority_first(tmp_path):
    run = make_run(tmp_path, LOG, cmdline="python3 train.py --max-tokens-per-gpu 8192 --dump-details /dumps \\\n --colocate",
                   manifest={"args": {"colocate": False}})
    args = run.args
    # block < log command line < cmdline.txt < manifest
    assert args.get("use_dynamic_batch_size") is False and args.source_of("use_dynamic_batch_size") == "arguments_block"
    assert args.get("lr") == 2e-6 and args.source_of("lr") == "command_line"
    assert args.get("max_tokens_per_gpu") == 8192 and args.source_of("max_tokens_per_gpu") == "command_line"
    assert args.get("colocate") is False and args.source_of("colocate") == "manifest"
    # what slime derives from --dump-details
    assert args.get("save_debug_rollout_data") == "/dumps/rollout_data/{rollout_id}.pt"
    assert args.get("save_debug_train_data") == "/dumps/train_data/{rollout_id}.pt"
    assert args.source_of("save_debug_rollout_data") == "derived"


def test_block_alone_and_load_debug_rollout_data(tmp_path):
    run = make_run(tmp_path, LOG.replace("--load /ckpt", "--load-debug-rollout-data /d/{rollout_id}.pt"))
    assert run.args.get("max_tokens_per_gpu") == 4096
    assert run.args.get("debug_train_only") is True and run.args.source_of("debug_train_only") == "derived"


def test_explicit_rollout_dump_template_is_kept(tmp_path):
    run = make_run(tmp_path, cmdline="python3 train.py --dump-details /d --save-debug-rollout-data /x/{rollout_id}.pt")
    assert run.args.get("save_debug_rollout_data") == "/x/{rollout_id}.pt"


def test_manifest_command_and_no_args(tmp_path):
    run = make_run(tmp_path, log="[2026-08-01 10:00:00] a.py:1 - hello\n",
                   manifest={"command": "python3 train.py --seed 7"})
    assert run.args.get("seed") == 7 and run.args.source_of("seed") == "command_line"
    empty = make_run(tmp_path / "x", log="[2026-08-01 10:00:00] a.py:1 - hello\n")
    assert not empty.args


def test_binary_command_file_is_a_corrupt_artifact(tmp_path):
    run = make_run(tmp_path, log="hello\n")
    (run.root / "cmdline.txt").write_bytes(b"\x00\x01python")
    run.artifacts.command_line = run.root / "cmdline.txt"
    with pytest.raises(CorruptArtifact, match="command line file is binary"):
        run.args  # noqa: B018


def test_command_ends_at_shell_operators_but_not_at_stop_strings():
    assert parse_command_line("python3 train.py --tp 2 2>&1 | tee train.log") == {"tp": 2}
    assert parse_command_line("cd /root && python3 train.py --seed 1 > out.log; echo done") == {"seed": 1}
    stops = parse_command_line("python3 train.py --rollout-stop '<|im_end|>' '</answer>' --n 1")
    assert stops == {"rollout_stop": ["<|im_end|>", "</answer>"], "n": 1}


def test_a_cli_command_pasted_among_log_lines_gives_the_runs_arguments(tmp_path):
    # modelscope/ms-swift#5890 pasted its package list, its `swift rlhf` command and its log in one block
    from triage.run import open_run

    (tmp_path / "job.log").write_text(
        "deepspeed                                0.15.4\n"
        "transformers                             4.55.2\n"
        "NPROC_PER_NODE=8 \\\n"
        "swift rlhf \\\n"
        "    --rlhf_type grpo \\\n"
        "    --num_generations 8 \\\n"
        "    --per_device_train_batch_size 4\n"
        '{"loss": -0.0, "grad_norm": 0.0, "reward": 0.7, "global_step/max_steps": "1/100"}\n',
        encoding="utf-8")
    run = open_run(str(tmp_path))
    assert run.args.get("num_generations") == 8 and run.args.get("rlhf_type") == "grpo"
    assert run.args.source_of("num_generations") == "command_line"


def test_a_package_list_row_is_not_a_launch_command(tmp_path):
    from triage.formats.pasted_command import pasted_command

    log = tmp_path / "job.log"
    log.write_text("deepspeed                                0.15.4\naccelerate 1.2.0\ntorchrun\n", encoding="utf-8")
    assert pasted_command([log.read_text(encoding="utf-8")]) is None


# Hydra's report when a verl job raises (hydra/_internal/utils.py run_and_report), as pasted in
# verl-project/verl#1191: the run's overrides, the list cut where the paste ends
HYDRA_REPORT = ("Error executing job with overrides: ['algorithm.adv_estimator=grpo', 'data.train_batch_size=16', "
                "'actor_rollout_ref.actor.ppo_mini_batch_size=32', 'actor_rollout_ref.rollout.n=16', "
                "'~reward_model', 'trainer.cr")


def test_hydras_error_report_gives_the_runs_overrides(tmp_path):
    (tmp_path / "job.log").write_text(HYDRA_REPORT + "\nTraceback (most recent call last):\n", encoding="utf-8")
    args = open_run(str(tmp_path)).args
    assert args.get("data.train_batch_size") == 16
    assert args.get("actor_rollout_ref.rollout.n") == 16
    assert args.get("algorithm.adv_estimator") == "grpo"
    assert args.source_of("data.train_batch_size") == "hydra_overrides"
    assert not args.has("trainer.cr") and not args.has("reward_model")  # cut off; a deletion sets nothing


def test_an_override_that_spans_a_capped_lines_cut_is_dropped():
    from triage.formats.hydra_overrides import overrides_in_error_report

    capped = "Error executing job with overrides: ['a.b=1', 'c.d=2 … e.f=3', 'g.h=4']"
    assert overrides_in_error_report(capped) == {"a.b": 1, "g.h": 4}
    assert overrides_in_error_report("Error executing job with overrides: []") == {}
    assert overrides_in_error_report("no report here") == {}


def test_a_command_line_outranks_hydras_report(tmp_path):
    (tmp_path / "job.log").write_text(HYDRA_REPORT + "\n", encoding="utf-8")
    (tmp_path / "cmdline.txt").write_text("python3 -m verl.trainer.main_ppo data.train_batch_size=64\n", encoding="utf-8")
    assert open_run(str(tmp_path)).args.get("data.train_batch_size") == 64


def test_a_pasted_list_of_flags_is_the_runs_arguments(tmp_path):
    # NVIDIA/Megatron-LM#1469 pasted its arguments one per line, with no command above them
    from triage.formats.pasted_command import pasted_flag_block

    (tmp_path / "job.log").write_text("my args:\n--lr 4.2e-4\n--min-lr 4.2e-5\n--lr-decay-style cosine\n--bf16\n\nthen it hangs\n",
                                      encoding="utf-8")
    args = open_run(str(tmp_path)).args
    assert args.get("lr") == 4.2e-4 and args.get("lr_decay_style") == "cosine" and args.get("bf16") is True
    assert pasted_flag_block(["use --lr 1 or --bf16 here\n--x 1\n"]) is None  # flags in prose, or fewer than three lines


def test_a_pasted_yaml_config_is_the_runs_arguments(tmp_path):
    # huggingface/trl#3347 pasted its recipe's YAML
    (tmp_path / "job.log").write_text(
        "# GRPO trainer config\nbf16: true\nuse_vllm: true\nlearning_rate: 1.0e-06\nnum_generations: 7\n"
        "per_device_train_batch_size: 2\ngradient_accumulation_steps: 16\nmax_completion_length: 3000\n",
        encoding="utf-8")
    args = open_run(str(tmp_path)).args
    assert args.get("num_generations") == 7 and args.get("max_completion_length") == 3000
    assert args.source_of("num_generations") == "config_file"


@pytest.mark.parametrize("tail", [
    "per_device_train_batch\n",  # cut in its last key (huggingface/open-r1#436)
    "[rank4]: AssertionError: Reward model is not correctly loaded.\n",  # the error under it (hiyouga/LlamaFactory#7706)
])
def test_a_pasted_yaml_config_cut_or_amid_log_lines_keeps_its_whole_lines(tmp_path, tail):
    (tmp_path / "job.log").write_text(
        "accelerate launch --config_file zero3.yaml src/open_r1/grpo.py --config recipe.yaml\n"
        "model_name_or_path: Qwen/Qwen2.5-1.5B-Instruct\nbf16: true\nuse_vllm: true\nnum_generations: 7\n"
        "lr_scheduler_kwargs:\n  min_lr_rate: 0.1\nper_device_train_batch_size: 2\n" + tail, encoding="utf-8")
    args = open_run(str(tmp_path)).args
    assert args.get("num_generations") == 7 and args.get("per_device_train_batch_size") == 2
    assert args.get("lr_scheduler_kwargs.min_lr_rate") == 0.1 and args.source_of("num_generations") == "config_file"
    assert "AssertionError" not in args


@pytest.mark.parametrize("text", [
    "INFO: started\nWARNING: slow\nERROR: boom\n",  # a log's `word: text` lines are a mapping, not a config
    "a: &x {b: 1, c: 2}\n",
])
def test_text_that_is_not_a_training_config_gives_no_arguments(text):
    from triage.formats.hydra_overrides import pasted_config

    assert pasted_config(text) == {}


def test_yaml_aliases_cannot_blow_up_a_config():
    from triage.formats.hydra_overrides import MAX_FLAT_KEYS, flatten

    import yaml

    levels = ["a0: &a0 {x: 1, y: 2, z: 3, w: 4, v: 5, u: 6, t: 7, s: 8, r: 9, q: 10}"]
    for i in range(1, 9):
        refs = ", ".join(f"k{j}: *a{i - 1}" for j in range(10))
        levels.append(f"a{i}: &a{i} {{{refs}}}")
    assert len(flatten(yaml.safe_load("\n".join(levels)))) == MAX_FLAT_KEYS


def test_megatrons_arguments_block_pasted_without_its_header_is_read(tmp_path):
    # NVIDIA/Megatron-LM#1554 pasted the block's lines alone
    (tmp_path / "job.log").write_text(
        "  log_world_size_to_tensorboard ................... False\n  loss_scale ...................................... None\n"
        "  lr .............................................. 5e-05\n  micro_batch_size ................................ 4\n",
        encoding="utf-8")
    args = open_run(str(tmp_path)).args
    assert args.get("lr") == 5e-05 and args.get("micro_batch_size") == 4
    assert args.source_of("lr") == "arguments_block"


def test_a_pasted_config_call_from_a_script_is_read(tmp_path):
    # huggingface/trl#1017 pasted its PPOConfig(...) call
    (tmp_path / "job.log").write_text(
        'config = PPOConfig(\n    steps=50000,\n    learning_rate=1.41e-5,\n    batch_size=512,\n    mini_batch_size=16,\n)\n',
        encoding="utf-8")
    args = open_run(str(tmp_path)).args
    assert args.get("batch_size") == 512 and args.source_of("batch_size") == "python_config"


def test_a_config_call_pasted_under_prose_is_read(tmp_path):
    # unslothai/unsloth#4189: a sentence, then the call with comments (one holding a parenthesis); the prose makes
    # the paste no Python, the call itself is read
    (tmp_path / "job.log").write_text(
        "Running on cloud, one A100 GPU, GRPOTrainer. Completion Length ends up being > max completion length.\n\n"
        "training_args = GRPOConfig(\n"
        "    use_vllm = True, # vLLM colocate mode (requires fast_inference=True\n"
        "    learning_rate = 5e-6,\n"
        "    per_device_train_batch_size = 8,\n"
        "    num_generations = 4, # Decrease if out of memory\n"
        "    report_to = \"wandb\",\n"
        ")\n"
        "and it still happens (see above)\n",
        encoding="utf-8")
    args = open_run(str(tmp_path)).args
    assert args.get("num_generations") == 4 and args.get("learning_rate") == 5e-6
    assert args.source_of("num_generations") == "python_config"


def test_ms_swifts_args_json_is_the_runs_arguments(tmp_path):
    # fyh2001/megatron-sft-recipes' run_mbs1_ga2_gbs8_offload/args.json: ms-swift writes every argument of the run to
    # its output directory (swift/llm/argument/base_args/base_args.py, save_args)
    import json

    from triage.run import open_run

    (tmp_path / "args.json").write_text(json.dumps(
        {"model": "/models/gemma-4", "per_device_train_batch_size": 1, "gradient_accumulation_steps": 2,
         "learning_rate": 1e-05, "max_steps": 30, "deepspeed": {"zero_optimization": {"stage": 3}}}, indent=2),
        encoding="utf-8")
    (tmp_path / "logging.jsonl").write_text(
        "".join(json.dumps({"loss": 1.2, "grad_norm": 3.0, "global_step/max_steps": f"{i}/30"}) + "\n"
                for i in range(1, 6)), encoding="utf-8")
    run = open_run(str(tmp_path))
    assert run.args.get("max_steps") == 30 and run.args.source_of("max_steps") == "config_file"
    assert run.args.get("deepspeed.zero_optimization.stage") == 3
    assert run.args.get("micro_batch_size") == 1  # its canonical name (triage/frameworks/args.yaml)


def test_an_args_json_that_is_not_json_is_a_one_line_note(tmp_path):
    from triage.run import open_run

    (tmp_path / "args.json").write_text('{"model": "x", ', encoding="utf-8")
    (tmp_path / "train.log").write_text("{'loss': 1.0, 'grad_norm': 0.5, 'learning_rate': 1e-05, 'epoch': 0.1}\n",
                                        encoding="utf-8")
    run = open_run(str(tmp_path))
    assert not run.args.has("model")
    assert any(s.startswith("args.json: not read as a config") and "config is not valid JSON" in s
               for s in run.artifacts.skipped)


def test_an_indented_script_fragment_is_read_as_its_lines_stand(tmp_path):
    # a GRPOConfig call pasted from inside a notebook cell's function, its indentation kept (unslothai's GRPO
    # notebooks); it had refused the whole run as a script that does not parse
    (tmp_path / "train.py").write_text(
        "    training_args = GRPOConfig(\n"
        "        learning_rate = 5e-6,\n"
        "        num_generations = 8,\n"
        "        max_completion_length = 768,\n"
        "    )\n", encoding="utf-8")
    (tmp_path / "job.log").write_text("{'loss': 0.0, 'grad_norm': 0.2, 'learning_rate': 5e-06, 'epoch': 0.01}\n",
                                      encoding="utf-8")
    args = open_run(str(tmp_path)).args
    assert args.get("max_completion_length") == 768 and args.source_of("num_generations") == "python_config"


def test_a_script_that_does_not_parse_even_dedented_is_still_refused(tmp_path):
    from triage.formats.python_config import parse_python_config

    with pytest.raises(CorruptArtifact, match="does not parse as Python"):
        parse_python_config("    x = GRPOConfig(\n  learning_rate=1e-6,\n", "train.py")
