"""`wintermute status` tells the truth: a stale supervisor record is flagged with its age, health
comes from the actors' own reports, and a stuck turn is shown with how to clear it."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable

from bus import Bus
from contracts.config import Settings
from supervisor.cli.client import gather_status, render_status
from tests.actors.harness import actors, chat

SettingsFor = Callable[..., Settings]


async def test_stale_record_and_stuck_turn_are_shown(settings_for: SettingsFor, bus: Bus) -> None:
    settings = settings_for(WM__MODELS__DEFAULT="openai/none", WM__PLANNER__MODEL_SILENCE_SECS="1",
                            WM__PLANNER__SWEEP_EVERY_SECS="600")
    # The supervisor wrote "all healthy" 1000 s ago, then stopped (as on a full disk).
    old = {"updated": time.time() - 1000, "actors": [
        {"name": "planner", "healthy": True, "state": "running", "restarts": 0},
        {"name": "llm", "healthy": True, "state": "running", "restarts": 0}]}
    await bus.kv_put(bus.subjects.kv_state, "supervisor", json.dumps(old).encode())
    async with actors(settings, "memory", "planner", "channel"), chat(settings) as c:
        await c.say("nobody will answer this")  # no llm actor: the model step hangs
        async with asyncio.timeout(60):
            while True:
                status = await gather_status(settings)
                if status["turns"]["stuck_turns"]:
                    break
                await asyncio.sleep(0.5)  # noqa: ASYNC110 - health is written every 2 s
    assert status["stale"] and status["age_secs"] >= 1000
    by_name = {a["name"]: a for a in status["actors"]}
    assert by_name["planner"]["healthy"] and not by_name["llm"]["healthy"]
    text = render_status(status)
    assert f"status record is {status['age_secs']:.0f} s old" in text and "not updating it" in text
    assert "STUCK terminal:owner: llm step" in text and "/reset" in text
