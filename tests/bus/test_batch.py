"""Batched handling (bus/batch.py, the observer's): in order, the batch's effect made durable
by `after` before any of it is acked, and a batch whose `after` fails comes again."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from bus import Bus
from bus.batch import BatchConsumer
from bus.consumer import Subscription
from contracts import TerminalInput
from tests.bus.test_consumer import consuming


@contextlib.asynccontextmanager
async def running(bus: Bus, handler: Callable[[Any], Awaitable[None]],
                  after: Callable[[], Awaitable[None]]) -> AsyncIterator[BatchConsumer]:
    s = bus.subjects
    sub = Subscription(s.stream_cmd, "batch", (f"{s.p}.cmd.test.>",), ordered_by="",
                       concurrency=1, dedupe=False)
    async with consuming(BatchConsumer(bus, "tester", sub, TerminalInput, handler, after)) as c:
        yield c


async def until(check: Callable[[], Awaitable[bool]], timeout: float = 20) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await check():
        assert loop.time() < deadline, "not in time"
        await asyncio.sleep(0.02)


async def test_a_batch_is_handled_in_order_and_acked_only_after_its_effect(bus: Bus) -> None:
    for i in range(30):
        await bus.publish(bus.subjects.cmd("test", "x"), TerminalInput(id=f"b{i}", chat="c",
                                                                       text=str(i)))
    seen: list[str] = []
    batches: list[tuple[int, int]] = []  # (messages handled so far, unacked at `after`)

    async def handler(m: TerminalInput) -> None:
        seen.append(m.text)

    async def after() -> None:
        _, unacked = await bus.consumer_backlog(bus.subjects.stream_cmd, "batch")
        batches.append((len(seen), unacked))

    async with running(bus, handler, after) as consumer:
        async def settled() -> bool:
            return consumer.stats.handled == 30 and await bus.consumer_backlog(
                bus.subjects.stream_cmd, "batch") == (0, 0)

        await until(settled)
    assert seen == [str(i) for i in range(30)]
    assert len(batches) < 30, "pending messages are fetched and handled as one batch"
    done = 0
    for handled, unacked in batches:  # at each `after`, its whole batch was still unacked
        assert unacked >= handled - done
        done = handled


async def test_a_batch_whose_effect_fails_is_delivered_again(bus: Bus) -> None:
    await bus.publish(bus.subjects.cmd("test", "x"), TerminalInput(id="f1", chat="c", text="1"))
    seen: list[str] = []
    failures = [RuntimeError("disk full")]

    async def handler(m: TerminalInput) -> None:
        seen.append(m.text)

    async def after() -> None:
        if failures:
            raise failures.pop()

    async with running(bus, handler, after) as consumer:
        async def handled() -> bool:
            return consumer.stats.handled == 1

        await until(handled)
    assert seen == ["1", "1"] and consumer.stats.failed == 1
