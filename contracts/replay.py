"""Records `wintermute replay` writes: an exported session (JSON lines) and the planner session
state it seeds on its scratch prefix or for a fork."""

from __future__ import annotations

import msgspec

from contracts.llm import ChatMessage

#: Bumped when an exported line changes shape incompatibly.
EXPORT_VERSION = 1


class ExportedMessage(msgspec.Struct, frozen=True, kw_only=True):
    """One stored message of an exported session: where it sat and its payload as stored."""

    stream: str
    seq: int
    subject: str
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    msg: msgspec.Raw  # the payload exactly as it was on the bus (a JSON object)
    v: int = EXPORT_VERSION


class SessionSeed(msgspec.Struct, frozen=True, kw_only=True):
    """The part of the planner's session state (actors/planner/state.py SessionState) that a
    replay or a fork writes (the conversation so far) and reads (`recent`: the turns it
    finished, saved after each reply). Every other field of that record has a default, so the
    planner decodes a seed as a session with this history and nothing running."""

    session: str
    history: list[ChatMessage] = msgspec.field(default_factory=list)
    recent: list[str] = msgspec.field(default_factory=list)
