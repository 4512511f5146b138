"""The SGLang adapter, the live-weights comparison and the isolated rollout against a mock SGLang.

The mock answers with the bodies SGLang 0.5.23 really sends (see shared/sglang-cpu/README.md:
`output_token_logprobs` rows `[logprob, id, null]`, `finish_reason` dicts, 400
`{"error": {"message": ...}}`, `/weights_checker` ranks); the tier in tests/sglang runs
the same code against real servers.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch
from safetensors.torch import load_file, save_file

from triage.engines import (
    EngineDisconnected,
    EngineRejected,
    EngineTimeout,
    EngineUnreachable,
    Sampling,
    TokenOutOfVocabulary,
    WriteNotAllowed,
)
from triage.engines.safety import is_write
from triage.engines.sglang import NotSupported, SGLangEngine
from triage.weights.convert import ModelDims
from triage.weights.live import compare_live, served_dtype, shard_for_rank, tensor_checksum, zeros_checksum
from triage.weights.readers import open_checkpoint, open_weights

URL = "http://10.1.2.3:30000"
VOCAB = 64
DIMS = dict(hidden=8, heads=2, kv=1, head_dim=4, inter=16, layers=2)


# --- a tiny model and a mock server ---------------------------------------------------------


def tiny_state(seed: int, qkv_bias: bool = True) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    h, hd, inter = DIMS["hidden"], DIMS["head_dim"], DIMS["inter"]
    sd = {"model.embed_tokens.weight": torch.randn(VOCAB, h, generator=g),
          "lm_head.weight": torch.randn(VOCAB, h, generator=g), "model.norm.weight": torch.ones(h)}
    for i in range(DIMS["layers"]):
        p = f"model.layers.{i}"
        sd[f"{p}.self_attn.q_proj.weight"] = torch.randn(DIMS["heads"] * hd, h, generator=g)
        sd[f"{p}.self_attn.k_proj.weight"] = torch.randn(DIMS["kv"] * hd, h, generator=g)
        sd[f"{p}.self_attn.v_proj.weight"] = torch.randn(DIMS["kv"] * hd, h, generator=g)
        if qkv_bias:
            for x, n in (("q", DIMS["heads"]), ("k", DIMS["kv"]), ("v", DIMS["kv"])):
                sd[f"{p}.self_attn.{x}_proj.bias"] = torch.zeros(n * hd)
        sd[f"{p}.self_attn.o_proj.weight"] = torch.randn(h, DIMS["heads"] * hd, generator=g)
        sd[f"{p}.mlp.gate_proj.weight"] = torch.randn(inter, h, generator=g)
        sd[f"{p}.mlp.up_proj.weight"] = torch.randn(inter, h, generator=g)
        sd[f"{p}.mlp.down_proj.weight"] = torch.randn(h, inter, generator=g)
        sd[f"{p}.input_layernorm.weight"] = torch.ones(h)
        sd[f"{p}.post_attention_layernorm.weight"] = torch.ones(h)
    return sd


def write_hf(d: Path, sd: dict[str, torch.Tensor], model_type: str = "qwen2") -> Path:
    d.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous().clone() for k, v in sd.items()}, str(d / "model.safetensors"))
    cfg = {"model_type": model_type, "architectures": ["Qwen2ForCausalLM" if model_type == "qwen2" else "LlamaForCausalLM"],
           "hidden_size": DIMS["hidden"], "num_attention_heads": DIMS["heads"], "num_key_value_heads": DIMS["kv"],
           "intermediate_size": DIMS["inter"], "num_hidden_layers": DIMS["layers"], "vocab_size": VOCAB,
           "tie_word_embeddings": False, "rms_norm_eps": 1e-6, "max_position_embeddings": 128, "dtype": "float32",
           "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"}, "eos_token_id": 2, "pad_token_id": 0}
    (d / "config.json").write_text(json.dumps(cfg))
    return d


def dims() -> ModelDims:
    return ModelDims(hidden_size=DIMS["hidden"], num_attention_heads=DIMS["heads"], num_query_groups=DIMS["kv"],
                     head_dim=DIMS["head_dim"], num_layers=DIMS["layers"], vocab_size=VOCAB)


def sha(t: torch.Tensor) -> str:
    return hashlib.sha256(t.contiguous().numpy().tobytes()).hexdigest()[:16]


def engine_checksums(sd: dict[str, torch.Tensor]) -> dict[str, str]:
    """What SGLang's /weights_checker reports for a state dict it loaded (written out independently)."""
    out = {}
    for i in range(DIMS["layers"]):
        p = f"model.layers.{i}"
        out[f"{p}.self_attn.qkv_proj.weight"] = sha(torch.cat([sd[f"{p}.self_attn.{x}_proj.weight"] for x in "qkv"]))
        if f"{p}.self_attn.q_proj.bias" in sd:
            out[f"{p}.self_attn.qkv_proj.bias"] = sha(torch.cat([sd[f"{p}.self_attn.{x}_proj.bias"] for x in "qkv"]))
        out[f"{p}.mlp.gate_up_proj.weight"] = sha(torch.cat([sd[f"{p}.mlp.gate_proj.weight"], sd[f"{p}.mlp.up_proj.weight"]]))
        for n in ("self_attn.o_proj.weight", "mlp.down_proj.weight", "input_layernorm.weight",
                  "post_attention_layernorm.weight"):
            out[f"{p}.{n}"] = sha(sd[f"{p}.{n}"])
    for n in ("model.embed_tokens.weight", "lm_head.weight", "model.norm.weight"):
        out[n] = sha(sd[n])
    return out


class MockSGLang:
    """A stand-in SGLang 0.5.23 HTTP server: real response shapes, every call recorded."""

    def __init__(self, tmp: Path, served: dict[str, torch.Tensor] | None = None, device: str = "cpu",
                 by_name: bool = False, texts: list[str] | None = None) -> None:
        self.model_dir = write_hf(tmp / "served", served or tiny_state(1))
        self.served = served or tiny_state(1)
        self.device = device
        self.by_name = by_name
        self.texts = texts or ["The answer is 42, as the sum of the two numbers shows."]
        self.calls: list[tuple[str, str, Any]] = []
        self.script: dict[str, list[Any]] = {}  # path -> queued exceptions / (status, body) answered first
        self.checksum_ranks: list[dict[str, Any]] | None = None

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    def handle(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        body = json.loads(request.content) if request.content else None
        self.calls.append((request.method, path, body))
        queued = self.script.get(path)
        if queued:
            item = queued.pop(0)
            if isinstance(item, Exception):
                raise item
            return httpx.Response(item[0], json=item[1])
        if path == "/get_server_info":
            return httpx.Response(200, json={"version": "0.5.23", "device": self.device, "dtype": "float32",
                                             "tp_size": 1, "pp_size": 1, "dp_size": 1, "max_total_num_tokens": 16384,
                                             "max_req_input_len": 2042, "model_path": str(self.model_dir)})
        if path == "/get_model_info":
            arch = "LlamaForCausalLM" if self.by_name else "Qwen2ForCausalLM"
            return httpx.Response(200, json={"model_path": str(self.model_dir), "tokenizer_path": str(self.model_dir),
                                             "model_type": "qwen2", "architectures": [arch], "weight_version": "default"})
        if path == "/health_generate":
            return httpx.Response(200)
        if path == "/generate":
            return httpx.Response(200, json=self.generate(body))
        if path == "/weights_checker":
            ranks = self.checksum_ranks or [{"checksums": engine_checksums(self.served), "per_gpu_checksum": "x",
                                             "parallelism_info": [{"role": "target", "tp_rank": 0, "tp_size": 1,
                                                                   "dp_rank": 0, "dp_size": 1, "pp_rank": 0,
                                                                   "pp_size": 1, "rank": 0, "size": 1}]}]
            return httpx.Response(200, json={"success": True, "message": "Success.", "ranks": ranks,
                                             "per_engine_checksum": "y"})
        if path == "/get_weights_by_name":
            name = body["name"]
            if not self.by_name or name not in self.served:
                return httpx.Response(400, json={"error": {"message": "Get parameter by name failed"}})
            return httpx.Response(200, json=self.served[name][: body["truncate_size"]].tolist())
        if path == "/update_weights_from_disk":
            return httpx.Response(200, json={"success": True, "message": "Succeeded to update model weights.",
                                             "num_paused_requests": 0})
        return httpx.Response(404, json={"detail": "Not Found"})

    def generate(self, body: dict[str, Any]) -> Any:
        ids = body["input_ids"]
        batch = ids if isinstance(ids[0], list) else [ids]
        starts = body.get("logprob_start_len")
        starts = starts if isinstance(starts, list) else [starts] * len(batch)
        n = body["sampling_params"]["max_new_tokens"]
        out = []
        for i, prompt in enumerate(batch):
            gen = [(7 + j) % VOCAB for j in range(n)]
            meta = {"finish_reason": {"type": "length", "length": n}, "prompt_tokens": len(prompt),
                    "weight_version": "default",
                    "output_token_logprobs": [[-1.5, t, None] for t in gen],
                    "input_token_logprobs": [] if starts[i] is None else
                    [[None, prompt[starts[i]], None]] + [[-0.25, t, None] for t in prompt[starts[i] + 1:]]}
            out.append({"text": self.texts[i % len(self.texts)] if n else "", "output_ids": gen, "meta_info": meta})
        return out if isinstance(ids[0], list) else out[0]

    def sent(self, path: str) -> int:
        return sum(1 for _m, p, _b in self.calls if p == path)


def engine(mock: MockSGLang, **kw: Any) -> SGLangEngine:
    return SGLangEngine(URL, transport=mock.transport(), backoff_s=0.0, **kw)


# --- the adapter ----------------------------------------------------------------------------


def test_generate_parses_real_shapes_and_records_every_request(tmp_path):
    mock = MockSGLang(tmp_path)
    e = engine(mock)
    gens = e.generate([[5, 6, 7], [8, 9]], Sampling(max_new_tokens=3, temperature=0.0))
    assert [g.output_ids for g in gens] == [[7, 8, 9], [7, 8, 9]]
    assert gens[0].output_logprobs == [-1.5, -1.5, -1.5]
    assert gens[0].finish.type == "length" and gens[0].finish.length == 3 and gens[0].finish.truncated
    assert gens[1].prompt_tokens == 2 and gens[0].text.startswith("The answer")
    # the vocabulary and the input limit were read before the first /generate, once
    assert [(r.method, r.path, r.status) for r in e.requests] == [
        ("GET", "/get_model_info", 200), ("GET", "/get_server_info", 200), ("POST", "/generate", 200)]
    assert "2 prompts, 5 tokens, max_new_tokens 3" in e.requests[-1].note
    assert e.describe()["vocab_size"] == VOCAB


def test_score_drops_the_null_first_row_of_input_logprobs(tmp_path):
    mock = MockSGLang(tmp_path)
    scores = engine(mock).score([[5, 6, 7, 8, 9]], [3])
    assert scores == [[-0.25, -0.25]]
    body = [b for _m, p, b in mock.calls if p == "/generate"][0]
    assert body["logprob_start_len"] == 2 and body["sampling_params"]["max_new_tokens"] == 0


def test_out_of_vocabulary_id_is_refused_before_anything_is_sent(tmp_path):
    mock = MockSGLang(tmp_path)
    e = engine(mock)
    with pytest.raises(TokenOutOfVocabulary) as err:
        e.generate([[1, 2, VOCAB]], Sampling(max_new_tokens=2))
    assert f"token id {VOCAB} is outside the served vocabulary of {VOCAB}" in str(err.value)
    assert URL in str(err.value) and mock.sent("/generate") == 0
    with pytest.raises(TokenOutOfVocabulary):
        e.generate([[1, 2]], Sampling(max_new_tokens=2, stop_token_ids=(VOCAB + 5,)))
    assert mock.sent("/generate") == 0


def test_unknown_vocabulary_means_no_token_ids_are_sent(tmp_path):
    mock = MockSGLang(tmp_path)
    (mock.model_dir / "config.json").unlink()
    with pytest.raises(TokenOutOfVocabulary, match="vocabulary size is unknown"):
        engine(mock).generate([[1, 2]], Sampling(max_new_tokens=2))
    assert mock.sent("/generate") == 0
    # a hint from the run's own config is used when the server's config is not readable here
    gens = engine(mock, vocab_size=VOCAB, vocab_source="run config").generate([[1, 2]], Sampling(max_new_tokens=2))
    assert len(gens) == 1


@pytest.mark.parametrize("call", [
    lambda e: e.update_weights_from_disk("/some/dir"),
    lambda e: e.flush_cache(),
    lambda e: e.release_memory_occupation(["weights"]),
    lambda e: e.resume_memory_occupation(),
    lambda e: e.pause_generation(),
    lambda e: e.update_weight_version("v2"),
    lambda e: e.request("POST", "/weights_checker", {"action": "reset_tensors"}),
])
def test_writes_are_refused_without_the_flag_and_nothing_is_sent(tmp_path, call):
    mock = MockSGLang(tmp_path)
    with pytest.raises(WriteNotAllowed, match="--allow-engine-writes"):
        call(engine(mock))
    assert mock.calls == []


def test_a_write_with_the_flag_is_sent_once_and_never_retried(tmp_path):
    mock = MockSGLang(tmp_path)
    mock.script["/update_weights_from_disk"] = [(503, {"error": {"message": "busy"}})]
    e = engine(mock, allow_writes=True)
    with pytest.raises(EngineRejected, match="503: busy"):
        e.update_weights_from_disk("/new/weights")
    assert mock.sent("/update_weights_from_disk") == 1
    assert e.update_weights_from_disk("/new/weights")["success"] is True


def test_bad_path_update_reports_the_servers_message(tmp_path):
    mock = MockSGLang(tmp_path)
    mock.script["/update_weights_from_disk"] = [(400, {"success": False, "num_paused_requests": 0,
                                                       "message": "Failed to get weights iterator: Repo id must ..."})]
    with pytest.raises(EngineRejected, match="400: Failed to get weights iterator"):
        engine(mock, allow_writes=True).update_weights_from_disk("/nonexistent")


def test_reads_retry_refused_connections_then_name_the_url(tmp_path):
    mock = MockSGLang(tmp_path)
    refused = httpx.ConnectError("[Errno 111] Connection refused")
    mock.script["/get_model_info"] = [refused, refused]
    e = engine(mock, retries=2)
    assert e.model_info().model_type == "qwen2"
    assert [r.status for r in e.requests] == [None, None, 200]
    assert e.requests[0].note == "connection refused"
    mock.script["/get_server_info"] = [refused] * 3
    with pytest.raises(EngineUnreachable) as err:
        e.server_info()
    assert str(err.value).startswith(URL) and "connection refused after 3 attempts" in str(err.value)
    assert "the server went away" in str(err.value)  # it had answered before


def test_503_is_retried_and_400_is_not(tmp_path):
    mock = MockSGLang(tmp_path)
    mock.script["/get_model_info"] = [(503, {"error": {"message": "overloaded"}})]
    e = engine(mock)
    assert e.model_info().weight_version == "default"
    assert mock.sent("/get_model_info") == 2
    mock.script["/generate"] = [(400, {"error": {"message": "input_ids cannot be empty."}})]
    with pytest.raises(EngineRejected) as err:
        e.generate([[1]], Sampling(max_new_tokens=1))
    assert err.value.status == 400 and "input_ids cannot be empty." in str(err.value)
    assert mock.sent("/generate") == 1


def test_slow_and_dying_servers_give_one_line_errors(tmp_path):
    mock = MockSGLang(tmp_path)
    e = engine(mock, timeout=2.0)
    e.model_info(), e.server_info()
    mock.script["/generate"] = [httpx.ReadTimeout("timed out")]
    with pytest.raises(EngineTimeout, match="no answer within 2 s"):
        e.generate([[1, 2]], Sampling(max_new_tokens=1))
    mock.script["/generate"] = [httpx.RemoteProtocolError("Server disconnected without sending a response.")]
    with pytest.raises(EngineDisconnected) as err:
        e.generate([[1, 2]], Sampling(max_new_tokens=1))
    assert "closed the connection without answering POST /generate" in str(err.value)
    assert "\n" not in str(err.value)
    assert mock.sent("/generate") == 2  # neither was retried


def test_get_weights_by_name_unsupported_is_a_typed_answer(tmp_path):
    mock = MockSGLang(tmp_path)
    got = engine(mock).weights_by_name("model.layers.0.self_attn.q_proj.weight", 2)
    assert isinstance(got, NotSupported) and "Qwen2ForCausalLM" in got.reason
    mock.by_name = True
    rows = engine(mock).weights_by_name("model.norm.weight", 3)
    assert rows.rows.tolist() == [1.0, 1.0, 1.0]


def test_checksums_say_whether_they_can_be_recomputed(tmp_path):
    cpu = engine(MockSGLang(tmp_path / "a")).weights_checksums()
    gpu = engine(MockSGLang(tmp_path / "b", device="cuda")).weights_checksums()
    assert cpu.comparable and cpu.hash_kind == "sha256" and "model.layers.0.mlp.gate_up_proj.weight" in cpu.names()
    assert not gpu.comparable and gpu.device == "cuda"


def test_only_reads_are_read_only():
    assert not is_write("GET", "/get_model_info") and not is_write("POST", "/generate")
    assert not is_write("POST", "/weights_checker", {"action": "checksum"})
    for path in ("/update_weights_from_disk", "/flush_cache", "/release_memory_occupation", "/pause_generation",
                 "/abort_request", "/set_internal_state", "/update_weights_from_tensor"):
        assert is_write("POST", path)
    assert is_write("POST", "/weights_checker", {"action": "snapshot"})


def test_host_port_without_scheme_is_accepted_and_junk_is_not():
    assert SGLangEngine("127.0.0.1:30000").address == "http://127.0.0.1:30000"
    with pytest.raises(EngineUnreachable, match="expected http://HOST:PORT"):
        SGLangEngine("ftp://x")


# --- checksums and layouts --------------------------------------------------------------------


def test_checksum_is_sha256_of_the_raw_bytes():
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    assert tensor_checksum(t) == hashlib.sha256(t.numpy().tobytes()).hexdigest()[:16]
    assert tensor_checksum(t.t()) == hashlib.sha256(t.t().contiguous().numpy().tobytes()).hexdigest()[:16]
    b = t.to(torch.bfloat16)
    assert tensor_checksum(b) == hashlib.sha256(b.view(torch.int16).numpy().tobytes()).hexdigest()[:16]
    assert zeros_checksum(24) == tensor_checksum(torch.zeros(2, 3)) == hashlib.sha256(bytes(24)).hexdigest()[:16]


def test_auto_dtype_follows_sglang():
    assert served_dtype("float32", None) == [torch.float32]
    assert served_dtype("auto", {"dtype": "bfloat16"}) == [torch.bfloat16]
    assert served_dtype("auto", {"torch_dtype": "float32", "model_type": "qwen2"}) == [torch.float16]
    assert served_dtype("auto", {"torch_dtype": "float32", "model_type": "gemma2"}) == [torch.bfloat16]
    assert len(served_dtype("auto", None)) == 3


def test_tensor_parallel_shards_follow_sglangs_layout():
    d = ModelDims(hidden_size=8, num_attention_heads=4, num_query_groups=1, head_dim=2)
    q, k, v = torch.arange(8.0)[:, None], torch.tensor([[100.0], [101.0]]), torch.tensor([[200.0], [201.0]])
    qkv = torch.cat([q, k, v])
    r1 = shard_for_rank("model.layers.0.self_attn.qkv_proj.weight", qkv, d, 2, 1)
    assert r1[:, 0].tolist() == [4, 5, 6, 7, 100, 101, 200, 201]  # q heads 2-3, the one KV head replicated
    gu = torch.arange(8.0)[:, None]
    assert shard_for_rank("model.layers.0.mlp.gate_up_proj.weight", gu, d, 2, 0)[:, 0].tolist() == [0, 1, 4, 5]
    assert shard_for_rank("model.layers.0.self_attn.o_proj.weight", torch.zeros(3, 4), d, 2, 1).shape == (3, 2)
    emb = shard_for_rank("model.embed_tokens.weight", torch.ones(100, 2), d, 1, 0)
    assert emb.shape == (128, 2) and emb[100:].abs().sum() == 0  # rows padded to 64 with zeros


# --- the live comparison ----------------------------------------------------------------------


def run_compare(tmp_path: Path, served: dict[str, torch.Tensor], trained: dict[str, torch.Tensor],
                base: dict[str, torch.Tensor] | None = None, **mock_kw: Any):
    ckpt = write_hf(tmp_path / "ckpt", trained)
    mock = MockSGLang(tmp_path, served=served, **mock_kw)
    e = engine(mock)
    baseline = open_weights(write_hf(tmp_path / "base", base)) if base is not None else None
    result = compare_live(e, open_checkpoint(ckpt), dims=dims(), family=None, baseline=baseline)
    return result, mock


def test_the_right_weights_match_in_one_checksum_request(tmp_path):
    trained = tiny_state(2)
    result, mock = run_compare(tmp_path, dict(trained), trained)
    assert result.outcome == "match", result.summary
    assert result.evidence["via"] == "checksums" and result.evidence["tensors_compared"] == 17
    assert result.evidence["checkpoint_passes"] == 1  # nothing to explain: no variants hashed, no baseline read
    assert mock.sent("/weights_checker") == 1 and mock.sent("/get_weights_by_name") == 0
    assert result.evidence["request_count"] == len(result.evidence["requests"]) == 3


def test_a_pipeline_stage_without_its_offset_is_a_layer_shift(tmp_path):
    trained, base = tiny_state(2), tiny_state(1)
    served = dict(trained)
    for k in trained:
        if k.startswith("model.layers.1."):
            served[k.replace("layers.1.", "layers.0.")] = trained[k]  # stage 1 sent its layer as local layer 0
            served[k] = base[k]  # layer 1 never updated
    result, _ = run_compare(tmp_path, served, trained, base)
    assert result.outcome == "shifted_layers", result.summary
    ev = result.evidence
    assert ev["offset"] == 1 and ev["engine_layers"] == [0] and ev["checkpoint_layers"] == [1]
    assert ev["stale_layers"] == [1] and ev["counts"]["shifted"] == 4  # qkv, o, gate_up, down (norms are all ones)
    assert ev["checkpoint_passes"] == 2


def test_gate_and_up_swapped_is_a_name_mapping_bug(tmp_path):
    trained = tiny_state(2)
    served = dict(trained)
    for i in range(DIMS["layers"]):
        g, u = f"model.layers.{i}.mlp.gate_proj.weight", f"model.layers.{i}.mlp.up_proj.weight"
        served[g], served[u] = trained[u], trained[g]
    result, _ = run_compare(tmp_path, served, trained)
    assert result.outcome == "misnamed", result.summary
    assert {p["how"] for p in result.evidence["pairs"]} == {"gate_up_swapped"}
    assert result.evidence["counts"]["misnamed"] == 2


def test_a_tensor_found_under_another_name_is_misnamed(tmp_path):
    trained = tiny_state(2)
    served = dict(trained)
    served["model.layers.0.self_attn.o_proj.weight"] = trained["model.layers.0.self_attn.q_proj.weight"]
    result, _ = run_compare(tmp_path, served, trained)
    assert result.outcome == "misnamed"
    assert {"engine": "model.layers.0.self_attn.o_proj.weight", "holds": "model.layers.0.self_attn.q_proj.weight",
            "how": "part"} in result.evidence["pairs"]


def test_stale_zeroed_and_unexplained_tensors(tmp_path):
    trained, base = tiny_state(2), tiny_state(1)
    stale = dict(trained)
    for i in range(DIMS["layers"]):
        for n in ("gate_proj", "up_proj", "down_proj"):
            stale[f"model.layers.{i}.mlp.{n}.weight"] = base[f"model.layers.{i}.mlp.{n}.weight"]
    result, _ = run_compare(tmp_path / "stale", stale, trained, base)
    assert result.outcome == "stale_or_missing" and result.evidence["counts"]["stale"] == 4
    assert "still equal the initial weights" in result.summary

    zeroed = dict(trained)
    zeroed["lm_head.weight"] = torch.zeros_like(trained["lm_head.weight"])
    result, _ = run_compare(tmp_path / "zero", zeroed, trained, base)
    assert result.outcome == "zeroed" and result.evidence["zeroed"] == ["lm_head.weight"]

    noisy = dict(trained)
    noisy["model.layers.1.self_attn.o_proj.weight"] = trained["model.layers.1.self_attn.o_proj.weight"] + 1e-3
    result, _ = run_compare(tmp_path / "noise", noisy, trained, base)
    assert result.outcome == "value_mismatch"
    worst = result.evidence["worst"][0]
    assert worst["name"] == "model.layers.1.self_attn.o_proj.weight"
    assert worst["expected_checksum"] == sha(trained["model.layers.1.self_attn.o_proj.weight"])


def test_unlike_hashes_are_not_compared(tmp_path):
    trained = tiny_state(2)
    result, mock = run_compare(tmp_path, dict(trained), trained, device="cuda")
    assert result.outcome == "hash_incomparable"
    assert "made on cuda" in result.summary and "Get parameter by name failed" in result.summary
    assert mock.sent("/get_weights_by_name") == 1  # one try says it for the model class


def test_a_gpu_llama_engine_is_compared_by_leading_rows(tmp_path):
    trained, base = tiny_state(2, qkv_bias=False), tiny_state(1, qkv_bias=False)
    served = dict(trained)
    for k in trained:
        if k.startswith("model.layers.1."):
            served[k.replace("layers.1.", "layers.0.")] = trained[k]
            served[k] = base[k]
    result, mock = run_compare(tmp_path, served, trained, base, device="cuda", by_name=True)
    assert result.outcome == "shifted_layers" and result.evidence["via"] == "get_weights_by_name"
    assert result.evidence["offset"] == 1 and result.evidence["counts"]["shifted"] == 7  # q, k, v, o, gate, up, down
    assert mock.sent("/get_weights_by_name") == len(trained)


def test_tensor_parallel_engine_ranks_are_compared_shard_by_shard(tmp_path):
    trained = tiny_state(2)
    d = dims()

    def rank_sums(sd: dict[str, torch.Tensor], rank: int) -> dict[str, str]:
        full = {}
        for i in range(DIMS["layers"]):
            p = f"model.layers.{i}"
            full[f"{p}.self_attn.qkv_proj.weight"] = torch.cat([sd[f"{p}.self_attn.{x}_proj.weight"] for x in "qkv"])
            full[f"{p}.self_attn.qkv_proj.bias"] = torch.cat([sd[f"{p}.self_attn.{x}_proj.bias"] for x in "qkv"])
            full[f"{p}.mlp.gate_up_proj.weight"] = torch.cat([sd[f"{p}.mlp.gate_proj.weight"], sd[f"{p}.mlp.up_proj.weight"]])
            for n in ("self_attn.o_proj.weight", "mlp.down_proj.weight", "input_layernorm.weight",
                      "post_attention_layernorm.weight"):
                full[f"{p}.{n}"] = sd[f"{p}.{n}"]
        for n in ("model.embed_tokens.weight", "lm_head.weight", "model.norm.weight"):
            full[n] = sd[n]
        return {n: sha(shard_for_rank(n, t, d, 2, rank)) for n, t in full.items()}

    bad = dict(trained)
    bad["model.layers.1.mlp.down_proj.weight"] = trained["model.layers.1.mlp.down_proj.weight"].clone()
    bad["model.layers.1.mlp.down_proj.weight"][:, -1] += 1  # only rank 1's half of the row-parallel weight
    ranks = [{"checksums": rank_sums(trained if r == 0 else bad, r),
              "parallelism_info": [{"role": "target", "tp_rank": r, "tp_size": 2, "dp_rank": 0, "pp_rank": 0,
                                    "pp_size": 1}]} for r in range(2)]
    ckpt = write_hf(tmp_path / "ckpt", trained)
    mock = MockSGLang(tmp_path, served=trained)
    mock.checksum_ranks = ranks
    result = compare_live(engine(mock), open_checkpoint(ckpt), dims=d, family=None)
    assert result.outcome == "value_mismatch"
    assert result.evidence["worst"] == [{"name": "model.layers.1.mlp.down_proj.weight", "tp_rank": 1,
                                         "engine_checksum": ranks[1]["checksums"]["model.layers.1.mlp.down_proj.weight"],
                                         "expected_checksum": rank_sums(trained, 1)["model.layers.1.mlp.down_proj.weight"]}]


# --- the probes, on run directories ---------------------------------------------------------

GARBLED = ["нафтаξλ大学 vergütung ماهي สวัสดี Привет 的 αβγ abcдежfgh", "ysicsOrg\ufffd\ufffd DRM\x03 cosponsoredNexus мosqu ξλ"]


def make_run(root: Path, hf: Path | None, samples: int = 3, args: str = "", ckpt: Path | None = None):
    from triage.run import open_run

    root.mkdir(parents=True, exist_ok=True)
    flags = f"--hf-checkpoint {hf} " if hf else ""
    flags += f"--load {ckpt} " if ckpt else ""
    (root / "cmdline.txt").write_text(f"python3 train.py {flags}--rollout-temperature 0 "
                                      f"--rollout-max-response-len 8 {args}\n")
    d = root / "dump" / "rollout_data"
    d.mkdir(parents=True)
    rows = [{"index": i, "tokens": [3 + i, 4, 5, 6, 10, 11, 12], "response_length": 3, "status": "completed",
             "rollout_log_probs": [-0.5, -0.25, -0.25], "response": "x", "reward": 0.0} for i in range(samples)]
    rows.append(dict(rows[0], index=99))  # the same prompt again (n_samples_per_prompt > 1): sent once
    torch.save({"rollout_id": 0, "samples": rows}, d / "0.pt")
    return open_run(str(root))


def patch_transport(monkeypatch, mock: MockSGLang) -> None:
    import probes.live_weights as lw

    real = lw.connect

    def connect(url, run, **kw):
        return real(url, run, transport=mock.transport(), backoff_s=0.0, **kw)

    monkeypatch.setattr(lw, "connect", connect)


def test_isolated_rollout_on_a_live_engine_judges_text_and_compares_logprobs(tmp_path, monkeypatch):
    from probes.isolated_rollout import IsolatedRollout

    mock = MockSGLang(tmp_path)
    patch_transport(monkeypatch, mock)
    run = make_run(tmp_path / "run", mock.model_dir)
    run.engines.append(URL)
    obs = IsolatedRollout().examine(run)
    assert obs.outcome == "truncated", obs.summary  # every response ran to the run's own 8-token limit
    ev = obs.evidence
    assert ev["prompts"] == 3 and ev["finish_reasons"] == {"length": 3} and ev["length_limit"]["is_the_runs"]
    assert ev["sampling"]["temperature"] == 0.0 and ev["sampling"]["max_new_tokens"] == 8
    assert ev["logprobs"]["tokens"] == 9 and ev["logprobs"]["mean_abs_diff"] == pytest.approx((0.25 + 0 + 0) / 3, abs=1e-6)
    assert ev["request_count"] == len(ev["requests"]) == mock.sent("/generate") + 2
    assert mock.sent("/generate") == 2  # one batched generation, one batched scoring pass

    mock.texts = GARBLED
    obs = IsolatedRollout().examine(run)
    assert obs.outcome == "garbled" and obs.evidence["garbled_fraction"] == 1.0
    assert "not text" in obs.summary and URL in obs.summary


def test_isolated_rollout_is_coherent_when_the_limit_is_not_the_runs(tmp_path, monkeypatch):
    from probes.isolated_rollout import IsolatedRollout

    mock = MockSGLang(tmp_path)
    patch_transport(monkeypatch, mock)
    run = make_run(tmp_path / "run", mock.model_dir, args="--rollout-max-response-len 4096")
    run.engines.append(URL)
    obs = IsolatedRollout(IsolatedRollout.Params(max_new_tokens=6)).examine(run)
    assert obs.outcome == "coherent", obs.summary
    assert obs.evidence["at_length_limit"] == 1.0 and not obs.evidence["length_limit"]["is_the_runs"]


def test_isolated_rollout_unavailable_says_which_flag_enables_it(tmp_path):
    from probes.isolated_rollout import IsolatedRollout
    from triage.errors import Unavailable
    from triage.run import open_run

    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "cmdline.txt").write_text("python3 train.py --rollout-temperature 1\n")
    with pytest.raises(Unavailable) as err:
        IsolatedRollout().examine(open_run(str(tmp_path / "a")))
    assert err.value.artifact == "rollout_dump" and "--save-debug-rollout-data" in err.value.command
    with pytest.raises(Unavailable) as err:
        IsolatedRollout().examine(make_run(tmp_path / "b", None))
    assert err.value.artifact == "engine" and "--engine http://HOST:PORT" in err.value.command


def test_an_engine_that_is_not_there_is_unavailable_with_its_address(tmp_path, monkeypatch):
    from probes.isolated_rollout import IsolatedRollout
    from probes.live_weights import LiveWeights
    from triage.errors import Unavailable

    mock = MockSGLang(tmp_path)
    refused = httpx.ConnectError("[Errno 111] Connection refused")
    mock.script["/get_server_info"] = [refused] * 6
    patch_transport(monkeypatch, mock)
    run = make_run(tmp_path / "run", mock.model_dir, ckpt=write_hf(tmp_path / "ckpt", tiny_state(2)))
    run.engines.append(URL)
    for probe in (IsolatedRollout(), LiveWeights()):
        with pytest.raises(Unavailable) as err:
            probe.examine(run)
        assert err.value.artifact == "engine" and URL in err.value.reason and "connection refused" in err.value.reason


def test_live_weights_probe_reports_requests_and_an_engine_dying_is_an_error(tmp_path, monkeypatch):
    from probes.live_weights import LiveWeights
    from triage.engines import EngineError

    trained = tiny_state(2)
    mock = MockSGLang(tmp_path, served=dict(trained))
    patch_transport(monkeypatch, mock)
    run = make_run(tmp_path / "run", None, ckpt=write_hf(tmp_path / "ckpt", trained))
    run.engines.append(URL)
    obs = LiveWeights().examine(run)
    assert obs.outcome == "match" and obs.evidence["engine"] == URL
    assert [r["path"] for r in obs.evidence["requests"]] == ["/get_server_info", "/get_model_info", "/weights_checker"]

    mock.script["/weights_checker"] = [httpx.RemoteProtocolError("Server disconnected without sending a response.")]
    with pytest.raises(EngineError) as err:
        LiveWeights().examine(run)
    msg = str(err.value)
    assert msg.startswith(URL) and "closed the connection" in msg and "after 3 requests" in msg


def test_local_engine_generates_and_scores_consistently(tmp_path):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from triage.engines.local import LocalEngine

    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=VOCAB, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64, eos_token_id=2)
    Qwen2ForCausalLM(cfg).save_pretrained(str(tmp_path / "m"))
    e = LocalEngine(tmp_path / "m", device="cpu")
    prompt = [5, 6, 7, 8]
    g = e.generate([prompt], Sampling(max_new_tokens=5, temperature=0.0))[0]
    assert len(g.output_ids) == len(g.output_logprobs) and g.finish.type in ("length", "stop")
    assert g.finish.type != "length" or g.finish.length == 5
    scored = e.score([prompt + g.output_ids], [len(prompt)])[0]
    assert scored == pytest.approx(g.output_logprobs, abs=1e-5)  # greedy logprobs are unscaled, like SGLang's
    with pytest.raises(TokenOutOfVocabulary):
        e.generate([[VOCAB + 1]], Sampling(max_new_tokens=1))
    assert [r.path for r in e.requests] == ["load", "generate", "score"]


def test_a_fused_qkv_sent_without_its_per_group_split_is_recognised(tmp_path):
    """Megatron's linear_qkv is [group: q heads, k, v] x groups; loaded as if it were [q; k; v] it lands unchanged."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from triage.testbed.convert import fuse_qkv
    from triage.testbed.hf_models import shape_from_config
    from triage.testbed.prepare import convert_hf_to_torch_dist
    from triage.weights.convert import family_for

    torch.manual_seed(3)
    cfg = Qwen2Config(vocab_size=VOCAB, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, tie_word_embeddings=False)
    Qwen2ForCausalLM(cfg).save_pretrained(str(tmp_path / "hf"))
    ckpt = convert_hf_to_torch_dist(tmp_path / "hf", tmp_path / "megatron")
    sd = load_file(str(tmp_path / "hf" / "model.safetensors"))
    shape = shape_from_config(cfg)
    sums = {}
    for n, t in sd.items():
        if ".q_proj." in n:
            p, kind = n.split(".self_attn.")[0], n.rsplit(".", 1)[1]
            parts = [sd[f"{p}.self_attn.{x}_proj.{kind}"] for x in "qkv"]
            raw = fuse_qkv(*parts, shape) if kind == "weight" else torch.cat(parts)  # the bug: no regrouping
            sums[f"{p}.self_attn.qkv_proj.{kind}"] = sha(raw)
        elif ".gate_proj." in n:
            sums[n.replace("gate_proj", "gate_up_proj")] = sha(torch.cat([t, sd[n.replace("gate_proj", "up_proj")]]))
        elif not any(x in n for x in (".k_proj.", ".v_proj.", ".up_proj.")):
            sums[n] = sha(t)
    mock = MockSGLang(tmp_path)
    mock.checksum_ranks = [{"checksums": sums, "parallelism_info": [{"role": "target", "tp_rank": 0, "tp_size": 1}]}]
    d = ModelDims.from_hf_config(cfg.to_dict())
    result = compare_live(engine(mock), open_checkpoint(ckpt), dims=d, family=family_for("qwen2"))
    assert result.outcome == "misnamed", result.summary
    assert {(p["engine"], p["how"]) for p in result.evidence["pairs"]} == {
        (f"model.layers.{i}.self_attn.qkv_proj.weight", "unsplit_qkv") for i in (0, 1)}
    assert "decoder.layers.0.self_attention.linear_qkv.weight (unsplit" in json.dumps(result.evidence["pairs"])
