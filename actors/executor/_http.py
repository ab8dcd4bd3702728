"""One HTTP exchange to an address the SSRF filter pinned, with redirects followed by hand."""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urljoin

from actors.executor.ssrf import EgressError, Network, Target, check_url, pinned_backend

REDIRECTS = frozenset({301, 302, 303, 307, 308})
USER_AGENT = "Wintermute/0.1 (personal agent; web tools)"
T = TypeVar("T")


@dataclass(frozen=True)
class Head:
    """Status line and headers of a response (header names lower case, the last one wins)."""

    status: int
    reason: str
    url: str
    headers: dict[str, str]

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "")


def _timeouts(total: float) -> dict[str, float]:
    return {"connect": min(total, 10.0), "read": total, "write": total, "pool": total}


@contextlib.asynccontextmanager
async def exchange(
    network: Network, target: Target, method: str, headers: Sequence[tuple[str, str]],
    content: bytes | None, timeout: float,
) -> AsyncIterator[tuple[Head, AsyncIterator[bytes]]]:
    """Send one request to target's pinned address; yield the head and the body stream."""
    import httpcore

    base = [("User-Agent", USER_AGENT), ("Accept-Encoding", "identity")]
    names = {k.lower() for k, _ in headers}
    all_headers = [h for h in base if h[0].lower() not in names] + list(headers)
    pool = httpcore.AsyncConnectionPool(
        network_backend=pinned_backend(target, network.backend()), max_connections=1, retries=0
    )
    try:
        async with pool, pool.stream(
            method, target.url, headers=all_headers, content=content,
            extensions={"timeout": _timeouts(timeout)},
        ) as resp:
            fields = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in resp.headers}
            reason = resp.extensions.get("reason_phrase", b"")
            head = Head(resp.status, reason.decode("latin-1", "replace"), target.url, fields)
            yield head, resp.aiter_stream()
    except httpcore.TimeoutException:
        raise EgressError(f"{target.host} did not answer in time ({timeout:g}s).") from None
    except httpcore.ConnectError as exc:
        raise EgressError(f"Could not connect to {target.host}: {exc or 'refused'}.") from None
    except (httpcore.ProtocolError, httpcore.NetworkError) as exc:
        raise EgressError(f"The connection to {target.host} failed: {exc or 'closed'}.") from None


async def follow(
    url: str, network: Network, *, blocked_domains: Sequence[str], max_hops: int,
    timeout: float, headers: Sequence[tuple[str, str]] = (),
    consume: Callable[[Head, AsyncIterator[bytes]], Awaitable[T]],
) -> T:
    """GET url, following redirects by hand; every hop is resolved and checked again."""
    for _ in range(max_hops + 1):
        target = await check_url(url, network, list(blocked_domains))
        async with exchange(network, target, "GET", headers, None, timeout) as (head, body):
            location = head.headers.get("location", "")
            if head.status in REDIRECTS and location:
                url = urljoin(target.url, location.strip())
                continue
            return await consume(head, body)
    raise EgressError(f"Gave up after {max_hops} redirects; the last one pointed to {url}.")


@dataclass
class Body:
    """A body read up to a byte limit (decompressed if the server compressed it anyway)."""

    data: bytes
    truncated: bool


async def read_capped(head: Head, chunks: AsyncIterator[bytes], limit: int) -> Body:
    """Read at most `limit` bytes of the body, stopping early rather than buffering the rest."""
    encoding = head.headers.get("content-encoding", "").strip().lower()
    inflate: Any = zlib.decompressobj(47) if encoding in ("gzip", "deflate", "x-gzip") else None
    out = bytearray()
    async for chunk in chunks:
        if inflate is not None:
            chunk = inflate.decompress(chunk, limit + 1 - len(out))
        out += chunk
        if len(out) > limit:
            return Body(bytes(out[:limit]), True)
    return Body(bytes(out), False)
