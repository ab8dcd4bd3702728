"""What a session's recording holds: its turns, each with every message it caused, read from
JetStream history or from an exported file.

A turn starts with a `turn.request` (a user message, a scheduled task) or with a deferred
`tool.result` (an approved call that finished after its turn ended: the planner starts turn
`<result id>:turn` for it). Its messages are found by their `turn_id`, or, for those without
one (approvals, outcomes, deliveries), by the longest turn id their own id starts with. Model
calls are keyed by turn and step, so a continuation's step 0 never overwrites its parent's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import msgspec

from bus.codec import decode
from contracts import (
    AnyMsg,
    ApprovalRequest,
    DeadLetter,
    Intervention,
    LlmRequest,
    LlmResponse,
    Recalled,
    Reply,
    SessionReset,
    ToolRequest,
    ToolResult,
    TurnRequest,
)


@dataclass(frozen=True)
class Entry:
    """One stored message: where it sat and what it says."""

    stream: str
    seq: int
    subject: str
    headers: dict[str, str]
    msg: AnyMsg
    raw: bytes


@dataclass
class Turn:
    """One turn of a session with every message it caused, in stored order."""

    id: str
    session: str
    start: Entry  # its turn.request, or the deferred tool.result that began it
    events: list[Entry] = field(default_factory=list)
    incidents: list[Entry] = field(default_factory=list)  # dead letters, restarts, ...
    recalled: Recalled | None = None
    llm_requests: dict[int, LlmRequest] = field(default_factory=dict)
    llm_responses: dict[int, LlmResponse] = field(default_factory=dict)
    tool_requests: dict[str, ToolRequest] = field(default_factory=dict)  # by request id
    tool_results: dict[str, ToolResult] = field(default_factory=dict)  # by request id
    reply: Reply | None = None
    reset_before: bool = False  # the session's history was reset since its previous turn

    @property
    def ts(self) -> float:
        return self.start.msg.ts

    @property
    def kind(self) -> str:
        """"user" (or "schedule") for a turn.request, "continuation" for a deferred result."""
        msg = self.start.msg
        return msg.origin if isinstance(msg, TurnRequest) else "continuation"

    @property
    def end(self) -> float:
        last = [e.msg.ts for e in self.events]
        return self.reply.ts if self.reply else max(last, default=self.ts)

    @property
    def text(self) -> str:
        msg = self.start.msg
        if isinstance(msg, TurnRequest):
            return msg.text
        return f"[{msg.name} finished after approval]" if isinstance(msg, ToolResult) else ""

    @property
    def parent(self) -> str:
        """The turn that delegated this one ("" for a turn of its own)."""
        msg = self.start.msg
        if isinstance(msg, TurnRequest) and msg.delegation is not None:
            return msg.delegation.parent_turn
        return ""

    @property
    def outcome(self) -> str:
        """How the turn ended, in a word or three."""
        errors = [r.error for r in self.llm_responses.values() if r.error]
        if self.parent:  # a sub-task answers its workflow (KV), not a chat
            done = any(not r.tool_calls for r in self.llm_responses.values())
            return "model error" if errors else "answered its workflow" if done else "no answer"
        if self.reply is None:
            return "no reply"
        if errors:
            return "model error"
        if any(isinstance(e.msg, ApprovalRequest) for e in self.events):
            return "replied, approval asked"
        return "replied"


@dataclass
class Recording:
    """Every turn found, in the order they began, plus instance-wide incidents."""

    entries: list[Entry]
    turns: list[Turn]
    incidents: list[Entry]

    def find(self, turn_id: str) -> Turn | None:
        return next((t for t in self.turns if t.id == turn_id), None)

    def session(self, session: str) -> list[Turn]:
        return [t for t in self.turns if t.session == session]

    def latest(self, session: str) -> Turn | None:
        turns = self.session(session)
        return turns[-1] if turns else None

    def entries_of(self, turns: Iterable[Turn]) -> list[Entry]:
        """The stored messages of these turns and the incidents during them, in stored order."""
        chosen: dict[tuple[str, int], Entry] = {}
        turns = list(turns)
        sessions = {t.session for t in turns}
        for t in turns:
            for e in (t.start, *t.events, *t.incidents):
                chosen[(e.stream, e.seq)] = e
        for e in self.entries:  # a /reset between them changes what the next turn saw
            if isinstance(e.msg, SessionReset) and e.msg.session in sessions:
                chosen[(e.stream, e.seq)] = e
        return sorted(chosen.values(), key=lambda e: (e.msg.ts, e.stream, e.seq))


def decode_entry(stream: str, seq: int, subject: str, headers: dict[str, str],
                 data: bytes) -> Entry | None:
    """An Entry, or None for a payload that is not a known message (skipped, never fatal)."""
    try:
        return Entry(stream, seq, subject, headers, decode(data), data)
    except msgspec.DecodeError:
        return None


def _dead_letter_ids(dl: DeadLetter) -> tuple[str, str]:
    """(id, turn_id) of the message a dead letter carries, when it still decodes."""
    try:
        inner = decode(dl.payload.encode())
    except msgspec.DecodeError:
        return "", ""
    return inner.id, str(getattr(inner, "turn_id", ""))


def build(entries: list[Entry]) -> Recording:
    """Group stored messages into turns; keep restarts and dead letters for the timelines."""
    entries = sorted(entries, key=lambda e: (e.msg.ts, e.stream, e.seq))
    turns: dict[str, Turn] = {}
    for e in entries:
        msg = e.msg
        if isinstance(msg, TurnRequest) and msg.id not in turns:
            turns[msg.id] = Turn(msg.id, msg.session, e)
        elif isinstance(msg, ToolResult) and msg.deferred:
            tid = f"{msg.id}:turn"
            turns.setdefault(tid, Turn(tid, msg.session, e))
    incidents: list[Entry] = []
    for e in entries:
        msg = e.msg
        if isinstance(msg, Intervention):
            incidents.append(e)
            continue
        if isinstance(msg, DeadLetter):
            incidents.append(e)
            inner_id, inner_turn = _dead_letter_ids(msg)
            owner = turns.get(inner_turn) or _by_prefix(turns, inner_id)
            if owner is not None:
                owner.incidents.append(e)
            continue
        turn = _owner(turns, msg)
        if turn is None or e is turn.start:
            continue
        _attach(turn, e)
    ordered = sorted(turns.values(), key=lambda t: t.ts)
    _mark_resets(ordered, [e for e in entries if isinstance(e.msg, SessionReset)])
    for t in ordered:  # restarts and dead letters while the turn ran
        for e in incidents:
            if isinstance(e.msg, Intervention) and t.ts - 1 <= e.msg.ts <= t.end + 1:
                t.incidents.append(e)
    return Recording(entries, ordered, incidents)


def _mark_resets(turns: list[Turn], resets: list[Entry]) -> None:
    """A `/reset` between two turns of a session: the later one starts from a fresh history."""
    previous: dict[str, float] = {}
    for t in turns:
        since = previous.get(t.session, float("-inf"))
        t.reset_before = any(isinstance(r.msg, SessionReset) and r.msg.session == t.session
                             and since <= r.msg.ts <= t.ts for r in resets)
        previous[t.session] = t.ts


def _by_prefix(turns: dict[str, Turn], msg_id: str) -> Turn | None:
    best: Turn | None = None
    for tid, turn in turns.items():
        if msg_id.startswith(tid + ":") and (best is None or len(tid) > len(best.id)):
            best = turn
    return best


def _owner(turns: dict[str, Turn], msg: AnyMsg) -> Turn | None:
    if isinstance(msg, ToolResult) and msg.deferred:
        return None  # it starts its own turn
    turn_id = getattr(msg, "turn_id", "")
    if isinstance(turn_id, str) and turn_id in turns:
        return turns[turn_id]
    return _by_prefix(turns, msg.id)


def _attach(turn: Turn, e: Entry) -> None:
    turn.events.append(e)
    match e.msg:
        case Recalled():
            turn.recalled = e.msg
        case LlmRequest(for_call=None):
            turn.llm_requests[e.msg.step] = e.msg
        case LlmResponse():
            if e.msg.request_id == f"{turn.id}:llm:{e.msg.step}":
                turn.llm_responses[e.msg.step] = e.msg
        case ToolRequest():
            turn.tool_requests[e.msg.id] = e.msg
        case ToolResult():
            turn.tool_results[e.msg.id.removesuffix(":result")] = e.msg
        case Reply():
            turn.reply = e.msg
