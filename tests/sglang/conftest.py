"""The integration tier: real SGLang 0.5.23 servers from the shared sglang-cpu kit (`make test-sglang`).

Every test here is marked `sglang`. The tier runs when `TRIAGE_TEST_SGLANG=1` (what
scripts/test-sglang.sh sets after the kit's set-up succeeded) and the kit, its venv and
its models are present; otherwise every test is skipped with the reason printed.

The kit's models are random-init: what they generate is not text, whatever the weights.
So the isolated rollout is checked against a local transformers engine on the same
weights (same judgement, same greedy tokens, log-probs within round-off), not against
an expectation of "coherent".
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sglang_kit import Servers, model_dir, not_ready  # noqa: E402

ENABLE = "TRIAGE_TEST_SGLANG"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "sglang: needs real SGLang servers from the sglang-cpu kit (make test-sglang)")


def skip_reason() -> str | None:
    if os.environ.get(ENABLE) != "1":
        return f"the SGLang tier runs with `make test-sglang` (or {ENABLE}=1)"
    return not_ready()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).resolve().parent
    mine = [i for i in items if here in Path(str(i.fspath)).resolve().parents]
    reason = skip_reason()
    for item in mine:
        item.add_marker(pytest.mark.sglang)
        if reason:
            item.add_marker(pytest.mark.skip(reason=f"skipped: {reason}"))


def pytest_report_header(config: pytest.Config) -> str | None:
    reason = skip_reason()
    return f"sglang tier: skipped: {reason}" if reason else "sglang tier: real servers from the sglang-cpu kit"


@pytest.fixture(scope="session")
def servers() -> Iterator[Servers]:
    """The session's servers: a Qwen2 and a Llama engine on the kit's base models, started together."""
    reg = Servers()
    try:
        reg.start("model", "model-llama")
        yield reg
    finally:
        reg.stop_all()


@pytest.fixture(scope="session")
def weights(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """The weight directories and Megatron checkpoints every scenario uses (built once)."""
    import sglang_scenarios as sc

    root = tmp_path_factory.mktemp("weights")
    out: dict[str, Path] = {}
    for arch, base_name in (("qwen2", "model"), ("llama", "model-llama")):
        base_dir, trained_dir = model_dir(base_name), model_dir(f"{base_name}-alt")
        base, trained = sc.load_hf(base_dir), sc.load_hf(trained_dir)
        out[f"{arch}/base"] = base_dir
        out[f"{arch}/trained"] = trained_dir
        out[f"{arch}/pp_offset"] = sc.write_weights(base_dir, root / arch / "pp_offset", sc.pp_offset(trained, base))
        out[f"{arch}/names_swapped"] = sc.write_weights(base_dir, root / arch / "names_swapped",
                                                        sc.names_swapped(trained))
        out[f"{arch}/stale"] = sc.write_weights(base_dir, root / arch / "stale", sc.stale_mlp(trained, base))
        out[f"{arch}/megatron"] = sc.megatron_checkpoint(trained_dir, root / arch / "megatron")
    out["qwen2/dump"] = sc.rollout_dump(root / "qwen2" / "rollout_0.pt", model_dir("model"))
    yield out


@pytest.fixture(autouse=True)
def _kit_models_are_an_allowed_root(monkeypatch):
    """The runs name the kit's HF models as their base, on "shared storage" outside the run
    directory as a cluster job does: the user allows that root (--allow-path /
    $TRIAGE_ALLOWED_ROOTS), beside the session's temporary directory tests/conftest.py allows."""
    roots = [r for r in os.environ.get("TRIAGE_ALLOWED_ROOTS", "").split(os.pathsep) if r]
    monkeypatch.setenv("TRIAGE_ALLOWED_ROOTS", os.pathsep.join([*roots, str(model_dir("model").parent)]))
