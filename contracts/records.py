"""Typed records of the shared KV state: every value one process writes and another reads.

Messages travel on streams; records sit in KV buckets (bus/subjects.py lists the buckets).
They follow the message rules (msgspec Structs, kw_only, evolve by adding fields with
defaults, unknown fields skipped) but carry no `type` tag: a key names what it holds, and
values written before these types existed must still decode. Readers go through
`Bus.kv_get_as` / `Bus.kv_update`, which treat an unreadable value as absent (with a log line).

Budget counters (wm_budget `day.<local date>`, `session.<hash>`, `flatline.<date>`) are
`BudgetUsage` records changed only with `Bus.kv_update` (compare-and-set). Plain values are
JSON, not Structs: the dead-letter digest cursor (wm_state
`flatline.dlq.cursor`, an int), the Telegram poll offset (`telegram.offset.<bot>`, an int),
budget alerts already sent (`flatline.alerts`, dict[str, float]) and the offered tool
definitions (`tools`, list[ToolSpec]). Markers whose presence is all that counts (wm_done,
`telegram.paired.*`, `telegram.refused.*`, `image.*`) stay raw bytes; so do the Slack
per-part send states (`slack.<hash>.<part>`: `sending:<time>` or `done`), which only the
channel reads. Supervisor-private state (Flatline's outcome windows) is typed next to its rules
in supervisor/flatline/tool_rules.py, the planner's session state in actors/planner/state.py.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from contracts.approval import ApprovalRequest
from contracts.channel import PrincipalKind, Sink
from contracts.labels import Label
from contracts.ops import Health

ToolState = Literal["quarantined", "active"]
TaskState = Literal["enabled", "disabled"]
ApprovalState = Literal["pending", "approved", "denied", "expired"]
ActorRunState = Literal["starting", "running", "restarting", "failed", "stopped", "unknown"]
SandboxKind = Literal["docker", "bwrap", "direct", "none", "unavailable", "starting"]
SandboxNetwork = Literal["host", "proxy", "none"]


class Record(msgspec.Struct, frozen=True, kw_only=True):
    """A value in a KV bucket that crosses a process."""


# -- Flatline holds ------------------------------------------------------------------------


class ToolHold(Record, frozen=True, kw_only=True):
    """wm_tools `<tool>`: the supervisor's quarantine of a tool, or its release."""

    status: ToolState
    reason: str = ""
    rule: str = ""  # which Flatline rule: consecutive | failure_rate | timeouts | regression
    since: float = 0.0
    by: str = ""
    evidence: dict[str, Any] = msgspec.field(default_factory=dict)
    released_at: float = 0.0  # outcomes before this no longer count
    released_by: str = ""
    previous_reason: str = ""


class TaskHold(Record, frozen=True, kw_only=True):
    """wm_state `task.<name>`: a scheduled task's failures in a row, and whether it runs."""

    task: str
    status: TaskState = "enabled"
    failures: int = 0
    reason: str = ""  # why it was disabled
    since: float = 0.0
    last_reason: str = ""  # the last failure's reason
    seen: list[str] = msgspec.field(default_factory=list)  # outcome turn ids already counted
    enabled_at: float = 0.0
    enabled_by: str = ""


# -- Supervisor status ---------------------------------------------------------------------


class ActorStatus(Record, frozen=True, kw_only=True):
    """One actor as the supervisor sees it."""

    name: str
    pid: int | None = None
    healthy: bool = False
    state: ActorRunState = "unknown"
    policy: str = ""
    restarts: int = 0
    last_exit: str = ""
    last_crash: float | None = None
    uptime_secs: float = 0.0
    handled: int = 0
    info: dict[str, Any] = msgspec.field(default_factory=dict)


class NatsStatus(Record, frozen=True, kw_only=True):
    """The NATS server the supervisor uses (embedded or external)."""

    url: str = ""
    pid: int | None = None
    embedded: bool = False
    restarts: int = 0
    last_exit: str = ""


class InterventionNote(Record, frozen=True, kw_only=True):
    """wm_state `flatline.log` items: a short form of a recent Intervention, for status."""

    ts: float = 0.0
    kind: str = ""
    target: str = ""
    action: str = ""
    reason: str = ""
    outcome: str = ""
    undo: str = ""
    proposed: bool = False


class SupervisorStatus(Record, frozen=True, kw_only=True):
    """wm_state `supervisor`: what `wintermute status` and /status show."""

    updated: float = 0.0
    mode: Literal["spawn", "watch"] = "spawn"
    nats: NatsStatus = msgspec.field(default_factory=NatsStatus)
    actors: list[ActorStatus] = msgspec.field(default_factory=list)
    failed: list[str] = msgspec.field(default_factory=list)
    quarantined: dict[str, ToolHold] = msgspec.field(default_factory=dict)
    disabled_tasks: dict[str, TaskHold] = msgspec.field(default_factory=dict)
    interventions: list[InterventionNote] = msgspec.field(default_factory=list)
    dead_letters_seen: int = 0
    metrics_url: str = ""  # Prometheus /metrics of the supervisor ("" when off)
    # The message store: used, limit, free_disk, full, note (supervisor/process/storage.py).
    storage: dict[str, Any] = msgspec.field(default_factory=dict)


# -- Facts actors publish ------------------------------------------------------------------


class ExecutorFacts(Record, frozen=True, kw_only=True):
    """wm_state `executor`: the sandbox and the tools, for status, /tools and IDENTITY.md."""

    mode: SandboxKind = "starting"
    note: str = ""
    sandboxed: bool = False
    network: SandboxNetwork = "host"
    reason: str = ""
    tools: list[str] = msgspec.field(default_factory=list)
    agent_tools: list[str] = msgspec.field(default_factory=list)
    # MCP servers by name: state (ready | restarting | starting), tools, error, restarts
    mcp: dict[str, dict[str, Any]] = msgspec.field(default_factory=dict)
    skills: list[str] = msgspec.field(default_factory=list)  # usable skills in skills/
    skill_problems: dict[str, str] = msgspec.field(default_factory=dict)  # folder -> why not
    # Docker/Podman mode: the warm container, its image, the API it runs on, set-up notes
    container: str = ""
    image: str = ""
    docker_host: str = ""
    setup: str = ""


class MemoryFacts(Record, frozen=True, kw_only=True):
    """wm_state `memory`: how many active memories of each kind are stored, how memory is
    searched, and why search is full-text only (shown by `status`)."""

    counts: dict[str, int] = msgspec.field(default_factory=dict)
    search: str = "full-text"  # "hybrid (MODEL)" when vectors are used
    warning: str = ""  # why search is full-text only, or memories lack vectors: what to do


class ToolMeta(msgspec.Struct, kw_only=True):
    """One agent-created tool's history: versions of its files and the outcome of its calls.

    wm_state `tools.meta` holds a dict of them by tool name. Mutable on purpose: the executor
    owns the book and updates entries in place before saving it.
    """

    created_at: str
    updated_at: str
    version: int = 1
    digest: str = ""  # sha256 of the .py and .json; a change is a new version
    invocations: int = 0
    successes: int = 0
    timeouts: int = 0
    consecutive_failures: int = 0
    total_duration_ms: int = 0
    last_used: str | None = None
    last_error: str | None = None

    @property
    def success_rate(self) -> float | None:
        return round(self.successes / self.invocations, 3) if self.invocations else None

    @property
    def avg_duration_ms(self) -> int | None:
        return self.total_duration_ms // self.invocations if self.invocations else None

    def recency(self) -> str:
        """What "recently used" ranks by: the last call, or the last change if newer."""
        return max(self.last_used or "", self.updated_at)

    def public(self) -> dict[str, object]:
        """The _meta view shown to people and the supervisor (derived figures included)."""
        return {
            "version": self.version, "created_at": self.created_at,
            "updated_at": self.updated_at, "invocations": self.invocations,
            "success_rate": self.success_rate, "avg_duration_ms": self.avg_duration_ms,
            "timeouts": self.timeouts, "consecutive_failures": self.consecutive_failures,
            "last_used": self.last_used, "last_error": self.last_error,
        }


class CatalogRow(Record, frozen=True, kw_only=True):
    """wm_state `tools.catalog` items: every tool, whether it is offered, what is wrong."""

    name: str
    kind: Literal["core", "agent"]
    description: str = ""
    offered: bool = False
    problem: str = ""
    timeout_secs: float | None = None
    meta: dict[str, Any] | None = None  # ToolMeta.public()


class SkillRow(Record, frozen=True, kw_only=True):
    """One skill in wm_state `tools.skills`: what the model is told about it, and its use."""

    name: str
    description: str
    when_to_use: str = ""
    tools: list[str] = msgspec.field(default_factory=list)  # tools it needs
    model_role: str = ""
    scripts: list[str] = msgspec.field(default_factory=list)
    limits: dict[str, Any] = msgspec.field(default_factory=dict)  # timeout_secs, memory_mb, ...
    available: bool = True
    problem: str = ""  # why it is not available (a required tool missing)
    loads: int = 0  # load_skill calls that returned its body
    runs: int = 0  # run_skill_script calls
    failures: int = 0  # runs that failed or timed out
    last_used: float = 0.0  # unix time of the last load or run


class SkillsReport(Record, frozen=True, kw_only=True):
    """wm_state `tools.skills`: the executor's skills with their use counts (kept across
    restarts from this record), and the skill folders it could not read, with the reason."""

    skills: list[SkillRow] = msgspec.field(default_factory=list)
    problems: dict[str, str] = msgspec.field(default_factory=dict)  # folder -> what is wrong
    sandbox: str = ""  # how skill scripts run here, or why they cannot


class TrustEntry(Record, frozen=True, kw_only=True):
    """wm_state `trust.<domain>`: a domain the owner approved for web_request."""

    domain: str
    approved_at: float
    call: str = ""


class SessionHead(Record, frozen=True, kw_only=True):
    """What other processes read of the planner's wm_sessions `s.<hash>` state: its name."""

    session: str = ""


class PendingApproval(Record, frozen=True, kw_only=True):
    """wm_approvals `<short id>`: an approval waiting for the owner; decided exactly once."""

    approval_id: str
    request: ApprovalRequest
    expires_at: float
    status: ApprovalState = "pending"


class JobRun(Record, frozen=True, kw_only=True):
    """wm_state `sched.<job>`: a heartbeat job's last fire and how often it fired."""

    name: str
    last: float | None = None
    outcome: str = ""  # fired | skipped (budget) | skipped (disabled by the supervisor)
    fires: int = 0


class ScheduledJob(Record, frozen=True, kw_only=True):
    """One job of the heartbeat's schedule, as `wintermute tasks` shows it."""

    name: str
    kind: Literal["task", "cadence", "proactive", "review", "dream", "digest"]
    when: str = ""  # the schedule in words
    prompt: str = ""
    sink: str = ""
    next: float | None = None
    last: float | None = None
    outcome: str | None = None
    fires: int | None = None


class Schedule(Record, frozen=True, kw_only=True):
    """wm_state `schedule`: every heartbeat job with its next fire and last outcome."""

    enabled: bool = True
    jobs: list[ScheduledJob] = msgspec.field(default_factory=list)


# -- Channel state -------------------------------------------------------------------------


class PairingRequest(Record, frozen=True, kw_only=True):
    """wm_state `telegram.pairing.<user>`: the owner was asked; where to tell the answer."""

    chat: str = ""


class TelegramPreview(Record, frozen=True, kw_only=True):
    """wm_done `tgpreview.<hash>`: a turn's preview message; `m` 0 while it is being sent."""

    m: int = 0
    final: bool = False


#: Every record type, for `wintermute schema` (Health is the wm_health value).
ALL_RECORDS: tuple[type[msgspec.Struct], ...] = (
    ToolHold, TaskHold, Health, ActorStatus, NatsStatus, InterventionNote, SupervisorStatus,
    ExecutorFacts, MemoryFacts, ToolMeta, CatalogRow, TrustEntry, SessionHead, PendingApproval,
    JobRun, ScheduledJob, Schedule, PairingRequest, TelegramPreview,
)


BudgetStop = Literal["", "session", "day"]


class BudgetUsage(Record, frozen=True, kw_only=True):
    """Tokens counted under one wm_budget key (a day, a session, Flatline's day).

    `tokens` is what the limit is compared with: a session's since its last renewal (a paused
    session is renewed by the user's next message, /reset renews it too); `total` never goes
    back. `by_purpose` splits `tokens` by what the model call was for (user, escalation,
    heartbeat, proactive, diagnosis, ...); `cost` is the estimate from [budget.prices] in US
    dollars. A session's `paused` says which budget paused it ("" when it is not paused).
    """

    tokens: int = 0
    total: int = 0
    by_purpose: dict[str, int] = msgspec.field(default_factory=dict)
    cost: float = 0.0
    paused: BudgetStop = ""
    renewals: int = 0
    renewed_at: float = 0.0


# -- delegated workflows (actors/planner/_delegate.py) ---------------------------------------

NodeState = Literal["waiting", "running", "done", "failed", "timed_out", "cancelled"]
#: States after which a node changes no more.
NODE_FINAL = ("done", "failed", "timed_out", "cancelled")


class WorkflowNode(Record, frozen=True, kw_only=True):
    """One delegated sub-task: its role, task, dependencies, and how it ended."""

    id: str
    role: str
    task: str
    context: str = ""
    depends_on: list[str] = msgspec.field(default_factory=list)
    status: NodeState = "waiting"
    result: str = ""  # its answer; on a timeout or a failure, what it had found so far
    reason: str = ""  # why it failed or was cancelled
    budget_tokens: int = 0
    deadline_secs: float = 0.0
    started: float = 0.0
    hops: int = 0  # continuations after a timeout so far
    label: Label = "internal"  # the highest label its sub-session saw


class Workflow(Record, frozen=True, kw_only=True):
    """wm_sessions `wf.<hash of id>`: one `delegate` call's sub-tasks (a DAG), changed only by
    compare-and-set. `id` is the parent's tool request id, from which every id below derives."""

    id: str
    parent_session: str
    parent_turn: str
    step: int
    call_id: str
    reply_to: Sink  # the parent turn's sink
    principal: str
    principal_kind: PrincipalKind = ""
    is_owner: bool = False
    label: Label = "internal"  # the parent turn's, raised by each sub-task's
    purpose: str = "user"  # what the sub-tasks' model calls are charged as
    created: float = 0.0
    finished: float = 0.0  # when its last node became final (0: still running)
    nodes: list[WorkflowNode] = msgspec.field(default_factory=list)


GateState = Literal["pending", "applied", "denied", "refused"]


class GateProposal(Record, frozen=True, kw_only=True):
    """wm_state `gate.<id>`: a change proposed to a gated file (AGENTS.md, USER.md; later
    agent-written skills), waiting for the owner or decided; `base` is the sha256 of the file
    it was made against (applied only while the file is still that), `commit` the version
    that applied it."""

    id: str
    path: str
    text: str
    base: str
    reason: str = ""
    by: str = ""
    created: float = 0.0
    status: GateState = "pending"
    commit: str = ""
    why: str = ""  # a refusal's sentence


ALL_RECORDS += (GateProposal,)
