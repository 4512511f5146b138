"""Arguments as users write them: bash launch scripts, Hydra overrides and configs, GRPOConfig(...) in Python."""

from __future__ import annotations

import pytest

from triage.cli import main
from triage.errors import CorruptArtifact
from triage.formats.hydra_overrides import DELETED, parse_overrides, read_config_yaml
from triage.formats.launch_script import parse_launch_script, script_arguments
from triage.formats.python_config import parse_python_config
from triage.run import open_run

# Shaped like THUDM/slime scripts/run-qwen3-4B.sh: arrays of flags, `source`d model args, ray job submit.
SLIME_SCRIPT = r'''#!/bin/bash
set -ex
export PYTHONBUFFERED=16
NUM_GPUS=8
SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" &>/dev/null && pwd)"
source "${SCRIPT_DIR}/models/qwen3-4B.sh"

CKPT_ARGS=(
   --hf-checkpoint /root/Qwen3-4B
   --ref-load /root/Qwen3-4B_torch_dist   # the reference model
   --load /root/Qwen3-4B_slime/
   --save /root/Qwen3-4B_slime/
)

ROLLOUT_ARGS=(
   --prompt-data /root/dapo-math-17k/dapo-math-17k.jsonl
   --rollout-batch-size 32
   --n-samples-per-prompt 8
   --rollout-max-response-len 8192
   --global-batch-size $((32 * 8))
   --rollout-temperature 0.8
)
PERF_ARGS=(
   --max-tokens-per-gpu $(( NUM_GPUS * 1152 ))
   --micro-batch-size $((MBS * 2))
)
ray job submit --address="http://127.0.0.1:8265" \
   --runtime-env-json='{"env_vars": {"PYTHONPATH": "/root/Megatron-LM/"}}' \
   -- python3 train.py \
   --actor-num-nodes 1 \
   --actor-num-gpus-per-node ${NUM_GPUS} \
   --colocate \
   "${MODEL_ARGS[@]}" \
   "${CKPT_ARGS[@]}" \
   "${ROLLOUT_ARGS[@]}" \
   "${PERF_ARGS[@]}"
'''

# Shaped like verl examples/grpo_trainer/run_qwen2-7b.sh: Hydra overrides on `python3 -m verl.trainer.main_ppo`.
VERL_SCRIPT = r'''set -x
N=5
python3 -m verl.trainer.main_ppo \
    algorithm.adv_estimator=grpo \
    data.train_files=$HOME/data/gsm8k/train.parquet \
    data.train_batch_size=1024 \
    data.max_prompt_length=512 \
    data.max_response_length=1024 \
    actor_rollout_ref.model.path=Qwen/Qwen2-7B-Instruct \
    actor_rollout_ref.actor.optim.lr=1e-6 \
    actor_rollout_ref.actor.ppo_max_token_len_per_gpu=$((1024 * 24)) \
    actor_rollout_ref.rollout.n=$N \
    trainer.logger=['console','wandb'] \
    +trainer.val_before_train=False \
    ~reward_model $@
'''


def test_bash_arrays_and_arithmetic_expand_into_the_training_flags():
    flags, overrides = script_arguments(parse_launch_script(SLIME_SCRIPT))
    assert overrides == {}
    assert flags["hf_checkpoint"] == "/root/Qwen3-4B"
    assert flags["ref_load"] == "/root/Qwen3-4B_torch_dist"
    assert flags["global_batch_size"] == 256
    assert flags["max_tokens_per_gpu"] == 9216  # $(( NUM_GPUS * 1152 )), every operand known
    assert flags["micro_batch_size"] == "$((MBS*2))"  # MBS is never set: left unknown, not guessed
    assert flags["actor_num_gpus_per_node"] == 8 and flags["colocate"] is True
    assert flags["rollout_temperature"] == 0.8


def test_a_command_kept_in_a_here_document_variable_is_the_training_command():
    # OpenRLHF's example scripts: `read -r -d '' training_commands <<EOF` … `EOF`, then `deepspeed --module $training_commands`
    text = ("set -x\nMODEL=/models/llama3-8b\nread -r -d '' training_commands <<EOF\nopenrlhf.cli.train_ppo \\\n"
            "   --pretrain $MODEL \\\n   --micro_train_batch_size 2 \\\n   --generate_max_len 1024\nEOF\n"
            'if [[ ${1} != "slurm" ]]; then\n    deepspeed --module $training_commands\nfi\n')
    flags, _ = script_arguments(parse_launch_script(text))
    assert flags == {"pretrain": "/models/llama3-8b", "micro_train_batch_size": 2, "generate_max_len": 1024}
    # a quoted delimiter leaves `$` unexpanded, as bash does
    quoted = parse_launch_script(text.replace("<<EOF", "<<'EOF'"))
    assert "$MODEL" in quoted.variables["training_commands"]
    # a paste cut inside the here-document, before the line that runs it: bash reads it to the end of the file
    cut = text.split("EOF\nif")[0].rsplit("\n", 1)[0] + "\n"
    script = parse_launch_script(cut)
    assert script_arguments(script)[0]["micro_train_batch_size"] == 2 and script.command_line == 3


def test_hydra_overrides_of_a_verl_script_are_typed_and_dotted():
    flags, overrides = script_arguments(parse_launch_script(VERL_SCRIPT))
    assert overrides["actor_rollout_ref.rollout.n"] == 5
    assert overrides["actor_rollout_ref.actor.optim.lr"] == pytest.approx(1e-6)
    assert overrides["actor_rollout_ref.actor.ppo_max_token_len_per_gpu"] == 24576
    assert overrides["trainer.logger"] == ["console", "wandb"]
    assert overrides["trainer.val_before_train"] is False
    assert overrides["reward_model"] is DELETED
    assert parse_overrides(["++a.b=null", "c=[1,2]"]) == {"a.b": None, "c": [1, 2]}


def test_a_run_directory_with_a_verl_script_gets_canonical_names_with_the_original_kept(tmp_path):
    (tmp_path / "run_grpo.sh").write_text(VERL_SCRIPT)
    (tmp_path / "job.log").write_text("(TaskRunner pid=1) step:1 - actor/grad_norm:0.4\n")
    run = open_run(str(tmp_path))
    assert run.framework == "verl"
    args = run.args
    assert args.get("n_samples_per_prompt") == 5
    assert args.original_name("n_samples_per_prompt") == "actor_rollout_ref.rollout.n"
    assert args.get("rollout_max_response_len") == 1024
    assert args.get("max_tokens_per_gpu") == 24576
    assert args.get("lr") == pytest.approx(1e-6)
    assert args.source_of("rollout_batch_size") == "launch_script"


def test_hydra_composed_config_yaml_is_read_with_interpolations(tmp_path):
    hydra = tmp_path / "outputs" / ".hydra"
    hydra.mkdir(parents=True)
    # verl/trainer/config/ppo_trainer.yaml as Hydra saves it composed
    (hydra / "config.yaml").write_text(
        "data:\n  train_batch_size: 256\n  max_response_length: 2048\n"
        "actor_rollout_ref:\n  rollout:\n    n: 8\n    response_length: ${data.max_response_length}\n"
        "  actor:\n    optim:\n      lr: 1.0e-06\n")
    flat = read_config_yaml(hydra / "config.yaml")
    assert flat["actor_rollout_ref.rollout.response_length"] == 2048
    (tmp_path / "job.log").write_text("(TaskRunner pid=1) step:1 - actor/grad_norm:0.4\n")
    run = open_run(str(tmp_path))
    assert run.args.get("n_samples_per_prompt") == 8 and run.args.source_of("n_samples_per_prompt") == "config_file"
    assert run.args.get("rollout_batch_size") == 256


# Shaped like huggingface/trl docs (GRPO quickstart): the config built in the training script.
TRL_SCRIPT = '''
from datasets import load_dataset
from trl import GRPOConfig, GRPOTrainer
import os

LR = 1e-6
dataset = load_dataset("trl-lib/tldr", split="train")
training_args = GRPOConfig(
    output_dir="Qwen2-0.5B-GRPO",
    learning_rate=LR,
    num_generations=8,
    max_completion_length=256,
    per_device_train_batch_size=4,
    logging_steps=10,
    run_name=os.environ.get("RUN", "x"),
)
trainer = GRPOTrainer(model="Qwen/Qwen2-0.5B-Instruct", reward_funcs=reward_len, args=training_args,
                      train_dataset=dataset)
trainer.train()
'''


def test_grpo_config_keywords_are_read_with_ast_and_never_run(tmp_path):
    cfg = parse_python_config(TRL_SCRIPT)
    assert cfg.values["learning_rate"] == pytest.approx(1e-6)  # a module-level literal, resolved
    assert cfg.values["num_generations"] == 8
    assert "run_name" in cfg.unknown and "run_name" not in cfg.values
    marker = tmp_path / "ran"
    (tmp_path / "train_grpo.py").write_text(TRL_SCRIPT + f"\nopen({str(marker)!r}, 'w').write('x')\n")
    run = open_run(str(tmp_path))
    assert run.framework == "hf_trainer"
    assert run.args.get("n_samples_per_prompt") == 8
    assert run.args.original_name("n_samples_per_prompt") == "num_generations"
    assert run.args.get("rollout_max_response_len") == 256
    assert not marker.exists()


def test_a_script_with_unbalanced_quotes_is_refused_in_one_line(tmp_path):
    with pytest.raises(CorruptArtifact, match="unbalanced \" quote starting at line 2"):
        parse_launch_script('N=1\nARGS="--lr 1e-6\npython3 train.py $ARGS\n', "bad.sh")


def test_a_command_continued_past_the_end_of_the_script_is_read_as_it_stands():
    # OpenRLHF/OpenRLHF#1066: the paste of the command ends on `--adam_offload \`
    flags, _ = script_arguments(parse_launch_script(
        "python3 -m openrlhf.cli.train_ppo_ray \\\n   --actor_num_gpus_per_node 4 \\\n   --adam_offload \\\n"))
    assert flags["actor_num_gpus_per_node"] == 4 and flags["adam_offload"] is True


def test_a_launch_script_with_unbalanced_quotes_exits_2(tmp_path, capsys):
    (tmp_path / "run.sh").write_text("ROLLOUT_ARGS=(\n  --rollout-stop '</s>\n)\npython3 train.py \"${ROLLOUT_ARGS[@]}\"\n")
    (tmp_path / "job.log").write_text("[2026-08-01 10:00:00] model.py:918 - step 0: {'train/loss': 0.1}\n")
    rc = main(["run", str(tmp_path), "--no-cache", "--json"])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert len(err.splitlines()) == 1 and "run.sh" in err and "unbalanced" in err


def test_a_deleted_hydra_key_is_not_an_argument(tmp_path):
    (tmp_path / "run.sh").write_text(VERL_SCRIPT)
    (tmp_path / "job.log").write_text("(TaskRunner pid=1) step:1 - actor/grad_norm:0.4\n")
    args = open_run(str(tmp_path)).args
    assert "reward_model" not in args and args.get("trainer.val_before_train") is False


# THUDM/slime#1321 as pasted: the script's argument arrays, without the command that uses them
SLIME_ARRAYS = """\
CKPT_ARGS=(
   --hf-checkpoint GLM/GLM-Z1-9B-0414/
   --load ckpt/GLM-Z1-9B-0414_slime/
)

ROLLOUT_ARGS=(
   --rollout-batch-size 16
   --n-samples-per-prompt 8

   --global-batch-size {gbs}
   --num-steps-per-rollout 1
)
"""


def test_a_pasted_scripts_arrays_are_the_runs_arguments(tmp_path):
    from triage.api import triage

    run = open_file_run_from_text(tmp_path, SLIME_ARRAYS.format(gbs=128))
    assert run.args.get("rollout_batch_size") == 16 and run.args.get("global_batch_size") == 128
    assert run.args.source_of("global_batch_size") == "launch_script"
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "job.log").write_text(SLIME_ARRAYS.format(gbs=100), encoding="utf-8")
    assert triage(str(tmp_path / "bad")).root_cause.id == "config.batch_size_mismatch"


def test_a_pasted_script_cut_mid_quote_is_not_refused(tmp_path):
    run = open_file_run_from_text(tmp_path, 'ROLLOUT_ARGS=(\n   --rollout-batch-size 16\n)\npython3 train.py --x "unclosed\n')
    assert not run.args.has("rollout_batch_size")  # nothing read from it, and no error


def open_file_run_from_text(tmp_path, text):
    from triage.run import open_run

    (tmp_path / "job.log").write_text(text, encoding="utf-8")
    return open_run(str(tmp_path))
