"""Per-role model limits from config, and every retry in llm.log with its reason."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from actors.llm import _call_retry as _retry
from actors.llm.providers import ProviderError, complete
from contracts.llm import ChatMessage
from tests.actors.harness import ALL, actors, chat
from tests.fakes.llm_servers import FakeLLM


def say(text: str) -> list[ChatMessage]:
    return [ChatMessage(role="user", content=text)]


async def test_each_retry_is_logged_with_its_reason(
    fake: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="actors.llm._retry")
    with pytest.raises(ProviderError):
        await complete("openai/m", say("status:503"), [], retries=2)
    assert fake.calls == 3
    retries = [r.getMessage() for r in caplog.records if "retrying" in r.getMessage()]
    assert len(retries) == 2
    assert "attempt 1 of 3 failed" in retries[0] and "HTTP 503" in retries[0]
    assert "attempt 2 of 3 failed" in retries[1]
    assert any("failed after 3 attempts" in r.getMessage() for r in caplog.records)


async def test_errors_that_a_retry_cannot_fix_are_not_retried(fake: FakeLLM) -> None:
    with pytest.raises(ProviderError):
        await complete("openai/m", say("status:404"), [], retries=5)
    assert fake.calls == 1


def test_backoff_grows_and_honours_retry_after() -> None:
    assert [_retry.delay_before(n, None) for n in range(3)] == [0.5, 1.0, 2.0]
    assert _retry.delay_before(7, None) == _retry.MAX_DELAY
    assert _retry.delay_before(0, 3.0) == 3.0


async def test_role_limits_reach_the_model(
    fake: FakeLLM, settings_for: Any
) -> None:
    settings = settings_for(
        WM__MODELS__DEFAULT="openai/test-model",
        WM__MODELS__LIMITS__DEFAULT__MAX_TOKENS="77",
        WM__MODELS__LIMITS__DEFAULT__MAX_RETRIES="0",
        # No durable outage retry either (tests/actors/test_faults.py covers that): one attempt.
        WM__MODELS__RETRY_DEADLINE_SECS="0",
    )
    async with actors(settings, *ALL), chat(settings) as c:
        assert await c.ask("hello") == "echo: hello"
        assert fake.requests[-1]["max_tokens"] == 77
        before = fake.calls
        reply = await c.ask("status:503")
        assert "HTTP 503" in reply and fake.calls == before + 1  # max_retries = 0: one attempt


async def test_a_local_server_gets_a_shorter_default_answer(
    fake: FakeLLM, settings_for: Any
) -> None:
    settings = settings_for(WM__MODELS__DEFAULT="openai/test-model")
    async with actors(settings, *ALL), chat(settings) as c:
        assert await c.ask("hello") == "echo: hello"
    assert fake.requests[-1]["max_tokens"] == 1024  # OPENAI_BASE_URL is a local server
