"""Capability tokens (seed 003 §4.6): what one tool call is allowed to do, and who allowed it.

The planner issues one per tool call from the turn's template (contracts/templates.py) and
signs it with a key only the planner and the executor read (kit/capability.py); the executor
runs a call only with a valid token that names this very request, tool and arguments, and
whose template is the one the turn's principal gets. A token is designation (tool, arguments'
digest, sinks), permission (template, data ceiling) and provenance (principal, turn).
"""

from __future__ import annotations

import msgspec

from contracts.labels import Label


class Capability(msgspec.Struct, frozen=True, kw_only=True):
    """A signed permission for exactly one tool request."""

    request: str  # the tool.request id it is for (a token is good for that one call)
    session: str
    turn_id: str
    template: str
    principal: str
    principal_kind: str
    tool: str
    args: str  # sha256 of the call's arguments (canonical JSON): they cannot be swapped
    reply_to: str = ""  # the turn's own sink ("channel:chat[:thread]"), what "reply" means
    sinks: list[str] = msgspec.field(default_factory=list)
    ceiling: Label = "internal"
    issued_at: float = 0.0
    expires_at: float = 0.0
    sig: str = ""  # HMAC-SHA256 over every other field
