"""Seed 003 §17 #10 (invariant H): no auth token in any URL, across configuration, the webhook
endpoint, the admin interface (`wintermute status`) and the adapters' traffic with their
services (Telegram's Bot API puts the bot token in every URL: it must never reach our logs,
logs/events.jsonl, status or what users are shown).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from actors.runtime import log_scrub
from bus import logs as buslogs
from contracts.config import ConfigError, Settings
from supervisor.cli.client import gather_status, render_status
from tests.actors.harness import ALL, actors
from tests.actors.test_telegram import OWNER, tg_settings
from tests.fakes.llm_servers import FakeLLM
from tests.fakes.telegram_server import FakeTelegram
from tests.privacy.test_webhook import (  # noqa: F401 - with_secret is a fixture
    SECRET,
    endpoint,
    hook_settings,
    post,
    with_secret,
)

SettingsFor = Callable[..., Settings]
BOT = "987654321:AAHvault-7Qx_token_for_the_seed_tst"  # shaped like BotFather's tokens


@pytest.mark.parametrize(("key", "url"), [
    ("WM__NATS__URL", "nats://wintermute:hunter2-pw@nats.example:4222"),
    ("WM__CHANNELS__TELEGRAM__API_BASE_URL", f"https://api.telegram.org/bot{BOT}/"),
    ("WM__CHANNELS__TELEGRAM__WEBHOOK_URL", "https://me.example/tg?secret_token=hunter2-pw"),
    ("WM__MODELS__EMBEDDING_URL", "https://emb.example/v1?api_key=hunter2-pw"),
])
def test_17_10_a_configured_url_with_a_credential_is_refused(
    settings_for: SettingsFor, key: str, url: str,
) -> None:
    """Seed #10, configuration: a URL carrying a user:password, a credential-named query
    parameter or a bot token is refused at start-up, the error names the key and what to do,
    and does not repeat the secret."""
    with pytest.raises(ConfigError) as err:
        settings_for(**{key: url})
    text = str(err.value)
    assert key.removeprefix("WM__").lower().replace("__", ".") in text
    assert "put the secret in .env" in text
    assert "hunter2" not in text and BOT not in text


def test_17_10_up_refuses_a_nats_url_with_a_password(home: Path) -> None:
    """Seed #10, admin interface: `wintermute up --nats-url` with a password in it is refused
    before anything starts (a command line lands in shell history and `ps`)."""
    from click.testing import CliRunner

    from supervisor.cli.main import main

    out = CliRunner().invoke(main, ["up", "--nats-url", "nats://u:hunter2-pw@nats.example:4222"])
    assert out.exit_code == 2 and "nats.user/nats.password" in out.output
    assert "hunter2" not in out.output


@pytest.mark.usefixtures("with_secret", "fake")
async def test_17_10_the_webhook_takes_its_secret_only_in_headers(
    settings_for: SettingsFor,
) -> None:
    """Seed #10, webhook endpoint: the shared secret in the query string authenticates
    nothing (401); only the HMAC signature header does."""
    settings = hook_settings(settings_for)
    async with actors(settings, "channel") as running:
        url = (await endpoint(running)) + "/crm"
        for query in (f"?secret={SECRET}", f"?token={SECRET}", f"?signature={SECRET}"):
            assert (await post(url + query, {"text": "hi"}, signature=""))[0] == 401
        assert (await post(url, {"text": "hi"}))[0] == 202


@pytest.fixture
async def tg_bot(clean_provider_env: None, monkeypatch: pytest.MonkeyPatch
                 ) -> AsyncIterator[FakeTelegram]:
    monkeypatch.setenv("WINTERMUTE_TELEGRAM_TOKEN", BOT)
    server = FakeTelegram(token=BOT)
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
def debug_logs(tmp_path: Path) -> Iterator[Path]:
    """Every actor's log lines at debug level, through the formatter `wintermute up` uses,
    into one file; httpx's per-request lines (full URLs) included."""
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    path = tmp_path / "actors.log"
    yield path
    root.handlers[:] = saved[0]
    root.setLevel(saved[1])


async def test_17_10_the_bot_token_never_reaches_logs_events_status_or_users(
    tg_bot: FakeTelegram, llm: FakeLLM, settings_for: SettingsFor, debug_logs: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Seed #10, adapter traffic and the admin interface: Telegram's API URLs hold the bot
    token; with debug logging and httpx logging every request URL, a Telegram turn (one send
    failing once) leaves the token in no log line, no line of logs/events.jsonl (the
    observer's copy of every message), not in `status` and not in any message to the user."""
    monkeypatch.setenv("OPENAI_BASE_URL", llm.url)
    settings = tg_settings(settings_for, tg_bot, WM__MODELS__DEFAULT="openai/test-model")
    buslogs.setup("test", "debug", path=debug_logs, scrub=log_scrub(settings))
    logging.getLogger("httpx").setLevel(logging.INFO)  # "HTTP Request: POST <url>"
    tg_bot.fail_next("sendMessage", status=500)
    async with actors(settings, *ALL, "observer"):
        tg_bot.inject(tg_bot.message(OWNER, "hello over telegram"))
        await tg_bot.wait_for(lambda: tg_bot.messages_to(OWNER), timeout=60)
        status = render_status(await gather_status(settings))
        events = settings.home / "logs" / "events.jsonl"
        await tg_bot.wait_for(lambda: events.exists() and "hello over telegram"
                              in events.read_text(), timeout=30)
    logged = await asyncio.to_thread(debug_logs.read_text)
    assert "/getUpdates" in logged  # request URLs were logged ...
    assert BOT not in logged and BOT.split(":")[1] not in logged  # ... without the token
    assert BOT not in await asyncio.to_thread(events.read_text)
    assert "channel" in status and BOT not in status
    assert BOT not in json.dumps(tg_bot.messages_to(OWNER))
