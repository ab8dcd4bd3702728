"""Contracts: tagged JSON objects, tolerant of new fields, with a JSON Schema for each."""

from __future__ import annotations

import json

import msgspec
import pytest

from bus.codec import decode, encode
from contracts import ALL_MESSAGES, AnyMsg, Sink, TurnRequest


def test_every_message_type_has_a_unique_tag() -> None:
    tags = [t.__struct_config__.tag for t in ALL_MESSAGES]
    assert len(set(tags)) == len(tags) == len(AnyMsg.__args__)  # type: ignore[attr-defined]


def test_round_trip_is_a_json_object_with_type_and_version() -> None:
    msg = TurnRequest(id="t1", session="s", principal="p", text="hi",
                      reply_to=Sink(channel="terminal", chat="owner"))
    payload = json.loads(encode(msg))
    assert payload["type"] == "turn.request" and payload["v"] == 1
    assert decode(encode(msg)) == msg


def test_old_readers_skip_new_fields() -> None:
    data = (b'{"type":"session.reset","id":"r","session":"s","added_later":{"x":1}}')
    assert decode(data).session == "s"  # type: ignore[union-attr]


def test_garbage_raises_decode_errors() -> None:
    for bad in (b"", b"[]", b'{"type":"nope","id":"x"}', b'{"id":"x"}'):
        with pytest.raises(msgspec.DecodeError):
            decode(bad)


def test_json_schema_for_every_contract() -> None:
    _, components = msgspec.json.schema_components(ALL_MESSAGES)
    for t in ALL_MESSAGES:
        assert t.__name__ in components
        assert "type" in components[t.__name__]["properties"]


def test_sink_parse() -> None:
    assert Sink.parse("telegram:42") == Sink(channel="telegram", chat="42")
    assert str(Sink.parse("slack:C1:1700.1")) == "slack:C1:1700.1"
    with pytest.raises(ValueError, match="channel:chat"):
        Sink.parse("owner")
