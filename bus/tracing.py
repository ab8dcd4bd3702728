"""W3C trace context across actors: one user turn is one trace.

Every handled message runs in a span whose parent comes from the message's `traceparent`
header; every publish carries the current span's context. Spans are exported only when
asked for (`[telemetry] traces = "file"` writes logs/traces.jsonl, "otlp" or an
OTEL_EXPORTER_OTLP_* endpoint sends them over OTLP); then they are OpenTelemetry spans
(bus/_otel.py). Without an exporter a span is only its ids, kept in a context variable, and
OpenTelemetry is not even imported: the ids still travel, so a later `traces = "file"` run or
`wintermute tap` sees the same traces, and every actor is ~2 MB smaller at rest.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import re
import secrets
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import NamedTuple

# bus._otel once setup() asked for exported spans; None: ids only (the default).
_otel: ModuleType | None = None

# The traceparent grammar OpenTelemetry's propagator accepts (W3C Trace Context, level 1).
_TRACEPARENT = re.compile(
    r"^[ \t]*([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?[ \t]*$")


class _Ids(NamedTuple):
    trace: str  # 32 hex digits
    span: str  # 16 hex digits
    flags: str  # 2 hex digits ("01": sampled)


_current: contextvars.ContextVar[_Ids | None] = contextvars.ContextVar(
    "wintermute_span", default=None)


def _parse(traceparent: str) -> _Ids | None:
    """The ids a valid traceparent names; None for anything else (a new trace starts)."""
    m = _TRACEPARENT.match(traceparent)
    if m is None:
        return None
    version, trace, span, flags, rest = m.groups()
    if version == "ff" or (version == "00" and rest) or trace == "0" * 32 or span == "0" * 16:
        return None
    return _Ids(trace, span, flags)


@contextlib.contextmanager
def _span(parent: _Ids | None) -> Iterator[None]:
    ids = (_Ids(parent.trace, secrets.token_hex(8), parent.flags) if parent
           else _Ids(secrets.token_hex(16), secrets.token_hex(8), "01"))
    token = _current.set(ids)
    try:
        yield
    finally:
        _current.reset(token)


def otlp_endpoint() -> str:
    """The OTLP endpoint the standard variables name ("" when none is set)."""
    return (os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or "")


def setup(service: str, export: str = "none", path: Path | None = None) -> None:
    """Set how this process traces; `export` is "none", "file" or "otlp".

    The OTLP exporter (HTTP/protobuf) reads the standard OTEL_EXPORTER_OTLP_* variables
    (endpoint, headers, timeout); setting an endpoint turns it on whatever `export` says."""
    global _otel
    file = path if export == "file" else None
    otlp = export == "otlp" or bool(otlp_endpoint())
    if file is None and not otlp:
        _otel = None
        return
    from bus import _otel as otel

    otel.setup(service, file, otlp)
    _otel = otel


def flush(timeout_ms: int = 30_000) -> bool:
    """Export what has ended so far (tests, and before a short-lived process exits)."""
    return _otel.flush(timeout_ms) if _otel is not None else True


def shutdown() -> None:
    """Flush exported spans (at process exit)."""
    if _otel is not None:
        _otel.shutdown()


@contextlib.contextmanager
def handling(name: str, headers: Mapping[str, str], **attributes: str | int) -> Iterator[None]:
    """Run a message handler in a span that continues the sender's trace."""
    if _otel is not None:
        with _otel.handling(name, headers, attributes):
            yield
        return
    with _span(_parse(headers.get("traceparent", ""))):
        yield


@contextlib.contextmanager
def turn_root(name: str, **attributes: str | int) -> Iterator[None]:
    """The root span of a new turn, created at the edge (the channel): a new trace, linked to
    whatever this process was handling (e.g. the terminal input that became the turn)."""
    if _otel is not None:
        with _otel.turn_root(name, attributes):
            yield
        return
    with _span(None):
        yield


@contextlib.contextmanager
def resume(traceparent: str, name: str, **attributes: str | int) -> Iterator[None]:
    """Continue the trace of `traceparent` (e.g. the turn that asked for an approval), linked
    to what this process is handling now (e.g. the owner's decision)."""
    if _otel is not None:
        with _otel.resume(traceparent, name, attributes):
            yield
        return
    with _span(_parse(traceparent)):
        yield


def annotate(attributes: Mapping[str, str | int | bool]) -> None:
    """Add attributes to the current span (semantic conventions: gen_ai.*, messaging.*);
    without an exporter nothing keeps them."""
    if _otel is not None:
        _otel.annotate(attributes)


def failed(reason: str) -> None:
    """Mark the current span as an error (a refused, failed or dead-lettered message)."""
    if _otel is not None:
        _otel.failed(reason)


def current() -> str:
    """The current span's traceparent, or "" outside any span."""
    if _otel is not None:
        return str(_otel.current())
    ids = _current.get()
    return f"00-{ids.trace}-{ids.span}-{ids.flags}" if ids else ""


def outgoing() -> str:
    """The traceparent for a message published now; outside any span it starts a trace."""
    return current() or new_traceparent()


def new_traceparent() -> str:
    """A fresh root traceparent (for callers that start a trace by hand)."""
    return f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01"


def trace_id(traceparent: str) -> str:
    parts = traceparent.split("-")
    return parts[1] if len(parts) == 4 else ""
