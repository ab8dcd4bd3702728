"""The trust ledger: domains the owner approved for web_request, kept in KV (wm_state)."""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING

from contracts.records import TrustEntry

if TYPE_CHECKING:
    from bus import Bus

PREFIX = "trust."

__all__ = ["PREFIX", "TrustEntry", "TrustLedger"]


def _key(domain: str) -> str:
    return PREFIX + re.sub(r"[^a-z0-9.-]", "_", domain.lower())


class TrustLedger:
    """Approved domains under `trust.<domain>` keys of the wm_state bucket."""

    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self.bucket = bus.subjects.kv_state

    async def get(self, domain: str) -> TrustEntry | None:
        entry = await self.bus.kv_get_as(self.bucket, _key(domain), TrustEntry)
        return entry if entry is not None and entry.domain == domain.lower() else None

    async def add(self, domain: str, call: str = "") -> None:
        entry = TrustEntry(domain=domain.lower(), approved_at=time.time(), call=call)
        await self.bus.kv_put(self.bucket, _key(domain), entry)

    async def domains(self) -> list[str]:
        """Every approved domain, sorted."""
        out = []
        for key in await self.bus.kv_keys(self.bucket, PREFIX):
            entry = await self.bus.kv_get_as(self.bucket, key, TrustEntry)
            if entry is not None:
                out.append(entry.domain)
        return sorted(out)
