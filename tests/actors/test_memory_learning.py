"""The agent learns: the observer sends an idle conversation to the model, the memory actor
validates what came back and promotes it by policy. Real actors, real nats-server, the local
Telegram Bot API and the scripted OpenAI-compatible model (its "[memory extraction]" rule)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from actors.approval.actor import short_id
from actors.memory._learn import parse
from bus import Bus
from contracts import (
    ApprovalDecision,
    MemoryAdmin,
    MemoryAnswer,
    MemoryPropose,
    MemoryRecord,
    Sink,
    TurnRequest,
)
from contracts.config import Settings
from supervisor.cli.memory import ask
from tests.actors.harness import ALL, actors, chat
from tests.fakes.llm_servers import FakeLLM
from tests.fakes.telegram_server import FakeTelegram

SettingsFor = Callable[..., Settings]
OWNER_ID, FRIEND = 111, 222


def test_parse_takes_a_json_list_and_refuses_anything_else() -> None:
    items = parse('Here you go:\n```json\n[{"content": "Likes tea", "kind": "preference", '
                  '"confidence": 0.7}]\n```')
    assert [(i.content, i.kind, i.confidence) for i in items] == [("Likes tea", "preference", 0.7)]
    assert parse("[]") == []
    for bad, why in (("no list here", "no JSON list"), ('[{"kind": "fact"}]', "content"),
                     ('[{"content": "x", "kind": "gossip"}]', "gossip"),
                     ('[{"content": "x", "confidence": 7}]', "between 0 and 1"),
                     ('[{"content": ""}]', "1 to 500")):
        with pytest.raises(ValueError, match=why):
            parse(bad)


async def _admin(settings: Settings, action: str, **fields: Any) -> list[MemoryAnswer]:
    request = MemoryAdmin(id=f"cli:memory:{uuid.uuid4().hex}", action=action, **fields)
    return await ask(settings, request, 60)


async def _dead_letters(bus: Bus) -> list[dict[str, Any]]:
    return await _stored(bus, bus.subjects.stream_dlq)


async def _stored(bus: Bus, stream: str) -> list[dict[str, Any]]:
    info = await bus.js.stream_info(stream)
    out: list[dict[str, Any]] = []
    if info.state.messages:
        for seq in range(info.state.first_seq, info.state.last_seq + 1):
            with contextlib.suppress(Exception):
                out.append(json.loads((await bus.js.get_msg(stream, seq)).data))
    return out


async def until(check: Callable[[], Awaitable[Any]], timeout: float) -> Any:
    """Poll `check` until it returns something true (a generous deadline, not a fixed sleep)."""
    async with asyncio.timeout(timeout):
        while True:
            if value := await check():
                return value
            await asyncio.sleep(0.2)


async def _malformed(bus: Bus) -> bool:
    return any("malformed" in d["reason"] for d in await _dead_letters(bus))


async def test_proposals_are_promoted_by_policy_and_malformed_ones_dead_lettered(
    settings_for: SettingsFor, bus: Bus,
) -> None:
    settings = settings_for(WM__MEMORY__POLICY='{"fact": "auto", "procedure": "suggest", '
                                              '"preference": "off"}')
    text = json.dumps([
        {"content": "The owner's car is a red Volvo", "kind": "fact", "confidence": 0.95},
        {"content": "The owner perhaps likes jazz", "kind": "fact", "confidence": 0.4},
        {"content": "Deploy with just deploy", "kind": "procedure", "confidence": 0.99},
        {"content": "Prefers tea", "kind": "preference", "confidence": 0.99},
        {"content": "Their sister is Ana", "kind": "correction", "confidence": 1.0},
    ])
    owner = {"session": "terminal:owner", "principal": "terminal:owner", "is_owner": True}
    async with actors(settings, "memory", "approval"):
        for i, body in enumerate((text, text, "I think the user likes things.")):
            msg = MemoryPropose(id=f"idle:x:{i}:learn:propose", source="observer:test", text=body,
                                **owner)
            await bus.publish(bus.subjects.cmd("memory", "propose"), msg)
        await until(lambda: _malformed(bus), 30)
        active = await _admin(settings, "list")
        waiting = await _admin(settings, "pending")
        jazz = next(r.id for r in waiting[0].records if "jazz" in r.content)
        promoted = await _admin(settings, "promote", target=jazz)
        # the owner approves the suggested procedure, as the Approve button does
        deploy = next(r.id for r in waiting[0].records if "deploy" in r.content)
        decision = ApprovalDecision(id="tg:1:decision", approval_id=short_id(
            f"memory:{deploy}:approve"), approved=True, principal="terminal:owner", is_owner=True)
        await bus.publish(bus.subjects.cmd("approval", "decide"), decision)

        async def approved() -> bool:
            return any("deploy" in r.content for r in (await _admin(settings, "list"))[0].records)

        await until(approved, 30)
        after = await _admin(settings, "list")
        prompts = [p for p in await _stored(bus, bus.subjects.stream_out)
                   if p["type"] == "approval.prompt"]

    assert sorted(r.content for r in active[0].records) == [
        "The owner's car is a red Volvo", "Their sister is Ana"]  # sent twice, saved once
    assert {r.scope for r in active[0].records} == {"user:owner"}
    assert all(r.source == "observer:test" for r in active[0].records)
    assert sorted(r.content for r in waiting[0].records) == [
        "Deploy with just deploy", "The owner perhaps likes jazz"]
    assert promoted[0].ok and "jazz" in " ".join(r.content for r in after[0].records)
    assert len(after[0].records) == 4
    # both waiting items about the owner were put to the owner (the jazz one: low confidence)
    assert sorted("deploy" in p["summary"] for p in prompts) == [False, True]
    assert all(p["sink"]["chat"] == "owner" for p in prompts)
    audit = sorted((e["change"], e["by"]) for e in await _stored(bus, bus.subjects.stream_evt)
                   if e["type"] == "memory.changed")
    assert audit == [("learned", "observer")] * 2 + [("promoted", "cli"),
                     ("promoted", "owner (approval)")] + [("proposed", "observer")] * 2
    letter = next(d for d in await _dead_letters(bus) if "malformed" in d["reason"])
    assert "no JSON list" in letter["reason"] and "likes things" in letter["payload"]


@pytest.mark.usefixtures("telegram_env")
async def test_facts_said_once_are_learned_and_recalled_later_for_that_person_only(
    tg: FakeTelegram, llm: FakeLLM, settings_for: SettingsFor, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", llm.url)
    settings = settings_for(
        WM__MODELS__DEFAULT="openai/test-model", WM__OBSERVER__IDLE_SECS="1",
        WM__CHANNELS__TELEGRAM__API_BASE_URL=tg.api_base_url,
        WM__CHANNELS__TELEGRAM__API_FILE_URL=tg.api_file_url,
        WM__CHANNELS__TELEGRAM__ALLOWED_USERS=f"[{OWNER_ID}, {FRIEND}]",
        WM__CHANNELS__TELEGRAM__POLL_TIMEOUT_SECS="2",
        WM__OWNER__PRINCIPALS=f'["telegram:{OWNER_ID}", "terminal:owner"]',
        WM__OWNER__SINK=f"telegram:{OWNER_ID}",
    )
    async def _learned() -> list[MemoryRecord]:
        return (await _admin(settings, "list"))[0].records

    async with actors(settings, *ALL, "observer"):
        tg.inject(tg.message(OWNER_ID, "by the way, my sister lives in Lisbon"))
        await tg.wait_for(lambda: tg.messages_to(OWNER_ID), timeout=60)
        learned = await until(_learned, 60)  # idle, extraction, promotion
        async with chat(settings) as terminal:  # the owner, another conversation
            mark = len(llm.requests)
            await terminal.ask("where does my sibling live?", timeout=60)
            owner_system = llm.requests[mark]["messages"][0]["content"]
        mark = len(llm.requests)
        tg.inject(tg.message(FRIEND, "where does my sibling live?"))
        await tg.wait_for(lambda: tg.messages_to(FRIEND), timeout=60)
        friend_requests = json.dumps(llm.requests[mark:])

    assert [(r.content, r.scope, r.source.startswith("observer:idle:")) for r in learned] == [
        ("by the way, my sister lives in Lisbon", "user:owner", True)]
    assert "my sister lives in Lisbon" in owner_system  # "sibling" found "sister"
    assert "Lisbon" not in friend_requests


async def test_learning_stops_with_one_notice_when_the_day_budget_is_spent(
    settings_for: SettingsFor, bus: Bus,
) -> None:
    from state import budget

    settings = settings_for(WM__OBSERVER__IDLE_SECS="0.5", WM__BUDGET__MAX_TOKENS_PER_DAY="100")
    await budget.add(bus, budget.day_key(), 150)
    sink = Sink(channel="terminal", chat="owner")
    async with actors(settings, "observer"):
        for chat in ("a", "b"):  # two conversations go idle
            turn = TurnRequest(id=f"terminal:{chat}:1", session=f"terminal:{chat}",
                               principal="terminal:owner", is_owner=True,
                               text="my cat is called Tom", reply_to=sink)
            await bus.publish(bus.subjects.inbound("terminal", chat), turn)

        async def idle_twice() -> bool:
            events = await _stored(bus, bus.subjects.stream_evt)
            return sum(e["type"] == "session.idle" for e in events) == 2

        await until(idle_twice, 30)
        await until(lambda: _notices(bus), 30)
        commands = await _stored(bus, bus.subjects.stream_cmd)
    notices = await _notices(bus)
    assert len(notices) == 1 and "stopped learning" in notices[0]["text"]
    assert not any(c["type"] == "llm.request" for c in commands)  # no model call was made


async def _notices(bus: Bus) -> list[dict[str, Any]]:
    return [p for p in await _stored(bus, bus.subjects.stream_out) if p["type"] == "notice"]


async def test_a_long_conversation_keeps_its_first_facts_through_the_summary(
    fake: FakeLLM, settings_for: SettingsFor, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """History holds 6 messages here (40 in production): 30 turns push the first ones out
    many times over, each time folded into the rolling summary; requests stay bounded."""
    import actors.planner.state as planner_state

    monkeypatch.setattr(planner_state, "HISTORY_MESSAGES", 6)
    settings = settings_for(WM__MODELS__DEFAULT="openai/test-model",
                            WM__OBSERVER__LEARN="false")
    async with actors(settings, *ALL), chat(settings) as c:
        await c.ask("note that the locker code is 4711")
        for i in range(30):
            await c.ask(f"small talk number {i}")
        mark = len(fake.requests)
        await c.ask("what is the locker code?")
    request = next(r for r in fake.requests[mark:]
                   if "[conversation summary]" not in r["messages"][0]["content"])
    system = request["messages"][0]["content"]
    assert "# Earlier in this conversation (summary)" in system and "4711" in system
    assert len(request["messages"]) <= 6 + 2  # system, kept history, the new question
    sizes = [len(json.dumps(r["messages"])) for r in fake.requests[-20:]]
    assert max(sizes) < 8000  # bounded, not growing with the conversation


async def test_a_reset_session_is_learned_from_like_an_idle_one(
    settings_for: SettingsFor, bus: Bus,
) -> None:
    """Archival (seed 002): `/reset` hands the conversation to extraction at once, without
    waiting for idle; the idle that follows finds nothing left to send."""
    from contracts import SessionReset

    settings = settings_for(WM__OBSERVER__IDLE_SECS="600")
    sink = Sink(channel="terminal", chat="owner")
    async with actors(settings, "observer"):
        turn = TurnRequest(id="terminal:r:1", session="terminal:r", principal="terminal:owner",
                           is_owner=True, text="my dog is called Rex", reply_to=sink)
        await bus.publish(bus.subjects.inbound("terminal", "r"), turn)
        # a reset before the turn was logged would find nothing: send it once the turn is seen
        await until(lambda: _logged(settings, "terminal:r:1"), 30)
        await bus.send(SessionReset(id="terminal:r:2:reset", session="terminal:r"))

        async def extraction() -> list[dict[str, Any]]:
            return [c for c in await _stored(bus, bus.subjects.stream_cmd)
                    if c["type"] == "llm.request" and c.get("purpose") == "observer"]

        asked = await until(extraction, 30)
    assert [a["id"] for a in asked] == ["terminal:r:2:reset:learn"]
    assert "my dog is called Rex" in asked[0]["messages"][1]["content"]


async def _logged(settings: Settings, msg_id: str) -> bool:
    path = settings.home / "logs" / "events.jsonl"
    return path.exists() and msg_id in path.read_text()
