"""ms-swift (modelscope/ms-swift): `swift rlhf --rlhf_type grpo ...`, TRL-based GRPO.

Metrics: printed dicts with `global_step/max_steps`, `train_speed(iter/s)`, `memory(GiB)`
(swift/trainers/mixin.py, swift/utils/... logging callback) and `output_dir/.../logging.jsonl`
holding the same records as JSON lines.
"""

from triage.frameworks import ErrorWording, Framework

FRAMEWORK = Framework(
    name="ms_swift",
    title="ms-swift",
    run_names=("ms_swift", "swift"),
    log_markers=("swift/", "swift.", "global_step/max_steps", "train_speed(iter/s)", "memory(GiB)", "swift rlhf",
                 # its other commands (swift/cli: sft, pt, infer, export, deploy; modelscope/ms-swift#5019), its
                 # external rollout server (`swift rollout`, modelscope/ms-swift#7200) and its Megatron entry point
                 # (swift/cli/_megatron: `megatron rlhf --rlhf_type grpo`, modelscope/ms-swift#8017)
                 "swift sft", "swift pt ", "swift infer", "swift export", "swift deploy", "swift rollout",
                 "megatron rlhf", "megatron sft",
                 # its logger's prefix (swift/utils/logger.py: `[%(levelname)s:%(name)s]`, `[INFO:swift] …`;
                 # modelscope/ms-swift#6962 pasted only that and vLLM's lines)
                 ":swift] ",
                 "logging.jsonl"),
    metric_grammars=("swift_json", "hf_dict"),
    arg_sources=("command_line", "launch_script"),
    error_wordings=(
        ErrorWording("config.batch_size_mismatch",
                     r"(generation_batch_size|steps_per_generation|num_generations).*(divisible|must be)",
                     "modelscope/ms-swift swift/trainers/arguments.py (GRPOArgumentsMixin)"),
    ),
    needs_help={
        "metrics": "keep `output_dir/<version>/logging.jsonl` (ms-swift writes every logged record there)",
        "args": "keep the `swift rlhf ...` command line or the launch script; "
                "ms-swift also writes `output_dir/<version>/args.json`",
        "rollout_dump": "rerun with `--log_completions true` (completions.jsonl beside logging.jsonl)",
    },
)
