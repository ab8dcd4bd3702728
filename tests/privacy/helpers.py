"""Helpers of tests/privacy: wait for audit events on the real audit stream."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from bus import Bus
from contracts import AuditEvent
from supervisor.cli.audit import read_audit


async def audited(bus: Bus, match: Callable[[AuditEvent], bool], n: int = 1,
                  timeout: float = 30.0) -> list[AuditEvent]:
    """Wait until the audit stream holds at least `n` events matching `match`."""
    async with asyncio.timeout(timeout):
        while True:
            found = [e for e in await read_audit(bus) if match(e)]
            if len(found) >= n:
                return found
            await asyncio.sleep(0.2)
