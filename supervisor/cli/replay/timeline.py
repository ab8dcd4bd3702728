"""A turn's timeline: its messages with times since it began, and the crashes, restarts and
dead letters that happened while it ran (a redelivery shows as an answer that came only
after the actor handling the request was restarted)."""

from __future__ import annotations

import time
from typing import Any

import msgspec

from contracts import DeadLetter, Intervention, LlmRequest, Recall, ToolRequest
from supervisor.cli.replay.record import Entry, Recording, Turn
from supervisor.cli.tap import summarize

#: Which actor answers which request (a restart of it between request and answer means the
#: request was handed back and delivered again).
ANSWERED_BY: dict[type, str] = {Recall: "memory", LlmRequest: "llm", ToolRequest: "executor"}

_RESTARTS = ("restart", "hung", "failed", "nats_restart")


def _answer_ts(turn: Turn, e: Entry) -> float | None:
    msg = e.msg
    if isinstance(msg, Recall):
        return turn.recalled.ts if turn.recalled else None
    if isinstance(msg, LlmRequest):
        resp = turn.llm_responses.get(msg.step)
        return resp.ts if resp else None
    if isinstance(msg, ToolRequest):
        res = turn.tool_results.get(msg.id)
        return res.ts if res else None
    return None


def redeliveries(turn: Turn) -> list[tuple[Entry, Entry]]:
    """(request, restart) pairs: requests whose handler restarted before they were answered."""
    found = []
    for e in turn.events:
        actor = ANSWERED_BY.get(type(e.msg))
        if actor is None:
            continue
        answered = _answer_ts(turn, e)
        for inc in turn.incidents:
            iv = inc.msg
            if (isinstance(iv, Intervention) and iv.kind in _RESTARTS
                    and iv.target in (actor, "nats") and e.msg.ts <= iv.ts
                    and (answered is None or iv.ts <= answered)):
                found.append((e, inc))
                break
    return found


def _incident_line(e: Entry) -> str:
    msg = e.msg
    if isinstance(msg, DeadLetter):
        return (f"DEAD LETTER from {msg.actor} after {msg.deliveries} deliveries: "
                f"{msg.reason[:120]} (subject {msg.subject}, {msg.stream} #{msg.stream_seq})")
    if isinstance(msg, Intervention):
        return f"SUPERVISOR {msg.kind} {msg.target}: {msg.action} {msg.reason}".strip()[:200]
    return msg.id


def incident_dict(e: Entry, start: float) -> dict[str, Any]:
    msg = e.msg
    out: dict[str, Any] = {"at": round(msg.ts - start, 3), "type": type(msg).__name__}
    if isinstance(msg, DeadLetter):
        out.update(kind="dead_letter", actor=msg.actor, reason=msg.reason,
                   deliveries=msg.deliveries, subject=msg.subject)
    elif isinstance(msg, Intervention):
        out.update(kind=msg.kind, target=msg.target, action=msg.action, reason=msg.reason)
    return out


def timeline(turn: Turn) -> list[str]:
    """One line per recorded event and incident, with the time since the turn began."""
    start = turn.ts
    redelivered = {id(req): inc for req, inc in redeliveries(turn)}
    rows: list[tuple[float, str]] = []
    first = msgspec.to_builtins(turn.start.msg)
    rows.append((start, f"+0.000s {first['type']:16} {turn.start.subject} {summarize(first)}"))
    for e in turn.events:
        payload = msgspec.to_builtins(e.msg)
        line = f"+{e.msg.ts - start:.3f}s {payload['type']:16} {e.subject} {summarize(payload)}"
        inc = redelivered.get(id(e))
        if inc is not None:
            assert isinstance(inc.msg, Intervention)
            line += (f"  [handled again: {inc.msg.target} restarted at "
                     f"+{inc.msg.ts - start:.3f}s before answering, the request was redelivered]")
        rows.append((e.msg.ts, line))
    for e in turn.incidents:
        rows.append((e.msg.ts, f"+{e.msg.ts - start:.3f}s !! {_incident_line(e)}"))
    rows.sort(key=lambda r: r[0])
    return [line for _, line in rows]


def listing(rec: Recording, session: str = "") -> list[dict[str, Any]]:
    """The turns (of one session, or all) with ids, times and outcome."""
    rows = []
    for t in rec.turns:
        if session and t.session != session:
            continue
        rows.append({
            "turn": t.id, "session": t.session, "kind": t.kind,
            "time": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t.ts)), "ts": t.ts,
            "seconds": round(t.end - t.ts, 3), "model_calls": len(t.llm_requests),
            "tool_calls": len(t.tool_requests), "incidents": len(t.incidents),
            "outcome": t.outcome, "text": t.text[:80], "parent": t.parent,
        })
    return _as_tree(rows)


def _as_tree(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Delegated sub-tasks right after the turn that delegated them, with their depth."""
    children: dict[str, list[dict[str, Any]]] = {}
    ids = {r["turn"] for r in rows}
    for r in rows:
        if r["parent"] in ids:
            children.setdefault(r["parent"], []).append(r)
    out: list[dict[str, Any]] = []

    def add(r: dict[str, Any], depth: int) -> None:
        out.append({**r, "depth": depth})
        for c in children.get(r["turn"], []):
            add(c, depth + 1)

    for r in rows:
        if r["parent"] not in ids:
            add(r, 0)
    return out


def render_listing(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "No turns found."
    lines = []
    for r in rows:
        extra = f", {r['incidents']} incidents" if r["incidents"] else ""
        tree = "  " * r.get("depth", 0) + ("└ " if r.get("depth") else "")
        lines.append(f"{r['time']}  {tree}{r['turn']}  [{r['session']}] {r['outcome']} "
                     f"({r['seconds']:.1f}s, {r['model_calls']} model / {r['tool_calls']} tool "
                     f"calls{extra})  {r['text']!r}")
    return "\n".join(lines)
