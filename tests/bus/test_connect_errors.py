"""A connection that fails says why, to the end of the sentence (never "...: " and nothing)."""

from __future__ import annotations

import asyncio
import socket

import pytest

from bus import Bus


async def test_a_server_that_never_answers_is_named_as_such() -> None:
    # Accepts the TCP connection and says nothing, like a nats-server starved of CPU.
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        with pytest.raises(ConnectionError) as info:
            await Bus(f"nats://127.0.0.1:{port}").connect(timeout=1.5)
    finally:
        server.close()
    text = str(info.value)
    assert text.startswith(f"cannot reach NATS at nats://127.0.0.1:{port}: ")
    assert "no answer within 1.5 s" in text and "overloaded" in text


async def test_a_refused_connection_says_refused() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ConnectionError) as info:
        await Bus(f"nats://127.0.0.1:{port}").connect(timeout=1)
    assert "refused" in str(info.value).lower() or "connect call failed" in str(info.value).lower()
