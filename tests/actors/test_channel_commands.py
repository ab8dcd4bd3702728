"""Chat commands that change shared state go to their owner as commands: /tools release is a
`holds.release` for the supervisor, not a write to its bucket."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from actors.channel.commands import CommandContext, handle_command
from bus import Bus, codec
from contracts import HoldRelease, Sink


def ctx(owner: bool = True) -> CommandContext:
    return CommandContext(principal="telegram:1" if owner else "telegram:2", is_owner=owner,
                          session="telegram:1", input_id="tg:9:1",
                          reply_to=Sink(channel="telegram", chat="1"))


async def test_tools_release_sends_a_command_to_the_supervisor(
    bus: Bus, settings_for: Any
) -> None:
    # The channel actor's own attributes that commands use: its bus, subjects and config.
    channel = SimpleNamespace(bus=bus, subjects=bus.subjects, config=settings_for().config)
    answer = await handle_command(channel, ctx(), "/tools release news")
    assert answer == ("Asked the supervisor to release the tool news; the outcome goes to "
                      "telegram:1.")
    state = await bus.stream_state(bus.subjects.stream_cmd)
    assert state is not None
    stored = await bus.stored(bus.subjects.stream_cmd, state.first_seq,
                              subject=bus.subjects.cmd("supervisor", "release"), next=True)
    assert stored is not None
    msg = codec.decode(stored.data)
    assert msg == HoldRelease(id="tg:9:1:release", ts=msg.ts, kind="tool", name="news",
                              principal="telegram:1", is_owner=True,
                              reply_to=Sink(channel="telegram", chat="1"))
    assert await bus.kv_get(bus.subjects.kv_tools, "news") is None  # nothing written directly

    assert "Say which tool" in (await handle_command(channel, ctx(), "/tools release ") or "")
    assert await handle_command(channel, ctx(owner=False), "/tools release news") == \
        "Only the owner can use that command."
