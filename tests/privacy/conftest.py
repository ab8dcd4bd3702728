"""Fixtures for tests/privacy: the model servers and Telegram fake of tests/actors."""

from __future__ import annotations

from tests.actors.conftest import (  # noqa: F401 - fixtures shared with tests/actors
    clean_provider_env,
    fake,
    llm,
    telegram_env,
    tg,
)
