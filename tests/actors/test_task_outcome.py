"""The planner reports how each scheduled task's turn ended (for the supervisor's task rule):
failed when the answer is an error sentence or every tool call failed, ok otherwise."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from bus import Bus
from contracts import Sink, TurnRequest
from contracts.config import Settings
from tests.actors.harness import actors
from tests.fakes.llm_servers import FakeLLM


async def outcome_of(bus: Bus, task: str, prompt: str) -> dict[str, Any]:
    turn = TurnRequest(id=f"task:{task}:1", session=f"task:{task}", principal="heartbeat",
                       text=prompt, reply_to=Sink(channel="terminal", chat="owner"),
                       is_owner=True, origin="schedule")
    await bus.publish(bus.subjects.inbound("schedule", task), turn)
    psub = await bus.js.pull_subscribe(f"{bus.subjects.p}.evt.task.outcome.{task}",
                                       stream=bus.subjects.stream_evt)
    msgs = await psub.fetch(1, timeout=60)
    return json.loads(msgs[0].data)  # type: ignore[no-any-return]


async def test_scheduled_turns_report_ok_or_failed(
    fake: FakeLLM, settings_for: Callable[..., Settings], bus: Bus
) -> None:
    settings = settings_for(WM__MODELS__DEFAULT="openai/test-model")
    async with actors(settings, "planner", "llm", "executor", "memory"):
        ok, broken, error = await asyncio.gather(
            outcome_of(bus, "fine", "run: echo all good"),
            outcome_of(bus, "broken", "run: exit 4"),
            outcome_of(bus, "error", "status:400"),
        )
    assert ok["ok"] is True and ok["turn_id"] == "task:fine:1"
    assert broken["ok"] is False and broken["reason"] == "all 1 of its tool calls failed"
    assert error["ok"] is False and error["reason"]
