"""config_rule: the guides' configuration rules, each with its arithmetic in the evidence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from probes.config_rule import ConfigRule
from triage.errors import Unavailable
from triage.run import open_run

BASE = "python3 train.py --hf-checkpoint /root/Qwen3-4B --prompt-data /root/dapo-math-17k.jsonl"


def make_run(tmp_path: Path, flags: str = "", log: str | None = None, manifest: str | None = None):
    (tmp_path / "cmdline.txt").write_text(f"{BASE} {flags}\n", encoding="utf-8")
    if log is not None:
        (tmp_path / "job.log").write_text(log, encoding="utf-8")
    if manifest is not None:
        (tmp_path / "triage.yaml").write_text(manifest, encoding="utf-8")
    return open_run(str(tmp_path))


def rule(name: str, run):
    probe = ConfigRule(ConfigRule.parse_params({"rule": name}, "test"))
    return probe.examine(run)


def hf_dir(tmp_path: Path, config: dict, generation: dict | None) -> Path:
    d = tmp_path / "Qwen3-4B"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(config), encoding="utf-8")
    (d / "model.safetensors").write_bytes(b"")
    if generation is not None:
        (d / "generation_config.json").write_text(json.dumps(generation), encoding="utf-8")
    return d


PG_WAIT = (
    "[2026-08-01 10:00:00] train.py:30 - Creating placement groups\n"
    "[2026-08-01 10:00:30] placement_group.py:64 - Waiting for placement group of 24 GPUs (elapsed 30s): "
    "16 GPUs registered with Ray, 16 available.\n"
    "[2026-08-01 10:01:00] placement_group.py:64 - Waiting for placement group of 24 GPUs (elapsed 60s): "
    "16 GPUs registered with Ray, 16 available.\n"
)
GPUS = "--actor-num-nodes 2 --actor-num-gpus-per-node 8 --rollout-num-gpus 8"


# gpu_count -----------------------------------------------------------------------------


def test_gpu_count_disaggregated_needs_more_than_the_cluster(tmp_path):
    obs = rule("gpu_count", make_run(tmp_path, GPUS, log=PG_WAIT))
    assert obs.outcome == "violated"
    ev = obs.evidence
    assert ev["arithmetic"] == "2*8 + 8 = 24 > 16"
    assert ev["gpus_needed"] == 24 and ev["cluster_gpus"] == 16
    assert ev["placement_group_gpus"] == 24 and ev["waited_s"] == 60
    assert ev["wait_line"]["where"].endswith("job.log:3")
    assert "24 GPUs" in obs.summary and "16" in obs.summary


def test_gpu_count_colocated_fits(tmp_path):
    log = PG_WAIT.replace("of 24 GPUs", "of 16 GPUs").replace("16 available", "8 available")
    obs = rule("gpu_count", make_run(tmp_path, GPUS + " --colocate", log=log))
    assert obs.outcome == "satisfied"
    assert obs.evidence["arithmetic"] == "2*8 = 16 <= 16"
    assert obs.evidence["colocate"] is True
    assert "other jobs hold the rest" in obs.summary  # only 8 of 16 free


def test_gpu_count_from_the_manifest_cluster_size(tmp_path):
    obs = rule("gpu_count", make_run(tmp_path, "--actor-num-nodes 1 --actor-num-gpus-per-node 8 --rollout-num-gpus 4",
                                     manifest="args:\n  cluster_gpus: 8\n"))
    assert obs.outcome == "violated"
    assert obs.evidence["arithmetic"] == "1*8 + 4 = 12 > 8"


def test_gpu_count_without_gpu_args_is_not_applicable(tmp_path):
    assert rule("gpu_count", make_run(tmp_path, "--rollout-batch-size 32", log=PG_WAIT)).outcome == "not_applicable"


def test_gpu_count_without_the_cluster_size_is_unavailable(tmp_path):
    with pytest.raises(Unavailable) as exc:
        rule("gpu_count", make_run(tmp_path, GPUS))
    assert "placement-group" in exc.value.reason


# global_batch --------------------------------------------------------------------------


def test_global_batch_mismatch(tmp_path):
    run = make_run(tmp_path, "--rollout-batch-size 32 --n-samples-per-prompt 8 --num-steps-per-rollout 2 --global-batch-size 64")
    obs = rule("global_batch", run)
    assert obs.outcome == "violated"
    assert obs.evidence["arithmetic"] == "32*8 // 2 = 128 != 64"
    assert obs.evidence["expected_global_batch_size"] == 128


def test_global_batch_consistent(tmp_path):
    run = make_run(tmp_path, "--rollout-batch-size 32 --n-samples-per-prompt 8 --num-steps-per-rollout 2 --global-batch-size 128")
    obs = rule("global_batch", run)
    assert obs.outcome == "satisfied"
    assert obs.evidence["arithmetic"] == "32*8 // 2 = 128 == 128"


def test_global_batch_not_whole_steps(tmp_path):
    obs = rule("global_batch", make_run(tmp_path, "--rollout-batch-size 32 --n-samples-per-prompt 8 --global-batch-size 100"))
    assert obs.outcome == "violated"
    assert obs.evidence["arithmetic"] == "32*8 = 256, not a multiple of 100"


def test_global_batch_without_rollout_batch_is_not_applicable(tmp_path):
    assert rule("global_batch", make_run(tmp_path, "--global-batch-size 64")).outcome == "not_applicable"


# max_tokens_per_gpu --------------------------------------------------------------------


def test_max_tokens_per_gpu_above_response_len_over_cp(tmp_path):
    run = make_run(tmp_path, "--use-dynamic-batch-size --max-tokens-per-gpu 16384 --rollout-max-response-len 8192 "
                             "--context-parallel-size 2")
    obs = rule("max_tokens_per_gpu", run)
    assert obs.outcome == "violated"
    assert obs.evidence["arithmetic"] == "16384 > 8192/2 = 4096"
    assert obs.evidence["safe_max_tokens_per_gpu"] == 4096


def test_max_tokens_per_gpu_at_the_safe_start(tmp_path):
    run = make_run(tmp_path, "--use-dynamic-batch-size --max-tokens-per-gpu 4096 --rollout-max-response-len 8192 "
                             "--context-parallel-size 2")
    obs = rule("max_tokens_per_gpu", run)
    assert obs.outcome == "satisfied"
    assert obs.evidence["arithmetic"] == "4096 <= 8192/2 = 4096"


def test_max_tokens_per_gpu_without_dynamic_batch_has_no_effect(tmp_path):
    obs = rule("max_tokens_per_gpu", make_run(tmp_path, "--max-tokens-per-gpu 16384 --rollout-max-response-len 8192"))
    assert obs.outcome == "not_applicable"
    assert "no effect without --use-dynamic-batch-size" in obs.summary


def test_max_tokens_per_gpu_unknown_response_len_is_unavailable(tmp_path):
    with pytest.raises(Unavailable) as exc:
        rule("max_tokens_per_gpu", make_run(tmp_path, "--use-dynamic-batch-size --max-tokens-per-gpu 9216"))
    assert "rollout_max_response_len" in exc.value.reason


# moe_permute_fusion --------------------------------------------------------------------


def test_moe_without_permute_fusion(tmp_path):
    obs = rule("moe_permute_fusion", make_run(tmp_path, "--num-experts 64 --moe-router-topk 8"))
    assert obs.outcome == "violated"
    assert obs.evidence["num_experts"] == 64 and obs.evidence["moe_permute_fusion"] is False


def test_moe_with_permute_fusion(tmp_path):
    assert rule("moe_permute_fusion", make_run(tmp_path, "--num-experts 64 --moe-permute-fusion")).outcome == "satisfied"


def test_moe_known_from_the_hf_config(tmp_path):
    hf_dir(tmp_path, {"model_type": "qwen3_moe", "num_experts": 128, "vocab_size": 151936}, {"eos_token_id": 151645})
    obs = rule("moe_permute_fusion", make_run(tmp_path))
    assert obs.outcome == "violated"
    assert obs.evidence["num_experts"] == 128 and obs.evidence["experts_from"] == "HF config.json"


def test_dense_model_permute_fusion_not_applicable(tmp_path):
    assert rule("moe_permute_fusion", make_run(tmp_path, "--tensor-model-parallel-size 2")).outcome == "not_applicable"


# cp_attention_backend ------------------------------------------------------------------


def test_cp_without_flash_attention(tmp_path):
    obs = rule("cp_attention_backend", make_run(tmp_path, "--context-parallel-size 2"))
    assert obs.outcome == "violated"
    assert obs.evidence == {"rule": "cp_attention_backend", "context_parallel_size": 2, "attention_backend": "auto"}


def test_cp_with_flash_attention(tmp_path):
    obs = rule("cp_attention_backend", make_run(tmp_path, "--context-parallel-size 2 --attention-backend flash"))
    assert obs.outcome == "satisfied"


def test_no_cp_is_not_applicable(tmp_path):
    assert rule("cp_attention_backend", make_run(tmp_path, "--attention-backend fused")).outcome == "not_applicable"


# stop_tokens ---------------------------------------------------------------------------


def test_no_stop_tokens_anywhere(tmp_path):
    hf_dir(tmp_path, {"model_type": "qwen2", "vocab_size": 151936}, {"do_sample": True})
    obs = rule("stop_tokens", make_run(tmp_path))
    assert obs.outcome == "violated"
    assert obs.evidence["generation_config"] is True
    assert obs.evidence["generation_eos_token_id"] is None and obs.evidence["config_eos_token_id"] is None
    assert obs.confidence >= 0.9


def test_only_config_eos_is_a_weaker_violation(tmp_path):
    hf_dir(tmp_path, {"model_type": "qwen2", "eos_token_id": 151643}, None)
    obs = rule("stop_tokens", make_run(tmp_path))
    assert obs.outcome == "violated"
    assert obs.evidence["generation_config"] is False and obs.evidence["config_eos_token_id"] == 151643
    assert obs.confidence < 0.9


def test_generation_config_eos_satisfies(tmp_path):
    hf_dir(tmp_path, {"model_type": "qwen2"}, {"eos_token_id": [151645, 151643]})
    obs = rule("stop_tokens", make_run(tmp_path))
    assert obs.outcome == "satisfied"
    assert obs.evidence["generation_eos_token_id"] == [151645, 151643]


def test_rollout_stop_token_ids_satisfy_without_the_checkpoint(tmp_path):
    assert rule("stop_tokens", make_run(tmp_path, "--rollout-stop-token-ids 151645 151643")).outcome == "satisfied"


def test_stop_tokens_unreachable_checkpoint_is_unavailable(tmp_path):
    with pytest.raises(Unavailable) as exc:
        rule("stop_tokens", make_run(tmp_path))
    assert exc.value.artifact == "hf_checkpoint"


CHATML = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
QWEN_TOKENS = {"151643": {"content": "<|endoftext|>"}, "151644": {"content": "<|im_start|>"},
               "151645": {"content": "<|im_end|>"}}


def chat_hf_dir(tmp_path: Path, generation: dict | None, config_eos=151643) -> Path:
    d = hf_dir(tmp_path, {"model_type": "qwen2", "eos_token_id": config_eos}, generation)
    (d / "tokenizer_config.json").write_text(json.dumps(
        {"eos_token": "<|endoftext|>", "chat_template": CHATML, "added_tokens_decoder": QWEN_TOKENS}), encoding="utf-8")
    return d


def test_stops_without_the_chat_end_of_turn_are_violated(tmp_path):
    chat_hf_dir(tmp_path, {"eos_token_id": 151643})
    obs = rule("stop_tokens", make_run(tmp_path, "--apply-chat-template"))
    assert obs.outcome == "violated"
    ev = obs.evidence
    assert ev["end_of_turn"]["token"] == "<|im_end|>" and ev["end_of_turn"]["id"] == 151645
    assert ev["end_of_turn"]["template"] == "tokenizer_config.json:chat_template"
    assert ev["stops"] == [
        {"id": 151643, "token": "<|endoftext|>", "source": "generation_config.json eos_token_id"},
        {"id": 151643, "token": "<|endoftext|>", "source": "config.json eos_token_id"},
    ]
    assert ev["end_of_turn_stops"] == [] and ev["chat_template_used"] == "--apply-chat-template"
    assert "<|im_end|> (id 151645)" in obs.summary


def test_stop_token_ids_without_the_end_of_turn_are_violated(tmp_path):
    chat_hf_dir(tmp_path, None, config_eos=None)
    obs = rule("stop_tokens", make_run(tmp_path, "--apply-chat-template --rollout-stop-token-ids 151643"))
    assert obs.outcome == "violated"
    assert [s["source"] for s in obs.evidence["stops"]] == ["--rollout-stop-token-ids"]


@pytest.mark.parametrize("flags, generation", [
    ("--apply-chat-template --rollout-stop-token-ids 151645", {"eos_token_id": 151643}),
    ("--apply-chat-template", {"eos_token_id": [151645, 151643]}),
    ("--apply-chat-template --rollout-stop '<|im_end|>'", {"eos_token_id": 151643}),
])
def test_end_of_turn_among_the_stops_satisfies(tmp_path, flags, generation):
    chat_hf_dir(tmp_path, generation)
    obs = rule("stop_tokens", make_run(tmp_path, flags))
    assert obs.outcome == "satisfied"
    (hit,) = obs.evidence["end_of_turn_stops"]
    assert hit["id"] == 151645 or hit["token"] == "<|im_end|>"


def test_chat_markers_in_the_sent_prompts_count_as_using_the_template(tmp_path):
    import torch

    chat_hf_dir(tmp_path, {"eos_token_id": 151643})
    d = tmp_path / "dump" / "rollout_data"
    d.mkdir(parents=True)
    torch.save({"rollout_id": 0, "samples": [{"prompt": "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
                                              "response": "Hello"}]}, d / "0.pt")
    obs = rule("stop_tokens", make_run(tmp_path))
    assert obs.outcome == "violated"
    assert "markers in 1 of 1 prompts" in obs.evidence["chat_template_used"]


def test_without_the_chat_template_in_use_eos_alone_satisfies(tmp_path):
    chat_hf_dir(tmp_path, {"eos_token_id": 151643})
    obs = rule("stop_tokens", make_run(tmp_path))
    assert obs.outcome == "satisfied"
    assert "end_of_turn" not in obs.evidence


def test_the_shipped_example_names_the_end_of_turn(examples_dir):
    obs = rule("stop_tokens", open_run(str(examples_dir / "missing-stop-token")))
    assert obs.outcome == "violated"
    assert obs.evidence["end_of_turn"] == {
        "token": "<|im_end|>", "id": 151645, "found_by": obs.evidence["end_of_turn"]["found_by"],
        "template": "tokenizer_config.json:chat_template"}
    assert obs.evidence["stops"] == []


def test_testbed_missing_stop_token_and_healthy():
    from triage.testbed.scenarios import generate

    obs = rule("stop_tokens", open_run(str(generate("rollout.missing_stop_token"))))
    assert obs.outcome == "violated"
    assert obs.evidence["end_of_turn"]["id"] == 2
    assert obs.evidence["stops"] == []  # the checkpoint names no eos at all
    healthy = rule("stop_tokens", open_run(str(generate("healthy.qwen2"))))
    assert healthy.outcome == "satisfied"
    assert healthy.evidence["end_of_turn_stops"][0]["source"] == "--rollout-stop-token-ids"


# ref_load_for_kl -----------------------------------------------------------------------


def test_kl_loss_without_ref_load(tmp_path):
    obs = rule("ref_load_for_kl", make_run(tmp_path, "--use-kl-loss --kl-loss-coef 0.01"))
    assert obs.outcome == "violated"
    assert obs.evidence["ref_load"] is None and obs.evidence["use_kl_loss"] is True


def test_kl_with_ref_load_that_exists_under_the_run(tmp_path):
    (tmp_path / "ckpt" / "Qwen3-4B_torch_dist").mkdir(parents=True)
    (tmp_path / "ckpt" / "Qwen3-4B_torch_dist" / "latest_checkpointed_iteration.txt").write_text("release")
    obs = rule("ref_load_for_kl", make_run(tmp_path, "--kl-coef 0.05 --ref-load /mnt/ckpt/Qwen3-4B_torch_dist"))
    assert obs.outcome == "satisfied"
    assert obs.evidence["exists_here"] is True and obs.evidence["tracker_file"] is True


def test_kl_with_missing_ref_load_confirmed_by_the_log(tmp_path):
    log = (
        "[2026-08-01 10:00:00] train.py:12 - Start\n"
        "Traceback (most recent call last):\n"
        '  File "/root/slime/train.py", line 104, in <module>\n'
        "    args = parse_args()\n"
        "FileNotFoundError: ref_load /mnt/ckpt/missing_ref does not exist, please check the path.\n"
    )
    obs = rule("ref_load_for_kl", make_run(tmp_path, "--use-kl-loss --ref-load /mnt/ckpt/missing_ref", log=log))
    assert obs.outcome == "violated"
    assert obs.evidence["exists_here"] is False and obs.evidence["log_confirms"] is True
    assert obs.confidence >= 0.9


def test_kl_off_needs_no_ref_load(tmp_path):
    assert rule("ref_load_for_kl", make_run(tmp_path, "--kl-coef 0.0")).outcome == "not_applicable"


# fp8 -----------------------------------------------------------------------------------


def test_fp8_recipe_on(tmp_path):
    obs = rule("fp8", make_run(tmp_path, "--fp8-format e4m3 --fp8-recipe blockwise"))
    assert obs.outcome == "violated"
    assert obs.evidence["fp8_format"] == "e4m3" and obs.evidence["fp8_recipe"] == "blockwise"


def test_bf16_run_is_not_fp8(tmp_path):
    obs = rule("fp8", make_run(tmp_path, "--bf16"))
    assert obs.outcome == "satisfied"


# moe_routing_replay --------------------------------------------------------------------


def test_moe_without_routing_replay(tmp_path):
    obs = rule("moe_routing_replay", make_run(tmp_path, "--num-experts 64"))
    assert obs.outcome == "violated"
    assert obs.evidence["routing_replay"] is False and obs.evidence["dumps_checked"] == 0


def test_moe_with_routing_replay(tmp_path):
    obs = rule("moe_routing_replay", make_run(tmp_path, "--num-experts 64 --use-rollout-routing-replay"))
    assert obs.outcome == "satisfied"


def test_moe_dumps_without_routed_experts(tmp_path):
    torch = pytest.importorskip("torch")
    (tmp_path / "dump" / "rollout_data").mkdir(parents=True)
    samples = [
        {"index": i, "tokens": [1, 2, 3, 4], "response_length": 2, "reward": 1.0, "status": "completed",
         "rollout_routed_experts": None}
        for i in range(2)
    ]
    torch.save({"rollout_id": 0, "samples": samples}, tmp_path / "dump" / "rollout_data" / "0.pt")
    obs = rule("moe_routing_replay", make_run(tmp_path, "--num-experts 64 --dump-details dump"))
    assert obs.outcome == "violated"
    assert obs.evidence["dumps_checked"] == 1 and obs.evidence["dumps_with_routed_experts"] == 0


def test_dense_model_routing_not_applicable(tmp_path):
    assert rule("moe_routing_replay", make_run(tmp_path)).outcome == "not_applicable"


def test_unknown_rule_is_refused():
    from triage.errors import PlaybookError

    with pytest.raises(PlaybookError, match="rule"):
        ConfigRule.parse_params({"rule": "colour"}, "playbook x node y")


def arguments_block(**args: str) -> str:
    # Megatron prints every argument, sorted, dots up to a fixed column, on the trainer's stdout.
    p = "(MegatronTrainRayActor pid=2345) "
    lines = [f"{p}------------------------ arguments ------------------------"]
    for name in sorted(args):
        lines.append(f"{p}  {name} {'.' * max(3, 48 - len(name))} {args[name]}")
    lines.append(f"{p}-------------------- end of arguments ---------------------")
    return "[2026-08-01 10:00:00] train.py:12 - Start training\n" + "\n".join(lines) + "\n"


def test_rules_read_megatron_arguments_block(tmp_path):
    log = arguments_block(
        attention_backend="AttnBackend.auto", context_parallel_size="2", fp8="None", fp8_recipe="delayed",
        num_experts="None", moe_permute_fusion="False", use_kl_loss="False", kl_coef="0.0",
    )
    (tmp_path / "job.log").write_text(log, encoding="utf-8")
    run = open_run(str(tmp_path))
    cp = rule("cp_attention_backend", run)
    assert cp.outcome == "violated" and cp.evidence["attention_backend"] == "auto"
    # Megatron prints fp8_recipe's default even when FP8 is off: that is not an FP8 run.
    assert rule("fp8", run).outcome == "satisfied"
    assert rule("moe_permute_fusion", run).outcome == "not_applicable"
    assert rule("ref_load_for_kl", run).outcome == "not_applicable"


# placement_resources ---------------------------------------------------------------------

# `ray status` as Ray 2.4x prints it (ray-project/ray#47792 shows the layout)
RAY_STATUS_4_CPUS = (
    "+ ray status\n"
    "======== Autoscaler status: 2026-08-06 09:14:02.118203 ========\n"
    "Resources\n"
    "---------------------------------------------------------------\n"
    "Usage:\n"
    " 0.0/4.0 CPU\n"
    " 0.0/8.0 GPU\n"
    " 0B/1.40TiB memory\n"
    " 0B/186.26GiB object_store_memory\n"
    "\n"
    "Demands:\n"
    " (no resource demands)\n"
)
SLIME_WAIT_8 = (
    "[2026-08-06 09:15:02] placement_group.py:64 - Waiting for placement group of 8 GPUs (elapsed 30s): "
    "8 GPUs registered with Ray, 8 available.\n"
)
COLOCATED_8 = "--actor-num-nodes 1 --actor-num-gpus-per-node 8 --colocate --rollout-num-gpus 8"


def test_placement_resources_slime_bundles_need_more_cpus_than_ray_status_shows(tmp_path):
    obs = rule("placement_resources", make_run(tmp_path, COLOCATED_8, log=RAY_STATUS_4_CPUS + SLIME_WAIT_8))
    assert obs.outcome == "violated"
    e = obs.evidence
    assert e["shortfall"] == [{"resource": "CPU", "requested": 8.0, "cluster": 4.0}]
    assert e["cluster"]["CPU"]["from"].endswith("job.log:6")  # the ` 0.0/4.0 CPU` line
    assert e["deciding"]["where"].endswith("job.log:13")  # slime's wait line
    assert "8 CPU > 4 CPU" in obs.summary and "8 GPUs fit the cluster's 8" in obs.summary
    # the GPU rule, on the same run, finds nothing wrong: that is why this one exists
    assert rule("gpu_count", make_run(tmp_path, COLOCATED_8, log=RAY_STATUS_4_CPUS + SLIME_WAIT_8)).outcome == "satisfied"


def test_placement_resources_autoscaler_infeasible_bundle_with_gpus_that_fit(tmp_path):
    # allenai/open-instruct#1431: a bundle of {'GPU': 6, 'CPU': 60} on one 8-GPU node; the autoscaler's
    # wording from ray-project/ray python/ray/autoscaler/_private/autoscaler.py
    log = ("(autoscaler +18s) Tip: use `ray status` to view detailed cluster status. To disable these messages, "
           "set RAY_SCHEDULER_EVENTS=0.\n"
           "(autoscaler +18s) Error: No available node types can fulfill resource request {'CPU': 60.0, 'GPU': 6.0}. "
           "Add suitable node types to this cluster to resolve this issue.\n")
    obs = rule("placement_resources", make_run(tmp_path, "--num-learners-per-node 6", log=log,
                                               manifest="args:\n  cluster_gpus: 8\n"))
    assert obs.outcome == "violated"
    assert obs.evidence["deciding"]["kind"] == "infeasible"
    assert "its 6 GPUs fit the cluster's 8" in obs.summary and "60 CPU" in obs.summary


def test_placement_resources_raylet_line_gives_the_nodes_total(tmp_path):
    # src/ray/raylet/scheduling/cluster_task_manager.cc's older wording, with the node's resources
    log = ("2026-08-06 09:20:01,780\tWARNING worker.py:1189 -- The actor or task with ID d6b29075fef58665 cannot be "
           "scheduled right now. It requires {CPU: 32.000000, GPU: 1.000000} for placement, but this node only has "
           "remaining {16.000000/16.000000 CPU, 120.000000 GiB/120.000000 GiB memory, 8.000000/8.000000 GPU, "
           "1.000000/1.000000 node:10.0.0.11}\n. In total there are 1 pending tasks and 0 pending actors on this node.\n")
    obs = rule("placement_resources", make_run(tmp_path, "", log=log))
    assert obs.outcome == "violated"
    assert obs.evidence["shortfall"] == [{"resource": "CPU", "requested": 32.0, "cluster": 16.0}]


def test_placement_resources_fit(tmp_path):
    log = RAY_STATUS_4_CPUS.replace("0.0/4.0 CPU", "0.0/64.0 CPU") + SLIME_WAIT_8
    obs = rule("placement_resources", make_run(tmp_path, COLOCATED_8, log=log))
    assert obs.outcome == "satisfied"


def test_placement_resources_gpus_short_is_not_this_rule(tmp_path):
    obs = rule("placement_resources", make_run(tmp_path, GPUS, log=RAY_STATUS_4_CPUS + PG_WAIT))
    assert obs.outcome == "satisfied"  # 24 GPUs > 8: the GPU rule's verdict, not a CPU one
    assert "the wait is on GPUs" in obs.summary


def test_placement_resources_unknown_cluster_cpus_is_unavailable(tmp_path):
    with pytest.raises(Unavailable) as exc:
        rule("placement_resources", make_run(tmp_path, COLOCATED_8, log=SLIME_WAIT_8))
    assert "CPU" in exc.value.reason and "ray status" in (exc.value.command or "")


def test_placement_resources_without_waits_is_not_applicable(tmp_path):
    assert rule("placement_resources", make_run(tmp_path, COLOCATED_8, log="[2026-08-06 09:15:02] train.py:1 - start\n")
                ).outcome == "not_applicable"


def test_placement_resources_manifest_cluster_cpus(tmp_path):
    obs = rule("placement_resources", make_run(tmp_path, COLOCATED_8, log=SLIME_WAIT_8, manifest="args:\n  cluster_cpus: 6\n"))
    assert obs.outcome == "violated"
    assert obs.evidence["cluster"]["CPU"] == {"total": 6.0, "from": "args.cluster_cpus"}


# vLLM's Ray executor waiting for its engine's group, and `ray status` beside it (gpustack/gpustack#5509: one node's
# GPU seen as a TPU, so Ray had 1 GPU for a group of 2)
VLLM_PG_WAIT = ("(EngineCore pid=84) INFO 06-07 18:13:55 [ray_utils.py:464] Waiting for creating a placement group of "
                "specs for 150 seconds. specs=[{'GPU': 1.0}, {'GPU': 1.0}]. Check `ray status` to see if you have enough "
                "resources.\n")
RAY_STATUS_1_GPU = RAY_STATUS_4_CPUS.replace(" 0.0/8.0 GPU\n", " 0.0/1.0 GPU\n").replace(
    " (no resource demands)\n", " {'GPU': 1.0} * 2 (PACK): 1+ pending placement groups\n")


def test_a_group_waiting_for_more_gpus_than_ray_status_shows_decides_without_arguments(tmp_path, capsys):
    import json

    from triage.cli import main

    log = tmp_path / "job.log"
    log.write_text(VLLM_PG_WAIT + RAY_STATUS_1_GPU, encoding="utf-8")
    assert main(["run", str(log), "--json", "--no-cache"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["root_cause"]["id"] == "sched.insufficient_gpus"
    step = report["path"][-1]
    assert step["outcome"] == "violated" and "2 GPU > 1 GPU" in step["evidence"]["arithmetic"]
    # the wait alone, with no count of the cluster's GPUs, is read (stuck at submission) but decides nothing
    log.write_text(VLLM_PG_WAIT, encoding="utf-8")
    assert main(["run", str(log), "--json", "--no-cache"]) == 3
    report = json.loads(capsys.readouterr().out)
    assert report["path"][0]["outcome"] == "stuck_at_submission"
    assert [s["outcome"] for s in report["path"][1:]] == ["unavailable", "not_applicable"]


# verl: the batch over its data-parallel workers ------------------------------------------

VERL = "python3 -m verl.trainer.main_ppo trainer.nnodes=1 trainer.n_gpus_per_node=4"


def verl_run(tmp_path: Path, overrides: str):
    (tmp_path / "cmdline.txt").write_text(f"{VERL} {overrides}\n", encoding="utf-8")
    return open_run(str(tmp_path))


def test_verl_train_batch_times_n_not_divisible_by_the_gpus(tmp_path):
    obs = rule("global_batch", verl_run(tmp_path, "data.train_batch_size=6 actor_rollout_ref.rollout.n=1"))
    assert obs.outcome == "violated"
    assert obs.evidence["arithmetic"] == (
        "data.train_batch_size*rollout.n = 6*1 = 6 is not a multiple of 4 data-parallel workers (1*4 GPUs)"
    )
    assert "only support equal chunk" in obs.summary


def test_verl_train_batch_divisible_once_rollout_n_multiplies_it(tmp_path):
    obs = rule("global_batch", verl_run(tmp_path, "data.train_batch_size=6 actor_rollout_ref.rollout.n=2"))
    assert obs.outcome == "satisfied"
    assert obs.evidence["data_parallel_workers"] == 4
    # (id52518820335's verl run: `4*5 = 10 per worker` had skipped the product)
    assert obs.evidence["arithmetic"] == "data.train_batch_size*rollout.n = 6*2 = 12, 3 per worker over 4"


def test_verl_megatron_model_parallel_leaves_fewer_workers(tmp_path):
    run = verl_run(tmp_path, "data.train_batch_size=6 actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2")
    obs = rule("global_batch", run)
    assert obs.outcome == "satisfied"
    assert obs.evidence["data_parallel_workers"] == 2


def test_verl_generation_batch_smaller_than_the_gpus(tmp_path):
    (tmp_path / "cmdline.txt").write_text(
        "python3 -m verl.trainer.main_generation trainer.nnodes=1 trainer.n_gpus_per_node=2 data.batch_size=1 "
        "data.n_samples=1 rollout.tensor_model_parallel_size=2\n",
        encoding="utf-8",
    )
    obs = rule("global_batch", open_run(str(tmp_path)))
    assert obs.outcome == "violated"
    assert obs.evidence["arithmetic"].startswith("data.batch_size = 1 is not a multiple of 2")


def test_openrlhf_train_batch_larger_than_a_rollout_is_not_slimes_assertion(tmp_path):
    # OpenRLHF/OpenRLHF#360 trained with these numbers (DeepSpeed accumulates across rollouts): no batch verdict
    (tmp_path / "cmdline.txt").write_text(
        "python3 examples/train_ppo_ray.py --actor_num_nodes 2 --actor_num_gpus_per_node 8 --micro_train_batch_size 1 "
        "--train_batch_size 16 --micro_rollout_batch_size 2 --rollout_batch_size 8 --max_epochs 1\n", encoding="utf-8")
    obs = rule("global_batch", open_run(str(tmp_path)))
    assert obs.outcome == "not_applicable"


@pytest.mark.parametrize("dynamic, outcome", [("", "violated"), (" actor_rollout_ref.actor.use_dynamic_bsz=True", "not_applicable")])
def test_verls_mini_batch_must_fit_in_a_steps_prompts(tmp_path, dynamic, outcome):
    # verl/trainer/ppo/ray_trainer.py _validate_config: assert data.train_batch_size >= ppo_mini_batch_size
    # unless the batch is dynamic (verl-project/verl#538 ran 176 prompts a step against 440, with use_dynamic_bsz)
    (tmp_path / "cmdline.txt").write_text(
        "python3 -m verl.trainer.main_ppo data.train_batch_size=176 actor_rollout_ref.actor.ppo_mini_batch_size=440 "
        "actor_rollout_ref.rollout.n=16" + dynamic + "\n", encoding="utf-8")
    obs = rule("global_batch", open_run(str(tmp_path)))
    assert obs.outcome == outcome, obs.summary
    if outcome == "violated":
        assert obs.evidence["arithmetic"] == ("data.train_batch_size 176 < actor_rollout_ref.actor.ppo_mini_batch_size 440")


def test_a_start_up_check_broken_in_a_log_that_shows_no_refusal_is_no_finding(tmp_path):
    # PRIME-RL/PRIME#16: only bash's echo of the command, no error after it (a verl older than the check); with the
    # framework's own refusal in the log the rule stands
    cmd = ("+ python3 -m verl.trainer.main_ppo data.train_batch_size=32 actor_rollout_ref.actor.ppo_mini_batch_size=64 "
           "actor_rollout_ref.rollout.n=4\n")
    (tmp_path / "quiet").mkdir()
    (tmp_path / "quiet" / "job.log").write_text("+ export NCCL_DEBUG=WARN\n" + cmd, encoding="utf-8")
    obs = rule("global_batch", open_run(str(tmp_path / "quiet")))
    assert obs.outcome == "not_applicable" and obs.evidence["log_shows_no_refusal"] is True
    (tmp_path / "refused").mkdir()
    (tmp_path / "refused" / "job.log").write_text(
        cmd + "AssertionError: train_batch_size (32) must be >= actor.ppo_mini_batch_size (64)\n", encoding="utf-8")
    assert rule("global_batch", open_run(str(tmp_path / "refused"))).outcome == "violated"


def test_a_ray_status_without_a_gpu_row_is_a_cluster_without_gpus(tmp_path, capsys):
    # real-stanford/scalingup#6: `ray status` lists the resources the cluster has; a GPU actor pending on a
    # cluster whose Usage: block has only CPU and memory rows can never be placed
    log = ("(autoscaler +32s) Error: No available node types can fulfill resource request {'CPU': 1.0, 'GPU': 1.0}. "
           "Add suitable node types to this cluster to resolve this issue.\n\n"
           "Resources\n"
           "Usage:\n"
           " 0.0/20.0 CPU\n"
           " 0B/6.32GiB memory\n"
           " 412.90MiB/3.16GiB object_store_memory\n\n"
           "Demands:\n"
           " {'CPU': 1.0, 'GPU': 1.0}: 1+ pending tasks/actors\n")
    (tmp_path / "job.log").write_text(log, encoding="utf-8")
    from triage.cli import main

    assert main(["run", str(tmp_path / "job.log"), "--json", "--no-cache"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["root_cause"]["id"] == "sched.insufficient_gpus"
    assert "1 GPU > 0 GPU" in json.dumps(report)
    assert "has no GPU row" in json.dumps(report)


@pytest.mark.parametrize(("status", "outcome"), [
    # Replicable-MARL/MARLlib#141: Ray Tune's status line says the cluster Ray saw has no GPU
    ("Resources requested: 0/36 CPUs, 0/0 GPUs, 0.0/32.15 GiB heap, 0.0/16.07 GiB objects\n", "violated"),
    # Ray 2.x's wording of the same line, a cluster with a GPU: the request fits
    ("Logical resource usage: 0/8 CPUs, 0/1 GPUs (0.0/1.0 accelerator_type:A10G)\n", "fits"),
])
def test_ray_tunes_status_line_gives_the_clusters_totals(tmp_path, status, outcome):
    log = ("(scheduler +9s) Error: No available node types can fulfill resource request {'CPU': 1.0, 'GPU': 1.0}. "
           "Add suitable node types to this cluster to resolve this issue.\n== Status ==\n" + status)
    (tmp_path / "job.log").write_text(log, encoding="utf-8")
    if outcome == "violated":
        obs = rule("gpu_count", open_run(str(tmp_path)))
        assert obs.outcome == outcome, obs.summary
        assert "Ray Tune's status" in json.dumps(obs.evidence)
    else:  # the request fits: no GPU shortfall to report, and the run has no args to check instead
        from probes.config_rule import scan_placement

        assert scan_placement(open_run(str(tmp_path))).capacity == {"CPU": 8.0, "GPU": 1.0}
        with pytest.raises(Unavailable):
            rule("gpu_count", open_run(str(tmp_path)))


def test_ray_trains_warning_that_training_has_not_started_is_the_gpu_shortfall(tmp_path, capsys):
    # awslabs/awsome-distributed-ai#386: Ray Train's insufficient-resources warning, every 60 s
    line = ("2024-07-23 15:49:42,003\tWARNING insufficient_resources_manager.py:163 -- Ignore this message if the "
            "cluster is autoscaling. Training has not started in the last 60 seconds. This could be due to the cluster "
            "not having enough resources available. You asked for 113.0 CPUs and 16.0 GPUs, but the cluster only has "
            "4.0 CPUs and 0 GPUs available. Stop the training and adjust the required resources\n")
    (tmp_path / "job.log").write_text(line * 3, encoding="utf-8")
    from triage.cli import main

    assert main(["run", str(tmp_path / "job.log"), "--json", "--no-cache"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["root_cause"]["id"] == "sched.insufficient_gpus"
    assert "16 GPU > 0 GPU" in json.dumps(report)


def test_the_slime_arithmetic_takes_the_clusters_gpus_from_ray_start(tmp_path):
    # OpenRLHF/OpenRLHF#516: no placement-group wait lines; `ray start --num-gpus=4` gives the cluster's GPUs
    log = ("ray start --head --node-ip-address 0.0.0.0 --num-cpus=4 --num-gpus=4\n"
           "(autoscaler +1m) Warning: The following resource request cannot be scheduled right now: {'GPU': 1.0, "
           "'CPU': 1.0}. This is likely due to all cluster resources being claimed by actors.\n")
    obs = rule("gpu_count", make_run(tmp_path, "--actor-num-nodes 1 --actor-num-gpus-per-node 1", log=log))
    assert obs.outcome == "satisfied", obs.summary
    assert obs.evidence["cluster_gpus"] == 4 and "ray start --num-gpus" in obs.evidence["cluster_gpus_from"]


def test_a_bundle_pinned_to_a_node_is_not_called_a_gpu_only_request(tmp_path):
    # vllm-project/vllm#7815: vLLM's first bundle asks `node:<IP>` (the driver's node) with its GPU
    log = ("(autoscaler +7s) Error: No available node types can fulfill resource request {'node:10.0.0.5': 0.001, "
           "'GPU': 1.0}. Add suitable node types to this cluster to resolve this issue.\n")
    obs = rule("placement_resources", make_run(tmp_path, "", log=log))
    assert obs.outcome == "not_applicable"
    assert "pinned to a node by its `node:<address>` resource" in obs.summary


def test_a_ray_status_with_a_gpu_row_keeps_its_count(tmp_path):
    # the same request on a cluster whose block lists its GPUs fits
    log = ("(autoscaler +32s) Warning: The following resource request cannot be scheduled right now: {'CPU': 1.0, "
           "'GPU': 1.0}. This is likely due to all cluster resources being claimed by actors.\n"
           "Usage:\n 0.0/20.0 CPU\n 1.0/2.0 GPU\n 0B/6.32GiB memory\n\n")
    obs = rule("gpu_count", make_run(tmp_path, "", log=log))
    assert obs.outcome != "violated"


# ray-project/ray#47792's `ray status`: two nodes, 2 CPUs between them, a group of one 2-CPU bundle pending
RAY_STATUS_TWO_NODES = (
    "======== Autoscaler status: 2024-09-23 01:17:18.277326 ========\n"
    "Node status\n"
    "---------------------------------------------------------------\n"
    "Active:\n"
    " 1 ray.head.default\n"
    " 1 ray.worker.default\n"
    "Pending:\n"
    " (no pending nodes)\n"
    "Resources\n"
    "---------------------------------------------------------------\n"
    "Usage:\n"
    " 0.0/2.0 CPU\n"
    " 0B/2.33GiB memory\n"
    "\n"
    "Demands:\n"
    " {'CPU': 2.0} * 1 (SPREAD): 1+ pending placement groups\n"
)


def test_placement_resources_a_bundle_must_fit_one_node_not_the_clusters_total(tmp_path):
    with pytest.raises(Unavailable) as exc:
        rule("placement_resources", make_run(tmp_path, "", log=RAY_STATUS_TWO_NODES))
    assert "must fit on one node" in exc.value.reason and "2 nodes" in exc.value.reason
    assert "ray status -v" in (exc.value.command or "")


def test_placement_resources_a_bundle_within_a_nodes_share_fits(tmp_path):
    log = RAY_STATUS_TWO_NODES.replace("0.0/2.0 CPU", "0.0/64.0 CPU")
    assert rule("placement_resources", make_run(tmp_path, "", log=log)).outcome == "satisfied"


def test_placement_resources_strict_pack_puts_the_whole_group_on_one_node(tmp_path):
    log = (RAY_STATUS_TWO_NODES.replace("0.0/2.0 CPU", "0.0/64.0 CPU")
           .replace("{'CPU': 2.0} * 1 (SPREAD)", "{'CPU': 8.0} * 8 (STRICT_PACK)"))
    with pytest.raises(Unavailable) as exc:  # 64 CPUs on one node, of 64 on two: the split decides
        rule("placement_resources", make_run(tmp_path, "", log=log))
    assert "64 CPU a node" in exc.value.reason


def test_gpu_count_is_not_asked_of_a_wait_for_cpus_alone(tmp_path):
    (tmp_path / "job.log").write_text(RAY_STATUS_TWO_NODES, encoding="utf-8")  # a pasted `ray status`, no arguments
    obs = rule("gpu_count", open_run(str(tmp_path)))
    assert obs.outcome == "not_applicable"
    assert "asks no GPUs" in obs.summary
