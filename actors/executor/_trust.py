"""The trust ledger: domains the owner approved for web_request, kept in KV (wm_state)."""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING

import msgspec

if TYPE_CHECKING:
    from bus import Bus

PREFIX = "trust."


class TrustEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One approved domain: when, and which tool call the owner approved."""

    domain: str
    approved_at: float
    call: str = ""


def _key(domain: str) -> str:
    return PREFIX + re.sub(r"[^a-z0-9.-]", "_", domain.lower())


class TrustLedger:
    """Approved domains under `trust.<domain>` keys of the wm_state bucket."""

    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self.bucket = bus.subjects.kv_state

    async def get(self, domain: str) -> TrustEntry | None:
        raw = await self.bus.kv_get(self.bucket, _key(domain))
        if not raw:
            return None
        entry = msgspec.json.decode(raw, type=TrustEntry)
        return entry if entry.domain == domain.lower() else None

    async def add(self, domain: str, call: str = "") -> None:
        entry = TrustEntry(domain=domain.lower(), approved_at=time.time(), call=call)
        await self.bus.kv_put(self.bucket, _key(domain), msgspec.json.encode(entry))

    async def domains(self) -> list[str]:
        """Every approved domain, sorted."""
        out = []
        for key in await self.bus.kv_keys(self.bucket, PREFIX):
            raw = await self.bus.kv_get(self.bucket, key)
            if raw:
                out.append(msgspec.json.decode(raw, type=TrustEntry).domain)
        return sorted(out)
