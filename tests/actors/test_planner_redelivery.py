"""planner-evt has no handled-markers (contracts/routes.py): an event the planner already
applied and saved, delivered again (a crash between the save and the ack), must find itself
stale in the session state and change nothing."""

from __future__ import annotations

from collections.abc import Callable

from contracts.config import Settings
from tests.actors.harness import ALL, actors, chat
from tests.fakes.llm_servers import FakeLLM


async def test_an_applied_event_delivered_again_changes_nothing(
    fake: FakeLLM, settings_for: Callable[..., Settings],  # fake: tests/actors/conftest.py
) -> None:
    settings = settings_for(WM__MODELS__DEFAULT="openai/test-model")
    async with actors(settings, *ALL) as running, chat(settings) as c:
        assert await c.ask("first") == "echo: first"
        bus = running.procs["planner"][2]
        s = bus.subjects
        stored = []
        for kind in ("memory.recalled", "llm.response"):
            psub = await bus.js.pull_subscribe(f"{s.p}.evt.{kind}.>", stream=s.stream_evt)
            stored += await psub.fetch(1, timeout=15)
        calls = len(fake.requests)
        for m in stored:  # the same payloads again, as a redelivery (no dedupe header)
            await bus.js.publish(m.subject, m.data)
        # The session's events are handled in order: once the next turn is answered, the
        # copies were handled before it.
        assert await c.ask("second") == "echo: second"
        assert len(fake.requests) == calls + 1  # only the second turn called the model
        assert not c.backlog  # no second answer to the first turn
