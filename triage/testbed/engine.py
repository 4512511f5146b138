"""The inference engine: an HF transformers model behind SGLang's interface.

It loads the `--hf-checkpoint` directory (dtype from the config's `torch_dtype`, as
SGLang's `--dtype auto` does), receives weights from the trainer by HF name
(`update_weights_from_tensor`, like SGLang's `load_weights`), releases and resumes its
memory around training when colocated (`release_memory_occupation` /
`resume_memory_occupation`), and generates with sampling, stop token ids and
per-token log-probs in SGLang's response shape:

    {"text", "output_ids", "meta_info": {"output_token_logprobs": [[logprob, token_id, None], ...],
     "finish_reason": {"type": "length", "length": N} | {"type": "stop", "matched": id},
     "prompt_tokens", "completion_tokens", "cached_tokens", "weight_version"}}

Log-probs are those of the temperature-scaled distribution the token was sampled from
(SGLang's default), so the trainer, dividing its logits by the rollout temperature,
computes the same numbers.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import torch

from triage.testbed.hf_models import load_model


class Engine:
    def __init__(self, hf_checkpoint: Path, dtype: str = "auto", release_buffers: bool = False,
                 dump_dir: Path | None = None) -> None:
        from transformers import AutoConfig, GenerationConfig
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
        self.path = Path(hf_checkpoint)
        config = AutoConfig.from_pretrained(str(self.path))
        if dtype == "auto":
            dtype = str(getattr(config, "dtype", None) or "float32")
        self.dtype = getattr(torch, str(dtype).replace("torch.", ""))
        self.model = load_model(self.path, dtype=self.dtype)
        self.config = self.model.config
        try:
            gen = GenerationConfig.from_pretrained(str(self.path))
            eos = gen.eos_token_id
        except OSError:
            eos = self.config.eos_token_id
        self.eos_token_ids: list[int] = [e for e in (eos if isinstance(eos, list) else [eos]) if e is not None]
        self.pad_token_id = self.config.pad_token_id if self.config.pad_token_id is not None else 0
        self.weight_version = "default"
        self.released: set[str] = set()
        # Whether release_memory_occupation also frees the non-parameter buffers (rotary
        # inv_freq): SGLang keeps them out of the released region; the
        # engine.buffers_released fault puts them in, and resume never restores them.
        self.release_buffers = release_buffers
        self.dump_dir = dump_dir
        self.num_updates = 0

    # -- weights -------------------------------------------------------------------------
    def named_tensors(self) -> dict[str, torch.Tensor]:
        out = dict(self.model.named_parameters())
        out.update(dict(self.model.named_buffers()))
        return out

    def update_weights_from_tensor(self, named: list[tuple[str, torch.Tensor]], weight_version: str | None = None,
                                   flush: bool = True) -> None:
        params = dict(self.model.named_parameters())
        with torch.no_grad():
            for name, tensor in named:
                if name not in params:
                    raise KeyError(name)
                if params[name].shape != tensor.shape:
                    raise ValueError(f"{name}: shape {tuple(tensor.shape)} does not match the engine's "
                                     f"{tuple(params[name].shape)}")
                params[name].copy_(tensor.to(params[name].dtype))
        if weight_version is not None:
            self.weight_version = weight_version
        if flush:
            self.num_updates += 1
            if self.dump_dir is not None:
                self.dump_weights(self.dump_dir)

    def get_weights_by_name(self, name: str, truncate_size: int = 100) -> list | None:
        tensor = self.named_tensors().get(name)
        if tensor is None:
            return None
        return tensor.detach().float().flatten()[:truncate_size].tolist()

    def release_memory_occupation(self, tags: list[str] | None = None) -> None:
        """Free weights (and KV cache): contents are gone until the trainer sends weights again."""
        tags = tags or ["weights", "kv_cache"]
        if "weights" in tags:
            with torch.no_grad():
                for p in self.model.parameters():
                    p.zero_()
                if self.release_buffers:
                    for b in self.model.buffers():
                        b.zero_()
        self.released.update(tags)

    def resume_memory_occupation(self, tags: list[str] | None = None) -> None:
        tags = tags or ["weights", "kv_cache"]
        self.released.difference_update(tags)

    def dump_weights(self, out: Path) -> Path:
        """Save every parameter and buffer the engine holds, by HF name (the guides' load_weights dump)."""
        from safetensors.torch import save_file

        out.mkdir(parents=True, exist_ok=True)
        params = {n: p.detach().float().contiguous().clone() for n, p in self.model.named_parameters()}
        buffers = {n: b.detach().float().contiguous().clone() for n, b in self.model.named_buffers()}
        save_file({**params, **buffers}, str(out / "model.safetensors"), metadata={"format": "pt"})
        manifest = {
            "format": "engine_weights",
            "model_path": str(self.path),
            "dtype": str(self.dtype).replace("torch.", ""),
            "weight_version": self.weight_version,
            "num_updates": self.num_updates,
            "files": ["model.safetensors"],
            "parameters": sorted(params),
            "buffers": sorted(buffers),
        }
        (out / "engine_weights.json").write_text(json.dumps(manifest, indent=2) + "\n")
        return out

    # -- generation ----------------------------------------------------------------------
    @torch.no_grad()
    def generate(self, input_ids: list[list[int]], sampling_params: dict[str, Any], return_logprob: bool = True,
                 seed: int = 0) -> list[dict[str, Any]]:
        """Sample continuations for a batch of prompts (left-padded, with a KV cache)."""
        if "weights" in self.released:
            raise RuntimeError("generate called while the engine's weights are released")
        temperature = float(sampling_params.get("temperature", 1.0))
        max_new = int(sampling_params.get("max_new_tokens", 16))
        stop_ids = set(sampling_params.get("stop_token_ids") or [])
        if not sampling_params.get("ignore_eos", False):
            stop_ids |= set(self.eos_token_ids)
        gen = torch.Generator().manual_seed(seed)
        t0 = time.time()
        context = self.config.max_position_embeddings
        too_long = [i for i, x in enumerate(input_ids) if len(x) >= context]
        if too_long:
            # SGLang aborts a request whose input does not fit the context window.
            keep = [i for i in range(len(input_ids)) if i not in set(too_long)]
            kept = self.generate([input_ids[i] for i in keep], sampling_params, return_logprob, seed) if keep else []
            results: list[dict[str, Any]] = [None] * len(input_ids)  # type: ignore[list-item]
            for i, r in zip(keep, kept):
                results[i] = r
            for i in too_long:
                message = (f"The input ({len(input_ids[i])} tokens) is longer than the model's context length "
                           f"({context} tokens).")
                results[i] = {"text": "", "output_ids": [], "meta_info": {
                    "id": f"req-{seed}-{i}", "finish_reason": {"type": "abort", "message": message},
                    "prompt_tokens": len(input_ids[i]), "completion_tokens": 0, "cached_tokens": 0,
                    "weight_version": self.weight_version, "output_token_logprobs": []}}
            return results
        n = len(input_ids)
        width = max(len(x) for x in input_ids)
        ids = torch.full((n, width), self.pad_token_id, dtype=torch.long)
        mask = torch.zeros((n, width), dtype=torch.long)
        for i, seq in enumerate(input_ids):
            ids[i, width - len(seq):] = torch.tensor(seq)
            mask[i, width - len(seq):] = 1
        positions = (mask.cumsum(-1) - 1).clamp_min(0)
        out_tokens: list[list[int]] = [[] for _ in range(n)]
        out_logprobs: list[list[float]] = [[] for _ in range(n)]
        finish: list[dict[str, Any] | None] = [None] * n
        past = None
        step_ids, step_pos = ids, positions
        for _ in range(max_new):
            out = self.model(input_ids=step_ids, attention_mask=mask, position_ids=step_pos, past_key_values=past,
                             use_cache=True)
            past = out.past_key_values
            logits = out.logits[:, -1, :].float()
            if temperature > 0:
                logprobs = torch.log_softmax(logits / temperature, dim=-1)
                next_ids = torch.multinomial(logprobs.exp(), 1, generator=gen).squeeze(-1)
            else:
                logprobs = torch.log_softmax(logits, dim=-1)
                next_ids = logits.argmax(-1)
            for i in range(n):
                if finish[i] is not None:
                    continue
                tok = int(next_ids[i])
                out_tokens[i].append(tok)
                out_logprobs[i].append(float(logprobs[i, tok]))
                if tok in stop_ids:
                    finish[i] = {"type": "stop", "matched": tok}
                elif len(out_tokens[i]) >= max_new:
                    finish[i] = {"type": "length", "length": max_new}
            if all(f is not None for f in finish):
                break
            next_ids = next_ids.masked_fill(torch.tensor([f is not None for f in finish]), self.pad_token_id)
            step_ids = next_ids[:, None]
            mask = torch.cat([mask, torch.ones((n, 1), dtype=torch.long)], dim=-1)
            step_pos = step_pos[:, -1:] + 1
        elapsed = time.time() - t0
        results = []
        for i in range(n):
            meta: dict[str, Any] = {
                "id": f"req-{seed}-{i}",
                "finish_reason": finish[i] or {"type": "length", "length": max_new},
                "prompt_tokens": len(input_ids[i]),
                "completion_tokens": len(out_tokens[i]),
                "cached_tokens": 0,
                "weight_version": self.weight_version,
                "e2e_latency": elapsed,
            }
            if return_logprob:
                meta["output_token_logprobs"] = [[lp, t, None] for lp, t in zip(out_logprobs[i], out_tokens[i])]
            results.append({"text": None, "output_ids": out_tokens[i], "meta_info": meta})
        return results

    def server_info(self) -> dict[str, Any]:
        return {
            "model_path": str(self.path),
            "tokenizer_path": str(self.path),
            "dtype": str(self.dtype).replace("torch.", ""),
            "device": "cpu",
            "tp_size": 1,
            "dp_size": 1,
            "context_length": self.config.max_position_embeddings,
            "weight_version": self.weight_version,
            "version": "0.5.23-testbed",
        }
