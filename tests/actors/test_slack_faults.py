"""Slack when the message store is full: the sender and the owner are told directly (no store),
and the unacknowledged envelope is taken once there is room again."""
from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from contracts.config import Settings
from tests.actors.harness import actors
from tests.actors.test_slack import (  # noqa: F401 - fixtures
    ALICE,
    OWNER,
    model,
    settings,
    slack,
    texts,
    turns_in,
)
from tests.fakes.slack_server import FakeSlack
from tests.supervisor.test_storage import mounted_small_disk, tight_store


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    with mounted_small_disk(tmp_path) as mnt:
        yield mnt


async def test_a_full_store_is_told_on_slack_and_the_message_taken_when_space_returns(
    slack: FakeSlack, settings: Callable[..., Settings], small_disk: Path, prefix: str  # noqa: F811
) -> None:
    async with tight_store(small_disk, prefix) as disk:
        async with actors(settings(WM__NATS__URL=disk.url), "channel"):
            await slack.wait_connected()
            await disk.fill()
            env = await slack.push("events_api", slack.dm(ALICE, "while the disk is full"))
            await slack.wait_posted(lambda ms: slack.posted(ALICE) and slack.posted(OWNER))
            assert "storage is full" in texts(slack.posted(ALICE))[0]
            assert "disk is full" in texts(slack.posted(OWNER))[0]
            assert not env.acked.is_set()  # Slack keeps it and sends it again
            await disk.free()
            await slack.redeliver(env)
            async with asyncio.timeout(60):
                while not env.acked.is_set():
                    await slack.redeliver(env)
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(env.acked.wait(), 5)
            stored = [t for t in await turns_in(disk.bus) if t.get("text") == "while the disk is full"]
        assert len(stored) == 1
        assert len(slack.posted(ALICE)) == 1  # told once, not once per redelivery
