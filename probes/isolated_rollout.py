"""Run inference alone: the run's prompts, the run's sampling settings, the run's weights; judge the text.

The guides' `--debug-rollout-only` move, without relaunching the job: take the prompts the
run really sent (token ids from its rollout dump: `tokens[:len - response_length]`), send
them with its rollout settings (`--rollout-temperature`, `--rollout-top-p`,
`--rollout-top-k`, `--rollout-stop-token-ids`, `--rollout-stop`, and
`--rollout-max-response-len` capped small), and judge what comes back:

- `garbled`: the responses are not text (the garble score of triage.text_quality);
- `truncated`: most responses run to the length limit, where that limit is the run's own
  (or they loop: repeated text that would not have stopped);
- `coherent`: otherwise.

The engine is a live SGLang server when the run names one (`--engine http://HOST:PORT`),
else a transformers model over the run's HF checkpoint on this host. Where the dump
holds the run's log-probs of its responses (`rollout_log_probs`), the same tokens are
scored by the engine (prefill only, `logprob_start_len`) and the two compared: a large
gap with coherent text means the engine computes something else than the run did.

Requests are few and small: one batched generation, one batched scoring pass; the
evidence lists every request.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from probes.live_weights import open_engine, with_requests
from triage.engines import EngineError, LocalEngineError, Sampling
from triage.errors import TriageError, Unavailable
from triage.finding import Observation
from triage.formats.dumps import load_train_dump
from triage.probe import Cost, Probe
from triage.run.run import NEEDS_HELP, dump_order
from triage.text_quality import GARBLED_AT, judge_texts

if TYPE_CHECKING:
    from triage.engines import Engine, Generation
    from triage.run.run import Run

MAX_EXAMPLE = 200
LOOPING = 0.5  # mean repetition fraction above which responses that hit the limit are loops


@dataclass(frozen=True)
class DumpPrompt:
    """One prompt of the run, and the response the run recorded for it."""

    where: str
    prompt: list[int]
    response: list[int]
    rollout_log_probs: list[float] | None


def _ints(value: Any) -> list[int] | None:
    seq = value.tolist() if hasattr(value, "tolist") and not isinstance(value, list) else value
    if not isinstance(seq, list) or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in seq):
        return None
    return [int(x) for x in seq]


def _floats(value: Any) -> list[float] | None:
    seq = value.tolist() if hasattr(value, "tolist") and not isinstance(value, list) else value
    if not isinstance(seq, list) or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in seq):
        return None
    return [float(x) for x in seq]


def run_prompts(run: Run, limit: int) -> tuple[list[DumpPrompt], Path, int | str | None]:
    """Distinct prompts of the run's first rollout dump (lowest rollout id, training before eval)."""
    paths = sorted(run.rollout_dump_paths(), key=dump_order)
    if not paths:
        raise Unavailable("rollout_dump", "no rollout dump: the run's prompts, as the token ids it sent, come from one",
                          NEEDS_HELP["rollout_dump"])
    dump = run.rollout_dump(paths[0])
    out: list[DumpPrompt] = []
    seen: set[tuple[int, ...]] = set()
    for i, s in enumerate(dump.samples):
        tokens = _ints(s.get("tokens"))
        n = s.get("response_length")
        n = int(n) if isinstance(n, (int, float)) and not isinstance(n, bool) else None
        if not tokens or n is None or not 0 < n < len(tokens):
            continue
        prompt = tokens[: len(tokens) - n]
        if tuple(prompt) in seen:
            continue
        seen.add(tuple(prompt))
        lps = _floats(s.get("rollout_log_probs"))
        out.append(DumpPrompt(f"{paths[0].name}#{i}", prompt, tokens[len(tokens) - n:],
                              lps if lps is not None and len(lps) == n else None))
        if len(out) >= limit:
            break
    if not out:
        raise Unavailable("rollout_dump", f"{paths[0]}: no sample has tokens and a response_length to split them into "
                          "prompt and response", NEEDS_HELP["rollout_dump"])
    return out, paths[0], dump.rollout_id


def _list_arg(value: Any, kind: type) -> tuple[Any, ...]:
    if value is None:
        return ()
    items = value if isinstance(value, (list, tuple)) else str(value).replace(",", " ").split()
    out = []
    for v in items:
        try:
            out.append(kind(v))
        except (TypeError, ValueError):
            continue
    return tuple(out)


def run_sampling(run: Run, cap: int) -> tuple[Sampling, int | None]:
    """The run's rollout sampling settings, max_new_tokens capped; and the run's own length limit."""
    a = run.args

    def num(key: str, default: float) -> float:
        v = a.get(key)
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else default

    run_max = a.get("rollout_max_response_len")
    run_max = int(run_max) if isinstance(run_max, (int, float)) and not isinstance(run_max, bool) else None
    sampling = Sampling(
        max_new_tokens=min(cap, run_max) if run_max else cap,
        temperature=num("rollout_temperature", 1.0),
        top_p=num("rollout_top_p", 1.0),
        top_k=int(num("rollout_top_k", -1)),
        stop_token_ids=_list_arg(a.get("rollout_stop_token_ids"), int),
        stop=_list_arg(a.get("rollout_stop"), str) if not isinstance(a.get("rollout_stop"), str)
        else (a.get("rollout_stop"),),
    )
    return sampling, run_max


def run_hf_checkpoint(run: Run, override: str | None = None) -> Path | None:
    """The HF checkpoint directory with weights: the probe's parameter, --hf-checkpoint, or a discovered one."""
    cands = [Path(override)] if override else []
    cands += [run.resolve_path(run.args.get("hf_checkpoint")), *run.artifacts.hf_checkpoints]
    for c in cands:
        if c is not None and c.is_dir() and (c / "config.json").is_file() and (
                any(c.glob("*.safetensors")) or any(c.glob("*.bin"))):
            return c
    return None


def _vocab_hint(run: Run) -> tuple[int | None, str]:
    from triage.engines.sglang import config_vocab_size

    for c in [run.resolve_path(run.args.get("hf_checkpoint")), *run.artifacts.hf_checkpoints]:
        if c is not None and c.is_dir():
            v = config_vocab_size(c)
            if v:
                return v, f"{c}/config.json, the run's model"
    return None, ""


class IsolatedRollout(Probe):
    """Generate from the run's prompts with its sampling settings on a live or local engine, and judge the text."""

    name = "isolated_rollout"
    outcomes = ("coherent", "garbled", "truncated")
    needs = ()
    cost = Cost.CPU
    live_engine: ClassVar[bool] = True  # talks to a live engine when the run names one: never cached
    contacts_engine = True  # /generate on a consented live engine (else a local transformers model)

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)

        engine: str = Field("auto", pattern="^(auto|live|local)$",
                            description="auto: the run's live engine if named, else the local engine")
        max_prompts: int = Field(4, ge=1, le=16, description="distinct prompts sent")
        max_new_tokens: int = Field(48, ge=1, le=512, description="cap on the run's rollout_max_response_len")
        garbled_at: float = Field(GARBLED_AT, gt=0, lt=1, description="garble score from which a response is garbled")
        truncated_ratio: float = Field(0.8, gt=0, le=1, description="share of responses at the limit for `truncated`")
        compare_logprobs: bool = Field(True, description="score the run's responses and compare log-probs")
        hf_checkpoint: str | None = Field(None, description="HF checkpoint directory for the local engine")
        timeout_s: float = Field(60.0, gt=0, le=600, description="per-request timeout for a live engine")

    def examine(self, run: Run) -> Observation:
        p: Any = self.params
        prompts, dump_path, rollout_id = run_prompts(run, p.max_prompts)
        sampling, run_max = run_sampling(run, p.max_new_tokens)
        engine = self._engine(run)
        try:
            limit = engine.max_input_tokens()
            fit = [x for x in prompts if len(x.prompt) + sampling.max_new_tokens <= limit]
            if not fit:
                raise Unavailable("rollout_dump", f"every prompt of {dump_path.name} is longer than the {limit} tokens "
                                  f"{engine.address} accepts with {sampling.max_new_tokens} new tokens",
                                  "point the probe at an engine with a longer context: --engine http://HOST:PORT")
            skipped, prompts = len(prompts) - len(fit), fit
            gens = engine.generate([x.prompt for x in prompts], sampling)
            logprobs = (self._compare_logprobs(run, engine, prompts, rollout_id, sampling)
                        if p.compare_logprobs else None)
        except EngineError as exc:
            if hasattr(engine, "answered"):
                raise with_requests(exc, engine) from None  # type: ignore[arg-type]
            raise
        finally:
            close = getattr(engine, "close", None)
            if close is not None:
                close()
        return self._judge(engine, prompts, gens, sampling, run_max, dump_path, logprobs, skipped)

    # -- which engine ----------------------------------------------------------------------

    def _engine(self, run: Run) -> Engine:
        p: Any = self.params
        if run.engines and p.engine in ("auto", "live"):
            vocab, source = _vocab_hint(run)
            return open_engine(run.engines[0], run, timeout=p.timeout_s, vocab_size=vocab, vocab_source=source)
        if p.engine == "live":
            raise Unavailable("engine", "no live engine was named", "pass --engine http://HOST:PORT")
        hf = run_hf_checkpoint(run, p.hf_checkpoint)
        if hf is None:
            raise Unavailable(
                "engine",
                "no live engine was named and no HF checkpoint with weights is reachable for the local engine",
                "pass --engine http://HOST:PORT (a live SGLang server with the run's weights), or keep the "
                "--hf-checkpoint directory (config.json, *.safetensors) reachable from the run",
            )
        from triage.engines.local import LocalEngine

        try:
            return LocalEngine(hf)
        except LocalEngineError as exc:
            raise Unavailable("engine", exc.reason, "pass --engine http://HOST:PORT") from None

    # -- log-probs of the run's own responses ----------------------------------------------------

    def _reference(self, run: Run, prompts: list[DumpPrompt],
                   rollout_id: int | str | None) -> tuple[dict[int, list[float]], str]:
        """The trainer's log-probs of each response (a train dump with the same tokens), else the rollout's own."""
        refs: dict[int, list[float]] = {}
        for path in run.artifacts.train_dumps:
            if rollout_id is not None and not path.stem.split("_")[0] == str(rollout_id):
                continue
            try:
                dump = load_train_dump(path)
            except TriageError:
                continue
            tokens, lps = dump.tokens or [], dump.log_probs or []
            index = {tuple(int(x) for x in t): lp for t, lp in zip(tokens, lps) if t is not None and lp is not None}
            for i, pr in enumerate(prompts):
                lp = index.get(tuple(pr.prompt + pr.response))
                if lp is not None and len(lp) >= len(pr.response):
                    refs[i] = [float(x) for x in lp[-len(pr.response):]]
            if refs:
                return refs, f"log_probs of {path.name} (the trainer's)"
        for i, pr in enumerate(prompts):
            if pr.rollout_log_probs is not None:
                refs[i] = pr.rollout_log_probs
        return refs, "rollout_log_probs of the rollout dump (recorded at rollout time)"

    def _compare_logprobs(self, run: Run, engine: Engine, prompts: list[DumpPrompt], rollout_id: int | str | None,
                          sampling: Sampling) -> dict[str, Any] | None:
        refs, source = self._reference(run, prompts, rollout_id)
        cap = engine.max_input_tokens()
        keep = [i for i in refs if len(prompts[i].prompt) + len(prompts[i].response) <= cap]
        if not keep:
            return None
        scored = engine.score([prompts[i].prompt + prompts[i].response for i in keep],
                              [len(prompts[i].prompt) for i in keep])
        diffs: list[float] = []
        per_sample = []
        for i, got in zip(keep, scored):
            pairs = [(g, r) for g, r in zip(got, refs[i]) if g is not None]
            d = [abs(g - r) for g, r in pairs]
            diffs += d
            if d:
                per_sample.append({"where": prompts[i].where, "tokens": len(d),
                                   "mean_abs_diff": round(sum(d) / len(d), 6), "max_abs_diff": round(max(d), 6),
                                   "engine_mean": round(sum(g for g, _ in pairs) / len(pairs), 6),
                                   "reference_mean": round(sum(r for _, r in pairs) / len(pairs), 6)})
        if not diffs:
            return None
        out: dict[str, Any] = {"reference": source, "samples": len(per_sample), "tokens": len(diffs),
                               "mean_abs_diff": round(sum(diffs) / len(diffs), 6), "max_abs_diff": round(max(diffs), 6),
                               "per_sample": per_sample}
        if abs(sampling.temperature - 1.0) > 1e-6:
            out["note"] = (f"the run sampled at temperature {sampling.temperature:g}: recorded log-probs are of the "
                           "scaled distribution, the engine's scoring log-probs of the unscaled one")
        return out

    # -- the judgement -------------------------------------------------------------------------

    def _judge(self, engine: Engine, prompts: list[DumpPrompt], gens: list[Generation], sampling: Sampling,
               run_max: int | None, dump_path: Path, logprobs: dict[str, Any] | None, skipped: int = 0) -> Observation:
        p: Any = self.params
        texts = [g.text or "" for g in gens]
        verdict = judge_texts(texts, threshold=p.garbled_at)
        finishes = Counter(g.finish.type for g in gens)
        at_limit = sum(1 for g in gens if g.finish.truncated) / len(gens)
        limit_is_runs = run_max is not None and run_max <= sampling.max_new_tokens
        looping = at_limit >= p.truncated_ratio and verdict.repetition_fraction >= LOOPING
        from triage.text_quality import garble_score

        examples = []
        for pr, g in list(zip(prompts, gens, strict=True))[:5]:
            examples.append({"where": pr.where, "prompt_tokens": len(pr.prompt), "finish": g.finish.as_evidence(),
                             "garble_score": garble_score(g.text or ""), "text": (g.text or "")[:MAX_EXAMPLE]})
        evidence: dict[str, Any] = {
            "engine": engine.describe(),
            "prompts_from": str(dump_path),
            "prompts": len(prompts),
            "prompts_too_long": skipped,
            "sampling": sampling.to_sglang(),
            "length_limit": {"max_new_tokens": sampling.max_new_tokens, "run_max_response_len": run_max,
                             "is_the_runs": limit_is_runs},
            "finish_reasons": dict(finishes),
            "at_length_limit": round(at_limit, 4),
            "mean_garble_score": verdict.mean_score,
            "garbled_fraction": verdict.garbled_fraction,
            "repetition_fraction": verdict.repetition_fraction,
            "empty_responses": verdict.empty,
            "examples": examples,
            "response_tokens": sum(len(g.output_ids) for g in gens),
            "logprobs": logprobs,
            "request_count": len(engine.requests),
            "requests": [r.as_evidence() for r in engine.requests],
        }
        where = engine.address
        if verdict.garbled:
            return self.observe(
                "garbled",
                f"{verdict.garbled_fraction:.0%} of {verdict.count} responses generated by {where} from the run's "
                f"prompts are not text (mean garble score {verdict.mean_score:.2f})",
                0.85, **evidence)
        if (limit_is_runs and at_limit >= p.truncated_ratio) or looping:
            why = (f"the run's limit of {sampling.max_new_tokens} tokens" if limit_is_runs and not looping
                   else f"the {sampling.max_new_tokens}-token limit while repeating themselves "
                        f"(repetition {verdict.repetition_fraction:.2f})")
            return self.observe("truncated", f"{at_limit:.0%} of {len(gens)} responses from {where} run to {why}",
                                0.75, **evidence)
        extra = (f"; engine vs run log-probs differ by {logprobs['mean_abs_diff']:.3g} per token on average"
                 if logprobs else "")
        return self.observe(
            "coherent",
            f"{verdict.count} responses generated by {where} from the run's prompts read as text (mean garble score "
            f"{verdict.mean_score:.2f}, {at_limit:.0%} at the {sampling.max_new_tokens}-token limit){extra}",
            0.7, **evidence)
