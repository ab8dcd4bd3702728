"""The base every bus payload derives from: a frozen, tagged, versioned msgspec Struct."""

from __future__ import annotations

import hashlib
import time

import msgspec


class Msg(msgspec.Struct, frozen=True, kw_only=True, tag_field="type"):
    """A payload on the bus. `id` is deterministic so JetStream dedupes re-publishes."""

    id: str
    v: int = 1
    ts: float = msgspec.field(default_factory=time.time)


def derive_id(*parts: object) -> str:
    """A deterministic message id built from the ids it follows from."""
    return ":".join(str(p) for p in parts)


def short_hash(text: str, n: int = 16) -> str:
    """A stable hex digest usable where NATS forbids characters (KV keys, subject tokens)."""
    return hashlib.sha256(text.encode()).hexdigest()[:n]


def subject_token(text: str) -> str:
    """Make `text` safe as one NATS subject token (no dots, spaces or wildcards)."""
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in text)
    return safe or "_"
