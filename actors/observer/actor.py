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

_decode = msgspec.json.Decoder(dict[str, Any])


class _Head(msgspec.Struct):
    """The fields every log line repeats; the rest of a payload is decoded only for the few
    types the observer learns from (most of what it logs is copied as it came)."""

    type: Any = None
    id: Any = None
    session: Any = None
    ts: Any = msgspec.UNSET


_head = msgspec.json.Decoder(_Head)
_encode = msgspec.json.Encoder()
# The types learning, reflection and idle tracking read (_learn.py, _reflect.py, below).
_READ = frozenset({"turn.request", "turn.reply", "tool.result", "llm.response", "session.reset"})
_FLUSH_AT = 1 << 20  # bytes of log lines kept before a write, whatever the batch


class ObserverActor(Actor):
    name = "observer"
    inbox = msgspec.Raw
    batched = True  # a batch's lines in one write, then its acks (bus/batch.py)

    async def on_start(self) -> None:
        # Every conversation and tool output: 0600 in a 0700 folder.
        self.log_path = private_dir(self.home / "logs") / "events.jsonl"
        self._lines: list[bytes] = []
        self._buffered = 0
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
        payload: dict[str, Any] | None = None
        try:
            head = _head.decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError):
            payload = {"type": "unparsed", "raw": data[:2000].decode("utf-8", "replace")}
            head = _Head(type="unparsed")
        kind, session = head.type, head.session
        read = payload is None and isinstance(kind, str) and kind in _READ
        self._log(head, data, payload)
        if not read:
            return
        payload = _decode.decode(data)
        if isinstance(session, str) and kind in ("turn.request", "turn.reply"):
            self.last_activity[session] = time.time()
        self.learner.seen(payload)
        self.reflector.seen(payload)
        if kind == "llm.response":
            await self.learner.answered(payload)
            await self.reflector.answered(payload)
            await self.consolidator.answered(payload)
        elif kind == "session.reset" and isinstance(session, str):
            # Archival (seed 002): the history the reset drops is learned from like an idle one.
            self.last_activity.pop(session, None)
            await self.learner.idle(session, str(head.id or f"reset:{session}"))

    def _log(self, head: _Head, data: bytes, payload: dict[str, Any] | None) -> None:
        """Queue one line: ts, type, id, session and the payload as it came (re-encoded only
        when it is not plain one-line ASCII JSON, so that every line stays one line)."""
        ts = time.time() if head.ts is msgspec.UNSET else head.ts
        if payload is None and data.isascii() and b"\n" not in data and b"\r" not in data:
            body = data.strip()
        else:
            body = json.dumps(payload if payload is not None else _decode.decode(data),
                              default=str).encode()
        try:
            start = _encode.encode({"ts": ts, "type": head.type, "id": head.id,
                                    "session": head.session})
        except Exception:  # noqa: BLE001 - e.g. an integer too big for msgspec: json writes it
            start = json.dumps({"ts": ts, "type": head.type, "id": head.id,
                                "session": head.session}, default=str).encode()
        line = b"".join((start[:-1], b',"payload":', body, b"}\n"))
        self._lines.append(line)
        self._buffered += len(line)
        if self._buffered >= _FLUSH_AT:
            self._write()

    async def end_batch(self) -> None:
        """The batch's lines to the log in one write, before the batch is acked."""
        self._write()

    def _write(self) -> None:
        if not self._lines:
            return
        with open_private(self.log_path, "ab") as fh:
            fh.write(b"".join(self._lines))
        self._lines.clear()
        self._buffered = 0

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
