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

if TYPE_CHECKING:
    from bus import Bus

log = logging.getLogger(__name__)

META_KEY = "tools.meta"
ERROR_CHARS = 500


def now_iso() -> str:
    """UTC now as a fixed-width ISO string (sorts lexicographically)."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class ToolMeta(msgspec.Struct, kw_only=True):
    """One tool's history: versions of its files and the outcome of its calls."""

    created_at: str
    updated_at: str
    version: int = 1
    digest: str = ""  # sha256 of the .py and .json; a change is a new version
    invocations: int = 0
    successes: int = 0
    timeouts: int = 0
    consecutive_failures: int = 0
    total_duration_ms: int = 0
    last_used: str | None = None
    last_error: str | None = None

    @property
    def success_rate(self) -> float | None:
        return round(self.successes / self.invocations, 3) if self.invocations else None

    @property
    def avg_duration_ms(self) -> int | None:
        return self.total_duration_ms // self.invocations if self.invocations else None

    def recency(self) -> str:
        """What "recently used" ranks by: the last call, or the last change if newer."""
        return max(self.last_used or "", self.updated_at)

    def public(self) -> dict[str, object]:
        """The _meta view shown to people and the supervisor (derived figures included)."""
        return {
            "version": self.version, "created_at": self.created_at,
            "updated_at": self.updated_at, "invocations": self.invocations,
            "success_rate": self.success_rate, "avg_duration_ms": self.avg_duration_ms,
            "timeouts": self.timeouts, "consecutive_failures": self.consecutive_failures,
            "last_used": self.last_used, "last_error": self.last_error,
        }


_book_dec = msgspec.json.Decoder(dict[str, ToolMeta])


class MetaBook:
    """All tools' _meta in memory, saved to KV after every change."""

    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self.entries: dict[str, ToolMeta] = {}
        self._lock = asyncio.Lock()

    async def load(self) -> None:
        """Read the saved book (an unreadable one is logged and started afresh)."""
        raw = await self.bus.kv_get(self.bus.subjects.kv_state, META_KEY)
        if not raw:
            return
        try:
            self.entries = _book_dec.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError):
            log.warning("tools.meta in KV is unreadable; starting tool statistics afresh")

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
