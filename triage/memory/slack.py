"""Confirmed causes from Slack: the report's "Confirm" and "It was something else…" buttons.

"Confirm" records the triage's own verdict as the real cause. "It was something else…"
opens a modal (`views.open`) with a `static_select` of the catalog's verdict ids and a
free-text note; its submission (`view_submission`) records the chosen id. Both arrive
signed at `/slack/interactions` (checked there, before this module sees them), and only
the users allowed to run active probes (`TRIAGE_ACTIVE_USERS`) may record a cause. A
repeated click stores once (`MemoryStore.confirm`).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import structlog
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse, Response

if TYPE_CHECKING:
    from triage.report import Report

log = structlog.get_logger("triage.memory.slack")

CONFIRM_ACTION = "triage_confirm"
CORRECT_ACTION = "triage_correct"
CORRECT_VIEW = "triage_correct_view"
ACTIONS = frozenset({CONFIRM_ACTION, CORRECT_ACTION})
MAX_OPTIONS = 100  # Slack's limit on a static_select's options
NOTE_MAX = 2000


def memory_blocks(report: Report) -> list[dict[str, Any]]:
    """The "Changed since the last good run" section and the "seen before" line."""
    from triage.memory.render import TITLE, baseline_line, change_lines
    from triage.service.slack import _mrkdwn, escape

    blocks: list[dict[str, Any]] = []
    if report.changes is not None:
        lines = "\n".join(f"• {escape(line[:400])}" for line in change_lines(report, limit=6))
        blocks.append({"type": "section", "text": _mrkdwn(f"*{TITLE}* ({escape(baseline_line(report) or '')})\n{lines}")})
    seen = report.history.line() if report.history is not None else None
    if seen:
        blocks.append({"type": "section", "text": _mrkdwn(f":brain: {escape(seen)}")})
    return blocks


def confirm_buttons(report: Report, triage_id: str) -> dict[str, Any]:
    """An actions block: "Confirm" (the verdict given) and "It was something else…"."""
    elements: list[dict[str, Any]] = []
    if not report.inconclusive:
        elements.append({"type": "button", "action_id": CONFIRM_ACTION, "text": {"type": "plain_text", "text": "Confirm"},
                         "value": json.dumps({"triage": triage_id, "verdict": report.root_cause.id})})
    elements.append({"type": "button", "action_id": CORRECT_ACTION,
                     "text": {"type": "plain_text", "text": "It was something else…"},
                     "value": json.dumps({"triage": triage_id})})
    return {"type": "actions", "block_id": "triage_memory", "elements": elements}


def correction_view(triage_id: str, catalog_ids: list[str], channel: str | None, thread: str | None) -> dict[str, Any]:
    options = [{"text": {"type": "plain_text", "text": vid[:75]}, "value": vid} for vid in catalog_ids[:MAX_OPTIONS]]
    return {
        "type": "modal", "callback_id": CORRECT_VIEW,
        "title": {"type": "plain_text", "text": "The real cause"},
        "submit": {"type": "plain_text", "text": "Record"},
        "private_metadata": json.dumps({"triage": triage_id, "channel": channel, "thread": thread}),
        "blocks": [
            {"type": "input", "block_id": "cause", "label": {"type": "plain_text", "text": "What was it?"},
             "element": {"type": "static_select", "action_id": "verdict", "options": options,
                         "placeholder": {"type": "plain_text", "text": "a verdict id of the catalog"}}},
            {"type": "input", "block_id": "note", "optional": True, "label": {"type": "plain_text", "text": "Note"},
             "element": {"type": "plain_text_input", "action_id": "note", "multiline": True, "max_length": NOTE_MAX}},
        ],
    }


def _catalog_ids(svc: Any) -> list[str]:
    from triage.catalog import load_catalog
    from triage.graph import DEFAULT_DIR

    return [vid for vid in load_catalog((svc.config.playbooks or DEFAULT_DIR) / "verdicts.yaml")
            if vid != "inconclusive"]


def _record(svc: Any, triage_id: str, verdict: str, user: str, note: str | None) -> str:
    """One line for the user: what was stored, or why nothing was."""
    from triage.memory.store import UNCHANGED, MemoryStore

    if verdict not in _catalog_ids(svc):
        return f"`{verdict}` is not a verdict id of the catalog; nothing recorded."
    with MemoryStore(svc.config.db_path) as store:
        triage = store.triage(triage_id)
        if triage is None:
            return f"There is no finished triage `{triage_id}`; nothing recorded."
        outcome, cause = store.confirm(triage, verdict, user, note)
    svc.metrics.inc("triage_confirmations_total", outcome=outcome)
    what = "confirmed" if cause.verdict == cause.given else f"corrected from `{cause.given}` to"
    if outcome == UNCHANGED:
        return f"Already recorded: triage `{triage_id}` {what} `{cause.verdict}` by <@{cause.by}>."
    return f"Recorded: triage `{triage_id}` {what} `{cause.verdict}`. Thank you, <@{user}>."


async def handle_interaction(svc: Any, payload: dict[str, Any]) -> Response | None:
    """The answer to a memory button or modal submission; None when the payload is not one of ours."""
    kind = payload.get("type")
    actions = payload.get("actions") or []
    action = actions[0] if actions and isinstance(actions[0], dict) else {}
    view = payload.get("view") if isinstance(payload.get("view"), dict) else {}
    if not ((kind == "block_actions" and action.get("action_id") in ACTIONS)
            or (kind == "view_submission" and view.get("callback_id") == CORRECT_VIEW)):
        return None
    team = (payload.get("team") or {}).get("id")
    user = (payload.get("user") or {}).get("id")
    try:
        meta = json.loads(view.get("private_metadata") or "{}") if kind == "view_submission" else {}
        value = json.loads(action.get("value") or "{}") if kind == "block_actions" else {}
    except ValueError:
        meta, value = {}, {}
    if not isinstance(meta, dict) or not isinstance(value, dict):
        meta, value = {}, {}
    channel = meta.get("channel") or (payload.get("channel") or {}).get("id") or (payload.get("container") or {}).get("channel_id")
    message = payload.get("message") or {}
    thread = meta.get("thread") or message.get("thread_ts") or (payload.get("container") or {}).get("thread_ts")
    structlog.contextvars.bind_contextvars(team=team, channel=channel, user=user)

    def tell(text: str) -> Response:
        return Response(status_code=200, background=BackgroundTask(svc.poster.ephemeral, channel, user, text, thread))

    if not svc.access.team_allowed(team) or not svc.access.channel_allowed(channel):
        svc.refuse("confirm", "channel")
        return tell("Sorry — triage requests are not enabled here.")
    if not svc.access.may_run_active(user):
        svc.refuse("confirm", "not_allowed")
        log.info("confirm_refused", reason="not_allowed")
        return tell("Sorry — only the users allowed to run active probes can record the cause of a triage.")
    triage_id = str(value.get("triage") or meta.get("triage") or "")
    if not triage_id or len(triage_id) > 64:
        return tell("That button names no triage; nothing recorded.")
    if kind == "block_actions" and action.get("action_id") == CORRECT_ACTION:
        trigger = payload.get("trigger_id")
        view_body = correction_view(triage_id, _catalog_ids(svc), channel, thread)

        def open_view() -> None:
            if svc.poster.client is None or not trigger:
                return
            try:
                svc.poster.client.views_open(trigger_id=trigger, view=view_body)
            except Exception as exc:  # noqa: BLE001 - best effort, as Slack's trigger expires in 3 s anyway
                log.warning("views_open_failed", error=str(exc))

        return Response(status_code=200, background=BackgroundTask(open_view))
    if kind == "block_actions":
        verdict, note = str(value.get("verdict") or ""), None
    else:
        values = ((view.get("state") or {}).get("values") or {})
        verdict = str((((values.get("cause") or {}).get("verdict") or {}).get("selected_option") or {}).get("value") or "")
        note = ((values.get("note") or {}).get("note") or {}).get("value")
        note = str(note).strip()[:NOTE_MAX] if note else None
        if not verdict:
            return JSONResponse({"response_action": "errors", "errors": {"cause": "Pick the real cause."}})
    text = await run_in_threadpool(_record, svc, triage_id, verdict, user, note)
    log.info("confirm_answered", triage_id=triage_id, verdict=verdict, text=text)
    return tell(text)
