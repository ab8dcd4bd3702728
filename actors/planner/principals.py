"""Whether a turn's principal fields agree with each other (seed 003: principals are set at
the edge and never trusted from elsewhere).

The channel, heartbeat and CLI are the only producers of turns from outside (NATS
permissions; the planner publishes its own delegated sub-tasks on `in.delegate.*`), so a turn
that contradicts itself comes from a bug or a compromised producer: an `owner` kind without
the owner's principal, a webhook or third party claiming to be the owner, a `cron` turn that
is not a scheduled one. The planner refuses such a turn before it reaches a model.
"""

from __future__ import annotations

from collections.abc import Iterable

from contracts import TurnRequest

#: Kinds that may act with the owner's authority.
OWNER_KINDS = ("owner", "cron", "event")


def forged(turn: TurnRequest, owners: Iterable[str]) -> str:
    """A sentence saying what is inconsistent, or "" when the fields agree."""
    kind = turn.principal_kind
    if not kind:
        return ""  # a producer older than the field: nothing to compare
    if kind == "owner" and turn.principal not in set(owners):
        return f"a turn of kind owner came from {turn.principal}, who is not an owner principal"
    if turn.is_owner and kind not in OWNER_KINDS:
        return f"a turn of kind {kind} claimed the owner's authority"
    # A delegated sub-task keeps the principal of the turn that delegated it (the planner
    # checks it against its stored workflow before it runs).
    origin = "" if turn.origin == "delegate" and turn.delegation is not None else turn.origin
    if kind == "webhook" and (origin not in ("webhook", "")
                              or not turn.principal.startswith("webhook:")):
        return "a webhook turn did not enter through the webhook channel"
    if kind == "cron" and origin not in ("schedule", ""):
        return "a turn of kind cron was not a scheduled one"
    return ""
