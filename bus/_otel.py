"""The OpenTelemetry side of bus/tracing.py: real spans, exported to a file or over OTLP.

Imported only when spans are exported (`[telemetry] traces = "file"`/"otlp", or an
OTEL_EXPORTER_OTLP_* endpoint): the SDK and its entry-point scan cost every process ~2 MB at
rest, for spans that, without an exporter, nobody reads.
"""

from __future__ import annotations

import contextlib
import json
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


def setup(service: str, file: Path | None, otlp: bool) -> None:
    """Install this process's tracer provider with the exporters asked for."""
    global _provider, _tracer
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    if file is not None:
        private_dir(file.parent)
        provider.add_span_processor(BatchSpanProcessor(JsonlSpanExporter(file)))
    if otlp:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    _provider = provider
    _tracer = provider.get_tracer("wintermute")


def flush(timeout_ms: int) -> bool:
    return _provider.force_flush(timeout_ms)


def shutdown() -> None:
    _provider.shutdown()


@contextlib.contextmanager
def handling(name: str, headers: Mapping[str, str], attributes: Mapping[str, str | int]
             ) -> Iterator[None]:
    parent = _propagator.extract(carrier=dict(headers))
    with _tracer.start_as_current_span(name, context=parent, attributes=attributes):
        yield


def _links() -> list[trace.Link]:
    here = trace.get_current_span().get_span_context()
    return [trace.Link(here)] if here.is_valid else []


@contextlib.contextmanager
def turn_root(name: str, attributes: Mapping[str, str | int]) -> Iterator[None]:
    with _tracer.start_as_current_span(name, context=Context(), kind=trace.SpanKind.SERVER,
                                       links=_links(), attributes=attributes):
        yield


@contextlib.contextmanager
def resume(traceparent: str, name: str, attributes: Mapping[str, str | int]) -> Iterator[None]:
    parent = _propagator.extract({"traceparent": traceparent}) if traceparent else Context()
    with _tracer.start_as_current_span(name, context=parent, links=_links(),
                                       attributes=attributes):
        yield


def annotate(attributes: Mapping[str, str | int | bool]) -> None:
    span = trace.get_current_span()
    if span.is_recording():
        span.set_attributes(attributes)


def failed(reason: str) -> None:
    span = trace.get_current_span()
    if span.is_recording():
        span.set_status(trace.Status(trace.StatusCode.ERROR, reason[:500]))


def current() -> str:
    carrier: dict[str, str] = {}
    _propagator.inject(carrier)
    return carrier.get("traceparent", "")
