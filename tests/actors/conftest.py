"""Fixtures for tests/actors: a clean model environment, a scripted OpenAI-compatible model
(`fake`, wired through OPENAI_BASE_URL; `llm`, not wired), and a local Telegram Bot API (`tg`)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from actors.llm.providers import reset_clients
from tests.fakes.egress import Origin
from tests.fakes.llm_servers import FakeLLM
from tests.fakes.telegram_server import TOKEN, FakeTelegram

PROVIDER_VARS = ("OPENAI_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY",
                 "OLLAMA_HOST")


@pytest.fixture
def clean_provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No provider variables from the outside, and no SDK client cached with old ones."""
    for var in PROVIDER_VARS:
        monkeypatch.delenv(var, raising=False)
    reset_clients()


@pytest.fixture
async def fake(
    clean_provider_env: None, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[FakeLLM]:
    """A scripted OpenAI-compatible model that the llm actor talks to."""
    server = FakeLLM()
    monkeypatch.setenv("OPENAI_BASE_URL", await server.start("openai"))
    yield server
    await server.stop()


@pytest.fixture
async def origin() -> AsyncIterator[Origin]:
    """A public web origin the egress proxy can be allowed to reach (tests/fakes/egress.py)."""
    server = await Origin().start()
    yield server
    await server.stop()


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
def telegram_env(clean_provider_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WINTERMUTE_TELEGRAM_TOKEN", TOKEN)
