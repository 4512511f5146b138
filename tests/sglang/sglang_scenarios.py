"""Weight directories with the bugs the live compare has to explain, and run directories that point at them.

All built from the kit's tiny models into temporary directories, by doing the wrong thing
to real weights (never by writing an expected answer):

- `trained`: the kit's `*-alt` model stands in for the trainer's weights after training
  (same tokenizer and shapes as the served base model, other values);
- `pp_offset`: pipeline stage 1 sent its layer 1 under its local id 0, so engine layer 0
  holds trained layer 1 and engine layer 1 keeps the base model's values;
- `names_swapped`: gate_proj and up_proj exchanged in every layer;
- `stale`: the MLP group of every layer never updated (the base model's values).

The trainer's checkpoint is the trained weights as Megatron torch_dist (slime's
convert_hf_to_torch_dist layout), so the compare goes through the Megatron -> HF conversion.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

SIDE_FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json", "chat_template.jinja")
GARBLED = [
    "нафтаξλ大学 vergütung ماهي สวัสดี Привет 的 αβγ abcдежfgh",
    "ysicsOrg\ufffd\ufffd DRM\x03 cosponsoredNexus мosqu ξλ",
    "<unk><unk><unk><unk><unk><unk>",
]
PROMPTS = ["What is 6 times 7?", "Name a colour of the sky.", "Write one word about the sea.", "Count to three."]


def load_hf(d: Path) -> dict[str, torch.Tensor]:
    return load_file(str(d / "model.safetensors"))


def write_weights(src: Path, out: Path, tensors: dict[str, torch.Tensor]) -> Path:
    """An HF directory: the source's config and tokenizer files, these tensors."""
    out.mkdir(parents=True, exist_ok=True)
    for name in SIDE_FILES:
        if (src / name).is_file():
            shutil.copy(src / name, out / name)
    save_file({k: v.contiguous().clone() for k, v in tensors.items()}, str(out / "model.safetensors"))
    return out


def pp_offset(trained: dict[str, torch.Tensor], base: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    out = dict(trained)
    for k, v in trained.items():
        if k.startswith("model.layers.1."):
            out[k.replace("model.layers.1.", "model.layers.0.")] = v
            out[k] = base[k]
    return out


def names_swapped(trained: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    out = dict(trained)
    for k in trained:
        if k.endswith("mlp.gate_proj.weight"):
            up = k.replace("gate_proj", "up_proj")
            out[k], out[up] = trained[up], trained[k]
    return out


def stale_mlp(trained: dict[str, torch.Tensor], base: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: (base[k] if ".mlp." in k else v) for k, v in trained.items()}


def megatron_checkpoint(hf_dir: Path, out: Path) -> Path:
    from triage.testbed.prepare import convert_hf_to_torch_dist

    return convert_hf_to_torch_dist(hf_dir, out)


def rollout_dump(path: Path, base_dir: Path, max_new_tokens: int = 12) -> Path:
    """A rollout dump as slime writes it: prompts from the kit tokenizer's chat template, responses and
    their rollout log-probs generated greedily on the base weights (what the engine served at rollout 0)."""
    from transformers import AutoTokenizer

    from triage.engines import Sampling
    from triage.engines.local import LocalEngine

    tok = AutoTokenizer.from_pretrained(str(base_dir), local_files_only=True)
    prompts = [tok.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True, tokenize=True)
               for p in PROMPTS]
    prompts = [list(p["input_ids"]) if isinstance(p, dict) or hasattr(p, "keys") else list(p) for p in prompts]
    local = LocalEngine(base_dir, device="cpu")
    gens = local.generate(prompts, Sampling(max_new_tokens=max_new_tokens, temperature=0.0))
    samples = []
    for i, (p, g) in enumerate(zip(prompts, gens)):
        samples.append({"group_index": i, "index": i, "prompt": tok.decode(p), "tokens": p + g.output_ids,
                        "response": g.text or "", "response_length": len(g.output_ids), "label": "42", "reward": 0.0,
                        "loss_mask": [1] * len(g.output_ids), "rollout_log_probs": g.output_logprobs,
                        "status": "truncated" if g.finish.truncated else "completed"})
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"rollout_id": 0, "samples": samples}, path)
    return path


def garbled_run(root: Path, *, checkpoint: Path, base_dir: Path, dump: Path | None = None,
                max_response_len: int = 12) -> Path:
    """A slime run directory whose first rollout is garbled, pointing at the trainer's checkpoint and HF base."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from metric_runs import SLIME_ARGS, healthy_series, slime_metrics_log

    root.mkdir(parents=True, exist_ok=True)
    args = dict(SLIME_ARGS, hf_checkpoint=str(base_dir), load=str(checkpoint), ref_load=str(checkpoint),
                rollout_max_response_len=max_response_len, rollout_temperature=0.0)
    log = slime_metrics_log(healthy_series(3), args)
    for text in GARBLED:
        log.finish_rollout("<|im_start|>user\nWhat is 6*7?<|im_end|>\n<|im_start|>assistant\n", text)
    log.write(root)
    flags = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in args.items())
    (root / "cmdline.txt").write_text(f"python3 train.py {flags}\n")
    if dump is not None:
        target = root / "dump" / "rollout_data" / "0.pt"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(dump, target)
    return root


def step1_run(root: Path, *, checkpoint: Path, base_dir: Path, log_prob: float = -3.2) -> Path:
    """A slime run whose text reads fine but whose step-1 log-probs are huge: the engine sampled
    tokens the trainer finds improbable (what wrong engine weights do), with no garbled rollout."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from metric_runs import SLIME_ARGS, healthy_series, slime_metrics_log

    root.mkdir(parents=True, exist_ok=True)
    args = dict(SLIME_ARGS, hf_checkpoint=str(base_dir), load=str(checkpoint), ref_load=str(checkpoint),
                rollout_temperature=0.0)
    series = healthy_series(3)
    series["log_probs"] = series["log_probs"] + (log_prob - series["log_probs"][0])
    series["ref_log_probs"] = series["log_probs"].copy()
    log = slime_metrics_log(series, args)
    log.write(root)
    flags = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in args.items())
    (root / "cmdline.txt").write_text(f"python3 train.py {flags}\n")
    return root
