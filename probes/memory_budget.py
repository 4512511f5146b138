"""The memory arithmetic of the guides, applied to the run's configuration.

In the order the slime Q&A and the axolotl guide give it:
1. `max_tokens_too_high`: with `--use-dynamic-batch-size`, `max_tokens_per_gpu` above
   `rollout_max_response_len / cp_size` (the Q&A's safe starting value).
2. `sequence_too_long`: the budget is already at or below that, yet a single sample does
   not fit: slime packs micro-batches of at most `max_tokens_per_gpu * cp_size` tokens
   and a longer sample lands alone in its own, over the budget. Also when observed
   (multi-turn) totals run far past prompt + response limits. The remedy is context
   parallelism.
3. `logits_too_large`: the log-prob pass materialises logits of
   batch x generations x seq_len x vocab (bf16: 2 bytes); the axolotl guide's example
   8 * 16 * 2048 * 151936 * 2 bytes is about 75 GB, more than the GPU holds.
   Without the arguments, the OOM message itself can show it: torch names the one
   allocation that failed and the GPU's capacity, and a request of a large share of the
   device in the log-prob pass can only be the logits (`memory.logits_single_alloc_share`).
4. `within_budget`: none of the above.

Sample lengths come from the best witness available: rollout dumps (exact token
counts), then the logged rollout metrics (`rollout/total_lengths`,
`rollout/response_len/max`), then the configured limits
(`seq_length`, or `rollout_max_prompt_len + rollout_max_response_len`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from probes.config_rule import arg_flag, arg_float, arg_int, arg_value, as_int, hf_config
from triage.errors import TriageError, Unavailable
from triage.finding import Observation
from triage.probe import Cost, Probe
from triage.thresholds import threshold

if TYPE_CHECKING:
    from triage.run.run import Run

# "GB" as the guide counts it: its 8*16*2048*151936*2 bytes "~75 GB" is 74.2 * 2**30 bytes.
GB = 2**30
DEFAULT_GPU_GB = 80.0  # an A100 / H100 80 GB, assumed only when neither the params nor the log say
# The device's size as the log prints it: torch's OOM message ("GPU 0 has a total capacity of 79.15 GiB"),
# slime's print_memory (`'total_GB': 139.8`, slime/utils/memory_utils.py) and verl's
# log_gpu_memory_usage (`device memory used/total (GB): 21.4/79.1`, verl/utils/debug/performance.py).
_DEVICE_TOTAL = re.compile(
    r"total capacity of (?P<torch>[\d.]+) GiB|'total_GB': (?P<slime>[\d.]+)|device memory used/total \(GB\): [\d.]+/(?P<verl>[\d.]+)"
)
# Observed totals this many times the configured prompt + response limits are "much
# longer than expected" (the Q&A's multi-turn warning).
MULTI_TURN_FACTOR = 1.5


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    gpu_memory_gb: float | None = Field(default=None, gt=0)  # default: args gpu_memory_gb, else 80
    logits_fraction: float = Field(default=0.5, gt=0, le=1.0)  # share of the GPU the logits may take
    bytes_per_logit: int = Field(default=2, ge=1, le=8)  # bf16
    max_dumps: int = Field(default=4, ge=0)


def _dump_max_length(run: Run, limit: int) -> tuple[int | None, int]:
    """Longest sample (prompt + response tokens) in up to `limit` rollout dumps; (None, 0) without dumps."""
    if limit == 0:
        return None, 0
    longest: int | None = None
    read = 0
    for _, dump in run.rollout_dumps([], limit=limit):
        read += 1
        for sample in dump.samples:
            tokens = sample.get("tokens")
            n = len(tokens) if tokens is not None and hasattr(tokens, "__len__") else None
            if n is None:
                continue
            longest = n if longest is None else max(longest, n)
    return longest, read


def _metric_max(run: Run, kind: str, key: str) -> float | None:
    try:
        series = run.metrics.raw(kind, key)
    except TriageError:
        return None
    if series is None:
        return None
    finite = series.finite()
    return float(finite.values.max()) if len(finite) else None


def _longest_sample(run: Run, max_dumps: int) -> tuple[int | None, str | None]:
    """(tokens, where it was read) of the longest single sample the run holds or allows."""
    longest, read = _dump_max_length(run, max_dumps)
    if longest is not None:
        return longest, f"rollout dumps ({read} read)"
    candidates: list[tuple[float, str]] = []
    if (v := _metric_max(run, "rollout", "rollout/total_lengths")) is not None:
        candidates.append((v, "rollout/total_lengths (logged mean, a lower bound of the longest)"))
    if (v := _metric_max(run, "perf", "rollout/response_len/max")) is not None:
        prompt = arg_int(run, "rollout_max_prompt_len")
        total = v + (prompt or 0)
        what = "rollout/response_len/max" + (" + rollout_max_prompt_len" if prompt else " (responses only)")
        candidates.append((total, what))
    if candidates:
        value, where = max(candidates)
        return int(value), where
    seq = arg_int(run, "seq_length")
    prompt = arg_int(run, "rollout_max_prompt_len")
    response = arg_int(run, "rollout_max_response_len")
    if prompt is not None and response is not None:
        return prompt + response, "rollout_max_prompt_len + rollout_max_response_len (configured limit)"
    if seq is not None:
        return seq, "seq_length (configured limit)"
    return None, None


def _vocab(run: Run) -> tuple[int | None, str | None]:
    name, value = arg_value(run, "padded_vocab_size", "vocab_size")
    if as_int(value):
        return as_int(value), name
    try:
        config = hf_config(run)
    except TriageError:
        config = None
    if config and as_int(config.get("vocab_size")):
        return as_int(config["vocab_size"]), "HF config.json"
    return None, None


class MemoryBudget(Probe):
    """Whether the configuration's memory arithmetic explains an OOM (token budget, sample length, logits)."""

    name = "memory_budget"
    outcomes = ("max_tokens_too_high", "sequence_too_long", "logits_too_large", "within_budget")
    needs = ()
    cost = Cost.STATIC
    Params = Params

    def examine(self, run: Run) -> Observation:
        p: Params = self.params  # type: ignore[assignment]
        try:
            has_args = bool(run.args)
        except TriageError:
            has_args = False
        if not has_args:
            return self._from_oom_message(run)
        dynamic = arg_flag(run, "use_dynamic_batch_size")
        mtpg = arg_int(run, "max_tokens_per_gpu")
        rmrl = arg_int(run, "rollout_max_response_len", "max_completion_length")
        cp = arg_int(run, "context_parallel_size") or 1
        evidence: dict[str, Any] = {
            "use_dynamic_batch_size": dynamic,
            "max_tokens_per_gpu": mtpg,
            "rollout_max_response_len": rmrl,
            "context_parallel_size": cp,
        }
        checked: list[str] = []

        if dynamic and mtpg is not None and rmrl is not None:
            checked.append("max_tokens_per_gpu")
            limit = rmrl / cp
            evidence["safe_max_tokens_per_gpu"] = limit
            if mtpg > limit:
                evidence["arithmetic"] = f"{mtpg} > {rmrl}/{cp} = {limit:g}"
                return self.observe(
                    "max_tokens_too_high",
                    f"max_tokens_per_gpu {mtpg} is above rollout_max_response_len/cp_size ({evidence['arithmetic']}); "
                    f"start at {limit:g} and raise it carefully.",
                    0.85,
                    **evidence,
                )

        longest, longest_from = _longest_sample(run, p.max_dumps)
        if longest is not None:
            checked.append("sample_length")
            evidence.update(longest_sample_tokens=longest, longest_sample_from=longest_from)
            prompt = arg_int(run, "rollout_max_prompt_len")
            observed = "configured limit" not in (longest_from or "")
            if observed and prompt is not None and rmrl is not None and longest > MULTI_TURN_FACTOR * (prompt + rmrl):
                evidence["arithmetic"] = f"{longest} > {MULTI_TURN_FACTOR:g} * ({prompt} + {rmrl})"
                return self.observe(
                    "sequence_too_long",
                    f"Samples reach {longest} tokens, far past rollout_max_prompt_len + rollout_max_response_len "
                    f"({evidence['arithmetic']}): multi-turn generation makes totals much longer than expected.",
                    0.75,
                    **evidence,
                )
            if dynamic and mtpg is not None:
                cap = mtpg * cp
                evidence["micro_batch_token_cap"] = cap
                if longest > cap:
                    evidence["arithmetic"] = f"{longest} > {mtpg}*{cp} = {cap}"
                    return self.observe(
                        "sequence_too_long",
                        f"A single sample of {longest} tokens ({longest_from}) exceeds the micro-batch budget "
                        f"max_tokens_per_gpu*cp_size ({evidence['arithmetic']}), so it lands alone over budget; "
                        "more context parallelism (--context-parallel-size) splits it.",
                        0.8 if observed else 0.6,
                        **evidence,
                    )

        logits = self._logits_estimate(run, dynamic, mtpg, cp, longest)
        if logits is not None:
            checked.append("logits")
            evidence.update(logits)
            gpu_gb, gpu_from = _gpu_memory_gb(run, p.gpu_memory_gb)
            evidence["gpu_memory_gb"] = gpu_gb
            evidence["gpu_memory_from"] = gpu_from
            evidence["logits_fraction"] = p.logits_fraction
            if logits["logits_gb"] > p.logits_fraction * gpu_gb:
                assumed = gpu_from == "assumed"
                return self.observe(
                    "logits_too_large",
                    f"The log-prob pass materialises a logits tensor of about {logits['logits_gb']:.1f} GB "
                    f"({logits['arithmetic']}) on a {gpu_gb:g} GB GPU"
                    + (" (its size assumed: nothing in the run names it)" if assumed else f" ({gpu_from})")
                    + "; reduce the micro batch (2-4 for GRPO).",
                    0.65 if assumed else 0.8,
                    **evidence,
                )
        if not checked:
            try:
                return self._from_oom_message(run)
            except Unavailable:
                raise Unavailable(
                    "args",
                    "the arguments give neither the token budget (max_tokens_per_gpu, rollout_max_response_len) "
                    "nor the batch, sequence and vocab sizes for a logits estimate",
                    "keep the job's command line (cmdline.txt) or the log's arguments block",
                ) from None
        evidence["checked"] = checked
        return self.observe(
            "within_budget",
            f"The configuration's memory arithmetic ({', '.join(checked)}) stays within budget.",
            0.6,
            **evidence,
        )

    def _from_oom_message(self, run: Run) -> Observation:
        """The logits question answered by the failed allocation, when no arguments were kept."""
        from probes.oom_context import failed_allocation  # the OOM's place is oom_context's question

        alloc = failed_allocation(run)
        if alloc is None or alloc["phase"] != "logprob_pass":
            raise Unavailable(
                "args",
                "the run has no args, and no OOM in the log-prob pass names the allocation that failed",
                "keep the job's command line (cmdline.txt) or the log's arguments block",
            )
        share = threshold("memory.logits_single_alloc_share")
        ratio = alloc["requested_gb"] / alloc["capacity_gb"]
        evidence = {**alloc, "share_of_gpu": round(ratio, 3), "min_share": share}
        if ratio < share:
            raise Unavailable(
                "args",
                f"the run has no args; the failed allocation ({alloc['requested_gb']:g} of {alloc['capacity_gb']:g} GiB) "
                "is too small to be the logits alone",
                "keep the job's command line (cmdline.txt) or the log's arguments block",
            )
        return self.observe(
            "logits_too_large",
            f"In the log-prob pass one allocation of {alloc['requested_gb']:g} GiB failed on a GPU of "
            f"{alloc['capacity_gb']:g} GiB ({ratio:.0%} of it, at least {share:.0%}): only the logits tensor of the "
            f"micro-batch is that large ({alloc['where']}). Reduce the micro batch or the tokens per GPU.",
            0.7,
            **evidence,
        )

    def _logits_estimate(
        self, run: Run, dynamic: bool, mtpg: int | None, cp: int, longest: int | None
    ) -> dict[str, Any] | None:
        p: Params = self.params  # type: ignore[assignment]
        vocab, vocab_from = _vocab(run)
        if vocab is None:
            return None
        tp = arg_int(run, "tensor_model_parallel_size") or 1
        generations = arg_int(run, "num_generations")
        mbs = arg_int(run, "micro_batch_size", "per_device_train_batch_size")
        seq = arg_int(run, "seq_length", "sequence_len", "max_length")
        if seq is None:
            prompt = arg_int(run, "rollout_max_prompt_len", "max_prompt_length")
            response = arg_int(run, "rollout_max_response_len", "max_completion_length")
            seq = prompt + response if prompt is not None and response is not None else longest
        base: dict[str, Any] = {"vocab_size": vocab, "vocab_from": vocab_from, "bytes_per_logit": p.bytes_per_logit}
        if dynamic and mtpg is not None:
            # slime packs up to log_probs_max_tokens_per_gpu tokens per GPU for the log-prob pass;
            # Megatron's output layer splits the vocabulary over tensor parallel ranks.
            tokens = arg_int(run, "log_probs_max_tokens_per_gpu") or mtpg
            n_bytes = tokens * (vocab / tp) * p.bytes_per_logit
            arithmetic = f"{tokens} tokens * {vocab}" + (f"/{tp}" if tp > 1 else "") + f" * {p.bytes_per_logit} bytes"
            base.update(tokens_per_gpu=tokens, tensor_model_parallel_size=tp)
        elif mbs is not None and seq is not None:
            # The axolotl guide's formula: batch x generations x seq_len x vocab. In the slime
            # family micro_batch_size already counts samples, so generations stay 1 there.
            gen = generations or 1
            per_gpu_seq = seq / cp
            n_bytes = mbs * gen * per_gpu_seq * (vocab / tp) * p.bytes_per_logit
            arithmetic = (
                f"{mbs}" + (f" * {gen}" if generations else "") + f" * {per_gpu_seq:g} * {vocab}"
                + (f"/{tp}" if tp > 1 else "") + f" * {p.bytes_per_logit} bytes"
            )
            base.update(micro_batch_size=mbs, num_generations=generations, seq_len=seq, tensor_model_parallel_size=tp)
        else:
            return None
        base.update(logits_gb=round(n_bytes / GB, 3), arithmetic=f"{arithmetic} = {n_bytes / GB:.1f} GB")
        return base


def _gpu_memory_gb(run: Run, given: float | None) -> tuple[float, str]:
    """The GPU's memory in GB and where it came from: the probe's params, the run's arguments, the
    log's own device lines (the largest total printed), or the 80 GB assumption."""
    if given:
        return given, "from the probe's parameters"
    from_args = arg_float(run, "gpu_memory_gb")
    if from_args:
        return from_args, "from the run's gpu_memory_gb"
    try:
        lines = [*run.log.errors, *run.log.notable]
    except TriageError:
        lines = []
    totals = [float(v) for line in lines for m in _DEVICE_TOTAL.finditer(line.text) for v in m.groupdict().values() if v]
    totals = [t for t in totals if t > 0]
    if totals:
        return max(totals), "as the log prints the device's total memory"
    return DEFAULT_GPU_GB, "assumed"
