"""`replay --fork-at TURN`: continue live from a recorded turn in a new session.

The new session `<session>~fork-<hash>` starts with the planner history the recorded turn's
model saw before its input; the turn's input (then each `--say` text, or lines typed at a
terminal) goes to the running instance as a turn of that session, from the same principal
with the same owner rights, answered to the terminal chat `fork-<hash>`. The original
session's state and stream history are not touched. A fork's turns are recorded like any
other, so `--fork-at` one of them continues the fork further.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator, Iterable
from typing import Any

import msgspec

from bus import Bus
from contracts import Sink, TurnRequest, short_hash
from contracts.replay import SessionSeed
from kit.redact import credential_guard
from supervisor.cli.chat import ChatClient
from supervisor.cli.replay.record import Turn
from supervisor.cli.replay.results import session_key


class ForkError(Exception):
    """A fork that cannot be made; the message says why and what to do."""


async def fork(bus: Bus, turn: Turn, timeout: float, say: Iterable[str] = (),
               interactive: bool = False) -> dict[str, Any]:
    """Seed a new session with the history before `turn`, send the turn's input (and the
    follow-ups), and collect the replies."""
    first = turn.llm_requests.get(0)
    start = turn.start.msg
    if not isinstance(start, TurnRequest) or first is None:
        raise ForkError(f"Turn {turn.id} cannot be forked: fork at a user turn whose model "
                        "calls are still in the history (WM_CMD keeps 7 days); "
                        "`wintermute replay --list` shows them.")
    tag = f"fork-{short_hash(f'{turn.id}@{time.time()}', 8)}"
    session = f"{turn.session}~{tag}"
    seed = SessionSeed(session=session, history=first.messages[1:-1])
    await bus.kv_put(bus.subjects.kv_sessions, session_key(session), seed)
    client = ChatClient(bus, tag)
    await client.start()
    out: dict[str, Any] = {"forked_from": turn.id, "session": session, "chat": tag,
                           "history_messages": len(seed.history), "turns": []}
    base = msgspec.structs.replace(start, session=session, reply_to=Sink(channel="terminal",
                                                                           chat=tag))
    n = 0
    async for typed in _inputs(start.text, say, interactive):
        guard = credential_guard(typed)  # what the channel does to what a user types
        if guard.action == "block":
            out["turns"].append({"turn": "", "text": "", "reply": guard.text})
            continue
        text = guard.text
        req = msgspec.structs.replace(base, id=f"{tag}:{n}", text=text, ts=time.time())
        n += 1
        await bus.send(req)
        entry: dict[str, Any] = {"turn": req.id, "text": text, "reply": None}
        out["turns"].append(entry)
        await _await_reply(client, req.id, entry, timeout)
        if interactive:
            print(render_turn(entry), flush=True)
        if entry["reply"] is None:
            break
    out["reply"] = out["turns"][0]["reply"]
    last = out["turns"][-1]["turn"]
    out["continue"] = f"wintermute replay --fork-at {last} --say TEXT"
    return out


async def _inputs(first: str, say: Iterable[str], interactive: bool) -> AsyncIterator[str]:
    yield first
    for text in say:
        yield text
    while interactive:
        line = await asyncio.to_thread(sys.stdin.readline)
        if not line:
            return
        if line.strip():
            yield line.strip()


async def _await_reply(client: ChatClient, turn_id: str, entry: dict[str, Any],
                       timeout: float) -> None:
    try:
        async with asyncio.timeout(timeout):
            while True:
                d = await client.inbox.get()
                if d.kind == "approval":
                    entry.setdefault("approvals", []).append({"id": d.ref, "text": d.text})
                elif d.ref == turn_id and d.kind in ("reply", "suppressed"):
                    entry["reply"] = d.text
                    return
    except TimeoutError:
        entry["error"] = f"no reply within {timeout:.0f}s (see `wintermute status`)"


def render_turn(entry: dict[str, Any]) -> str:
    lines = [f"> {entry['text']}"]
    for a in entry.get("approvals", []):
        lines.append(f"Approval needed [{a['id']}]: {a['text']} (wintermute approve {a['id']})")
    lines.append(entry["reply"] if entry["reply"] is not None else entry.get("error", ""))
    return "\n".join(lines)


def render_fork(out: dict[str, Any]) -> str:
    lines = [f"Forked {out['forked_from']} into session {out['session']} "
             f"({out['history_messages']} messages of history); the original is unchanged."]
    lines += [render_turn(t) for t in out["turns"]]
    lines.append(f"Continue it: {out['continue']}")
    return "\n".join(lines)
