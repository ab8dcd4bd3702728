"""Messages between the channel actor and the rest: user turns in, replies and prompts out."""

from __future__ import annotations

from typing import Literal

import msgspec

from contracts.base import Msg
from contracts.labels import Label
from contracts.taint import Taint


class Sink(msgspec.Struct, frozen=True, kw_only=True):
    """An explicit destination: a channel adapter and a chat within it (never "last active")."""

    channel: str
    chat: str
    thread: str = ""

    def __str__(self) -> str:
        return f"{self.channel}:{self.chat}" + (f":{self.thread}" if self.thread else "")

    @classmethod
    def parse(cls, text: str) -> Sink:
        """Parse `channel:chat[:thread]`."""
        parts = text.split(":", 2)
        if len(parts) < 2 or not parts[0] or not parts[1]:
            raise ValueError(f"a sink looks like 'channel:chat', got {text!r}")
        return cls(channel=parts[0], chat=parts[1], thread=parts[2] if len(parts) > 2 else "")


class Attachment(msgspec.Struct, frozen=True, kw_only=True):
    """A file stored by the channel under workspace/ and referenced by path."""

    kind: str
    path: str
    description: str = ""


#: Who a turn speaks for, set at the edge (seed 003 §4): the owner, someone the owner paired or
#: allowed (a third party), a webhook source, a scheduled task (cron), an event the system
#: raised itself; "" for producers older than the field.
PrincipalKind = Literal["owner", "paired", "third_party", "webhook", "cron", "event", ""]


class Delegation(msgspec.Struct, frozen=True, kw_only=True):
    """What makes a turn a delegated sub-task: the workflow and node it runs, who asked.

    The planner publishes such turns on `in.delegate.<parent>`; its session is
    `<workflow>~<node>`, its id `<session>:task`, and its answer goes back into the workflow
    record (never to a chat). `workflow` is the parent's `delegate` tool request id.
    """

    workflow: str
    node: str
    role: str  # the delegation role (worker, researcher, coder, or one from config)
    parent_session: str
    parent_turn: str
    prompt: str = ""  # the role's instructions, put first in the system prompt
    model_role: str = "default"  # the llm role its model calls use
    tools: list[str] = msgspec.field(default_factory=list)  # its tool profile; empty: all
    deadline: float = 0.0  # epoch seconds; past it the node ends with its partial results


class TurnRequest(Msg, frozen=True, kw_only=True, tag="turn.request"):
    """Something for the agent to answer: a user message, a scheduled task, a deferred event."""

    session: str
    principal: str
    text: str
    reply_to: Sink
    is_owner: bool = False
    origin: str = "user"  # user | schedule | event | webhook | delegate
    attachments: list[Attachment] = msgspec.field(default_factory=list)
    # Set by the channel: show the answer while it is written, one edit at most every this many
    # seconds (0: no preview). The channel owns the chat's policy; planner and llm pass it on.
    preview_interval: float = 0.0
    # Set by the channel: how far this turn's data may travel (contracts/labels.py). Every
    # turn is at least internal; a webhook's source may be configured higher.
    label: Label = "internal"
    principal_kind: PrincipalKind = ""
    # Tokens this turn may use (a scheduled task's budget_tokens, a proactive check's cap);
    # 0: only budget.max_tokens_per_turn. A turn stopped by it is skipped, not failed.
    budget_tokens: int = 0
    # What its model calls are charged as; "" derives it from origin (user and event: user,
    # schedule: heartbeat).
    purpose: str = ""
    # Set by the channel (contracts/taint.py): how far the turn's text is from anyone trusted.
    # The owner's own words are clean, a third party's or a webhook's raw, and a webhook
    # source with an extractor gives the model only `extracted` typed fields (kit/extract.py).
    taint: Taint = "clean"
    # The typed values a structured extractor let through (field -> value or list of values):
    # writes made only of these (or of other typed values) are "structured" (graduated rule).
    extracted: dict[str, str | list[str]] = msgspec.field(default_factory=dict)
    # Set on a sub-task the planner delegated (origin "delegate"); its parent ids make the
    # tree that `tap` and `replay` show.
    delegation: Delegation | None = None


class Reply(Msg, frozen=True, kw_only=True, tag="turn.reply"):
    """The agent's answer for a session, sent once by the channel to `sink`."""

    session: str
    turn_id: str
    sink: Sink
    text: str


class ApprovalPrompt(Msg, frozen=True, kw_only=True, tag="approval.prompt"):
    """Ask the owner to approve or deny an action; answered with an ApprovalDecision."""

    approval_id: str
    sink: Sink
    summary: str
    expires_at: float


class Notice(Msg, frozen=True, kw_only=True, tag="notice"):
    """An owner notification from the supervisor or heartbeat."""

    sink: Sink
    text: str
    source: str = ""
    # The `up` run this notice is about ("" for notices that stay true across runs). A notice
    # about the processes of an earlier run ("the planner was hung") is dropped by the
    # channel of a later run instead of greeting the owner with stale news.
    run: str = ""


class TerminalInput(Msg, frozen=True, kw_only=True, tag="terminal.input"):
    """What `wintermute chat` typed, handed to the channel actor's terminal adapter."""

    chat: str
    text: str


class Delivered(Msg, frozen=True, kw_only=True, tag="channel.delivered"):
    """The channel delivered an outbound message to a terminal chat (what `chat` prints)."""

    chat: str
    kind: str  # reply | approval | notice
    text: str
    ref: str = ""  # the outbound message id, or the approval id


Outbound = Reply | ApprovalPrompt | Notice
