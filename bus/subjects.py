"""Every stream and KV bucket, and subjects made absolute, built from one prefix.

Which message travels on which subject is declared in contracts/routes.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from contracts import Msg, subject_token
from contracts.routes import subject_for, subject_of

DAY = 24 * 3600.0
#: How long the audit log is kept (seed 003: longer than ordinary events).
AUDIT_DAYS = 365


@dataclass(frozen=True)
class StreamSpec:
    """A JetStream stream with limits retention: its history is what replay reads."""

    name: str
    subjects: tuple[str, ...]
    max_age: float
    description: str
    max_bytes: int = -1  # age-limited; a byte cap would reserve disk up front in JetStream
    duplicate_window: float = 600.0


@dataclass(frozen=True)
class BucketSpec:
    """A KV bucket for small shared state."""

    name: str
    ttl: float | None
    description: str
    history: int = 1


class Subjects:
    """Subject names for one instance prefix (default `wm`)."""

    def __init__(self, prefix: str = "wm") -> None:
        self.p = prefix
        up = prefix.upper().replace("-", "_")
        self.stream_in = f"{up}_IN"
        self.stream_out = f"{up}_OUT"
        self.stream_cmd = f"{up}_CMD"
        self.stream_evt = f"{up}_EVT"
        self.stream_dlq = f"{up}_DLQ"
        self.stream_audit = f"{up}_AUDIT"
        self.kv_health = f"{prefix}_health"
        self.kv_sessions = f"{prefix}_sessions"
        self.kv_done = f"{prefix}_done"
        self.kv_approvals = f"{prefix}_approvals"
        self.kv_budget = f"{prefix}_budget"
        self.kv_state = f"{prefix}_state"
        self.kv_tools = f"{prefix}_tools"

    # inbound / outbound, ending with the routing key
    def inbound(self, channel: str, chat: str) -> str:
        return f"{self.p}.in.{subject_token(channel)}.{subject_token(chat)}"

    def outbound(self, channel: str, chat: str) -> str:
        return f"{self.p}.out.{subject_token(channel)}.{subject_token(chat)}"

    # commands: work for one actor
    def cmd(self, actor: str, verb: str) -> str:
        return f"{self.p}.cmd.{actor}.{verb}"

    # events: facts, keyed by session (or tool / chat)
    def evt(self, family: str, name: str, key: str) -> str:
        return f"{self.p}.evt.{family}.{name}.{subject_token(key)}"

    def audit(self, actor: str = "*", decision: str = "*") -> str:
        """The audit subject of one actor's decisions (wildcards by default)."""
        return f"{self.p}.audit.{actor}.{decision}"

    def dlq(self, actor: str) -> str:
        return f"{self.p}.dlq.{actor}"

    def of(self, msg: Msg) -> str:
        """The subject `msg` travels on, from its route (contracts/routes.py)."""
        return f"{self.p}.{subject_of(msg)}"

    def route(self, kind: type[Msg], **values: str) -> str:
        """The subject of a type for given placeholder values (to subscribe to one of them)."""
        return f"{self.p}.{subject_for(kind, **values)}"

    def rel(self, relative: str) -> str:
        """A prefix-relative subject or filter of the route table, made absolute."""
        return f"{self.p}.{relative}"

    def stream(self, short: str) -> str:
        """A stream's name from its short name in the route table (in, out, cmd, evt, dlq)."""
        return f"{self.p.upper().replace('-', '_')}_{short.upper()}"

    def all(self) -> str:
        return f"{self.p}.>"

    def streams(self) -> list[StreamSpec]:
        p = self.p
        return [
            StreamSpec(self.stream_in, (f"{p}.in.>",), 30 * DAY, "user turns entering the system"),
            StreamSpec(self.stream_out, (f"{p}.out.>",), 30 * DAY, "replies, prompts, notices"),
            StreamSpec(self.stream_cmd, (f"{p}.cmd.>",), 7 * DAY, "work for one actor"),
            StreamSpec(self.stream_evt, (f"{p}.evt.>",), 7 * DAY, "facts: llm, tools, memory"),
            StreamSpec(self.stream_dlq, (f"{p}.dlq.>",), 30 * DAY, "dead letters with reasons"),
            # Kept far longer than events: the record of who allowed or refused what.
            StreamSpec(self.stream_audit, (f"{p}.audit.>",), AUDIT_DAYS * DAY,
                       "privileged decisions (the audit log)"),
        ]

    def buckets(self) -> list[BucketSpec]:
        return [
            BucketSpec(self.kv_health, 60.0, "actor health, refreshed every few seconds"),
            BucketSpec(self.kv_sessions, None, "planner session state and history"),
            BucketSpec(self.kv_done, 7 * DAY, "handled-message and outbound-sent markers"),
            BucketSpec(self.kv_approvals, 3600.0, "pending approvals"),
            BucketSpec(self.kv_budget, 40 * DAY, "token usage per day and session"),
            BucketSpec(self.kv_state, None, "supervisor status, executor and memory facts"),
            BucketSpec(self.kv_tools, None, "tool status by name: quarantine set by the supervisor",
                       history=5),
        ]
