"""An embedded nats-server that cannot start says why (its own last words), never just "failed"."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from supervisor.process.natsserver import EmbeddedNats


async def test_a_port_in_use_is_named_as_the_cause(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = EmbeddedNats(tmp_path / "js", port, tmp_path / "nats.log")
        with pytest.raises(RuntimeError) as info:
            await server.start()
    text = str(info.value)
    assert text.startswith("nats-server exited early (code ")
    assert "address already in use" in text and "[ERR]" not in text
