"""Messages of the approval flow: request, owner decision, resolution."""

from __future__ import annotations

from contracts.base import Msg
from contracts.channel import Sink
from contracts.tools import ToolRequest


class ApprovalRequest(Msg, frozen=True, kw_only=True, tag="approval.request"):
    """An actor asks the owner to approve `action`; `call` is what runs if approved."""

    session: str
    summary: str
    reason: str
    call: ToolRequest | None = None
    sink: Sink | None = None
    # The asking turn's trace context: the continuation after the decision joins that trace.
    traceparent: str = ""


class ApprovalDecision(Msg, frozen=True, kw_only=True, tag="approval.decision"):
    """What a principal answered to an approval prompt (validated by the approval actor)."""

    approval_id: str
    approved: bool
    principal: str
    is_owner: bool = False
    # Where the decider is: a decision that did not happen (unknown id, not the owner,
    # expired) is explained there, not only at owner.sink.
    reply_to: Sink | None = None


class ApprovalResolved(Msg, frozen=True, kw_only=True, tag="approval.resolved"):
    """The final state of an approval: approved, denied or expired."""

    approval_id: str
    session: str
    status: str  # approved | denied | expired
    call: ToolRequest | None = None
    sink: Sink | None = None
