"""W3C trace context across actors with OpenTelemetry: one user turn is one trace.

Every handled message runs in a span whose parent comes from the message's `traceparent`
header; every publish carries the current span's context. Spans are exported only when
asked for (`[telemetry] traces = "file"` writes logs/traces.jsonl).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from kit.private import open_private, private_dir

_propagator = TraceContextTextMapPropagator()
# Real spans from the start (ids for propagation); setup() adds a service name and exporting.
_provider: TracerProvider = TracerProvider()
_tracer: trace.Tracer = _provider.get_tracer("wintermute")


class JsonlSpanExporter(SpanExporter):
    """Appends finished spans to a JSONL file (one object per span)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        lines = []
        for span in spans:
            ctx = span.get_span_context()
            if ctx is None:
                continue
            parent = span.parent
            lines.append(json.dumps({
                "trace_id": f"{ctx.trace_id:032x}",
                "span_id": f"{ctx.span_id:016x}",
                "parent_id": f"{parent.span_id:016x}" if parent else None,
                "name": span.name,
                "service": span.resource.attributes.get("service.name"),
                "start_ns": span.start_time,
                "end_ns": span.end_time,
                "attributes": dict(span.attributes or {}),
            }, default=str))
        with self._lock, open_private(self.path) as fh:
            fh.write("".join(line + "\n" for line in lines))
        return SpanExportResult.SUCCESS


def otlp_endpoint() -> str:
    """The OTLP endpoint the standard variables name ("" when none is set)."""
    return (os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or "")


def setup(service: str, export: str = "none", path: Path | None = None) -> None:
    """Install this process's tracer provider; `export` is "none", "file" or "otlp".

    The OTLP exporter (HTTP/protobuf) reads the standard OTEL_EXPORTER_OTLP_* variables
    (endpoint, headers, timeout); setting an endpoint turns it on whatever `export` says."""
    global _provider, _tracer
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    if export == "file" and path is not None:
        private_dir(path.parent)
        provider.add_span_processor(BatchSpanProcessor(JsonlSpanExporter(path)))
    if export == "otlp" or otlp_endpoint():
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    _provider = provider
    _tracer = provider.get_tracer("wintermute")


def flush(timeout_ms: int = 30_000) -> bool:
    """Export what has ended so far (tests, and before a short-lived process exits)."""
    return _provider.force_flush(timeout_ms)


def shutdown() -> None:
    """Flush exported spans (at process exit)."""
    _provider.shutdown()


@contextlib.contextmanager
def handling(name: str, headers: Mapping[str, str], **attributes: str | int) -> Iterator[None]:
    """Run a message handler in a span that continues the sender's trace."""
    parent = _propagator.extract(carrier=dict(headers))
    with _tracer.start_as_current_span(name, context=parent, attributes=attributes):
        yield


def _span_context(traceparent: str) -> trace.SpanContext | None:
    ctx = trace.get_current_span(_propagator.extract({"traceparent": traceparent}))
    sc = ctx.get_span_context()
    return sc if sc.is_valid else None


@contextlib.contextmanager
def turn_root(name: str, **attributes: str | int) -> Iterator[None]:
    """The root span of a new turn, created at the edge (the channel): a new trace, linked to
    whatever this process was handling (e.g. the terminal input that became the turn)."""
    here = trace.get_current_span().get_span_context()
    links = [trace.Link(here)] if here.is_valid else []
    with _tracer.start_as_current_span(name, context=Context(), kind=trace.SpanKind.SERVER,
                                       links=links, attributes=attributes):
        yield


@contextlib.contextmanager
def resume(traceparent: str, name: str, **attributes: str | int) -> Iterator[None]:
    """Continue the trace of `traceparent` (e.g. the turn that asked for an approval), linked
    to what this process is handling now (e.g. the owner's decision)."""
    here = trace.get_current_span().get_span_context()
    links = [trace.Link(here)] if here.is_valid else []
    parent = _propagator.extract({"traceparent": traceparent}) if traceparent else Context()
    with _tracer.start_as_current_span(name, context=parent, links=links,
                                       attributes=attributes):
        yield


def annotate(attributes: Mapping[str, str | int | bool]) -> None:
    """Add attributes to the current span (semantic conventions: gen_ai.*, messaging.*)."""
    span = trace.get_current_span()
    if span.is_recording():
        span.set_attributes(attributes)


def failed(reason: str) -> None:
    """Mark the current span as an error (a refused, failed or dead-lettered message)."""
    span = trace.get_current_span()
    if span.is_recording():
        span.set_status(trace.Status(trace.StatusCode.ERROR, reason[:500]))


def current() -> str:
    """The current span's traceparent, or "" outside any span."""
    carrier: dict[str, str] = {}
    _propagator.inject(carrier)
    return carrier.get("traceparent", "")


def outgoing() -> str:
    """The traceparent for a message published now; outside any span it starts a trace."""
    return current() or new_traceparent()


def new_traceparent() -> str:
    """A fresh root traceparent (for callers that start a trace by hand)."""
    return f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01"


def trace_id(traceparent: str) -> str:
    parts = traceparent.split("-")
    return parts[1] if len(parts) == 4 else ""

