"""The session states this planner process last read or saved, with their KV revisions.

Without it every event costs a KV read before the apply and a write after it. With it, an
event of a session this process already holds costs the write only, and the write is a
compare-and-set on the revision the cache holds: if anything else wrote the key meanwhile
(`replay --fork-at`, an operator's tool, a second planner by mistake) the save fails, the
entry is dropped, and the event is handed back (`Retry`) to be applied again on a fresh read:
the same path as a crash before the save, which re-publishes identical ids. The cache holds
encoded bytes, never the live object, so an apply that fails half-way leaves it untouched.
"""

from __future__ import annotations

from collections import OrderedDict

from bus import Bus

#: Sessions kept; beyond it the least recently used is read from KV again when it comes back.
SIZE = 2048


class StateCache:
    """Encoded session states by KV key, each with the revision it has in the bucket."""

    def __init__(self, bus: Bus, bucket: str, size: int = SIZE) -> None:
        self.bus = bus
        self.bucket = bucket
        self.size = size
        self.hits = 0
        self.misses = 0
        self._entries: OrderedDict[str, tuple[int, bytes | None]] = OrderedDict()

    async def get(self, key: str) -> bytes | None:
        """The state's bytes (None for a new session), from memory when this process has them."""
        hit = self._entries.get(key)
        if hit is not None:
            self.hits += 1
            self._entries.move_to_end(key)
            return hit[1]
        self.misses += 1
        data, revision = await self.bus.kv_get_raw_rev(self.bucket, key)
        self._keep(key, revision, data)
        return data

    async def put(self, key: str, data: bytes) -> bool:
        """Save if the key is still at the revision read; False (entry dropped) otherwise."""
        held = self._entries.get(key)
        revision = held[0] if held is not None else None
        if revision is None:  # evicted since the read: no revision to compare, plain write
            new: int | None = await self.bus.kv_put(self.bucket, key, data)
        else:
            new = await self.bus.kv_put_at(self.bucket, key, data, revision)
        if new is None:
            self._entries.pop(key, None)
            return False
        self._keep(key, new, data)
        return True

    def forget(self, key: str) -> None:
        """Read this key from KV next time."""
        self._entries.pop(key, None)

    def _keep(self, key: str, revision: int, data: bytes | None) -> None:
        self._entries[key] = (revision, data)
        self._entries.move_to_end(key)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)
