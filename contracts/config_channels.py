"""Sections of config.toml about who talks to the agent: the channels (terminal, Telegram,
Slack, webhooks) and the owner."""

from __future__ import annotations

from typing import Literal

import msgspec

from contracts.config_base import _Section


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
