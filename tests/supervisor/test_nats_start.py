"""An embedded nats-server that cannot start says why (its own last words), never just "failed"."""

from __future__ import annotations

import asyncio
import json
import socket
import urllib.request
from pathlib import Path

import pytest

from contracts.config import ConfigError, load_settings
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


async def test_the_monitoring_port_serves_the_servers_counters_on_loopback_only(
    tmp_path: Path,
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = EmbeddedNats(tmp_path / "js", monitor_port=port)
    await server.start()
    try:
        def varz() -> dict[str, object]:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/varz", timeout=30) as resp:
                return dict(json.load(resp))

        info = await asyncio.to_thread(varz)
        assert info["http_host"] == "127.0.0.1" and info["http_port"] == port
        assert "in_msgs" in info
    finally:
        await server.stop()


def test_a_monitoring_port_out_of_range_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="monitor_port must be a TCP port"):
        load_settings(tmp_path, {"WM__NATS__MONITOR_PORT": "70000"})
