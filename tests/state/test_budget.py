"""Budget records: local days, concurrent charges, pause and renewal, costs."""

from __future__ import annotations

import asyncio
import calendar
import time
from typing import Any

import pytest

from bus import Bus
from contracts import Usage
from contracts.config import BudgetConfig, ModelPrice
from state import budget


def test_days_are_local_and_renew_at_local_midnight() -> None:
    # 23:30 UTC on 1 Jan 2030 is already 2 Jan in Berlin (UTC+1).
    ts = float(calendar.timegm(time.strptime("2030-01-01 23:30", "%Y-%m-%d %H:%M")))
    assert budget.day_key(ts, "UTC") == "day.20300101"
    assert budget.day_key(ts, "Europe/Berlin") == "day.20300102"
    assert budget.next_day(ts, "UTC") == ts + 30 * 60
    assert budget.next_day(ts, "Europe/Berlin") == ts + 23.5 * 3600
    assert budget.day_start(ts, "Europe/Berlin") == ts - 30 * 60


async def test_concurrent_charges_lose_nothing(bus: Bus) -> None:
    cfg = BudgetConfig(prices={"openai/m": ModelPrice(input=1.0, output=2.0)})
    spent = Usage(input_tokens=600_000, output_tokens=200_000)
    await asyncio.gather(*(budget.charge(bus, cfg, "s", "user", "openai/m", spent)
                           for _ in range(10)))
    day = await budget.usage(bus, budget.day_key(tz=cfg.timezone))
    assert day.tokens == day.total == 8_000_000 and day.by_purpose == {"user": 8_000_000}
    assert abs(day.cost - 10 * 1.0) < 1e-9  # 0.6 $ input + 0.4 $ output per call


async def test_a_paused_session_renews_and_the_day_does_not(bus: Bus) -> None:
    cfg = BudgetConfig(max_tokens_per_session=100, max_tokens_per_day=1000)
    await budget.add(bus, budget.session_key("a"), 150, "user")
    await budget.add(bus, budget.day_key(), 150, "user")
    assert not await budget.renew(bus, "a")  # not paused: nothing to renew
    stop = await budget.check(bus, cfg, "a")
    assert stop is not None and stop.kind == "session"
    assert await budget.check(bus, cfg, "a", "heartbeat") is None  # tasks have their own caps
    await budget.pause(bus, "a", stop.kind)
    assert await budget.renew(bus, "a")
    record = await budget.usage(bus, budget.session_key("a"))
    assert (record.tokens, record.total, record.paused, record.renewals) == (0, 150, "", 1)
    await budget.add(bus, budget.day_key(), 900)
    stop = await budget.check(bus, cfg, "a", "diagnosis")
    assert stop is not None and stop.kind == "day" and "back tomorrow" in stop.message


async def test_the_report_shows_both_budgets_purposes_cost_and_renewal(bus: Bus) -> None:
    from state import budget_view
    from supervisor.cli.client import render_status

    cfg = BudgetConfig(max_tokens_per_session=1000, max_tokens_per_day=10_000, timezone="UTC",
                       prices={"openai/m": ModelPrice(input=3.0, output=15.0)})
    await budget.charge(bus, cfg, "terminal:owner", "user", "openai/m",
                        Usage(input_tokens=900, output_tokens=300))
    await budget.charge(bus, cfg, "task:news", "heartbeat", "openai/m",
                        Usage(input_tokens=400, output_tokens=0))
    await budget.pause(bus, "terminal:owner", "session")
    text = await budget_view.summary(bus, cfg, "terminal:owner")
    assert "Today: 1,600 of 10,000 tokens (16%); renews at " in text and "00:00 UTC" in text
    assert "Estimated cost: $0.01" in text
    assert "Used today by: user 1,200, heartbeat 400." in text
    assert "This session: ⏸ paused" in text
    status = render_status({"actors": [], "nats": {}, "budget": {"text": text}})
    assert "budget: Today: 1,600 of 10,000 tokens" in status


async def test_a_charge_after_the_check_writes_without_reading_again(
        bus: Bus, nats_url: str, prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = BudgetConfig()
    spent = Usage(input_tokens=10, output_tokens=5)
    assert await budget.check(bus, cfg, "r") is None  # reads both records (and revisions)
    reads: list[str] = []
    read = bus.kv_get_rev

    async def counted(bucket: str, key: str, kind: Any) -> Any:
        reads.append(key)
        return await read(bucket, key, kind)

    monkeypatch.setattr(bus, "kv_get_rev", counted)
    await budget.charge(bus, cfg, "r", "user", "openai/m", spent)
    await budget.charge(bus, cfg, "r", "user", "openai/m", spent)
    assert reads == []
    async with Bus(nats_url, prefix) as other:  # another process charges in between
        await budget.charge(other, cfg, "r", "user", "openai/m", spent)
    await budget.charge(bus, cfg, "r", "user", "openai/m", spent)
    assert sorted(reads) == sorted([budget.day_key(), budget.session_key("r")])  # stale: read
    assert (await budget.usage(bus, budget.session_key("r"))).tokens == 4 * 15
    assert (await budget.usage(bus, budget.day_key())).tokens == 4 * 15
