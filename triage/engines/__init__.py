"""Inference engines a probe can ask to generate or to show its weights.

Two engines share one surface (`Engine`): a live SGLang server over HTTP
(`triage.engines.sglang.SGLangEngine`) and a transformers model loaded from an HF
checkpoint directory (`triage.engines.local.LocalEngine`). Both generate from token ids
with per-token log-probs and score given tokens, so a probe judges their answers the
same way. `triage.engines.safety` decides what may be sent to a live engine.

Exceptions (all `TriageError`: a probe that meets one ends `error`, or `unavailable`
when the engine never answered at all; none is `BadInput`, so the walk goes on):

    EngineError(address, reason)    one line that names the engine's address
    ├── EngineUnreachable           nothing answers: connection refused, unknown host
    ├── EngineTimeout               no answer within the timeout
    ├── EngineDisconnected          the server closed the connection without answering (it died mid-request)
    ├── EngineRejected              an HTTP error status, with the server's own message (400, 404, 503)
    ├── EngineProtocolError         an answer that is not the documented shape
    ├── LocalEngineError            the local model cannot be loaded or run here
    └── RefusedRequest              not sent: it could change or harm a live engine
        ├── WriteNotAllowed         a mutating call without --allow-engine-writes
        └── TokenOutOfVocabulary    a token id >= the served vocabulary size
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from triage.errors import TriageError

if TYPE_CHECKING:
    from triage.engines.local import LocalEngine
    from triage.engines.sglang import SGLangEngine

__all__ = [
    "Engine",
    "EngineDisconnected",
    "EngineError",
    "EngineProtocolError",
    "EngineRejected",
    "EngineTimeout",
    "EngineUnreachable",
    "FinishReason",
    "Generation",
    "LocalEngine",
    "LocalEngineError",
    "RefusedRequest",
    "RequestRecord",
    "SGLangEngine",
    "Sampling",
    "TokenOutOfVocabulary",
    "WriteNotAllowed",
]


# --- errors ------------------------------------------------------------------------------


class EngineError(TriageError):
    """Something went wrong talking to an engine; the message names its address."""

    def __init__(self, address: str, reason: str) -> None:
        self.address = address
        self.reason = reason
        super().__init__(f"{address}: {reason}")


class EngineUnreachable(EngineError):
    pass


class EngineTimeout(EngineError):
    pass


class EngineDisconnected(EngineError):
    pass


class EngineRejected(EngineError):
    def __init__(self, address: str, reason: str, status: int, message: str) -> None:
        self.status = status
        self.message = message
        super().__init__(address, reason)


class EngineProtocolError(EngineError):
    pass


class LocalEngineError(EngineError):
    pass


class RefusedRequest(EngineError):
    pass


class WriteNotAllowed(RefusedRequest):
    pass


class TokenOutOfVocabulary(RefusedRequest):
    pass


# --- what engines return --------------------------------------------------------------------


@dataclass(frozen=True)
class RequestRecord:
    """One request an engine adapter sent (or, for a local engine, one call it ran)."""

    method: str
    path: str
    status: int | None  # HTTP status; None when no answer came back
    duration_s: float
    note: str = ""  # what failed, or a short description of the payload

    def as_evidence(self) -> dict[str, Any]:
        out: dict[str, Any] = {"method": self.method, "path": self.path, "status": self.status,
                               "ms": round(self.duration_s * 1000, 1)}
        if self.note:
            out["note"] = self.note
        return out


@dataclass(frozen=True)
class FinishReason:
    """Why generation stopped: `length` (hit max_new_tokens), `stop` (a stop token or string), `abort`."""

    type: str
    length: int | None = None
    matched: int | str | None = None

    @property
    def truncated(self) -> bool:
        return self.type == "length"

    @classmethod
    def from_sglang(cls, raw: Any) -> FinishReason:
        if not isinstance(raw, dict):
            return cls("unknown" if raw is None else str(raw))
        length = raw.get("length")
        return cls(str(raw.get("type", "unknown")), int(length) if isinstance(length, int) else None, raw.get("matched"))

    def as_evidence(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type}
        if self.length is not None:
            out["length"] = self.length
        if self.matched is not None:
            out["matched"] = self.matched
        return out


@dataclass(frozen=True)
class Generation:
    """One prompt's answer: the generated ids, their log-probs, the finish reason and the text."""

    prompt_tokens: int
    output_ids: list[int]
    output_logprobs: list[float | None]
    finish: FinishReason
    text: str | None
    input_logprobs: list[float | None] = field(default_factory=list)
    weight_version: str | None = None


@dataclass(frozen=True)
class Sampling:
    """The sampling settings a request carries (the run's rollout settings, capped)."""

    max_new_tokens: int = 32
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    stop_token_ids: tuple[int, ...] = ()
    stop: tuple[str, ...] = ()

    @property
    def greedy(self) -> bool:
        return self.temperature <= 1e-5 or self.top_k == 1

    def to_sglang(self) -> dict[str, Any]:
        out: dict[str, Any] = {"max_new_tokens": self.max_new_tokens, "temperature": self.temperature,
                               "top_p": self.top_p, "top_k": self.top_k}
        if self.stop_token_ids:
            out["stop_token_ids"] = list(self.stop_token_ids)
        if self.stop:
            out["stop"] = list(self.stop)
        return out


class Engine(Protocol):
    """What the isolated rollout needs from any engine."""

    address: str
    requests: list[RequestRecord]

    def generate(self, prompts: list[list[int]], sampling: Sampling) -> list[Generation]: ...

    def score(self, sequences: list[list[int]], starts: list[int]) -> list[list[float | None]]: ...

    def max_input_tokens(self) -> int: ...

    def describe(self) -> dict[str, Any]: ...


def __getattr__(name: str) -> Any:  # the adapters import their dependencies only when used
    if name == "SGLangEngine":
        from triage.engines.sglang import SGLangEngine

        return SGLangEngine
    if name == "LocalEngine":
        from triage.engines.local import LocalEngine

        return LocalEngine
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
