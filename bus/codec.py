"""JSON codec for bus payloads; encoder and decoders are built once and reused."""

from __future__ import annotations

from typing import TypeVar

import msgspec

from contracts import AnyMsg, Msg

T = TypeVar("T")

_encoder = msgspec.json.Encoder()
_any_decoder: msgspec.json.Decoder[AnyMsg] = msgspec.json.Decoder(AnyMsg)
_decoders: dict[object, msgspec.json.Decoder[object]] = {}

DecodeError = msgspec.DecodeError  # also the base of ValidationError


def encode(msg: Msg | msgspec.Struct) -> bytes:
    """Encode a contract as compact JSON."""
    return _encoder.encode(msg)


def decode(data: bytes) -> AnyMsg:
    """Decode any known payload by its `type` tag; raises DecodeError on garbage."""
    return _any_decoder.decode(data)


def decoder_for(tp: type[T]) -> msgspec.json.Decoder[T]:
    """A cached decoder for one type or union (the inbox union of an actor)."""
    dec = _decoders.get(tp)
    if dec is None:
        dec = msgspec.json.Decoder(tp)
        _decoders[tp] = dec
    return dec  # type: ignore[return-value]
