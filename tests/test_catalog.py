"""The verdict catalog is the contract: every id exists, is documented, and is reachable."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from triage.catalog import load_catalog
from triage.graph import DEFAULT_DIR, load_graph
from triage.probe import registry

ROOT = Path(__file__).resolve().parent.parent
SHARED_CATALOG = ROOT.parent / "shared" / "ROOT_CAUSES.md"

# The ids of ROOT_CAUSES.md. Ids are never renamed; new ones may be added to the catalog.
CONTRACT_IDS = {
    "healthy", "inconclusive", "ckpt.not_loaded", "weights.name_mapping", "weights.pp_layer_offset",
    "weights.missing", "weights.quantized_zero", "engine.buffers_released", "model.base_not_instruct",
    "data.chat_template_mismatch", "config.training_error", "kernel.nondeterministic", "moe.permute_fusion",
    "moe.routing_mismatch", "mismatch.train_inference", "policy.offpolicy_stale", "optim.lr_too_high",
    "optim.lr_too_low", "data.bad_sample", "numerics.overflow", "numerics.nan_grad",
    "rollout.missing_stop_token", "rollout.max_len_too_small", "reward.broken_fn", "reward.no_signal",
    "reward.hacking_length", "policy.entropy_collapse", "policy.kl_divergence", "ppo.clip_too_aggressive",
    "memory.max_tokens_per_gpu", "memory.sequence_too_long", "memory.logits_tensor",
    "memory.colocate_second_step", "engine.oom_illegal_memory", "host.ram_exhausted",
    "sched.insufficient_gpus", "config.batch_size_mismatch", "engine.port_conflict", "engine.wrong_model",
    "fs.concurrent_hf_read", "compile.cache_corrupt", "dist.collective_mismatch", "parallel.sharding_bug",
    "fp8.collapse", "tokenizer.no_pad_token", "template.eos_mismatch",
    # Field ids
    "engine.version_regression", "engine.weight_update_bug", "algo.degenerate_groups",
    "metrics.false_truncation", "memory.release_leak", "config.sample_exceeds_limits",
    "sched.placement_resources", "sched.time_limit", "infra.network", "infra.gpu_fault",
    "infra.disk_full", "deps.version_mismatch", "mismatch.growing_drift", "crash.unrecognized",
}


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(DEFAULT_DIR / "verdicts.yaml")


@pytest.fixture(scope="module")
def graph():
    return load_graph()


def test_catalog_holds_every_contract_id(catalog):
    assert CONTRACT_IDS - set(catalog) == set()


@pytest.mark.skipif(not SHARED_CATALOG.exists(), reason="ROOT_CAUSES.md is not beside the project")
def test_contract_ids_match_root_causes_md():
    ids = set(re.findall(r"^\| `([a-z0-9_.]+)` \|", SHARED_CATALOG.read_text(), re.M))
    assert ids - CONTRACT_IDS == set(), "ROOT_CAUSES.md has ids the catalog test does not know"


def test_every_verdict_is_reachable_from_the_entry_graph(graph, catalog):
    unreachable = set(catalog) - graph.reachable_verdicts()
    assert unreachable == set(), f"no path from the entry graph reaches {sorted(unreachable)}"


def test_every_verdict_is_documented(catalog):
    for v in catalog.values():
        assert len(v.title) > 5 and len(v.explanation) > 40 and v.remedy, v.id
        assert v.sources or v.id in ("healthy", "inconclusive"), f"{v.id} names no guide"


def test_every_probe_is_documented_and_used(graph):
    used = {node.probe for node in graph.nodes.values()}
    for name, cls in registry().items():
        assert cls.__doc__ and len(cls.description()) > 15, f"probe {name} has no one-line description"
        assert cls.needs is not None and cls.outcomes, name
    unused = set(registry()) - used
    assert unused == set(), f"registered probes no playbook uses: {sorted(unused)}"


def test_every_playbook_is_described(graph):
    for book in graph.playbooks.values():
        assert book.description.strip(), f"playbook {book.name} has no description"


FIELD_IDS = {
    "engine.version_regression", "engine.weight_update_bug", "algo.degenerate_groups", "metrics.false_truncation",
    "memory.release_leak", "config.sample_exceeds_limits", "sched.placement_resources", "sched.time_limit",
    "infra.network", "infra.gpu_fault", "infra.disk_full", "deps.version_mismatch", "mismatch.growing_drift",
    "crash.unrecognized",
}


@pytest.mark.parametrize("vid", sorted(FIELD_IDS))
def test_every_field_id_is_reached_by_a_shipped_example(vid):
    """Each field id has a run in examples/ whose expected verdict it is (tests/test_examples.py walks it)."""
    import json

    examples = {json.loads(p.read_text())["verdict"] for p in (ROOT / "examples").glob("*/expected.json")}
    assert vid in examples, f"no example run expects {vid}"
