"""Telegram intake under abuse: an update too large to store, and one user's burst."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from actors.channel._telegram_in import MAX_TEXT
from bus import Bus
from contracts.config import Settings
from tests.actors.harness import actors
from tests.actors.test_telegram import FRIEND, OWNER, confirmed, tg_settings, turns, until
from tests.fakes.telegram_server import FakeTelegram
from tests.supervisor.test_storage import mounted_small_disk, tight_store

pytestmark = pytest.mark.usefixtures("telegram_env")
SettingsFor = Callable[..., Settings]


async def test_an_update_too_large_to_store_is_cut_with_a_notice_and_the_intake_moves_on(
    tg: FakeTelegram, settings_for: SettingsFor, bus: Bus
) -> None:
    async with actors(tg_settings(settings_for, tg), "channel"):
        tg.inject(tg.message(OWNER, "start " + "z" * 1_200_000))
        after = tg.inject(tg.message(OWNER, "the next message"))
        await confirmed(tg, after)
        got = await until(lambda: _n_turns(bus, 2))
        notice = await tg.wait_for(lambda: tg.messages_to(OWNER))
    big, small = got
    assert big["text"].startswith("start z") and len(big["text"]) < MAX_TEXT + 200
    assert "cut here" in big["text"] and small["text"] == "the next message"
    assert "very long" in notice[0]["text"] and "file" in notice[0]["text"]


async def test_a_users_burst_is_rate_limited_politely_and_the_owner_never_is(
    tg: FakeTelegram, settings_for: SettingsFor, bus: Bus
) -> None:
    settings = tg_settings(settings_for, tg, WM__CHANNELS__USER_RATE_PER_MIN="3")
    async with actors(settings, "channel"):
        for i in range(6):
            tg.inject(tg.message(FRIEND, f"friend {i}"))
        for i in range(6):
            last = tg.inject(tg.message(OWNER, f"owner {i}"))
        await confirmed(tg, last)
        got = await until(lambda: _n_turns(bus, 9))
        await tg.wait_for(lambda: tg.messages_to(FRIEND))
    texts = [t["text"] for t in got]
    assert texts[:3] == ["friend 0", "friend 1", "friend 2"]
    assert [t for t in texts if t.startswith("owner")] == [f"owner {i}" for i in range(6)]
    told = tg.messages_to(FRIEND)
    assert len(told) == 1 and "faster than I can answer" in told[0]["text"]


async def _n_turns(bus: Bus, n: int) -> list[dict[str, object]] | None:
    got = await turns(bus)
    return got if len(got) >= n else None


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    with mounted_small_disk(tmp_path) as mnt:
        yield mnt


async def test_a_full_store_is_told_directly_and_the_update_taken_when_space_returns(
    tg: FakeTelegram, settings_for: SettingsFor, small_disk: Path, prefix: str
) -> None:
    async with tight_store(small_disk, prefix) as disk:
        settings = tg_settings(settings_for, tg, WM__NATS__URL=disk.url)
        async with actors(settings, "channel"):
            await confirmed(tg, tg.inject(tg.message(FRIEND, "before")))
            await disk.fill()
            waiting = tg.inject(tg.message(FRIEND, "while the disk is full"))
            await tg.wait_for(lambda: tg.messages_to(FRIEND) and tg.messages_to(OWNER))
            assert "storage is full" in tg.messages_to(FRIEND)[0]["text"]
            assert "disk is full" in tg.messages_to(OWNER)[0]["text"]
            assert tg.confirmed < waiting  # not confirmed: Telegram keeps it for us
            await disk.free()
            await confirmed(tg, waiting)
            got = await until(lambda: _n_turns(disk.bus, 2), timeout=60)
        assert [t["text"] for t in got] == ["before", "while the disk is full"]
        assert len(tg.messages_to(FRIEND)) == 1  # told once, not once per retry
