"""`wintermute tap`: a live, decoded view of the bus, one line per event."""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

import msgspec

from bus import Delivery
from contracts.config import Settings
from supervisor.cli.client import connect

_peek = msgspec.json.Decoder(dict[str, Any])

SUMMARY_FIELDS = ("text", "summary", "content", "query", "name", "reason", "status", "error")


def summarize(payload: dict[str, Any]) -> str:
    """A short human summary of a payload."""
    parts = []
    for key in SUMMARY_FIELDS:
        value = payload.get(key)
        if value:
            text = str(value).replace("\n", " ")
            parts.append(f"{key}={text[:80]!r}" if len(text) > 80 else f"{key}={text!r}")
    if payload.get("tool_calls"):
        parts.append("tool_calls=" + ",".join(c.get("name", "?") for c in payload["tool_calls"]))
    if payload.get("type") == "llm.request":
        parts.append(f"messages={len(payload.get('messages', []))}")
    return " ".join(parts)[:200]


def format_line(subject: str, data: bytes) -> str:
    try:
        payload = _peek.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return f"{time.strftime('%H:%M:%S')} {'<not json>':18} {subject} {data[:80]!r}"
    ts = payload.get("ts")
    when = time.strftime("%H:%M:%S", time.localtime(ts if isinstance(ts, float) else None))
    kind = str(payload.get("type", "<no type>"))
    session = payload.get("session") or "-"
    return f"{when} {kind:18} {subject} session={session} {summarize(payload)}"


async def tap(settings: Settings, filt: str, as_json: bool) -> int:
    bus = await connect(settings, "tap")
    subject = bus.subjects.all()
    type_filter = session = ""
    if filt:
        if "." in filt or filt in (">", "*"):
            subject = filt
        elif ":" in filt:  # a session id as users write it; subjects carry it transformed
            session = filt
        else:
            type_filter = filt

    async def on_msg(msg: Delivery) -> None:
        if msg.subject.startswith("_INBOX") or msg.subject.startswith("$JS"):
            return
        if type_filter or session:
            try:
                payload = _peek.decode(msg.data)
            except (msgspec.DecodeError, msgspec.ValidationError):
                payload = {}
            if not str(payload.get("type", "")).startswith(type_filter):
                return
            if session and payload.get("session") != session:
                return
        if as_json:
            sys.stdout.write(msg.data.decode("utf-8", "replace") + "\n")
        else:
            sys.stdout.write(format_line(msg.subject, msg.data) + "\n")
        sys.stdout.flush()

    await bus.subscribe(subject, on_msg)
    shown = (f" type={type_filter}" if type_filter else "") + (
        f" session={session}" if session else "")
    print(f"tapping {subject}{shown} (Ctrl-C stops)",
          file=sys.stderr, flush=True)
    try:
        await asyncio.Event().wait()  # until Ctrl-C
    finally:
        await bus.close()
    return 0  # not reached: Ctrl-C cancels the wait above
