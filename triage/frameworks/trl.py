"""TRL and the HF Trainer (axolotl included): GRPOTrainer / PPOTrainer on transformers.Trainer.

Metrics: `trainer_state.json` log_history, the Trainer's printed dicts
(`{'loss': 0.1, 'grad_norm': 0.3, 'learning_rate': 1e-06, ..., 'epoch': 0.1}`,
transformers/trainer.py `log` via ProgressCallback.on_log), `report_to` TensorBoard / W&B
with `train/` prefixed tags. Arguments: the script's `GRPOConfig(...)` /
`TrainingArguments(...)` keywords, `--flags` (TrlParser), axolotl's YAML.
"""

from triage.frameworks import ErrorWording, Framework

FRAMEWORK = Framework(
    name="trl",
    title="TRL / HF Trainer / axolotl",
    run_names=("hf_trainer", "trl", "axolotl"),
    members=("hf_trainer", "axolotl"),  # (a TRL run is the HF Trainer's: `trl/` paths name no other member)
    log_markers=("trl/trainer", "trl/scripts/", "trl/cli", "transformers/trainer.py", "GRPOTrainer", "axolotl", "'epoch': ",
                 "trainer_state.json", "{'train_runtime'",
                 # `trl env`'s report (trl/cli.py) and GRPOTrainer's batch check (trl/trainer/grpo_trainer.py)
                 "- TRL version:", "number of generations per prompt",
                 # `trl vllm-serve`'s endpoints in uvicorn's access lines (trl/scripts/vllm_serve.py;
                 # huggingface/trl#3214 pasted only those)
                 "/update_named_param/", "/init_communicator/", "/close_communicator/",
                 # the PPOTrainer's warnings (trl/trainer/ppo_trainer.py, TRL < 0.12; huggingface/trl#1857)
                 "The average ratio of batch (", "KL divergence is starting to become negative",
                 # its loggers by module name, and the trainer's client waiting for `trl vllm-serve`
                 # (trl/extras/vllm_client.py check_server; huggingface/open-r1#543)
                 "trl.extras.", "trl.trainer.", "trl vllm-serve",
                 # its config classes, as a script or a paste writes them (trl/trainer/*_config.py;
                 # huggingface/trl#204's `config = PPOConfig(…)`)
                 "GRPOConfig(", "PPOConfig(", "DPOConfig(", "RLOOConfig(", "KTOConfig(", "ORPOConfig(",
                 "OnlineDPOConfig(",
                 # the Trainer's own banners (transformers/trainer.py `***** Running training *****`; log_metrics'
                 # `***** train metrics *****` over its `key = value` lines: hiyouga/LlamaFactory#4278 pasted only that)
                 "***** Running training *****", "***** train metrics *****", "***** eval metrics *****",
                 # unsloth, which patches the HF Trainer and TRL, at import and at training's start
                 # (unslothai/unsloth unsloth/__init__.py, unsloth_zoo/__init__.py, unsloth/models/_utils.py;
                 # unslothai/unsloth#2033 pasted only its start)
                 # (its messages all open with `Unsloth: `: unslothai/unsloth#8701's `Unsloth: Warning - regex did not
                 # match, VLLMGeneration.generate patch may have failed`)
                 "Unsloth: ", "Unsloth Zoo will now patch", "==((====))==  Unsloth",
                 # open-r1's recipes, TRL trainers under its own scripts (huggingface/open-r1 src/open_r1/grpo.py, sft.py;
                 # huggingface/open-r1#672 gave only `accelerate launch … src/open_r1/grpo.py`)
                 "open_r1/grpo.py", "open_r1/sft.py", "open_r1.grpo", "open_r1.sft"),
    metric_grammars=("hf_dict",),
    arg_sources=("python_config", "command_line", "yaml_config", "launch_script"),
    error_wordings=(
        ErrorWording("config.batch_size_mismatch",
                     r"The global train batch size \(.*\) must be (evenly )?divisible by the number of generations",
                     "huggingface/trl trl/trainer/grpo_trainer.py (__init__)"),
        ErrorWording("config.batch_size_mismatch",
                     r"generation_batch_size \(\d+\) must be divisible by num_generations \(\d+\)",
                     "huggingface/trl trl/trainer/grpo_config.py (GRPOConfig.__post_init__)"),
        ErrorWording("tokenizer.no_pad_token", r"Asking to pad but the tokenizer does not have a padding token",
                     "huggingface/transformers src/transformers/tokenization_utils_base.py"),
    ),
    needs_help={
        "metrics": "keep output_dir/trainer_state.json (the Trainer writes it at every save), the console log "
                   "with its `{'loss': ...}` lines, or `report_to='tensorboard'` output",
        "trainer_state": "keep output_dir/trainer_state.json (lower `save_steps` to get it earlier)",
        "args": "keep the training script (its GRPOConfig(...) keywords) or the command line",
        "hf_checkpoint": "keep `model_name_or_path` reachable from the run",
        "rollout_dump": "rerun with `log_completions=True` and `report_to='wandb'` (WANDB_MODE=offline will do): "
                        "the run's wandb/ folder then keeps each logged step's completions table",
    },
)
