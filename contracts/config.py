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
from typing import Any

import msgspec

from contracts.config_base import ConfigError, _Section
from contracts.config_channels import (
    ChannelsConfig,
    OwnerConfig,
    SlackChannel,
    TelegramChannel,
    TerminalChannel,
    WebhookChannel,
    WebhookExtract,
)
from contracts.config_checks import _check, _check_tasks
from contracts.config_delegation import DelegationConfig
from contracts.config_memory import (
    CONFLICT_STRATEGIES,
    MEMORY_POLICY,
    GatePolicy,
    MemoryConfig,
    ObserverConfig,
)
from contracts.config_models import (
    BreakerConfig,
    BudgetConfig,
    CallLimits,
    ModelLimits,
    ModelPrice,
    ModelsConfig,
    PlannerConfig,
)
from contracts.config_ops import (
    ActorSettings,
    BackupConfig,
    FlatlineConfig,
    LoggingConfig,
    NatsConfig,
    SupervisorConfig,
    TelemetryConfig,
)
from contracts.config_tools import (
    DEFAULT_RISKY,
    DEFAULT_SANDBOXED_RISKY,
    DIRECT_ALLOWLIST,
    SANDBOX_MODES,
    SANDBOX_NETWORKS,
    EgressConfig,
    ExecutorConfig,
    McpConfig,
    McpServer,
    SandboxConfig,
)
from contracts.templates import Template

ENV_PREFIX = "WM__"

#: The schema is split by section over contracts/config_*.py; everything is importable from here.
__all__ = [
    "ActorSettings",
    "AgentConfig",
    "BackupConfig",
    "BreakerConfig",
    "BudgetConfig",
    "CONFLICT_STRATEGIES",
    "CallLimits",
    "ChannelsConfig",
    "Config",
    "ConfigError",
    "DEFAULT_RISKY",
    "DEFAULT_SANDBOXED_RISKY",
    "DIRECT_ALLOWLIST",
    "DelegationConfig",
    "ENV_PREFIX",
    "EgressConfig",
    "ExecutorConfig",
    "FlatlineConfig",
    "GatePolicy",
    "HeartbeatConfig",
    "LoggingConfig",
    "MEMORY_POLICY",
    "McpConfig",
    "McpServer",
    "MemoryConfig",
    "ModelLimits",
    "ModelPrice",
    "ModelsConfig",
    "NatsConfig",
    "ObserverConfig",
    "OwnerConfig",
    "Personality",
    "PlannerConfig",
    "PrivacyConfig",
    "SANDBOX_MODES",
    "SANDBOX_NETWORKS",
    "SandboxConfig",
    "ScheduledTask",
    "Settings",
    "SlackChannel",
    "SupervisorConfig",
    "TelegramChannel",
    "TelemetryConfig",
    "TerminalChannel",
    "WebhookChannel",
    "WebhookExtract",
    "default_home",
    "env_overrides",
    "load_agent",
    "load_settings",
]

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
