"""Restarting `up` on the same home does not greet the owner with the last run's notices."""

from __future__ import annotations

from typing import Any

import pytest

from bus import Bus
from contracts import Notice, Sink
from supervisor.process.announce import Announcer
from tests.actors.harness import actors, chat


async def test_notices_about_an_earlier_run_are_dropped(
    settings_for: Any, bus: Bus, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = settings_for()
    sink = Sink(channel="terminal", chat="owner")
    # What the last run left unsent in WM_OUT: its supervisor's notices about its processes.
    old = Announcer(settings, bus, run="run-before")
    await old.intervene("hung", "planner", "Killed the hung planner.", "It was hung.",
                        notify="The planner actor was hung (old news).")
    await old.intervene("quarantine", "news", "Quarantined news.", "It failed.",
                        notify="I quarantined the tool news (still true).")
    monkeypatch.setenv("WINTERMUTE_RUN", "run-now")
    async with actors(settings, "channel"), chat(settings) as c:
        new = Announcer(settings, bus, run="run-now")
        await new.intervene("hung", "memory", "Killed the hung memory.", "It was hung.",
                            notify="The memory actor was hung (this run).")
        await bus.publish(bus.subjects.outbound("terminal", "owner"),
                          Notice(id="last", sink=sink, text="marker"))
        seen = []
        while not seen or seen[-1] != "marker":
            seen.append((await c.next(("notice",))).text)
    assert seen == ["I quarantined the tool news (still true).",
                    "The memory actor was hung (this run).", "marker"]
