"""Who may read and write which memories: scopes derived from the turn, never from the model.

Every memory has one scope:

- ``global``: curated by the owner (CLI ``wintermute memory import --scope global``); read in the
  owner's own conversations only;
- ``user:owner``: what the owner said in private (all of the owner's principals share it);
- ``user:<principal>``: what another person said to the agent in private;
- ``group:<session>``: what was said in a group conversation (a Telegram group, a Slack
  channel); members' private memories never show there;
- ``session:<id>``: a conversation whose speaker is unknown (a message without a principal,
  memories from before scopes existed): visible in that conversation only.

The scope comes from the principal, owner flag and session that the planner copies from the
turn, which the channel derived from the verified sender. Model-written tool arguments never
choose it, so a third party cannot save into the owner's memory or read it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

GLOBAL = "global"
OWNER = "user:owner"
SYSTEM_PRINCIPALS = frozenset({"heartbeat"})  # owner-configured scheduled tasks


@dataclass(frozen=True)
class Audience:
    """The scopes a turn may read, and the one its new memories go to."""

    read: tuple[str, ...]
    write: str


def session_scope(session: str) -> str:
    return f"session:{session}"


def audience(principal: str, session: str, is_owner: bool, owners: Iterable[str]) -> Audience:
    """The audience of a turn: who hears the answer decides what may be recalled into it."""
    here = session_scope(session)
    if not principal:
        return Audience(read=(here,), write=here)  # an old sender: stay inside the conversation
    owner = is_owner and (principal in set(owners) or principal in SYSTEM_PRINCIPALS)
    private = session == principal or (
        principal in SYSTEM_PRINCIPALS and session.startswith("task:")
    )
    if private and owner:
        return Audience(read=(GLOBAL, OWNER, here), write=OWNER)
    if private:
        mine = f"user:{principal}"
        return Audience(read=(mine, here), write=mine)
    if principal == "event" or principal in SYSTEM_PRINCIPALS:
        # A turn the system made in someone's conversation (a deferred tool result): we do not
        # know whose it is beyond the session, so it sees only that conversation's memories.
        return Audience(read=(here,), write=here)
    group = f"group:{session}"
    return Audience(read=(group, here), write=group)


def valid_scope(scope: str) -> bool:
    """Whether `scope` is a well-formed scope name (for the CLI and imports)."""
    if scope == GLOBAL:
        return True
    kind, sep, rest = scope.partition(":")
    return bool(sep) and kind in ("user", "group", "session") and bool(rest.strip())
