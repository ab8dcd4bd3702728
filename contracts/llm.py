"""Messages to and from the llm actor, in a provider-neutral shape."""

from __future__ import annotations

from typing import Any

import msgspec

from contracts.base import Msg
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
    max_tokens: int = 4096
    # Set by the escalate tool: the answer goes back as this call's ToolResult, not to the planner.
    for_call: ToolRequest | None = None


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
