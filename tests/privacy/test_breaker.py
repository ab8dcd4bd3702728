"""Circuit breakers per model provider (seed 003 §11.3 and §14.2): failures within a window
open a provider's breaker, the fallback chain skips it for the cooldown, one request then
probes it; each change is audited and `wintermute status` shows open breakers.

The llm actor runs in-process against the real nats-server; the failing provider is a real
OpenAI-protocol HTTP server answering 503, the fallback the scripted Anthropic server.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from aiohttp import web

from actors.llm.breaker import Breakers
from bus import Bus
from bus.codec import decode
from contracts import ChatMessage, Health, LlmRequest, LlmResponse
from contracts.config import Settings
from supervisor.cli.client import render_status
from tests.actors.harness import actors
from tests.fakes.llm_servers import FakeLLM
from tests.privacy.helpers import audited

SettingsFor = Callable[..., Settings]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_threshold_within_the_window_opens_then_one_probe_closes_or_reopens() -> None:
    clock = Clock()
    b = Breakers(threshold=3, window=60, cooldown=300, clock=clock)
    assert b.failure("openai", "503") is None
    clock.now += 61  # the first failure left the window
    assert b.failure("openai", "503") is None and b.failure("openai", "503") is None
    opened = b.failure("openai", "timeout")
    assert opened is not None and opened.state == "open" and "3 failures" in opened.reason
    assert b.allow("openai") == (False, None)
    assert b.allow("anthropic") == (True, None)  # per provider
    clock.now += 300
    allowed, probe = b.allow("openai")
    assert allowed and probe is not None and probe.state == "half_open"
    assert b.allow("openai") == (False, None)  # one probe at a time
    reopened = b.failure("openai", "503")
    assert reopened is not None and reopened.state == "open"
    assert b.snapshot()["openai"]["retry_at"] == clock.now + 300
    clock.now += 300
    assert b.allow("openai")[0]
    closed = b.success("openai")
    assert closed is not None and closed.state == "closed"
    assert b.snapshot()["openai"] == {"state": "closed", "recent_failures": 0}
    assert b.success("openai") is None  # closed stays closed, nothing to audit


def test_a_cancelled_probe_lets_the_next_request_probe() -> None:
    clock = Clock()
    b = Breakers(threshold=1, window=60, cooldown=10, clock=clock)
    b.failure("ollama", "refused")
    clock.now += 10
    assert b.allow("ollama")[0]
    b.release("ollama")
    assert b.allow("ollama") == (True, None)


class Outage:
    """An OpenAI-protocol server that answers 503 while `down`, and counts requests."""

    def __init__(self, healthy: FakeLLM) -> None:
        self.down, self.hits, self.healthy = True, 0, healthy
        self.runner: web.AppRunner | None = None
        self.url = ""

    async def start(self) -> str:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.chat)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self.runner.addresses[0][1]}/v1"
        return self.url

    async def chat(self, request: web.Request) -> web.StreamResponse:
        self.hits += 1
        if self.down:
            return web.json_response(
                {"error": {"message": "overloaded", "type": "server_error", "code": None}},
                status=503, headers={"retry-after-ms": "5"})
        return await self.healthy._chat(request)  # the scripted model once it is back

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()


async def ask(bus: Bus, n: int) -> LlmResponse:
    got: asyncio.Queue[LlmResponse] = asyncio.Queue()

    async def on(d: object) -> None:
        msg = decode(d.data)  # type: ignore[attr-defined]
        if isinstance(msg, LlmResponse):
            await got.put(msg)

    tap = await bus.subscribe(bus.subjects.route(LlmResponse, session=f"s{n}"), on)
    try:
        await bus.send(LlmRequest(id=f"r{n}", session=f"s{n}", turn_id=f"t{n}", step=1,
                                  messages=[ChatMessage(role="user", content=f"hello {n}")]))
        return await asyncio.wait_for(got.get(), 60)
    finally:
        await tap.stop()


async def test_an_open_breaker_feeds_the_fallback_chain_and_is_audited_and_shown(
    clean_provider_env: None, settings_for: SettingsFor, bus: Bus,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """openai answers 503: after two failed requests its breaker opens (audited), the third
    request goes straight to anthropic, the health record and `status` show it open; after the
    cooldown one request probes openai, which is back, and the breaker closes (audited)."""
    anthropic, scripted = FakeLLM(), FakeLLM()
    await scripted.start("openai")
    outage = Outage(scripted)
    monkeypatch.setenv("OPENAI_BASE_URL", await outage.start())
    monkeypatch.setenv("ANTHROPIC_BASE_URL", await anthropic.start("anthropic"))
    settings = settings_for(**{
        "WM__MODELS__DEFAULT": "openai/test-model",
        "WM__MODELS__FALLBACK": '["anthropic/test-model"]',
        "WM__MODELS__BREAKER__FAILURE_THRESHOLD": "2",
        "WM__MODELS__BREAKER__COOLDOWN_SECS": "2",
    })
    try:
        async with actors(settings, "llm"):
            for n in (1, 2):
                r = await ask(bus, n)
                assert r.model == "anthropic/test-model" and r.content == f"echo: hello {n}"
            [opened] = await audited(bus, lambda e: e.decision == "breaker.opened")
            hits = outage.hits
            r3 = await ask(bus, 3)
            assert r3.model == "anthropic/test-model" and outage.hits == hits  # skipped
            health = await _health_with_open_breaker(bus)
            status = {"actors": [{"name": "llm", "info": health.info}]}
            assert "model provider openai: circuit open, skipped until" in render_status(status)
            outage.down = False
            r4 = await _until_openai_answers(bus)  # after the 2 s cooldown, one probe
            assert r4.content.startswith("echo: hello")
            await audited(bus, lambda e: e.decision == "breaker.closed")
            events = await audited(bus, lambda e: e.decision.startswith("breaker."), n=3)
    finally:
        await outage.stop()
        await anthropic.stop()
        await scripted.stop()
    assert [e.outcome for e in events] == ["opened", "half_open", "closed"]
    assert opened.actor == "llm" and opened.refs["provider"] == "openai"
    assert "2 failures within 60 s" in opened.reason


async def _health_with_open_breaker(bus: Bus) -> Health:
    async with asyncio.timeout(30):
        while True:
            h = await bus.kv_get_as(bus.subjects.kv_health, "llm", Health)
            if h is not None and h.info.get("breakers", {}).get("openai", {}).get(
                    "state") == "open":
                return h
            await asyncio.sleep(0.2)


async def _until_openai_answers(bus: Bus) -> LlmResponse:
    """Ask until a request goes to openai again (the probe after the cooldown)."""
    async with asyncio.timeout(30):
        for n in range(4, 1000):
            r = await ask(bus, n)
            if r.model == "openai/test-model":
                return r
            await asyncio.sleep(0.2)
    raise AssertionError("openai was never probed again")
