"""The embedded JetStream's storage limit, set deliberately from the free disk and kept current.

Left to itself nats-server fixes its limit at start (75 % of the disk that was free then), so
space freed later changes nothing and the disk itself can fill first. Here the limit is the
store's current size plus half of the free space beyond a margin kept for the OS: the other
half is for what grows with the store (the observer's logs/events.jsonl copies every message,
actor logs, LanceDB), so JetStream reaches its limit before the disk is full;
the supervisor re-checks it every `CHECK_EVERY` seconds (`supervisor.storage_check_secs`) and
restarts the server with a new
limit when the free space changed enough (a restart is what it takes: the limit is read once).
Writes over the limit are refused by JetStream with "insufficient resources", which the actors
turn into plain sentences; they resume by themselves once the new limit leaves room.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

MiB = 1 << 20
MARGIN_MIN = 16 * MiB  # never let JetStream take the last bytes of the disk
MARGIN_FRACTION = 0.05  # of the filesystem's size
FLOOR = 4 * MiB  # the smallest limit worth starting with
CHECK_EVERY = 10.0
MIN_RESTART_GAP = 120.0  # restarts for a new limit at most this often


def store_bytes(store: Path) -> int:
    """Bytes the JetStream store holds on disk now."""
    total = 0
    for root, _, files in os.walk(store):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                continue  # a file removed while walking
    return total


@dataclass(frozen=True)
class Storage:
    """The store's size, the disk's free space and the limit they call for."""

    used: int
    free: int
    total: int

    @property
    def margin(self) -> int:
        want = max(MARGIN_MIN, int(self.total * MARGIN_FRACTION))
        return min(want, (self.used + self.free) // 2)  # tiny disks: keep half, not more

    @property
    def limit(self) -> int:
        return max(self.used + (self.free - self.margin) // 2, FLOOR)


def measure(store: Path) -> Storage:
    store.mkdir(parents=True, exist_ok=True)
    usage = shutil.disk_usage(store)
    return Storage(used=store_bytes(store), free=usage.free, total=usage.total)


def worth_restarting(current: int, wanted: int) -> bool:
    """Whether the limit moved enough to restart the server for it (not for a few bytes)."""
    if wanted > current:  # space came back: worth it once it is a real gain
        return wanted - current > max(current // 4, 8 * MiB)
    return current - wanted > max(current // 10, 4 * MiB)  # space went: lower before it fills


def report(store: Path, now: Storage, limit: int | None) -> dict[str, Any]:
    """Storage facts for `status`: used, limit, free disk, and a sentence when it is full."""
    info: dict[str, Any] = {"used": now.used, "limit": limit, "free_disk": now.free,
                            "full": False}
    if limit and now.used >= limit * 0.95:
        info["full"] = True
        info["note"] = (
            f"the message store is full ({now.used // MiB} of {limit // MiB} MiB). New messages "
            "are refused until space is freed on the disk of "
            f"{store}; the limit is raised by itself within a minute once it is.")
    elif now.free < MARGIN_MIN:
        info["full"] = True
        info["note"] = (f"the disk holding {store} has only {now.free // MiB} MiB free; free "
                        "some space, or messages will soon be refused.")
    return info


def live_report(home: Path) -> dict[str, Any] | None:
    """Storage facts measured now, for `status` on the same machine as the embedded server
    (true even when the supervisor cannot write its record to a full store); None otherwise."""
    config = home / "data" / "nats" / "server.run.json"
    try:
        limit = int(json.loads(config.read_text())["jetstream"]["max_file_store"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    store = home / "data" / "jetstream"
    return report(store, measure(store), limit)


class StorageWatch:
    """Re-evaluates the embedded server's limit and restarts it when the disk changed."""

    def __init__(self, server: Any, on_full: Callable[[bool], None] | None = None, *,
                 every: float = CHECK_EVERY, restart_gap: float = MIN_RESTART_GAP) -> None:
        self.server = server  # EmbeddedNats: store, max_file_store, restart_for(reason)
        self.on_full = on_full  # told whether the store is full after every check
        self.every = every
        self.restart_gap = restart_gap
        self._last_restart = 0.0
        self.info: dict[str, Any] = {"limit": server.max_file_store}  # for `status`

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.every)
            try:
                await self.check()
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - a failed look must not stop the watching
                log.exception("storage check failed")

    async def check(self) -> bool:
        """Restart the server with a new limit when worth it; True when it did."""
        now = await asyncio.to_thread(measure, self.server.store)
        current = self.server.max_file_store
        self.info = report(self.server.store, now, current)
        if self.on_full is not None:
            self.on_full(bool(self.info["full"]))
        if current is None or not worth_restarting(current, now.limit):
            return False
        if time.monotonic() - self._last_restart < self.restart_gap:
            return False
        self._last_restart = time.monotonic()
        log.warning("JetStream storage limit %d MiB -> %d MiB (free disk %d MiB); restarting "
                    "nats-server to apply it", current // MiB, now.limit // MiB,
                    now.free // MiB)
        self.server.max_file_store = now.limit
        self.info = report(self.server.store, now, now.limit)
        await self.server.restart_for(
            f"restarted because its storage limit changed to {now.limit // MiB} MiB (free disk "
            "space changed)")
        return True
