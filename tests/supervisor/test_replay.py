"""`wintermute replay`: a recorded turn is found in stream history and re-driven faithfully."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from actors.llm.providers import reset_clients
from bus import Bus
from contracts.config import Settings
from supervisor.cli.replay import find_turn, rerun, timeline
from tests.actors.harness import ALL, actors, chat
from tests.fakes.llm_servers import FakeLLM


async def test_replay_shows_the_turn_and_spots_a_changed_prompt(
    settings_for: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch, bus: Bus
) -> None:
    fake = FakeLLM()
    monkeypatch.setenv("OPENAI_BASE_URL", await fake.start("openai"))
    reset_clients()
    settings = settings_for(WM__MODELS__DEFAULT="openai/m")
    try:
        async with actors(settings, *ALL), chat(settings) as c:
            await c.ask("hello first")
            assert "replayed" in await c.ask("run: echo replayed")
    finally:
        await fake.stop()
    calls = len(fake.requests)

    turn = await find_turn(bus, session="terminal:owner")
    assert turn is not None and turn.request.text == "run: echo replayed"
    lines = "\n".join(timeline(turn))
    for kind in ("memory.recall", "llm.request", "tool.request", "tool.result", "turn.reply"):
        assert kind in lines
    assert sorted(turn.llm_requests) == [0, 1] and turn.reply is not None

    same = await rerun(settings, bus, turn)
    assert same == ["step 0 model request: same", "tool call execute_command: answered from the recording",
                    "step 1 model request: same", "reply: same"]

    (settings.home / "AGENTS.md").write_text("Always answer like a pirate.\n")
    changed = await rerun(settings, bus, turn)
    assert changed[0].startswith("step 0 model request: DIFFERENT")
    assert "Always answer like a pirate." in changed[0]
    assert changed[-1] == "reply: same"
    assert len(fake.requests) == calls, "a replay never calls the model"
