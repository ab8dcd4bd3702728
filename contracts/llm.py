"""Messages to and from the llm actor, in a provider-neutral shape."""

from __future__ import annotations

from typing import Any

import msgspec

from contracts.base import Msg
from contracts.channel import Sink
from contracts.labels import Label
from contracts.tools import ToolRequest


class ToolSpec(msgspec.Struct, frozen=True, kw_only=True):
    """A tool offered to the model: name, description and JSON Schema of its arguments."""

    name: str
    description: str
    parameters: dict[str, Any] = msgspec.field(default_factory=dict)


class ToolCall(msgspec.Struct, frozen=True, kw_only=True):
    """A tool call the model asked for; `arguments` is the decoded JSON object."""

    id: str
    name: str
    arguments: dict[str, Any] = msgspec.field(default_factory=dict)


class ChatMessage(msgspec.Struct, frozen=True, kw_only=True):
    """One message of a conversation: system, user, assistant (maybe with tool calls) or tool."""

    role: str
    content: str = ""
    tool_calls: list[ToolCall] = msgspec.field(default_factory=list)
    tool_call_id: str = ""
    name: str = ""


class Usage(msgspec.Struct, frozen=True, kw_only=True):
    input_tokens: int = 0
    output_tokens: int = 0


class LlmRequest(Msg, frozen=True, kw_only=True, tag="llm.request"):
    """Ask a model for the next step of a turn."""

    session: str
    turn_id: str
    step: int
    role: str = "default"
    messages: list[ChatMessage]
    tools: list[ToolSpec] = msgspec.field(default_factory=list)
    # At most this many tokens in the answer; 0: the role's configured limit
    # (`models.max_tokens` / `[models.limits.<role>]`), which also caps a non-zero value.
    max_tokens: int = 0
    # Set by the escalate tool: the answer goes back as this call's ToolResult, not to the planner.
    for_call: ToolRequest | None = None
    # Set by the planner when the turn asks for a live preview (its `preview_interval`): stream
    # the answer and publish LlmPreview events for this sink at most once per interval.
    preview_to: Sink | None = None
    # The owner's turns go first when the llm has more requests than slots (fair scheduling).
    is_owner: bool = False
    preview_interval: float = 0.0
    # The highest label of the data in `messages` (the session's, contracts/labels.py): the
    # llm actor sends sensitive and above only to local models, secret to none.
    label: Label = "internal"
    # What the call is for, charged to the budgets under this tag: user, escalation, heartbeat,
    # proactive, observer, compaction, dreaming, diagnosis. The session budget applies to user and
    # escalation calls; the daily budget to all.
    purpose: str = "user"
    # Whose turn this is (copied from the turn, never from the model): a principal listed in
    # privacy.owner_acknowledged_cloud_risk may have its sensitive data sent to cloud models.
    principal: str = ""
    # The turn's task template (contracts/templates.py), chosen by the planner from the
    # principal: its owner_acknowledged_cloud_risk lets sensitive data reach cloud models.
    template: str = ""
    # The session whose budget is checked and charged ("": `session`): a delegated sub-task's
    # calls are charged to the session that delegated it.
    budget_session: str = ""


class LlmResponse(Msg, frozen=True, kw_only=True, tag="llm.response"):
    """The model's answer (or a sentence saying why there is none) for one step of a turn."""

    session: str
    turn_id: str
    step: int
    request_id: str
    content: str = ""
    tool_calls: list[ToolCall] = msgspec.field(default_factory=list)
    model: str = ""
    usage: Usage = msgspec.field(default_factory=Usage)
    error: str = ""
    # The error is a model outage (5xx, timeouts, unreachable, malformed answers) that retries
    # within models.retry_deadline_secs did not outlast; the turn can be retried with /retry.
    outage: bool = False
    # Set with `error` when a spent budget stopped the call: "session" or "day".
    budget: str = ""


class LlmPreview(Msg, frozen=True, kw_only=True, tag="llm.preview"):
    """The answer so far while a model streams it, for a chat's live preview (never the answer).

    Published at most once per preview interval and only when the text grew; `seq` counts the
    previews of one request (the id is `<request id>:preview:<seq>`). The final LlmResponse
    is unaffected, so a lost or late preview changes nothing but what the chat shows meanwhile.
    """

    session: str
    turn_id: str
    step: int
    request_id: str
    seq: int
    text: str
    sink: Sink


class LlmProgress(Msg, frozen=True, kw_only=True, tag="llm.progress"):
    """The llm is still working on a request (a long call, or waiting to retry after a failure).

    The planner's deadline for a model step counts from the last progress, so a slow model or
    machine is told from a hung one. `retry_in` > 0: attempt `attempt` failed with `reason` and
    the next one starts after that many seconds.
    """

    session: str
    turn_id: str
    step: int
    request_id: str
    attempt: int = 1
    reason: str = ""
    retry_in: float = 0.0
