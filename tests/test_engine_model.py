"""engine_model: the model SGLang says it serves, against the run's --hf-checkpoint."""

from __future__ import annotations

from pathlib import Path

import pytest

from probes.engine_model import EngineModel, ServedModel, parse_server_args
from triage.errors import Unavailable
from triage.run import open_run


def server_args_line(model: str, pid: int = 3101) -> str:
    # SGLang logs its full ServerArgs dataclass repr at launch; slime forwards it through Ray.
    return (
        f"(SGLangEngine pid={pid}) [2026-08-01 10:00:41] server_args=ServerArgs(model_path='{model}', "
        f"tokenizer_path='{model}', tokenizer_mode='auto', tokenizer_worker_num=1, skip_tokenizer_init=True, "
        "load_format='auto', model_loader_extra_config='{}', trust_remote_code=True, context_length=None, "
        "is_embedding=False, enable_multimodal=None, revision=None, model_impl='auto', host='10.0.0.3', port=15000, "
        "nccl_port=None, dtype='auto', quantization=None, kv_cache_dtype='auto', mem_fraction_static=0.7, "
        "max_running_requests=None, chunked_prefill_size=8192, max_prefill_tokens=16384, schedule_policy='fcfs', "
        "tp_size=2, pp_size=1, random_seed=42, served_model_name='" + model + "', enable_memory_saver=True)\n"
    )


HEAD = (
    "[2026-08-01 10:00:00] train.py:12 - Start training\n"
    "(SGLangEngine pid=3101) [2026-08-01 10:00:40] sglang_engine.py:173 - Launch HttpServerEngineAdapter at: 10.0.0.3:15000\n"
)


def make_run(tmp_path: Path, log: str, hf_checkpoint: str | None = "/root/Qwen3-4B"):
    (tmp_path / "job.log").write_text(log, encoding="utf-8")
    if hf_checkpoint is not None:
        (tmp_path / "cmdline.txt").write_text(
            f"python3 train.py --hf-checkpoint {hf_checkpoint} --rollout-num-gpus-per-engine 2\n", encoding="utf-8"
        )
    return open_run(str(tmp_path))


def test_engine_serves_the_configured_model(tmp_path):
    obs = EngineModel().examine(make_run(tmp_path, HEAD + server_args_line("/root/Qwen3-4B")))
    assert obs.outcome == "same_model"
    assert obs.evidence["served_paths"] == ["/root/Qwen3-4B"]
    assert obs.evidence["served"][0]["why"] == "same path"


def test_engine_serves_another_model(tmp_path):
    log = HEAD + server_args_line("/root/Qwen3-4B") + server_args_line("/root/Qwen2.5-7B-Instruct", pid=3102)
    obs = EngineModel().examine(make_run(tmp_path, log))
    assert obs.outcome == "different_model"
    ev = obs.evidence
    assert ev["hf_checkpoint"] == "/root/Qwen3-4B"
    assert ev["served_paths"] == ["/root/Qwen2.5-7B-Instruct", "/root/Qwen3-4B"]
    wrong = [s for s in ev["served"] if not s["same"]]
    assert len(wrong) == 1 and wrong[0]["source"].startswith("SGLangEngine pid=3102")
    assert wrong[0]["where"].endswith("job.log:4")
    assert "Qwen2.5-7B-Instruct" in obs.summary and "1 other engine(s) serve the configured model" in obs.summary


def test_the_same_directory_under_another_path_is_the_same_model(tmp_path):
    hf = tmp_path / "Qwen3-4B"
    hf.mkdir()
    (hf / "config.json").write_text('{"model_type": "qwen3", "vocab_size": 151936}', encoding="utf-8")
    (hf / "model.safetensors").write_bytes(b"")
    obs = EngineModel().examine(make_run(tmp_path, HEAD + server_args_line(str(hf))))
    assert obs.outcome == "same_model"
    assert obs.evidence["served"][0]["why"] == "same directory under two names"


def test_a_served_model_from_a_live_engine_plugs_into_judge(tmp_path):
    run = make_run(tmp_path, HEAD)
    served = [ServedModel(model_path="Qwen/Qwen3-8B", where="http://127.0.0.1:30000")]
    obs = EngineModel().judge(run, "/root/Qwen3-4B", served)
    assert obs.outcome == "different_model"
    assert obs.evidence["served"][0]["where"] == "http://127.0.0.1:30000"


def test_parse_server_args_reads_the_paths():
    served = parse_server_args(server_args_line("/models/a b/Qwen3-4B").split(") ", 1)[1])
    assert served is not None
    assert served.model_path == "/models/a b/Qwen3-4B" and served.tokenizer_path == "/models/a b/Qwen3-4B"
    assert parse_server_args("server_args=ServerArgs(tokenizer_path=None)") is None


def test_no_startup_line_is_unavailable(tmp_path):
    with pytest.raises(Unavailable) as exc:
        EngineModel().examine(make_run(tmp_path, HEAD))
    assert exc.value.artifact == "log" and "server_args=ServerArgs" in exc.value.reason


def test_unknown_hf_checkpoint_is_unavailable(tmp_path):
    with pytest.raises(Unavailable) as exc:
        EngineModel().examine(make_run(tmp_path, HEAD + server_args_line("/root/Qwen3-4B"), hf_checkpoint=None))
    assert exc.value.artifact == "args"
