"""The life of a fact: conflicts by strategy, corrections at once, versions, undo per audience,
and nightly dreaming. Real memory (and approval, heartbeat) actors on the real nats-server;
proposals are published as the observer publishes them."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from bus import Bus
from contracts import MemoryCommand, MemoryPropose, MemoryRecord, Sink
from contracts.config import Settings
from tests.actors.harness import actors
from tests.actors.test_memory_learning import _admin, _stored, until

SettingsFor = Callable[..., Settings]
OWNER = {"session": "terminal:owner", "principal": "terminal:owner", "is_owner": True}
FRIEND = {"session": "telegram:222", "principal": "telegram:222", "is_owner": False}


async def _propose(bus: Bus, n: int, *items: dict[str, Any], who: dict[str, Any] = OWNER
                   ) -> None:
    msg = MemoryPropose(id=f"idle:{who['session']}:{n}:learn:propose", source="observer:test",
                        text=json.dumps(list(items)), **who)
    await bus.publish(bus.subjects.cmd("memory", "propose"), msg)


async def _all(settings: Settings) -> dict[str, MemoryRecord]:
    """Every memory by content (archived, revoked and waiting ones too)."""
    answers = await _admin(settings, "export")
    return {r.content: r for a in answers for r in a.records}


def _status(records: dict[str, MemoryRecord]) -> dict[str, str]:
    return {c: r.status for c, r in records.items()}


async def _changes(bus: Bus) -> list[tuple[str, str]]:
    return [(e["change"], e["content"].split(" (merged")[0])
            for e in await _stored(bus, bus.subjects.stream_evt) if e["type"] == "memory.changed"]


async def _has(settings: Settings, content: str, status: str) -> bool:
    found = (await _all(settings)).get(content)
    return found is not None and found.status == status


async def _answered(bus: Bus, command_id: str) -> str:
    """The text of the notice answering a chat's /memory command (once it is done)."""
    return next((p["text"] for p in await _stored(bus, bus.subjects.stream_out)
                 if p["type"] == "notice" and p["id"] == f"{command_id}:answer"), "")


VOLVO = {"content": "The owner's car is a red Volvo", "key": "car", "confidence": 0.95}
TESLA = {"content": "The owner's car is a blue Tesla", "key": "Car", "confidence": 0.95}


async def test_overwrite_latest_supersedes_and_undo_reverts_per_audience(
    settings_for: SettingsFor, bus: Bus,
) -> None:
    settings = settings_for(WM__MEMORY__CONFLICT="overwrite_latest")
    sink = Sink(channel="terminal", chat="owner")
    async with actors(settings, "memory"):
        await _propose(bus, 1, VOLVO)
        await until(lambda: _has(settings, VOLVO["content"], "active"), 30)
        await _propose(bus, 1, {"content": "Likes tea", "kind": "preference",
                                "confidence": 0.9}, who=FRIEND)
        await _propose(bus, 2, TESLA)
        await until(lambda: _has(settings, VOLVO["content"], "archived"), 30)
        versions = await _all(settings)
        # the friend's chat undoes the friend's last change only, never the owner's
        friend_undo = MemoryCommand(id="tg:9:memory", action="undo", reply_to=sink, **FRIEND)
        await bus.publish(bus.subjects.cmd("memory", "command"), friend_undo)
        await until(lambda: _answered(bus, friend_undo.id), 30)
        undone = await _admin(settings, "undo", scope="user:owner")
        after_undo = _status(await _all(settings))
        owner_undo = MemoryCommand(id="terminal:9:memory", action="undo", reply_to=sink, **OWNER)
        await bus.publish(bus.subjects.cmd("memory", "command"), owner_undo)
        await until(lambda: _answered(bus, owner_undo.id), 30)
        nothing = await _admin(settings, "undo", scope="user:owner")
        notices = [p["text"] for p in await _stored(bus, bus.subjects.stream_out)
                   if p["type"] == "notice"]
        changes = await _changes(bus)

    tesla, volvo = versions[TESLA["content"]], versions[VOLVO["content"]]
    assert (tesla.status, tesla.version, tesla.replaces, tesla.key) == (
        "active", 2, volvo.id, "car")
    assert (volvo.status, volvo.version) == ("archived", 1)
    assert "Undid" in undone[0].text and tesla.id in undone[0].text
    assert after_undo == {VOLVO["content"]: "active", TESLA["content"]: "revoked",
                          "Likes tea": "revoked"}
    assert "no change to undo" in nothing[0].text
    assert any("Likes tea" in n for n in notices)  # the friend's chat was told what was undone
    assert ("superseded", VOLVO["content"]) in changes
    assert [c for c in changes if c[0] == "undone"] == [
        ("undone", "Likes tea"), ("undone", VOLVO["content"]), ("undone", TESLA["content"]),
        ("undone", VOLVO["content"])]


async def test_ask_puts_a_contradiction_to_the_owner_and_a_correction_applies_at_once(
    settings_for: SettingsFor, bus: Bus,
) -> None:
    settings = settings_for()  # memory.conflict = "ask" by default
    green = {"content": "Actually the car is green", "kind": "correction", "key": "car",
             "confidence": 0.6}
    async with actors(settings, "memory", "approval"):
        await _propose(bus, 1, VOLVO)
        await until(lambda: _has(settings, VOLVO["content"], "active"), 30)
        await _propose(bus, 2, TESLA)
        await until(lambda: _has(settings, TESLA["content"], "proposed"), 30)

        async def prompt() -> list[dict[str, Any]]:
            return [p for p in await _stored(bus, bus.subjects.stream_out)
                    if p["type"] == "approval.prompt"]

        asked = await until(prompt, 30)
        still = _status(await _all(settings))
        waiting = (await _all(settings))[TESLA["content"]]
        await _admin(settings, "promote", target=waiting.id)
        promoted = _status(await _all(settings))
        await _propose(bus, 3, green)
        await until(lambda: _has(settings, TESLA["content"], "archived"), 30)  # the last step
        corrected = await _all(settings)
        # someone else's contradiction waits in `pending`, never pushed into the owner's chat
        await _propose(bus, 1, {"content": "Rides a bike", "key": "ride", "confidence": 0.9},
                       who=FRIEND)
        await _propose(bus, 2, {"content": "Rides a scooter", "key": "ride", "confidence": 0.9},
                       who=FRIEND)
        await until(lambda: _has(settings, "Rides a scooter", "proposed"), 30)
        pending = [r.content for r in (await _admin(settings, "pending"))[0].records]
        prompts = await prompt()

    assert "Replace" in asked[0]["summary"] and "red Volvo" in asked[0]["summary"]
    assert still == {VOLVO["content"]: "active", TESLA["content"]: "proposed"}
    assert promoted == {VOLVO["content"]: "archived", TESLA["content"]: "active"}
    assert _status(corrected) == {VOLVO["content"]: "archived", TESLA["content"]: "archived",
                                  green["content"]: "active"}
    assert corrected[green["content"]].version == 3
    assert corrected[green["content"]].kind == "fact"
    assert pending == ["Rides a scooter"] and len(prompts) == 1


async def test_dreaming_merges_duplicates_decays_stale_memories_and_undo_restores_them(
    settings_for: SettingsFor, bus: Bus, clean_provider_env: None,
) -> None:  # no model anywhere: dreaming merges without one
    settings = settings_for(WM__MEMORY__CONFLICT="keep_both")
    old = time.time() - 100 * 86400
    records = [
        MemoryRecord(id="old-weak", content="Once asked about ferries", scope="user:owner",
                     created=old, confidence=0.35),
        MemoryRecord(id="old-strong", content="Was born in Porto", scope="user:owner",
                     created=old, confidence=1.0),
    ]
    async with actors(settings, "memory"):
        await _admin(settings, "import", records=records)
        await _propose(bus, 1, {"content": "Drinks green tea", "key": "drink",
                                "confidence": 0.9})
        await _propose(bus, 2, {"content": "drinks GREEN tea.", "key": "drink",
                                "confidence": 0.95})
        await until(lambda: _has(settings, "drinks GREEN tea.", "active"), 30)
        both = _status(await _all(settings))  # keep_both: a conflict keeps the two
        dreamt = await _admin(settings, "dream")
        after = await _all(settings)
        undone = await _admin(settings, "undo")
        restored = _status(await _all(settings))

    assert both["Drinks green tea"] == both["drinks GREEN tea."] == "active"
    assert "merged 1" in dreamt[0].text and "archived 1" in dreamt[0].text
    assert after["Drinks green tea"].status == "archived"  # the less confident duplicate
    assert after["drinks GREEN tea."].status == "active"
    assert after["Once asked about ferries"].status == "archived"
    assert after["Was born in Porto"].status == "active"
    assert after["Was born in Porto"].confidence == 0.9
    assert undone[0].text.startswith("Undid cli:memory:")  # the dreaming pass, as one batch
    assert restored["Drinks green tea"] == restored["Once asked about ferries"] == "active"


async def test_the_heartbeat_runs_dreaming_on_its_schedule(
    settings_for: SettingsFor, bus: Bus, clean_provider_env: None,
) -> None:  # no model anywhere: dreaming merges without one
    home = settings_for().home
    (home / "agent.toml").write_text("[heartbeat]\ninterval_secs = 0.5\n"
                                     "dreaming = '* * * * * */2'  # every 2 s (seconds last)\n")
    settings = settings_for()
    async with actors(settings, "memory", "heartbeat"):
        await _propose(bus, 1, {"content": "Lives in Lisbon", "confidence": 0.9})
        await _propose(bus, 2, {"content": "lives in lisbon", "confidence": 0.9})

        async def merged() -> list[tuple[str, str]]:
            return [c for c in await _changes(bus) if c[0] == "merged"]

        found = await until(merged, 30)
    assert len(found) == 1
