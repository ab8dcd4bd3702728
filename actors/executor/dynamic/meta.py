"""_meta of agent-created tools: run statistics kept by the executor, never by the model.

They live in KV (`wm_state`, key `tools.meta`), not in scripts/<name>.json: the model can write
every file in scripts/, so numbers kept there could be forged (or erased to dodge quarantine),
and rewriting a versioned file after every call would leave the git tree dirty and make every
revert conflict. KV is also what the supervisor and `wintermute tools` read from other
processes (or other pods).
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import msgspec

from contracts.records import ToolMeta

if TYPE_CHECKING:
    from bus import Bus

log = logging.getLogger(__name__)

__all__ = ["ERROR_CHARS", "META_KEY", "MetaBook", "ToolMeta", "now_iso"]

META_KEY = "tools.meta"
ERROR_CHARS = 500


def now_iso() -> str:
    """UTC now as a fixed-width ISO string (sorts lexicographically)."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class MetaBook:
    """All tools' _meta in memory, saved to KV after every change."""

    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self.entries: dict[str, ToolMeta] = {}
        self._lock = asyncio.Lock()

    async def load(self) -> None:
        """Read the saved book (an unreadable one is logged and started afresh)."""
        book = await self.bus.kv_get_as(self.bus.subjects.kv_state, META_KEY,
                                        dict[str, ToolMeta])
        if book is not None:
            self.entries = book

    def get(self, name: str) -> ToolMeta | None:
        return self.entries.get(name)

    def seen(self, name: str, digest: str) -> bool:
        """Note the files' current digest; True if this is a new tool or a new version."""
        meta = self.entries.get(name)
        if meta is None:
            stamp = now_iso()
            self.entries[name] = ToolMeta(created_at=stamp, updated_at=stamp, digest=digest)
            return True
        if meta.digest != digest:
            meta.version += 1 if meta.digest else 0
            meta.digest = digest
            meta.updated_at = now_iso()
            meta.consecutive_failures = 0
            return True
        return False

    def record(self, name: str, ok: bool, duration_ms: int, error: str, timed_out: bool) -> None:
        """Count one call."""
        meta = self.entries.get(name)
        if meta is None:
            stamp = now_iso()
            meta = self.entries[name] = ToolMeta(created_at=stamp, updated_at=stamp)
        meta.invocations += 1
        meta.total_duration_ms += max(duration_ms, 0)
        meta.last_used = now_iso()
        if ok:
            meta.successes += 1
            meta.consecutive_failures = 0
        else:
            meta.consecutive_failures += 1
            meta.timeouts += int(timed_out)
            meta.last_error = error[-ERROR_CHARS:] or "failed without output"

    async def save(self) -> None:
        """Write the book to KV (serialised, so an older snapshot never overwrites a newer)."""
        async with self._lock:
            data = msgspec.json.encode(self.entries)
            await self.bus.kv_put(self.bus.subjects.kv_state, META_KEY, data)
