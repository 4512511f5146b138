"""The service's configuration: flags, the conventional environment variables, defaults.

Environment variables (a flag wins over its variable):

    SLACK_SIGNING_SECRET   verifies requests from Slack (slash commands, buttons)
    SLACK_BOT_TOKEN        posts replies through the Web API (chat.postMessage, files uploads)
    SLACK_API_URL          the Web API base URL (default Slack's own; a stand-in in tests)
    TRIAGE_RUNS_ROOT       where run-ids live (os.pathsep separated); run-ids never leave it
    TRIAGE_DB              the SQLite file holding requests, findings and reports
    TRIAGE_WEBHOOK_SECRET  the HMAC key schedulers and CI sign failed-job hooks with
    TRIAGE_SLACK_CHANNEL   the channel failed-job reports go to
    TRIAGE_PUBLIC_URL      this service's address as Slack users reach it (for postmortem links)
    TRIAGE_ALLOWED_TEAMS, TRIAGE_ALLOWED_CHANNELS, TRIAGE_ACTIVE_USERS
                           comma-separated Slack ids; an empty team / channel list allows all,
                           an empty active-user list allows nobody to run active probes
    TRIAGE_ALLOW_RELAUNCH  1: an allowed user's active triage may relaunch the run's job (default: never)
    TRIAGE_ENGINE_ALLOW    comma-separated HOST:PORT of the engines a run may name and have contacted
    TRIAGE_LINK_SECRET     the key of the signed links to /triages/{id} (default: derived from the
                           Slack signing secret or the webhook secret)
    TRIAGE_LINK_TTL        how long a signed link stays valid, in seconds (default 7 days)
    TRIAGE_RATE_USER, TRIAGE_RATE_CHANNEL
                           triage requests accepted per Slack user / per channel per minute
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from triage.errors import BadInput

SLACK_API_DEFAULT = "https://slack.com/api/"
DEFAULT_DB = "triage.db"
# Slack's own bodies are a few KiB; a button payload carries the whole message it sits on.
DEFAULT_MAX_BODY = 64 * 1024

DEFAULT_LINK_TTL_S = 7 * 24 * 3600  # a report link in a Slack thread stays usable for a week
# Requests accepted per minute: a person asks a few times a minute at most; a channel is several people.
DEFAULT_RATE_USER = 6
DEFAULT_RATE_CHANNEL = 20

# A triage function: `triage.api.triage` or anything with its signature.
TriageFunction = Callable[..., Any]


_PROCESS_LINK_KEY = os.urandom(32)


def _flag(raw: str | None) -> bool:
    return (raw or "").strip().lower() in ("1", "true", "yes", "on")


def _int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        return int(raw)
    except ValueError:
        raise BadInput(f"{name}={raw[:40]!r} is not a whole number") from None


def _ids(raw: str | None) -> frozenset[str]:
    return frozenset(p.strip() for p in (raw or "").split(",") if p.strip())


@dataclass(frozen=True)
class ServiceConfig:
    """Everything `create_app` needs; tests build one directly."""

    runs_roots: tuple[Path, ...]
    db_path: Path = Path(DEFAULT_DB)
    slack_signing_secret: str | None = None
    slack_bot_token: str | None = None
    slack_api_url: str = SLACK_API_DEFAULT
    webhook_secret: str | None = None
    hook_channel: str | None = None  # where failed-job reports go
    public_url: str | None = None  # e.g. https://triage.example.com, for links in Slack
    allowed_teams: frozenset[str] = frozenset()  # empty: any workspace the signing secret admits
    allowed_channels: frozenset[str] = frozenset()  # empty: any channel
    active_users: frozenset[str] = frozenset()  # empty: nobody may run active (GPU) probes
    concurrency: int = 2  # triages running at once
    workers: str = "process"  # process: a worker process per slot; thread: threads of the server
    worker_nice: int = 5  # worker processes yield the CPU to the server that answers Slack
    json_logs: bool = True  # structlog JSON lines (worker processes log the same way)
    max_queued: int = 100  # triages waiting; beyond this new ones are refused
    time_budget_s: float = 300.0  # per triage; past it the report is partial
    grace_s: float | None = None  # how long a probe still running at the deadline may finish
    max_body_bytes: int = DEFAULT_MAX_BODY
    max_clock_skew_s: int = 300  # Slack's rule: older than 5 minutes is a replay
    post_retries: int = 6
    # Acknowledgements have Slack's 3-second deadline and posts do not: a post waits until no
    # request has come in for `post_lull_s`, but never longer than `post_max_defer_s`.
    post_lull_s: float = 0.1
    post_max_defer_s: float = 2.0
    playbooks: Path | None = None
    triage_fn: TriageFunction | None = None  # default: triage.api.triage
    files_dir: Path | None = None  # postmortems and plots; default: next to the database
    allow_relaunch: bool = False  # an allowed user's active triage may relaunch the run's job
    engine_allow: frozenset[str] = frozenset()  # host:port of engines a run may name and have contacted
    link_secret: str | None = None  # signs /triages/{id} links; default derived from the other secrets
    link_ttl_s: int = DEFAULT_LINK_TTL_S
    rate_user_per_min: int = DEFAULT_RATE_USER  # 0: no limit
    rate_channel_per_min: int = DEFAULT_RATE_CHANNEL  # 0: no limit

    def __post_init__(self) -> None:
        if not self.runs_roots:
            raise BadInput("no runs root: pass --runs-root or set TRIAGE_RUNS_ROOT (run-ids are names under it)")
        if self.concurrency < 1:
            raise BadInput(f"--concurrency must be at least 1, got {self.concurrency}")
        if self.max_queued < 0:
            raise BadInput(f"--max-queued must be 0 or more, got {self.max_queued}")
        if self.workers not in ("process", "thread"):
            raise BadInput(f"--workers must be 'process' or 'thread', got {self.workers!r}")
        if self.time_budget_s <= 0:
            raise BadInput(f"--time-budget must be positive, got {self.time_budget_s}")
        if self.post_lull_s < 0 or self.post_max_defer_s < 0:
            raise BadInput("the post lull and its maximum deferral must be 0 or more seconds")
        if self.link_ttl_s <= 0:
            raise BadInput(f"the link lifetime must be positive, got {self.link_ttl_s} s")
        if self.rate_user_per_min < 0 or self.rate_channel_per_min < 0:
            raise BadInput("rate limits must be 0 (no limit) or more requests per minute")
        if not self.slack_api_url.endswith("/"):
            object.__setattr__(self, "slack_api_url", self.slack_api_url + "/")
        roots = tuple(Path(r).expanduser().resolve() for r in self.runs_roots)
        object.__setattr__(self, "runs_roots", roots)

    @property
    def runs_root_arg(self) -> str:
        """The roots as `triage.api.triage(runs_root=...)` takes them."""
        return os.pathsep.join(str(r) for r in self.runs_roots)

    @property
    def link_key(self) -> bytes:
        """The key of signed links: TRIAGE_LINK_SECRET, else derived from a secret the server already has."""
        import hashlib
        import hmac

        if self.link_secret:
            return self.link_secret.encode()
        base = self.slack_signing_secret or self.webhook_secret
        if base:
            return hmac.new(base.encode(), b"triage report links", hashlib.sha256).digest()
        return _PROCESS_LINK_KEY  # no secret at all: links last as long as this process

    @property
    def grace(self) -> float:
        return self.grace_s if self.grace_s is not None else max(1.0, 0.1 * self.time_budget_s)

    @property
    def files_root(self) -> Path:
        return self.files_dir or self.db_path.with_name(self.db_path.name + ".files")

    def with_(self, **changes: Any) -> ServiceConfig:
        return replace(self, **changes)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> ServiceConfig:
        """The configuration the environment describes; keyword arguments (from flags) win."""
        env = os.environ if env is None else env
        values: dict[str, Any] = {
            "runs_roots": tuple(Path(p) for p in env.get("TRIAGE_RUNS_ROOT", "").split(os.pathsep) if p.strip()),
            "db_path": Path(env.get("TRIAGE_DB") or DEFAULT_DB),
            "slack_signing_secret": env.get("SLACK_SIGNING_SECRET") or None,
            "slack_bot_token": env.get("SLACK_BOT_TOKEN") or None,
            "slack_api_url": env.get("SLACK_API_URL") or SLACK_API_DEFAULT,
            "webhook_secret": env.get("TRIAGE_WEBHOOK_SECRET") or None,
            "hook_channel": env.get("TRIAGE_SLACK_CHANNEL") or None,
            "public_url": env.get("TRIAGE_PUBLIC_URL") or None,
            "allowed_teams": _ids(env.get("TRIAGE_ALLOWED_TEAMS")),
            "allowed_channels": _ids(env.get("TRIAGE_ALLOWED_CHANNELS")),
            "active_users": _ids(env.get("TRIAGE_ACTIVE_USERS")),
            "allow_relaunch": _flag(env.get("TRIAGE_ALLOW_RELAUNCH")),
            "engine_allow": _engine_allow(env.get("TRIAGE_ENGINE_ALLOW"), "TRIAGE_ENGINE_ALLOW"),
            "link_secret": env.get("TRIAGE_LINK_SECRET") or None,
            "link_ttl_s": _int(env, "TRIAGE_LINK_TTL", DEFAULT_LINK_TTL_S),
            "rate_user_per_min": _int(env, "TRIAGE_RATE_USER", DEFAULT_RATE_USER),
            "rate_channel_per_min": _int(env, "TRIAGE_RATE_CHANNEL", DEFAULT_RATE_CHANNEL),
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        for key in ("allowed_teams", "allowed_channels", "active_users"):
            if isinstance(values[key], str):
                values[key] = _ids(values[key])
        if isinstance(values["engine_allow"], (list, tuple, str)):
            raw = values["engine_allow"]
            values["engine_allow"] = _engine_allow(",".join(raw) if not isinstance(raw, str) else raw, "--engine-allow")
        return cls(**values)


def _engine_allow(raw: str | None, where: str) -> frozenset[str]:
    from triage.engines.consent import allow_entry

    return frozenset(allow_entry(e, where) for e in (raw or "").split(",") if e.strip())
