"""`wintermute tap`: a live, decoded view of the bus, one line per event."""

from __future__ import annotations

import sys
import time
from typing import Any, NamedTuple

import msgspec

from bus import Delivery
from contracts.config import Settings
from supervisor.cli.client import connect
from supervisor.cli.watch import until_stopped

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
    delegation = payload.get("delegation")
    if isinstance(delegation, dict):  # a delegated sub-task: where it hangs in the tree
        parts.insert(0, f"parent={delegation.get('parent_turn')!r} "
                        f"node={delegation.get('node')!r} role={delegation.get('role')!r}")
    return " ".join(parts)[:300]


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


class BadFilter(ValueError):
    """A FILTER that is neither a subject, a session id nor a type prefix; says why."""


class Filter(NamedTuple):
    subject: str
    type_prefix: str = ""
    session: str = ""


def parse_filter(filt: str, prefix: str) -> Filter:
    """A FILTER: a subject (`wm.evt.>`, `>`), a session id (`terminal:owner`) or a type (`tool.`).

    A subject starts with the bus prefix (or is `>`); a session id has a `:` (subjects carry
    it transformed, payloads as written); anything else is a prefix of the payload's `type`
    (`tool.`, `llm.response`, `turn`), which may contain dots.
    """
    if not filt:
        return Filter(f"{prefix}.>")
    if filt != ">" and not filt.startswith(f"{prefix}."):
        if any(c.isspace() for c in filt) or "*" in filt or ">" in filt:
            raise BadFilter(f"'{filt}' is neither a subject (it would start with '{prefix}.'), "
                            "a session id such as 'terminal:owner', nor a message type prefix "
                            "such as 'tool.' or 'llm.response'.")
        if ":" in filt:
            return Filter(f"{prefix}.>", session=filt)
        return Filter(f"{prefix}.>", type_prefix=filt)
    tokens = filt.split(".")
    bad = [t for t in tokens if not t or any(c.isspace() for c in t)]
    if bad or (">" in tokens[:-1]) or any(len(t) > 1 and ("*" in t or ">" in t) for t in tokens):
        raise BadFilter(f"'{filt}' is not a valid NATS subject: tokens are separated by single "
                        "dots, `*` matches one token and `>` the rest (e.g. 'wm.evt.>').")
    return Filter(filt)


async def tap(settings: Settings, filt: str, as_json: bool) -> int:
    """Print bus events until Ctrl-C or until the instance stops (then exit 0)."""
    prefix = settings.config.nats.prefix
    try:
        subject, type_filter, session = parse_filter(filt, prefix)
    except BadFilter as exc:
        print(str(exc), file=sys.stderr)
        return 2
    bus = await connect(settings, "tap")

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
        print(await until_stopped(settings, bus, "tap"), file=sys.stderr, flush=True)
        return 0
    finally:
        await bus.close()
