"""The typing indicator: "typing…" in a chat while one of its turns is in flight."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from actors.channel.telegram import TelegramAdapter

log = logging.getLogger(__name__)

TYPING_EVERY = 4.0  # Telegram shows "typing" for 5 s per action
TYPING_MAX = 300.0  # a turn whose reply never comes stops showing it


class Typing:
    """The typing indicator for each turn in flight, until its reply is sent."""

    def __init__(self, adapter: TelegramAdapter) -> None:
        self.a = adapter
        self.tasks: dict[str, asyncio.Task[None]] = {}

    def start(self, turn_id: str, sink: Any) -> None:
        if turn_id not in self.tasks:
            self.tasks[turn_id] = asyncio.create_task(self._run(turn_id, sink))

    def stop(self, turn_id: str) -> None:
        task = self.tasks.pop(turn_id, None)
        if task is not None:
            task.cancel()

    def stop_all(self) -> None:
        for turn_id in list(self.tasks):
            self.stop(turn_id)

    async def _run(self, turn_id: str, sink: Any) -> None:
        from telegram.error import TelegramError

        thread = int(sink.thread) if sink.thread.isdigit() else None
        deadline = time.monotonic() + TYPING_MAX
        try:
            while time.monotonic() < deadline:
                try:
                    await self.a.bot.send_chat_action(int(sink.chat), "typing",
                                                      message_thread_id=thread)
                except TelegramError as exc:  # cosmetic: never retried
                    log.debug("typing indicator failed: %s", exc)
                await asyncio.sleep(TYPING_EVERY)
        finally:
            if self.tasks.get(turn_id) is asyncio.current_task():
                del self.tasks[turn_id]
