"""Every message that crosses an actor boundary, as msgspec Structs with a `type` tag."""

from __future__ import annotations

from contracts.approval import ApprovalDecision, ApprovalRequest, ApprovalResolved
from contracts.audit import AuditEvent, audit_event
from contracts.base import Msg, derive_id, short_hash, subject_token
from contracts.channel import (
    ApprovalPrompt,
    Attachment,
    Delegation,
    Delivered,
    Notice,
    Outbound,
    Reply,
    Sink,
    TerminalInput,
    TurnRequest,
)
from contracts.home import HomeAnswer, HomeCommand, HomeEditPropose
from contracts.llm import (
    ChatMessage,
    LlmPreview,
    LlmProgress,
    LlmRequest,
    LlmResponse,
    ToolCall,
    ToolSpec,
    Usage,
)
from contracts.memory import (
    MemoryAdmin,
    MemoryAnswer,
    MemoryChanged,
    MemoryCommand,
    MemoryDream,
    MemoryHit,
    MemoryPropose,
    MemoryRecord,
    MemorySave,
    MemorySearch,
    Recall,
    Recalled,
)
from contracts.ops import (
    DeadLetter,
    Health,
    HoldRelease,
    Intervention,
    SessionIdle,
    SessionReset,
    SessionRetry,
    TaskOutcome,
)
from contracts.scripts import ScriptsRevert, ScriptsReverted
from contracts.tools import ToolOutcome, ToolRequest, ToolResult

#: Every payload type that travels on the bus.
ALL_MESSAGES: tuple[type[Msg], ...] = (
    TurnRequest,
    Reply,
    ApprovalPrompt,
    Notice,
    TerminalInput,
    Delivered,
    LlmRequest,
    LlmResponse,
    LlmPreview,
    LlmProgress,
    ToolRequest,
    ToolResult,
    ToolOutcome,
    ScriptsRevert,
    ScriptsReverted,
    MemorySave,
    MemorySearch,
    Recall,
    Recalled,
    MemoryCommand,
    MemoryAdmin,
    MemoryDream,
    MemoryAnswer,
    MemoryPropose,
    MemoryChanged,
    ApprovalRequest,
    ApprovalDecision,
    ApprovalResolved,
    DeadLetter,
    SessionIdle,
    SessionReset,
    SessionRetry,
    Intervention,
    TaskOutcome,
    HoldRelease,
    AuditEvent,
    HomeEditPropose,
    HomeCommand,
    HomeAnswer,
)

AnyMsg = (
    TurnRequest
    | Reply
    | ApprovalPrompt
    | Notice
    | TerminalInput
    | Delivered
    | LlmRequest
    | LlmResponse
    | LlmPreview
    | LlmProgress
    | ToolRequest
    | ToolResult
    | ToolOutcome
    | ScriptsRevert
    | ScriptsReverted
    | MemorySave
    | MemorySearch
    | Recall
    | Recalled
    | MemoryCommand
    | MemoryAdmin
    | MemoryDream
    | MemoryAnswer
    | MemoryPropose
    | MemoryChanged
    | ApprovalRequest
    | ApprovalDecision
    | ApprovalResolved
    | DeadLetter
    | SessionIdle
    | SessionReset
    | SessionRetry
    | Intervention
    | TaskOutcome
    | HoldRelease
    | AuditEvent
    | HomeEditPropose
    | HomeCommand
    | HomeAnswer
)

__all__ = [
    "ALL_MESSAGES",
    "AnyMsg",
    "ApprovalDecision",
    "ApprovalPrompt",
    "ApprovalRequest",
    "ApprovalResolved",
    "AuditEvent",
    "Attachment",
    "ChatMessage",
    "DeadLetter",
    "Delegation",
    "Delivered",
    "Health",
    "HomeAnswer",
    "HomeCommand",
    "HomeEditPropose",
    "HoldRelease",
    "Intervention",
    "LlmPreview",
    "LlmProgress",
    "LlmRequest",
    "LlmResponse",
    "MemoryAdmin",
    "MemoryAnswer",
    "MemoryChanged",
    "MemoryCommand",
    "MemoryDream",
    "MemoryHit",
    "MemoryPropose",
    "MemoryRecord",
    "MemorySave",
    "MemorySearch",
    "Msg",
    "Notice",
    "Outbound",
    "Recall",
    "Recalled",
    "Reply",
    "ScriptsRevert",
    "ScriptsReverted",
    "SessionIdle",
    "SessionReset",
    "SessionRetry",
    "Sink",
    "TaskOutcome",
    "TerminalInput",
    "ToolCall",
    "ToolOutcome",
    "ToolRequest",
    "ToolResult",
    "ToolSpec",
    "TurnRequest",
    "Usage",
    "audit_event",
    "derive_id",
    "short_hash",
    "subject_token",
]
