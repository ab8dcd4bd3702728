"""A network for the web tools' tests that never leaves loopback.

Names resolve from a table (no DNS query is ever made), chosen "public" addresses are routed to
loopback test servers, and every connection attempt is recorded, so a test can assert that a
refused address was never even dialled. Anything else that is not loopback is not connected.
"""

from __future__ import annotations

import asyncio
import ipaddress
from typing import Any

import httpcore

from actors.executor.ssrf import EgressError, Network

PUBLIC_IP = "93.184.216.34"  # stands for a public web server; routed to a loopback port
PUBLIC_IP_2 = "93.184.216.35"


class LoopbackNetwork(Network):
    """Resolves from `names`, routes `routes` (public address -> loopback port), records dials."""

    def __init__(self, names: dict[str, list[str]], routes: dict[str, int]) -> None:
        self.names = names
        self.routes = routes
        self.attempts: list[tuple[str, int]] = []
        self.lookups: list[str] = []

    async def resolve(self, host: str, port: int) -> list[str]:
        self.lookups.append(host)
        if host not in self.names:
            raise EgressError(f"The host {host!r} could not be resolved (test network).")
        return list(self.names[host])

    def backend(self) -> httpcore.AsyncNetworkBackend:
        inner = httpcore.AnyIOBackend()
        net = self

        class Recording(httpcore.AsyncNetworkBackend):
            async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                                  local_address: str | None = None,
                                  socket_options: Any = None) -> httpcore.AsyncNetworkStream:
                net.attempts.append((host, port))
                if host in net.routes:
                    return await inner.connect_tcp("127.0.0.1", net.routes[host], timeout=timeout)
                if ipaddress.ip_address(host).is_loopback:
                    # Only reachable if the filter failed; the canary listener then sees it.
                    return await inner.connect_tcp(host, port, timeout=timeout)
                raise httpcore.ConnectError(f"the test network does not leave loopback ({host})")

            async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                          socket_options: Any = None) -> Any:
                raise httpcore.ConnectError("no unix sockets")

            async def sleep(self, seconds: float) -> None:
                await asyncio.sleep(seconds)

        return Recording()


class Canary:
    """A loopback TCP listener that counts connections: it must never be reached."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self.connections = 0
        self.port = 0
        self._server: asyncio.Server | None = None

    async def start(self) -> Canary:
        async def on_conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.connections += 1
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 6\r\n\r\ncanary")
            await writer.drain()
            writer.close()

        self._server = await asyncio.start_server(on_conn, self.host, 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()


class PublicSite:
    """A loopback HTTP server standing in for a public web site (and a write API)."""

    def __init__(self, secret: str = "") -> None:
        self.secret = secret
        self.requests: list[dict[str, Any]] = []
        self.port = 0
        self._runner: Any = None

    async def start(self) -> PublicSite:
        from aiohttp import web

        async def page(request: web.Request) -> web.Response:
            html = ("<html><head><title>Hello page</title><style>p{}</style></head><body>"
                    "<script>var hidden = 1;</script><h1>Greetings</h1><p>Some "
                    "<a href='https://example.org/x'>linked</a> text.</p></body></html>")
            return web.Response(text=html, content_type="text/html")

        async def redirect(request: web.Request) -> web.Response:
            raise web.HTTPFound(request.query["to"])

        async def secret(request: web.Request) -> web.Response:
            return web.Response(text=f"token={self.secret} key=sk-ant-api03-{'Zx9' * 12}")

        async def big(request: web.Request) -> web.Response:
            return web.Response(body=b"a" * int(request.query.get("n", "300000")),
                                content_type="text/plain")

        async def binary(request: web.Request) -> web.Response:
            return web.Response(body=bytes(range(256)) * 8, content_type="application/zip")

        async def echo(request: web.Request) -> web.Response:
            body = await request.text()
            self.requests.append({"method": request.method, "path": request.path, "body": body,
                                  "headers": dict(request.headers)})
            return web.json_response({"method": request.method, "got": body}, status=201)

        app = web.Application()
        app.router.add_get("/page", page)
        app.router.add_get("/redirect", redirect)
        app.router.add_get("/secret", secret)
        app.router.add_get("/big", big)
        app.router.add_get("/binary", binary)
        app.router.add_route("*", "/echo", echo)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
