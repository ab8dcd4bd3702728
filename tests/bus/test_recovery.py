"""A real nats-server killed with SIGKILL under load and restarted by EmbeddedNats.supervise:
the client reconnects, the durable consumer is fetched again, nothing is lost or stored twice."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path

from bus import Bus, Consumer, Subscription
from contracts import SessionReset, TerminalInput
from supervisor.process.natsserver import EmbeddedNats

Inbox = TerminalInput | SessionReset
TOTAL = 120


async def test_server_killed_under_load_loses_and_doubles_nothing(tmp_path: Path) -> None:
    server = EmbeddedNats(tmp_path / "js", log_path=tmp_path / "nats.log")
    url = await server.start()
    restarted: list[tuple[str, float]] = []

    async def on_restart(reason: str, down: float) -> None:
        restarted.append((reason, down))

    keeper = asyncio.create_task(server.supervise(on_restart))
    bus = await Bus(url, "rec").connect()
    await bus.provision()
    handled: dict[str, int] = {}
    a_third, all_handled = asyncio.Event(), asyncio.Event()

    async def handler(m: TerminalInput) -> None:
        handled[m.id] = handled.get(m.id, 0) + 1
        if len(handled) >= TOTAL // 3:
            a_third.set()
        if len(handled) == TOTAL:
            all_handled.set()

    s = bus.subjects
    sub = Subscription(s.stream_cmd, "rec", (f"{s.p}.cmd.rec.>",), ordered_by="chat")
    consumer = Consumer(bus, "tester", sub, Inbox, handler)
    run = asyncio.create_task(consumer.run())

    async def produce() -> None:
        for i in range(TOTAL):
            msg = TerminalInput(id=f"m{i}", chat=f"c{i % 7}", text=str(i))
            await bus.publish(s.cmd("rec", "in"), msg)
            if i % 10 == 9:
                # A producer that lost its ack publishes again; the id makes it a no-op.
                await bus.publish(s.cmd("rec", "in"), msg)
            await asyncio.sleep(0.01)

    producer = asyncio.create_task(produce())
    try:
        await asyncio.wait_for(a_third.wait(), 30)
        old_pid = server.pid
        assert old_pid is not None
        os.kill(old_pid, signal.SIGKILL)
        async with asyncio.timeout(60):
            await producer
            await all_handled.wait()
        assert restarted and restarted[0][0] == "killed by SIGKILL"
        assert server.pid not in (None, old_pid) and server.url == url
        assert set(handled) == {f"m{i}" for i in range(TOTAL)}
        info = await bus.js.stream_info(s.stream_cmd)
        assert info.state.messages == TOTAL  # re-publishes across the restart were dropped
        # Redeliveries after the restart were recognised by their done markers.
        assert sum(handled.values()) - TOTAL <= consumer.sub.concurrency
    finally:
        producer.cancel()
        await consumer.stop(1)
        run.cancel()
        await asyncio.gather(run, producer, return_exceptions=True)
        await bus.close()
        await server.stop()
        keeper.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await keeper
