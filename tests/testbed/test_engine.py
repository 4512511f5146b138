"""The engine: SGLang's generate shapes, log-probs the trainer reproduces, memory release, HTTP."""

from __future__ import annotations

import httpx
import pytest
import torch

from triage.testbed import convert, task, warmup
from triage.testbed.engine import Engine
from triage.testbed.hf_models import shape_from_config
from triage.testbed.http_engine import EngineServer, HttpEngineClient
from triage.testbed.megatron_model import GPTModel
from triage.testbed.tokenizer import load_tokenizer


@pytest.fixture(scope="module")
def model_dir():
    return warmup.model_path("qwen2-instruct")


@pytest.fixture(scope="module")
def prompts(model_dir):
    tok = load_tokenizer(model_dir)
    return [tok(tok.apply_chat_template(task.messages(p), tokenize=False, add_generation_prompt=True),
                add_special_tokens=False)["input_ids"] for p in task.sample_problems(6, seed=3)]


def test_generate_returns_sglang_shapes_and_trainer_reproduces_logprobs(model_dir, prompts):
    engine = Engine(model_dir)
    out = engine.generate(prompts, {"temperature": 1.0, "max_new_tokens": 8, "stop_token_ids": [2]}, seed=5)
    assert len(out) == len(prompts)
    shape = shape_from_config(engine.config)
    trainer = GPTModel(shape, engine.config.vocab_size)
    trainer.load_state_dict(convert.hf_to_megatron(dict(engine.model.named_parameters()), shape))
    for prompt, r in zip(prompts, out):
        meta = r["meta_info"]
        rows = meta["output_token_logprobs"]
        assert [row[1] for row in rows] == r["output_ids"] and all(row[2] is None for row in rows)
        if meta["finish_reason"]["type"] == "stop":
            assert meta["finish_reason"]["matched"] == r["output_ids"][-1] == 2
        else:
            assert meta["finish_reason"] == {"type": "length", "length": 8}
        seq = torch.tensor([prompt + r["output_ids"]])
        with torch.no_grad():
            lp = torch.log_softmax(trainer(seq)[0, len(prompt) - 1: -1], -1)
        mine = lp.gather(-1, torch.tensor(r["output_ids"])[:, None])[:, 0]
        assert torch.allclose(mine, torch.tensor([row[0] for row in rows]), atol=1e-4)


def test_same_seed_same_samples_and_overlong_prompt_aborts(model_dir, prompts):
    engine = Engine(model_dir)
    a = engine.generate(prompts, {"temperature": 1.0, "max_new_tokens": 8}, seed=9)
    b = engine.generate(prompts, {"temperature": 1.0, "max_new_tokens": 8}, seed=9)
    assert [r["output_ids"] for r in a] == [r["output_ids"] for r in b]
    out = engine.generate([prompts[0], [5] * 600], {"max_new_tokens": 4}, seed=1)
    assert out[1]["output_ids"] == [] and out[1]["meta_info"]["finish_reason"]["type"] == "abort"
    assert out[0]["output_ids"]


@pytest.mark.parametrize("release_buffers", [False, True])
def test_release_resume_keeps_buffers_unless_told_otherwise(model_dir, release_buffers):
    engine = Engine(model_dir, release_buffers=release_buffers)
    before = engine.named_tensors()["model.rotary_emb.inv_freq"].clone()
    weights = [(n, p.detach().clone()) for n, p in engine.model.named_parameters()]
    engine.release_memory_occupation()
    with pytest.raises(RuntimeError):
        engine.generate([[1, 2]], {"max_new_tokens": 1})
    engine.resume_memory_occupation()
    engine.update_weights_from_tensor(weights)
    after = engine.named_tensors()["model.rotary_emb.inv_freq"]
    assert torch.count_nonzero(before) == before.numel()
    assert torch.equal(after, before) != release_buffers


def test_http_engine_speaks_sglang(model_dir, prompts):
    engine = Engine(model_dir)
    server = EngineServer(engine, tokenizer=load_tokenizer(model_dir)).start()
    try:
        client = httpx.Client(base_url=server.url, timeout=30)
        assert server.url.startswith("http://127.0.0.1:")
        assert client.get("/health_generate").status_code == 200
        info = client.get("/get_server_info").json()
        assert info["model_path"] == str(model_dir)
        r = client.post("/generate", json={"input_ids": prompts[0], "return_logprob": True,
                                           "sampling_params": {"max_new_tokens": 8, "temperature": 1.0,
                                                               "stop_token_ids": [2], "sampling_seed": 4}}).json()
        assert set(r) >= {"text", "output_ids", "meta_info"}
        assert r["meta_info"]["finish_reason"]["type"] in ("stop", "length")
        local = engine.generate([prompts[0]], {"max_new_tokens": 8, "temperature": 1.0, "stop_token_ids": [2]}, seed=4)
        assert r["output_ids"] == local[0]["output_ids"]
        assert HttpEngineClient(server.url).generate(prompts[:2], {"max_new_tokens": 4}, seed=1)[1]["output_ids"]
        w = client.post("/get_weights_by_name", json={"name": "model.norm.weight", "truncate_size": 5}).json()
        assert w == pytest.approx(engine.model.model.norm.weight[:5].tolist())
        bad = client.post("/get_weights_by_name", json={"name": "nope"})
        assert bad.status_code == 400 and bad.json() == {"error": {"message": "Get parameter by name failed"}}
        assert client.post("/generate", json={"input_ids": []}).status_code == 400
        assert client.post("/generate", json={"input_ids": [10**6]}).status_code == 400
    finally:
        server.stop()
