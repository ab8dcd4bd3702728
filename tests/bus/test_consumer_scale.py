"""Concurrency that matches the work: many I/O-bound handlers in flight, and several processes'
consumers sharing one durable (replicas) with every message handled once."""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Awaitable, Callable

from bus import Bus
from contracts import TerminalInput
from contracts.routes import durable
from tests.actors.test_faults import until
from tests.bus.test_consumer import inp, running


def test_the_llm_consumer_is_sized_for_calls_that_wait_on_the_network() -> None:
    llm = durable("llm")
    assert llm.concurrency >= 200 and llm.max_ack_pending >= 2 * llm.concurrency


async def test_hundreds_of_waiting_handlers_are_in_flight_at_once(bus: Bus) -> None:
    n, limit = 300, 256
    release = asyncio.Event()
    running_now = 0
    full = asyncio.Event()

    async def handler(m: TerminalInput) -> None:
        nonlocal running_now
        running_now += 1
        if running_now >= limit:
            full.set()
        await release.wait()  # a model call: waiting on the network, not computing
        running_now -= 1

    subject = bus.subjects.cmd("test", "a")
    await asyncio.gather(*(bus.publish(subject, inp(f"w{i}", chat=f"c{i}")) for i in range(n)))
    async with running(bus, handler, ordered_by="", concurrency=limit,
                       max_ack_pending=1024) as c:
        await asyncio.wait_for(full.wait(), 30)
        assert running_now == limit  # all slots busy at once, and not one more (backpressure)
        release.set()
        await until(lambda: c.stats.handled >= n)


async def test_replicas_share_a_durable_and_each_message_is_handled_once(
        bus: Bus, nats_url: str, prefix: str) -> None:
    second = await Bus(nats_url, prefix).connect()  # another process's connection
    seen: collections.Counter[str] = collections.Counter()
    by: dict[str, set[str]] = {"a": set(), "b": set()}

    def handler(name: str) -> Callable[[TerminalInput], Awaitable[None]]:
        async def handle(m: TerminalInput) -> None:
            await asyncio.sleep(0.005)
            seen[m.id] += 1
            by[name].add(m.id)
        return handle

    subject = bus.subjects.cmd("test", "a")
    n = 200
    try:
        async with running(bus, handler("a"), durable="shared", ordered_by=""), \
                running(second, handler("b"), durable="shared", ordered_by=""):
            await asyncio.gather(*(bus.publish(subject, inp(f"r{i}", chat=f"c{i}"))
                                   for i in range(n)))
            await until(lambda: len(seen) >= n)
            async with asyncio.timeout(30):  # every message acked, none delivered twice
                while (info := await bus.js.consumer_info(  # noqa: ASYNC110 - server state
                        bus.subjects.stream_cmd, "shared")).num_ack_pending:
                    await asyncio.sleep(0.05)
            assert info.num_redelivered == 0
    finally:
        await second.close()
    assert len(seen) == n and set(seen.values()) == {1}
    assert by["a"] and by["b"], "both consumers took a share of the work"
