"""The Bus's KV and stream helpers against a real nats-server: typed reads that survive old
values, compare-and-set updates under contention, delete, core subscribe, stream lookups."""

from __future__ import annotations

import asyncio

import msgspec
import pytest

from bus import Bus, Conflict, Delivery
from contracts import Notice, Sink


class Rec(msgspec.Struct, frozen=True, kw_only=True):
    n: int = 0
    note: str = ""


async def test_typed_get_treats_an_unreadable_value_as_absent(
    bus: Bus, caplog: pytest.LogCaptureFixture
) -> None:
    b = bus.subjects.kv_state
    await bus.kv_put(b, "rec", Rec(n=3, note="x"))
    assert await bus.kv_get_as(b, "rec", Rec) == Rec(n=3, note="x")
    await bus.kv_put(b, "rec", b"not json at all")
    assert await bus.kv_get_as(b, "rec", Rec) is None
    assert "unreadable Rec" in caplog.text
    await bus.kv_put(b, "rec", b'{"n": "three"}')  # wrong type: same
    assert await bus.kv_get_as(b, "rec", Rec) is None
    assert await bus.kv_get_as(b, "missing", Rec) is None


async def test_concurrent_updates_lose_nothing(bus: Bus) -> None:
    b = bus.subjects.kv_budget

    async def add_one() -> None:
        for _ in range(10):
            await bus.kv_update(b, "count", lambda v: (v or 0) + 1, kind=int, tries=200)

    await asyncio.gather(*(add_one() for _ in range(5)))
    assert await bus.kv_get_as(b, "count", int) == 50
    assert await bus.kv_get(b, "count") == b"50"  # the counter format older readers know


async def test_update_over_an_old_value_starts_fresh_and_none_leaves_it(bus: Bus) -> None:
    b = bus.subjects.kv_state
    await bus.kv_put(b, "r", b"[1, 2]")
    out = await bus.kv_update(b, "r", lambda v: Rec(n=(v.n if v else 0) + 1), kind=Rec)
    assert out == Rec(n=1)
    same = await bus.kv_update(b, "r", lambda v: None, kind=Rec)
    assert same == Rec(n=1)
    assert await bus.kv_get_as(b, "r", Rec) == Rec(n=1)


async def test_update_raises_conflict_when_it_always_loses(bus: Bus) -> None:
    b = bus.subjects.kv_state
    await bus.kv_put(b, "hot", Rec(n=0))
    bumps = 0

    def meddle(v: Rec | None) -> Rec:
        # Every attempt, another writer gets in between our read and our write.
        nonlocal bumps
        bumps += 1
        asyncio.get_running_loop().create_task(bus.kv_put(b, "hot", Rec(n=-bumps)))
        return Rec(n=(v.n if v else 0) + 1)

    async def slow_put(bucket: str, key: str, data: bytes, revision: int) -> int | None:
        await asyncio.sleep(0.05)  # let the meddler's write land first
        return await Bus.kv_put_at(bus, bucket, key, data, revision)

    bus.kv_put_at = slow_put  # type: ignore[method-assign]
    with pytest.raises(Conflict, match="hot"):
        await bus.kv_update(b, "hot", meddle, kind=Rec, tries=3)
    assert bumps == 3


async def test_delete_and_create(bus: Bus) -> None:
    b = bus.subjects.kv_state
    assert await bus.kv_create(b, "k", Rec(n=1))
    assert not await bus.kv_create(b, "k", Rec(n=2))
    await bus.kv_delete(b, "k")
    await bus.kv_delete(b, "k")  # twice is fine
    assert await bus.kv_get(b, "k") is None
    assert await bus.kv_create(b, "k", Rec(n=3))  # a deleted key can be created again
    assert await bus.kv_get_as(b, "k", Rec) == Rec(n=3)


async def test_subscribe_stream_state_and_stored(bus: Bus) -> None:
    got: asyncio.Queue[Delivery] = asyncio.Queue()

    async def on_msg(d: Delivery) -> None:
        await got.put(d)

    subject = bus.subjects.outbound("terminal", "c1")
    tap = await bus.subscribe(subject, on_msg)
    notice = Notice(id="n1", sink=Sink(channel="terminal", chat="c1"), text="hi")
    await bus.publish(subject, notice)
    d = await asyncio.wait_for(got.get(), 10)
    assert d.subject == subject and b'"hi"' in d.data and d.headers["Nats-Msg-Id"] == "n1"
    await tap.stop()
    spec = next(s for s in bus.subjects.streams() if subject.startswith(s.subjects[0][:-1]))
    state = await bus.stream_state(spec.name)
    assert state is not None and state.messages >= 1
    first = await bus.stored(spec.name, state.first_seq)
    assert first is not None and first.data == d.data
    assert await bus.stored(spec.name, state.last_seq + 5) is None
    assert await bus.stream_state("NO_SUCH_STREAM") is None


async def test_async_with_connects_and_closes(nats_url: str, prefix: str) -> None:
    async with Bus(nats_url, prefix) as b:
        assert b.nc.is_connected
    assert b.nc.is_closed
