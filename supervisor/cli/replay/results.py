"""What a re-run found: one `Step` per compared point, one `TurnResult` per turn."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from contracts import short_hash


class RerunBusy(Exception):
    """A re-run that cannot start (the scratch prefix is in use, or its planner did not come
    up); the message says why."""


@dataclass
class Step:
    """One compared point of a re-run."""

    what: str  # recall | model request | model answer | tool call | reply | run
    status: str  # same | answered | DIFFERENT | DIVERGED | STALLED | SKIPPED
    step: int | None = None
    detail: list[str] = field(default_factory=list)
    live: bool = False  # answered by a live model, not the recording

    @property
    def failed(self) -> bool:
        return self.status in ("DIFFERENT", "DIVERGED", "STALLED")

    def line(self) -> str:
        where = f"step {self.step} " if self.step is not None else ""
        mark = " [live model]" if self.live else ""
        head = f"{where}{self.what}{mark}: {self.status}"
        return head if not self.detail else head + "\n    " + "\n    ".join(self.detail)


@dataclass
class TurnResult:
    turn: str
    session: str
    kind: str
    text: str = ""
    steps: list[Step] = field(default_factory=list)
    tokens: int = 0  # spent by a live model

    @property
    def status(self) -> str:
        if any(s.failed for s in self.steps):
            return "different"
        return "skipped" if any(s.status == "SKIPPED" for s in self.steps) else "same"

    def as_dict(self) -> dict[str, Any]:
        return {"turn": self.turn, "session": self.session, "kind": self.kind,
                "text": self.text, "status": self.status, "tokens": self.tokens,
                "steps": [{"what": s.what, "step": s.step, "status": s.status,
                           "live": s.live, "detail": s.detail} for s in self.steps]}


def session_key(session: str) -> str:
    """The planner's KV key of a session (actors/planner/actor.py `_key`)."""
    return f"s.{short_hash(session, 32)}"
