"""The warm-up that turns random tiny models into a "base" and an "instruct" model, cached.

- base: pretrained on raw text (`12+34=46<|endoftext|>`), never sees the chat template;
  its generation config ends a sequence on `<|endoftext|>`, as a base model's does.
- instruct: the same raw text plus chat-formatted SFT (ChatML, loss on the assistant
  turn, ended by `<|im_end|>`), so it answers in-domain and stops; its generation
  config ends on `<|im_end|>`.

Training runs on the testbed's own Megatron-layout model, and the result is converted
to HF and saved with `save_pretrained` (config.json, model.safetensors,
generation_config.json, tokenizer files). The cache key is a hash of the recipe, so a
scenario never retrains; the whole warm-up takes well under a minute on 2 cores.
"""

from __future__ import annotations

import sys

import json
import random
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from triage.testbed import task
from triage.testbed import tokenizer as tokmod
from triage.testbed.cache import build_once, cache_root, content_hash
from triage.testbed.hf_models import ModelShape

BATCH = 64
LR = 3e-3
# Bump when the warm-up's behaviour changes in a way the recipe does not show (the model code,
# the conversion, the data encoding): the cache key holds this, not the source files, so that
# editing unrelated testbed code never retrains.
WARMUP_VERSION = 3


@dataclass(frozen=True)
class Recipe:
    name: str
    arch: str
    chat_steps: int  # steps whose batches are chat-formatted SFT data (mixed with raw text)
    raw_steps: int  # steps of raw-text pretraining before
    seed: int = 0
    shape: dict = field(default_factory=dict)

    def model_shape(self) -> ModelShape:
        return ModelShape(arch=self.arch, **self.shape)


RECIPES: dict[str, Recipe] = {
    "qwen2-instruct": Recipe("qwen2-instruct", "qwen2", chat_steps=600, raw_steps=0, seed=0),
    "llama-instruct": Recipe("llama-instruct", "llama", chat_steps=600, raw_steps=0, seed=1),
    "qwen2-base": Recipe("qwen2-base", "qwen2", chat_steps=0, raw_steps=300, seed=2),
}


def _models_key() -> str:
    return content_hash(
        {k: vars(r) for k, r in RECIPES.items()}, tokmod.RECIPE, BATCH, LR, WARMUP_VERSION,
        task.MAX_OPERAND, task.CORPUS_VERSION,
    )


def models_dir() -> Path:
    """`<cache>/models/<recipe hash>/`, holding `tokenizer/` and one HF directory per recipe."""
    return cache_root() / "models" / _models_key()


def model_path(name: str) -> Path:
    """The HF checkpoint directory of a warmed-up model, trained on first use (only that one)."""
    if name not in RECIPES:
        raise KeyError(f"unknown testbed model {name!r}: choose one of {', '.join(RECIPES)}")
    tok_dir = tokenizer_path()
    target = models_dir() / name
    return build_once(target, lambda tmp: _build_one(RECIPES[name], tok_dir, tmp))


def tokenizer_path() -> Path:
    target = models_dir() / "tokenizer"
    target.parent.mkdir(parents=True, exist_ok=True)
    return build_once(target, lambda tmp: tokmod.build_tokenizer(tmp))


def _encode(tok, problems):
    chat, raw = [], []
    eot = tok.convert_tokens_to_ids(tokmod.ENDOFTEXT)
    for p in problems:
        prompt = tok.apply_chat_template(task.messages(p), tokenize=False, add_generation_prompt=True)
        pi = tok(prompt, add_special_tokens=False)["input_ids"]
        ri = tok(p.answer + tokmod.IM_END, add_special_tokens=False)["input_ids"]
        chat.append((pi, ri))
        raw.append(([], tok(p.raw_text, add_special_tokens=False)["input_ids"] + [eot]))
    return chat, raw


def _batch(items, pad_id):
    import torch

    length = max(len(a) + len(b) for a, b in items)
    ids = torch.full((len(items), length), pad_id)
    labels = torch.full((len(items), length), -100)
    for i, (a, b) in enumerate(items):
        seq = a + b
        ids[i, : len(seq)] = torch.tensor(seq)
        labels[i, len(a) : len(seq)] = torch.tensor(b)
    return ids, labels


def _progress(message: str) -> None:
    """Warm-up progress is a diagnostic: stderr, never mixed into a command's output."""
    print(message, file=sys.stderr, flush=True)


def train_recipe(recipe: Recipe, tok, log=None):
    """Train one recipe from scratch; returns the trained Megatron-layout model."""
    log = log or _progress
    import torch
    import torch.nn.functional as F

    from triage.testbed.megatron_model import GPTModel

    torch.manual_seed(recipe.seed)
    model = GPTModel(recipe.model_shape(), tokmod.MODEL_VOCAB_SIZE)
    model.init_weights(recipe.seed)
    chat, raw = _encode(tok, task.all_problems())
    opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=(0.9, 0.98), weight_decay=0.0)
    rng = random.Random(recipe.seed)
    pad = tok.convert_tokens_to_ids(tokmod.ENDOFTEXT)
    t0 = time.time()
    for step in range(recipe.raw_steps + recipe.chat_steps):
        if step < recipe.raw_steps:
            items = rng.sample(raw, BATCH)
        else:
            items = rng.sample(chat, BATCH * 3 // 4) + rng.sample(raw, BATCH // 4)
        ids, labels = _batch(items, pad)
        logits = model(ids)
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1), ignore_index=-100)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 200 == 0:
            log(f"warm-up {recipe.name} step {step} loss {loss.item():.3f} ({time.time() - t0:.1f}s)")
    return model.eval()


def save_hf(model, recipe: Recipe, tok, out: Path) -> None:
    """Convert a trained Megatron-layout model to HF and save it with its tokenizer."""
    from transformers import GenerationConfig

    from triage.testbed.convert import convert_all
    from triage.testbed.hf_models import build_model

    shape = recipe.model_shape()
    instruct = recipe.chat_steps > 0
    eos = tok.convert_tokens_to_ids(tokmod.IM_END if instruct else tokmod.ENDOFTEXT)
    pad = tok.convert_tokens_to_ids(tokmod.ENDOFTEXT)
    hf = build_model(shape, tokmod.MODEL_VOCAB_SIZE, eos_token_id=eos, pad_token_id=pad, seed=recipe.seed)
    converted = dict(convert_all(model.state_dict().items(), shape))
    missing, unexpected = hf.load_state_dict(converted, strict=False)
    if unexpected or [m for m in missing if "rotary" not in m]:
        raise RuntimeError(f"conversion mismatch: missing={missing} unexpected={unexpected}")
    hf.generation_config = GenerationConfig(eos_token_id=eos, pad_token_id=pad, bos_token_id=None)
    out.mkdir(parents=True, exist_ok=True)
    hf.save_pretrained(str(out), safe_serialization=True)
    tok.save_pretrained(str(out))
    if not instruct:
        # A base model's tokenizer ends text with <|endoftext|>, like Qwen2.5 base.
        cfg_path = out / "tokenizer_config.json"
        cfg = json.loads(cfg_path.read_text())
        cfg["eos_token"] = tokmod.ENDOFTEXT
        cfg_path.write_text(json.dumps(cfg, indent=2))


def _build_one(recipe: Recipe, tok_dir: Path, out: Path, log=None) -> None:
    log = log or _progress
    import torch
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the tiny model trains faster on one thread than on two contended ones
    try:
        t0 = time.time()
        tok = tokmod.load_tokenizer(tok_dir)
        model = train_recipe(recipe, tok, log=log)
        save_hf(model, recipe, tok, out)
        (out / "recipe.json").write_text(json.dumps(vars(recipe), indent=2) + "\n")
        log(f"warm-up {recipe.name} done in {time.time() - t0:.1f}s")
    finally:
        torch.set_num_threads(threads)


def copy_model(name: str, dest: Path) -> Path:
    """Copy a warmed-up HF checkpoint into a run directory (what `--hf-checkpoint` points at)."""
    src = model_path(name)
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns(".complete", "recipe.json"))
    return dest
