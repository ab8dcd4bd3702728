"""`[NO_REPLY]`: one rule (seed 000: the marker alone or a reply starting with it) for every
channel. Telegram and Slack are covered in their own tests; this is the rule and the terminal."""

from __future__ import annotations

from typing import Any

import pytest

from actors.channel.adapter import is_no_reply
from bus import Bus
from contracts import Reply, Sink
from tests.actors.harness import actors, chat


@pytest.mark.parametrize(("text", "silent"), [
    ("[NO_REPLY]", True),
    ("  [NO_REPLY]\n", True),
    ("[NO_REPLY] nothing needs saying here.", True),
    ("[NO_REPLY]\n\nI'll stay quiet in this group.", True),
    ("", True),
    ("   ", True),
    ("Sure. [NO_REPLY] is how I stay quiet.", False),
    ("[NO_REPL] typo", False),
    ("hello", False),
])
def test_the_rule(text: str, silent: bool) -> None:
    assert is_no_reply(text) is silent


async def test_terminal_suppresses_a_reply_that_starts_with_the_marker(
    settings_for: Any, bus: Bus
) -> None:
    settings = settings_for()
    sink = Sink(channel="terminal", chat="owner")
    async with actors(settings, "channel"), chat(settings) as c:
        for i, text in enumerate(["[NO_REPLY] nothing to add.", "a real answer"]):
            await bus.publish(bus.subjects.outbound("terminal", "owner"),
                              Reply(id=f"r{i}", session="terminal:owner", turn_id=f"t{i}",
                                    sink=sink, text=text))
        quiet = await c.next(("reply", "suppressed"))
        loud = await c.next(("reply", "suppressed"))
    assert (quiet.kind, quiet.ref, quiet.text) == ("suppressed", "t0", "")
    assert (loud.kind, loud.text) == ("reply", "a real answer")
