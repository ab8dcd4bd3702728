"""The channel actor: platform adapters in, outbound messages out, each sent exactly once."""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import time
from typing import Any

from actors.base import Actor
from actors.channel.adapter import Adapter, is_no_reply
from bus import Reject
from contracts import (
    ApprovalPrompt,
    ApprovalResolved,
    LlmPreview,
    Notice,
    Reply,
    Sink,
    TerminalInput,
    short_hash,
)

log = logging.getLogger(__name__)

ChannelInbox = Reply | ApprovalPrompt | Notice | TerminalInput

#: Platform adapters, imported only when enabled (each SDK is heavy).
ADAPTERS = {"terminal": "actors.channel.terminal:TerminalAdapter"}
ADAPTERS["slack"] = "actors.channel.slack:SlackAdapter"
ADAPTERS["telegram"] = "actors.channel.telegram:TelegramAdapter"
ADAPTERS["webhook"] = "actors.channel.webhook:WebhookAdapter"
NO_REPLY = "[NO_REPLY]"
STORE_FULL_EVERY = 600.0  # seconds between "the store is full" notices to one chat
STORE_FULL_USER = (
    "I can't take new messages right now: my storage is full. I'll pick yours up as soon as "
    "there is room again; if no answer comes, please send it again later."
)
STORE_FULL_OWNER = (
    "The disk is full: my message store refuses new messages, so users' messages wait and "
    "replies are delayed. Free some space on the disk holding {home}/data; I resume by myself "
    "(`wintermute status` shows the store)."
)


class ChannelActor(Actor):
    name = "channel"
    inbox = ChannelInbox | LlmPreview | ApprovalResolved

    async def on_start(self) -> None:
        from actors.channel._ratelimit import UserRateLimit

        self._told_full: dict[str, float] = {}  # chat -> when it was told the store is full
        self.rate = UserRateLimit(self.config.channels.user_rate_per_min)
        # The `up` run we belong to: notices about an earlier run's processes are stale.
        self.run = os.environ.get("WINTERMUTE_RUN", "")
        self.adapters: dict[str, Adapter] = {}
        for name, target in ADAPTERS.items():
            module, cls_name = target.split(":")
            cls = getattr(importlib.import_module(module), cls_name)
            if cls.enabled(self.config, self.home):
                self.adapters[name] = cls(self)
        for adapter in self.adapters.values():
            await adapter.start()

    async def store_full(self, sink: Sink | None) -> None:
        """The store refused a message: tell its sender and the owner directly, once a while."""
        now = time.monotonic()
        owner = Sink.parse(self.config.owner.sink)
        told = self._told_full
        for target, text in ((sink, STORE_FULL_USER), (owner, STORE_FULL_OWNER)):
            if target is None or now - told.get(str(target), -1e9) < STORE_FULL_EVERY:
                continue
            told[str(target)] = now
            adapter = self.adapters.get(target.channel)
            if adapter is None:
                continue
            try:
                await adapter.direct(target, text.format(home=self.home))
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - best effort: status shows it too
                log.warning("could not tell %s that the store is full: %s", target, exc)

    async def on_stop(self) -> None:
        for adapter in self.adapters.values():
            await adapter.stop()

    def health_info(self) -> dict[str, Any]:
        adapters = getattr(self, "adapters", {})
        info: dict[str, Any] = {"adapters": sorted(adapters)}
        # adapters may add facts (e.g. Slack: mode, or why it is off)
        info.update({n: a.info() for n, a in adapters.items() if hasattr(a, "info")})
        return info

    async def handle(self, msg: ChannelInbox | LlmPreview | ApprovalResolved) -> None:
        match msg:
            case ApprovalResolved():
                telegram = self.adapters.get("telegram")
                if telegram is not None:  # Telegram off: no pairing request can be waiting
                    await telegram.inbound.on_resolved(msg)  # type: ignore[attr-defined]
            case LlmPreview():
                adapter = self.adapters.get(msg.sink.channel)
                if adapter is not None:  # a preview for a channel that is off is just dropped
                    await adapter.preview(msg)
            case TerminalInput():
                adapter = self.adapters.get("terminal")
                if adapter is None:
                    raise Reject("the terminal channel is disabled (channels.terminal.enabled)")
                await adapter.receive(msg)
            case Reply() | ApprovalPrompt() | Notice():
                await self._send(msg)

    async def _send(self, msg: Reply | ApprovalPrompt | Notice) -> None:
        if isinstance(msg, Notice) and msg.run and self.run and msg.run != self.run:
            log.info("notice %s is about an earlier run (%s); not sent", msg.id, msg.run)
            return
        adapter = self.adapters.get(msg.sink.channel)
        if adapter is None:
            raise Reject(
                f"no '{msg.sink.channel}' adapter is running (running: "
                f"{', '.join(sorted(self.adapters)) or 'none'}); Telegram and Slack run only "
                "when their tokens are set (see `wintermute status --json`, channel info)"
            )
        key = f"sent.{short_hash(msg.id, 32)}"
        if await self.bus.kv_get(self.subjects.kv_done, key) is not None:
            log.info("outbound %s already sent", msg.id)
            return
        if isinstance(msg, Reply) and is_no_reply(msg.text):
            log.info("no_reply: reply %s of session %s suppressed", msg.id, msg.session)
            await adapter.suppressed(msg)
        else:
            await adapter.send(msg)
        await self.bus.kv_put(self.subjects.kv_done, key, b"1")
