"""Verdict quality in the team's own runs: per verdict id, how often given, confirmed, corrected."""

from __future__ import annotations

from typing import Any

from triage.memory.store import MemoryStore


def verdict_stats(store: MemoryStore) -> list[dict[str, Any]]:
    """One row per verdict id; `precision` = confirmed / (confirmed + corrected), None before any answer."""
    rows = []
    for vid, c in store.verdict_counts().items():
        answered = c["confirmed"] + c["corrected"]
        rows.append({"id": vid, "given": c["given"], "confirmed": c["confirmed"], "corrected": c["corrected"],
                     "corrected_to": dict(sorted(c["corrected_to"].items(), key=lambda kv: (-kv[1], kv[0]))),
                     "precision": round(c["confirmed"] / answered, 3) if answered else None})
    return rows


def metrics_text(store: MemoryStore) -> str:
    """The same counts as Prometheus gauges (read from the store at scrape time, so they survive restarts)."""
    from triage.service.metrics import labelled_gauges

    rows = verdict_stats(store)
    text = labelled_gauges("triage_verdict_given", "Triages that gave this verdict (the team's memory).",
                           [({"verdict": r["id"]}, r["given"]) for r in rows])
    text += labelled_gauges("triage_verdict_confirmed", "Triages whose verdict a user confirmed as the real cause.",
                            [({"verdict": r["id"]}, r["confirmed"]) for r in rows])
    text += labelled_gauges("triage_verdict_corrected", "Triages whose verdict a user corrected, by the real cause.",
                            [({"verdict": r["id"], "to": to}, n) for r in rows for to, n in r["corrected_to"].items()])
    return text
