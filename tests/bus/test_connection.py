"""Connecting to NATS on a bad day: a slow server is waited for, a failure names its cause."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import AsyncIterator
from urllib.parse import urlparse

import pytest

from bus import Bus
from bus._connect import FIRST_TIMEOUT, AdaptiveTimeout


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class SlowProxy:
    """A TCP proxy to a real nats-server whose first answer on every connection comes late:
    a server busy enough that each handshake takes `delay` seconds."""

    def __init__(self, target: str, delay: float) -> None:
        url = urlparse(target)
        self.host, self.port = url.hostname or "127.0.0.1", url.port or 4222
        self.delay = delay
        self.accepted = 0
        self.server: asyncio.Server | None = None
        self.clients: list[asyncio.StreamWriter] = []

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return f"nats://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        self.clients.append(writer)
        up_reader, up_writer = await asyncio.open_connection(self.host, self.port)
        await asyncio.sleep(self.delay)  # the server "thinks" before its INFO
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer),
                             return_exceptions=True)

    @staticmethod
    async def _pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        try:
            while data := await src.read(65536):
                dst.write(data)
                await dst.drain()
        finally:
            with contextlib.suppress(Exception):
                dst.close()

    def drop_all(self) -> None:
        """Cut every client connection (the server "restarted")."""
        for writer in self.clients:
            writer.close()
        self.clients.clear()

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()


@pytest.fixture
async def slow(nats_url: str) -> AsyncIterator[SlowProxy]:
    proxy = SlowProxy(nats_url, delay=FIRST_TIMEOUT * 1.5)
    yield proxy
    await proxy.stop()


async def test_a_server_slower_than_the_first_timeout_is_waited_for(slow: SlowProxy) -> None:
    url = await slow.start()
    bus = await Bus(url).connect(timeout=60)
    try:
        await bus.nc.flush(timeout=10)
        # One handshake timed out at FIRST_TIMEOUT; the next waited twice as long and won.
        # With a fixed 2 s every attempt would time out, forever.
        assert slow.accepted <= 3
    finally:
        await bus.close()


async def test_a_reconnection_to_a_slow_server_converges(nats_url: str) -> None:
    proxy = SlowProxy(nats_url, delay=0)
    url = await proxy.start()
    bus = await Bus(url).connect(timeout=30)
    try:
        before = bus.nc.stats["reconnects"]
        proxy.delay = FIRST_TIMEOUT * 1.5  # busy now: every handshake outlasts the first timeout
        proxy.drop_all()
        # With a fixed handshake timeout this never reconnects; growing, the second try does.
        async with asyncio.timeout(60):
            while True:  # Bus owns the client's reconnect callback: watch its counter
                if bus.nc.stats["reconnects"] > before:
                    break
                await asyncio.sleep(0.1)
            await bus.nc.flush(timeout=10)
    finally:
        await bus.close()
        await proxy.stop()


async def test_nothing_listening_says_so() -> None:
    port = free_port()
    with pytest.raises(ConnectionError) as err:
        await Bus(f"nats://127.0.0.1:{port}").connect(timeout=2)
    text = str(err.value)
    assert f"cannot reach NATS at nats://127.0.0.1:{port}: connection refused" in text
    assert "wintermute up" in text


async def test_a_hung_server_is_named_as_such() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # accepts, never says INFO (a SIGSTOPped server)

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        with pytest.raises(ConnectionError) as err:
            await Bus(f"nats://127.0.0.1:{port}").connect(timeout=3)
        assert "no answer in 3s" in str(err.value)
        assert not str(err.value).rstrip().endswith(":")
    finally:
        server.close()


async def test_a_handshake_cut_off_again_and_again_is_a_refusal_said_at_once() -> None:
    """What a refused credential looks like on a busy machine: the server's -ERR is lost to
    the TCP reset of its close (the client's PING still unread there). Three in a row with
    credentials end the wait with the likely cause, not after the whole timeout."""
    attempts = 0

    async def refusing(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal attempts
        attempts += 1
        writer.write(b'INFO {"server_id":"x","version":"2.10.0","proto":1,'
                     b'"max_payload":1048576,"auth_required":true}\r\n')
        await writer.drain()
        await reader.readline()  # CONNECT, with the credentials
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()  # closed with unread input: a reset, as nats-server's is

    server = await asyncio.start_server(refusing, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        with pytest.raises(ConnectionError) as err:
            await Bus(f"nats://127.0.0.1:{port}").connect(timeout=120, user="u", password="p")
        assert "most likely an authorization violation" in str(err.value), str(err.value)
        assert attempts <= 3  # not ~200 tries over the whole 120 s
    finally:
        server.close()


def test_the_handshake_timeout_grows_only_on_timeouts() -> None:
    pace = AdaptiveTimeout()
    pace.failed(ConnectionRefusedError())
    assert pace.current == FIRST_TIMEOUT
    for _ in range(10):
        pace.failed(TimeoutError())
    assert FIRST_TIMEOUT < pace.current <= 30
    pace.connected()
    assert pace.current == FIRST_TIMEOUT
