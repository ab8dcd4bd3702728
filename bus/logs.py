"""Structured JSON logs carrying the context of the message being handled."""

from __future__ import annotations

import contextvars
import json
import logging
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kit.private import open_private, private_dir

_context: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "log_context", default=None
)


def bind(**fields: Any) -> contextvars.Token[dict[str, Any] | None]:
    """Add fields (subject, seq, msg_id, session, actor) to every log line in this context."""
    merged = dict(_context.get() or {})
    merged.update({k: v for k, v in fields.items() if v not in (None, "")})
    return _context.set(merged)


def reset(token: contextvars.Token[dict[str, Any] | None]) -> None:
    _context.reset(token)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, msg, and the bound message context."""

    def __init__(self, actor: str, scrub: Callable[[str], str] | None = None) -> None:
        super().__init__()
        self.actor = actor
        # Every line, ours or a library's, passes the process's redactor: a secret in a URL
        # (Telegram's API URLs hold the bot token) or in an error never reaches a log file.
        self.scrub = scrub or (lambda text: text)

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "actor": self.actor,
            "logger": record.name,
            "msg": self.scrub(record.getMessage()),
        }
        out.update(_context.get() or {})
        if record.exc_info:
            out["exc"] = self.scrub(self.formatException(record.exc_info))
        return json.dumps(out, default=str)


def setup(actor: str, level: str = "info", path: Path | None = None,
          scrub: Callable[[str], str] | None = None) -> None:
    """Send JSON logs to stderr (the supervisor collects them under logs/), or to `path`;
    `scrub` redacts every line (the home's secrets and credential shapes)."""
    handler: logging.Handler
    if path is not None:
        private_dir(path.parent)
        open_private(path).close()  # created 0600 before the handler opens it
        handler = logging.FileHandler(path)
    else:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(actor, scrub))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # httpx2/httpcore2: the SDKs' HTTP stack logs a line per request at info (one per model call)
    for noisy in ("nats", "httpx", "httpx2", "httpcore", "httpcore2", "openai", "anthropic",
                  "asyncio"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
