"""Operational messages: dead letters, session lifecycle, control commands, health."""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from contracts.base import Msg
from contracts.channel import Sink


class DeadLetter(Msg, frozen=True, kw_only=True, tag="deadletter"):
    """A message an actor could not handle, with why; the original payload is kept as text."""

    actor: str
    reason: str
    subject: str
    stream: str
    stream_seq: int
    deliveries: int
    payload: str
    headers: dict[str, str] = msgspec.field(default_factory=dict)


class SessionIdle(Msg, frozen=True, kw_only=True, tag="session.idle"):
    """A session has been quiet for the configured idle time."""

    session: str
    idle_secs: float
    last_activity: float


class SessionReset(Msg, frozen=True, kw_only=True, tag="session.reset"):
    """Forget a session's conversation history (its memories stay)."""

    session: str


class Health(msgspec.Struct, kw_only=True):
    """What an actor writes to the health KV bucket every few seconds."""

    actor: str
    pid: int
    started: float
    ts: float
    handled: int = 0
    failed: int = 0
    loops: dict[str, float] = msgspec.field(default_factory=dict)
    periods: dict[str, float] = msgspec.field(default_factory=dict)  # expected loop period
    info: dict[str, Any] = msgspec.field(default_factory=dict)


class Intervention(Msg, frozen=True, kw_only=True, tag="flatline.intervention"):
    """Something the supervisor did or proposes (what, why, evidence, outcome, how to undo)."""

    kind: str  # restart | hung | failed | nats_restart | quarantine | release | revert | ...
    target: str  # actor, tool or task name
    action: str  # what was done, as a sentence
    reason: str  # why, as a sentence
    evidence: dict[str, Any] = msgspec.field(default_factory=dict)
    outcome: str = ""  # done | proposed | failed | ...
    undo: str = ""  # how the owner reverses it
    proposed: bool = False  # waits for the owner's approval


class TaskOutcome(Msg, frozen=True, kw_only=True, tag="task.outcome"):
    """How a scheduled task's turn ended; the supervisor disables a task that keeps failing."""

    task: str
    turn_id: str
    ok: bool
    reason: str = ""
    # A spent budget stopped it (its own, or the day's): neither a failure nor a success.
    skipped: bool = False


class HoldRelease(Msg, frozen=True, kw_only=True, tag="holds.release"):
    """The owner asks the supervisor to lift a Flatline hold: release a quarantined tool, or
    enable a disabled scheduled task. The supervisor applies it and tells the owner."""

    kind: Literal["tool", "task"] = "tool"
    name: str
    principal: str
    is_owner: bool = False
    reply_to: Sink | None = None  # where the outcome goes; else the owner's sink
