"""The terminal tells the user what is happening: start-up progress and "still thinking…"."""

from __future__ import annotations

import asyncio
import json

import msgspec

from bus import Bus
from contracts.records import SupervisorStatus
from supervisor.cli import progress


def status(*healthy: bool, restarts: int = 0) -> bytes:
    names = ["channel", "planner", "llm", "executor", "memory", "observer", "heartbeat", "approval"]
    return json.dumps({"actors": [
        {"name": n, "healthy": h, "restarts": restarts if i == 0 else 0, "pid": 1}
        for i, (n, h) in enumerate(zip(names, healthy, strict=False))
    ]}).encode()


def test_progress_line_counts_and_names_what_is_missing() -> None:
    actors = msgspec.json.decode(status(True, True, True, True, True, False, False, False,
                                        restarts=2), type=SupervisorStatus).actors
    line = progress.progress_line(actors, 12)
    assert line.startswith("starting: 5 of 8 actors ready (waiting for observer, heartbeat, "
                           "approval; 12 s")
    assert "2 restarts so far" in line
    assert "supervisor's first report" in progress.progress_line(None, 3)


async def test_startup_reports_each_change_then_ready(bus: Bus) -> None:
    said: list[str] = []
    seen = asyncio.Event()

    def say(line: str) -> None:
        said.append(line)
        seen.set()

    async def supervisor_reports() -> None:
        for record in (status(False, False), status(True, False), status(True, True)):
            seen.clear()
            await asyncio.wait_for(seen.wait(), 10)  # the previous state was shown
            await bus.kv_put(bus.subjects.kv_state, "supervisor", record)

    reporter = asyncio.create_task(supervisor_reports())
    await asyncio.wait_for(progress.startup(bus, say, every=0.05), 30)
    await reporter
    heads = [line.split("(")[0].strip() for line in said]
    assert heads == ["starting: waiting for the supervisor's first report",
                     "starting: 0 of 2 actors ready", "starting: 1 of 2 actors ready",
                     "ready: all 2 actors are up"]
    said.clear()
    await progress.startup(bus, say)
    assert said == []  # nothing printed when everything is already up


def test_thinking_lines_come_after_a_while_and_stop_with_the_answer() -> None:
    t = progress.Thinking(after=0, every=3600)
    t.sent("abc")
    assert [line.startswith("still thinking…") for line in t.due()] == [True]
    assert t.due() == []  # next one only after `every`
    t.answered("terminal:abc")
    assert t.waiting == {}


async def test_no_reply_names_the_likeliest_cause(bus: Bus) -> None:
    assert "published no status" in await progress.why_no_reply(bus)
    await bus.kv_put(bus.subjects.kv_state, "supervisor", status(True, False, False))
    assert (await progress.why_no_reply(bus)).startswith("not ready: planner, llm")
    await bus.kv_put(bus.subjects.kv_state, "supervisor", status(True, True))
    assert "logs/llm.log" in await progress.why_no_reply(bus)
