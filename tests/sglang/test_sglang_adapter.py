"""The SGLang adapter against real SGLang 0.5.23 servers: every endpoint it uses, as it really answers."""

from __future__ import annotations

import pytest
from safetensors.torch import load_file

from triage.engines import (
    EngineRejected,
    Sampling,
    TokenOutOfVocabulary,
    WriteNotAllowed,
)
from triage.engines.local import LocalEngine
from triage.engines.sglang import NotSupported, SGLangEngine
from triage.weights.live import tensor_checksum

PROMPT = [5, 6, 7, 8, 9, 10, 11, 12]


@pytest.fixture
def qwen(servers, weights):
    """The Qwen2 engine, holding the kit's base model (restored if an earlier test changed it)."""
    server = servers.get("model")
    with SGLangEngine(server.url, allow_writes=True) as e:
        if e.model_info().model_path != str(weights["qwen2/base"]):
            e.update_weights_from_disk(weights["qwen2/base"])
    return server


def test_greedy_generation_matches_transformers_on_the_same_weights(qwen, weights):
    with SGLangEngine(qwen.url) as e:
        got = e.generate([PROMPT, PROMPT[:4]], Sampling(max_new_tokens=6, temperature=0.0))
        local = LocalEngine(weights["qwen2/base"], device="cpu").generate([PROMPT, PROMPT[:4]],
                                                                          Sampling(max_new_tokens=6, temperature=0.0))
        for g, ref in zip(got, local):
            assert g.output_ids == ref.output_ids
            assert g.output_logprobs == pytest.approx(ref.output_logprobs, abs=1e-4)
            assert g.finish.type == "length" and g.finish.length == 6
            assert isinstance(g.text, str) and g.weight_version == "default"
        assert [(r.method, r.path, r.status) for r in e.requests][-1] == ("POST", "/generate", 200)
        assert e.describe()["vocab_size"] == 1024 and "config.json" in e.describe()["vocab_from"]


def test_scoring_matches_transformers_and_a_stop_token_is_reported(qwen, weights):
    with SGLangEngine(qwen.url) as e:
        first = e.generate([PROMPT], Sampling(max_new_tokens=4, temperature=0.0))[0]
        seq = PROMPT + first.output_ids
        scored = e.score([seq], [len(PROMPT)])[0]
        assert scored == pytest.approx(first.output_logprobs, abs=1e-4)
        local = LocalEngine(weights["qwen2/base"], device="cpu").score([seq], [len(PROMPT)])[0]
        assert scored == pytest.approx(local, abs=1e-4)
        stop = first.output_ids[1]
        stopped = e.generate([PROMPT], Sampling(max_new_tokens=8, temperature=0.0, stop_token_ids=(stop,)))[0]
        assert stopped.finish.type == "stop" and stopped.finish.matched == stop
        assert stopped.output_ids == first.output_ids[:2]


def test_an_out_of_vocabulary_id_never_reaches_the_server(qwen):
    with SGLangEngine(qwen.url) as e:
        with pytest.raises(TokenOutOfVocabulary, match="token id 1024 is outside the served vocabulary of 1024"):
            e.generate([[1, 2, 1024]], Sampling(max_new_tokens=2))
        assert all(r.path != "/generate" for r in e.requests)
        assert e.health() < 30  # the server is still up and generating


def test_checksums_are_sha256_of_the_served_bytes(qwen, weights):
    sd = load_file(str(weights["qwen2/base"] / "model.safetensors"))
    with SGLangEngine(qwen.url) as e:
        sums = e.weights_checksums()
        assert sums.comparable and sums.device == "cpu" and len(sums.ranks) == 1
        got = sums.ranks[0].checksums
        assert "model.layers.0.self_attn.qkv_proj.weight" in got and "model.layers.1.mlp.gate_up_proj.weight" in got
        assert got["model.embed_tokens.weight"] == tensor_checksum(sd["model.embed_tokens.weight"])
        assert got["lm_head.weight"] == tensor_checksum(sd["lm_head.weight"])
        assert [r.path for r in e.requests] == ["/weights_checker", "/get_server_info"]


def test_get_weights_by_name_fails_on_qwen2_and_reads_llama_rows(servers, qwen, weights):
    with SGLangEngine(qwen.url) as e:
        got = e.weights_by_name("model.layers.0.self_attn.q_proj.weight", 2)
        assert isinstance(got, NotSupported) and "Qwen2ForCausalLM" in got.reason
    llama = servers.get("model-llama")
    sd = load_file(str(weights["llama/base"] / "model.safetensors"))
    with SGLangEngine(llama.url, allow_writes=True) as e:
        if e.model_info().model_path != str(weights["llama/base"]):
            e.update_weights_from_disk(weights["llama/base"])
        rows = e.weights_by_name("model.layers.1.self_attn.k_proj.weight", 3)
        assert rows.rows.tolist() == sd["model.layers.1.self_attn.k_proj.weight"][:3].tolist()
        norm = e.weights_by_name("model.norm.weight", 5)
        assert norm.rows.shape == (5,)


def test_writes_need_the_flag_and_a_bad_update_keeps_the_old_weights(qwen):
    with SGLangEngine(qwen.url) as e:
        with pytest.raises(WriteNotAllowed, match="--allow-engine-writes"):
            e.update_weights_from_disk("/nonexistent/model-dir")
        with pytest.raises(WriteNotAllowed):
            e.flush_cache()
        assert [r.path for r in e.requests] == []
    with SGLangEngine(qwen.url, allow_writes=True) as e:
        before = e.weights_checksums().ranks[0].checksums
        with pytest.raises(EngineRejected) as err:
            e.update_weights_from_disk("/nonexistent/model-dir")
        assert err.value.status == 400 and "Failed to get weights iterator" in str(err.value)
        assert e.weights_checksums().ranks[0].checksums == before
        assert e.weight_version() == "default"
