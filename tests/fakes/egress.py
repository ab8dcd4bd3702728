"""The outside world for egress-proxy tests: made-up public names served from loopback."""

from __future__ import annotations

import asyncio

from actors.executor.egress_proxy import Dialer, Refused, Streams

PUBLIC_IP = "93.184.216.34"  # stands for a public web server; routed to a loopback origin


class Origin:
    """A loopback HTTP server answering every request with its Host header, counting hits."""

    def __init__(self) -> None:
        self.port = 0
        self.hits = 0
        self._server: asyncio.Server | None = None

    async def start(self) -> Origin:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.hits += 1
            head = await reader.readuntil(b"\r\n\r\n")
            host = next((ln.split(":", 1)[1].strip() for ln in head.decode().split("\r\n")
                         if ln.lower().startswith("host:")), "?")
            body = f"hello from {host}\n".encode()
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
                         % len(body) + body)
            await writer.drain()
            writer.close()

        self._server = await asyncio.start_server(serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()


class LoopbackDialer(Dialer):
    """Resolves names from a table; PUBLIC_IP leads to the origin, nothing else is dialled."""

    def __init__(self, names: dict[str, list[str]], origin: Origin) -> None:
        self.names = names
        self.origin = origin
        self.dialled: list[tuple[str, int]] = []

    async def resolve(self, host: str, port: int) -> list[str]:
        if host not in self.names:
            raise Refused(f"The egress proxy could not resolve {host} (test network).", 502)
        return list(self.names[host])

    async def connect(self, ip: str, port: int) -> Streams:
        self.dialled.append((ip, port))
        if ip != PUBLIC_IP:
            raise OSError(f"the test network does not route {ip}")
        return await asyncio.open_connection("127.0.0.1", self.origin.port)
