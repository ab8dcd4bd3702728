"""Compaction at 60 % of the session budget (seed 000): a 200-turn conversation keeps its first
facts through the rolling summary and its model requests stay small. Real planner, llm and
memory actors on the real nats-server, the scripted OpenAI-compatible model; turns are queued
on the session as a fast typist would send them (no channel: the planner runs them in order)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import msgspec

from bus import Bus
from bus.streams import Delivery
from contracts import Sink, TurnRequest
from contracts.config import Settings
from state import budget
from tests.actors.harness import actors
from tests.fakes.llm_servers import FakeLLM

SettingsFor = Callable[..., Settings]
SESSION_BUDGET = 1_000_000
KEEP = 6


async def test_two_hundred_turns_keep_the_first_facts_and_requests_stay_bounded(
    fake: FakeLLM, settings_for: SettingsFor, bus: Bus,
) -> None:
    settings = settings_for(WM__MODELS__DEFAULT="openai/test-model",
                            WM__BUDGET__MAX_TOKENS_PER_SESSION=str(SESSION_BUDGET),
                            WM__MEMORY__COMPACT_KEEP=str(KEEP),
                            WM__MODELS__EMBEDDING="none")  # recall by full text: faster
    sink = Sink(channel="terminal", chat="long")
    replies: set[str] = set()
    seen = asyncio.Event()
    want = [0]

    async def on_reply(delivery: Delivery) -> None:
        reply = msgspec.json.decode(delivery.data)
        if reply.get("type") == "turn.reply":
            replies.add(reply["turn_id"])
            if len(replies) >= want[0]:
                seen.set()

    async def say(first: int, last: int) -> None:
        want[0] = last
        seen.clear()
        for i in range(first, last):
            text = {0: "note that the locker code is 4711",
                    201: "what is the locker code?"}.get(i, f"small talk number {i}")
            turn = TurnRequest(id=f"terminal:long:{i}", session="terminal:long",
                               principal="terminal:owner", is_owner=True, text=text,
                               reply_to=sink)
            await bus.publish(bus.subjects.inbound("terminal", "long"), turn)
        async with asyncio.timeout(180):
            await seen.wait()

    await bus.subscribe(bus.subjects.outbound("terminal", "long"), on_reply)
    async with actors(settings, "planner", "llm", "memory"):
        await say(0, 30)  # under the share: history grows to its length limit (40 messages)
        before = [r for r in fake.requests if not _summary(r)][-5:]
        used = await budget.used(bus, budget.session_key("terminal:long"))
        # the conversation has used 60 % of the session budget from here on
        await budget.add(bus, budget.session_key("terminal:long"),
                         int(0.6 * SESSION_BUDGET) - used)
        await say(30, 201)
        mark = len(fake.requests)
        await say(201, 202)  # the 202nd turn asks about the first fact
    answers = [r for r in fake.requests if not _summary(r)]
    last = [r for r in fake.requests[mark:] if not _summary(r)][-1]
    system = last["messages"][0]["content"]
    assert "# Earlier in this conversation (summary)" in system and "4711" in system
    assert min(len(r["messages"]) for r in before) >= 30  # no compaction below the share
    # past it the history stays within twice compact_keep (+ system and the new message)
    assert max(len(r["messages"]) for r in answers[-100:]) <= 2 * KEEP + 2
    sizes = [len(json.dumps(r["messages"])) for r in answers[-100:]]
    assert max(sizes) < max(len(json.dumps(r["messages"])) for r in before) + 4000
    assert len(replies) == 202


def _summary(request: dict[str, object]) -> bool:
    messages = request["messages"]
    assert isinstance(messages, list)
    return "[conversation summary]" in messages[0]["content"]
