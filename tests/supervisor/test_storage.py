"""A full disk: JetStream's limit is set from the free space, a full store says so in plain
words, what cannot be dead-lettered is kept in logs/lost.jsonl, and freeing space is enough
for everything to resume (the supervisor raises the limit by restarting the server)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import stat
import subprocess
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bus import Bus, Consumer, PublishError, StoreFull, Subscription, lost
from contracts import TerminalInput
from supervisor.process.natsserver import EmbeddedNats
from supervisor.process.storage import MiB, Storage, StorageWatch, measure, worth_restarting


def test_the_limit_leaves_a_margin_and_moves_only_for_real_changes() -> None:
    big = Storage(used=100 * MiB, free=10_000 * MiB, total=20_000 * MiB)
    # 5 % of the disk kept free; half the rest for what grows with the store (logs)
    assert big.limit == 100 * MiB + (10_000 * MiB - 1_000 * MiB) // 2
    tiny = Storage(used=0, free=20 * MiB, total=30 * MiB)
    assert tiny.limit == 5 * MiB  # a small disk keeps half of what is left as the margin
    assert not worth_restarting(100 * MiB, 110 * MiB)
    assert worth_restarting(100 * MiB, 200 * MiB) and worth_restarting(100 * MiB, 50 * MiB)


@contextlib.contextmanager
def mounted_small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 48 MiB filesystem of its own (tmpfs), so filling it harms nothing else."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", str(mnt)],
                      capture_output=True).returncode:
        pytest.skip("mounting a tmpfs is not permitted here")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


@dataclass
class TightStore:
    """A nats-server whose JetStream store sits on a small disk that ballast nearly fills."""

    server: EmbeddedNats
    url: str
    bus: Bus
    ballast: Path

    async def fill(self) -> None:
        """Publish until the store refuses (StoreFull)."""
        with pytest.raises(StoreFull):
            for i in range(300):
                await self.bus.publish(self.bus.subjects.cmd("test", "fill"),
                                       TerminalInput(id=f"f{i}", chat="c", text="x" * 100_000))

    async def free(self) -> None:
        """Remove the ballast; the storage check raises the store's limit again."""
        self.ballast.unlink()
        assert await StorageWatch(self.server).check()


@contextlib.asynccontextmanager
async def tight_store(disk: Path, prefix: str) -> AsyncIterator[TightStore]:
    ballast = disk / "ballast"
    ballast.write_bytes(b"\0" * 30 * MiB)
    store = disk / "jetstream"
    server = EmbeddedNats(store, max_file_store=measure(store).limit)
    url = await server.start()
    supervise = asyncio.create_task(server.supervise())
    bus = Bus(url, prefix)
    try:
        await bus.connect()
        await bus.provision()
        yield TightStore(server, url, bus, ballast)
    finally:
        await bus.close()
        await server.stop()
        supervise.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await supervise


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    with mounted_small_disk(tmp_path) as mnt:
        yield mnt


def inp(i: str, size: int = 100_000) -> TerminalInput:
    return TerminalInput(id=i, chat="c", text="x" * size)


async def test_full_store_is_plain_keeps_lost_letters_and_resumes_when_space_returns(
    small_disk: Path, prefix: str, tmp_path: Path
) -> None:
    ballast = small_disk / "ballast"
    ballast.write_bytes(b"\0" * 30 * MiB)  # somebody else's files fill most of the disk
    store = small_disk / "jetstream"
    server = EmbeddedNats(store, max_file_store=measure(store).limit)
    first_limit = server.max_file_store
    url = await server.start()
    supervise = asyncio.create_task(server.supervise())
    bus = Bus(url, prefix)
    lost.set_path(tmp_path / "logs" / "lost.jsonl")
    try:
        await bus.connect()
        await bus.provision()
        subject = bus.subjects.cmd("test", "in")
        await bus.nc.publish(subject, b"not a message")  # to be dead-lettered later
        await bus.nc.flush()
        with pytest.raises(StoreFull, match="store is full"):
            for i in range(200):  # 20 MB: more than the limit leaves
                await bus.publish(subject, inp(f"m{i}"))
        # A poison message whose dead letter cannot be stored goes to the local file.
        sub = Subscription(bus.subjects.stream_cmd, "fill-test", (subject,), dedupe=False)
        handled: list[object] = []

        async def handler(msg: object) -> None:
            handled.append(msg)

        consumer = Consumer(bus, "tester", sub, TerminalInput, handler)
        task = asyncio.create_task(consumer.run())
        path = tmp_path / "logs" / "lost.jsonl"
        async with asyncio.timeout(30):
            while not path.exists():  # noqa: ASYNC110 - written by the consumer's task
                await asyncio.sleep(0.1)
        await consumer.stop(1)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        record = json.loads(path.read_text().splitlines()[0])
        assert record["kind"] == "deadletter" and "store is full" in record["why_lost"]
        assert record["record"]["payload"] == "not a message"
        assert "invalid payload" in record["record"]["reason"]
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        # Space comes back: the watch raises the limit (a server restart) and writes resume.
        ballast.unlink()
        assert await StorageWatch(server).check()
        assert server.max_file_store is not None and first_limit is not None
        assert server.max_file_store > first_limit
        async with asyncio.timeout(60):
            while True:
                try:
                    await bus.publish(subject, inp("after"))
                    break
                except PublishError:
                    await asyncio.sleep(0.5)
    finally:
        lost.set_path(None)
        await bus.close()
        await server.stop()
        supervise.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await supervise
