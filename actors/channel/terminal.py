"""The terminal adapter: `wintermute chat` talks to it through the bus, as the owner."""

from __future__ import annotations

import logging
import time
from typing import Any

from actors.channel.adapter import Adapter
from actors.channel.commands import CommandContext, handle_command
from bus import Retry, StoreFull
from contracts import (
    ApprovalPrompt,
    Delivered,
    Notice,
    Reply,
    Sink,
    TerminalInput,
    TurnRequest,
    taint,
)
from kit.redact import credential_guard

log = logging.getLogger(__name__)


class TerminalAdapter(Adapter):
    channel = "terminal"

    @classmethod
    def enabled(cls, config: Any, home: Any) -> bool:
        return bool(config.channels.terminal.enabled)

    def principal(self, chat: str) -> str:
        return f"terminal:{chat}"

    async def receive(self, update: TerminalInput) -> None:
        principal = self.principal(update.chat)
        is_owner = principal in self.config.owner.principals
        text = update.text.strip()
        ctx = CommandContext(principal, is_owner, principal, update.id,
                             reply_to=Sink(channel="terminal", chat=update.chat))
        answer = await handle_command(self.actor, ctx, text)
        if answer is not None:
            await self._deliver(update, "notice", answer)
            return
        guard = credential_guard(text)
        if guard.action == "block":
            await self._deliver(update, "notice", guard.text)
            return
        limited = self.actor.rate.check(principal, is_owner)
        if limited is not None:
            if limited:
                await self._deliver(update, "notice", limited)
            return
        turn = TurnRequest(
            id=f"terminal:{update.id}", session=principal, principal=principal,
            text=guard.text, reply_to=Sink(channel="terminal", chat=update.chat),
            is_owner=is_owner, principal_kind="owner" if is_owner else "third_party",
            taint=taint.CLEAN if is_owner else taint.RAW,
        )
        try:
            await self.bus.send(turn)
        except StoreFull:
            await self.actor.store_full(Sink(channel="terminal", chat=update.chat))
            raise Retry("the message store is full", delay=15) from None

    async def direct(self, sink: Sink, text: str) -> None:
        # `wintermute chat` listens on the subject itself: a core publish reaches it unstored.
        out = Delivered(id=f"direct:{time.time_ns()}", chat=sink.chat, kind="notice", text=text,
                        ref="")
        await self.bus.send_unstored(out)

    async def _deliver(self, update: TerminalInput, kind: str, text: str) -> None:
        out = Delivered(id=f"{update.id}:{kind}", chat=update.chat, kind=kind, text=text,
                        ref=update.id)
        await self.bus.send(out)

    async def send(self, msg: Reply | ApprovalPrompt | Notice) -> None:
        chat = msg.sink.chat
        match msg:
            case Reply():
                out = Delivered(id=f"{msg.id}:delivered", chat=chat, kind="reply", text=msg.text,
                                ref=msg.turn_id)
            case ApprovalPrompt():
                out = Delivered(id=f"{msg.id}:delivered", chat=chat, kind="approval",
                                text=msg.summary, ref=msg.approval_id)
            case Notice():
                out = Delivered(id=f"{msg.id}:delivered", chat=chat, kind="notice", text=msg.text,
                                ref=msg.id)
        await self.bus.send(out)

    async def suppressed(self, msg: Reply) -> None:
        out = Delivered(id=f"{msg.id}:delivered", chat=msg.sink.chat, kind="suppressed",
                        text="", ref=msg.turn_id)
        await self.bus.send(out)
