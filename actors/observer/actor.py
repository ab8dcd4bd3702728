"""The observer: the JSONL event log of everything on the bus, session-idle events, and
learning from idle and archived (`/reset`) sessions (_learn.py)."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

import msgspec

from actors.base import Actor
from contracts import SessionIdle
from kit.private import open_private, private_dir

log = logging.getLogger(__name__)

_peek = msgspec.json.Decoder(dict[str, Any])


class ObserverActor(Actor):
    name = "observer"
    inbox = msgspec.Raw

    async def on_start(self) -> None:
        # Every conversation and tool output: 0600 in a 0700 folder.
        self.log_path = private_dir(self.home / "logs") / "events.jsonl"
        self.last_activity: dict[str, float] = {}
        self.idle_sent: dict[str, float] = {}
        from actors.observer._consolidate import Consolidator
        from actors.observer._learn import Learner
        from actors.observer._reflect import Reflector

        self.learner = Learner(self)
        self.reflector = Reflector(self)  # lessons from failed tool calls, for AGENTS.md
        self.consolidator = Consolidator(self)  # AGENTS.md grown past its limit
        self.spawn(self._idle_loop(), "idle")

    async def handle(self, raw: msgspec.Raw) -> None:
        data = bytes(raw)
        try:
            payload = _peek.decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError):
            payload = {"type": "unparsed", "raw": data[:2000].decode("utf-8", "replace")}
        line = {
            "ts": payload.get("ts", time.time()),
            "type": payload.get("type"),
            "id": payload.get("id"),
            "session": payload.get("session"),
            "payload": payload,
        }
        with open_private(self.log_path) as fh:
            fh.write(json.dumps(line, default=str) + "\n")
        session = payload.get("session")
        if isinstance(session, str) and payload.get("type") in ("turn.request", "turn.reply"):
            self.last_activity[session] = time.time()
        self.learner.seen(payload)
        self.reflector.seen(payload)
        if payload.get("type") == "llm.response":
            await self.learner.answered(payload)
            await self.reflector.answered(payload)
            await self.consolidator.answered(payload)
        elif payload.get("type") == "session.reset" and isinstance(session, str):
            # Archival (seed 002): the history the reset drops is learned from like an idle one.
            self.last_activity.pop(session, None)
            await self.learner.idle(session, str(payload.get("id") or f"reset:{session}"))

    async def _idle_loop(self) -> None:
        idle = self.config.observer.idle_secs
        while True:
            self.alive("idle", every=5)
            try:
                await self.consolidator.check()
            except Exception as exc:  # noqa: BLE001 - NATS away: checked again next time
                log.warning("AGENTS.md consolidation check failed: %s", exc)
                self.consolidator.checked = 0.0
            now = time.time()
            for session, last in list(self.last_activity.items()):
                if now - last >= idle and self.idle_sent.get(session) != last:
                    event = SessionIdle(
                        id=f"idle:{session}:{int(last)}", session=session, idle_secs=now - last,
                        last_activity=last,
                    )
                    await self.send(event)
                    self.idle_sent[session] = last
                    del self.last_activity[session]
                    await self.learner.idle(session, event.id)
                    await self.reflector.idle(session, event.id)
            await asyncio.sleep(min(5.0, max(idle / 4, 0.2)))
