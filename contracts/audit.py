"""The audit log: one immutable event per privileged decision, on its own long-lived stream.

Who decided (`actor`), what (`decision`, dotted: `approval.asked`, `tool.refused`, ...), the
outcome, why, for whom, and references to the messages involved. Ids derive from the message
the decision was about, so a redelivered message re-audits under the same id (JetStream drops
the duplicate) and the log holds each decision once.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from contracts.base import Msg, derive_id

#: What became of the thing decided on.
AuditOutcome = Literal[
    "allowed", "refused", "asked", "approved", "denied", "expired", "opened", "closed",
    "half_open", "killed",
]


class AuditEvent(Msg, frozen=True, kw_only=True, tag="audit.event"):
    """One privileged decision: who took it, what it was, the outcome and why."""

    actor: str  # the actor (or the supervisor) that decided
    decision: str  # dotted kind: approval.asked, tool.refused, sender.denied, breaker.opened
    outcome: AuditOutcome
    reason: str  # a sentence
    principal: str = ""  # on whose behalf, when a principal is involved
    session: str = ""
    refs: dict[str, str] = msgspec.field(default_factory=dict)  # message ids, tool, model


def audit_event(actor: str, decision: str, outcome: AuditOutcome, reason: str, *, about: str,
                principal: str = "", session: str = "",
                refs: dict[str, str] | None = None) -> AuditEvent:
    """An audit event whose id derives from `about` (the message or key decided on)."""
    return AuditEvent(
        id=derive_id(about, "audit", decision, outcome), actor=actor, decision=decision,
        outcome=outcome, reason=reason, principal=principal, session=session,
        refs=dict(refs or {}),
    )
