"""A miniature slime on CPU that plants real faults, for testing and benchmarking the triage.

A tiny Qwen2 / Llama causal LM (hidden 64, 2 layers, 4 query heads over 2 KV heads), a
byte-level BPE tokenizer with a ChatML template, and a verifiable toy task (two-number
addition), warmed up on CPU into an "instruct" and a "base" model and cached
(`warmup`). A real GRPO loop runs on it the way slime does: a trainer holding the
weights under megatron-core's names and layouts (`megatron_model`, `actor`), an engine
that is an HF transformers model receiving those weights through a Megatron->HF
converter (`convert`, `engine`, optionally over HTTP with SGLang's shapes:
`http_engine`), slime's log lines, debug dumps and Megatron checkpoints
(`slime_log`, `rollout`, `checkpoint`), slime's flags and debug modes (`arguments`,
`train`), tensor / pipeline parallelism as two gloo processes (`comm`,
`parallel_state`), and an HF Trainer variant writing TRL's `trainer_state.json`
(`hf_trainer`).

Faults (`faults`) are plugs that make the job do the wrong thing; scenarios
(`scenarios`) pair a fault (or none) with the verdict a correct triage reaches and
generate the run directory the job leaves:

    from triage.testbed.scenarios import SCENARIOS, generate
    run_dir = generate("weights.pp_layer_offset", "/tmp/runs")   # /tmp/runs/weights.pp_layer_offset
    SCENARIOS["weights.pp_layer_offset"].expected                  # "weights.pp_layer_offset"

The job itself: `python -m triage.testbed.train <slime flags>` (see `arguments`).
Everything is cached under `TRIAGE_TESTBED_CACHE` (default `~/.cache/triage-testbed`).
"""
