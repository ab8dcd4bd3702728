"""Sections of config.toml that run the machinery: NATS, the supervisor and its Flatline
policy, actors' replicas, logging, traces and backups."""

from __future__ import annotations

from typing import Literal

import msgspec

from contracts.config_base import _Section


class NatsConfig(_Section):
    url: str = ""  # empty: `up` starts the embedded nats-server
    port: int = 0  # embedded server port; 0 picks a free one
    # Embedded server: its HTTP monitoring endpoints (/varz, /connz, /jsz) on 127.0.0.1 at this
    # port, for Prometheus exporters and `just bench`'s message counts; 0: off.
    monitor_port: int = 0
    prefix: str = "wm"
    credentials: str = ""  # path to a .creds file for an external server
    # A NATS user and password, or an nkey seed file (then `user` only names the inbox space,
    # `_INBOX_<user>`); `up` sets user, seed and api_prefix for each actor it spawns.
    user: str = ""
    password: str = ""
    seed: str = ""
    api_prefix: str = ""  # JetStream API prefix; empty: $JS.API (an actor's account: bus/accounts.py)

    def __post_init__(self) -> None:
        for key in ("port", "monitor_port"):
            if not 0 <= getattr(self, key) <= 65535:
                raise ValueError(f"{key} must be a TCP port, 0 to 65535")

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

class ActorSettings(_Section):
    """[actors.<name>]: how one actor runs."""

    # Processes sharing the actor's durable consumers (contracts.routes.SCALABLE says which
    # actors may have more than one, and why the others may not).
    replicas: int = 1
