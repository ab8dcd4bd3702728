"""One user turn is one trace across actors (OpenTelemetry spans exported to JSONL)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from actors.llm.providers import reset_clients
from bus import tracing
from contracts.config import Settings
from tests.actors.harness import ALL, actors, chat
from tests.fakes.llm_servers import FakeLLM


async def test_a_turn_with_a_tool_call_is_one_trace(
    settings_for: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake = FakeLLM()
    monkeypatch.setenv("OPENAI_BASE_URL", await fake.start("openai"))
    reset_clients()
    spans_file = tmp_path / "traces.jsonl"
    tracing.setup("wintermute-test", "file", spans_file)
    try:
        settings = settings_for(WM__MODELS__DEFAULT="openai/m", WM__TELEMETRY__TRACES="file")
        async with actors(settings, *ALL), chat(settings) as c:
            assert "traced" in await c.ask("run: echo traced")
        tracing.shutdown()
    finally:
        tracing.setup("wintermute-test")
        await fake.stop()
    spans = [json.loads(line) for line in spans_file.read_text().splitlines()]
    by_trace: dict[str, set[str]] = {}
    for span in spans:
        by_trace.setdefault(span["trace_id"], set()).add(span["name"].split(" ")[0])
    biggest = max(by_trace.values(), key=len)
    assert {"channel", "planner", "memory", "llm", "executor"} <= biggest


# Without an exporter a span is only its ids (no OpenTelemetry): they must still make one trace.

PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def test_without_an_exporter_a_handler_continues_the_senders_trace() -> None:
    tracing.setup("wintermute-test")
    assert tracing.current() == ""
    with tracing.handling("planner handle", {"traceparent": PARENT}, session="s"):
        inner = tracing.current()
        with tracing.handling("nested", {"traceparent": inner}):
            nested = tracing.current()
        assert tracing.current() == inner
    assert tracing.current() == ""
    assert tracing.trace_id(inner) == tracing.trace_id(nested) == PARENT.split("-")[1]
    version, _, span, flags = inner.split("-")
    assert (version, flags) == ("00", "01") and len(span) == 16
    assert len({PARENT.split("-")[2], span, nested.split("-")[2]}) == 3, "each span its own id"
    tracing.annotate({"gen_ai.request.model": "m"})  # nothing keeps them; nothing fails
    tracing.failed("no exporter")
    assert tracing.flush() is True


@pytest.mark.parametrize("bad", [
    "", "garbage", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
    "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    "00-00000000000000000000000000000000-b7ad6b7169203331-01",
    "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
    "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra",
    "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
])
def test_without_an_exporter_a_bad_traceparent_starts_a_new_trace(bad: str) -> None:
    tracing.setup("wintermute-test")
    with tracing.handling("h", {"traceparent": bad}):
        here = tracing.current()
    with tracing.resume(bad, "approval resolved"):
        resumed = tracing.current()
    for tp in (here, resumed):
        assert tp.startswith("00-") and tp.endswith("-01") and len(tp) == 55
        assert tracing.trace_id(tp) not in ("", "0" * 32, PARENT.split("-")[1])


def test_without_an_exporter_roots_resumes_and_flags() -> None:
    tracing.setup("wintermute-test")
    with tracing.handling("h", {"traceparent": PARENT}):
        with tracing.turn_root("turn terminal", channel="terminal"):
            root = tracing.current()
        resumed_here = tracing.outgoing()
    assert tracing.trace_id(root) != tracing.trace_id(PARENT), "a turn is a trace of its own"
    assert tracing.trace_id(resumed_here) == tracing.trace_id(PARENT)
    with tracing.resume(PARENT, "approval resolved"):
        assert tracing.trace_id(tracing.current()) == tracing.trace_id(PARENT)
    unsampled = PARENT[:-2] + "00"
    with tracing.handling("h", {"traceparent": unsampled}):
        assert tracing.current().endswith("-00"), "the sender's sampling decision is kept"
    first, second = tracing.outgoing(), tracing.outgoing()
    assert tracing.trace_id(first) != tracing.trace_id(second), "outside a span: a new trace"


def test_spans_are_opentelemetry_only_when_exported(tmp_path: Path) -> None:
    tracing.setup("wintermute-test", "file", tmp_path / "traces.jsonl")
    try:
        with tracing.handling("exported", {"traceparent": PARENT}):
            inner = tracing.current()
        tracing.flush()
    finally:
        tracing.shutdown()
        tracing.setup("wintermute-test")
    assert tracing.trace_id(inner) == tracing.trace_id(PARENT)
    (span,) = [json.loads(line) for line in (tmp_path / "traces.jsonl").read_text().splitlines()]
    assert span["name"] == "exported" and span["parent_id"] == PARENT.split("-")[2]
