"""One route table: which type travels on which subject, who sends it, which durables read it.

Every message type is declared once (`ROUTES`) with its subject template relative to the
instance prefix and the roles that produce it; every durable consumer once (`DURABLES`) with
its stream, filters and delivery settings. From these, `Bus.send(msg)` derives a message's
subject, the supervisor provisions consumers, `bus/permissions.py` grants publish rights and
durables, and the README's subject table is rendered (tests/contracts/test_routes.py).
Nothing here imports an actor: the supervisor reads the table without loading actor code.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from contracts.approval import ApprovalDecision, ApprovalRequest, ApprovalResolved
from contracts.audit import AuditEvent
from contracts.base import Msg, short_hash, subject_token
from contracts.channel import (
    ApprovalPrompt,
    Delivered,
    Notice,
    Reply,
    TerminalInput,
    TurnRequest,
)
from contracts.home import HomeAnswer, HomeCommand, HomeEditPropose
from contracts.llm import LlmPreview, LlmProgress, LlmRequest, LlmResponse
from contracts.memory import (
    MemoryAdmin,
    MemoryAnswer,
    MemoryChanged,
    MemoryCommand,
    MemoryDream,
    MemoryPropose,
    MemorySave,
    MemorySearch,
    Recall,
    Recalled,
)
from contracts.ops import (
    DeadLetter,
    HoldRelease,
    Intervention,
    SessionIdle,
    SessionReset,
    SessionRetry,
    TaskOutcome,
)
from contracts.scripts import ScriptsRevert, ScriptsReverted
from contracts.tools import ToolOutcome, ToolRequest, ToolResult

#: The eight actors in start order (each runs as its own process).
ACTORS: tuple[str, ...] = (
    "memory", "llm", "executor", "approval", "planner", "observer", "heartbeat", "channel",
)
#: Stop order: intake first, so nothing new arrives while the rest finish.
STOP_ORDER: tuple[str, ...] = (
    "channel", "heartbeat", "planner", "executor", "approval", "llm", "memory", "observer",
)
#: Actors that may run as several processes (`[actors.<name>] replicas`) sharing their durable
#: consumers: their durables keep no per-session order (each model call stands alone; the
#: planner waits for one answer before it asks the next) and their state is in KV.
SCALABLE: tuple[str, ...] = ("llm",)
#: Roles that are not actors: the supervisor (admin) and the owner's command line.
SUPERVISOR = "supervisor"
CLI = "cli"
#: The channels whose inbound subjects the channel actor publishes (its adapters).
CHANNELS: tuple[str, ...] = ("terminal", "telegram", "slack", "webhook")
#: Streams by short name: a subject's first token after the prefix names its stream.
STREAMS: tuple[str, ...] = ("in", "out", "cmd", "evt", "dlq", "audit")

Keys = Callable[[Any], Mapping[str, str]]


@dataclass(frozen=True)
class Route:
    """One message type: its subject template (prefix-relative) and who publishes it.

    Placeholders name attributes of the message (dotted for nested ones, `{sink.chat}`),
    unless `keys` computes them; each is made a safe subject token. `narrow` restricts a
    producer to part of the template (least privilege), e.g. the channel to its adapters.
    """

    type: type[Msg]
    subject: str
    producers: tuple[str, ...]
    description: str = ""
    keys: Keys | None = None
    narrow: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def tag(self) -> str:
        return str(self.type.__struct_config__.tag)

    @property
    def pattern(self) -> str:
        """The template with every placeholder a `*` wildcard."""
        return ".".join("*" if t.startswith("{") else t for t in tokens(self.subject))

    def grants(self, role: str) -> tuple[str, ...]:
        """Subjects (prefix-relative) `role` may publish this type on."""
        if role not in self.producers:
            return ()
        return self.narrow.get(role, (self.pattern,))


@dataclass(frozen=True)
class Durable:
    """A durable pull consumer: its stream, filters (prefix-relative) and delivery settings.

    `when` names a boolean config key (`channels.telegram.pairing`) without which the durable
    is neither provisioned nor granted nor consumed. `raw` consumers get undecoded payloads.
    """

    name: str
    actor: str
    stream: str  # short name: in | out | cmd | evt | dlq | audit
    filters: tuple[str, ...]
    ordered_by: str = "session"  # attribute that keys in-order handling; "" for none
    ack_wait: float = 10.0
    max_deliver: int = 5
    max_ack_pending: int = 256
    concurrency: int = 16
    dedupe: bool = True  # handled-markers in wm_done
    raw: bool = False
    when: str = ""
    note: str = ""

    def enabled(self, config: Any) -> bool:
        """Whether this configuration runs the durable (`when` is a dotted boolean key)."""
        if not self.when:
            return True
        value: Any = config
        for part in self.when.split("."):
            value = getattr(value, part)
        return bool(value)

    def types(self) -> tuple[type[Msg], ...]:
        """The message types routed to subjects this durable's filters match."""
        return tuple(r.type for r in ROUTES if any(overlaps(f, r.subject) for f in self.filters))


def _intake(msg: TurnRequest) -> dict[str, str]:
    # Scheduled turns enter on in.schedule.<task> (their reply goes to the task's sink).
    if msg.origin == "schedule":
        return {"channel": "schedule", "chat": msg.session.removeprefix("task:")}
    # Webhook deliveries enter on in.webhook.<source>; their reply sink is another channel's.
    if msg.origin == "webhook":
        return {"channel": "webhook", "chat": msg.principal.removeprefix("webhook:")}
    # Delegated sub-tasks enter on in.delegate.<hash of the parent session>.
    if msg.delegation is not None:
        return {"channel": "delegate", "chat": short_hash(msg.delegation.parent_session, 16)}
    return {"channel": msg.reply_to.channel, "chat": msg.reply_to.chat}


_OUT = "out.{sink.channel}.{sink.chat}"
#: The actors that take privileged decisions today (approvals, refusals, denied senders,
#: circuit breakers); only they may write to the audit log.
_AUDITORS = ("channel", "planner", "executor", "approval", "llm")

ROUTES: tuple[Route, ...] = (
    Route(TurnRequest, "in.{channel}.{chat}", ("channel", "heartbeat", "planner", CLI),
          keys=_intake,
          description="scheduled tasks enter on `in.schedule.<task>` (`wintermute tasks run`), "
          "delegated sub-tasks on `in.delegate.<parent>`",
          narrow={"channel": tuple(f"in.{c}.*" for c in CHANNELS),
                  "heartbeat": ("in.schedule.*",),
                  "planner": ("in.delegate.*",),
                  # `tasks run`; `replay --fork-at` sends a fork's turns as its principal
                  CLI: ("in.schedule.*", "in.terminal.*")}),
    Route(Reply, _OUT, ("planner", "executor")),
    Route(ApprovalPrompt, _OUT, ("approval",)),
    Route(Notice, _OUT, ("channel", "executor", "approval", "heartbeat", "memory", "observer",
                         SUPERVISOR)),
    Route(TerminalInput, "cmd.channel.terminal", (CLI,), "what `wintermute chat` typed"),
    Route(SessionReset, "cmd.planner.reset", ("channel",),
          "`/reset`: history, the turn in progress and the queue are cleared"),
    Route(SessionRetry, "cmd.planner.retry", ("channel",), "`/retry`: the last failed turn again"),
    Route(LlmRequest, "cmd.llm.complete", ("planner", "executor", "observer", "memory",
                                           SUPERVISOR),
          "the executor's `escalate` is answered on `evt.tool.result.<session>`; the observer's "
          "learning and the planner's summaries use role `observer`; memory's nightly "
          "rewording, role `memory`, is answered on `evt.llm.response.memory-dreaming`"),
    Route(ToolRequest, "cmd.executor.run", ("planner",)),
    Route(ScriptsRevert, "cmd.executor.revert", ("channel", CLI, SUPERVISOR)),
    Route(HomeEditPropose, "cmd.executor.propose", ("observer",),
          "a change to AGENTS.md/USER.md for the WriteGate (reflection, consolidation)"),
    Route(HomeCommand, "cmd.executor.home", ("channel", CLI),
          "`/memory history, changes, apply, drop, revert` and `wintermute memory` the same"),
    Route(MemorySave, "cmd.memory.save", ("executor",),
          "with the turn's principal and owner flag: the memory actor derives the scope"),
    Route(MemorySearch, "cmd.memory.search", ("executor",)),
    Route(Recall, "cmd.memory.recall", ("planner",)),
    Route(MemoryCommand, "cmd.memory.command", ("channel",),
          "`/memory` from a chat, answered with a `notice` there"),
    Route(MemoryPropose, "cmd.memory.propose", ("observer",),
          "what the model extracted from an idle conversation"),
    Route(MemoryAdmin, "cmd.memory.admin", (CLI,), "`wintermute memory ...`: every scope"),
    Route(MemoryDream, "cmd.memory.dream", ("heartbeat",),
          "nightly dreaming: merge near-duplicate memories, decay stale ones"),
    Route(HoldRelease, "cmd.supervisor.release", ("channel",),
          "the owner's `/tools release NAME`, applied by the supervisor"),
    Route(ApprovalRequest, "cmd.approval.request", ("channel", "executor", "memory", "heartbeat",
                                                    SUPERVISOR),
          "the heartbeat's is the monthly tool review's archive proposal"),
    Route(ApprovalDecision, "cmd.approval.decide", ("channel",)),
    Route(LlmResponse, "evt.llm.response.{session}", ("llm",), "with token usage"),
    Route(LlmProgress, "evt.llm.progress.{session}", ("llm",),
          "still working: a long call, or a retry after a transient failure, with its reason"),
    Route(LlmPreview, "evt.llm.preview.{session}", ("llm",),
          "the answer so far while streaming; only for requests with `preview_to`"),
    Route(ToolResult, "evt.tool.result.{session}", ("executor", "memory", "llm", "planner"),
          "the planner's are a delegated workflow's results, deferred to the parent session"),
    Route(ToolOutcome, "evt.tool.outcome.{tool}", ("executor",),
          "per-call stats, with an agent-created tool's `version`"),
    Route(ScriptsReverted, "evt.scripts.reverted.{request_id}", ("executor",),
          "also awaited by `wintermute revert`"),
    Route(Recalled, "evt.memory.recalled.{session}", ("memory",)),
    Route(MemoryAnswer, "evt.memory.answer.{request}", ("memory",),
          "parts of the answer to one `wintermute memory` command",
          keys=lambda m: {"request": short_hash(m.request, 16)}),
    Route(MemoryChanged, "evt.memory.changed.{memory_id}", ("memory",),
          "audit: every change to a memory"),
    Route(HomeAnswer, "evt.home.answer.{request}", ("executor",),
          "what a `home.command` did; awaited by `wintermute memory history` and `revert`",
          keys=lambda m: {"request": short_hash(m.request, 16)}),
    Route(ApprovalResolved, "evt.approval.resolved.{session}", ("approval",)),
    Route(SessionIdle, "evt.session.idle.{session}", ("observer",)),
    Route(TaskOutcome, "evt.task.outcome.{task}", ("planner",),
          "a scheduled turn ended ok, failed, or skipped for a spent budget"),
    Route(Intervention, "evt.flatline.{kind}.{target}", (SUPERVISOR, CLI),
          "what the supervisor did or proposes, and the owner's lifts",
          narrow={CLI: ("evt.flatline.release.>", "evt.flatline.enable_task.>")}),
    Route(Delivered, "evt.channel.delivered.{chat}", ("channel",),
          "what `wintermute chat` prints"),
    Route(DeadLetter, "dlq.{actor}", (*ACTORS, SUPERVISOR),
          "each actor publishes only its own `dlq.<actor>`",
          narrow={a: (f"dlq.{a}",) for a in ACTORS}),
    Route(AuditEvent, "audit.{actor}.{decision}", (*_AUDITORS, SUPERVISOR),
          "privileged decisions (kept a year); each actor publishes only `audit.<actor>.*`",
          narrow={a: (f"audit.{a}.*",) for a in _AUDITORS}),
)

#: Sessions of the supervisor's own approval requests and LLM diagnoses: its durable reads
#: their answers only.
FLATLINE_SESSION = "flatline"
DIAGNOSIS_SESSION = "flatline-diagnosis"
#: The session of dreaming's model calls: their answers reach the memory actor on its own
#: durable, which hands each to the dreaming pass awaiting it.
MEMORY_DREAM_SESSION = "memory-dreaming"
_FLATLINE = (f"evt.approval.resolved.{FLATLINE_SESSION}", "evt.scripts.reverted.>",
             f"evt.llm.response.{DIAGNOSIS_SESSION}")

DURABLES: tuple[Durable, ...] = (
    Durable("planner-in", "planner", "in", ("in.>",)),
    # No handled-markers: each of these events is checked against the session's state (its
    # turn, phase, step and call), so one applied and saved before a crash finds itself stale
    # when it comes again; a marker would cost a KV read before every step of every turn.
    Durable("planner-evt", "planner", "evt",
            ("evt.llm.response.>", "evt.tool.result.>", "evt.memory.recalled.>",
             "evt.llm.progress.>"), dedupe=False,
            note="no handled-markers: the session state makes a redelivery stale"),
    Durable("planner-cmd", "planner", "cmd", ("cmd.planner.*",), note="`/reset`, `/retry`"),
    # A dead letter of an active turn ends its step at once (the planner's deadlines also do).
    Durable("planner-dlq", "planner", "dlq", ("dlq.>",), ordered_by="",
            note="a dead letter of an active turn ends its step"),
    # Transient model failures are retried by redelivery (actors/llm/_retry.py gives up two
    # deliveries short of this, leaving the crash-loop dead letter to real crashes).
    # A model call waits on the network, not on this process's CPU: hundreds in flight cost
    # a few KB each, so the bound is the provider (429s come back as delayed retries, the
    # breaker stops a failing one) and JetStream's max_ack_pending is the backpressure.
    Durable("llm", "llm", "cmd", ("cmd.llm.*",), ordered_by="", concurrency=256,
            max_ack_pending=1024, max_deliver=12),
    Durable("executor", "executor", "cmd", ("cmd.executor.*",)),
    Durable("executor-approvals", "executor", "evt", ("evt.approval.resolved.>",)),
    Durable("memory", "memory", "cmd", ("cmd.memory.save", "cmd.memory.search",
                                        "cmd.memory.recall", "cmd.memory.command",
                                        "cmd.memory.propose"), concurrency=4),
    # The owner's command line, on a subject only the `cli` user may publish.
    Durable("memory-admin", "memory", "cmd", ("cmd.memory.admin", "cmd.memory.dream"),
            ordered_by="", concurrency=1,
            note="`wintermute memory` and nightly dreaming, one at a time"),
    # The owner's answers to learned suggestions (other approvals are skipped).
    Durable("memory-approvals", "memory", "evt", ("evt.approval.resolved.>",), ordered_by="",
            concurrency=1, note="the owner's answers to learned suggestions"),
    # The model's rewordings of duplicates, awaited by the dreaming pass (memory-admin) in the
    # same process; an answer no pass waits for any more (after a crash) is dropped.
    Durable("memory-dreaming", "memory", "evt", (f"evt.llm.response.{MEMORY_DREAM_SESSION}",),
            ordered_by="", concurrency=4, max_deliver=2, dedupe=False,
            note="the model's rewordings for nightly dreaming"),
    Durable("approval", "approval", "cmd", ("cmd.approval.*",), ordered_by=""),
    # Ordered per chat: a chat's replies in order, and a burst to one chat holds one slot.
    Durable("channel-out", "channel", "out", ("out.>",), ordered_by="sink.chat"),
    Durable("channel-cmd", "channel", "cmd", ("cmd.channel.*",), ordered_by="chat"),
    # Live previews: idempotent edits, so no handled-markers and one retry.
    Durable("channel-preview", "channel", "evt", ("evt.llm.preview.>",), max_deliver=2,
            dedupe=False, note="Telegram previews; 2 attempts, no handled-markers"),
    # The owner's answers to Telegram pairing requests (other approvals are skipped).
    Durable("channel-telegram-pairing", "channel", "evt", ("evt.approval.resolved.>",),
            ordered_by="", concurrency=4, when="channels.telegram.pairing",
            note="only with `channels.telegram.pairing = true`"),
    # Raw: the observer logs whatever arrives, garbage included, and never rejects it.
    *(Durable(f"observer-{s}", "observer", s, (">",), ordered_by="", dedupe=False,
              concurrency=1, raw=True) for s in STREAMS),
    Durable("supervisor-dlq", SUPERVISOR, "dlq", ("dlq.>",), ordered_by="", dedupe=False),
    Durable("supervisor-tools", SUPERVISOR, "evt", ("evt.tool.outcome.>",), ordered_by="tool",
            note="tool rules"),
    Durable("supervisor-tasks", SUPERVISOR, "evt", ("evt.task.outcome.>",), ordered_by="task",
            note="scheduled-task rule"),
    Durable("supervisor-flatline", SUPERVISOR, "evt", _FLATLINE, ordered_by="",
            note="revert proposals, diagnosis"),
    Durable("supervisor-release", SUPERVISOR, "cmd", ("cmd.supervisor.release",),
            ordered_by="name", note="the owner's releases from the chat"),
)

_BY_TYPE: dict[type[Msg], Route] = {r.type: r for r in ROUTES}
_BY_NAME: dict[str, Durable] = {d.name: d for d in DURABLES}


class UnroutedError(LookupError):
    """A message type without a route: declare it in contracts/routes.py."""


def route_of(kind: type[Msg]) -> Route:
    """The route of a message type."""
    try:
        return _BY_TYPE[kind]
    except KeyError:
        raise UnroutedError(f"{kind.__name__} has no route; declare it in contracts/routes.py "
                            "(ROUTES) with its subject and producers") from None


def subject_of(msg: Msg) -> str:
    """The prefix-relative subject `msg` travels on, derived from the message itself."""
    route = route_of(type(msg))
    keys = route.keys(msg) if route.keys else None
    out = []
    for token in tokens(route.subject):
        if token.startswith("{"):
            name = token[1:-1]
            value = keys[name] if keys is not None else _attr(msg, name)
            token = subject_token(str(value))
        out.append(token)
    return ".".join(out)


def subject_for(kind: type[Msg], **values: str) -> str:
    """A type's prefix-relative subject with its placeholders given by name (the last part of
    a dotted one: `chat=` fills `{sink.chat}`); for subscribing to one message's subject."""
    out = []
    for token in tokens(route_of(kind).subject):
        if token.startswith("{"):
            token = subject_token(values[token[1:-1].rsplit(".", 1)[-1]])
        out.append(token)
    return ".".join(out)


def tokens(template: str) -> list[str]:
    """A subject template's tokens (a placeholder such as `{sink.chat}` is one token)."""
    return re.split(r"\.(?![^{]*\})", template)


def _attr(msg: Any, path: str) -> Any:
    for part in path.split("."):
        msg = getattr(msg, part)
    return msg


def durable(name: str) -> Durable:
    """A durable by name."""
    return _BY_NAME[name]


def durables_of(role: str, config: Any = None) -> tuple[Durable, ...]:
    """A role's durables; with a config, only those it enables (without: all, for grants)."""
    return tuple(d for d in DURABLES
                 if d.actor == role and (config is None or d.enabled(config)))


def publishes(role: str) -> tuple[str, ...]:
    """Every prefix-relative subject pattern `role` may publish, from the routes."""
    seen: dict[str, None] = {}
    for r in ROUTES:
        seen.update(dict.fromkeys(r.grants(role)))
    return tuple(seen)


def overlaps(pattern: str, subject: str) -> bool:
    """Whether a filter and a subject template (or pattern) can match the same subject."""
    a, b = tokens(pattern), tokens(subject)
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x == ">" or y == ">":
            return True
        wild = x == "*" or y == "*" or y.startswith("{") or x.startswith("{")
        if not wild and x != y:
            return False
        if i == min(len(a), len(b)) - 1 and len(a) != len(b):
            return False
    return len(a) == len(b)
