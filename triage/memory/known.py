"""Confirmed causes as a file a team keeps in its repository: `triage known --export / --import`.

The file is JSON: {"format": "triage-known-causes", "version": 1, "records": [...]}, one
record per confirmed triage (the fields `MemoryStore.confirmations` gives). An import is
all or nothing: every record is checked first (fields, types, catalog ids, times), and a
malformed one refuses the whole file, naming the record; nothing is stored. A record
already in the store (same triage id) is left as it is.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from triage.errors import BadInput
from triage.memory.store import MemoryStore, parse_iso

FORMAT, VERSION = "triage-known-causes", 1
MAX_FILE_BYTES = 64 << 20


class KnownRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    triage_id: str
    verdict: str
    given: str
    by: str
    at: str
    note: str | None = None
    signature: str | None = None
    evidence: list[str] = []
    run: str | None = None
    run_dir: str | None = None

    @field_validator("triage_id", "verdict", "given", "by")
    @classmethod
    def _non_empty(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must not be empty")
        return v

    @field_validator("at")
    @classmethod
    def _time(cls, v: str) -> str:
        try:
            parse_iso(v)
        except ValueError:
            raise ValueError("must be a UTC time like 2026-11-25T10:00:00Z") from None
        return v


def export_known(store: MemoryStore, path: Path) -> int:
    records = store.confirmations()
    body = {"format": FORMAT, "version": VERSION, "records": records}
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(body, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(path)
    return len(records)


def _where(i: int, raw: Any) -> str:
    tid = raw.get("triage_id") if isinstance(raw, dict) else None
    return f"record {i}" + (f" (triage {tid})" if isinstance(tid, str) and tid else "")


def read_known(path: Path, catalog_ids: set[str]) -> list[dict[str, Any]]:
    """Every record of the file, checked; BadInput naming the first malformed one."""
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise BadInput(f"{path}: over {MAX_FILE_BYTES >> 20} MB, not a known-causes file; nothing imported")
        body = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise BadInput(f"{path}: cannot be read ({exc.strerror or exc}); nothing imported") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadInput(f"{path}: not JSON ({str(exc).splitlines()[0][:120]}); nothing imported") from None
    if not isinstance(body, dict) or body.get("format") != FORMAT or not isinstance(body.get("records"), list):
        raise BadInput(f"{path}: not a known-causes file (expected {{\"format\": \"{FORMAT}\", \"records\": [...]}}); "
                       "nothing imported")
    if body.get("version") != VERSION:
        raise BadInput(f"{path}: version {body.get('version')!r} is not {VERSION}; nothing imported")
    out = []
    seen: set[str] = set()
    for i, raw in enumerate(body["records"], 1):
        try:
            rec = KnownRecord.model_validate(raw)
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(str(x) for x in err.get("loc", ())) or "record"
            raise BadInput(f"{path}: {_where(i, raw)}: {field}: {err.get('msg')}; nothing imported") from None
        for field in ("verdict", "given"):
            if getattr(rec, field) not in catalog_ids:
                raise BadInput(f"{path}: {_where(i, raw)}: {field} {getattr(rec, field)!r} is not a verdict id of the "
                               "catalog (triage verdicts); nothing imported")
        if rec.triage_id in seen:
            raise BadInput(f"{path}: {_where(i, raw)}: the triage id appears twice; nothing imported")
        seen.add(rec.triage_id)
        out.append(rec.model_dump())
    return out
