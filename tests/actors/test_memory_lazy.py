"""The memory actor opens its store (LanceDB, the embedding model) on first use, not at start:
until something is saved a recall answers "no memories" without loading anything, and status
already says how memory searches."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import msgspec

from bus import Bus, Delivery
from contracts import MemorySave, Recall, Recalled
from contracts.config import Settings
from contracts.records import MemoryFacts
from tests.actors.harness import actors

SettingsFor = Callable[..., Settings]


async def _recall(bus: Bus, query: str, n: int) -> Recalled:
    got: asyncio.Queue[Recalled] = asyncio.Queue()

    async def on(d: Delivery) -> None:
        got.put_nowait(msgspec.json.decode(d.data, type=Recalled))

    tap = await bus.subscribe(bus.subjects.of(
        Recalled(id="x", session="terminal:lazy", turn_id="x", hits=[])), on)
    try:
        await bus.send(Recall(id=f"lazy-{n}", session="terminal:lazy", turn_id=f"t{n}",
                              query=query, principal="terminal:owner", is_owner=True))
        return await asyncio.wait_for(got.get(), 60)
    finally:
        await tap.stop()


async def test_store_opens_on_first_use(settings_for: SettingsFor, bus: Bus) -> None:
    settings = settings_for(WM__MODELS__EMBEDDING="none")
    table = settings.home / "data" / "memory" / "memories.lance"
    async with actors(settings, "memory") as running, asyncio.timeout(90):
        actor = running.procs["memory"][0].actor
        kv = bus.subjects.kv_state
        while (facts := await bus.kv_get_as(kv, "memory", MemoryFacts)) is None:  # noqa: ASYNC110
            await asyncio.sleep(0.05)  # on_start writes it
        assert facts.search == "full-text" and "none" in facts.warning
        first = await _recall(bus, "red car", 1)
        assert first.hits == [] and first.error == ""
        assert getattr(actor, "store", None) is None and not table.exists()  # nothing loaded
        await bus.send(MemorySave(id="lazy-save", session="terminal:lazy", kind="fact",
                                  content="my car is a red Volvo", principal="terminal:owner",
                                  is_owner=True))
        while (await _recall(bus, "red car", 2)).hits == []:  # noqa: ASYNC110 - saved async
            await asyncio.sleep(0.1)
        assert table.exists() and getattr(actor, "store").count() == 1  # noqa: B009
