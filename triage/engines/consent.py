"""Which engines a triage may contact: the user's, and the run's only where allow-listed.

An engine URL the user gives (`triage run --engine URL`) is the user's consent. An
engine the run names (the manifest's `engines:`) is only an address someone wrote into
a file: it is contacted only when its host:port is on the engine allow-list
(`--engine-allow HOST:PORT`, repeatable, and `TRIAGE_ENGINE_ALLOW`, comma-separated;
the service's own configuration). Otherwise it is listed in the report as not
contacted, and the probes that would have asked it say so in "not checked".
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from triage.run.run import Run

ENV_ALLOW = "TRIAGE_ENGINE_ALLOW"
DEFAULT_PORTS = {"http": 80, "https": 443}


def host_port(url: str) -> str | None:
    """`host:port` of an engine URL (the scheme's default port when none is given); None when unreadable."""
    try:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    if not host:
        return None
    port = port if port is not None else DEFAULT_PORTS.get(parts.scheme)
    if port is None:
        return None
    host = f"[{host}]" if ":" in host else host
    return f"{host.lower()}:{port}"


def allow_entry(entry: str, where: str = "--engine-allow") -> str:
    """One allow-list entry (HOST:PORT, or a URL) as host:port; BadInput naming it otherwise."""
    from triage.errors import BadInput

    text = entry.strip()
    hp = host_port(text)
    if hp is None or ("://" not in text and not text.rsplit(":", 1)[-1].isdigit()):
        raise BadInput(f"{where}: {text[:80]!r} is not HOST:PORT (e.g. 10.0.0.5:30000) or an http:// URL")
    return hp


def allow_list(entries: Iterable[str] = (), env: Mapping[str, str] | None = None) -> frozenset[str]:
    """The allow-list: `entries` (HOST:PORT or URLs) plus `TRIAGE_ENGINE_ALLOW`, normalised to host:port."""
    env = os.environ if env is None else env
    given = [allow_entry(e) for e in entries if e.strip()]
    from_env = [allow_entry(e, ENV_ALLOW) for e in (env.get(ENV_ALLOW) or "").split(",") if e.strip()]
    return frozenset(given + from_env)


def consent_engines(run: Run, allowed: Iterable[str], given: Iterable[str] = ()) -> None:
    """Set `run.engines` to what may be contacted: `given` (the user's) and the run's allow-listed engines.

    The run's other engines go to `run.engines_not_contacted`, which the report notes.
    """
    allow = frozenset(allowed)
    engines = list(dict.fromkeys(given))
    refused = []
    for url in run.named_engines:
        if url in engines:
            continue
        hp = host_port(url)
        if hp is not None and hp in allow:
            engines.append(url)
        else:
            refused.append(url)
    run.engines = engines
    run.engines_not_contacted = refused


def not_contacted_note(refused: list[str]) -> str:
    shown = ", ".join(refused[:4]) + (f" and {len(refused) - 4} more" if len(refused) > 4 else "")
    return (f"engine(s) named by the run not contacted: {shown} (an engine the run names is contacted only when "
            f"its host:port is allow-listed: --engine-allow HOST:PORT or {ENV_ALLOW})")
