"""Messages about scripts/, the git repository of agent-created tools."""

from __future__ import annotations

from typing import Literal

import msgspec

from contracts.base import Msg
from contracts.channel import Sink


class ScriptsRevert(Msg, frozen=True, kw_only=True, tag="scripts.revert"):
    """Undo the last commit in scripts/ (from /revert, `wintermute revert` or the supervisor)."""

    principal: str = ""
    is_owner: bool = False
    reply_to: Sink | None = None  # where to tell the outcome, besides the event
    head: str = ""  # if set: revert only while this (full or abbreviated) sha is the last commit
    repo: Literal["scripts", "skills"] = "scripts"  # which folder's last commit (skills/ too)


class ScriptsReverted(Msg, frozen=True, kw_only=True, tag="scripts.reverted"):
    """What a ScriptsRevert did; published on wm.evt.scripts.reverted.<request id>."""

    request_id: str
    ok: bool
    text: str
    commit: str = ""
    files: list[str] = msgspec.field(default_factory=list)
