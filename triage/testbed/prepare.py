"""What a job starts from, laid out as a slime user lays it out before `ray job submit`.

    <run>/hf/                 --hf-checkpoint: config.json, model.safetensors, generation_config.json, tokenizer
    <run>/ref/                --ref-load: the HF weights converted to torch_dist (tracker "release",
                              like slime's tools/convert_hf_to_torch_dist.py writes)
    <run>/data/prompts.jsonl  --prompt-data

Fault set-ups change these inputs the way a user gets them wrong (see faults.py):
each is a function `setup(layout)` registered in `SETUPS` by name.
"""

from __future__ import annotations

import argparse
import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from triage.testbed import checkpoint as ckpt
from triage.testbed import task, warmup
from triage.testbed.convert import hf_to_megatron
from triage.testbed.hf_models import shape_from_config

NUM_PROMPTS = 256


@dataclass
class RunLayout:
    root: Path
    model: str = "qwen2-instruct"
    prompt_seed: int = 0

    @property
    def hf(self) -> Path:
        return self.root / "hf"

    @property
    def ref(self) -> Path:
        return self.root / "ref"

    @property
    def prompts(self) -> Path:
        return self.root / "data" / "prompts.jsonl"

    @property
    def dump(self) -> Path:
        return self.root / "dump"

    @property
    def save(self) -> Path:
        return self.root / "ckpt"

    @property
    def engine_dump(self) -> Path:
        return self.root / "engine_weights"


def _hf_state(hf_dir: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    state: dict[str, torch.Tensor] = {}
    for f in sorted(hf_dir.glob("*.safetensors")):
        state.update(load_file(str(f)))
    return state


def convert_hf_to_torch_dist(hf_dir: Path, out: Path) -> Path:
    """slime's convert_hf_to_torch_dist: the HF weights as a Megatron release checkpoint."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(str(hf_dir))
    shape = shape_from_config(config)
    model = hf_to_megatron(_hf_state(hf_dir), shape)
    args = argparse.Namespace(hf_checkpoint=str(hf_dir), save=str(out), num_layers=shape.num_layers,
                              hidden_size=shape.hidden_size, ffn_hidden_size=shape.ffn_hidden_size,
                              num_attention_heads=shape.num_attention_heads, num_query_groups=shape.num_query_groups,
                              tensor_model_parallel_size=1, pipeline_model_parallel_size=1, ckpt_format="torch_dist")
    if out.exists():
        shutil.rmtree(out)
    ckpt.save_torch_dist(out, "release", args, model, None, shape.num_layers)
    ckpt.write_tracker(out, "release")
    return out


def base_layout(layout: RunLayout, prompt_style: str = "chat", prompt_kind: str = "train") -> RunLayout:
    warmup.copy_model(layout.model, layout.hf)
    convert_hf_to_torch_dist(layout.hf, layout.ref)
    problems = task.sample_problems(NUM_PROMPTS, seed=layout.prompt_seed, kind=prompt_kind)
    task.write_prompt_data(layout.prompts, problems, style=prompt_style)
    return layout


# -- fault set-ups ------------------------------------------------------------------------

def ref_without_tracker(layout: RunLayout) -> None:
    """The converted checkpoint was copied without its tracker file."""
    (layout.ref / ckpt.TRACKER).unlink()


def base_model(layout: RunLayout) -> None:
    warmup.copy_model("qwen2-base", layout.hf)
    convert_hf_to_torch_dist(layout.hf, layout.ref)


def other_template_prompts(layout: RunLayout) -> None:
    problems = task.sample_problems(NUM_PROMPTS, seed=layout.prompt_seed)
    task.write_prompt_data(layout.prompts, problems, style="other_template")


def hard_prompts(layout: RunLayout) -> None:
    task.write_prompt_data(layout.prompts, task.sample_problems(NUM_PROMPTS, seed=layout.prompt_seed, kind="hard"))


def overlong_prompt_row(layout: RunLayout, rollout_id: int = 1, batch: int = 4) -> None:
    """One malformed row, served in rollout `rollout_id`: its prompt is longer than the context the job allows."""
    from triage.testbed.rollout import prompt_order

    rows = layout.prompts.read_text().splitlines()
    position = prompt_order(len(rows), True, layout.prompt_seed)[rollout_id * batch + 1]
    junk = " ".join(["lorem"] * 40)
    rows[position] = json.dumps({"prompt": f"What is {junk}?", "label": "0"})
    layout.prompts.write_text("\n".join(rows) + "\n")


def no_chat_stop_token(layout: RunLayout) -> None:
    """The checkpoint names no stop token at all: no eos_token_id in config.json or generation_config.json
    and no eos_token in the tokenizer, as a conversion that builds the configs from the model's shape writes
    them. SGLang stops only on those eos ids and on --rollout-stop-token-ids, so nothing stops generation at
    the chat turn's <|im_end|>."""
    tok_cfg = json.loads((layout.hf / "tokenizer_config.json").read_text())
    tok_cfg["eos_token"] = None
    (layout.hf / "tokenizer_config.json").write_text(json.dumps(tok_cfg, indent=2))
    for name in ("config.json", "generation_config.json"):
        path = layout.hf / name
        cfg = json.loads(path.read_text())
        cfg.pop("eos_token_id", None)
        path.write_text(json.dumps(cfg, indent=2))


def bf16_engine_config(layout: RunLayout) -> None:
    path = layout.hf / "config.json"
    cfg = json.loads(path.read_text())
    cfg["dtype"] = "bfloat16"
    cfg.pop("torch_dtype", None)
    path.write_text(json.dumps(cfg, indent=2))


MASSIVE_SCALE = 2.0**20


def massive_activation_model(layout: RunLayout, layer: int = -1, channel: int = 0) -> None:
    """Reparametrise one SwiGLU channel: up_proj row x s, down_proj column / s (the same function in
    exact arithmetic), the shape of the "massive activations" real LLMs carry. Its intermediate
    value exceeds fp16's range."""
    from safetensors.torch import save_file
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(str(layout.hf))
    layer = layer % config.num_hidden_layers
    state = _hf_state(layout.hf)
    up = f"model.layers.{layer}.mlp.up_proj.weight"
    down = f"model.layers.{layer}.mlp.down_proj.weight"
    state[up] = state[up].clone()
    state[down] = state[down].clone()
    state[up][channel] *= MASSIVE_SCALE
    state[down][:, channel] /= MASSIVE_SCALE
    for f in layout.hf.glob("*.safetensors"):
        f.unlink()
    save_file({k: v.contiguous() for k, v in state.items()}, str(layout.hf / "model.safetensors"), metadata={"format": "pt"})
    convert_hf_to_torch_dist(layout.hf, layout.ref)


SETUPS: dict[str, Callable[[RunLayout], None]] = {
    "ref_without_tracker": ref_without_tracker,
    "base_model": base_model,
    "other_template_prompts": other_template_prompts,
    "hard_prompts": hard_prompts,
    "overlong_prompt_row": overlong_prompt_row,
    "no_chat_stop_token": no_chat_stop_token,
    "bf16_engine_config": bf16_engine_config,
    "massive_activation_model": massive_activation_model,
}
