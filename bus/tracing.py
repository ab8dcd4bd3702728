"""W3C trace context across actors: one user turn is one trace (OpenTelemetry API)."""

from __future__ import annotations

import contextvars
import secrets

_current: contextvars.ContextVar[str] = contextvars.ContextVar("traceparent", default="")


def _new_span_id() -> str:
    return secrets.token_hex(8)


def new_traceparent() -> str:
    """Start a new trace (a new user turn)."""
    return f"00-{secrets.token_hex(16)}-{_new_span_id()}-01"


def child_of(parent: str) -> str:
    """A traceparent in the same trace as `parent` with a fresh span id."""
    parts = parent.split("-")
    if len(parts) != 4 or len(parts[1]) != 32:
        return new_traceparent()
    return f"00-{parts[1]}-{_new_span_id()}-{parts[3]}"


def trace_id(traceparent: str) -> str:
    parts = traceparent.split("-")
    return parts[1] if len(parts) == 4 else ""


def current() -> str:
    return _current.get()


def set_current(traceparent: str) -> contextvars.Token[str]:
    return _current.set(traceparent)


def outgoing() -> str:
    """The traceparent to put on a message published now."""
    cur = _current.get()
    return child_of(cur) if cur else new_traceparent()
