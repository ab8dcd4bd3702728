"""Messages to and from the executor: tool calls, results and per-call outcomes."""

from __future__ import annotations

from typing import Any

import msgspec

from contracts.base import Msg
from contracts.capability import Capability
from contracts.channel import Sink
from contracts.labels import Label
from contracts.taint import Taint


class ToolRequest(Msg, frozen=True, kw_only=True, tag="tool.request"):
    """Run one tool call for a turn."""

    session: str
    turn_id: str
    step: int
    call_id: str
    name: str
    arguments: dict[str, Any] = msgspec.field(default_factory=dict)
    is_owner: bool = False
    reply_to: Sink | None = None
    # The turn's label (contracts/labels.py): a tool that hands the data to a model (escalate)
    # passes it on, so the llm actor routes it like the turn itself.
    label: Label = "internal"
    principal: str = ""  # the turn's principal (memory scopes); empty from older planners
    # The turn's taint and its extracted values (contracts/taint.py): the executor asks the
    # owner before a write that carries tainted content (the graduated rule).
    taint: Taint = "clean"
    extracted: dict[str, str | list[str]] = msgspec.field(default_factory=dict)
    # The planner's signed permission for this call (contracts/capability.py); the executor
    # refuses a call without a valid one.
    capability: Capability | None = None


class ToolResult(Msg, frozen=True, kw_only=True, tag="tool.result"):
    """The outcome of a tool call. `deferred` marks one that finished after its turn ended."""

    session: str
    turn_id: str
    step: int
    call_id: str
    name: str
    ok: bool
    output: str
    deferred: bool = False
    reply_to: Sink | None = None
    # The label of `output` (contracts/labels.py): the tool's ceiling joined with what it
    # claimed; the planner raises the turn's label by it.
    label: Label = "internal"
    # How tainted `output` is (privacy.tool_taint: web pages are raw); the planner joins it
    # into the turn's and the session's taint.
    taint: Taint = "clean"


class ToolOutcome(Msg, frozen=True, kw_only=True, tag="tool.outcome"):
    """Per-call stats for the supervisor and tool _meta."""

    tool: str
    ok: bool
    duration_ms: int
    error: str = ""
    timed_out: bool = False
    version: int = 0  # an agent-created tool's version (its files' revision); 0 for core tools
    refused: bool = False  # a policy refusal (SSRF, blocked domain, rate limit): not a failure
