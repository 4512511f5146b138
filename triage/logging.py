"""structlog set-up: diagnostics go to stderr (console in a terminal, JSON for services).

Tracebacks are rendered plain, never with local variables, and a crashing probe's
traceback is logged at debug level only (`-vv`).
"""

from __future__ import annotations

import logging
import sys

import structlog


class _CurrentStderr:
    """Writes to whatever sys.stderr is now (test runners and daemons swap it)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def configure(verbosity: int = 0, json: bool = False) -> None:
    level = logging.WARNING - 10 * min(verbosity, 2)
    processors: list = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    if json:
        processors += [structlog.processors.format_exc_info, structlog.processors.JSONRenderer()]
    else:
        # plain tracebacks: rich's default shows every frame's local variables, which can hold
        # secrets and take minutes to render (a 4,000-digit integer)
        processors += [structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty(),
                                                     exception_formatter=structlog.dev.plain_traceback)]
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=_CurrentStderr()),
        cache_logger_on_first_use=False,
    )
