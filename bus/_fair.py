"""Fair scheduling inside one consumer: handler slots served owner-first, and ordering keys."""

from __future__ import annotations

import asyncio
import heapq
from typing import Any


class Slots:
    """A semaphore whose waiters marked `first` are served before the others (FIFO within)."""

    def __init__(self, n: int) -> None:
        self.free = n
        self._waiting: list[tuple[int, int, asyncio.Future[None]]] = []
        self._seq = 0

    async def acquire(self, first: bool) -> None:
        if self.free > 0 and not self._waiting:
            self.free -= 1
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._seq += 1
        heapq.heappush(self._waiting, (0 if first else 1, self._seq, fut))
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release()  # handed a slot while being cancelled: pass it on
            raise

    def release(self) -> None:
        while self._waiting:
            _, _, fut = heapq.heappop(self._waiting)
            if not fut.done():
                fut.set_result(None)
                return
        self.free += 1


def key_of(msg: Any, path: str) -> str:
    """The ordering key: a (dotted) attribute of the message, "" when absent or not set."""
    value = msg
    for name in path.split(".") if path else ():
        value = getattr(value, name, None)
        if value is None:
            return ""
    return str(value) if path and value else ""
