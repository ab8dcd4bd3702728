"""Delegation through real actors (in-process), real NATS and the scripted model: a DAG of
sub-sessions completes with fan-in, a failing node cancels its dependents, a cycle is refused,
a kill -9 of the planner mid-delegation loses and duplicates nothing, and an answer claiming
an action no tool did is corrected once."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from actors.planner.actor import PlannerActor
from actors.planner.state import SessionState, load
from bus import Bus
from bus.history import read_stream
from contracts import short_hash
from contracts.config import Settings
from state import budget
from supervisor.cli.replay.source import from_history
from supervisor.cli.replay.timeline import listing, render_listing
from tests.actors.harness import ALL, actors, chat
from tests.fakes.llm_servers import FakeLLM

SettingsFor = Callable[..., Settings]
MODEL = {"WM__MODELS__DEFAULT": "openai/test-model", "WM__EXECUTOR__MODE": "direct"}


def delegate(*tasks: dict[str, Any]) -> str:
    return "tool:delegate " + json.dumps({"tasks": list(tasks)})


def last(request: dict[str, Any]) -> str:
    return str(request["messages"][-1].get("content", ""))


def asked(fake: FakeLLM, task: str) -> int:
    """Sub-agents' model requests whose last message is a user message ending with `task` (a
    sub-task's text puts its task last)."""
    return sum(1 for r in fake.requests
               if "sub-agent" in r["messages"][0]["content"]
               and r["messages"][-1]["role"] == "user" and last(r).endswith(task))


async def until(check: Callable[[], bool], timeout: float = 60) -> None:
    async with asyncio.timeout(timeout):
        while not check():  # noqa: ASYNC110 - the fake model's request log has no event
            await asyncio.sleep(0.05)


async def stored(bus: Bus, stream: str, kind: str) -> list[dict[str, Any]]:
    out = []
    async for m in read_stream(bus, stream):
        payload = msgspec.json.decode(m.data)
        if isinstance(payload, dict) and payload.get("type") == kind:
            out.append(payload)
    return out


async def live_keys(bus: Bus, prefix: str) -> set[str]:
    """wm_sessions keys holding a value (a deleted key is listed until it ages out)."""
    bucket = bus.subjects.kv_sessions
    return {k for k in await bus.kv_keys(bucket, prefix) if await bus.kv_get(bucket, k)}


async def finished(bus: Bus, session: str) -> bool:
    """Whether the session's saved state has its delegated turn finished."""
    data = await bus.kv_get(bus.subjects.kv_sessions, f"s.{short_hash(session, 32)}")
    state = load(data, session)
    return state.active is None and f"{session}:task" in state.recent


async def test_three_node_dag_fans_in_and_reports_to_the_parent(
    fake: FakeLLM, settings_for: SettingsFor, bus: Bus
) -> None:
    settings = settings_for(**MODEL)
    dag = delegate(
        {"id": "a", "role": "worker",
         "task": 'tool:execute_command {"command": "printf %s-%s alpha 42"}'},
        {"id": "b", "role": "researcher", "task": "say beta"},
        {"id": "c", "role": "coder", "task": "combine", "depends_on": ["a", "b"]},
    )
    async with actors(settings, *ALL), chat(settings) as c:
        first = await c.ask(dag, timeout=60)
        assert "Delegated" in first  # the parent's turn went on at once
        event = await c.next(timeout=90)
    # The results come back as one event turn of the parent session, all three in it.
    assert "3 done" in event.text
    assert "alpha-42" in event.text and "echo: say beta" in event.text
    # Fan-in: c ran once, after a and b, with both results in its task.
    assert asked(fake, "combine") == 1
    c_request = next(r for r in fake.requests if last(r).endswith("# Your task\ncombine"))
    task = c_request["messages"][-1]["content"]
    assert "# Result of a" in task and "alpha-42" in task and "echo: say beta" in task
    # Each role's prompt and tool profile: the researcher is offered no shell.
    b_request = next(r for r in fake.requests
                     if r["messages"][-1].get("content") == "say beta")
    assert "research sub-agent" in b_request["messages"][0]["content"]
    assert "execute_command" not in {t["function"]["name"] for t in b_request.get("tools", [])}
    # A tree on the bus: every sub-turn names its parent.
    turns = await stored(bus, bus.subjects.stream_in, "turn.request")
    subs = [t for t in turns if t.get("delegation")]
    assert sorted(t["delegation"]["node"] for t in subs) == ["a", "b", "c"]
    parent = next(t for t in turns if not t.get("delegation"))
    assert {t["delegation"]["parent_turn"] for t in subs} == {parent["id"]}
    assert all(t["session"].startswith(parent["id"]) for t in subs)
    # The sub-agents' model calls were charged to the chat that delegated them.
    for sub in subs:
        assert await budget.used(bus, budget.session_key(sub["session"])) == 0
    parent_usage = await budget.usage(bus, budget.session_key(parent["session"]))
    assert parent_usage.tokens == parent_usage.by_purpose["user"] > 0
    sub_tokens = sum(len(m.get("content") or "") for r in fake.requests
                     if "sub-agent" in r["messages"][0]["content"] for m in r["messages"]) // 4
    assert parent_usage.tokens > sub_tokens  # the fake counts characters // 4
    # ... and `wintermute replay --list` shows it as one.
    rows = listing(await from_history(bus))
    tree = [(r["depth"], r["parent"] == parent["id"], r["outcome"]) for r in rows
            if r["session"] != parent["session"]]
    assert tree == [(1, True, "answered its workflow")] * 3
    assert rows[0]["turn"] == parent["id"] and rows[0]["depth"] == 0
    assert "└ " + subs[0]["id"] in render_listing(rows)


async def test_a_failing_node_cancels_its_dependents_with_the_reason(
    fake: FakeLLM, settings_for: SettingsFor
) -> None:
    settings = settings_for(**MODEL)
    dag = delegate(
        {"id": "a", "role": "worker", "task": "say fine"},
        {"id": "b", "role": "worker", "task": "status:400"},
        {"id": "c", "role": "worker", "task": "after b", "depends_on": ["b"]},
        {"id": "d", "role": "worker", "task": "after c", "depends_on": ["c", "a"]},
    )
    async with actors(settings, *ALL), chat(settings) as c:
        await c.ask(dag, timeout=60)
        event = await c.next(timeout=90)
    assert "1 done" in event.text and "1 failed" in event.text and "2 cancelled" in event.text
    assert "## b (worker) failed" in event.text
    assert "## c (worker) cancelled: its dependency b did not complete" in event.text
    assert "## d (worker) cancelled: its dependency c did not complete" in event.text
    assert asked(fake, "after b") == asked(fake, "after c") == 0  # nothing behind it ran


async def test_a_cycle_is_refused_with_a_clear_message(
    fake: FakeLLM, settings_for: SettingsFor
) -> None:
    settings = settings_for(**MODEL)
    dag = delegate(
        {"id": "a", "role": "worker", "task": "first", "depends_on": ["b"]},
        {"id": "b", "role": "worker", "task": "second", "depends_on": ["a"]},
    )
    async with actors(settings, *ALL), chat(settings) as c:
        reply = await c.ask(dag, timeout=60)
        assert "Not delegated" in reply and "cycle (a -> b -> a)" in reply
        assert await c.ask("still there?") == "echo: still there?"
    assert asked(fake, "first") == asked(fake, "second") == 0


async def test_planner_killed_mid_delegation_loses_and_duplicates_nothing(
    fake: FakeLLM, settings_for: SettingsFor, bus: Bus
) -> None:
    settings = settings_for(**MODEL)
    dag = delegate(
        {"id": "a", "role": "worker", "task": "slow:3"},
        {"id": "b", "role": "worker", "task": "then", "depends_on": ["a"]},
    )
    async with actors(settings, *ALL) as running, chat(settings) as c:
        await c.ask(dag, timeout=60)
        await until(lambda: asked(fake, "slow:3") == 1)
        await running.crash("planner")  # node a's model call is in flight
        await running.start("planner")
        event = await c.next(timeout=90)
        assert "2 done" in event.text and "slept 3" in event.text
        await c.ask("and now?")  # the session goes on; a late duplicate would show below
    assert asked(fake, "slow:3") == 1 and asked(fake, "then") == 1
    replies = await stored(bus, bus.subjects.stream_out, "turn.reply")
    events = [r for r in replies if "Delegated tasks finished" in r["text"]]
    assert len(events) == 1
    assert len(replies) == 3  # the delegation, its results, "and now?"
    results = await stored(bus, bus.subjects.stream_evt, "tool.result")
    assert len([r for r in results if r["id"].endswith(":delegated")]) == 1


async def test_planner_killed_between_settling_a_node_and_saving_its_session(
    fake: FakeLLM, settings_for: SettingsFor, bus: Bus, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worst moment: the workflow already says a is done and b was published, but a's
    session state was not saved; a's last model answer is delivered again after the restart."""
    settings = settings_for(**MODEL)
    reached, hold = asyncio.Event(), asyncio.Event()
    save = PlannerActor._save

    async def stop_once(self: PlannerActor, state: SessionState) -> None:
        if state.session.endswith("~a") and state.active is None and not reached.is_set():
            reached.set()
            await hold.wait()  # killed here, before the save
        await save(self, state)

    monkeypatch.setattr(PlannerActor, "_save", stop_once)
    dag = delegate({"id": "a", "role": "worker", "task": "first"},
                   {"id": "b", "role": "worker", "task": "second", "depends_on": ["a"]})
    async with actors(settings, *ALL) as running, chat(settings) as c:
        await c.ask(dag, timeout=60)
        async with asyncio.timeout(60):
            await reached.wait()
        await running.crash("planner")
        await running.start("planner")
        event = await c.next(timeout=90)
        # a's last answer was applied again after the restart, and its session saved.
        node_a = event.ref.split(":delegated")[0] + "~a"  # <workflow>~a
        async with asyncio.timeout(60):
            while not await finished(bus, node_a):  # noqa: ASYNC110 - a KV value, no event
                await asyncio.sleep(0.1)
    assert "2 done" in event.text
    assert asked(fake, "first") == 1 and asked(fake, "second") == 1
    results = await stored(bus, bus.subjects.stream_evt, "tool.result")
    assert len([r for r in results if r["id"].endswith(":delegated")]) == 1


async def test_an_unbacked_claim_is_corrected_once(
    fake: FakeLLM, settings_for: SettingsFor
) -> None:
    settings = settings_for(**MODEL)
    async with actors(settings, *ALL), chat(settings) as c:
        reply = await c.ask("I've saved your notes")
    # The fake echoes: the first answer claims a save, the correction is the next user
    # message, and the second answer (which echoes the correction) is final: one retry only.
    assert reply.startswith("echo: [Correction] Your answer says you saved or remembered")
    assert len([r for r in fake.requests if r["messages"][-1]["content"].startswith(
        "[Correction]")]) == 1
    settings = settings_for(**MODEL, WM__PLANNER__TURING_PROTOCOL="false")
    async with actors(settings, *ALL), chat(settings, "other") as c:
        assert await c.ask("I sent it") == "echo: I sent it"



async def test_a_node_past_its_deadline_continues_then_passes_on_its_partial_results(
    fake: FakeLLM, settings_for: SettingsFor
) -> None:
    """A sub-agent stuck in a tool loop runs out of time twice (the run and one continuation);
    what its tools found is not lost: the dependent gets it and so does the parent."""
    settings = settings_for(**MODEL, WM__BUDGET__MAX_REPEATED_TOOL_CALLS="0",
                            WM__BUDGET__MAX_TOOL_CALLS_PER_TURN="1000",
                            WM__PLANNER__SWEEP_EVERY_SECS="0.2",
                            # no budget slice: a fast machine loops often enough in 2.5 s to
                            # spend one, and the node must run out of time, not of tokens
                            WM__DELEGATION__BUDGET_TOKENS="0")
    dag = delegate(
        {"id": "a", "role": "worker", "task": "loop: sleep 0.1; printf found-%s 7",
         "deadline_secs": 2.5},
        {"id": "b", "role": "worker", "task": "use it", "depends_on": ["a"]},
    ).replace("loop:", "loop\\u003a")  # a loop for the sub-agent, not for the parent's model
    async with actors(settings, *ALL), chat(settings) as c:
        await c.ask(dag, timeout=60)
        event = await c.next(timeout=90)
    assert "1 timed out, 1 done" in event.text
    use = next(r for r in fake.requests if last(r).endswith("# Your task\nuse it"))
    task = use["messages"][-1]["content"]
    assert "# Result of a (partial: it ran out of time)" in task and "found-7" in task
    # the continuation was told what the first run found
    assert any("continue from what it found" in last(r) for r in fake.requests)


async def test_a_finished_workflow_and_its_sub_sessions_are_collected(
    fake: FakeLLM, settings_for: SettingsFor, bus: Bus
) -> None:
    """Past `keep_finished_hours` a finished workflow's record and its sub-sessions' state
    leave wm_sessions; the parent's session and the history stay; a second round is a no-op."""
    settings = settings_for(**MODEL, WM__DELEGATION__KEEP_FINISHED_HOURS="0")
    dag = delegate({"id": "a", "role": "worker", "task": "say one"},
                   {"id": "b", "role": "worker", "task": "say two", "depends_on": ["a"]})
    bucket = bus.subjects.kv_sessions
    async with actors(settings, *ALL) as running, chat(settings) as c:
        await c.ask(dag, timeout=60)
        event = await c.next(timeout=90)
        assert "2 done" in event.text
        [wf_key] = await bus.kv_keys(bucket, "wf.")
        sessions_before = await live_keys(bus, "s.")
        planner = running.procs["planner"][0].actor
        assert isinstance(planner, PlannerActor)
        assert await planner._collect_workflows(planner.clock()) == 1
        assert await bus.kv_get(bucket, wf_key) is None  # a delete marker is all that is left
        sessions_after = await live_keys(bus, "s.")
        gone = sessions_before - sessions_after
        assert len(gone) == 2 and len(sessions_after) >= 1  # the two sub-sessions only
        assert await planner._collect_workflows(planner.clock()) == 0
        # the chat goes on as before
        assert "echo: still here" in await c.ask("still here", timeout=60)
    turns = await stored(bus, bus.subjects.stream_in, "turn.request")
    assert sum(1 for t in turns if t.get("delegation")) == 2  # the history is kept
