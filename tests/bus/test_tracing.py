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
