"""Messages to and from the memory actor."""

from __future__ import annotations

import msgspec

from contracts.base import Msg
from contracts.channel import Sink
from contracts.labels import Label
from contracts.taint import Taint
from contracts.tools import ToolRequest


class MemoryHit(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    kind: str
    content: str
    score: float = 0.0
    scope: str = ""
    label: Label = "internal"  # the label of the turn it came from (contracts/labels.py)


class MemoryRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One stored memory as listed and exported (a JSONL line of `wintermute memory export`)."""

    id: str
    kind: str = "fact"
    content: str
    tags: list[str] = msgspec.field(default_factory=list)
    scope: str = ""
    session: str = ""
    created: float = 0.0
    # active | archived (forgotten, superseded, merged or decayed) | proposed (learned, awaiting
    # promotion) | rejected | revoked (its creation was undone)
    status: str = "active"
    confidence: float = 1.0  # how sure the extractor was (1.0: said or imported explicitly)
    source: str = ""  # where a learned memory came from, e.g. observer:idle:<session>:<time>
    label: Label = "internal"  # the label of its source: a recall respects the lattice
    # What the fact is about ("car", "home_city"), from the extractor: two active facts with one
    # key in one scope conflict ([memory] conflict). Empty: never in conflict.
    key: str = ""
    version: int = 1  # 1 + the version it superseded
    replaces: str = ""  # the id of the fact this version supersedes (archived once it is active)
    used: float = 0.0  # when a recall or search last returned it (dreaming decays stale ones)


class MemorySave(Msg, frozen=True, kw_only=True, tag="memory.save"):
    """Store a memory. `for_call` (when set) is the tool call waiting for the confirmation."""

    session: str
    kind: str = "fact"
    content: str
    tags: list[str] = msgspec.field(default_factory=list)
    for_call: ToolRequest | None = None
    # Who is speaking, copied from the turn (never from tool arguments): the memory actor
    # derives the scope from these (actors/memory/scopes.py). Empty: the session's scope only.
    principal: str = ""
    is_owner: bool = False
    # The label of the turn that saves it (copied from the turn): the memory keeps it.
    label: Label = "internal"


class MemorySearch(Msg, frozen=True, kw_only=True, tag="memory.search"):
    """Search memories, answering a tool call with a ToolResult."""

    session: str
    query: str
    limit: int = 5
    for_call: ToolRequest | None = None
    principal: str = ""  # as on MemorySave: decides which scopes may be searched
    is_owner: bool = False
    # The lattice (contracts/labels.py): only memories labelled at most `ceiling` (no read
    # up) and cleared for `sink` ("channel:chat", no write down); "" for either: no limit
    # (producers older than the fields).
    ceiling: str = ""
    sink: str = ""


class Recall(Msg, frozen=True, kw_only=True, tag="memory.recall"):
    """The planner asks for memories relevant to a turn before calling the model."""

    session: str
    turn_id: str
    query: str
    limit: int = 5
    principal: str = ""  # the turn's principal and owner flag: which scopes may be recalled
    is_owner: bool = False
    ceiling: str = ""  # as on MemorySearch: the turn's label and its reply's sink
    sink: str = ""


class Recalled(Msg, frozen=True, kw_only=True, tag="memory.recalled"):
    """Memories relevant to a turn (possibly none), answering a Recall."""

    session: str
    turn_id: str
    hits: list[MemoryHit] = msgspec.field(default_factory=list)
    error: str = ""
    # True when only the owner hears this turn (the owner's private chat, their scheduled
    # tasks): the planner adds the owner's profile (USER.md) to the prompt only then.
    owner_context: bool = False


class MemoryPropose(Msg, frozen=True, kw_only=True, tag="memory.propose"):
    """What the observer's model extracted from a finished conversation, as the model wrote it
    (`text`: a JSON list of {content, kind, confidence}). The memory actor validates it (a
    malformed answer is dead-lettered with the reason, nothing written), derives the scope from
    `principal`/`session` like a save's, and promotes each item by `[memory] policy`."""

    session: str
    principal: str = ""
    is_owner: bool = False
    source: str = ""
    text: str
    # The conversation's highest label and worst taint (contracts/taint.py): learned memories
    # keep the label, and anything learned from tainted content waits for the owner.
    label: Label = "internal"
    taint: Taint = "clean"


class MemoryCommand(Msg, frozen=True, kw_only=True, tag="memory.command"):
    """`/memory` from a chat: answered with a Notice to `reply_to`, within what that chat may
    read (its audience, derived from `principal`/`session` like a recall's)."""

    action: str = "list"  # list | search | forget | pending | promote | reject | undo
    arg: str = ""  # the search words, or the id to forget
    principal: str = ""
    is_owner: bool = False
    session: str = ""
    reply_to: Sink


class MemoryAdmin(Msg, frozen=True, kw_only=True, tag="memory.admin"):
    """`wintermute memory ...`, the owner's command line: any scope. Only the `cli` user may
    publish its subject (bus/permissions.py); answered by MemoryAnswer events."""

    # list | search | forget | export | import | reembed | pending | promote | reject | undo |
    # revoke | dream
    action: str
    scope: str = ""  # only this scope; empty: all
    query: str = ""
    target: str = ""  # the memory id to forget, promote or reject
    limit: int = 50
    records: list[MemoryRecord] = msgspec.field(default_factory=list)  # import


class MemoryAnswer(Msg, frozen=True, kw_only=True, tag="memory.answer"):
    """One part of the answer to a MemoryAdmin (`request` is its id); `last` ends it."""

    request: str
    ok: bool = True
    text: str = ""
    records: list[MemoryRecord] = msgspec.field(default_factory=list)
    part: int = 0
    last: bool = True


class MemoryChanged(Msg, frozen=True, kw_only=True, tag="memory.changed"):
    """Audit: one change to one memory, published on `evt.memory.changed.<memory id>` after it
    was made (immutable in WM_EVT, like every event)."""

    memory_id: str
    # saved | learned | proposed | promoted | rejected | archived | imported | superseded |
    # merged | decayed | revoked | undone
    change: str
    scope: str = ""
    by: str = ""  # the principal, `observer`, `owner (approval)` or `cli`
    cause: str = ""  # the id of the message that made the change
    content: str = ""


class MemoryDream(Msg, frozen=True, kw_only=True, tag="memory.dream"):
    """The heartbeat's nightly dreaming job (seed 001): merge near-duplicate memories and decay
    stale ones ([memory] merge_similarity, decay_*); with a model, merged sets are reworded
    into one fact. Changes are audited and `/memory undo` reverts the night's batch."""

    job: str = "dreaming"
