"""Which model the inference engine actually serves, against the run's `--hf-checkpoint`.

SGLang prints its whole configuration when an engine starts:
`server_args=ServerArgs(model_path='/root/Qwen3-4B', tokenizer_path='/root/Qwen3-4B', …)`
(under Ray with the `(SGLangEngine pid=…)` prefix). The axolotl guide's "verify the
server is serving the right model" is this comparison. A live engine answers the same
question over HTTP (`/get_model_info` → `model_path`); `served_from_engines` is where
that reading plugs in, and `judge` takes served models from any source.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from probes.config_rule import arg_str, read_hf_json
from triage.errors import TriageError, Unavailable
from triage.finding import Observation
from triage.formats.log_index import LogLine
from triage.probe import Cost, Probe

if TYPE_CHECKING:
    from triage.run.run import Run

SERVER_ARGS_MARK = "server_args=ServerArgs("
_FIELD = {
    name: re.compile(rf"\b{name}=(?:'((?:[^'\\]|\\.)*)'|\"((?:[^\"\\]|\\.)*)\"|None)")
    for name in ("model_path", "tokenizer_path", "served_model_name")
}


@dataclass(frozen=True)
class ServedModel:
    """One engine's model, as its startup line or its HTTP API gives it."""

    model_path: str
    tokenizer_path: str | None = None
    served_model_name: str | None = None
    where: str | None = None  # path:line of the startup line, or the engine URL
    source: str | None = None  # the Ray actor that printed it

    def as_evidence(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


def _field(text: str, name: str) -> str | None:
    m = _FIELD[name].search(text)
    if not m:
        return None
    value = m.group(1) if m.group(1) is not None else m.group(2)
    return value


def parse_server_args(text: str, where: str | None = None, source: str | None = None) -> ServedModel | None:
    """The served model from one `server_args=ServerArgs(...)` line; None if it names none."""
    start = text.find(SERVER_ARGS_MARK)
    if start < 0:
        return None
    body = text[start + len(SERVER_ARGS_MARK):]
    model = _field(body, "model_path")
    if not model:
        return None
    return ServedModel(
        model_path=model,
        tokenizer_path=_field(body, "tokenizer_path"),
        served_model_name=_field(body, "served_model_name"),
        where=where,
        source=source,
    )


def _from_index(lines: list[LogLine]) -> list[ServedModel]:
    out = []
    for line in lines:
        if SERVER_ARGS_MARK in line.text:
            served = parse_server_args(line.text, line.where(), line.source)
            if served is not None:
                out.append(served)
    return out


def _norm(path: str) -> str:
    return os.path.normpath(path.strip()).rstrip("/") if path.strip() else path


def _model_config(run: Run, path: str) -> dict[str, Any] | None:
    resolved = run.resolve_path(path)
    if resolved is None or not resolved.is_dir():
        return None
    try:
        config = read_hf_json(resolved, "config.json")
    except TriageError:
        return None
    if config is None:
        return None
    return {k: v for k, v in config.items() if k not in ("_name_or_path", "transformers_version")}


def same_model(run: Run, configured: str, served: str) -> tuple[bool, str]:
    """Whether two model references name the same model, and why."""
    if _norm(configured) == _norm(served):
        return True, "same path"
    a, b = run.resolve_path(configured), run.resolve_path(served)
    if a is not None and b is not None:
        try:
            if a.samefile(b):
                return True, "same directory under two names"
        except OSError:
            pass
    ca, cb = _model_config(run, configured), _model_config(run, served)
    if ca is not None and cb is not None:
        return (ca == cb, "same config.json at another path" if ca == cb else "config.json differs")
    if Path(_norm(configured)).name == Path(_norm(served)).name:
        return False, "same name under another directory"
    return False, "different path"


class EngineModel(Probe):
    """Whether the inference engine serves the model the run is configured with (`--hf-checkpoint`)."""

    name = "engine_model"
    outcomes = ("same_model", "different_model")
    needs = ()  # the log's SGLang launch lines, or a live engine (--engine)
    cost = Cost.STATIC
    live_engine = True  # asks a live engine when the run names one: never cached
    contacts_engine = True  # GET /get_model_info of each consented engine (read-only)

    def examine(self, run: Run) -> Observation:
        configured = arg_str(run, "hf_checkpoint")
        if not configured and run.artifacts.hf_checkpoints:
            configured = str(run.artifacts.hf_checkpoints[0])
        served = self.served_from_log(run) + self.served_from_engines(run)
        if not served:
            raise Unavailable(
                "log",
                "no SGLang startup line (`server_args=ServerArgs(model_path=...)`) in the log and no engine was asked",
                "keep the SGLang engines' output in the job log (slime forwards it through Ray), or pass --engine http://HOST:PORT",
            )
        if not configured:
            raise Unavailable(
                "args",
                "the run's --hf-checkpoint is unknown, so there is nothing to compare the served model with",
                "keep the job's command line (cmdline.txt) or the log's arguments block",
            )
        return self.judge(run, configured, served)

    def served_from_log(self, run: Run) -> list[ServedModel]:
        if not run.artifacts.logs:
            return []
        log = run.log
        return _from_index([*log.notable_tagged("engine_launch"), *log.errors])

    def served_from_engines(self, run: Run) -> list[ServedModel]:
        """Models reported by the run's live engines (`run.engines`).

        Reads `GET /get_model_info` (read-only) of each engine; an engine that does not
        answer contributes nothing here (the live probes report it).
        """
        from triage.engines import EngineError
        from triage.engines.sglang import SGLangEngine

        served = []
        for url in run.engines:
            try:
                with SGLangEngine(url, retries=1) as engine:
                    info = engine.model_info()
            except EngineError:
                continue
            if info.model_path:
                served.append(ServedModel(info.model_path, info.tokenizer_path, info.served_model_name, where=url))
        return served

    def judge(self, run: Run, configured: str, served: list[ServedModel]) -> Observation:
        """Compare every served model with the configured one; any mismatch decides."""
        rows = []
        for s in served:
            same, why = same_model(run, configured, s.model_path)
            rows.append({**s.as_evidence(), "same": same, "why": why})
        distinct = sorted({r["model_path"] for r in rows})
        evidence = {"hf_checkpoint": configured, "served": rows[:16], "engines_seen": len(rows), "served_paths": distinct}
        wrong = [r for r in rows if not r["same"]]
        if wrong:
            first = wrong[0]
            at = f" ({first['where']}" + (f", {first['source']}" if first.get("source") else "") + ")" if first.get("where") else ""
            extra = f"; {len(rows) - len(wrong)} other engine(s) serve the configured model" if len(wrong) < len(rows) else ""
            return self.observe(
                "different_model",
                f"The engine serves `{first['model_path']}`{at} but the run's --hf-checkpoint is `{configured}` "
                f"({first['why']}){extra}.",
                0.6 if first["why"] == "same name under another directory" else 0.85,
                **evidence,
            )
        return self.observe(
            "same_model",
            f"All {len(rows)} engine startup(s) serve the configured model `{configured}`.",
            0.85,
            **evidence,
        )
