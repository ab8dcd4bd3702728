"""The sandbox egress proxy: allowlist, package registries, SSRF refusals, both HTTP forms."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from actors.executor.egress_proxy import EgressProxy, Refused
from tests.fakes.egress import PUBLIC_IP, LoopbackDialer, Origin

NAMES = {
    "allowed.example": [PUBLIC_IP],
    "api.wild.example": [PUBLIC_IP],
    "sneaky.example": ["127.0.0.1"],
    "metadata.example": [PUBLIC_IP, "169.254.169.254"],
    "evil.example": [PUBLIC_IP],
}
ALLOWED = ["allowed.example", "*.wild.example", "sneaky.example", "metadata.example"]


@pytest.fixture
async def proxy(origin: Origin) -> AsyncIterator[tuple[EgressProxy, int, LoopbackDialer]]:
    dialer = LoopbackDialer(NAMES, origin)
    p = EgressProxy(ALLOWED, blocked_domains=["blocked.wild.example"], ports=[80, 443, 8080],
                    dialer=dialer)
    port = await p.start_tcp()
    yield p, port, dialer
    await p.close()


async def exchange(port: int, *messages: bytes) -> bytes:
    """Send each message (waiting for the proxy's answer between them); return all replies."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    replies = b""
    try:
        async with asyncio.timeout(20):
            for i, message in enumerate(messages):
                writer.write(message)
                await writer.drain()
                if i < len(messages) - 1:
                    replies += await reader.readuntil(b"\r\n\r\n")
            replies += await reader.read()
    finally:
        writer.close()
    return replies


def get(url: str, host: str) -> bytes:
    return f"GET {url} HTTP/1.1\r\nHost: {host}\r\nProxy-Connection: keep-alive\r\n\r\n".encode()


async def test_allowlisted_name_passes_over_plain_http_and_connect(proxy, origin: Origin) -> None:
    p, port, dialer = proxy
    reply = await exchange(port, get("http://allowed.example/x?y=1", "allowed.example"))
    assert reply.startswith(b"HTTP/1.1 200") and b"hello from allowed.example" in reply
    reply = await exchange(
        port, b"CONNECT api.wild.example:443 HTTP/1.1\r\nHost: api.wild.example:443\r\n\r\n",
        get("/", "api.wild.example"),
    )
    assert reply.startswith(b"HTTP/1.1 200 Connection established")
    assert b"hello from api.wild.example" in reply
    assert origin.hits == 2 and dialer.dialled == [(PUBLIC_IP, 80), (PUBLIC_IP, 443)]


@pytest.mark.parametrize(("request_bytes", "words"), [
    (get("http://evil.example/", "evil.example"), b"not in [egress] allowed_domains"),
    (b"CONNECT evil.example:443 HTTP/1.1\r\n\r\n", b"not in [egress] allowed_domains"),
    (b"CONNECT wild.example:443 HTTP/1.1\r\n\r\n", b"not in [egress] allowed_domains"),
    (b"CONNECT blocked.wild.example:443 HTTP/1.1\r\n\r\n", b"egress.blocked_domains"),
    (b"CONNECT allowed.example:22 HTTP/1.1\r\n\r\n", b"only ports 80, 443, 8080"),
    (b"CONNECT sneaky.example:443 HTTP/1.1\r\n\r\n", b"127.0.0.1, which is loopback"),
    (get("http://metadata.example/", "metadata.example"), b"169.254.169.254, which is link-local"),
    (b"CONNECT 127.0.0.1:443 HTTP/1.1\r\n\r\n", b"not in [egress] allowed_domains"),
])
async def test_refusals_are_403_sentences_and_nothing_is_dialled(
    proxy, origin: Origin, request_bytes: bytes, words: bytes
) -> None:
    p, port, dialer = proxy
    reply = await exchange(port, request_bytes)
    assert reply.startswith(b"HTTP/1.1 403 Forbidden") and words in reply
    assert origin.hits == 0 and dialer.dialled == [] and p.refused == 1


def test_package_registries_are_always_allowed_unless_turned_off() -> None:
    assert EgressProxy([]).check_host("PyPI.org.", 443) == "pypi.org"
    assert "plus package registries" in EgressProxy(["a.example"]).describe()
    with pytest.raises(Refused):
        EgressProxy([], registries=False).check_host("pypi.org", 443)
