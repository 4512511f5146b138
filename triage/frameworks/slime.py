"""slime, miles and Relax: Megatron training + SGLang rollouts on Ray, configured by flags.

Logs: `[ts] file.py:N - step N: {...}` (slime), `[ts.mmm actor_cell0_rank0] ...` (miles),
`ts | INFO | relax.components...` (Relax colorlog). Read by `triage.formats.slime_log`.
"""

from triage.frameworks import ErrorWording, Framework

FRAMEWORK = Framework(
    name="slime",
    title="slime / miles / Relax",
    run_names=("slime", "miles", "relax"),
    members=("slime", "miles", "relax"),
    log_markers=(
        "slime/", "slime.", "miles/", "miles.", "relax.components", "MegatronTrainRayActor",
        "RolloutManager", "SGLangEngine", "Finish rollout", "------------------------ arguments ------------------------",
        # flags only slime's family takes (THUDM/slime slime/utils/arguments.py), as a pasted command shows them
        "--actor-num-gpus-per-node", "--rollout-num-gpus-per-engine", "--n-samples-per-prompt",
        # train.py's call into the training actors (THUDM/slime train.py), in the driver's tracebacks
        "actor_model.async_train(",
    ),
    metric_grammars=("slime_dict",),
    arg_sources=("arguments_block", "command_line", "launch_script", "manifest"),
    error_wordings=(
        ErrorWording("config.batch_size_mismatch",
                     r"AssertionError.*(global_batch_size|rollout_batch_size \* n_samples_per_prompt)",
                     "THUDM/slime slime/utils/arguments.py (slime_validate_args)"),
        ErrorWording("config.sample_exceeds_limits", r"AssertionError: This should never happen",
                     "THUDM/slime slime/utils/seqlen_balancing.py (_get_capped_partitions)"),
        ErrorWording("engine.port_conflict", r"Max retries exceeded with url: /get_model_info \(Caused by NewConnectionError",
                     "THUDM/slime slime/backends/sglang_utils/sglang_engine.py"),
    ),
    needs_help={
        "rollout_dump": "rerun with `--save-debug-rollout-data <dir>/rollout_data/{rollout_id}.pt` or `--dump-details <dir>`",
        "train_dump": "rerun with `--dump-details <dir>` (writes <dir>/train_data/)",
        "metrics": "keep the job log with its `step N:` / `rollout N:` lines (or `--use-wandb` / `--use-tensorboard` output)",
        "args": "keep the job's command line (cmdline.txt), its launch script, or a log that starts with Megatron's arguments block",
        "checkpoint": "point --load / --ref-load / --save at the run's Megatron checkpoint directory",
    },
)
