"""Configuration rules from the guides, one per playbook node (`params: {rule: ...}`).

Each rule reads the run's arguments (Megatron's arguments block, the command line, or
the manifest's `args:`) and answers `violated`, `satisfied` or `not_applicable` (the
rule's premise does not hold: no KL, no MoE, no context parallelism, ...), with the
arithmetic in the evidence. A premise that holds while a value the rule needs is
unknown raises `Unavailable`, naming what is missing.

Rules and their sources (shared/seeds):
- gpu_count (004): colocated jobs need actor_num_nodes * actor_num_gpus_per_node GPUs,
  disaggregated ones that plus rollout_num_gpus; more than the cluster has waits forever.
- global_batch (004): global_batch_size == rollout_batch_size * n_samples_per_prompt // num_steps_per_rollout.
- max_tokens_per_gpu (004): with --use-dynamic-batch-size, start at rollout_max_response_len / cp_size.
- moe_permute_fusion (000, 001): MoE models need --moe-permute-fusion.
- cp_attention_backend (000, 001): context parallelism needs --attention-backend flash.
- stop_tokens (004, slime Q&A): the stops (--rollout-stop(-token-ids), the HF checkpoint's eos ids) must
  include the chat template's end-of-turn token when the run uses the template, and must exist at all.
- ref_load_for_kl (slime arguments check, 004): KL on needs a --ref-load that exists.
- fp8 (003): FP8 training is a prime suspect for collapse; "violated" means the recipe is on.
- moe_routing_replay (003): MoE without rollout routing replay (R3) lets inference and
  training pick different experts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict

from triage.errors import BadInput, CorruptArtifact, TriageError, Unavailable
from triage.finding import Observation
from triage.probe import Cost, Probe

if TYPE_CHECKING:
    from triage.run.run import Run

Rule = Literal[
    "gpu_count",
    "global_batch",
    "max_tokens_per_gpu",
    "moe_permute_fusion",
    "cp_attention_backend",
    "stop_tokens",
    "ref_load_for_kl",
    "fp8",
    "moe_routing_replay",
]

_FALSE_WORDS = ("", "false", "0", "no", "none", "null", "off")

# --- reading argument values, whatever form the source gave them in -------------------


def arg_value(run: Run, *names: str) -> tuple[str | None, Any]:
    """The first of `names` the run's arguments hold (name, value); (None, None) when none."""
    try:
        args = run.args
    except TriageError:
        return None, None
    for name in names:
        if args.has(name):
            value = args.get(name)
            if value is not None and not (isinstance(value, str) and value.strip().lower() in ("none", "null")):
                return name, value
    return None, None


def as_int(value: Any) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            f = float(value.strip())
        except ValueError:
            return None
        return int(f) if f.is_integer() else None
    return None


def as_float(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def as_bool(value: Any) -> bool:
    """A flag's value: store_true flags come as True, dumps as 'True' / 'False' strings."""
    if isinstance(value, bool):
        return value
    if value is None:
        return False
    if isinstance(value, (int, float)):
        return value != 0
    return str(value).strip().lower() not in _FALSE_WORDS


def arg_int(run: Run, *names: str) -> int | None:
    return as_int(arg_value(run, *names)[1])


def arg_float(run: Run, *names: str) -> float | None:
    return as_float(arg_value(run, *names)[1])


def arg_flag(run: Run, *names: str) -> bool:
    return any(as_bool(arg_value(run, name)[1]) for name in names)


def arg_str(run: Run, *names: str) -> str | None:
    value = arg_value(run, *names)[1]
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        return " ".join(map(str, value))
    return str(value)


def arg_given(run: Run, *names: str) -> bool:
    return arg_value(run, *names)[0] is not None


# --- the HF checkpoint's JSON files ----------------------------------------------------


def hf_checkpoint_dir(run: Run) -> Path | None:
    """The run's --hf-checkpoint directory, if it can be found from here."""
    value = arg_str(run, "hf_checkpoint")
    if value:
        path = run.resolve_path(value)
        if path is not None and path.is_dir():
            return path
    for path in run.artifacts.hf_checkpoints:
        if Path(path).is_dir():
            return Path(path)
    return None


def read_hf_json(directory: Path, name: str) -> dict[str, Any] | None:
    """`config.json` / `generation_config.json` of an HF checkpoint; None when absent."""
    path = directory / name
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CorruptArtifact(path, f"not valid JSON: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise CorruptArtifact(path, f"expected a JSON object, found {type(data).__name__}")
    return data


def hf_config(run: Run) -> dict[str, Any] | None:
    directory = hf_checkpoint_dir(run)
    return read_hf_json(directory, "config.json") if directory is not None else None


def _experts_from_hf(config: dict[str, Any] | None) -> int | None:
    if not config:
        return None
    for key in ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts"):
        n = as_int(config.get(key))
        if n:
            return n
    text_config = config.get("text_config")
    return _experts_from_hf(text_config) if isinstance(text_config, dict) else None


def moe_experts(run: Run) -> tuple[int | None, str | None]:
    """(number of experts, where it was read) for an MoE model; (None, None) for a dense one."""
    name, value = arg_value(run, "num_experts", "num_moe_experts")
    n = as_int(value)
    if n:
        return n, f"--{name.replace('_', '-')}" if name else None
    try:
        n = _experts_from_hf(hf_config(run))
    except TriageError:
        n = None
    if n:
        return n, "HF config.json"
    return None, None


def _describe_stop(stop: dict[str, Any]) -> str:
    """`<|im_end|> (id 2, --rollout-stop-token-ids)`: a stop as the summary names it."""
    where = stop["source"] if stop["id"] is None else f"id {stop['id']}, {stop['source']}"
    return f"{stop['token'] or '?'} ({where})"


# --- the rules -------------------------------------------------------------------------


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    rule: Rule


class ConfigRule(Probe):
    """One configuration rule from the guides, with the arithmetic behind the answer."""

    name = "config_rule"
    outcomes = ("violated", "satisfied", "not_applicable")
    needs = ("args",)
    cost = Cost.STATIC
    Params = Params

    def examine(self, run: Run) -> Observation:
        rule: str = self.params.rule  # type: ignore[attr-defined]
        return getattr(self, f"_rule_{rule}")(run)

    def _obs(self, outcome: str, summary: str, confidence: float = 0.9, **evidence: Any) -> Observation:
        return self.observe(outcome, summary, confidence, rule=self.params.rule, **evidence)  # type: ignore[attr-defined]

    # gpu_count ------------------------------------------------------------------------

    def _rule_gpu_count(self, run: Run) -> Observation:
        nodes_given = arg_given(run, "actor_num_nodes")
        gpn_given = arg_given(run, "actor_num_gpus_per_node")
        if not (nodes_given or gpn_given):
            return self._obs(
                "not_applicable",
                "The job's arguments do not give its GPU counts (--actor-num-nodes, --actor-num-gpus-per-node).",
                0.5,
            )
        nodes = arg_int(run, "actor_num_nodes") or 1  # slime's defaults
        gpn = arg_int(run, "actor_num_gpus_per_node") or 8
        colocate = arg_flag(run, "colocate")
        rollout = arg_int(run, "rollout_num_gpus")
        train_gpus = nodes * gpn
        if arg_flag(run, "debug_rollout_only"):
            needed, arithmetic = (rollout or 0), f"rollout_num_gpus {rollout} (--debug-rollout-only)"
        elif arg_flag(run, "debug_train_only"):
            needed, arithmetic = train_gpus, f"{nodes}*{gpn} = {train_gpus}"
        elif colocate:
            # slime's placement group for a colocated job: max(actor GPUs, rollout_num_gpus)
            needed = max(train_gpus, rollout or 0)
            arithmetic = f"{nodes}*{gpn} = {train_gpus}" if needed == train_gpus else (
                f"max({nodes}*{gpn}, {rollout}) = {needed}"
            )
        else:
            needed = train_gpus + (rollout or 0)
            arithmetic = f"{nodes}*{gpn} + {rollout or 0} = {needed}"
        evidence: dict[str, Any] = {
            "actor_num_nodes": nodes,
            "actor_num_gpus_per_node": gpn,
            "colocate": colocate,
            "rollout_num_gpus": rollout,
            "gpus_needed": needed,
        }
        if not colocate and rollout is None:
            evidence["note"] = "rollout_num_gpus is not given; counted as 0"

        waits = run.log.placement_group_waits if run.artifacts.logs else []
        cluster = arg_int(run, "cluster_gpus")  # a manifest may give the cluster's size
        if waits:
            last = waits[-1]
            registered = max(w.gpus_registered for w in waits)
            evidence.update(
                placement_group_gpus=last.gpus_needed,
                gpus_registered=registered,
                gpus_available=last.gpus_available,
                waited_s=max(w.elapsed_s for w in waits),
                wait_line={"where": last.line.where(), "text": last.line.text, "source": last.line.source},
            )
            cluster = registered if cluster is None else cluster
        if cluster is None:
            raise Unavailable(
                "log",
                "the cluster's GPU count is unknown: no placement-group wait lines in the log and no cluster_gpus",
                "keep the driver log that shows `Waiting for placement group of N GPUs`, or set args.cluster_gpus in triage.yaml",
            )
        evidence["cluster_gpus"] = cluster
        requested = max([needed] + [w.gpus_needed for w in waits])
        mode = "colocated" if colocate else "disaggregated"
        if requested > cluster:
            evidence["arithmetic"] = f"{arithmetic} > {cluster}" if needed > cluster else (
                f"placement group of {requested} GPUs > {cluster} registered"
            )
            return self._obs(
                "violated",
                f"The {mode} job needs {requested} GPUs ({evidence['arithmetic']}) but the cluster has {cluster}: "
                "the placement group can never be scheduled.",
                0.95 if waits else 0.85,
                **evidence,
            )
        evidence["arithmetic"] = f"{arithmetic} <= {cluster}"
        note = ""
        if waits and waits[-1].gpus_available < requested:
            note = f"; only {waits[-1].gpus_available} were free, so other jobs hold the rest"
        return self._obs(
            "satisfied",
            f"The {mode} job needs {needed} GPUs ({evidence['arithmetic']}), which the cluster has{note}.",
            0.85,
            **evidence,
        )

    # global_batch ---------------------------------------------------------------------

    def _rule_global_batch(self, run: Run) -> Observation:
        rbs = arg_int(run, "rollout_batch_size")
        n = arg_int(run, "n_samples_per_prompt") or 1
        gbs = arg_int(run, "global_batch_size")
        steps = arg_int(run, "num_steps_per_rollout")
        if rbs is None or (gbs is None and steps is None):
            return self._obs(
                "not_applicable",
                "The arguments do not give rollout_batch_size with global_batch_size or num_steps_per_rollout.",
                0.5,
                rollout_batch_size=rbs, global_batch_size=gbs, num_steps_per_rollout=steps,
            )
        samples = rbs * n
        evidence: dict[str, Any] = {
            "rollout_batch_size": rbs, "n_samples_per_prompt": n, "global_batch_size": gbs,
            "num_steps_per_rollout": steps, "samples_per_rollout": samples,
        }
        if steps is not None:
            if steps <= 0:
                evidence["arithmetic"] = f"num_steps_per_rollout = {steps}"
                return self._obs("violated", f"num_steps_per_rollout is {steps}; it must be at least 1.", 0.95, **evidence)
            expected = samples // steps
            evidence["expected_global_batch_size"] = expected
            if gbs is None:
                evidence["arithmetic"] = f"{rbs}*{n} // {steps} = {expected}"
                return self._obs(
                    "satisfied",
                    f"global_batch_size is derived from the rollout settings ({evidence['arithmetic']}).",
                    0.8,
                    **evidence,
                )
            ok = gbs == expected
            evidence["arithmetic"] = f"{rbs}*{n} // {steps} = {expected} {'==' if ok else '!='} {gbs}"
            if not ok:
                return self._obs(
                    "violated",
                    f"global_batch_size {gbs} does not match rollout_batch_size*n_samples_per_prompt//num_steps_per_rollout "
                    f"({evidence['arithmetic']}).",
                    0.95,
                    **evidence,
                )
            return self._obs("satisfied", f"global_batch_size is consistent ({evidence['arithmetic']}).", 0.9, **evidence)
        # No num_steps_per_rollout: each rollout is cut into samples/gbs steps, which must be whole.
        assert gbs is not None
        if gbs <= 0 or samples % gbs:
            evidence["arithmetic"] = f"{rbs}*{n} = {samples}, not a multiple of {gbs}"
            return self._obs(
                "violated",
                f"A rollout's {samples} samples ({rbs}*{n}) do not split into whole steps of global_batch_size {gbs}.",
                0.85,
                **evidence,
            )
        evidence["arithmetic"] = f"{rbs}*{n} = {samples} = {samples // gbs} steps of {gbs}"
        return self._obs("satisfied", f"global_batch_size is consistent ({evidence['arithmetic']}).", 0.85, **evidence)

    # max_tokens_per_gpu ---------------------------------------------------------------

    def _rule_max_tokens_per_gpu(self, run: Run) -> Observation:
        dynamic = arg_flag(run, "use_dynamic_batch_size")
        mtpg = arg_int(run, "max_tokens_per_gpu")
        if not dynamic:
            note = (
                f"--max-tokens-per-gpu {mtpg} has no effect without --use-dynamic-batch-size"
                if mtpg is not None else "dynamic batch size is off, so max_tokens_per_gpu plays no part"
            )
            return self._obs("not_applicable", f"{note[0].upper()}{note[1:]}.", 0.8,
                             use_dynamic_batch_size=False, max_tokens_per_gpu=mtpg)
        rmrl = arg_int(run, "rollout_max_response_len")
        if mtpg is None or rmrl is None:
            missing = [n for n, v in (("max_tokens_per_gpu", mtpg), ("rollout_max_response_len", rmrl)) if v is None]
            raise Unavailable("args", f"dynamic batch size is on but {', '.join(missing)} is not in the run's arguments",
                              "keep the job's command line (cmdline.txt) or the log's arguments block")
        cp = arg_int(run, "context_parallel_size") or 1
        limit = rmrl / cp
        evidence = {
            "use_dynamic_batch_size": True, "max_tokens_per_gpu": mtpg, "rollout_max_response_len": rmrl,
            "context_parallel_size": cp, "safe_max_tokens_per_gpu": limit,
        }
        if mtpg > limit:
            evidence["arithmetic"] = f"{mtpg} > {rmrl}/{cp} = {limit:g}"
            return self._obs(
                "violated",
                f"max_tokens_per_gpu {mtpg} is above the safe start rollout_max_response_len/cp_size ({evidence['arithmetic']}).",
                0.85,
                **evidence,
            )
        evidence["arithmetic"] = f"{mtpg} <= {rmrl}/{cp} = {limit:g}"
        return self._obs("satisfied", f"max_tokens_per_gpu is within the safe start ({evidence['arithmetic']}).", 0.85, **evidence)

    # moe_permute_fusion ---------------------------------------------------------------

    def _rule_moe_permute_fusion(self, run: Run) -> Observation:
        experts, where = moe_experts(run)
        if not experts:
            return self._obs("not_applicable", "Not an MoE model (no --num-experts, no experts in the HF config).", 0.7)
        fused = arg_flag(run, "moe_permute_fusion")
        evidence = {"num_experts": experts, "experts_from": where, "moe_permute_fusion": fused}
        if not fused:
            return self._obs(
                "violated",
                f"MoE model ({experts} experts, from {where}) trained without --moe-permute-fusion, "
                "which the guides name as a cause of KL != 0 and large grad norm at step 1.",
                0.85,
                **evidence,
            )
        return self._obs("satisfied", f"MoE model ({experts} experts) with --moe-permute-fusion on.", 0.9, **evidence)

    # cp_attention_backend -------------------------------------------------------------

    def _rule_cp_attention_backend(self, run: Run) -> Observation:
        cp = arg_int(run, "context_parallel_size") or 1
        if cp <= 1:
            return self._obs("not_applicable", "No context parallelism (context_parallel_size 1).", 0.8, context_parallel_size=cp)
        backend = (arg_str(run, "attention_backend") or "auto").split(".")[-1].lower()
        evidence = {"context_parallel_size": cp, "attention_backend": backend}
        if backend != "flash":
            return self._obs(
                "violated",
                f"Context parallelism (cp={cp}) with attention backend `{backend}`: fused attention under CP is "
                "non-deterministic in some Transformer Engine versions; the guides require --attention-backend flash.",
                0.8,
                **evidence,
            )
        return self._obs("satisfied", f"Context parallelism (cp={cp}) with --attention-backend flash.", 0.9, **evidence)

    # stop_tokens ----------------------------------------------------------------------

    def _rule_stop_tokens(self, run: Run) -> Observation:
        stop = arg_value(run, "rollout_stop")[1]
        stop_ids = arg_value(run, "rollout_stop_token_ids")[1]
        directory = hf_checkpoint_dir(run)
        if directory is None:
            if stop or stop_ids:
                return self._obs(
                    "satisfied",
                    "Stop tokens are set on the command line (--rollout-stop / --rollout-stop-token-ids).",
                    0.9 if stop_ids is None else 0.8,
                    rollout_stop=stop if isinstance(stop, (str, int, float, list)) else str(stop),
                    rollout_stop_token_ids=stop_ids if isinstance(stop_ids, (str, int, list)) else str(stop_ids),
                    note="the HF checkpoint is not reachable, so the chat template's end-of-turn token is not checked",
                )
            raise Unavailable(
                "hf_checkpoint",
                "no --rollout-stop / --rollout-stop-token-ids, and the HF checkpoint is not reachable to read its generation config",
                "keep the --hf-checkpoint directory (config.json, generation_config.json) reachable from the run",
            )
        generation = read_hf_json(directory, "generation_config.json")
        config = read_hf_json(directory, "config.json") or {}
        gen_eos = generation.get("eos_token_id") if generation else None
        cfg_eos = config.get("eos_token_id")
        evidence: dict[str, Any] = {
            "hf_checkpoint": str(directory),
            "generation_config": generation is not None,
            "generation_eos_token_id": gen_eos,
            "config_eos_token_id": cfg_eos,
        }
        turn = self._end_of_turn_check(run, directory, stop, stop_ids, gen_eos, cfg_eos)
        if turn is not None:
            evidence.update(turn)
            eot = turn["end_of_turn"]
            label = f"{eot['token']} (id {eot['id']})" if eot["id"] is not None else eot["token"]
            stops = ", ".join(_describe_stop(s) for s in turn["stops"]) or "none"
            if turn["end_of_turn_stops"]:
                return self._obs(
                    "satisfied",
                    f"The chat template's end-of-turn token {label} is among the stops ({stops}).",
                    0.9,
                    **evidence,
                )
            return self._obs(
                "violated",
                f"The run uses the chat template ({turn['chat_template_used']}), whose turns end on {label}, but the stops "
                f"are {stops}: generation does not stop at the end of the turn and runs to the length limit.",
                0.85 if turn["stops"] else 0.9,
                **evidence,
            )
        if stop or stop_ids:
            return self._obs(
                "satisfied",
                "Stop tokens are set on the command line (--rollout-stop / --rollout-stop-token-ids).",
                0.9,
                rollout_stop=stop if isinstance(stop, (str, int, float, list)) else str(stop),
                rollout_stop_token_ids=stop_ids if isinstance(stop_ids, (str, int, list)) else str(stop_ids),
                **evidence,
            )
        if gen_eos not in (None, [], ""):
            return self._obs(
                "satisfied",
                f"The HF checkpoint's generation_config.json names stop token(s) {gen_eos}.",
                0.85,
                **evidence,
            )
        where = "has no generation_config.json" if generation is None else "has a generation_config.json without eos_token_id"
        if cfg_eos not in (None, [], ""):
            return self._obs(
                "violated",
                f"No --rollout-stop / --rollout-stop-token-ids and the HF checkpoint {where}; only config.json's "
                f"eos_token_id {cfg_eos} stops generation, often just the pretraining end token.",
                0.6,
                **evidence,
            )
        return self._obs(
            "violated",
            f"No --rollout-stop / --rollout-stop-token-ids and the HF checkpoint {where} nor an eos_token_id in config.json: "
            "generation runs to the length limit.",
            0.9,
            **evidence,
        )

    @staticmethod
    def _end_of_turn_check(
        run: Run, directory: Path, stop: Any, stop_ids: Any, gen_eos: Any, cfg_eos: Any
    ) -> dict[str, Any] | None:
        """The stops against the chat template's end-of-turn token; None when the run uses no chat template
        or the token (or, with stop ids only, its id) cannot be found."""
        from probes.prompt_template import chat_template, end_of_turn, template_family, token_ids, uses_chat_template

        found = chat_template(directory)
        if found is None:
            return None
        template, template_source = found
        used, why = uses_chat_template(run, template_family(template), arg_flag(run, "apply_chat_template"))
        if not used:
            return None
        eot, how = end_of_turn(directory, template)
        if eot is None:
            return None
        ids = token_ids(directory)
        by_id = {v: k for k, v in ids.items()}
        eot_id = ids.get(eot)

        def id_list(value: Any) -> list[int]:
            if isinstance(value, str):
                items: list[Any] = value.replace(",", " ").split()
            else:
                items = list(value) if isinstance(value, (list, tuple)) else [value]
            return [n for n in (as_int(v) for v in items) if n is not None]

        stops: list[dict[str, Any]] = []
        for value, source in ((stop_ids, "--rollout-stop-token-ids"), (gen_eos, "generation_config.json eos_token_id"),
                              (cfg_eos, "config.json eos_token_id")):
            if value in (None, [], ""):
                continue
            stops += [{"id": n, "token": by_id.get(n), "source": source} for n in id_list(value)]
        if stop not in (None, [], ""):
            strings = stop if isinstance(stop, (list, tuple)) else [stop]
            stops += [{"id": ids.get(str(s)), "token": str(s), "source": "--rollout-stop"} for s in strings]
        if eot_id is None and not any(s["token"] for s in stops):
            return None  # neither side can be named in the other's terms
        hits = [s for s in stops if (eot_id is not None and s["id"] == eot_id) or s["token"] == eot]
        return {
            "chat_template_used": why,
            "end_of_turn": {"token": eot, "id": eot_id, "found_by": how, "template": template_source},
            "stops": stops,
            "end_of_turn_stops": hits,
        }

    # ref_load_for_kl ------------------------------------------------------------------

    def _rule_ref_load_for_kl(self, run: Run) -> Observation:
        use_kl_loss = arg_flag(run, "use_kl_loss")
        kl_coef = arg_float(run, "kl_coef") or 0.0
        if not use_kl_loss and kl_coef == 0:
            return self._obs("not_applicable", "KL is off (no --use-kl-loss, --kl-coef 0): no reference model is needed.", 0.9,
                             use_kl_loss=False, kl_coef=kl_coef)
        ref_load = arg_str(run, "ref_load")
        evidence: dict[str, Any] = {"use_kl_loss": use_kl_loss, "kl_coef": kl_coef, "ref_load": ref_load}
        kl = "--use-kl-loss" if use_kl_loss else f"--kl-coef {kl_coef:g}"
        if not ref_load:
            return self._obs("violated", f"KL is on ({kl}) but --ref-load is not set.", 0.95, **evidence)
        resolved = run.resolve_path(ref_load)
        evidence["exists_here"] = resolved is not None
        if resolved is None:
            confirmed = self._log_says_ref_load_missing(run)
            evidence["log_confirms"] = confirmed
            return self._obs(
                "violated",
                f"KL is on ({kl}) but --ref-load {ref_load} does not exist"
                + (" (the job's own check says so too)." if confirmed else " here (it may exist only on the cluster)."),
                0.95 if confirmed else 0.55,
                **evidence,
            )
        evidence["resolved"] = str(resolved)
        evidence["tracker_file"] = (resolved / "latest_checkpointed_iteration.txt").is_file() if resolved.is_dir() else False
        return self._obs("satisfied", f"KL is on ({kl}) and --ref-load {ref_load} exists.", 0.85, **evidence)

    @staticmethod
    def _log_says_ref_load_missing(run: Run) -> bool:
        if not run.artifacts.logs:
            return False
        from probes.error_signatures import scan, with_ref_load_paths

        try:
            return bool(with_ref_load_paths(run, scan(run.log)).of_outcome("ref_load_missing"))
        except TriageError:
            return False

    # fp8 ------------------------------------------------------------------------------

    def _rule_fp8(self, run: Run) -> Observation:
        fmt_name, fmt = arg_value(run, "fp8_format", "fp8")
        recipe = arg_str(run, "fp8_recipe")
        fmt_on = fmt is not None and as_bool(fmt)
        recipe_explicit = recipe is not None and self._explicit(run, "fp8_recipe") and recipe.lower() not in _FALSE_WORDS
        evidence = {
            "fp8_format": str(fmt) if fmt_on else None,
            "fp8_recipe": recipe,
            "fp8_param_gather": arg_flag(run, "fp8_param_gather"),
        }
        if fmt_on or recipe_explicit:
            what = f"format {fmt}" if fmt_on and not isinstance(fmt, bool) else "fp8 on"
            return self._obs(
                "violated",
                f"The run trains in FP8 ({what}, recipe {recipe or 'default'}): FP8 collapse (loss explosion, NaN, reward "
                "collapse) is the first suspect.",
                0.8 if fmt_on else 0.6,
                **evidence,
            )
        return self._obs("satisfied", "The run does not train in FP8.", 0.85, **evidence)

    @staticmethod
    def _explicit(run: Run, name: str) -> bool:
        """Whether the user set `name` (command line / manifest), not a default printed in the arguments block."""
        try:
            source = run.args.source_of(name)
        except (TriageError, AttributeError):
            return True
        return source is None or "argument" not in str(source).lower()

    # moe_routing_replay ---------------------------------------------------------------

    def _rule_moe_routing_replay(self, run: Run) -> Observation:
        experts, where = moe_experts(run)
        if not experts:
            return self._obs("not_applicable", "Not an MoE model: expert routing cannot differ.", 0.7)
        r3 = arg_flag(run, "use_r3", "use_rollout_routing_replay")
        evidence: dict[str, Any] = {"num_experts": experts, "experts_from": where, "routing_replay": r3}
        if r3:
            return self._obs("satisfied", f"MoE model ({experts} experts) with rollout routing replay on.", 0.85, **evidence)
        checked, with_experts, unreadable = self._dumps_with_routed_experts(run)
        evidence.update(dumps_checked=checked, dumps_with_routed_experts=with_experts, dumps_unreadable=unreadable)
        if with_experts:
            return self._obs(
                "satisfied",
                f"MoE model without the R3 flag, but {with_experts} of {checked} rollout dumps carry rollout_routed_experts.",
                0.7,
                **evidence,
            )
        basis = f"and none of {checked} rollout dumps carry rollout_routed_experts" if checked else "(no rollout dumps to confirm)"
        return self._obs(
            "violated",
            f"MoE model ({experts} experts) without rollout routing replay (--use-r3 / --use-rollout-routing-replay) {basis}: "
            "inference and training can route tokens to different experts.",
            0.85 if checked else 0.7,
            **evidence,
        )

    @staticmethod
    def _dumps_with_routed_experts(run: Run, limit: int = 4) -> tuple[int, int, int]:
        checked = with_experts = unreadable = 0
        for path in [p for p in run.rollout_dump_paths() if not Path(p).name.startswith("eval_")][:limit]:
            try:
                dump = run.rollout_dump(path)
            except BadInput:
                raise  # a hostile or corrupt dump stops the triage with a one-line error
            except TriageError:
                unreadable += 1
                continue
            checked += 1
            with_experts += int(dump.has_routed_experts())
        return checked, with_experts, unreadable
