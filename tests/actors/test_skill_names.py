"""Which words in a user's message name a skill for the planner to load first (_skills.py)."""

from __future__ import annotations

import pytest

from actors.planner._skills import COMMAND, USE


@pytest.mark.parametrize(("text", "name"), [
    ("/skill translate Bonjour", "translate"),
    ("  /skill word-count", "word-count"),
    ("/skill Meeting-Notes: the notes", "Meeting-Notes"),  # lower-cased by named_skill
    ("/skill a.b text", ""),  # a name is letters, digits, - and _ only
    ("/skills", ""),
    ("/skill", ""),
    ("please /skill translate", ""),  # only at the start
])
def test_the_skill_command(text: str, name: str) -> None:
    m = COMMAND.match(text)
    assert (m.group(1) if m else "") == name


def test_use_the_name_skill_is_found_anywhere() -> None:
    assert USE.findall("Could you Use the word-count skill on draft.md?") == ["word-count"]
    assert USE.findall("use the skill") == [] and USE.findall("use the tools skillfully") == []
