"""web_fetch and web_request: text and file modes, caps, rate limits, the allowlist, approvals
and the trust ledger, and secrets kept out of tool output, JetStream and model requests."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from actors.executor import web, web_request
from actors.executor._trust import TrustLedger
from actors.executor.base import ToolContext
from actors.executor.sandbox import DirectSandbox
from bus import Bus
from contracts import ToolRequest
from contracts.config import Settings
from kit.redact import Redactor
from tests.actors.harness import ALL, actors, chat
from tests.capability import signed
from tests.fakes.llm_servers import FakeLLM
from tests.fakes.web_network import PUBLIC_IP, LoopbackNetwork, PublicSite

SettingsFor = Callable[..., Settings]
SECRET = "planted-s3cret-Value-98765"


@pytest.fixture
async def site() -> AsyncIterator[PublicSite]:
    s = await PublicSite(secret=SECRET).start()
    yield s
    await s.stop()


@pytest.fixture
def net(site: PublicSite, monkeypatch: pytest.MonkeyPatch) -> LoopbackNetwork:
    names = {"public.test": [PUBLIC_IP], "api.public.test": [PUBLIC_IP]}
    network = LoopbackNetwork(names, {PUBLIC_IP: site.port})
    monkeypatch.setattr(web, "NETWORK", network)
    return network


def context(settings: Settings, bus: Bus, redactor: Redactor | None = None) -> ToolContext:
    return ToolContext(settings, bus, DirectSandbox(), redactor or Redactor(), {})


def call(name: str, n: int = 0, owner: bool = True, **arguments: object) -> ToolRequest:
    return signed(ToolRequest(id=f"t:tool:{n}:0", session="s", turn_id="t", step=n,
                              call_id=f"c{n}", name=name, arguments=dict(arguments),
                              is_owner=owner))


def tool_call(name: str, **arguments: object) -> str:
    """What the scripted model turns into a tool call."""
    return f"tool:{name} {json.dumps(arguments)}"


async def stored_bytes(bus: Bus) -> bytes:
    """Every message of this test's streams and KV buckets, concatenated."""
    # Named from our own Subjects: listing every stream of the shared test server pages.
    ours = [spec.name for spec in bus.subjects.streams()]
    ours += [f"KV_{bucket.name}" for bucket in bus.subjects.buckets()]
    out = bytearray()
    for stream in ours:
        info = await bus.js.stream_info(stream)
        for seq in range(info.state.first_seq, info.state.last_seq + 1):
            try:
                out += (await bus.js.get_msg(stream, seq)).data or b""
            except Exception:  # noqa: BLE001 - deleted or expired sequence numbers
                continue
    return bytes(out)


async def test_text_mode_formats_json_truncates_and_describes_binary(
    settings_for: SettingsFor, bus: Bus, net: LoopbackNetwork,
) -> None:
    ctx = context(settings_for(WM__EGRESS__MAX_FETCH_BYTES="1000"), bus)
    tool = web.WebFetch()
    big = await tool.run(call("web_fetch", url="http://public.test/big?n=5000"), ctx)
    assert big.ok and "cut at 1000 bytes" in big.output and "a" * 1000 in big.output
    assert "a" * 1001 not in big.output
    binary = await tool.run(call("web_fetch", url="http://public.test/binary"), ctx)
    assert "binary content (application/zip)" in binary.output and "save_to" in binary.output
    raw = await tool.run(call("web_fetch", url="http://public.test/page", raw=True), ctx)
    assert "<h1>Greetings</h1>" in raw.output
    missing = await tool.run(call("web_fetch", url="http://public.test/nope"), ctx)
    assert not missing.ok and "HTTP 404" in missing.output


async def test_save_to_downloads_and_large_files_need_approval(
    settings_for: SettingsFor, bus: Bus, net: LoopbackNetwork,
) -> None:
    settings = settings_for(WM__EGRESS__APPROVE_DOWNLOAD_BYTES="10000",
                            WM__EGRESS__MAX_DOWNLOAD_BYTES="50000")
    ctx = context(settings, bus)
    ctx.workspace.mkdir(parents=True, exist_ok=True)
    tool = web.WebFetch()
    saved = await tool.run(call("web_fetch", url="http://public.test/binary",
                                save_to="/workspace/dl/x.zip"), ctx)
    assert saved.ok and "saved 2048 bytes to workspace/dl/x.zip" in saved.output
    assert (ctx.workspace / "dl" / "x.zip").read_bytes() == bytes(range(256)) * 8
    url = "http://public.test/big?n=20000"
    small = call("web_fetch", url=url, save_to="big.txt")
    refused = await tool.run(small, ctx)
    assert not refused.ok and "large=true" in refused.output
    assert not (ctx.workspace / "big.txt").exists() and not list(ctx.workspace.glob(".*part"))
    large = call("web_fetch", url=url, save_to="big.txt", large=True)
    assert "larger than" in await tool.approval_reason(large, ctx)
    assert await tool.approval_reason(small, ctx) == ""
    assert (await tool.run(large, ctx)).ok  # what runs once the owner approved it
    assert (ctx.workspace / "big.txt").stat().st_size == 20000
    over = call("web_fetch", url="http://public.test/big?n=60000", save_to="huge.txt", large=True)
    assert "over the download limit" in (await tool.run(over, ctx)).output


async def test_rate_limits_refuse_past_the_limit(
    settings_for: SettingsFor, bus: Bus, net: LoopbackNetwork,
) -> None:
    ctx = context(settings_for(WM__EGRESS__FETCH_RATE_LIMIT="2",
                               WM__EGRESS__ALLOWED_DOMAINS='["api.public.test"]',
                               WM__EGRESS__REQUEST_RATE_LIMIT="1"), bus)
    fetch = web.WebFetch()
    outs = [await fetch.run(call("web_fetch", url="http://public.test/page"), ctx)
            for _ in range(3)]
    assert [o.ok for o in outs] == [True, True, False]
    assert "limited to 2 calls a minute" in outs[2].output
    assert outs[2].refused  # a policy refusal: Flatline does not count it as a failure
    post = web_request.WebRequest()
    first = await post.run(call("web_request", url="http://api.public.test/echo",
                                method="POST", body="x"), ctx)
    second = await post.run(call("web_request", url="http://api.public.test/echo",
                                 method="POST", body="x"), ctx)
    assert first.ok and not second.ok and "limited to 1 calls" in second.output


async def test_web_request_to_allowlisted_domain_sends_the_body(
    settings_for: SettingsFor, bus: Bus, net: LoopbackNetwork, site: PublicSite,
) -> None:
    ctx = context(settings_for(WM__EGRESS__ALLOWED_DOMAINS='["*.public.test"]'), bus)
    tool = web_request.WebRequest()
    req = call("web_request", url="http://api.public.test/echo", method="PUT",
               json={"n": 1}, headers={"X-Test": "yes", "Host": "elsewhere.example"})
    assert await tool.approval_reason(req, ctx) == ""
    out = await tool.run(req, ctx)
    assert out.ok and "HTTP 201" in out.output and '"method": "PUT"' in out.output
    sent = site.requests[-1]
    assert sent["body"] == '{"n":1}' and sent["headers"]["X-Test"] == "yes"
    assert sent["headers"]["Host"] == "api.public.test"  # a Host header cannot be smuggled
    get = await tool.run(call("web_request", url="http://api.public.test/echo", method="GET"), ctx)
    assert not get.ok and "web_fetch" in get.output
    redirect = await tool.run(call("web_request", url="http://api.public.test/redirect?to=/x",
                                   method="POST"), ctx)
    assert "not followed" in redirect.output or "405" in redirect.output
    private = await tool.run(call("web_request", url="http://127.0.0.1:9/echo", method="POST"), ctx)
    assert not private.ok and "Refused" in private.output and private.refused
    assert all(host == PUBLIC_IP for host, _ in net.attempts)


async def test_always_approve_and_blocked_domains(
    settings_for: SettingsFor, bus: Bus, net: LoopbackNetwork,
) -> None:
    ctx = context(settings_for(WM__EGRESS__ALLOWED_DOMAINS='["api.public.test"]',
                               WM__EGRESS__ALWAYS_APPROVE_DOMAINS='["api.public.test"]'), bus)
    tool = web_request.WebRequest()
    req = call("web_request", url="http://api.public.test/echo", method="POST")
    assert "always_approve" in await tool.approval_reason(req, ctx)
    assert (await tool.run(req, ctx)).ok
    assert await TrustLedger(bus).domains() == []  # approved once, never trusted for good
    ctx = context(settings_for(WM__EGRESS__BLOCKED_DOMAINS='["public.test"]'), bus)
    assert await tool.approval_reason(req, ctx) == ""
    blocked = await tool.run(req, ctx)
    assert not blocked.ok and "blocked" in blocked.output


async def test_new_domain_asks_the_owner_then_is_trusted(
    fake: FakeLLM, settings_for: SettingsFor, net: LoopbackNetwork, site: PublicSite,
) -> None:
    settings = settings_for(WM__MODELS__DEFAULT="openai/test-model", WM__EXECUTOR__MODE="direct")
    req = tool_call("web_request", url="http://api.public.test/echo", method="POST",
                    json={"hello": "world"})
    async with actors(settings, *ALL) as running, chat(settings) as c:
        first = await c.ask(req)
        assert "Waiting for the owner's approval" in first and site.requests == []
        prompt = await c.next(("approval",))
        assert "api.public.test" in prompt.text and "trusted" in prompt.text
        await c.say(f"/approve {prompt.ref}")
        done = await c.next(("reply",))
        assert "HTTP 201" in done.text and "world" in done.text
        bus = running.procs["executor"][2]
        assert await TrustLedger(bus).domains() == ["api.public.test"]
        again = await c.ask(req)  # trusted now: runs without asking
        assert "HTTP 201" in again and "Waiting" not in again
    assert len(site.requests) == 2 and site.requests[0]["body"] == '{"hello":"world"}'


async def test_secrets_never_reach_output_jetstream_or_the_model(
    fake: FakeLLM, settings_for: SettingsFor, net: LoopbackNetwork, home: Path,
) -> None:
    (home / ".env").write_text(f"MY_API_TOKEN={SECRET}\n")
    settings = settings_for(WM__MODELS__DEFAULT="openai/test-model", WM__EXECUTOR__MODE="direct")
    async with actors(settings, *ALL) as running, chat(settings) as c:
        reply = await c.ask(tool_call("web_fetch", url="http://public.test/secret"))
        assert "token=[REDACTED]" in reply and "[REDACTED:anthropic-key]" in reply
        bus = running.procs["executor"][2]
        await asyncio.sleep(0)
        stored = await stored_bytes(bus)
    assert SECRET not in reply and "sk-ant-api03" not in reply
    assert b"token=[REDACTED]" in stored  # the check below looked at the right history
    assert SECRET.encode() not in stored and b"sk-ant-api03-Zx9" not in stored
    requests = json.dumps(fake.requests)
    assert SECRET not in requests and "sk-ant-api03-Zx9" not in requests


async def test_save_to_never_follows_a_link_planted_in_the_workspace(
    settings_for: SettingsFor, bus: Bus, net: LoopbackNetwork,
) -> None:
    """A sandboxed command planted links to config.toml and to the home folder; web_fetch
    save_to overwrites neither (sandbox → host, issue 16)."""
    settings = settings_for()
    ctx = context(settings, bus)
    config = settings.home / "config.toml"
    before = config.read_bytes()
    (ctx.workspace / "notes.txt").symlink_to(config)
    (ctx.workspace / ".fresh.bin.part").symlink_to(config)  # the old fixed temp name
    (ctx.workspace / "home").symlink_to(settings.home)
    tool = web.WebFetch()
    url = "http://public.test/binary"
    over_link = await tool.run(call("web_fetch", url=url, save_to="notes.txt"), ctx)
    assert over_link.ok and not (ctx.workspace / "notes.txt").is_symlink()
    fresh = await tool.run(call("web_fetch", url=url, save_to="fresh.bin"), ctx)
    assert fresh.ok and (ctx.workspace / "fresh.bin").stat().st_size == 2048
    through_dir = await tool.run(call("web_fetch", url=url, save_to="home/config.toml"), ctx)
    assert not through_dir.ok and "symbolic link" in through_dir.output
    assert config.read_bytes() == before
