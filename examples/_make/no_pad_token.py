"""trl-no-pad-token: a TRL GRPO script on a Llama-3.1-8B base tokenizer, which ships no pad token;
the first batch of prompts cannot be padded and the trainer stops with transformers' ValueError.
"""

from __future__ import annotations

from common import Log, example_dir, expected, write_text

NAME = "trl-no-pad-token"

CMD = """accelerate launch --config_file recipes/accelerate_configs/zero3.yaml --num_processes 8 \\
    grpo_countdown.py \\
    --model_name_or_path meta-llama/Llama-3.1-8B \\
    --dataset_name Jiayi-Pan/Countdown-Tasks-3to4 \\
    --output_dir outputs/llama3.1-8b-grpo-countdown \\
    --learning_rate 5e-7 --per_device_train_batch_size 4 --gradient_accumulation_steps 8 \\
    --num_generations 8 --max_prompt_length 256 --max_completion_length 1024 \\
    --beta 0.001 --bf16 --gradient_checkpointing --logging_steps 1
"""

TB = """Traceback (most recent call last):
  File "/workspace/grpo_countdown.py", line 141, in <module>
    main(script_args, training_args, model_args)
  File "/workspace/grpo_countdown.py", line 126, in main
    train_result = trainer.train(resume_from_checkpoint=checkpoint)
                   ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/usr/local/lib/python3.11/dist-packages/transformers/trainer.py", line 2238, in train
    return inner_training_loop(
           ^^^^^^^^^^^^^^^^^^^^
  File "/usr/local/lib/python3.11/dist-packages/transformers/trainer.py", line 2582, in _inner_training_loop
    tr_loss_step = self.training_step(model, inputs, num_items_in_batch)
                   ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/usr/local/lib/python3.11/dist-packages/trl/extras/profiling.py", line 98, in wrapper
    return func(self, *args, **kwargs)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/usr/local/lib/python3.11/dist-packages/trl/trainer/grpo_trainer.py", line 1034, in training_step
    output = super().training_step(model, inputs, num_items_in_batch)
             ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/usr/local/lib/python3.11/dist-packages/transformers/trainer.py", line 3740, in training_step
    inputs = self._prepare_inputs(inputs)
             ^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/usr/local/lib/python3.11/dist-packages/trl/trainer/grpo_trainer.py", line 1061, in _prepare_inputs
    generation_batch = self._generate_and_score_completions(generation_batch)
                       ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/usr/local/lib/python3.11/dist-packages/trl/trainer/grpo_trainer.py", line 1312, in _generate_and_score_completions
    prompt_inputs = self.processing_class(
                    ^^^^^^^^^^^^^^^^^^^^^^
  File "/usr/local/lib/python3.11/dist-packages/transformers/tokenization_utils_base.py", line 2887, in __call__
    encodings = self._call_one(text=text, text_pair=text_pair, **all_kwargs)
                ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/usr/local/lib/python3.11/dist-packages/transformers/tokenization_utils_base.py", line 2975, in _call_one
    return self.batch_encode_plus(
           ^^^^^^^^^^^^^^^^^^^^^^^
  File "/usr/local/lib/python3.11/dist-packages/transformers/tokenization_utils_base.py", line 3168, in batch_encode_plus
    padding_strategy, truncation_strategy, max_length, kwargs = self._get_padding_truncation_strategies(
                                                                ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/usr/local/lib/python3.11/dist-packages/transformers/tokenization_utils_base.py", line 2788, in _get_padding_truncation_strategies
    raise ValueError(
ValueError: Asking to pad but the tokenizer does not have a padding token. Please select a token to use as `pad_token` `(tokenizer.pad_token = tokenizer.eos_token e.g.)` or add a new pad token via `tokenizer.add_special_tokens({'pad_token': '[PAD]'})`."""


def build() -> None:
    d = example_dir(NAME)
    write_text(d / "cmdline.txt", CMD)
    log = Log("2026-08-12 19:02:44", seed=111)
    log.raw("W0812 19:02:44.907000 88231 torch/distributed/run.py:792] *****************************************")
    log.raw("W0812 19:02:44.907000 88231 torch/distributed/run.py:792] Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your system being overloaded, please further tune the variable for optimal performance in your application as needed. ")
    log.raw("W0812 19:02:44.907000 88231 torch/distributed/run.py:792] *****************************************")
    log.tick(21)
    log.raw(f"{log.stamp()} - INFO - __main__ - Model parameters ModelConfig(model_name_or_path='meta-llama/Llama-3.1-8B', model_revision='main', torch_dtype='bfloat16', trust_remote_code=False, attn_implementation='flash_attention_2', use_peft=False)")
    log.raw(f"{log.stamp()} - INFO - __main__ - Script parameters GRPOScriptArguments(dataset_name='Jiayi-Pan/Countdown-Tasks-3to4', dataset_config=None, dataset_train_split='train', dataset_test_split='test', reward_funcs=['format', 'equation'])")
    log.tick(2)
    log.raw(f"{log.stamp()} - INFO - __main__ - *** Initializing model kwargs ***")
    log.raw("Loading checkpoint shards: 100%|██████████| 4/4 [00:07<00:00,  1.83s/it]")
    log.tick(31)
    log.raw(f"{log.stamp()} - INFO - __main__ - *** Train ***")
    log.raw("  0%|          | 0/1250 [00:00<?, ?it/s]")
    log.tick(4)
    log.raw("[rank0]: " + TB.replace("\n", "\n[rank0]: "))
    log.raw("[rank0]:[W812 19:03:48.112408917 ProcessGroupNCCL.cpp:1496] Warning: WARNING: destroy_process_group() was not called before program exit, which can leak resources. For more info, please see https://pytorch.org/docs/stable/distributed.html#shutdown (function operator())")
    log.raw("W0812 19:03:49.520000 88231 torch/distributed/elastic/multiprocessing/api.py:900] Sending process 88299 closing signal SIGTERM")
    log.raw("E0812 19:03:50.016000 88231 torch/distributed/elastic/multiprocessing/api.py:874] failed (exitcode: 1) local_rank: 0 (pid: 88298) of binary: /usr/bin/python3")
    write_text(d / "train.log", log.text())
    expected(d, "tokenizer.no_pad_token",
             "ValueError: Asking to pad but the tokenizer does not have a padding token (Llama-3.1-8B base tokenizer, "
             "first GRPO batch)")


if __name__ == "__main__":
    build()
