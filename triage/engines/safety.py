"""What the triage may send to a live SGLang engine.

A triage probes engines that may be serving production traffic, so the rule is an
allow-list: a request goes out only when it is known to read and not to change the
engine, and only when it is small. Everything else (`update_weights_*`,
`release_memory_occupation`, `pause_generation`, `flush_cache`, `weights_checker`
actions other than `checksum`, ...) is a write, sent only when the user passed
`--allow-engine-writes`.

Reading is not always harmless either: in SGLang 0.5.23 one token id at or above the
vocabulary size makes the scheduler index out of range and the whole server exits. Every
id is checked against the served vocabulary before a request leaves, and a request
whose vocabulary size is unknown carries no ids at all.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from triage.engines import RefusedRequest, TokenOutOfVocabulary, WriteNotAllowed

# (method, path) pairs that only read. POST /weights_checker reads only with action=checksum.
READ_ONLY: frozenset[tuple[str, str]] = frozenset({
    ("GET", "/health"),
    ("GET", "/health_generate"),
    ("GET", "/get_model_info"),
    ("GET", "/model_info"),
    ("GET", "/get_server_info"),
    ("GET", "/server_info"),
    ("GET", "/v1/models"),
    ("POST", "/generate"),
    ("POST", "/get_weights_by_name"),
    ("POST", "/weights_checker"),
})
READ_ONLY_CHECKER_ACTIONS = frozenset({"checksum"})
# What a write does to the engine, for the refusal message.
WRITE_EFFECTS = {
    "/update_weights_from_disk": "replaces the served weights",
    "/update_weights_from_tensor": "replaces the served weights",
    "/update_weights_from_distributed": "replaces the served weights",
    "/update_weight_version": "changes the weight version reported with every answer",
    "/release_memory_occupation": "frees the engine's weights / KV cache",
    "/resume_memory_occupation": "reallocates the engine's memory",
    "/pause_generation": "stops serving requests",
    "/continue_generation": "resumes serving requests",
    "/flush_cache": "drops the radix (prefix) cache",
    "/weights_checker": "snapshots, compares or resets (randomises) the weights",
}
# Keys the triage's /generate requests use; anything else is not sent.
GENERATE_KEYS = frozenset({"input_ids", "sampling_params", "return_logprob", "logprob_start_len",
                           "top_logprobs_num", "return_text_in_logprobs", "stream"})
SAMPLING_KEYS = frozenset({"max_new_tokens", "temperature", "top_p", "top_k", "min_p", "stop", "stop_token_ids",
                           "skip_special_tokens", "no_stop_trim", "ignore_eos"})


@dataclass(frozen=True)
class Limits:
    """How large a request to a live engine may be."""

    max_batch: int = 16
    max_prompt_tokens: int = 4096
    max_new_tokens: int = 512
    max_top_logprobs: int = 20
    max_truncate_rows: int = 64


def is_write(method: str, path: str, payload: Any = None) -> bool:
    """Whether a request could change the engine's state."""
    if (method.upper(), path) not in READ_ONLY:
        return True
    if path == "/weights_checker":
        action = payload.get("action") if isinstance(payload, dict) else None
        return action not in READ_ONLY_CHECKER_ACTIONS
    return False


def check_write(address: str, method: str, path: str, payload: Any, allow_writes: bool) -> None:
    if is_write(method, path, payload) and not allow_writes:
        effect = WRITE_EFFECTS.get(path, "is not a read-only endpoint")
        action = f" action={payload.get('action')!r}" if path == "/weights_checker" and isinstance(payload, dict) else ""
        raise WriteNotAllowed(
            address,
            f"refused to send {method} {path}{action}: it {effect}; "
            "pass --allow-engine-writes to let the triage change the engine",
        )


def _ids(value: Any, where: str, address: str) -> list[list[int]]:
    """input_ids as a list of prompts (one prompt, or a batch)."""
    if not isinstance(value, list) or not value:
        raise RefusedRequest(address, f"refused to send {where}: input_ids must be a non-empty list")
    batch = value if isinstance(value[0], list) else [value]
    for prompt in batch:
        if not isinstance(prompt, list) or not prompt:
            raise RefusedRequest(address, f"refused to send {where}: an empty prompt (the server answers 400)")
        if not all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
            raise RefusedRequest(address, f"refused to send {where}: input_ids must be integers")
    return batch


def check_token_ids(address: str, ids: Iterable[int], vocab_size: int | None, what: str, vocab_source: str = "") -> None:
    """Every id in [0, vocab_size): one id outside kills an SGLang 0.5.23 server."""
    ids = list(ids)
    if not ids:
        return
    if vocab_size is None:
        raise TokenOutOfVocabulary(
            address,
            f"refused to send {what}: the served vocabulary size is unknown (the server's config.json is not "
            "readable here and the run names no model config), and an out-of-vocabulary id kills the server",
        )
    bad = [t for t in ids if t < 0 or t >= vocab_size]
    if bad:
        src = f" ({vocab_source})" if vocab_source else ""
        raise TokenOutOfVocabulary(
            address,
            f"refused to send {what}: token id {bad[0]} is outside the served vocabulary of {vocab_size}{src}"
            f"{f' ({len(bad)} such ids)' if len(bad) > 1 else ''}; an id >= vocab size kills an SGLang 0.5.23 server",
        )


def check_generate(address: str, payload: dict[str, Any], vocab_size: int | None, limits: Limits,
                   max_input_len: int | None = None, vocab_source: str = "") -> None:
    """A /generate request: known keys, a small batch, short prompts, ids inside the vocabulary."""
    extra = sorted(set(payload) - GENERATE_KEYS)
    if extra:
        raise RefusedRequest(address, f"refused to send /generate with {', '.join(extra)}: not a field the triage sends")
    if payload.get("stream"):
        raise RefusedRequest(address, "refused to send a streaming /generate")
    batch = _ids(payload.get("input_ids"), "/generate", address)
    if len(batch) > limits.max_batch:
        raise RefusedRequest(address, f"refused to send /generate with {len(batch)} prompts: at most {limits.max_batch}")
    sp = payload.get("sampling_params") or {}
    extra = sorted(set(sp) - SAMPLING_KEYS)
    if extra:
        raise RefusedRequest(address, f"refused to send sampling params {', '.join(extra)}: not ones the triage sends")
    new = int(sp.get("max_new_tokens", 128))
    if new > limits.max_new_tokens:
        raise RefusedRequest(address, f"refused to ask for {new} new tokens: at most {limits.max_new_tokens}")
    cap = limits.max_prompt_tokens if max_input_len is None else min(limits.max_prompt_tokens, max_input_len)
    for i, prompt in enumerate(batch):
        if len(prompt) > cap:
            raise RefusedRequest(address, f"refused to send prompt {i} of {len(prompt)} tokens: at most {cap}")
    if int(payload.get("top_logprobs_num") or 0) > limits.max_top_logprobs:
        raise RefusedRequest(address, f"refused to ask for more than {limits.max_top_logprobs} top log-probs")
    ids = [t for prompt in batch for t in prompt] + [int(t) for t in sp.get("stop_token_ids") or []]
    check_token_ids(address, ids, vocab_size, "/generate", vocab_source)


def check_request(address: str, method: str, path: str, payload: Any, *, allow_writes: bool,
                  vocab_size: int | None, limits: Limits, max_input_len: int | None = None,
                  vocab_source: str = "") -> None:
    """Raise RefusedRequest unless the request may be sent to a live engine."""
    check_write(address, method, path, payload, allow_writes)
    if path == "/generate" and isinstance(payload, dict):
        check_generate(address, payload, vocab_size, limits, max_input_len, vocab_source)
    elif path == "/get_weights_by_name" and isinstance(payload, dict):
        rows = int(payload.get("truncate_size") or 100)
        if rows > limits.max_truncate_rows:
            raise RefusedRequest(address, f"refused to read {rows} rows of {payload.get('name')}: at most "
                                          f"{limits.max_truncate_rows}")
