"""Run.versions: package versions read from what a run leaves, with where each was read."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from triage.run import open_run


def make_run(tmp_path: Path, log: str = "", **files: str):
    (tmp_path / "job.log").write_text(log or "[2026-08-01 10:00:00] train.py:1 - start\n", encoding="utf-8")
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    return open_run(str(tmp_path))


def where(rec) -> str:
    return rec.where.rsplit("/", 1)[-1]


def test_pip_freeze_file_with_editable_commit(tmp_path):
    freeze = ("Megatron_Core==0.13.1\n"
              "sglang==0.5.12.post1\n"
              "torch==2.9.1+cu129\n"
              "-e git+https://github.com/THUDM/slime.git@0123456789abcdef0123456789abcdef01234567#egg=slime\n")
    v = make_run(tmp_path, **{"pip_freeze.txt": freeze}).versions
    assert v.as_dict()["megatron-core"] == "0.13.1"  # canonical name
    assert v["sglang"].version == "0.5.12.post1" and where(v["sglang"]) == "pip_freeze.txt:2"
    assert str(v["torch"].parsed) == "2.9.1+cu129"
    assert v["slime"].commit == "0123456789abcdef0123456789abcdef01234567"
    assert v.version_files and "package list" in v.note()


def test_pip_list_table_and_conda_list(tmp_path):
    pip_list = "Package            Version\n------------------ -----------\nray                2.40.0\ntransformers       4.46.0\n\n"
    conda = ("# packages in environment at /opt/conda:\n#\n# Name                    Version                   Build  Channel\n"
             "pytorch                   2.4.0           py3.10_cuda12.1_cudnn9.1.0_0    pytorch\n"
             "deepspeed                 0.14.4                   pypi_0    pypi\n")
    run = make_run(tmp_path, **{"pip-list.txt": pip_list, "conda_list.txt": conda})
    v = run.versions.as_dict()
    assert v["ray"] == "2.40.0" and v["transformers"] == "4.46.0"
    assert v["torch"] == "2.4.0"  # conda's `pytorch` is pip's `torch`
    assert v["deepspeed"] == "0.14.4"


def test_pip_list_json(tmp_path):
    run = make_run(tmp_path, **{"pip_list.json": json.dumps([{"name": "vllm", "version": "0.9.2"}])})
    assert run.versions["vllm"].version == "0.9.2"


def test_log_banners_each_framework(tmp_path):
    # Wordings from the frameworks' code: vllm/v1/engine/core.py, vllm/entrypoints/openai/api_server.py,
    # deepspeed/runtime/engine.py, huggingface/datasets config.py, `ray --version`, sys.version.
    log = "\n".join([
        "(EngineCore_DP0 pid=41565) INFO 10-06 15:56:35 [core.py:77] Initializing a V1 LLM engine (v0.11.0) with config: model='x'",
        "[2025-04-19 22:10:54,438] [    INFO]: PyTorch version 2.6.0 available. (config.py:54)",
        "[2024-06-21 08:08:30,041] [INFO] [engine.py:99:__init__] DeepSpeed info: version=0.14.3, git-hash=unknown, git-branch=unknown",
        "ray, version 2.40.0",
        "3.10.12 (main, Nov 20 2023, 15:14:05) [GCC 11.4.0]",
    ]) + "\n"
    v = make_run(tmp_path, log=log).versions
    assert v.as_dict() == {"vllm": "0.11.0", "torch": "2.6.0", "deepspeed": "0.14.3", "ray": "2.40.0", "python": "3.10.12"}
    assert where(v["vllm"]) == "job.log:1" and v["vllm"].source == "banner"
    assert where(v["deepspeed"]) == "job.log:3"


def test_unsloths_statistics_banner(tmp_path):
    # unslothai/unsloth unsloth/models/_utils.py, as a committed SFT console prints it
    log = ("==((====))==  Unsloth 2025.9.6: Fast Qwen3 patching. Transformers: 4.55.4.\n"
           "   \\\\   /|    NVIDIA GeForce RTX 5060 Ti. Num GPUs = 2. Max memory: 15.444 GB. Platform: Linux.\n"
           "O^O/ \\_/ \\    Torch: 2.8.0+cu128. CUDA: 12.0. CUDA Toolkit: 12.8. Triton: 3.4.0\n"
           "\\        /    Bfloat16 = TRUE. FA [Xformers = None. FA2 = True]\n")
    v = make_run(tmp_path, log=log).versions
    assert v.as_dict() == {"unsloth": "2025.9.6", "transformers": "4.55.4", "torch": "2.8.0+cu128", "triton": "3.4.0"}
    assert where(v["torch"]) == "job.log:3" and v["unsloth"].detail == "unsloth's statistics banner"


def test_environment_reports(tmp_path):
    # `trl env` (as pasted in huggingface/trl#2698) and verl's scripts/diagnose.py (verl-project/verl#7656)
    log = "\n".join([
        "- Python version: 3.11.11",
        "- PyTorch version: 2.5.1+cu124",
        "- Transformers version: 4.47.1",
        "- TRL version: 0.15.0.dev0+6dc278a",
        "- DeepSpeed version: not installed",
        "------------Pip Info-----------",
        "vllm\t     : 0.24.0",
        "sglang\t     : not found.",
        "ray\t     : 2.55.1",
        "----------verl Info-----------",
        "Version      : 0.10.0.dev",
        "Commit Hash  : 60577a786225c15e2e859f47fc7f4e55bcc13720",
    ]) + "\n"
    v = make_run(tmp_path, log=log).versions
    d = v.as_dict()
    assert d["trl"] == "0.15.0.dev0+6dc278a" and d["transformers"] == "4.47.1" and d["torch"] == "2.5.1+cu124"
    assert d["vllm"] == "0.24.0" and d["ray"] == "2.55.1"
    assert "sglang" not in d and "deepspeed" not in d  # "not found." / "not installed" are not versions
    assert d["verl"] == "0.10.0.dev" and v["verl"].commit == "60577a786225c15e2e859f47fc7f4e55bcc13720"


def test_image_tags(tmp_path):
    log = ("+ docker run --gpus all slimerl/sglang:v0.5.12.post1-cu129 bash run.sh\n"
           "image: verlai/verl:vemlp-th2.4.0-cu124-vllm0.6.3-ray2.10-te1.7-v0.0.3\n")
    v = make_run(tmp_path, log=log).versions.as_dict()
    assert v["sglang"] == "0.5.12.post1"  # THUDM/slime#2091's image
    assert (v["torch"], v["vllm"], v["ray"], v["transformer-engine"]) == ("2.4.0", "0.6.3", "2.10", "1.7")  # verl-project/verl#46


def test_package_list_outranks_banner_and_conflict_is_kept(tmp_path):
    run = make_run(tmp_path, log="image: lmsysorg/sglang:v0.4.6.post1-cu124\n", **{"pip_freeze.txt": "sglang==0.4.6.post5\n"})
    v = run.versions
    assert v["sglang"].version == "0.4.6.post5" and v["sglang"].source == "package list"
    assert [(a.version, b.version) for a, b in v.conflicts] == [("0.4.6.post5", "0.4.6.post1")]


def test_requirements_file_only_pins(tmp_path):
    run = make_run(tmp_path, **{"requirements.txt": "sglang>=0.4\ntorch==2.6.0\n# vllm==0.8.5\n"})
    assert run.versions.as_dict() == {"torch": "2.6.0"}


def test_gzip_log_head(tmp_path):
    from triage.versions import head_lines

    path = tmp_path / "driver.log.gz"
    with gzip.open(path, "wt") as fh:
        fh.write("INFO 05-07 05:58:43 core.py:50] Initializing a V1 LLM engine (v0.7.3) with config: model='x'\n")
    assert [n for n, _ in head_lines(path, 1 << 20)] == [1]
    assert "(v0.7.3)" in next(iter(head_lines(path, 1 << 20)))[1]


def test_no_version_information_says_so(tmp_path):
    run = make_run(tmp_path, log="[2026-08-01 10:00:00] train.py:1 - step 0: {'train/loss': 0.1}\n")
    assert len(run.versions) == 0
    note = run.versions.note()
    assert note.startswith("no version information: no pip/conda list in the run directory, no version banner")
    assert "pip freeze" in note


def test_bare_log_lines_are_not_mistaken_for_versions(tmp_path):
    log = "\n".join([
        "+ [[ 1 == 1 ]]",
        "[2026-08-01 10:00:00] train.py:1 - rollout_batch_size: 32",
        "  use_dist_ckpt .................................... True",
        "[2026-08-01 10:00:01] model.py:918 - step 3: {'train/loss': 0.1}",
    ]) + "\n"
    assert make_run(tmp_path, log=log).versions.as_dict() == {}


def test_pip_list_rows_pasted_without_their_header(tmp_path):
    # modelscope/ms-swift#6704: the thread is about the upgrade; the rows came without `Package  Version`
    log = ("after upgrading, the reward model loss went from 0.8 to 17\n"
           "ms_swift                      3.11.0.dev0\n"
           "trl                           0.24.0\n"
           "numpy  1.26.4\n"  # a package no version cause names: not read from a bare row
           "lr  0.001\n")
    versions = make_run(tmp_path, log=log).versions
    assert versions["ms-swift"].version == "3.11.0.dev0" and versions["trl"].version == "0.24.0"
    assert versions["trl"].detail == "pip list row" and where(versions["trl"]) == "job.log:3"
    assert "numpy" not in versions.as_dict() and "lr" not in versions.as_dict()


def test_pip_show_blocks_pasted_in_a_log(tmp_path):
    # pypa/pip src/pip/_internal/commands/show.py: `Name:` then `Version:`, a blank-free block per package
    log = ("$ pip show sglang megatron-core\n"
           "Name: sglang\n"
           "Version: 0.5.6.post2\n"
           "Summary: SGLang is a fast serving framework for large language models and vision language models.\n"
           "Location: /usr/local/lib/python3.12/dist-packages\n"
           "---\n"
           "Name: megatron-core\n"
           "Version: 0.14.0\n"
           "Requires: numpy, packaging, torch\n")
    v = make_run(tmp_path, log).versions
    assert v["sglang"].version == "0.5.6.post2" and where(v["sglang"]) == "job.log:3"
    assert v["sglang"].detail == "pip show"
    assert v["megatron-core"].version == "0.14.0"


def test_a_name_line_without_its_version_is_not_a_package(tmp_path):
    v = make_run(tmp_path, "Name: my-experiment\nStatus: running since 10:00\nVersion: 3.1.0\n").versions
    assert "my-experiment" not in v
