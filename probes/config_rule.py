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
- placement_resources (allenai/open-instruct#1431, verl-project/verl#6663): the placement
  group's GPUs fit, but its bundles ask more CPUs, memory or a custom resource than the
  cluster has, so it waits forever. The requests are read in Ray's own wordings: the
  autoscaler's `No available node types can fulfill resource request {...}` and `The
  following resource request cannot be scheduled right now: {...}`
  (ray-project/ray python/ray/autoscaler/_private/autoscaler.py), the raylet's `The actor or
  task with ID … cannot be scheduled right now. It requires {CPU: 32.000000, GPU: 1.000000}
  for placement, however the cluster currently cannot provide …` / `…, but this node only has
  remaining {3.000000/4.000000 CPU, …}` (src/ray/raylet/scheduling/cluster_task_manager.cc),
  `ray status`'s `Demands:` lines, and slime's `Waiting for placement group of N GPUs` (its
  bundles are {"GPU": 1, "CPU": 1}, THUDM/slime slime/ray/placement_group.py). The cluster's
  resources come from `ray status`'s `Usage:` block, `ray start --num-cpus/--num-gpus`
  echoed by the launch script, or the manifest's `cluster_cpus` / `cluster_gpus` /
  `cluster_memory_gb`.
"""

from __future__ import annotations

import json
import re
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict

from triage.errors import BadInput, CorruptArtifact, TriageError, Unavailable
from triage.finding import UNJUDGED_OUTCOMES, Observation
from triage.formats import ray_scheduling
from triage.probe import Cost, Probe
from triage.run.run import NEEDS_HELP

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
    "placement_resources",
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



# the tail of a log read for the last step it names (a progress bar's count, a `step N:` record)
TAIL_BYTES = 1 << 20


def trained_past_start(run: Run) -> str | None:
    """What shows the run trained past its first step: two or more training records, or a step count past 1 in
    the tail of a log; None when nothing does."""
    metrics = getattr(run, "metrics", None) if run.has("metrics") else None
    if metrics is not None:
        for name in ("loss", "grad_norm", "reward", "lr"):
            series = metrics.get(name)
            if series is not None and len(series) >= 2:
                return f"{len(series)} {series.step_word}s of {series.key}"
    from triage import safe_io
    from triage.formats.tracebacks import last_step_in

    for path in run.artifacts.logs[:8]:
        try:
            tail, _ = safe_io.read_tail(path, TAIL_BYTES)
        except OSError:
            continue
        step = last_step_in(tail)
        if step is not None and step[0] >= 2:
            return f"{'a progress bar at' if step[1] else ''} step {step[0]} in {Path(path).name}".strip()
    return None

def _no_stop_in_log(run: Run) -> bool:
    """The run's log names no error the job stopped on (the error-signature scan finds none, not even an unlisted one)."""
    from probes.error_signatures import scan

    result = scan(run.log)
    return result.decisive() is None and not result.fatal_lines


class ConfigRule(Probe):
    """One configuration rule from the guides, with the arithmetic behind the answer."""

    name = "config_rule"
    outcomes = ("violated", "satisfied", "not_applicable")
    needs = ("args",)
    cost = Cost.STATIC
    Params = Params

    @classmethod
    def needs_for(cls, params: BaseModel | None) -> tuple[str, ...]:
        # the placement rule reads what waits in the log and the cluster's resources (`ray status`), not the args
        # (gpu_count reads Ray's own account of a waiting group when the run kept no arguments)
        return () if getattr(params, "rule", None) in ("placement_resources", "gpu_count") else cls.needs

    def examine(self, run: Run) -> Observation:
        rule: str = self.params.rule  # type: ignore[attr-defined]
        return getattr(self, f"_rule_{rule}")(run)

    def _obs(self, outcome: str, summary: str, confidence: float = 0.9, **evidence: Any) -> Observation:
        return self.observe(outcome, summary, confidence, rule=self.params.rule, **evidence)  # type: ignore[attr-defined]

    # gpu_count ------------------------------------------------------------------------

    def _rule_gpu_count(self, run: Run) -> Observation:
        if not run.has("args"):
            return self._gpus_short_in_rays_words(run)
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
            # Ray's own account of the cluster (`ray status`, `ray start --num-gpus`, a scheduling message), as the
            # placement rule reads it (OpenRLHF/OpenRLHF#516: `ray start --head --num-gpus=4`)
            scan = scan_placement(run)
            if "GPU" in scan.capacity:
                cluster = int(scan.capacity["GPU"])
                evidence["cluster_gpus_from"] = scan.capacity_from["GPU"]
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

    def _gpus_short_in_rays_words(self, run: Run) -> Observation:
        """No arguments: a group that waits for more GPUs than `ray status` says the cluster has is the
        same arithmetic, in Ray's words (gpustack/gpustack#5509: vLLM waiting for 2 GPUs where Ray saw 1)."""
        scan = scan_placement(run)
        gpus = scan.capacity.get("GPU")
        short = [d for d in scan.demands if gpus is not None and d.resources.get("GPU", 0.0) > gpus + 1e-9]
        if not short and scan.demands and not any(d.resources.get("GPU") for d in scan.demands):
            # what waits asks no GPUs: the GPU count is not what holds it (ray-project/ray#47792, a {'CPU': 2.0} group)
            d = scan.demands[0]
            return self._obs("not_applicable", f"The job waits on {d.words()} ({d.where}), which asks no GPUs.", 0.6,
                             deciding=d.as_dict())
        if not short:
            raise Unavailable("args", "the run has no args", NEEDS_HELP.get("args"))
        d = short[0]
        arithmetic = f"{d.words()}: {d.resources['GPU']:g} GPU > {gpus:g} GPU ({scan.capacity_from['GPU']})"
        return self._obs(
            "violated",
            f"The job waits for a placement group that asks more GPUs than the cluster has ({arithmetic}): it can "
            "never be scheduled.",
            0.85,
            deciding=d.as_dict(), cluster_gpus=gpus, arithmetic=arithmetic,
        )

    # placement_resources --------------------------------------------------------------

    def _rule_placement_resources(self, run: Run) -> Observation:
        scan = scan_placement(run)
        demands, capacity = scan.demands, scan.capacity
        evidence: dict[str, Any] = {
            "demands": [d.as_dict() for d in demands[:MAX_DEMANDS_SHOWN]],
            "cluster": {k: {"total": v, "from": scan.capacity_from[k]} for k, v in sorted(capacity.items())},
        }
        if not demands:
            return self._obs("not_applicable",
                             "The log shows no placement group or resource request waiting (no Ray scheduling message, "
                             "no placement-group wait).", 0.5, **evidence)
        gpus = capacity.get("GPU")
        decided: list[tuple[Demand, list[tuple[str, float, float]]]] = []
        infeasible: list[Demand] = []
        gpu_short: list[Demand] = []
        for d in demands:
            if "GPU" in d.resources and gpus is not None and d.resources["GPU"] > gpus + 1e-9:
                gpu_short.append(d)  # the GPUs do not fit either: sched.insufficient_gpus' case, not this rule's
                continue
            short = [(res, need, capacity[res]) for res, need in d.resources.items()
                     if res != "GPU" and res in capacity and need > capacity[res] + 1e-9]
            if short:
                decided.append((d, short))
            elif d.kind == "infeasible" and ("GPU" not in d.resources or gpus is not None) and any(
                    res != "GPU" for res in d.resources):
                infeasible.append(d)
        if decided:
            d, short = decided[0]
            what = ", ".join(f"{_amount(res, need)} > {_amount(res, have)} ({scan.capacity_from[res]})" for res, need, have in short)
            gpu_words = (f"; its {d.resources['GPU']:g} GPUs fit the cluster's {gpus:g}" if "GPU" in d.resources and gpus is not None
                         else "; it asks no GPUs" if "GPU" not in d.resources else "; the cluster's GPU count is unknown")
            evidence.update(shortfall=[{"resource": r, "requested": n, "cluster": h} for r, n, h in short],
                            deciding=d.as_dict(), arithmetic=f"{d.words()}: {what}")
            return self._obs(
                "violated",
                f"The job waits on {d.words()} ({d.where}): {what}{gpu_words}. The placement group can never be "
                "scheduled until the bundles ask less or the nodes offer more.",
                0.9 if "GPU" not in d.resources or gpus is not None else 0.75,
                **evidence,
            )
        if infeasible:
            d = infeasible[0]
            gpu_words = (f"its {d.resources['GPU']:g} GPUs fit the cluster's {gpus:g}, so the rest of the request "
                         f"({', '.join(_amount(r, v) for r, v in d.resources.items() if r != 'GPU')}) is what no node has"
                         if "GPU" in d.resources else "it asks no GPUs at all")
            evidence.update(deciding=d.as_dict(), arithmetic=f"{d.words()}: infeasible; {gpu_words}")
            return self._obs(
                "violated",
                f"Ray reports {d.words()} infeasible ({d.where}): {gpu_words}.",
                0.85,
                **evidence,
            )
        if gpu_short and len(gpu_short) == len(demands):
            d = gpu_short[0]
            evidence["arithmetic"] = f"{d.words()}: {d.resources['GPU']:g} GPU > {gpus:g} GPU ({scan.capacity_from['GPU']})"
            return self._obs("satisfied",
                             f"The waiting request asks more GPUs than the cluster has ({evidence['arithmetic']}): the wait "
                             "is on GPUs, not on CPUs, memory or custom resources.", 0.8, **evidence)
        demands = [d for d in demands if d not in gpu_short]
        unknown = sorted({res for d in demands for res in d.resources if res != "GPU" and res not in capacity})
        if unknown:
            raise Unavailable(
                "log",
                f"the job asks {', '.join(unknown)} in its placement group, and the cluster's total of "
                f"{'it' if len(unknown) == 1 else 'them'} is unknown",
                "keep `ray status` output in the job log (its Usage: block), or set args.cluster_cpus / "
                "args.cluster_memory_gb in triage.yaml",
            )
        if all(set(d.resources) <= {"GPU"} for d in demands):
            # only GPUs wait, and the cluster's GPU count is unknown: nothing for this rule to weigh (vLLM's wait for
            # its engine's group names GPU bundles alone: vllm-project/aibrix#927)
            # (a bundle pinned to one node by Ray's `node:<address>` resource asks its GPU of that node: vLLM places its
            # first bundle on the driver's node, vllm-project/vllm#7815, where VLLM_HOST_IP named the node)
            pinned = " (one bundle is pinned to a node by its `node:<address>` resource)" if any(
                "'node:" in d.text or '"node:' in d.text for d in demands) else ""
            return self._obs("not_applicable",
                             f"The waiting request asks only GPUs{pinned}, and the log does not say how many the "
                             "cluster has (no `ray status` Usage: block).", 0.5, **evidence)
        if scan.nodes is not None and scan.nodes > 1:
            # a bundle is placed on one node: a cluster's total says it fits only where it asks at most the total's
            # share of one node (the largest node holds at least that much); beyond it, the split decides
            # (ray-project/ray#47792: a {'CPU': 2.0} bundle pending on two nodes that have 2 CPUs between them)
            split = [(d, res, need) for d in demands for res, need in d.on_one_node().items()
                     if res != "GPU" and res in capacity and not scan.capacity_from[res].startswith("the node's total")
                     and need > capacity[res] / scan.nodes + 1e-9]
            if split:
                d, res, need = split[0]
                raise Unavailable(
                    "log",
                    f"{d.words()} must fit on one node ({_amount(res, need)} a node), and the cluster's "
                    f"{scan.nodes} nodes ({scan.nodes_from}) have {_amount(res, capacity[res])} between them; the log "
                    "does not say how they are split",
                    "keep `ray status -v` or `ray list nodes --detail` output (each node's resources) in the job log",
                )
        evidence["arithmetic"] = "; ".join(f"{d.words()} within the cluster's resources" for d in demands[:3])
        return self._obs("satisfied",
                         "Every waiting request fits the cluster's CPUs, memory and custom resources "
                         f"({', '.join(_amount(k, v) for k, v in sorted(capacity.items()))}).", 0.8, **evidence)

    # global_batch ---------------------------------------------------------------------

    def _rule_global_batch(self, run: Run) -> Observation:
        """The batch arithmetic the frameworks assert at start-up. A run that trained past its first step got past
        that assertion: arguments read as breaking it are not what that run's version checked (another version's
        rule, or a config that is not the run's), so they are no finding (LeiLiLab/WALAR's grpo.log: verl's printed
        config with data.train_batch_size 64 under ppo_mini_batch_size 256, and 33 steps of its Training Progress)."""
        found = self._global_batch(run)
        if found.outcome != "violated":
            return found
        past = trained_past_start(run)
        if past is None and "actor.ppo_mini_batch_size" in found.evidence and run.artifacts.logs \
                and not run.log.tracebacks and _no_stop_in_log(run):
            # verl's mini-batch check came with its `_validate_config` (2025): the many copies older than it (TinyZero,
            # PRIME, code-r1) train with such arguments. A job log that holds no refusal and no error at all shows a
            # copy that did not make it or a start the log does not reach - no finding of the run
            # (PRIME-RL/PRIME#16's `+ python3 -m verl.trainer.main_ppo … data.train_batch_size=32 …
            # ppo_mini_batch_size=64`); slime's own assertion is in every slime, and stands
            return self._obs(
                "not_applicable",
                f"The arguments as read break verl's start-up check ({found.summary.rstrip('.')}), but the log holds "
                "no refusal of them, nor any error: verl stops on this check at start in the releases that make it, "
                "and copies older than it train with them.",
                0.5, **{k: v for k, v in found.evidence.items() if k != "rule"}, log_shows_no_refusal=True,
                **{UNJUDGED_OUTCOMES: ["violated"]},
                suggests=[{"verdict": "config.batch_size_mismatch",
                           "because": f"{found.summary.rstrip('.')}, which a verl that makes the check refuses at "
                                      "start (the log holds no refusal)"}])
        if past is None:
            return found
        return self._obs(
            "not_applicable",
            f"The arguments as read break the start-up check ({found.summary.rstrip('.')}), yet the run trained past "
            f"start-up ({past}): its framework did not refuse them, so the check read is not the one it made.",
            0.5, **{k: v for k, v in found.evidence.items() if k != "rule"}, trained_past_start=past)

    def _global_batch(self, run: Run) -> Observation:
        rbs = arg_int(run, "rollout_batch_size")
        n = arg_int(run, "n_samples_per_prompt") or 1
        gbs = arg_int(run, "global_batch_size")
        steps = arg_int(run, "num_steps_per_rollout")
        if rbs is None or (gbs is None and steps is None):
            mini = self._mini_batch(run)
            if mini is not None and mini.outcome == "violated":
                return mini
            split = self._data_parallel_split(run)
            if split is not None:
                return split
            if mini is not None:
                return mini
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

    def _mini_batch(self, run: Run) -> Observation | None:
        """verl's check that a step's prompts fill at least one mini-batch: `assert
        data.train_batch_size >= actor.ppo_mini_batch_size`, both prompt counts, unless the batch is
        dynamic (verl/trainer/ppo/ray_trainer.py `_validate_config`; verl-project/verl#538 ran 176
        prompts a step against a mini-batch of 440). None when the run does not give both."""
        train = arg_int(run, "data.train_batch_size")
        mini = arg_int(run, "actor_rollout_ref.actor.ppo_mini_batch_size")
        if train is None or mini is None or as_bool(arg_value(run, "actor_rollout_ref.actor.use_dynamic_bsz")[1]):
            return None
        ok = train >= mini
        arithmetic = f"data.train_batch_size {train} {'>=' if ok else '<'} actor_rollout_ref.actor.ppo_mini_batch_size {mini}"
        return self._judged(
            ok, f"A step's prompts do not fill one mini-batch ({arithmetic}); verl asserts data.train_batch_size >= "
                "ppo_mini_batch_size at start (both count prompts).",
            f"A step's prompts fill the mini-batch ({arithmetic}).", 0.9,
            {"data.train_batch_size": train, "actor.ppo_mini_batch_size": mini, "arithmetic": arithmetic})

    def _judged(self, ok: bool, violated: str, satisfied: str, confidence: float, evidence: dict[str, Any]) -> Observation:
        """`satisfied` or `violated` with its sentence; a satisfied rule is a little less sure (the rule
        read may not be the only one the framework checks)."""
        if ok:
            return self._obs("satisfied", satisfied, round(confidence - 0.05, 2), **evidence)
        return self._obs("violated", violated, confidence, **evidence)

    def _data_parallel_split(self, run: Run) -> Observation | None:
        """verl's batch over its data-parallel workers, when the batch is a prompt count.

        verl hands each step's batch to its workers with `DataProto.chunk(world_size)`,
        which asserts `len % chunks == 0` ("only support equal chunk", verl/protocol.py),
        and its trainer checks the same at start: `real_train_batch_size =
        data.train_batch_size * rollout.n` must be divisible by `minimal_bsz`, the GPU count
        over the actor's model-parallel sizes (verl/trainer/ppo/ray_trainer.py
        `_validate_config`). `verl.trainer.main_generation` chunks `data.batch_size` prompts
        the same way (the answer in volcengine/verl#473: a multiple of nnodes *
        n_gpus_per_node). None when the run gives no verl batch and GPU count.
        """
        train_name, train = arg_value(run, "data.train_batch_size")
        gen_name, gen = arg_value(run, "data.batch_size")
        nodes = arg_int(run, "trainer.nnodes")
        per_node = arg_int(run, "trainer.n_gpus_per_node")
        batch = as_int(train) if train_name else as_int(gen)
        if batch is None or nodes is None or per_node is None:
            return None
        if train_name:
            n = arg_int(run, "actor_rollout_ref.rollout.n") or 1
            model_parallel = 1
            for name in ("tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size"):
                model_parallel *= arg_int(run, f"actor_rollout_ref.actor.megatron.{name}") or 1
            what, samples = f"data.train_batch_size*rollout.n = {batch}*{n} = {batch * n}", batch * n
        else:
            model_parallel = 1
            what, samples = f"data.batch_size = {batch}", batch
        gpus = nodes * per_node
        workers = max(gpus // model_parallel, 1)
        evidence: dict[str, Any] = {
            "batch_name": train_name or gen_name, "batch": batch, "samples": samples,
            "nnodes": nodes, "n_gpus_per_node": per_node, "data_parallel_workers": workers,
        }
        ok = samples % workers == 0
        evidence["arithmetic"] = (f"{what}, {samples // workers} per worker over {workers}" if ok else
                                  f"{what} is not a multiple of {workers} data-parallel workers ({nodes}*{per_node} GPUs)")
        return self._judged(
            ok, f"The batch does not split evenly over verl's data-parallel workers: {evidence['arithmetic']}; "
                "verl chunks each batch by worker (`only support equal chunk`).",
            f"The batch splits evenly over verl's workers ({evidence['arithmetic']}).", 0.85, evidence)

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
        """Whether the user set `name` (command line / manifest), not a default printed in the arguments block or
        the resolved config the log printed."""
        from triage.formats.run_args import PRINTED_CONFIG

        try:
            source = run.args.source_of(name)
        except (TriageError, AttributeError):
            return True
        return source is None or ("argument" not in str(source).lower() and source != PRINTED_CONFIG)

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


# --- placement groups: what waits, and what the cluster has ---------------------------------

MAX_DEMANDS_SHOWN = 10
PLACEMENT_HEAD_BYTES = 32 << 20  # a job stuck at submission has written little; its scheduling lines come first
_PG_INFEASIBLE, _PG_PENDING, _RAYLET = ray_scheduling.INFEASIBLE, ray_scheduling.PENDING, ray_scheduling.RAYLET
_STATUS_DEMAND, _VLLM_WAIT = ray_scheduling.STATUS_DEMAND, ray_scheduling.VLLM_WAIT
# a node row of `ray status`'s Active: block: ` 1 ray.head.default`, ` 1 node_4f0c…` (python/ray/autoscaler/_private/util.py)
_STATUS_NODE = re.compile(r"^\s+(?P<n>\d+)\s+\S+\s*$")
_STATUS_USAGE_HEAD = re.compile(r"^\s*(?:Total )?Usage:\s*$")
_STATUS_USAGE = re.compile(
    r"^\s*(?P<used>[\d.]+)(?P<uu>[KMGTP]?i?B)?/(?P<total>[\d.]+)(?P<tu>[KMGTP]?i?B)?\s+(?P<res>[A-Za-z_][\w:.-]*)")
_RAY_START = re.compile(r"\bray start\b(?P<rest>.*)$")
# Ray Tune's status block: what its trials hold of the cluster's totals (python/ray/tune/progress_reporter.py, Ray 1.x
# `Resources requested: 0/36 CPUs, 0/0 GPUs, …`; Ray 2.x `Logical resource usage: 1.0/8 CPUs, 0/0 GPUs`):
# Replicable-MARL/MARLlib#141, a trial asking one GPU of a cluster whose Ray saw none
_TUNE_USAGE = re.compile(r"(?:Resources requested|Logical resource usage): [\d.]+/(?P<cpu>[\d.]+) CPUs, "
                         r"[\d.]+/(?P<gpu>[\d.]+) GPUs")
# Ray Train's and Tune's warning that training has not started (python/ray/tune/execution/insufficient_resources_manager.py:
# `… You asked for 113.0 CPUs and 16.0 GPUs, but the cluster only has 4.0 CPUs and 0 GPUs available. …`, the cluster's
# ray.cluster_resources()): awslabs/awsome-distributed-ai#386, a Ray cluster whose nodes registered no GPU
_TRAIN_SHORT = re.compile(r"You asked for (?P<cpu>[\d.]+) CPUs and (?P<gpu>[\d.]+) GPUs(?: per trial)?, but the cluster "
                          r"only has (?P<have_cpu>[\d.]+) CPUs and (?P<have_gpu>[\d.]+) GPUs available")
_NUM_FLAG = re.compile(r"--num-(?P<what>cpus|gpus)[= ](?P<n>\d+)")
_PAIR = re.compile(r"['\"]?(?P<key>[A-Za-z_][\w:.-]*)['\"]?\s*:\s*(?P<val>[\d.]+)")
_NODE_PAIR = re.compile(r"(?P<avail>[\d.]+)\s*(?P<au>[KMGTP]?i?B)?/(?P<total>[\d.]+)\s*(?P<tu>[KMGTP]?i?B)?\s+(?P<res>[A-Za-z_][\w:.-]*)")
_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40, "KB": 10**3, "MB": 10**6, "GB": 10**9,
          "TB": 10**12}
_IGNORED = re.compile(r"^(?:node:|bundle|object_store_memory|accelerator_type:)|_group_")


@dataclass(frozen=True)
class Demand:
    """One resource request that waits: a bundle (or a whole group) and where it was read."""

    resources: dict[str, float]
    kind: str  # "infeasible" (Ray: no node type can fulfil it) | "pending"
    where: str
    text: str
    how: str  # in words: "the resource request", "slime's placement group of 8 bundles {GPU: 1, CPU: 1}", ...
    bundle: dict[str, float] | None = None  # one bundle of a group, where the log gives it
    strategy: str | None = None  # the group's placement strategy (PACK, SPREAD, STRICT_PACK, STRICT_SPREAD)

    def on_one_node(self) -> dict[str, float]:
        """What must fit on a single node: one bundle, or the whole group under STRICT_PACK (Ray places a bundle on
        one node; STRICT_PACK places the group on one)."""
        return self.resources if self.bundle is None or self.strategy == "STRICT_PACK" else self.bundle

    def words(self) -> str:
        return f"{self.how} ({', '.join(_amount(k, v) for k, v in self.resources.items())} in all)"

    def as_dict(self) -> dict[str, Any]:
        return {"resources": self.resources, "kind": self.kind, "how": self.how, "where": self.where, "text": self.text[:300]}


@dataclass
class PlacementScan:
    """The requests that wait, and the cluster's resources with where each total was read."""

    demands: list[Demand] = field(default_factory=list)
    capacity: dict[str, float] = field(default_factory=dict)
    capacity_from: dict[str, str] = field(default_factory=dict)
    nodes: int | None = None  # the alive nodes `ray status` lists under Active:
    nodes_from: str | None = None

    def have(self, res: str, total: float, where: str, *, override: bool = False) -> None:
        if override or res not in self.capacity:
            self.capacity[res] = total
            self.capacity_from[res] = where

    def have_cluster(self, cpus: str, gpus: str, where: str) -> None:
        """The cluster's CPU and GPU totals as one line of Ray's own gives them (they replace earlier ones)."""
        self.have("CPU", float(cpus), where, override=True)
        self.have("GPU", float(gpus), where, override=True)


def _amount(res: str, value: float) -> str:
    if res == "memory":
        return f"{value / (1 << 30):.1f} GiB memory"
    return f"{value:g} {res}"


def _resources(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for m in _PAIR.finditer(text):
        if not _IGNORED.search(m["key"]):
            out[m["key"]] = out.get(m["key"], 0.0) + float(m["val"])
    return out


def _bytes(value: str, unit: str | None) -> float:
    return float(value) * _UNITS.get(unit or "B", 1)


def _usage_totals(scan: PlacementScan, usage: dict[str, tuple[float, str]]) -> None:
    """The totals of one `ray status` Usage: block. The block lists the resources the cluster has (Ray's
    get_usage_report, python/ray/autoscaler/_private/util.py, prints the cluster's resource totals, and a
    resource no node has is no key of them): a block with a CPU row and no GPU row is a cluster without
    GPUs (real-stanford/scalingup#6: `0.0/20.0 CPU` and memory only, a GPU actor pending)."""
    for res, (total, w) in usage.items():
        if not _IGNORED.search(res):
            scan.have(res, total, f"ray status, {w}", override=True)
    if "CPU" in usage and "GPU" not in usage:
        scan.have("GPU", 0.0, f"ray status, {usage['CPU'][1]} (its Usage: block has no GPU row)", override=True)


# one scan a run: the symptom's question and three of the config rules ask it, each reading the logs' heads
_PLACEMENT_SCANS: weakref.WeakKeyDictionary[Run, PlacementScan] = weakref.WeakKeyDictionary()


def scan_placement(run: Run) -> PlacementScan:
    """Waiting resource requests and the cluster's resources, from the logs' heads, the manifest and slime's waits
    (read once a run; the callers only read it)."""
    scan = _PLACEMENT_SCANS.get(run)
    if scan is None:
        scan = _PLACEMENT_SCANS[run] = _scan_placement(run)
    return scan


def _scan_placement(run: Run) -> PlacementScan:
    from triage.versions import head_lines

    scan = PlacementScan()
    starts: list[tuple[str, dict[str, float]]] = []
    for path in run.artifacts.logs if run.artifacts.logs else []:
        usage: dict[str, tuple[float, str]] | None = None
        active: tuple[int, str] | None = None  # inside `ray status`'s Active: block: (nodes so far, where it began)
        for n, line in head_lines(Path(path), PLACEMENT_HEAD_BYTES):
            where = f"{path}:{n}"
            if active is not None:
                m = _STATUS_NODE.match(line)
                if m:
                    active = (active[0] + int(m["n"]), active[1])
                    continue
                scan.nodes, scan.nodes_from = active[0], f"ray status, {active[1]}"  # the latest `ray status` wins
                active = None
            if line.strip() == "Active:":
                active = (0, where)
                continue
            if usage is not None:
                m = _STATUS_USAGE.match(line)
                if m:
                    total = _bytes(m["total"], m["tu"]) if m["tu"] else float(m["total"])
                    usage[m["res"]] = (total, where)
                    continue
                _usage_totals(scan, usage)  # the latest `ray status` wins
                usage = None
            if "Usage:" in line and _STATUS_USAGE_HEAD.match(line):
                usage = {}
                continue
            if "resource request" in line:
                m = _PG_INFEASIBLE.search(line)
                if m:
                    scan.demands.append(Demand(_resources(m["req"]), "infeasible", where, line.strip(), "the resource request"))
                    continue
                m = _PG_PENDING.search(line)
                if m:
                    scan.demands.append(Demand(_resources(m["req"]), "pending", where, line.strip(), "the resource request"))
                    continue
            if "cannot be scheduled right now" in line:
                m = _RAYLET.search(line)
                if m:
                    kind = "pending" if m["node"] else "infeasible"
                    scan.demands.append(Demand(_resources(m["req"]), kind, where, line.strip(), "the actor or task's request"))
                    for q in _NODE_PAIR.finditer(m["node"] or ""):
                        res = q["res"]
                        if not _IGNORED.search(res):
                            total = _bytes(q["total"], q["tu"]) if q["tu"] else float(q["total"])
                            scan.have(res, total, f"the node's total, {where}")
                    continue
            if "pending placement groups" in line:
                m = _STATUS_DEMAND.match(line)
                if m:
                    bundle = _resources(m["req"])
                    count = int(m["n"])
                    group = {k: v * count for k, v in bundle.items()}
                    scan.demands.append(Demand(group, "pending", where, line.strip(),
                                               f"a placement group of {count} x {m['req']} ({m['strategy']})",
                                               bundle=bundle, strategy=m["strategy"]))
                    continue
            if "Waiting for creating a placement group" in line:
                m = _VLLM_WAIT.search(line)
                if m:
                    bundles = [_resources(b) for b in re.findall(r"\{[^}]*\}", m["specs"])]
                    group: dict[str, float] = {}
                    for b in bundles:
                        for k, v in b.items():
                            group[k] = group.get(k, 0.0) + v
                    scan.demands.append(Demand(group, "pending", where, line.strip(),
                                               f"vLLM's placement group of {len(bundles)} bundles"))
                    continue
            if "You asked for " in line:
                m = _TRAIN_SHORT.search(line)
                if m:
                    scan.demands.append(Demand({"CPU": float(m["cpu"]), "GPU": float(m["gpu"])}, "pending", where,
                                               line.strip(), "Ray Train's request"))
                    scan.have_cluster(m["have_cpu"], m["have_gpu"], f"Ray Train's account of the cluster, {where}")
                    continue
            if " CPUs, " in line:
                m = _TUNE_USAGE.search(line)
                if m:
                    scan.have_cluster(m["cpu"], m["gpu"], f"Ray Tune's status, {where}")
                    continue
            if "ray start" in line:
                m = _RAY_START.search(line)
                if m:
                    starts.append((where, {f["what"]: float(f["n"]) for f in _NUM_FLAG.finditer(m["rest"])}))
        if usage:
            _usage_totals(scan, usage)
    if starts:
        for what, res in (("cpus", "CPU"), ("gpus", "GPU")):
            if all(what in flags for _, flags in starts):
                total = sum(flags[what] for _, flags in starts)
                nodes = len(starts)
                scan.have(res, total, f"ray start --num-{what} on {nodes} node{'s' if nodes > 1 else ''}, {starts[0][0]}")
    for arg, res, scale in (("cluster_cpus", "CPU", 1.0), ("cluster_gpus", "GPU", 1.0),
                            ("cluster_memory_gb", "memory", float(1 << 30))):
        value = arg_float(run, arg)
        if value is not None:
            scan.have(res, value * scale, f"args.{arg}", override=True)
    waits = run.log.placement_group_waits if run.artifacts.logs else []
    if waits:
        last = waits[-1]
        need = max(w.gpus_needed for w in waits)
        scan.have("GPU", float(max(w.gpus_registered for w in waits)), f"GPUs registered with Ray, {last.line.where()}")
        # slime asks one CPU with every GPU: bundles = [{"GPU": 1, "CPU": 1}] * N (slime/ray/placement_group.py)
        scan.demands.append(Demand({"GPU": float(need), "CPU": float(need)}, "pending", last.line.where(), last.line.text,
                                   f"slime's placement group of {need} bundles {{GPU: 1, CPU: 1}}"))
    return scan
