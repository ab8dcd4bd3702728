"""The SSRF corpus: every URL here is refused by web_fetch before any connection is attempted."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from actors.executor import web
from actors.executor.base import ToolContext
from actors.executor.sandbox import DirectSandbox
from actors.executor.ssrf import EgressError, blocked_reason, ipv4_literal
from bus import Bus
from contracts import ToolRequest
from kit.redact import Redactor
from tests.capability import signed
from tests.fakes.web_network import PUBLIC_IP, Canary, LoopbackNetwork, PublicSite


def _has_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.fixture
async def canary() -> AsyncIterator[Canary]:
    c = await Canary().start()
    yield c
    await c.stop()


@pytest.fixture
async def canary6() -> AsyncIterator[Canary | None]:
    if not _has_ipv6_loopback():
        yield None
        return
    c = await Canary("::1").start()
    yield c
    await c.stop()


@pytest.fixture
async def site() -> AsyncIterator[PublicSite]:
    s = await PublicSite().start()
    yield s
    await s.stop()


@pytest.fixture
def net(site: PublicSite, monkeypatch: pytest.MonkeyPatch) -> LoopbackNetwork:
    names = {
        "public.test": [PUBLIC_IP],
        "internal.test": ["10.1.2.3"],
        "metadata.test": ["169.254.169.254"],
        "mixed.test": [PUBLIC_IP, "127.0.0.1"],  # one bad answer refuses the whole host
        "v6local.test": ["::1"],
        "mapped.test": ["::ffff:169.254.169.254"],
        "cgnat.test": ["100.100.1.1"],
        "ula.test": ["fd12:3456::1"],
    }
    network = LoopbackNetwork(names, {PUBLIC_IP: site.port})
    monkeypatch.setattr(web, "NETWORK", network)
    return network


@pytest.fixture
def ctx(settings_for, bus: Bus) -> ToolContext:  # type: ignore[no-untyped-def]
    settings = settings_for(WM__EGRESS__FETCH_RATE_LIMIT="1000")
    return ToolContext(settings, bus, DirectSandbox(), Redactor(), {})


def call(url: str, **more: object) -> ToolRequest:
    return signed(ToolRequest(id="t:tool:0:0", session="s", turn_id="t", step=0, call_id="c",
                              name="web_fetch", arguments={"url": url, **more}, is_owner=True))


def corpus(port: int) -> list[str]:
    """Loopback, private, metadata, CGNAT, ULA, mapped, odd encodings, names resolving inward."""
    return [
        f"http://127.0.0.1:{port}/", f"http://localhost:{port}/", f"http://foo.localhost:{port}/",
        f"http://127.1:{port}/", f"http://2130706433:{port}/", f"http://0x7f000001:{port}/",
        f"http://0177.0.0.1:{port}/", f"http://0x7f.0.0.1:{port}/", f"http://017700000001:{port}/",
        f"http://127.000.000.001:{port}/", f"http://127.0.0.1.:{port}/",
        f"http://0.0.0.0:{port}/", f"http://0:{port}/",
        f"http://[::1]:{port}/", f"http://[::]:{port}/", f"http://[::ffff:127.0.0.1]:{port}/",
        f"http://[::ffff:7f00:1]:{port}/", f"http://[0:0:0:0:0:ffff:127.0.0.1]:{port}/",
        f"http://[::127.0.0.1]:{port}/",
        "http://10.0.0.1/", "http://172.16.5.4/", "http://192.168.1.1/",
        "http://169.254.169.254/latest/meta-data/", "http://2852039166/latest/meta-data/",
        "http://[fd00:ec2::254]/latest/meta-data/", "http://[fe80::1]/", "http://100.64.0.1/",
        "http://[64:ff9b::a9fe:a9fe]/", "http://[2002:a9fe:a9fe::]/", "http://224.0.0.1/",
        "http://255.255.255.255/", "http://198.18.0.1/", "http://[fe80::1%25eth0]/",
        "http://internal.test/", "http://metadata.test/", "http://mixed.test/",
        "http://v6local.test/", "http://mapped.test/", "http://cgnat.test/", "http://ula.test/",
        f"http://public.test@127.0.0.1:{port}/", "http://256.0.0.1/", "http://1.2.3.4.5/",
        "http://0x7g.0.0.1/", "http://08.0.0.1/",
        "file:///etc/passwd", "gopher://127.0.0.1:70/", "ftp://10.0.0.1/",
    ]


async def test_corpus_is_refused_before_any_connection(
    ctx: ToolContext, net: LoopbackNetwork, canary: Canary, canary6: Canary | None,
    site: PublicSite,
) -> None:
    tool = web.WebFetch()
    for url in corpus(canary.port):
        out = await tool.run(call(url), ctx)
        assert not out.ok, url
        assert "canary" not in out.output, url
    if canary6 is not None:
        for url in (f"http://[::1]:{canary6.port}/", f"http://v6local.test:{canary6.port}/"):
            assert not (await tool.run(call(url), ctx)).ok
        assert canary6.connections == 0
    assert canary.connections == 0
    assert net.attempts == []  # nothing was even dialled
    assert site.requests == []


async def test_redirects_into_private_space_are_refused_at_the_hop(
    ctx: ToolContext, net: LoopbackNetwork, canary: Canary,
) -> None:
    tool = web.WebFetch()
    targets = [f"http://127.0.0.1:{canary.port}/", f"http://2130706433:{canary.port}/",
               f"http://[::ffff:127.0.0.1]:{canary.port}/", "http://169.254.169.254/",
               "http://internal.test/", f"http://localhost:{canary.port}/"]
    for target in targets:
        out = await tool.run(call(f"http://public.test/redirect?to={target}"), ctx)
        assert not out.ok and "Refused" in out.output, (target, out.output)
    assert canary.connections == 0
    assert {host for host, _ in net.attempts} == {PUBLIC_IP}  # only the public hops


async def test_public_pages_are_fetched_through_the_checked_address(
    ctx: ToolContext, net: LoopbackNetwork,
) -> None:
    tool = web.WebFetch()
    out = await tool.run(call("http://public.test/page"), ctx)
    assert out.ok, out.output
    assert "Title: Hello page" in out.output and "# Greetings" in out.output
    assert "hidden" not in out.output  # scripts are dropped
    via = await tool.run(call("http://public.test/redirect?to=/page"), ctx)
    assert via.ok and "Greetings" in via.output
    numeric = await tool.run(call(f"http://{int(ipaddress.ip_address(PUBLIC_IP))}/page"), ctx)
    assert numeric.ok and "Greetings" in numeric.output  # a public address in decimal is fine
    assert net.lookups.count("public.test") == 3  # resolved once per hop, never re-resolved
    assert set(net.attempts) == {(PUBLIC_IP, 80)}


def test_blocked_reason_covers_every_range() -> None:
    bad = ["127.0.0.1", "10.9.8.7", "172.31.255.255", "192.168.0.1", "169.254.169.254",
           "100.64.0.1", "0.0.0.0", "224.0.0.251", "240.0.0.1", "::1", "::", "fc00::1",
           "fe80::1", "::ffff:10.0.0.1", "64:ff9b::7f00:1", "2002:7f00:1::", "2001:db8::1",
           "ff02::1", "::7f00:1"]
    for text in bad:
        assert blocked_reason(ipaddress.ip_address(text)), text
    for text in ["93.184.216.34", "8.8.8.8", "2606:4700:4700::1111", "64:ff9b::808:808"]:
        assert blocked_reason(ipaddress.ip_address(text)) == "", text


def test_odd_ipv4_encodings_decode_like_browsers() -> None:
    loop = ipaddress.IPv4Address("127.0.0.1")
    for host in ("127.1", "2130706433", "0x7f000001", "0177.0.0.1", "0x7f.0.0.1", "127.0.1"):
        assert ipv4_literal(host) == loop, host
    assert ipv4_literal("example.com") is None
    for host in ("256.0.0.1", "1.2.3.4.5", "08.1.1.1", "0x7f.0.0.0x100"):
        with pytest.raises(EgressError):
            ipv4_literal(host)


async def test_blocked_domains_are_refused_with_their_subdomains(
    settings_for, bus: Bus, net: LoopbackNetwork,  # type: ignore[no-untyped-def]
) -> None:
    settings = settings_for(WM__EGRESS__BLOCKED_DOMAINS='["public.test"]')
    ctx = ToolContext(settings, bus, DirectSandbox(), Redactor(), {})
    out = await web.WebFetch().run(call("http://public.test/page"), ctx)
    assert not out.ok and "blocked" in out.output
    assert net.attempts == [] and net.lookups == []


def test_save_to_stays_inside_the_workspace(ctx: ToolContext, tmp_path: Path) -> None:
    ctx.workspace.mkdir(parents=True, exist_ok=True)
    (ctx.workspace / "out").symlink_to(tmp_path)
    for bad in ("../x", "/etc/passwd", "~/x", "a/../../x", ""):
        with pytest.raises(EgressError):
            web.workspace_path(ctx, bad)
    # A link inside the workspace ("out") is refused when the file is written (kit.safefs,
    # tested with web_fetch in test_web_tools.py), not by resolving it here.
    assert web.workspace_path(ctx, "/workspace/d/f.bin") == "d/f.bin"
