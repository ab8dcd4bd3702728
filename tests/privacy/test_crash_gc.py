"""Seed 003 §17 #6 (invariant I): what a killed executor left running is killed when the next
one starts, within 30 s.

The executor runs as a real process (`python -m actors executor`, as the supervisor starts it)
so that it can be killed with SIGKILL: an in-process actor killed by the test harness is only
cancelled, and its cancellation handler would clean up what a real kill -9 leaves behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from actors.executor._leases import start_time
from bus import Bus
from contracts.config import Settings
from tests.privacy.helpers import audited
from tests.privacy.test_audit import call

SettingsFor = Callable[..., Settings]
ROOT = Path(__file__).resolve().parents[2]


def sleeping(arg: str) -> list[int]:
    """Live processes running `sleep ARG` (zombies count as gone)."""
    pids = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            argv = Path(entry.path, "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[:2] == [b"sleep", arg.encode()] and start_time(int(entry.name)) is not None:
            pids.append(int(entry.name))
    return pids


async def until(check: Callable[[], bool], timeout: float) -> None:
    async with asyncio.timeout(timeout):
        while True:
            if check():
                return
            await asyncio.sleep(0.2)


@contextlib.asynccontextmanager
async def executor_process(settings: Settings) -> AsyncIterator[asyncio.subprocess.Process]:
    """The executor as its own OS process, the way the supervisor spawns it."""
    env = {**os.environ, "WINTERMUTE_HOME": str(settings.home),
           "WM__NATS__URL": settings.config.nats.url,
           "WM__NATS__PREFIX": settings.config.nats.prefix, "WM__EXECUTOR__MODE": "direct"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "actors", "executor", cwd=ROOT, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield proc
    finally:
        if proc.returncode is None:  # a graceful stop ends the commands it runs itself
            proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), 30)
            except TimeoutError:
                proc.kill()
        await proc.wait()


async def test_17_06_a_killed_executors_commands_are_killed_after_its_restart(
    settings_for: SettingsFor, bus: Bus,
) -> None:
    """Seed #6 (kill the kernel; after the restart, its browser/script containers are found
    and killed within 30 s): our kernel for tools is the executor. A command it started (a
    shell with a background job) is still running when the executor is killed with SIGKILL;
    the command's whole process tree outlives it. The next executor finds it from the lease
    its predecessor wrote (data/executor/running) and kills it within 30 s of starting.
    Containers are not covered here: see docs/security.md."""
    settings = settings_for()
    tag = f"617.{os.getpid() % 1000}"
    req = call("execute_command", {"command": f"sleep {tag} & sleep {tag}"}, owner=True)
    async with executor_process(settings) as first:
        await bus.send(req)
        await until(lambda: len(sleeping(tag)) == 2, 60)
        leases = list((settings.home / "data" / "executor" / "running").iterdir())
        assert len(leases) == 1  # the command's launcher
        first.send_signal(signal.SIGKILL)
        await first.wait()
    await asyncio.sleep(0.5)  # nothing reaps the tree: it keeps running without its executor
    left = set(sleeping(tag))
    assert len(left) == 2 and leases[0].exists()
    try:
        # The new executor may run the unfinished call again (it was never acknowledged):
        # what must end is the dead executor's own tree, and its lease with it.
        async with executor_process(settings):
            await until(lambda: not left & set(sleeping(tag)), 30)
            assert not leases[0].exists()
            [event] = await audited(bus, lambda e: e.decision == "command.leftover_killed")
            assert event.actor == "executor" and event.outcome == "killed"
            assert event.refs["pid"] == leases[0].name
    finally:
        for pid in sleeping(tag):
            os.kill(pid, signal.SIGKILL)
