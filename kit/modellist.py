"""The JSON list a model was asked for, found in its answer even inside prose or a code fence."""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

T = TypeVar("T")


def json_list(text: str, decoder: msgspec.json.Decoder[Any], what: str, shape: str) -> Any:
    """Decode the outermost `[...]` of `text` with `decoder`; ValueError saying why not, naming
    `what` the list is ("the model's lessons") and the `shape` it should have had."""
    start, end = text.find("["), text.rfind("]")
    if start < 0 or end < start:
        raise ValueError(f"{what} holds no JSON list")
    try:
        return decoder.decode(text[start : end + 1])
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ValueError(f"{what} is not {shape}: {exc}") from exc
