"""The configuration schema and its one loader: defaults <- config.toml/agent.toml <- WM__ env.

Config is a contract too: every process reads the same typed structure, and a bad value stops
start-up with a message that names the key.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from pathlib import Path
from typing import Any, Literal

import msgspec

from contracts.config_delegation import DelegationConfig
from contracts.templates import Template
from contracts.templates import check as check_template

ENV_PREFIX = "WM__"


class ConfigError(Exception):
    """A configuration value is missing or invalid; the message names the key."""


class _Section(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    pass


class NatsConfig(_Section):
    url: str = ""  # empty: `up` starts the embedded nats-server
    port: int = 0  # embedded server port; 0 picks a free one
    prefix: str = "wm"
    credentials: str = ""  # path to a .creds file for an external server
    # A NATS user and password, or an nkey seed file (then `user` only names the inbox space,
    # `_INBOX_<user>`); `up` sets user, seed and api_prefix for each actor it spawns.
    user: str = ""
    password: str = ""
    seed: str = ""
    api_prefix: str = ""  # JetStream API prefix; empty: $JS.API (an actor's account: bus/accounts.py)


class BreakerConfig(_Section):
    """Per-provider circuit breaker: this many outage-like failures within the window skip the
    provider for the cooldown (the fallback chain goes on), then one request probes it."""

    failure_threshold: int = 3
    window_secs: float = 60.0
    cooldown_secs: float = 300.0


class ModelLimits(_Section):
    """[models.limits.<role>]: one role's (or skill's) limits; unset ones come from [models]."""

    max_tokens: int | None = None
    timeout_secs: float | None = None
    max_retries: int | None = None


class CallLimits(msgspec.Struct, frozen=True, kw_only=True):
    """What one model call of a role may use (max_tokens 0: the provider-dependent default)."""

    max_tokens: int
    timeout_secs: float
    max_retries: int


class ModelsConfig(_Section):
    default: str = ""  # "{provider}/{model}"; empty: picked from the SDK environment variables
    fallback: list[str] = msgspec.field(default_factory=list)
    roles: dict[str, str] = msgspec.field(default_factory=dict)
    skills: dict[str, str] = msgspec.field(default_factory=dict)
    timeout_secs: float = 120.0  # per attempt of a model call
    # Longest answer; 0: 4096 for a hosted API, 1024 for a local server (OPENAI_BASE_URL
    # elsewhere than api.openai.com, ANTHROPIC_BASE_URL, Ollama), which writes more slowly.
    max_tokens: int = 0
    max_retries: int = 2  # further attempts after a 429, a 5xx or a connection error
    limits: dict[str, ModelLimits] = msgspec.field(default_factory=dict)
    breaker: BreakerConfig = msgspec.field(default_factory=BreakerConfig)
    # Data labelled sensitive or above goes only to models running on this machine: `local`,
    # then the chain's models whose provider is in `local_providers`; none: such turns are
    # refused. Secret data goes to no model.
    local: str = ""
    local_providers: list[str] = msgspec.field(default_factory=lambda: ["ollama"])
    # Memory search vectors: local/minilm (offline, shipped as a package), openai/MODEL (any
    # OpenAI-compatible /v1/embeddings), ollama/MODEL, or none (full text only).
    embedding: str = "local/minilm"
    embedding_url: str = ""  # base URL for openai/ollama embeddings; empty: the SDK variables
    # Transient failures (HTTP 5xx/429, timeouts, unreachable, malformed answers) are retried
    # with backoff (1, 2, 4 ... up to retry_max_delay_secs) until this long after the request
    # was first published, then the turn fails with one message and the owner is told once.
    retry_deadline_secs: float = 90.0
    retry_max_delay_secs: float = 20.0
    progress_every_secs: float = 10.0  # "still working" events to the planner during a call
    # Import the chain's SDKs a second after start instead of on the first call: that call is
    # 0.3-1 s faster, the llm process 35-65 MB bigger until then (openai, anthropic).
    preload_sdks: bool = False

    def __post_init__(self) -> None:
        if self.retry_deadline_secs < 0 or self.retry_max_delay_secs <= 0:
            raise ValueError("retry_deadline_secs must be >= 0 and retry_max_delay_secs > 0")
        if self.progress_every_secs <= 0:
            raise ValueError("progress_every_secs must be positive")

    def limits_for(self, role: str) -> CallLimits:
        """The limits of a call for `role` (a role or skill name): its table over [models]."""
        own = self.limits.get(role) or ModelLimits()
        return CallLimits(
            max_tokens=self.max_tokens if own.max_tokens is None else own.max_tokens,
            timeout_secs=self.timeout_secs if own.timeout_secs is None else own.timeout_secs,
            max_retries=self.max_retries if own.max_retries is None else own.max_retries,
        )


class PlannerConfig(_Section):
    """Deadlines of a turn's steps: a step past its deadline is hung, not slow.

    The model step's deadline counts from the llm's last progress event (sent every
    models.progress_every_secs while a call runs or waits to retry), so only silence fires it.
    """

    recall_deadline_secs: float = 30.0  # optional: past it the turn goes on without memories
    model_silence_secs: float = 300.0  # no answer and no progress from the llm for this long
    tool_deadline_secs: float = 900.0  # a tool call (memory tools are optional: fail soft)
    sweep_every_secs: float = 1.0  # how often deadlines are checked
    # Right after a fresh start the executor may not have published its tools yet (it sets up
    # its sandbox after its first health report): a turn waits this long for them rather than
    # being answered without tools.
    tools_wait_secs: float = 30.0
    # Post-inference validation (seed 001's "Turing Protocol"): a final answer that claims an
    # action ("I've saved ...", "I sent ...") no tool call of the turn did is corrected once.
    turing_protocol: bool = True

    def __post_init__(self) -> None:
        for name in ("recall_deadline_secs", "model_silence_secs", "tool_deadline_secs",
                     "sweep_every_secs"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")
        if self.tools_wait_secs < 0:
            raise ValueError("tools_wait_secs must be 0 (do not wait) or more")


class ModelPrice(_Section):
    """US dollars per million tokens, for the cost estimate in /budget."""

    input: float = 0.0
    output: float = 0.0


class BudgetConfig(_Section):
    max_tokens_per_session: int = 500_000  # 0: no session budget
    max_tokens_per_day: int = 5_000_000  # 0: no daily budget
    max_tool_calls_per_turn: int = 20
    max_dynamic_tools_per_turn: int = 20
    # Runaway guard: a turn past this many tokens, or repeating one tool call with the same
    # arguments this many times, is stopped with a message (0 turns either check off).
    max_tokens_per_turn: int = 250_000
    max_repeated_tool_calls: int = 3
    # The day budget renews at midnight here (an IANA zone such as "Europe/Berlin");
    # "" is the machine's local time.
    timezone: str = ""
    # Optional prices per model spec: "openai/gpt-4o" = {input = 2.5, output = 10}.
    prices: dict[str, ModelPrice] = msgspec.field(default_factory=dict)


class TerminalChannel(_Section):
    enabled: bool = True


class TelegramChannel(_Section):
    """Telegram: on when the bot token variable is set (environment or .env)."""

    bot_token_env: str = "WINTERMUTE_TELEGRAM_TOKEN"
    allowed_users: list[int] = msgspec.field(default_factory=list)  # numeric user ids
    api_base_url: str = "https://api.telegram.org/bot"  # a self-hosted Bot API server works too
    api_file_url: str = "https://api.telegram.org/file/bot"
    mode: Literal["polling", "webhook"] = "polling"
    poll_timeout_secs: int = 25  # long-poll wait; a poller silent for this + stale_after is hung
    webhook_url: str = ""  # public HTTPS URL Telegram posts updates to (webhook mode)
    webhook_listen: str = "127.0.0.1"  # where the channel listens behind your HTTPS proxy
    webhook_port: int = 8443
    group_mode: Literal["mention", "all"] = "mention"  # in groups: answer only when addressed
    pairing: bool = False  # unknown users may ask the owner (an approval) to let them in
    max_download_mb: int = 20  # the cloud Bot API serves files up to 20 MB
    preview: bool = True  # show a user's answer while the model writes it (one message, edited)
    preview_interval_secs: float = 1.5  # at most one preview edit per this many seconds

    def __post_init__(self) -> None:
        if self.preview_interval_secs < 0.5:
            raise ValueError("preview_interval_secs must be at least 0.5 (Telegram rate limits)")


class SlackChannel(_Section):
    """Slack: on when the bot token variable is set (environment or .env)."""

    mode: str = "socket"  # socket (app token, no public URL) | http (Events API, signing secret)
    bot_token_env: str = "WINTERMUTE_SLACK_BOT_TOKEN"
    app_token_env: str = "WINTERMUTE_SLACK_APP_TOKEN"
    signing_secret_env: str = "WINTERMUTE_SLACK_SIGNING_SECRET"
    allowed_users: list[str] = msgspec.field(default_factory=list)  # U123 or slack:T1:U123
    allowed_channels: list[str] = msgspec.field(default_factory=list)  # C123; ["*"]: any
    thread_sessions: bool = True  # each channel thread is its own session; false: per channel
    api_base_url: str = "https://slack.com/api/"
    http_host: str = "127.0.0.1"
    http_port: int = 3000
    http_path: str = "/slack/events"
    max_message_chars: int = 3900
    ping_interval_secs: float = 5.0

    def __post_init__(self) -> None:
        if self.mode not in ("socket", "http"):
            raise ValueError(f"mode must be 'socket' or 'http', got {self.mode!r}")
        if not 100 <= self.max_message_chars <= 39_000:
            raise ValueError("max_message_chars must be between 100 and 39000")
        if self.ping_interval_secs <= 0:
            raise ValueError("ping_interval_secs must be positive")


class WebhookExtract(_Section):
    """A webhook source's extractor: which JSON fields to keep, typed, and what to do."""

    # field -> type: name, names, email, emails, date, datetime, duration, number, boolean,
    # enum:a|b|c, enums:a|b|c (kit/extract.py); anything not of its type is dropped.
    fields: dict[str, str] = msgspec.field(default_factory=dict)
    # The owner's instruction for such a delivery (clean text); the fields follow it as JSON.
    task: str = ""


class WebhookChannel(_Section):
    """Webhooks: signed HTTP deliveries become turns of a `webhook:<source>` principal (never
    the owner); their replies go to `sink`, which must be set."""

    enabled: bool = False
    listen: str = "127.0.0.1"
    port: int = 8788  # 0 picks a free port (tests)
    path: str = "/hooks"  # deliveries are POSTed to <path>/<source>
    secret_env: str = "WINTERMUTE_WEBHOOK_SECRET"  # the HMAC key (environment or .env)
    replay_window_secs: float = 300.0  # older or future timestamps are refused; ids seen are kept
    sink: str = ""  # channel:chat that webhook turns reply to
    max_body_kb: int = 256
    label: str = "internal"  # security label of its deliveries (at least internal)
    # Per source: a structured extractor (kit/extract.py). The model then sees only the typed
    # fields it lets through (taint `extracted`), never the delivery's raw text.
    extract: dict[str, WebhookExtract] = msgspec.field(default_factory=dict)


class ChannelsConfig(_Section):
    terminal: TerminalChannel = msgspec.field(default_factory=TerminalChannel)
    telegram: TelegramChannel = msgspec.field(default_factory=TelegramChannel)
    slack: SlackChannel = msgspec.field(default_factory=SlackChannel)
    # Messages one user (not the owner) may send per minute on any channel; the rest are
    # refused with one polite notice per minute. 0: no limit.
    user_rate_per_min: int = 20
    webhook: WebhookChannel = msgspec.field(default_factory=WebhookChannel)


class OwnerConfig(_Section):
    sink: str = "terminal:owner"  # where owner notifications go
    principals: list[str] = msgspec.field(default_factory=lambda: ["terminal:owner"])


DEFAULT_RISKY = [
    r"\brm\s+-[a-zA-Z]*[rf]",
    r"\bsudo\b",
    r"\bmkfs",
    r"\bdd\s+if=",
    r"\bshutdown\b|\breboot\b",
    r"\bchmod\s+-R\b",
    r"\bcurl\b[^|]*\|\s*(ba)?sh",
    r"\bgit\s+push\b.*--force",
]


# Direct mode runs these without asking when nothing in the command line makes them write or
# run something else; the default of executor.direct_allowlist.
DIRECT_ALLOWLIST = [
    "ls", "cat", "echo", "printf", "pwd", "grep", "egrep", "fgrep", "head", "tail", "wc",
    "date", "whoami", "id", "uname", "true", "false", "test", "[", "seq", "sleep", "basename",
    "dirname", "realpath", "readlink", "stat", "file", "du", "df", "free", "uptime", "ps",
    "nl", "tac", "rev", "sort", "cut", "tr", "diff", "cmp", "md5sum", "sha1sum", "sha256sum",
    "base64", "od", "jq", "tree", "which", "printenv", "cd", "find", "exit",
]

SANDBOX_MODES = ("auto", "docker", "bwrap", "direct")
SANDBOX_NETWORKS = ("proxy", "none")
# A sandbox contains damage to the machine, not what reaches other machines through the proxy.
DEFAULT_SANDBOXED_RISKY = [r"\bgit\s+push\b.*--force"]


class ExecutorConfig(_Section):
    # Label ceilings by tool name (contracts/labels.py): a result is labelled at least this,
    # whatever the tool claims; unlisted tools: internal.
    tool_labels: dict[str, str] = msgspec.field(default_factory=dict)
    # auto: a Docker/Podman API with `image`, else bubblewrap, else direct (unsandboxed)
    mode: str = "auto"
    # sandboxed modes: "proxy" (only egress.allowed_domains + package registries) or "none"
    network: str = "proxy"
    docker_host: str = ""  # empty: DOCKER_HOST, else the usual Docker and Podman sockets
    image: str = "wintermute-sandbox:latest"  # built from images/sandbox (never pulled)
    timeout_secs: float = 120.0
    output_limit: int = 16_000
    # direct mode: commands matching these wait for the owner's approval ...
    risky_patterns: list[str] = msgspec.field(default_factory=lambda: list(DEFAULT_RISKY))
    # ... and so does every command not made only of these (parsed like the shell does;
    # actors/executor/shellgate.py)
    direct_allowlist: list[str] = msgspec.field(default_factory=lambda: list(DIRECT_ALLOWLIST))
    # docker/bwrap modes: the same, for what a sandbox cannot contain
    sandboxed_risky_patterns: list[str] = msgspec.field(
        default_factory=lambda: list(DEFAULT_SANDBOXED_RISKY)
    )


class EgressConfig(_Section):
    allowed_domains: list[str] = msgspec.field(default_factory=list)  # web_request; "*.x" ok
    fetch_rate_limit: int = 30  # web_fetch calls per minute
    request_rate_limit: int = 10  # web_request calls per minute
    blocked_domains: list[str] = msgspec.field(default_factory=list)  # and their subdomains
    always_approve_domains: list[str] = msgspec.field(default_factory=list)  # never trusted
    timeout_secs: float = 30.0  # per web call, all hops together
    max_redirects: int = 5
    max_fetch_bytes: int = 100_000  # text mode: the body is cut here
    approve_download_bytes: int = 50_000_000  # save_to: larger files need the owner's approval
    max_download_bytes: int = 500_000_000  # save_to: hard cap
    allowed_ports: list[int] = msgspec.field(default_factory=lambda: [80, 443])  # sandbox proxy


class SandboxConfig(_Section):
    """Limits of the sandboxes: the Docker-API container, and each bubblewrap command (a
    cgroup where this process may create one, rlimits otherwise)."""

    memory_mb: int = 2048
    cpu_cores: float = 2.0  # docker only
    pids_limit: int = 256
    tmp_mb: int = 512  # size of its /tmp (tmpfs); docker only
    file_size_mb: int = 1024  # bwrap: largest file a command may write (RLIMIT_FSIZE)
    cpu_secs: int = 600  # bwrap: CPU seconds per process (RLIMIT_CPU); 0: no limit

    def __post_init__(self) -> None:
        for name in ("memory_mb", "pids_limit", "file_size_mb"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if self.cpu_secs < 0:
            raise ValueError("cpu_secs must be 0 (no limit) or more")


class ObserverConfig(_Section):
    idle_secs: float = 600.0
    # On session.idle, ask the model (role `observer`) what to remember from the conversation.
    learn: bool = True
    # After a session with failed tool calls, ask the model what failed and what worked and
    # propose the lessons for AGENTS.md through the WriteGate.
    reflect: bool = True
    # AGENTS.md past this many lines: the model consolidates it and the result goes through
    # the WriteGate (0: never).
    agents_md_max_lines: int = 100


CONFLICT_STRATEGIES = ("overwrite_latest", "keep_both", "ask")
MEMORY_POLICY = {"fact": "auto", "preference": "auto", "correction": "auto",
                 "procedure": "suggest"}


GatePolicy = Literal["auto", "suggest", "off"]


class MemoryConfig(_Section):
    """Learned memories: promotion policy per kind (auto | suggest | off); a kind left out of
    a configured `policy` keeps its default (MEMORY_POLICY)."""

    policy: dict[str, str] = msgspec.field(default_factory=lambda: dict(MEMORY_POLICY))
    auto_min_confidence: float = 0.8  # below this an `auto` item waits as a suggestion
    # A learned fact whose key matches an active fact's in the same scope (seed 004):
    # overwrite_latest (the new version supersedes, the old is archived), keep_both, or ask
    # (the new one waits for the owner: approval, or `pending` for someone else's). A
    # correction ("actually, X") always overwrites at once.
    conflict: str = "ask"
    # Nightly dreaming (heartbeat.dreaming in agent.toml): active memories whose texts are this
    # similar (cosine of their vectors; the same words without vectors) are merged into one ...
    merge_similarity: float = 0.92
    # ... and memories no recall has returned for decay_after_days lose decay_step of their
    # confidence each night; below archive_below they are archived (`/memory undo` restores).
    decay_after_days: float = 60.0
    decay_step: float = 0.1
    archive_below: float = 0.3
    # Compaction (seed 000): once a session has used this share of its token budget
    # (budget.max_tokens_per_session), older history is folded into the rolling summary,
    # keeping the last compact_keep messages, again each time another such share is used.
    compact_at: float = 0.6
    compact_keep: int = 8

    # The WriteGate (actors/executor/gate): changes proposed to AGENTS.md and USER.md by the
    # agent, reflection or digests are applied after the owner approves (suggest), at once
    # (auto; a non-owner turn's proposal still asks), or refused (off).
    agents_md: GatePolicy = "suggest"
    user_md: GatePolicy = "suggest"

    def __post_init__(self) -> None:
        if self.conflict not in CONFLICT_STRATEGIES:
            raise ValueError(f"conflict must be one of {', '.join(CONFLICT_STRATEGIES)}, "
                             f"got {self.conflict!r}")
        for name in ("merge_similarity", "decay_step", "archive_below", "compact_at"):
            if not 0.0 < getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be above 0 and at most 1")
        if self.decay_after_days <= 0 or self.compact_keep < 2:
            raise ValueError("decay_after_days must be positive and compact_keep at least 2")


class FlatlineConfig(_Section):
    """Thresholds of the supervisor's rules (tools, dead letters, budget, scheduled tasks)."""

    tool_consecutive_failures: int = 5  # in a row -> quarantine
    tool_window_secs: float = 600.0  # failure-rate and timeout window
    tool_window_min_calls: int = 10  # calls in the window before the rate counts
    tool_failure_rate: float = 0.5  # share of failed calls in the window -> quarantine
    tool_timeouts: int = 3  # timeouts in the window -> quarantine
    # worked before its last scripts commit, failed this many times since -> quarantine + revert
    tool_regression_failures: int = 2
    # A failing shell command is the command's failure, not the tool's.
    exempt_tools: list[str] = msgspec.field(default_factory=lambda: ["execute_command"])
    dead_letter_summary_secs: float = 60.0  # dead letters are summarised at most this often
    budget_burn_share: float = 0.6  # this share of the daily budget used ...
    budget_burn_before: float = 0.5  # ... before this share of the UTC day passed -> alert
    session_burn_factor: float = 5.0  # a session this many times the average -> alert
    session_burn_min_tokens: int = 100_000  # ... and at least this many tokens
    task_failures: int = 3  # a scheduled task failing this many times in a row is disabled
    check_interval_secs: float = 60.0  # budget checks
    # A model's diagnosis of what the rules cannot explain (an actor in a crash loop): only with
    # models.roles.flatline set, and at most this many tokens a day (0: never).
    diagnosis_tokens_per_day: int = 20_000


class SupervisorConfig(_Section):
    health_interval_secs: float = 2.0
    stale_after_secs: float = 15.0
    startup_grace_secs: float = 60.0  # a new process has this long to report health
    # On a busy machine (load average above the core count) the grace, the staleness limit
    # and the start deadline stretch by load per core, up to this factor (1: never stretch).
    max_load_stretch: float = 4.0
    max_restarts: int = 5
    restart_window_secs: float = 60.0
    failed_retry_secs: float = 60.0  # first retry of a failed actor; doubles up to 10 minutes
    stop_grace_secs: float = 6.0
    # The embedded server's storage limit: re-measured this often, and the server restarted
    # for a new limit at most once per gap (tests shorten both; see supervisor/process/storage.py).
    storage_check_secs: float = 10.0
    storage_restart_gap_secs: float = 120.0
    # actor -> "permanent" (always restarted) or "transient" (restarted only after a crash)
    restart_policy: dict[str, Literal["permanent", "transient"]] = msgspec.field(
        default_factory=dict
    )
    flatline: FlatlineConfig = msgspec.field(default_factory=FlatlineConfig)

    def __post_init__(self) -> None:
        if self.storage_check_secs <= 0 or self.storage_restart_gap_secs < 0:
            raise ValueError("storage_check_secs must be positive and storage_restart_gap_secs "
                             "0 or more")


class McpServer(_Section):
    """One MCP server: stdio (`command`, `args`, `env`) or Streamable HTTP (`url`, `headers`).
    Env and header values written "$NAME" are taken from .env."""

    name: str
    command: str = ""
    args: list[str] = msgspec.field(default_factory=list)
    env: dict[str, str] = msgspec.field(default_factory=dict)
    url: str = ""
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    allow: list[str] = msgspec.field(default_factory=list)  # its tools offered (empty: all)
    deny: list[str] = msgspec.field(default_factory=list)
    approval: str | list[str] = "never"  # "never", "always", or the tool names that ask
    timeout_secs: float = 60.0


class McpConfig(_Section):
    servers: list[McpServer] = msgspec.field(default_factory=list)


class BackupConfig(_Section):
    """Scheduled `wintermute backup` runs by the supervisor (archives under backups/)."""

    enabled: bool = True
    cron: str = "0 3 * * *"  # local time
    keep: int = 7  # archives kept; older ones are deleted
    secrets: bool = True  # include .env (the archive is 0600 in a 0700 folder)


class LoggingConfig(_Section):
    level: str = "info"


class TelemetryConfig(_Section):
    # "file": OpenTelemetry spans to logs/traces.jsonl; "otlp": to the OTLP/HTTP endpoint of the
    # standard OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT variables (set, they also turn "none" on).
    traces: str = "none"
    metrics: bool = True  # Prometheus /metrics served by the supervisor
    metrics_host: str = "127.0.0.1"
    metrics_port: int = 0  # 0: a free port (its URL is in `wintermute status`)


class PrivacyConfig(_Section):
    # Sinks ("channel:chat", "slack:*") that data of a label may be written to; a label
    # above internal without a rule reaches only owner.sink (secret: nothing). Keys are
    # labels, or "regulated:*" for every regulated kind.
    sink_rules: dict[str, list[str]] = msgspec.field(default_factory=dict)
    # Principals ("webhook:mail", "telegram:*") whose `sensitive` data the owner lets go to
    # cloud models (seed 003 `owner_acknowledged_cloud_risk`); each such call is audited.
    # regulated and secret data never leave the machine, whatever this says.
    owner_acknowledged_cloud_risk: list[str] = msgspec.field(default_factory=list)
    # Taint of each tool's output (clean | extracted | raw, contracts/taint.py); unlisted core
    # and agent-created tools: clean; MCP tools (server__tool): raw.
    tool_taint: dict[str, str] = msgspec.field(
        default_factory=lambda: {"web_fetch": "raw", "web_request": "raw"})
    # Tools that only read: every other tool's call is a write, which the graduated taint rule
    # may hold for the owner's approval (web_request with GET/HEAD reads too; send_message
    # to the conversation's own chat is its reply).
    read_tools: list[str] = msgspec.field(
        default_factory=lambda: ["web_fetch", "memory_search", "escalate"])
    # Task templates (contracts/templates.py) by name: replace a shipped one (owner_chat,
    # scheduled, paired_dm, third_party_dm, webhook) or add one matched before them.
    templates: dict[str, Template] = msgspec.field(default_factory=dict)


class ActorSettings(_Section):
    """[actors.<name>]: how one actor runs."""

    # Processes sharing the actor's durable consumers (contracts.routes.SCALABLE says which
    # actors may have more than one, and why the others may not).
    replicas: int = 1


class Config(_Section):
    """config.toml: owned by the human; the agent reads it and never writes it."""

    nats: NatsConfig = msgspec.field(default_factory=NatsConfig)
    models: ModelsConfig = msgspec.field(default_factory=ModelsConfig)
    planner: PlannerConfig = msgspec.field(default_factory=PlannerConfig)
    budget: BudgetConfig = msgspec.field(default_factory=BudgetConfig)
    channels: ChannelsConfig = msgspec.field(default_factory=ChannelsConfig)
    owner: OwnerConfig = msgspec.field(default_factory=OwnerConfig)
    executor: ExecutorConfig = msgspec.field(default_factory=ExecutorConfig)
    egress: EgressConfig = msgspec.field(default_factory=EgressConfig)
    sandbox: SandboxConfig = msgspec.field(default_factory=SandboxConfig)
    observer: ObserverConfig = msgspec.field(default_factory=ObserverConfig)
    memory: MemoryConfig = msgspec.field(default_factory=MemoryConfig)
    supervisor: SupervisorConfig = msgspec.field(default_factory=SupervisorConfig)
    logging: LoggingConfig = msgspec.field(default_factory=LoggingConfig)
    telemetry: TelemetryConfig = msgspec.field(default_factory=TelemetryConfig)
    backup: BackupConfig = msgspec.field(default_factory=BackupConfig)
    privacy: PrivacyConfig = msgspec.field(default_factory=PrivacyConfig)
    mcp: McpConfig = msgspec.field(default_factory=McpConfig)
    actors: dict[str, ActorSettings] = msgspec.field(default_factory=dict)
    delegation: DelegationConfig = msgspec.field(default_factory=DelegationConfig)


class Personality(_Section):
    name: str = "Wintermute"
    soul: str = (
        "You are Wintermute, a personal agent that thinks in code. You are direct and never "
        "sycophantic. You solve problems by running commands and writing tools, and you say "
        "plainly what you did."
    )


class HeartbeatConfig(_Section):
    enabled: bool = True  # false: no scheduled tasks, cadences or proactive checks at all
    interval_secs: float = 30.0
    # Proactive checks (seed 000): a short turn that speaks only when something is worth
    # saying ([NO_REPLY] otherwise), at most every proactive_interval_mins, within its cap.
    proactive: bool = False
    proactive_interval_mins: float = 30.0
    proactive_budget: int = 5000
    # Monthly tool review (seed 000): agent-created tools unused for tool_review_unused_days, or
    # succeeding in under tool_review_min_success of their calls, are proposed for archiving
    # (the owner approves). A cron expression; "" turns it off.
    tool_review: str = "0 4 1 * *"
    # Nightly dreaming (seed 001): the memory actor merges near-duplicate memories and decays
    # stale ones ([memory] merge_similarity, decay_*). A cron expression; "" turns it off.
    dreaming: str = "30 3 * * *"
    tool_review_unused_days: int = 30
    tool_review_min_success: float = 0.5
    # Weekly digest: a scheduled turn in which the agent merges what it remembers about the
    # owner into USER.md through the WriteGate (edit_agent_file). A cron expression; "": off.
    user_digest: str = "0 5 * * 0"


class ScheduledTask(_Section):
    """A task in agent.toml: exactly one of cron, every ('15m', '2h', '1d') or at (one-shot,
    '2026-12-01T09:00' local time); a prompt, or a tool to run with arguments."""

    name: str
    cron: str = ""
    every: str = ""
    at: str = ""
    prompt: str = ""
    tool: str = ""
    arguments: dict[str, Any] = msgspec.field(default_factory=dict)
    sink: str = ""  # empty: the owner sink
    enabled: bool = True
    jitter_secs: float = 0.0  # fire up to this many seconds late, spread per task
    budget_tokens: int = 0  # tokens one run may use; 0: only the turn ceiling and daily budget


class AgentConfig(_Section):
    """agent.toml: owned by the agent (personality, schedule); the human may edit it too."""

    personality: Personality = msgspec.field(default_factory=Personality)
    heartbeat: HeartbeatConfig = msgspec.field(default_factory=HeartbeatConfig)
    scheduled_tasks: list[ScheduledTask] = msgspec.field(default_factory=list)


class Settings(msgspec.Struct, kw_only=True):
    """Everything a process needs: both files, validated, plus where home is."""

    home: Path
    config: Config
    agent: AgentConfig


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _env_value(raw: str) -> Any:
    """A value that parses as a JSON literal (number, bool, array, object) is taken as one."""
    try:
        value = json.loads(raw)
    except ValueError:
        return raw
    return value if not isinstance(value, str) else raw


def env_overrides(environ: dict[str, str] | os._Environ[str]) -> dict[str, Any]:
    """Turn WM__SECTION__KEY=value variables into a nested dict."""
    tree: dict[str, Any] = {}
    for name, raw in environ.items():
        if not name.startswith(ENV_PREFIX):
            continue
        path = [p.lower() for p in name[len(ENV_PREFIX) :].split("__") if p]
        if not path:
            continue
        node = tree
        for part in path[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"environment variable {name} conflicts with another WM__ key")
        node[path[-1]] = _env_value(raw)
    return tree


_PATH_RE = re.compile(r"at `\$\.?(.*)`")


def _validation_message(err: msgspec.ValidationError, source: str) -> str:
    text = str(err)
    match = _PATH_RE.search(text)
    key = match.group(1) if match else ""
    detail = _PATH_RE.sub("", text).strip(" -")
    key = re.sub(r"\[(\d+)\]", r"[\1]", key)
    if "unknown field" in detail.lower():
        field = re.search(r"`(.+?)`", detail)
        name = f"{key}.{field.group(1)}" if key and field else (field.group(1) if field else key)
        return f"{source}: unknown setting '{name}' (check the spelling; see README configuration)"
    return f"{source}: invalid value for '{key or '?'}': {detail}"


def _read_toml(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc


def _split_env(tree: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    agent_keys = set(AgentConfig.__struct_fields__)
    agent = {k: v for k, v in tree.items() if k in agent_keys}
    config = {k: v for k, v in tree.items() if k not in agent_keys}
    return config, agent


def default_home() -> Path:
    return Path(os.environ.get("WINTERMUTE_HOME") or Path.home() / ".wintermute").expanduser()


def load_settings(home: Path | None = None, environ: dict[str, str] | None = None, *,
                  cron: bool = True) -> Settings:
    """Load and validate both files with environment overrides; raise ConfigError naming the key.

    `cron=False` leaves cron expressions unchecked: checking one loads croniter (with dateutil,
    ~1 MB for the life of the process), which only the processes that run schedules (the
    supervisor's backups, the heartbeat) need; `up` checked them before starting the others."""
    home = (home or default_home()).expanduser().resolve()
    env = dict(os.environ if environ is None else environ)
    env_config, env_agent = _split_env(env_overrides(env))
    raw_config = _merge(_read_toml(home / "config.toml"), env_config)
    raw_agent = _merge(_read_toml(home / "agent.toml"), env_agent)
    try:
        config = msgspec.convert(raw_config, Config)
    except msgspec.ValidationError as exc:
        raise ConfigError(_validation_message(exc, "config.toml")) from exc
    try:
        agent = msgspec.convert(raw_agent, AgentConfig)
    except msgspec.ValidationError as exc:
        raise ConfigError(_validation_message(exc, "agent.toml")) from exc
    _check(config, agent, cron)
    return Settings(home=home, config=config, agent=agent)


def load_agent(home: Path, environ: dict[str, str] | None = None) -> AgentConfig:
    """agent.toml alone (with its environment overrides), validated: what a process re-reads
    when the agent or the owner edits it while everything runs."""
    env = dict(os.environ if environ is None else environ)
    raw = _merge(_read_toml(home / "agent.toml"), _split_env(env_overrides(env))[1])
    try:
        agent = msgspec.convert(raw, AgentConfig)
    except msgspec.ValidationError as exc:
        raise ConfigError(_validation_message(exc, "agent.toml")) from exc
    _check_tasks(agent)
    return agent


def _check(config: Config, agent: AgentConfig, cron: bool = True) -> None:
    """Checks a type cannot express."""
    from contracts.config_urls import check_urls

    try:
        check_urls(config)  # invariant H: no credentials in any configured URL
    except ValueError as exc:
        raise ConfigError(f"config.toml: {exc}") from None
    models = [("models.default", config.models.default)]
    models += [(f"models.fallback[{i}]", m) for i, m in enumerate(config.models.fallback)]
    models += [("models.local", config.models.local)]
    models += [(f"models.roles.{k}", m) for k, m in config.models.roles.items()]
    models += [(f"models.skills.{k}", m) for k, m in config.models.skills.items()]
    for key, spec in models:
        if spec and (spec.count("/") < 1 or spec.split("/", 1)[0] not in PROVIDERS):
            raise ConfigError(
                f"config.toml: invalid value for '{key}': {spec!r} is not "
                f"'provider/model' with provider one of {', '.join(PROVIDERS)}"
            )
    _check_limits(config.models)
    embedding = config.models.embedding
    if embedding != "none" and (
        "/" not in embedding or embedding.split("/", 1)[0] not in ("local", "openai", "ollama")
    ):
        raise ConfigError(
            f"config.toml: invalid value for 'models.embedding': {embedding!r}; use "
            "'local/minilm', 'openai/MODEL', 'ollama/MODEL' or 'none'"
        )
    for kind, policy in config.memory.policy.items():
        if policy not in ("auto", "suggest", "off"):
            raise ConfigError(f"config.toml: invalid value for 'memory.policy.{kind}': "
                              f"{policy!r}; use 'auto', 'suggest' or 'off'")
    if not re.fullmatch(r"[A-Za-z0-9_-]+", config.nats.prefix):
        raise ConfigError("config.toml: invalid value for 'nats.prefix': letters, digits, - and _")
    for key, value, allowed in (("executor.mode", config.executor.mode, SANDBOX_MODES),
                                ("executor.network", config.executor.network, SANDBOX_NETWORKS)):
        if value not in allowed:
            raise ConfigError(
                f"config.toml: invalid value for '{key}': {value!r}; use one of "
                + ", ".join(repr(a) for a in allowed)
            )
    patterns = [("risky_patterns", p) for p in config.executor.risky_patterns]
    patterns += [("sandboxed_risky_patterns", p) for p in config.executor.sandboxed_risky_patterns]
    for i, (key, pattern) in enumerate(patterns):
        try:
            re.compile(pattern)
        except re.error as exc:
            index = i if key == "risky_patterns" else i - len(config.executor.risky_patterns)
            raise ConfigError(
                f"config.toml: invalid value for 'executor.{key}[{index}]': {exc}"
            ) from exc
    if config.telemetry.traces not in ("none", "file", "otlp"):
        raise ConfigError(
            "config.toml: invalid value for 'telemetry.traces': 'none', 'file' or 'otlp'")
    if config.owner.sink and ":" not in config.owner.sink:
        raise ConfigError("config.toml: invalid value for 'owner.sink': use 'channel:chat'")
    _check_webhook(config.channels.webhook)
    from contracts.labels import LabelError, parse

    for label in config.privacy.sink_rules:
        if label != "regulated:*":
            try:
                parse(label)
            except LabelError as exc:
                raise ConfigError(
                    f"config.toml: invalid key in 'privacy.sink_rules': {exc}") from None
    _check_taint(config)
    for name, template in config.privacy.templates.items():
        if why := check_template(name, template):
            raise ConfigError(f"config.toml: invalid value for {why}")
    for tool, label in config.executor.tool_labels.items():
        try:
            parse(label)
        except LabelError as exc:
            raise ConfigError(
                f"config.toml: invalid value for 'executor.tool_labels.{tool}': {exc}") from None
    _check_budget(config.budget)
    if cron and config.backup.enabled:
        from contracts.schedule import ScheduleError, check_cron

        try:
            check_cron(config.backup.cron)
        except ScheduleError as exc:
            raise ConfigError(f"config.toml: invalid value for 'backup.cron': {exc}") from None
    _check_mcp(config)
    _check_replicas(config)
    _check_tasks(agent, cron)


def _check_replicas(config: Config) -> None:
    """[actors.<name>] names an actor; replicas only where the actor's work allows them."""
    from contracts.routes import ACTORS, SCALABLE

    for name, actor in config.actors.items():
        if name not in ACTORS:
            raise ConfigError(f"config.toml: unknown actor in 'actors.{name}'; the actors are "
                              f"{', '.join(ACTORS)}")
        if not 1 <= actor.replicas <= 32:
            raise ConfigError(f"config.toml: invalid value for 'actors.{name}.replicas': "
                              f"{actor.replicas}; use 1 to 32")
        if actor.replicas > 1 and name not in SCALABLE:
            raise ConfigError(
                f"config.toml: 'actors.{name}.replicas' must be 1: {SCALABLE_WHY.get(name, '')}"
                f" Only {', '.join(SCALABLE)} can run as several processes.")


#: Why an actor runs as one process (per-session order or state a second process would race).
SCALABLE_WHY = {
    "planner": "it applies a session's events in order, and a second process sharing its "
               "consumer could apply a later event of the same session first.",
    "executor": "a session's tool calls and approvals are handled in order.",
    "memory": "its LanceDB table has one writer.",
    "channel": "it holds the bots' connections (one poller per Telegram bot).",
    "approval": "pending approvals are answered in the order they were asked.",
    "observer": "it keeps the event log in order.",
    "heartbeat": "it runs each scheduled job once.",
}


def _check_webhook(hook: WebhookChannel) -> None:
    """An enabled webhook channel names where its replies go, explicitly."""
    if not hook.enabled:
        return
    if not hook.sink or ":" not in hook.sink:
        raise ConfigError(
            "config.toml: 'channels.webhook.sink' is required when the webhook channel is "
            "enabled: set the 'channel:chat' its replies go to (e.g. 'telegram:123456'); "
            "replies never go to 'the last active chat'")
    if hook.sink.split(":", 1)[0] == "webhook":
        raise ConfigError("config.toml: invalid value for 'channels.webhook.sink': a webhook "
                          "cannot be replied to; name a chat of another channel")
    from contracts.labels import LabelError, parse

    try:
        parse(hook.label)
    except LabelError as exc:
        raise ConfigError(f"config.toml: invalid value for 'channels.webhook.label': {exc}") \
            from None
    if hook.replay_window_secs <= 0 or hook.max_body_kb <= 0:
        raise ConfigError("config.toml: 'channels.webhook.replay_window_secs' and "
                          "'max_body_kb' must be positive")


def _check_budget(budget: BudgetConfig) -> None:
    if budget.timezone:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(budget.timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ConfigError(
                f"config.toml: invalid value for 'budget.timezone': {budget.timezone!r} is not "
                "a known time zone; use an IANA name such as 'Europe/Berlin', or leave it "
                "empty for local time") from None
    for key, value in (("max_tokens_per_session", budget.max_tokens_per_session),
                       ("max_tokens_per_day", budget.max_tokens_per_day),
                       ("max_tokens_per_turn", budget.max_tokens_per_turn),
                       ("max_repeated_tool_calls", budget.max_repeated_tool_calls)):
        if value < 0:
            raise ConfigError(f"config.toml: invalid value for 'budget.{key}': {value} is "
                              "negative; use 0 to turn it off")


def _check_mcp(config: Config) -> None:
    names: set[str] = set()
    for i, server in enumerate(config.mcp.servers):
        where = f"mcp.servers[{i}]"
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,32}", server.name) or server.name in names:
            raise ConfigError(f"config.toml: invalid value for '{where}.name': {server.name!r} "
                              "(unique; letters, digits, - and _; at most 32)")
        names.add(server.name)
        if bool(server.command) == bool(server.url):
            raise ConfigError(f"config.toml: '{where}' ({server.name}) needs exactly one of "
                              "command (stdio) or url (Streamable HTTP)")
        if isinstance(server.approval, str) and server.approval not in ("never", "always"):
            raise ConfigError(f"config.toml: invalid value for '{where}.approval': use "
                              "\"never\", \"always\" or a list of tool names")


def _check_tasks(agent: AgentConfig, cron_syntax: bool = True) -> None:
    """Each scheduled task: one valid schedule (cron expressions only if `cron_syntax`),
    something to do, a sink that parses."""
    from contracts.schedule import ScheduleError, when_of

    for key in ("tool_review", "dreaming", "user_digest"):
        cron = getattr(agent.heartbeat, key)
        if cron and cron_syntax:
            from contracts.schedule import check_cron

            try:
                check_cron(cron)
            except ScheduleError as exc:
                raise ConfigError(f"agent.toml: invalid value for 'heartbeat.{key}': {exc}") \
                    from None
    names: set[str] = set()
    for i, task in enumerate(agent.scheduled_tasks):
        where = f"scheduled_tasks[{i}]"
        try:
            when_of(task.cron, task.every, task.at, task.jitter_secs, where,
                    cron_syntax=cron_syntax)
        except ScheduleError as exc:
            key, _, why = str(exc).partition(": ")
            raise ConfigError(f"agent.toml: invalid value for '{key}' ({task.name}): {why}") \
                from None
        if not (task.prompt or task.tool):
            raise ConfigError(f"agent.toml: '{where}' ({task.name}) needs a prompt or a tool")
        if task.sink and ":" not in task.sink:
            raise ConfigError(f"agent.toml: invalid value for '{where}.sink': use 'channel:chat'")
        if task.name in names:
            raise ConfigError(f"agent.toml: '{where}': another task is named {task.name!r}")
        names.add(task.name)


def _check_limits(models: ModelsConfig) -> None:
    """Model call limits must be usable: a positive timeout, 0–10 retries, tokens >= 0."""
    tables: list[tuple[str, ModelLimits]] = [("models", ModelLimits(
        max_tokens=models.max_tokens, timeout_secs=models.timeout_secs,
        max_retries=models.max_retries))]
    tables += [(f"models.limits.{role}", lim) for role, lim in models.limits.items()]
    for where, lim in tables:
        if lim.timeout_secs is not None and lim.timeout_secs <= 0:
            raise ConfigError(f"config.toml: invalid value for '{where}.timeout_secs': "
                              f"{lim.timeout_secs!r}; use a number of seconds above 0")
        if lim.max_retries is not None and not 0 <= lim.max_retries <= 10:
            raise ConfigError(f"config.toml: invalid value for '{where}.max_retries': "
                              f"{lim.max_retries!r}; use 0 to 10")
        if lim.max_tokens is not None and lim.max_tokens < 0:
            raise ConfigError(f"config.toml: invalid value for '{where}.max_tokens': "
                              f"{lim.max_tokens!r}; use a positive number (0: the default)")


PROVIDERS = ("anthropic", "openai", "ollama")


def _check_taint(config: Config) -> None:
    from contracts.taint import LEVELS
    from kit.extract import ExtractError, check_type

    for tool, level in config.privacy.tool_taint.items():
        if level not in LEVELS:
            raise ConfigError(f"config.toml: invalid value for 'privacy.tool_taint.{tool}': "
                              f"{level!r}; use clean, extracted or raw")
    for source, spec in config.channels.webhook.extract.items():
        for field, kind in spec.fields.items():
            try:
                check_type(kind)
            except ExtractError as exc:
                raise ConfigError("config.toml: invalid value for 'channels.webhook.extract."
                                  f"{source}.fields.{field}': {exc}") from None
