"""Budget charges from hundreds of model calls in flight at once (the llm's concurrency)."""

from __future__ import annotations

import asyncio

from bus import Bus
from contracts import Usage
from contracts.config import BudgetConfig
from state import budget


async def test_hundreds_of_concurrent_charges_all_count_and_none_fails(bus: Bus) -> None:
    cfg = BudgetConfig()
    spent = Usage(input_tokens=7, output_tokens=3)
    calls = 300  # each its own session, all on the same day record
    await asyncio.gather(*(budget.charge(bus, cfg, f"s{i}", "user" if i % 2 else "heartbeat",
                                         "openai/m", spent) for i in range(calls)))
    day = await budget.usage(bus, budget.day_key(tz=cfg.timezone))
    assert day.tokens == day.total == 10 * calls
    assert day.by_purpose == {"user": 10 * calls // 2, "heartbeat": 10 * calls // 2}
    assert await budget.used(bus, budget.session_key("s7")) == 10


async def test_a_second_process_charging_the_same_day_loses_nothing(
        bus: Bus, nats_url: str, prefix: str) -> None:
    other = await Bus(nats_url, prefix).connect()  # another llm replica
    try:
        cfg, spent = BudgetConfig(), Usage(input_tokens=1, output_tokens=1)
        await asyncio.gather(*(budget.charge(b, cfg, f"s{i}", "user", "openai/m", spent)
                               for i in range(100) for b in (bus, other)))
    finally:
        await other.close()
    assert await budget.used(bus, budget.day_key(tz=cfg.timezone)) == 400
