"""nats-server killed twice in a row on a busy CPU: the supervisor notices both crashes, every
actor reconnects, and a turn sent afterwards is answered once. Bounded: two busy-loop
processes for the length of the test.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from benchmarks.chaos_kit import Driver, Instance, running_up, tally

pytestmark = pytest.mark.slow

HOGS = 2  # the machine's cores, kept busy


@pytest.fixture
def cpu_hogs() -> Iterator[list[subprocess.Popen[bytes]]]:
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(HOGS)]
    try:
        yield hogs
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


@pytest.fixture
async def wm(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Instance]:
    async with running_up(tmp_path_factory.mktemp("nats-restarts") / "home") as (inst, model):
        yield inst


async def next_nats_pid(inst: Instance, old: int, timeout: float) -> int:
    """The pid of the nats-server that replaced `old` (from data/runtime.json)."""
    async with asyncio.timeout(timeout):
        while True:
            pid = inst.runtime().get("nats_pid")
            if pid and pid != old:
                return int(pid)
            await asyncio.sleep(0.1)


async def test_nats_killed_twice_under_cpu_load_everything_reconnects(
    wm: Instance, cpu_hogs: Any,
) -> None:
    assert wm.bus is not None
    driver = Driver(wm.bus)
    first = int(wm.runtime()["nats_pid"])
    os.kill(first, signal.SIGKILL)
    second = await next_nats_pid(wm, first, 90)
    # The second crash comes while the first restart is still being announced over NATS.
    os.kill(second, signal.SIGKILL)
    t0 = time.monotonic()
    third = await next_nats_pid(wm, second, 90)
    print(f"\nsecond crash replaced after {time.monotonic() - t0:.1f}s under load")
    os.kill(third, 0)  # alive
    input_id = await driver.send("still there after two crashes?")
    assert await driver.wait([input_id], 240) == [], "no answer after two nats-server crashes"
    result = await tally(wm.bus, [input_id])
    assert result.lost() == [] and result.duplicated() == []
    st = await wm.wait_healthy(180)
    assert st["nats"]["restarts"] >= 2
    assert sum(a["restarts"] for a in st["actors"]) == 0, "an actor was restarted as hung"
