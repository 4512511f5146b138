"""A byte-level BPE tokenizer trained offline, in the shape of Qwen2's.

ChatML chat template, `<|im_end|>` as eos (what an instruct model ends its turn with),
`<|endoftext|>` as pad (and as the eos a base model's generation config names). Digits
are split one per token, as Qwen2's pre-tokenizer does, so the toy arithmetic task
stays learnable by a tiny model.
"""

from __future__ import annotations

from pathlib import Path

from triage.testbed import task

VOCAB_SIZE = 384  # BPE target; the trained tokenizer may hold fewer tokens
MODEL_VOCAB_SIZE = 384  # embedding rows: the tokenizer's size padded, divisible by 128 (and by TP)
ENDOFTEXT = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
SPECIAL_TOKENS = [ENDOFTEXT, IM_START, IM_END]
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
RECIPE = {"vocab": VOCAB_SIZE, "special": SPECIAL_TOKENS, "template": CHAT_TEMPLATE, "corpus": task.CORPUS_VERSION}


def _corpus() -> list[str]:
    lines = list(task.tokenizer_corpus())
    lines += [
        "The quick brown fox jumps over the lazy dog.",
        "Hello! How can I help you today?",
        "You are a helpful assistant.",
        "Answer with a number only.",
    ] * 20
    return lines


def build_tokenizer(out_dir: Path):
    """Train the tokenizer and save it in HF layout (tokenizer.json, tokenizer_config.json)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=None,
        eos_token=IM_END,
        pad_token=ENDOFTEXT,
        unk_token=None,
        additional_special_tokens=[IM_START],
        model_max_length=512,
    )
    fast.chat_template = CHAT_TEMPLATE
    out_dir.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(str(out_dir))
    return fast


def load_tokenizer(path: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(path))
