"""Fixtures for tests/actors: a local Bot API server (`tg`), a scripted model (`llm`), and
`telegram_env` (the bot token set, provider variables cleared) for the Telegram tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from actors.llm.providers import reset_clients
from tests.fakes.llm_servers import FakeLLM
from tests.fakes.telegram_server import TOKEN, FakeTelegram


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    server = FakeTelegram()
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def llm() -> AsyncIterator[FakeLLM]:
    server = FakeLLM()
    await server.start("openai")
    yield server
    await server.stop()


@pytest.fixture
def telegram_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WINTERMUTE_TELEGRAM_TOKEN", TOKEN)
    for var in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY",
                "OLLAMA_HOST"):
        monkeypatch.delenv(var, raising=False)
    reset_clients()
