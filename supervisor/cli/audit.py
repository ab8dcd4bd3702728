"""`wintermute audit`: the audit log (privileged decisions), oldest first."""

from __future__ import annotations

import datetime as dt
import json
import re
import time
from typing import Any

import msgspec

from bus import Bus
from bus.codec import decoder_for
from bus.history import read_stream
from contracts import AuditEvent
from contracts.config import Settings
from supervisor.cli.client import connect

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


class SinceError(ValueError):
    """A --since value that is neither a duration nor a date."""


def parse_since(text: str, now: float | None = None) -> float:
    """`90m`, `12h`, `7d`, `2w` (ago) or an ISO date/time (UTC unless it says otherwise)."""
    text = text.strip()
    if m := re.fullmatch(r"(\d+(?:\.\d+)?)\s*([smhdw])", text):
        return (now if now is not None else time.time()) - float(m[1]) * _UNITS[m[2]]
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        raise SinceError(f"--since takes a duration such as 30m, 12h or 7d, or a date such as "
                         f"2026-11-26 or 2026-11-26T09:00; got {text!r}.") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.timestamp()


async def read_audit(bus: Bus, since: float | None = None) -> list[AuditEvent]:
    """Every audit event (from `since`), oldest first; what does not decode is skipped."""
    decoder = decoder_for(AuditEvent)
    out: list[AuditEvent] = []
    async for stored in read_stream(bus, bus.subjects.stream_audit, since=since):
        try:
            event = decoder.decode(stored.data)
        except msgspec.DecodeError:
            continue  # garbage cannot be a decision; the observer logs it
        # The server's start time is a lower bound it may not apply to a future date.
        if since is None or event.ts >= since:
            out.append(event)
    return out


def render(events: list[AuditEvent]) -> str:
    """One line per decision: when, who, what, outcome, on whose behalf, why."""
    if not events:
        return "No audit events (yet)."
    lines = []
    for e in events:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(e.ts))
        who = f" principal={e.principal}" if e.principal else ""
        refs = " ".join(f"{k}={v}" for k, v in sorted(e.refs.items()))
        lines.append(f"{when} {e.actor:9} {e.decision:18} {e.outcome:9}{who} {e.reason}"
                     + (f" [{refs}]" if refs else ""))
    return "\n".join(lines)


async def audit(settings: Settings, since: str, as_json: bool) -> str:
    """The text `wintermute audit` prints."""
    start = parse_since(since) if since else None
    bus = await connect(settings, "audit")
    try:
        events = await read_audit(bus, start)
    finally:
        await bus.close()
    if as_json:
        rows: list[dict[str, Any]] = [msgspec.to_builtins(e) for e in events]
        return json.dumps(rows, indent=2)
    return render(events)
