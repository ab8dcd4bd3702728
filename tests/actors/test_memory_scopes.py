"""Memory keeps people apart: scopes from the turn's principal, through the real actors.

The unit tests pin the scope rules (actors/memory/scopes.py) and the store's filter. The whole
turns run every actor in-process against the real nats-server, python-telegram-bot against
the local Bot API, and the scripted OpenAI-compatible model: what one Telegram user told the
agent must never reach the model in the owner's or another user's or a group's turns.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from actors.memory.scopes import GLOBAL, OWNER, audience, valid_scope
from actors.memory.store import MemoryStore
from contracts.config import Settings
from tests.actors.harness import ALL, actors, chat
from tests.capability import open_templates
from tests.fakes.llm_servers import FakeLLM
from tests.fakes.telegram_server import BOT_USERNAME, FakeTelegram

SettingsFor = Callable[..., Settings]
OWNER_ID, FRIEND, OTHER, GROUP = 111, 222, 333, -100500
OWNERS = [f"telegram:{OWNER_ID}", "terminal:owner"]


# -- the rules --------------------------------------------------------------------------------


def test_owner_in_private_reads_global_and_own_and_writes_own() -> None:
    a = audience(f"telegram:{OWNER_ID}", f"telegram:{OWNER_ID}", True, OWNERS)
    assert set(a.read) == {GLOBAL, OWNER, f"session:telegram:{OWNER_ID}"}
    assert a.write == OWNER
    # every principal of the owner shares one scope
    assert audience("terminal:owner", "terminal:owner", True, OWNERS).write == OWNER


def test_a_third_party_sees_only_their_own() -> None:
    a = audience(f"telegram:{FRIEND}", f"telegram:{FRIEND}", False, OWNERS)
    assert a.write == f"user:telegram:{FRIEND}"
    assert GLOBAL not in a.read and OWNER not in a.read
    assert f"user:telegram:{OTHER}" not in a.read


def test_owner_flag_alone_does_not_make_an_owner() -> None:
    """A turn claiming is_owner for a principal that is not the owner's gets no owner scope."""
    a = audience(f"telegram:{FRIEND}", f"telegram:{FRIEND}", True, OWNERS)
    assert OWNER not in a.read and a.write == f"user:telegram:{FRIEND}"


def test_a_group_sees_the_group_only_even_when_the_owner_speaks() -> None:
    session = f"telegram:group:{GROUP}"
    for principal, is_owner in ((f"telegram:{OWNER_ID}", True), (f"telegram:{FRIEND}", False)):
        a = audience(principal, session, is_owner, OWNERS)
        assert a.write == f"group:{session}"
        assert not any(s in a.read for s in (GLOBAL, OWNER, f"user:{principal}"))


def test_unknown_or_system_speakers_stay_in_their_session() -> None:
    assert audience("", "s1", True, OWNERS).read == ("session:s1",)
    event = audience("event", f"telegram:{FRIEND}", True, OWNERS)
    assert event.read == (f"session:telegram:{FRIEND}",)
    task = audience("heartbeat", "task:digest", True, OWNERS)  # the owner's scheduled task
    assert OWNER in task.read and task.write == OWNER


def test_scope_names() -> None:
    assert valid_scope("global") and valid_scope("user:telegram:1") and valid_scope("group:x")
    assert not valid_scope("user:") and not valid_scope("everyone") and not valid_scope("")


def test_store_filters_by_scope(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "mem")
    store.save("my car is a red Volvo", scope=OWNER, id="car")
    store.save("my car is a green Fiat", scope="user:telegram:222", id="fiat")
    assert [h.id for h in store.search("car", scopes=[GLOBAL, OWNER])] == ["car"]
    assert [h.id for h in store.search("car", scopes=["user:telegram:222"])] == ["fiat"]
    assert store.search("car", scopes=[]) == []  # no scope, nothing: never "everything"
    assert store.search("car", scopes=["user:telegram:333"]) == []


def test_memories_from_before_scopes_stay_in_their_session(tmp_path: Path) -> None:
    import lancedb
    import pyarrow as pa

    path = tmp_path / "mem"
    old = pa.schema([("id", pa.string()), ("kind", pa.string()), ("content", pa.string()),
                     ("tags", pa.list_(pa.string())), ("session", pa.string()),
                     ("created", pa.float64()), ("status", pa.string())])
    db = lancedb.connect(str(path))
    db.create_table("memories", schema=old).add([
        {"id": "old", "kind": "fact", "content": "the boat is blue", "tags": [],
         "session": "telegram:222", "created": 1.0, "status": "active"},
    ])
    store = MemoryStore(path)
    assert store.search("boat", scopes=[GLOBAL, OWNER]) == []
    assert [h.id for h in store.search("boat", scopes=["session:telegram:222"])] == ["old"]


# -- whole turns --------------------------------------------------------------------------


def _settings(settings_for: SettingsFor, tg: FakeTelegram, llm: FakeLLM,
              monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.setenv("OPENAI_BASE_URL", llm.url)
    return settings_for(
        WM__MODELS__DEFAULT="openai/test-model",
        WM__CHANNELS__TELEGRAM__API_BASE_URL=tg.api_base_url,
        WM__CHANNELS__TELEGRAM__API_FILE_URL=tg.api_file_url,
        WM__CHANNELS__TELEGRAM__ALLOWED_USERS=f"[{OWNER_ID}, {FRIEND}, {OTHER}]",
        WM__CHANNELS__TELEGRAM__POLL_TIMEOUT_SECS="2",
        WM__OWNER__PRINCIPALS=json.dumps(OWNERS),
        WM__OWNER__SINK=f"telegram:{OWNER_ID}",
    )


async def _say(tg: FakeTelegram, user: int, text: str, chat: int | None = None) -> str:
    """Send `text` as `user` (in `chat`, default their private chat) and wait for the reply."""
    where = user if chat is None else chat
    before = len(tg.messages_to(where))
    kind = "private" if chat is None else "supergroup"
    tg.inject(tg.message(user, text, chat_id=where, chat_type=kind))
    sent = await tg.wait_for(lambda: len(tg.messages_to(where)) > before and tg.messages_to(where),
                             timeout=60)
    return str(sent[before]["text"])


def _requests_since(llm: FakeLLM, start: int) -> tuple[str, str]:
    """(the system prompts, everything) of the model requests from `start` on."""
    requests = llm.requests[start:]
    systems = [m["content"] for r in requests for m in r["messages"] if m["role"] == "system"]
    return "\n".join(systems), json.dumps(requests)


@pytest.mark.usefixtures("telegram_env")
async def test_telegram_users_never_see_each_others_memories(
    tg: FakeTelegram, llm: FakeLLM, settings_for: SettingsFor, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The friends' template lets them keep memories (the shipped third-party one does not), so
    # what keeps their memories apart is the scopes.
    open_templates(settings_for().home, '[privacy.templates.friends]\nprincipals = '
                   f'["telegram:{FRIEND}", "telegram:{OTHER}"]\ntools = ["memory_*"]\n')
    settings = _settings(settings_for, tg, llm, monkeypatch)
    (settings.home / "USER.md").write_text("The owner's birthday is on May 3rd.\n")
    async with actors(settings, *ALL):
        assert "Saved as memory" in await _say(tg, OWNER_ID, "remember: my car is a red Volvo")
        assert "Saved as memory" in await _say(tg, FRIEND, "remember: my car is a green Fiat")
        # the model even tries to save into another scope: arguments cannot choose it
        await _say(tg, OTHER, 'tool:memory_save {"content": "my car is a blue Saab", '
                              '"scope": "global"}')

        mark = len(llm.requests)
        async with chat(settings) as terminal:  # the owner again, in another conversation
            await terminal.ask("which car do I drive?", timeout=60)
        owner_sees = _requests_since(llm, mark)
        mark = len(llm.requests)
        await _say(tg, FRIEND, "which car do I drive?")
        friend_sees = _requests_since(llm, mark)
        mark = len(llm.requests)
        await _say(tg, OTHER, "which car do I drive?")
        other_sees = _requests_since(llm, mark)
        mark = len(llm.requests)
        await _say(tg, FRIEND, f"@{BOT_USERNAME} which car?", chat=GROUP)
        group_sees = _requests_since(llm, mark)
        searched = await _say(tg, FRIEND, "recall: car")

    # recalled into the system prompt for the one who said it, in any of their conversations
    assert "red Volvo" in owner_sees[0] and "birthday" in owner_sees[0]
    assert "green Fiat" in friend_sees[0]
    assert "blue Saab" in other_sees[0]
    # and nowhere in anyone else's requests
    assert "green Fiat" not in owner_sees[1] and "blue Saab" not in owner_sees[1]
    assert "red Volvo" not in friend_sees[1] and "blue Saab" not in friend_sees[1]
    assert "birthday" not in friend_sees[1]  # USER.md describes the owner: owner turns only
    assert "red Volvo" not in other_sees[1] and "green Fiat" not in other_sees[1]
    for private in ("red Volvo", "green Fiat", "blue Saab", "birthday"):
        assert private not in group_sees[1]
    assert "green Fiat" in searched and "red Volvo" not in searched and "Saab" not in searched
