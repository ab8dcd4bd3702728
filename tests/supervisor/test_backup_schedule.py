"""Scheduled backups: the supervisor writes archives on `backup.cron` and keeps `backup.keep`."""

from __future__ import annotations

import asyncio
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from bus import Bus
from contracts.config import ConfigError, Settings
from supervisor.process.backup import scheduled_backups

SettingsFor = Callable[..., Settings]


async def until(condition: Callable[[], bool]) -> None:
    while True:
        if condition():
            return
        await asyncio.sleep(0.1)


async def test_archives_are_written_on_schedule_and_old_ones_pruned(
    settings_for: SettingsFor, bus: Bus,
) -> None:
    settings = settings_for(WM__BACKUP__CRON="* * * * * *", WM__BACKUP__KEEP="1",
                            WM__BACKUP__SECRETS="false")
    (settings.home / ".env").write_text("SOME_TOKEN=do-not-back-me-up-1234\n")
    told: list[str] = []

    async def notify(text: str, ref: str) -> None:
        told.append(text)

    folder = settings.home / "backups"
    task = asyncio.create_task(scheduled_backups(settings, bus, notify))
    try:
        async with asyncio.timeout(60):
            await until(lambda: bool(list(folder.glob("wintermute-*.tar.gz"))))
            (first,) = folder.glob("wintermute-*.tar.gz")
            # the next run replaced it (keep = 1)
            await until(lambda: not first.exists() and bool(list(folder.glob("wintermute-*"))))
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    archives = list(folder.glob("wintermute-*.tar.gz"))
    assert len(archives) == 1 and not told
    with tarfile.open(archives[0]) as tar:
        names = tar.getnames()
    assert "home/config.toml" in names and "home/.env" not in names
    assert any(n.startswith("jetstream/") for n in names)


def test_a_bad_backup_cron_names_the_key(settings_for: SettingsFor) -> None:
    with pytest.raises(ConfigError, match="'backup.cron'"):
        settings_for(WM__BACKUP__CRON="at three")


def test_backups_can_be_switched_off(settings_for: SettingsFor, tmp_path: Path) -> None:
    settings = settings_for(WM__BACKUP__ENABLED="false", WM__BACKUP__CRON="at three")
    assert settings.config.backup.enabled is False
