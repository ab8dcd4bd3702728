"""Checks of the configuration that a type cannot express, run by the loader after decoding;
each raises ConfigError naming the key."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from contracts.config_base import ConfigError
from contracts.config_channels import WebhookChannel
from contracts.config_models import BudgetConfig, ModelLimits, ModelsConfig
from contracts.config_tools import SANDBOX_MODES, SANDBOX_NETWORKS
from contracts.templates import check as check_template

if TYPE_CHECKING:  # the loader imports these checks
    from contracts.config import AgentConfig, Config


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
