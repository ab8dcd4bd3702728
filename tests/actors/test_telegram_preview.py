"""The Telegram live preview: one message edited while the model streams, then the reply.

Whole turns run the real actors against the scripted OpenAI server (which streams `stream:N`
answers word by word over N seconds) and the fake Bot API server; channel-only tests publish
LlmPreview events and replies on the bus themselves.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from bus import Bus
from contracts import LlmPreview, Reply, Sink, TurnRequest
from contracts.config import Settings
from tests.actors.harness import ALL, actors, chat
from tests.actors.test_telegram import (
    FRIEND,
    OWNER,
    _telegram_health,
    publish,
    stored,
    tg_settings,
    until,
    with_model,
)
from tests.fakes.llm_servers import FakeLLM
from tests.fakes.telegram_server import FakeTelegram

pytestmark = pytest.mark.usefixtures("telegram_env")
SettingsFor = Callable[..., Settings]
FAST = {"WM__CHANNELS__TELEGRAM__PREVIEW_INTERVAL_SECS": "0.5"}




def streamed(words: int) -> str:
    return "Streamed: " + " ".join(f"word{i}" for i in range(1, words + 1))


def edits_to(tg: FakeTelegram, chat: int) -> list[str]:
    return [str(c.params["text"]) for c in tg.of("editMessageText")
            if str(c.params.get("chat_id")) == str(chat)]


def sends_to(tg: FakeTelegram, chat: int) -> list[str]:
    return [str(c.params["text"]) for c in tg.of("sendMessage")
            if str(c.params.get("chat_id")) == str(chat)]


async def previews(bus: Bus) -> list[dict[str, Any]]:
    return [p for p in await stored(bus, bus.subjects.stream_evt) if p["type"] == "llm.preview"]


async def model_requests(bus: Bus) -> list[dict[str, Any]]:
    return [p for p in await stored(bus, bus.subjects.stream_cmd) if p["type"] == "llm.request"]


async def responses(bus: Bus) -> list[dict[str, Any]]:
    return [p for p in await stored(bus, bus.subjects.stream_evt) if p["type"] == "llm.response"]


# -- whole turns -----------------------------------------------------------------------------


async def test_a_slow_answer_shows_one_message_edited_into_the_final_text(
    tg: FakeTelegram, llm: FakeLLM, settings_for: SettingsFor, monkeypatch: pytest.MonkeyPatch,
    bus: Bus,
) -> None:
    settings = tg_settings(settings_for, tg, **with_model(monkeypatch, llm), **FAST)
    final = streamed(12)
    async with actors(settings, *ALL):
        tg.inject(tg.message(FRIEND, "stream:4"))
        await tg.wait_for(lambda: [m for m in tg.messages_to(FRIEND) if m["text"] == final],
                          timeout=60)
        tg.inject(tg.message(FRIEND, "and now?"))  # a later turn: nothing of the first is left
        await tg.wait_for(lambda: len(tg.messages_to(FRIEND)) == 2, timeout=60)
    first, second = tg.messages_to(FRIEND)
    assert first["text"] == final and second["text"] == "echo: and now?"
    sent = sends_to(tg, FRIEND)
    assert len(sent) == 2 and sent[0].endswith("…")  # the preview, later edited into the reply
    edits = edits_to(tg, FRIEND)
    assert any(e.endswith("…") for e in edits[:-1]), "the preview was never updated"
    assert edits[-1] == final
    shown = [p["text"] for p in await previews(bus)]
    assert len(shown) >= 2 and all(final.startswith(t) for t in shown)
    assert llm.streamed >= 1
    # The channel set the cadence on the turn; planner and llm only pass it on.
    assert {r["preview_interval"] for r in await model_requests(bus)} == {0.5}


async def test_the_cadence_travels_on_the_turn_not_in_planner_or_llm_config(
    tg: FakeTelegram, llm: FakeLLM, settings_for: SettingsFor, monkeypatch: pytest.MonkeyPatch,
    bus: Bus,
) -> None:
    # Telegram previews are off in this config, yet a turn that asks for one gets it.
    settings = tg_settings(settings_for, tg, **with_model(monkeypatch, llm),
                           WM__CHANNELS__TELEGRAM__PREVIEW="false")
    turn = TurnRequest(id="terminal:cadence", session="owner", principal="owner",
                       text="stream:3", reply_to=Sink(channel="terminal", chat="cadence"),
                       is_owner=True, preview_interval=0.5)
    async with actors(settings, "memory", "llm", "planner"):
        await bus.send(turn)
        await until(lambda: responses(bus), timeout=60)
    requests = await model_requests(bus)
    assert requests and all(r["preview_interval"] == 0.5 for r in requests)
    assert requests[0]["preview_to"] == {"channel": "terminal", "chat": "cadence", "thread": ""}
    assert await previews(bus)


async def test_a_long_answer_edits_its_first_part_in_place_and_sends_the_rest(
    tg: FakeTelegram, llm: FakeLLM, settings_for: SettingsFor, monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = tg_settings(settings_for, tg, **with_model(monkeypatch, llm), **FAST)
    final = streamed(900)
    assert len(final) > 4096
    async with actors(settings, *ALL):
        tg.inject(tg.message(FRIEND, "stream:3:900"))
        got = await tg.wait_for(
            lambda: len(tg.messages_to(FRIEND)) >= 2 and not tg.messages_to(FRIEND)[0]["text"]
            .endswith("…") and tg.messages_to(FRIEND), timeout=60)
    assert len(got) == 2
    assert " ".join(m["text"] for m in got).split() == final.split()
    sent = sends_to(tg, FRIEND)
    assert len(sent) == 2 and sent[0].endswith("…")  # part 1 is the edited preview
    assert not sent[1].endswith("…")
    assert edits_to(tg, FRIEND)[-1].split() == got[0]["text"].split()


async def test_previews_off_sends_the_answer_once_without_edits(
    tg: FakeTelegram, llm: FakeLLM, settings_for: SettingsFor, monkeypatch: pytest.MonkeyPatch,
    bus: Bus,
) -> None:
    settings = tg_settings(settings_for, tg, **with_model(monkeypatch, llm), **FAST,
                           WM__CHANNELS__TELEGRAM__PREVIEW="false")
    async with actors(settings, *ALL):
        tg.inject(tg.message(FRIEND, "stream:2"))
        await tg.wait_for(lambda: tg.messages_to(FRIEND), timeout=60)
    assert [m["text"] for m in tg.messages_to(FRIEND)] == [streamed(12)]
    assert edits_to(tg, FRIEND) == [] and await previews(bus) == []
    assert llm.streamed == 0
    assert all(r["preview_to"] is None for r in await model_requests(bus))


async def test_no_preview_for_a_terminal_chat_or_a_scheduled_turn(
    tg: FakeTelegram, llm: FakeLLM, settings_for: SettingsFor, monkeypatch: pytest.MonkeyPatch,
    bus: Bus,
) -> None:
    settings = tg_settings(settings_for, tg, **with_model(monkeypatch, llm), **FAST)
    task = TurnRequest(id="task:digest:1", session="task:digest", principal="schedule",
                       text="stream:2", reply_to=Sink(channel="telegram", chat=str(OWNER)),
                       is_owner=True, origin="schedule")
    async with actors(settings, *ALL), chat(settings) as terminal:
        assert await terminal.ask("stream:2", timeout=60) == streamed(12)
        await bus.publish(bus.subjects.inbound("schedule", "digest"), task)
        await tg.wait_for(lambda: tg.messages_to(OWNER), timeout=60)
    assert [m["text"] for m in tg.messages_to(OWNER)] == [streamed(12)]
    assert edits_to(tg, OWNER) == [] and await previews(bus) == []
    requests = await model_requests(bus)
    # The terminal chat is not an owner principal here: a third party's turn is a plan and an
    # answer (plan-then-execute), then the scheduled turn's one call.
    assert len(requests) == 3 and all(r["preview_to"] is None for r in requests)
    assert llm.streamed == 0


# -- the channel alone -----------------------------------------------------------------------


def preview(seq: int, text: str, turn: str = "t1") -> LlmPreview:
    """A preview as the llm writes them: one interval (here 0.5 s) after the one before."""
    start = time.time() - 10 + 0.5 * seq  # its time: written a while ago, in order
    return LlmPreview(id=f"{turn}:llm:0:preview:{seq}", session=f"telegram:{OWNER}",
                      turn_id=turn, step=0, request_id=f"{turn}:llm:0", seq=seq, text=text,
                      sink=Sink(channel="telegram", chat=str(OWNER)), ts=start)


async def send_preview(bus: Bus, msg: LlmPreview) -> None:
    await bus.publish(bus.subjects.evt("llm", "preview", msg.session), msg)


async def test_no_reply_removes_the_preview_and_later_previews_are_ignored(
    tg: FakeTelegram, settings_for: SettingsFor, bus: Bus
) -> None:
    settings = tg_settings(settings_for, tg, **FAST)
    async with actors(settings, "channel"):
        await until(lambda: _telegram_health(bus))
        await send_preview(bus, preview(1, "Thinking about"))
        await tg.wait_for(lambda: tg.messages_to(OWNER))
        await send_preview(bus, preview(2, "[NO_REPLY"))  # never shown
        await send_preview(bus, preview(3, "Thinking about **this** question"))
        await tg.wait_for(lambda: edits_to(tg, OWNER), timeout=10)
        await publish(bus, Reply(id="t1:reply", session=f"telegram:{OWNER}", turn_id="t1",
                                 sink=Sink(channel="telegram", chat=str(OWNER)),
                                 text="[NO_REPLY]"))
        await tg.wait_for(lambda: tg.deleted)
        await send_preview(bus, preview(4, "Thinking about this question again"))  # too late
        await send_preview(bus, preview(5, "Another turn", turn="t2"))  # handled after it
        await tg.wait_for(lambda: tg.messages_to(OWNER))
    assert [m["text"] for m in tg.deleted] == ["Thinking about this question …"]
    assert [m["text"] for m in tg.messages_to(OWNER)] == ["Another turn …"]
    assert edits_to(tg, OWNER) == ["Thinking about <b>this</b> question …"]
    assert len(sends_to(tg, OWNER)) == 2


async def test_a_rate_limited_preview_is_skipped_and_the_final_edit_waits(
    tg: FakeTelegram, settings_for: SettingsFor, bus: Bus
) -> None:
    settings = tg_settings(settings_for, tg, **FAST)
    async with actors(settings, "channel"):
        await until(lambda: _telegram_health(bus))
        await send_preview(bus, preview(1, "Part of"))
        await tg.wait_for(lambda: tg.messages_to(OWNER))
        tg.fail_next("editMessageText", 2, status=429, retry_after=1)
        await send_preview(bus, preview(2, "Part of the answer"))
        await tg.wait_for(lambda: tg.of("editMessageText", ok_only=False))
        await publish(bus, Reply(id="t1:reply", session=f"telegram:{OWNER}", turn_id="t1",
                                 sink=Sink(channel="telegram", chat=str(OWNER)),
                                 text="Part of the answer, complete."))
        await tg.wait_for(lambda: tg.messages_to(OWNER)[0]["text"] == "Part of the answer, "
                          "complete.")
    statuses = [c.status for c in tg.of("editMessageText", ok_only=False)]
    assert statuses == [429, 429, 200]  # the preview edit was dropped, the reply's edit retried
    assert len(tg.messages_to(OWNER)) == 1 and len(sends_to(tg, OWNER)) == 1
