"""Each actor's declared inbox accepts every type its durables in the route table decode."""

from __future__ import annotations

import typing

import msgspec
import pytest

from actors import ACTORS
from actors.runtime import actor_class
from bus import inbox
from contracts import routes


@pytest.mark.parametrize("name", list(ACTORS))
def test_an_actors_inbox_covers_its_durables(name: str) -> None:
    cls = actor_class(name)
    assert cls.durables == routes.durables_of(name)
    accepted = set(typing.get_args(cls.inbox)) or {cls.inbox}
    for d in cls.durables:
        decoded = inbox(d)
        if decoded is msgspec.Raw:
            assert cls.inbox is msgspec.Raw
            continue
        assert (set(typing.get_args(decoded)) or {decoded}) <= accepted, d.name


def test_the_actor_modules_are_the_tables_actors() -> None:
    assert tuple(ACTORS) == routes.ACTORS
