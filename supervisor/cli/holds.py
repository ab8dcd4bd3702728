"""`wintermute tools release NAME` and `wintermute tasks enable NAME`: lift Flatline's holds."""

from __future__ import annotations

from contracts.config import Settings
from state.holds import enable_task, release_tool
from supervisor.cli.client import connect


async def release(settings: Settings, name: str) -> str:
    """Lift a tool's quarantine; the sentence to print."""
    bus = await connect(settings, "release")
    try:
        return await release_tool(bus, name, "the owner (wintermute tools release)")
    finally:
        await bus.close()


async def enable(settings: Settings, name: str) -> str:
    """Re-enable a scheduled task Flatline disabled; the sentence to print."""
    bus = await connect(settings, "enable")
    try:
        return await enable_task(bus, name, "the owner (wintermute tasks enable)")
    finally:
        await bus.close()
