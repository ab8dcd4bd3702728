"""Traces to a real OTLP receiver (one complete trace per turn, with its root span) and the
supervisor's Prometheus /metrics, both from turns through the real actors."""

from __future__ import annotations

import asyncio
import urllib.request
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from aiohttp import web
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from prometheus_client.parser import text_string_to_metric_families

from bus import Bus, tracing
from contracts.config import Settings
from supervisor.process.metrics import Metrics, serve_metrics
from tests.actors.harness import ALL, actors, chat
from tests.fakes.llm_servers import FakeLLM

SettingsFor = Callable[..., Settings]


class OtlpReceiver:
    """The collector's OTLP/HTTP traces endpoint: decodes ExportTraceServiceRequest protobufs."""

    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def _traces(self, request: web.Request) -> web.Response:
        body = trace_service_pb2.ExportTraceServiceRequest()
        body.ParseFromString(await request.read())
        for rs in body.resource_spans:
            service = next((a.value.string_value for a in rs.resource.attributes
                            if a.key == "service.name"), "")
            for ss in rs.scope_spans:
                for s in ss.spans:
                    self.spans.append({
                        "trace": s.trace_id.hex(), "span": s.span_id.hex(),
                        "parent": s.parent_span_id.hex(), "name": s.name, "service": service,
                        "links": [link.trace_id.hex() for link in s.links],
                        "attributes": {a.key: (a.value.string_value or a.value.int_value)
                                       for a in s.attributes},
                    })
        return web.Response(body=trace_service_pb2.ExportTraceServiceResponse()
                            .SerializeToString(), content_type="application/x-protobuf")

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/traces", self._traces)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


@pytest.fixture
async def otlp(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[OtlpReceiver]:
    receiver = OtlpReceiver()
    await receiver.start()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
    tracing.setup("wintermute-test")  # the endpoint variable alone turns OTLP export on
    try:
        yield receiver
    finally:
        await asyncio.to_thread(tracing.shutdown)
        monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT")
        tracing.setup("wintermute-test")  # a fresh provider without exporters for later tests
        await receiver.stop()


async def test_one_complete_trace_per_turn_reaches_an_otlp_receiver(
    otlp: OtlpReceiver, fake: FakeLLM, settings_for: SettingsFor,
) -> None:
    settings = settings_for(WM__MODELS__DEFAULT="openai/test-model", WM__EXECUTOR__MODE="direct")
    async with actors(settings, *ALL), chat(settings) as c:
        assert (await c.ask("run: echo traced")).startswith("Tool said:")
    # The exporter posts from its own thread to the receiver on this loop: do not block it.
    await asyncio.to_thread(tracing.flush)
    roots = [s for s in otlp.spans if s["name"] == "turn terminal" and not s["parent"]]
    assert len(roots) == 1, [s["name"] for s in otlp.spans]
    root = roots[0]
    assert root["links"], "the root links to the terminal input that became the turn"
    turn = [s for s in otlp.spans if s["trace"] == root["trace"]]
    actors_seen = {s["attributes"].get("wintermute.actor") for s in turn}
    assert {"planner", "llm", "executor", "channel"} <= actors_seen
    ids = {s["span"] for s in turn}
    assert all(s["parent"] in ids for s in turn if s is not root), "every span has its parent"
    assert any(s["attributes"].get("gen_ai.request.model") == "test-model" and
               s["attributes"].get("gen_ai.usage.input_tokens") for s in turn)
    assert any(s["attributes"].get("gen_ai.tool.name") == "execute_command" for s in turn)
    handled = [s for s in turn if s["attributes"].get("messaging.system") == "nats"]
    assert handled and all(s["attributes"].get("wintermute.session") == "terminal:owner"
                           for s in handled if s["attributes"].get("wintermute.actor") != "channel")


async def test_metrics_count_turns_tokens_tools_and_hops(
    fake: FakeLLM, settings_for: SettingsFor, bus: Bus,
) -> None:
    settings = settings_for(WM__MODELS__DEFAULT="openai/test-model", WM__EXECUTOR__MODE="direct")
    metrics = Metrics()
    durables = [(bus.subjects.stream_in, "planner-in")]
    url = await serve_metrics(bus, metrics, "127.0.0.1", 0,
                              lambda: {"planner": {"restarts": 2, "healthy": True}}, durables,
                              every=0.2)
    async with actors(settings, *ALL), chat(settings) as c:
        await c.ask("hello metrics")
        await c.ask("run: echo counted")
    await asyncio.sleep(0.5)  # noqa: ASYNC - the poller samples restarts and queue depth

    def scrape() -> dict[str, float]:
        text = urllib.request.urlopen(url, timeout=10).read().decode()
        out: dict[str, float] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
                out[f"{sample.name}{{{labels}}}"] = sample.value
        return out

    values = await asyncio.to_thread(scrape)
    assert values["wintermute_turns_total{channel=terminal,origin=user}"] == 2
    assert values["wintermute_replies_total{channel=terminal}"] >= 2
    assert values["wintermute_hop_seconds_count{hop=turn}"] == 2
    assert values["wintermute_hop_seconds_count{hop=model}"] >= 3
    assert values["wintermute_tokens_total{direction=input,model=openai/test-model}"] > 0
    assert values["wintermute_tool_calls_total{outcome=ok,tool=execute_command}"] == 1
    assert values["wintermute_actor_restarts{actor=planner}"] == 2
    assert "wintermute_consumer_pending{consumer=planner-in,state=pending,stream=" + \
        bus.subjects.stream_in + "}" in values
