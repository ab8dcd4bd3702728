"""`wintermute chat` on a long turn: the user sees that the agent is still at it."""

from __future__ import annotations

from typing import Any

import pytest

from supervisor.cli import progress
from supervisor.cli.chat import chat_once
from tests.actors.harness import ALL, actors
from tests.fakes.llm_servers import FakeLLM


async def test_chat_once_says_still_thinking_on_a_long_turn(
    fake: FakeLLM, settings_for: Any, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(progress, "THINKING_AFTER", 1.0)
    settings = settings_for(WM__MODELS__DEFAULT="openai/test-model")
    async with actors(settings, *ALL):
        assert await chat_once(settings, "slow:3", "owner", timeout=60) == 0
        out = capsys.readouterr()
        assert out.out.strip() == "slept 3"
        assert "still thinking… (" in out.err
        assert await chat_once(settings, "quick", "owner", timeout=60) == 0
        assert "still thinking" not in capsys.readouterr().err
