"""`triage serve`: the Slack bot and failed-job webhook service, run with uvicorn.

Secrets come from the environment only (flags show up in `ps`): SLACK_SIGNING_SECRET,
SLACK_BOT_TOKEN, TRIAGE_WEBHOOK_SECRET, TRIAGE_LINK_SECRET. Everything else may be a flag or its variable
(see `triage.service.config`).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from typing import Any

from triage.errors import BadInput, TriageError
from triage.service.config import ServiceConfig

EXIT_OK, EXIT_BAD_INPUT = 0, 2


def _load_function(spec: str) -> Any:
    """`package.module:attribute` -> the object (a triage function with `triage.api.triage`'s signature)."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise BadInput(f"--triage-function {spec!r}: expected MODULE:FUNCTION, e.g. triage.api:triage")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise BadInput(f"--triage-function {spec!r}: cannot import {module_name}: {exc}") from None
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise BadInput(f"--triage-function {spec!r}: {module_name} has no function {attr!r}")
    return fn


def config_from_args(ns: argparse.Namespace) -> ServiceConfig:
    """Flags over environment variables over defaults."""
    overrides: dict[str, Any] = {
        "db_path": Path(ns.db) if ns.db else None,
        "slack_api_url": ns.slack_api_url,
        "hook_channel": ns.slack_channel,
        "public_url": ns.public_url,
        "allowed_teams": ns.allowed_teams,
        "allowed_channels": ns.allowed_channels,
        "active_users": ns.active_users,
        "concurrency": ns.concurrency,
        "max_queued": ns.max_queued,
        "time_budget_s": ns.time_budget,
        "workers": ns.workers,
        "playbooks": getattr(ns, "playbooks", None),
        "triage_fn": _load_function(ns.triage_function) if ns.triage_function else None,
        "allow_relaunch": True if ns.allow_relaunch else None,
        "engine_allow": ns.engine_allow,
        "link_ttl_s": ns.link_ttl,
        "rate_user_per_min": ns.rate_user,
        "rate_channel_per_min": ns.rate_channel,
    }
    if ns.runs_root:
        overrides["runs_roots"] = tuple(Path(p) for p in ns.runs_root)
    return ServiceConfig.from_env(**overrides)


def serve(config: ServiceConfig, host: str, port: int) -> None:
    """Run the service in this process until interrupted."""
    import uvicorn

    from triage.service.app import create_app

    app = create_app(config)
    uvicorn.run(app, host=host, port=port, log_config=None, access_log=False, lifespan="on",
                timeout_graceful_shutdown=5, server_header=False)


def _cmd_serve(ns: argparse.Namespace) -> int:
    from triage.logging import configure

    configure(1 + getattr(ns, "verbose", 0), json=True)
    try:
        config = config_from_args(ns)
    except TriageError as exc:
        print(f"triage: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if not config.slack_signing_secret:
        print("triage: warning: SLACK_SIGNING_SECRET is not set: Slack requests will be refused", file=sys.stderr)
    if not config.slack_bot_token:
        print("triage: warning: SLACK_BOT_TOKEN is not set: reports are stored but not posted", file=sys.stderr)
    try:
        serve(config, ns.host, ns.port)
    except TriageError as exc:  # e.g. the database is held by another server
        print(f"triage: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return EXIT_OK


def add_serve_parser(subparsers: Any) -> argparse.ArgumentParser:
    """`triage serve --host 127.0.0.1 --port N ...`."""
    p = subparsers.add_parser(
        "serve", help="run the Slack bot and failed-job webhook service",
        description="Serve /slack/commands, /slack/interactions, /hooks/job-failed, /triages/{id}, /healthz and "
                    "/metrics. Secrets come from SLACK_SIGNING_SECRET, SLACK_BOT_TOKEN and TRIAGE_WEBHOOK_SECRET.",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8080, help="port to listen on (default 8080)")
    p.add_argument("--runs-root", action="append", default=None, metavar="DIR",
                   help="where run-ids live; repeat for several (default: $TRIAGE_RUNS_ROOT)")
    p.add_argument("--db", default=None, metavar="FILE", help="the SQLite store (default: $TRIAGE_DB or ./triage.db)")
    p.add_argument("--slack-api-url", default=None, metavar="URL",
                   help="Slack Web API base URL (default: $SLACK_API_URL or https://slack.com/api/)")
    p.add_argument("--slack-channel", default=None, metavar="ID",
                   help="channel for failed-job reports (default: $TRIAGE_SLACK_CHANNEL)")
    p.add_argument("--public-url", default=None, metavar="URL",
                   help="this service's address as Slack users reach it, for postmortem links")
    p.add_argument("--allowed-teams", default=None, metavar="IDS", help="comma-separated Slack workspace ids")
    p.add_argument("--allowed-channels", default=None, metavar="IDS", help="comma-separated Slack channel ids")
    p.add_argument("--active-users", default=None, metavar="IDS",
                   help="comma-separated Slack user ids allowed to run active (GPU) probes")
    p.add_argument("--concurrency", type=int, default=None, help="triages running at once (default 2)")
    p.add_argument("--max-queued", type=int, default=None, help="triages waiting before new ones are refused (default 100)")
    p.add_argument("--time-budget", type=float, default=None, metavar="SECONDS",
                   help="per triage; past it the report is partial (default 300)")
    p.add_argument("--workers", choices=("process", "thread"), default=None,
                   help="run triages in worker processes (default; a stuck probe can be stopped) or in threads")
    p.add_argument("--allow-relaunch", action="store_true",
                   help="let an allowed user's active triage relaunch the run's job (default: $TRIAGE_ALLOW_RELAUNCH, "
                        "else never)")
    p.add_argument("--engine-allow", action="append", default=None, metavar="HOST:PORT",
                   help="an engine address a run may name and have contacted (repeatable; default $TRIAGE_ENGINE_ALLOW)")
    p.add_argument("--link-ttl", type=int, default=None, metavar="SECONDS",
                   help="how long the signed report links in Slack stay valid (default: $TRIAGE_LINK_TTL or 7 days)")
    p.add_argument("--rate-user", type=int, default=None, metavar="N",
                   help="triage requests per Slack user per minute (default: $TRIAGE_RATE_USER or 6; 0: no limit)")
    p.add_argument("--rate-channel", type=int, default=None, metavar="N",
                   help="triage requests per channel per minute (default: $TRIAGE_RATE_CHANNEL or 20; 0: no limit)")
    p.add_argument("--triage-function", default=None, metavar="MODULE:FUNCTION",
                   help="a function with triage.api.triage's signature to run instead (default: triage.api:triage)")
    p.set_defaults(func=_cmd_serve)
    return p


def main(argv: list[str] | None = None) -> int:
    """`python -m triage.service serve ...`: the service without the rest of the CLI."""
    parser = argparse.ArgumentParser(prog="triage")
    parser.add_argument("-v", "--verbose", action="count", default=0)
    parser.add_argument("--playbooks", type=Path, default=None)
    sub = parser.add_subparsers(dest="command", required=True)
    add_serve_parser(sub)
    from triage.postmortem import add_postmortem_parser

    add_postmortem_parser(sub)
    ns = parser.parse_args(argv)
    return int(ns.func(ns))
