"""A long-running CLI command (`tap`, `chat`) notices when `wintermute up` goes away.

nats.py reconnects forever and every failed attempt is an error; for someone watching a
terminal that is noise twice a second. Instead: one line saying what happened, then either
exit (the instance for this home stopped) or wait quietly (NATS is away but `up` still runs,
e.g. while the supervisor restarts the embedded server, or an external server).
"""

from __future__ import annotations

import asyncio
import logging
import sys

from bus import Bus
from contracts.config import Settings
from supervisor.process.up import running_instance

#: How often the connection is looked at.
CHECK_SECS = 1.0


def instance_stopped(settings: Settings) -> bool:
    """Whether the `up` that served this home is gone (never true for an external server)."""
    return not settings.config.nats.url and running_instance(settings.home) is None


def quiet_reconnects() -> None:
    """Reconnect attempts are the watcher's business now; their errors would only repeat it."""
    logging.getLogger("bus.connection").setLevel(logging.CRITICAL)


async def until_stopped(settings: Settings, bus: Bus, what: str) -> str:
    """Wait until the instance stops; return the line that says so. Says once when NATS is away."""
    quiet_reconnects()
    said_away = False
    while True:
        await asyncio.sleep(CHECK_SECS)
        if bus.connected:
            if said_away:
                print(f"{what}: connected to NATS at {bus.url} again.", file=sys.stderr,
                      flush=True)
            said_away = False
            continue
        if instance_stopped(settings):
            return (f"{what}: wintermute stopped for {settings.home} (its NATS server at "
                    f"{bus.url} is gone); exiting. Start it again with `wintermute up`.")
        if not said_away:
            print(f"{what}: lost NATS at {bus.url}, but wintermute is still running; waiting "
                  "quietly for it to come back (Ctrl-C stops).", file=sys.stderr, flush=True)
            said_away = True
