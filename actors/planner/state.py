"""Planner session state, persisted in KV so a planner restart loses no history or turn."""

from __future__ import annotations

import msgspec

from contracts import ChatMessage, Sink, ToolResult, TurnRequest
from contracts.taint import Taint

HISTORY_MESSAGES = 40
TOOL_OUTPUT_IN_HISTORY = 2000
RECENT_TURNS = 64
# A message kept in history is at most this long, and all of history at most HISTORY_CHARS:
# the session state is one KV value and every model request carries the history, both under
# the 1 MiB payload limit (two 120 KB messages once wedged a chat for good).
MESSAGE_IN_HISTORY = 16_000
HISTORY_CHARS = 200_000


class TurnState(msgspec.Struct, kw_only=True):
    """The turn in progress: where it is and what the model has seen so far."""

    request: TurnRequest
    phase: str = "recall"  # recall -> llm <-> tools
    step: int = 0
    messages: list[ChatMessage] = msgspec.field(default_factory=list)
    calls: list[str] = msgspec.field(default_factory=list)  # call ids awaited, in order
    results: dict[str, ToolResult] = msgspec.field(default_factory=dict)
    tool_calls_used: int = 0
    tool_failures: int = 0  # failed tool results (a scheduled turn failing them all failed)
    new_from: int = 0  # index in messages where this turn's own messages start
    started: float = 0.0  # when the turn started (epoch seconds)
    phase_since: float = 0.0  # when the current phase (step) started
    deadline: float = 0.0  # past it the current step is hung (0: none, before deadlines)
    progress: str = ""  # the last progress the llm reported for this step (for status)
    label: str = "internal"  # the highest label of what the model sees in this turn
    taint: Taint = "clean"  # the worst taint of what the model sees in this turn
    tokens_used: int = 0  # by this turn's model calls (its budget and the turn ceiling)
    repeats: dict[str, int] = msgspec.field(default_factory=dict)  # hash(tool, args) -> calls
    corrections: int = 0  # answers corrected for claiming an action no tool did (_turing.py)
    template: str = ""  # the task template it runs under (contracts/templates.py)
    # Plan-then-execute (actors/planner/_pte.py): "plan" or "synth"; "" for the ordinary loop.
    stage: str = ""
    synth_system: str = ""  # the synthesizer's system message, kept from the recall
    skill_role: str = ""  # the llm role a loaded skill chose for the rest of the turn (_skills)

    @property
    def turn_id(self) -> str:
        return self.request.id


class SessionState(msgspec.Struct, kw_only=True):
    """One session's mailbox: history, the active turn and turns waiting behind it."""

    session: str
    history: list[ChatMessage] = msgspec.field(default_factory=list)
    active: TurnState | None = None
    queue: list[TurnRequest] = msgspec.field(default_factory=list)
    recent: list[str] = msgspec.field(default_factory=list)
    failed: TurnRequest | None = None  # the last turn that failed, for /retry
    # What fell out of `history`, summarised by the model (rolling: each summary folds in the
    # previous one); the raw messages stay in the streams for replay.
    summary: str = ""
    # Compaction (_compact.py): messages dropped from history that no summary holds yet, and the
    # summary request in flight (its id, and how many of `unsummarized` it covers).
    unsummarized: list[ChatMessage] = msgspec.field(default_factory=list)
    summarizing: str = ""
    summarizing_n: int = 0
    # The last user turn's preview cadence and chat, for turns the planner starts itself.
    preview_interval: float = 0.0
    preview_sink: Sink | None = None
    # The highest label of any turn in this session: its history carries that data along.
    label: str = "public"
    template: str = ""  # the last principal turn's template (an event turn continues it)
    # Plan-then-execute sessions: what earlier plans called (tool, arguments, ok), never the
    # raw messages or tool output; the planning model sees it (seed 003 §9).
    working: list[dict[str, object]] = msgspec.field(default_factory=list)

    def knows(self, turn_id: str) -> bool:
        """Whether this turn was already accepted (running, queued or finished)."""
        if self.active is not None and self.active.turn_id == turn_id:
            return True
        return turn_id in self.recent or any(q.id == turn_id for q in self.queue)

    def remember_turn(self, turn_id: str) -> None:
        self.recent = [*self.recent, turn_id][-RECENT_TURNS:]

    def append_history(self, messages: list[ChatMessage]) -> list[ChatMessage]:
        """Keep the last messages, shortening tool outputs, starting at a user message;
        returns the messages that fell out (for the rolling summary)."""
        every = [*self.history, *(_shorten(m) for m in messages)]
        kept = every[-HISTORY_MESSAGES:]
        while sum(len(m.content) for m in kept) > HISTORY_CHARS:
            kept.pop(0)
        while kept and kept[0].role != "user":
            kept.pop(0)
        self.history = kept
        return every[: len(every) - len(kept)]


def _shorten(message: ChatMessage) -> ChatMessage:
    limit = TOOL_OUTPUT_IN_HISTORY if message.role == "tool" else MESSAGE_IN_HISTORY
    if len(message.content) > limit:
        cut = message.content[:limit]
        return msgspec.structs.replace(message, content=cut + "\n[... shortened in history]")
    return message


_enc = msgspec.json.Encoder()
_dec = msgspec.json.Decoder(SessionState)


def dump(state: SessionState) -> bytes:
    return _enc.encode(state)


def load(data: bytes | None, session: str) -> SessionState:
    if not data:
        return SessionState(session=session)
    return _dec.decode(data)
