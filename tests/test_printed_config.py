"""The resolved config a job printed at start-up is read as its arguments (triage/formats/printed_config.py).

The dumps are shaped as verl's `pprint(OmegaConf.to_container(config, resolve=True))` under Ray's `(TaskRunner pid=…)`
prefix (LeiLiLab/WALAR's grpo.log, shortened) and NeMo-RL's `Final config:` + `pprint.pprint(config)`
(sunbc0120/b200-nemo-rl's terminal output, shortened).
"""

from __future__ import annotations

from pathlib import Path

from probes.config_rule import ConfigRule
from triage.formats.printed_config import printed_config
from triage.run import open_run

P = "\x1b[36m(TaskRunner pid=1651349)\x1b[0m "


def _verl_dump(train_batch: int = 64, mini: int = 256) -> str:
    lines = [
        "{'actor_rollout_ref': {'actor': {'checkpoint': {'load_contents': ['model',",
        "                                                                  'optimizer',",
        "                                                                  'extra']},",
        "                                 'clip_ratio': 0.2,",
        "                                 'optim': {'lr': 5e-07,",
        "                                           'warmup_style': 'constant'},",
        f"                                 'ppo_mini_batch_size': {mini},",
        "                                 'use_dynamic_bsz': False},",
        "                       'rollout': {'n': 8,",
        "                                   'response_length': 1024}},",
        " 'data': {'max_prompt_length': 1024,",
        "          'max_response_length': 1024,",
        f"          'train_batch_size': {train_batch}}},",
        " 'trainer': {'n_gpus_per_node': 8, 'nnodes': 1, 'total_training_steps': None}}",
    ]
    out = [P + lines[0], P + lines[1]]
    # another thread's warning between the dump's lines, with its indented source line (zhiyuanhubj/logic-rl-formula)
    out += [P + "/usr/lib/python3/site-packages/vllm/__init__.py:5: RuntimeWarning: Failed to read commit hash",
            P + "  from vllm.version import __version__ as VLLM_VERSION",
            "(WorkerDict pid=1656370) an actor's line between them"]
    out += [P + line for line in lines[2:]]
    return "2025-06-20 05:18:00,305\tINFO worker.py:1832 -- Started a local Ray instance.\n" + "\n".join(out) + "\n"


def test_verls_printed_config_is_read_with_its_dotted_names(tmp_path):
    log = tmp_path / "grpo.log"
    log.write_text(_verl_dump(), encoding="utf-8")
    found = printed_config([log])
    assert found is not None and found.where == f"{log}:2"
    assert found.values["actor_rollout_ref.rollout.n"] == 8
    assert found.values["data.train_batch_size"] == 64
    assert found.values["actor_rollout_ref.actor.checkpoint.load_contents"] == ["model", "optimizer", "extra"]
    run = open_run(str(tmp_path))
    assert run.args.get("n_samples_per_prompt") == 8  # its canonical name (triage/frameworks/args.yaml)
    assert run.args.source_of("data.train_batch_size") == "printed_config"


def test_nemo_rls_final_config_is_read(tmp_path):
    log = tmp_path / "terminal_output.txt"
    log.write_text(
        "Loaded configuration from: /workspace/grpo-gemma3-1b-it-1n8g-fsdp2tp1-b200.yaml\n"
        "Applied CLI overrides\n"
        "Final config:\n"
        "{'checkpointing': {'checkpoint_dir': 'results/grpo-gemma3-1b-it-1n8g-fsdp2tp1-b200',\n"
        "                   'enabled': True},\n"
        " 'grpo': {'num_generations_per_prompt': 16,\n"
        "          'num_prompts_per_step': 32},\n"
        " 'policy': {'generation': {'max_new_tokens': 1024, 'temperature': 1.0},\n"
        "            'model_name': 'google/gemma-3-1b-it',\n"
        "            'optimizer': {'kwargs': {'lr': 5e-06}}}}\n"
        "📊 Using log directory: /data/nemo-rl-logs/exp_008\n", encoding="utf-8")
    found = printed_config([log])
    assert found is not None and found.where.endswith(":3")  # its title line
    assert found.values["grpo.num_generations_per_prompt"] == 16
    assert found.values["policy.optimizer.kwargs.lr"] == 5e-06


def test_a_dump_that_never_closes_or_does_not_parse_gives_nothing(tmp_path):
    log = tmp_path / "job.log"
    log.write_text(P + "{'actor_rollout_ref': {'actor': {'clip_ratio': 0.2,\n"
                   + "".join(P + "                                 'x': 1,\n" for _ in range(5000)), encoding="utf-8")
    assert printed_config([log]) is None
    log.write_text("Final config:\n{'a': " + "[" * 100000 + "}\n", encoding="utf-8")
    assert printed_config([log]) is None
    log.write_text("Final config:\nnot a dict\n", encoding="utf-8")
    assert printed_config([log]) is None


def _global_batch(run):
    return ConfigRule(ConfigRule.parse_params({"rule": "global_batch"}, "test")).examine(run)


def test_a_start_up_check_the_run_trained_past_is_no_finding(tmp_path):
    """verl asserts data.train_batch_size >= ppo_mini_batch_size at start; a run whose printed config breaks it yet
    shows 33 steps of its progress bar was not refused, so the rule as read is not its version's."""
    log = tmp_path / "grpo.log"
    log.write_text(_verl_dump() + "".join(
        f"{P}Training Progress:   0%|          | {i}/15625 [34:38<288:57:10, 66.71s/it]\n" for i in range(1, 34)),
        encoding="utf-8")
    obs = _global_batch(open_run(str(tmp_path)))
    assert obs.outcome == "not_applicable"
    assert obs.evidence["trained_past_start"] == "a progress bar at step 33 in grpo.log"
    assert "64 < actor_rollout_ref.actor.ppo_mini_batch_size 256" in obs.summary


def test_a_start_up_check_broken_before_any_step_is_a_candidate_until_the_log_shows_the_refusal(tmp_path):
    # verl's config dump alone, no step and no error: a verl that makes the check would have refused it right after,
    # a copy older than the check (PRIME-RL/PRIME#16) trains with it; the log shows neither, so it is a candidate
    log = tmp_path / "grpo.log"
    log.write_text(_verl_dump(), encoding="utf-8")
    obs = _global_batch(open_run(str(tmp_path)))
    assert obs.outcome == "not_applicable" and obs.evidence["log_shows_no_refusal"] is True
    assert obs.evidence["arithmetic"] == "data.train_batch_size 64 < actor_rollout_ref.actor.ppo_mini_batch_size 256"
    assert obs.evidence["suggests"][0]["verdict"] == "config.batch_size_mismatch"
    from triage.api import triage

    report = triage(str(tmp_path))
    assert report.root_cause.id == "inconclusive" and report.candidates[0].id == "config.batch_size_mismatch"
    # with verl's refusal after it, the rule is violated
    log.write_text(_verl_dump() + "AssertionError: train_batch_size (64) must be >= actor.ppo_mini_batch_size (256)\n",
                   encoding="utf-8")
    assert _global_batch(open_run(str(tmp_path))).outcome == "violated"
