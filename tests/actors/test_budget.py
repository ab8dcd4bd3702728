"""Budgets end to end through real actors and the scripted model (tokens = characters / 4):
session pause and renewal, the daily stop for user turns and background work until the next
day (an injected clock, no sleeping), the 70/85/95 % warnings, per-task budgets that skip a task
without failing it, and the runaway guard."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from bus import Bus
from contracts import Sink, TaskOutcome, TurnRequest
from contracts.config import Settings
from state import budget
from state.holds import task_status
from supervisor.flatline.policy import Flatline
from supervisor.process.announce import Announcer
from tests.actors.harness import ALL, actors, chat
from tests.fakes.llm_servers import FakeLLM

SettingsFor = Callable[..., Settings]
MODEL = {"WM__MODELS__DEFAULT": "openai/test-model"}


async def wait_for(check: Any, timeout: float = 30) -> Any:
    async with asyncio.timeout(timeout):
        while True:
            if value := await check():
                return value
            await asyncio.sleep(0.1)


def system_of(request: dict[str, Any]) -> str:
    return str(request["messages"][0]["content"])


async def test_a_spent_session_pauses_and_the_next_message_renews_it(
    fake: FakeLLM, settings_for: SettingsFor, bus: Bus
) -> None:
    prices = json.dumps({"openai/test-model": {"input": 1000, "output": 2000}})
    settings = settings_for(**MODEL, WM__BUDGET__MAX_TOKENS_PER_SESSION="50",
                            WM__BUDGET__PRICES=prices)
    async with actors(settings, *ALL), chat(settings) as c:
        assert await c.ask("first") == "echo: first"  # nothing spent before it: answered
        calls = len(fake.requests)
        paused = await c.ask("second")
        assert "Session token budget reached" in paused and "Send another message" in paused
        assert len(fake.requests) == calls  # no model call while paused
        report = await c.ask("/budget")
        assert "This session: ⏸ paused" in report and "Used today by: user " in report
        assert "Estimated cost: $" in report and "renews at" in report
        # The next message renews the allowance and the conversation goes on, history kept.
        assert await c.ask("third") == "echo: third"
        contents = [m.get("content") for m in fake.requests[-1]["messages"]]
        assert "first" in contents and "echo: first" in contents
        # Spent again; /reset clears the history and renews it too.
        assert "Session token budget reached" in await c.ask("fourth")
        assert "session budget starts afresh" in await c.ask("/reset")
        assert await c.ask("fifth") == "echo: fifth"
        assert "first" not in [m.get("content") for m in fake.requests[-1]["messages"]]
    record = await budget.usage(bus, budget.session_key("terminal:owner"))
    assert record.renewals == 2 and record.total > record.tokens > 0
    assert record.paused == "" and record.cost > 0


async def test_warnings_at_70_85_and_95_percent_reach_the_model(
    fake: FakeLLM, settings_for: SettingsFor, bus: Bus
) -> None:
    settings = settings_for(**MODEL, WM__BUDGET__MAX_TOKENS_PER_DAY="1000000",
                            WM__BUDGET__MAX_TOKENS_PER_SESSION="2000000")
    day = budget.day_key()
    async with actors(settings, *ALL), chat(settings) as c:
        await c.ask("fresh")
        assert "Budget at" not in system_of(fake.requests[-1])
        for share, words in ((70, "Consider wrapping up or summarizing."),
                             (85, "Finish current task. Avoid new tool calls."),
                             (95, "Send final response now. Next message will fail.")):
            await budget.add(bus, day, share * 10_000 - await budget.used(bus, day))
            await c.ask(f"at {share}")
            system = system_of(fake.requests[-1])
            assert f"[System: Budget at {share}%. {words}] (daily budget: " in system
        # The session's own share is warned about the same way.
        await budget.add(bus, budget.session_key("terminal:owner"), 1_500_000)
        await c.ask("long session")
        assert "[System: Budget at 70%. Consider wrapping up or summarizing.] (session " \
               "budget: " in system_of(fake.requests[-1])


async def test_the_daily_budget_stops_turns_and_tasks_until_the_next_day(
    fake: FakeLLM, settings_for: SettingsFor, bus: Bus, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = [budget.clock()]
    monkeypatch.setattr(budget, "clock", lambda: clock[0])
    home = settings_for().home
    (home / "agent.toml").write_text(
        "[heartbeat]\ninterval_secs = 0.3\n[[scheduled_tasks]]\nname = 'tick'\nevery = '1s'\n"
        "prompt = 'tick report'\nsink = 'terminal:reports'\n")
    settings = settings_for(**MODEL, WM__BUDGET__MAX_TOKENS_PER_DAY="1000")
    await budget.add(bus, budget.day_key(), 1000, "user")  # today is spent

    async def skipped() -> bool:
        raw = await bus.kv_get(bus.subjects.kv_state, "schedule")
        jobs = json.loads(raw)["jobs"] if raw else []
        return bool(jobs) and jobs[0]["outcome"] == "skipped (budget)"

    async with chat(settings, "reports") as reports, chat(settings) as c, \
            actors(settings, *ALL, "heartbeat"):
        stopped = await c.ask("hello")
        assert "Daily token budget reached" in stopped and "back tomorrow" in stopped
        assert "renews at" in stopped
        await wait_for(skipped)
        assert fake.requests == []  # neither the user nor the task reached the model
        assert "spent: model calls stop" in await c.ask("/budget")
        clock[0] += 86_400  # the next day
        assert await c.ask("hello again") == "echo: hello again"
        tick = await reports.next(("reply",), timeout=30)
        assert tick.text == "echo: [Scheduled task] tick report"
    today = await budget.usage(bus, budget.day_key())
    assert today.by_purpose.get("user") and today.by_purpose.get("heartbeat")


async def _task_turn(bus: Bus, task: str, i: int, prompt: str, budget_tokens: int) -> TaskOutcome:
    turn = TurnRequest(id=f"task:{task}:{i}", session=f"task:{task}", principal="heartbeat",
                       text=prompt, reply_to=Sink(channel="terminal", chat="reports"),
                       is_owner=True, origin="schedule", budget_tokens=budget_tokens)
    psub = await bus.js.pull_subscribe(f"{bus.subjects.p}.evt.task.outcome.{task}",
                                       stream=bus.subjects.stream_evt)
    await bus.publish(bus.subjects.inbound("schedule", task), turn)
    while True:
        msgs = await psub.fetch(1, timeout=60)
        out = msgspec.json.decode(msgs[0].data, type=TaskOutcome)
        if out.turn_id == turn.id:
            await psub.unsubscribe()
            return out


async def test_a_task_over_its_budget_is_skipped_not_disabled_but_failures_still_count(
    fake: FakeLLM, settings_for: SettingsFor, bus: Bus
) -> None:
    settings = settings_for(**MODEL)
    flatline = Flatline(settings, bus, Announcer(settings, bus))
    async with chat(settings, "reports") as reports, actors(settings, *ALL):
        for i in range(4):  # more than supervisor.flatline.task_failures (3)
            out = await _task_turn(bus, "digest", i, "run: echo fetched", budget_tokens=50)
            assert out.skipped and not out.ok
            await flatline.on_task_outcome(out)
        stopped = await reports.next(("reply",), timeout=30)
        assert "The scheduled task digest stopped" in stopped.text
        assert "budget of 50" in stopped.text
        record = await task_status(bus, "digest")
        assert record.status == "enabled" and record.failures == 0
        assert not (Path(settings.home) / "workspace" / "fetched").exists()
        for i in range(3):  # a failing task is still disabled after three failures
            out = await _task_turn(bus, "broken", i, "status:400", budget_tokens=0)
            assert not out.ok and not out.skipped
            await flatline.on_task_outcome(out)
    assert (await task_status(bus, "broken")).status == "disabled"
    day = await budget.usage(bus, budget.day_key())
    assert day.by_purpose.get("heartbeat") and "user" not in day.by_purpose


async def test_the_runaway_guard_stops_repeated_calls_and_long_turns(
    fake: FakeLLM, settings_for: SettingsFor
) -> None:
    settings = settings_for(**MODEL)
    async with actors(settings, *ALL), chat(settings) as c:
        reply = await c.ask("loop: echo again")
        assert "I stopped this turn" in reply and "same arguments 3 times" in reply
        assert len(fake.requests) == 3  # the third identical call was not run
        results = [m for m in fake.requests[-1]["messages"] if m["role"] == "tool"]
        assert len(results) == 2 and all("again" in str(m["content"]) for m in results)
    settings = settings_for(**MODEL, WM__BUDGET__MAX_TOKENS_PER_TURN="100")
    async with actors(settings, *ALL), chat(settings) as c:
        reply = await c.ask("run: touch ceiling-hit")
        assert "per-turn ceiling of 100" in reply and "budget.max_tokens_per_turn" in reply
        assert not (Path(settings.home) / "workspace" / "ceiling-hit").exists()
