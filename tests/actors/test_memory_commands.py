"""The owner sees and steers memory: `/memory` in a chat (through the real channel and memory
actors and the local Telegram Bot API) and `wintermute memory` (the CLI's own request code
against the memory actor on the real nats-server)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from bus import Bus
from contracts import MemoryAdmin, MemoryAnswer, MemoryRecord
from contracts.config import Settings
from supervisor.cli.memory import ask, render
from tests.actors.harness import ALL, actors
from tests.fakes.llm_servers import FakeLLM
from tests.fakes.telegram_server import BOT_USERNAME, FakeTelegram

SettingsFor = Callable[..., Settings]
OWNER_ID, FRIEND, GROUP = 111, 222, -100500


def _settings(settings_for: SettingsFor, tg: FakeTelegram, llm: FakeLLM,
              monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.setenv("OPENAI_BASE_URL", llm.url)
    return settings_for(
        WM__MODELS__DEFAULT="openai/test-model",
        WM__CHANNELS__TELEGRAM__API_BASE_URL=tg.api_base_url,
        WM__CHANNELS__TELEGRAM__API_FILE_URL=tg.api_file_url,
        WM__CHANNELS__TELEGRAM__ALLOWED_USERS=f"[{OWNER_ID}, {FRIEND}]",
        WM__CHANNELS__TELEGRAM__POLL_TIMEOUT_SECS="2",
        WM__OWNER__PRINCIPALS=f'["telegram:{OWNER_ID}"]',
        WM__OWNER__SINK=f"telegram:{OWNER_ID}",
    )


async def _say(tg: FakeTelegram, user: int, text: str, chat: int | None = None,
               answers: int = 1) -> list[str]:
    """Send `text` as `user` and wait for `answers` messages back in that chat."""
    where = user if chat is None else chat
    before = len(tg.messages_to(where))
    kind = "private" if chat is None else "supergroup"
    tg.inject(tg.message(user, text, chat_id=where, chat_type=kind))
    sent = await tg.wait_for(
        lambda: len(tg.messages_to(where)) >= before + answers and tg.messages_to(where),
        timeout=60,
    )
    return [str(m["text"]) for m in sent[before:]]


async def _events(bus: Bus) -> list[dict[str, Any]]:
    stream = bus.subjects.stream_evt
    info = await bus.js.stream_info(stream)
    out: list[dict[str, Any]] = []
    for seq in range(info.state.first_seq, info.state.last_seq + 1):
        with contextlib.suppress(Exception):
            out.append(json.loads((await bus.js.get_msg(stream, seq)).data))
    return out


async def _admin(settings: Settings, action: str, **fields: object) -> list[MemoryAnswer]:
    # a fresh id per request, as the CLI makes (a repeated id would be deduplicated)
    request = MemoryAdmin(id=f"cli:memory:{uuid.uuid4().hex}", action=action,
                          **fields)  # type: ignore[arg-type]
    return await ask(settings, request, 60)


@pytest.mark.usefixtures("telegram_env")
async def test_memory_commands_in_chat_show_what_this_chat_may_read(
    tg: FakeTelegram, llm: FakeLLM, settings_for: SettingsFor, monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = _settings(settings_for, tg, llm, monkeypatch)
    async with actors(settings, *ALL):
        await _say(tg, OWNER_ID, "remember: my car is a red Volvo")
        await _say(tg, OWNER_ID, "remember: the boat is moored in Porto")
        await _say(tg, FRIEND, "remember: my car is a green Fiat")

        listing = await _say(tg, OWNER_ID, "/memory", answers=2)
        searched = await _say(tg, OWNER_ID, "/memory search automobile", answers=2)
        in_group = await _say(tg, OWNER_ID, f"/memory@{BOT_USERNAME}", chat=GROUP, answers=2)
        refused = await _say(tg, FRIEND, "/memory")
        boat_id = next(line.split("(id ")[1].split(",")[0] for line in listing[1].splitlines()
                       if "Porto" in line)
        forgot = await _say(tg, OWNER_ID, f"/memory forget {boat_id}", answers=2)
        again = await _say(tg, OWNER_ID, "/memory", answers=2)
        mark = len(llm.requests)
        await _say(tg, OWNER_ID, "where is the boat moored?")

    assert "red Volvo" in listing[1] and "Porto" in listing[1] and "user:owner" in listing[1]
    assert "green Fiat" not in listing[1]
    assert "red Volvo" in searched[1] and "Fiat" not in searched[1]  # found by meaning
    assert "Volvo" not in in_group[1] and "Nothing is remembered" in in_group[1]
    assert refused == ["Only the owner can use that command."]
    assert forgot[1] == f"Forgot memory {boat_id}."
    assert "Porto" not in again[1] and "red Volvo" in again[1]
    system = llm.requests[mark]["messages"][0]["content"]
    assert "Porto" not in system  # a forgotten memory is not recalled


async def test_cli_lists_searches_forgets_exports_and_imports(
    settings_for: SettingsFor, bus: Bus,
) -> None:
    settings = settings_for()
    async with actors(settings, "memory"):
        records = [
            MemoryRecord(id="car", content="my car is a red Volvo", scope="user:owner"),
            MemoryRecord(id="fiat", content="my car is a green Fiat", scope="user:telegram:2"),
            MemoryRecord(id="rule", content="the office opens at nine", scope="global",
                         kind="procedure"),
            MemoryRecord(id="bad", content="nowhere", scope="everyone"),
            MemoryRecord(id="empty", content="   ", scope="global"),
        ]
        imported = await _admin(settings, "import", records=records)
        again = await _admin(settings, "import", records=records[:1])
        listed = await _admin(settings, "list")
        only = await _admin(settings, "list", scope="user:telegram:2")
        found = await _admin(settings, "search", query="vehicle", limit=1)
        bad_scope = await _admin(settings, "list", scope="nobody")
        forgot = await _admin(settings, "forget", target="fiat")
        missing = await _admin(settings, "forget", target="fiat")
        exported = await _admin(settings, "export")
        progress: list[MemoryAnswer] = []
        request = MemoryAdmin(id="cli:memory:test:reembed", action="reembed")
        reembedded = await ask(settings, request, 120, progress.append)

    assert imported[0].text.startswith("Imported 3 of 5 memories.")
    assert "bad: scope 'everyone' is not valid" in imported[0].text
    assert "empty: memory content must not be empty" in imported[0].text
    assert again[0].text == "Imported 0 of 1 memories. Already there: 1."
    assert {r.id for r in listed[0].records} == {"car", "fiat", "rule"}
    assert "user:telegram:2" in render(listed[0].records)
    assert [r.id for r in only[0].records] == ["fiat"]
    assert "red Volvo" in found[0].text or "green Fiat" in found[0].text
    assert not bad_scope[0].ok and "not a scope" in bad_scope[0].text
    assert forgot[0].ok and not missing[0].ok
    status = {r.id: r.status for a in exported for r in a.records}
    assert status == {"car": "active", "fiat": "archived", "rule": "active"}
    line = msgspec.json.encode(exported[0].records[0])
    assert json.loads(line)["id"] in status  # JSONL lines are the records themselves
    assert reembedded[-1].ok and reembedded[-1].text.startswith("Re-embedded 3 memories")
    # every change is an audit event on the bus
    audit = [(e["change"], e["memory_id"], e["by"]) for e in await _events(bus)
             if e["type"] == "memory.changed"]
    assert sorted(audit) == [("archived", "fiat", "cli"), ("imported", "car", "cli"),
                             ("imported", "fiat", "cli"), ("imported", "rule", "cli")]
    assert any(not a.last and "of 3" in a.text for a in progress)


async def test_status_warns_when_search_is_full_text_only(settings_for: SettingsFor) -> None:
    from supervisor.cli.client import gather_status, render_status

    settings = settings_for(WM__MODELS__EMBEDDING="none")
    async with actors(settings, "memory"), asyncio.timeout(30):
        status = await gather_status(settings)
        while "memory" not in status:  # the actor writes it once its store is open
            await asyncio.sleep(0.1)
            status = await gather_status(settings)
    text = render_status(status)
    assert "memory: 0 memories, full-text search" in text
    assert "memory WARNING: no embedding model ([models] embedding = none)" in text
