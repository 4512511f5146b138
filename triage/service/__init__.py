"""`triage serve`: Slack bot, failed-job webhooks, a durable store and a bounded work queue.

    create_app(config)     the ASGI app (starlette); run it with uvicorn
    ServiceConfig          runs roots, database, Slack and webhook secrets, allow-lists, limits
    SQLiteStore            the default store behind the `TriageStore` interface

Imported lazily, so that registering `triage serve` on the command line costs nothing.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ServiceConfig", "SQLiteStore", "TriageStore", "create_app"]

_WHERE = {
    "create_app": "triage.service.app",
    "ServiceConfig": "triage.service.config",
    "SQLiteStore": "triage.service.store",
    "TriageStore": "triage.service.store",
}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'triage.service' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_WHERE[name]), name)
