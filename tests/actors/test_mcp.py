"""MCP servers as tool sources, through the real executor, planner and scripted model.

The well-behaved server is `mcp-server-time` from PyPI (not ours); the misbehaving ones are
small programs written here: one that crashes mid-call (built on the SDK's own server), one that
answers the handshake with garbage, one that never answers.
"""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bus import Bus
from contracts.config import ConfigError, Settings
from contracts.records import ExecutorFacts
from tests.actors.harness import ALL, actors, chat
from tests.fakes.llm_servers import FakeLLM

SettingsFor = Callable[..., Settings]

CRASHY = textwrap.dedent('''
    import os, sys
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("crashy")

    @server.tool()
    def echo(text: str) -> str:
        """Echo the text back."""
        return "echoed " + text

    @server.tool()
    def die() -> str:
        """Exit in the middle of a call."""
        os._exit(3)

    server.run()
''')
GARBAGE = "import sys\nfor line in sys.stdin:\n    print('this is not json-rpc', flush=True)\n"
SILENT = "import sys, time\nsys.stdin.read()\ntime.sleep(3600)\n"


def servers(tmp: Path, **extra: dict[str, Any]) -> str:
    """WM__MCP__SERVERS for the time server plus the given ones (name -> entry)."""
    entries = [{"name": "time", "command": sys.executable, "args": ["-m", "mcp_server_time"],
                "timeout_secs": 20}]
    for name, entry in extra.items():
        entries.append({"name": name, "timeout_secs": 5, **entry})
    return json.dumps({"servers": entries})


def script(tmp: Path, name: str, text: str) -> dict[str, Any]:
    path = tmp / f"{name}.py"
    path.write_text(text)
    return {"command": sys.executable, "args": [str(path)]}


async def facts(bus: Bus) -> ExecutorFacts | None:
    return await bus.kv_get_as(bus.subjects.kv_state, "executor", ExecutorFacts)


async def wait_for(check: Any, timeout: float = 60) -> Any:
    async with asyncio.timeout(timeout):
        while True:
            value = await check()
            if value:
                return value
            await asyncio.sleep(0.2)


async def test_a_real_mcp_server_is_called_through_the_agent(
    fake: FakeLLM, settings_for: SettingsFor, bus: Bus, tmp_path: Path,
) -> None:
    settings = settings_for(WM__MODELS__DEFAULT="openai/test-model", WM__EXECUTOR__MODE="direct",
                            WM__MCP=servers(tmp_path))
    async with actors(settings, *ALL), chat(settings) as c:
        reply = await c.ask('tool:time__get_current_time {"timezone": "UTC"}', timeout=60)
        assert '"timezone": "UTC"' in reply and "datetime" in reply, reply
        bad = await c.ask('tool:time__get_current_time {"timezone": "Nowhere/Bad"}', timeout=60)
        assert "Invalid timezone" in bad
        offered = json.loads(await bus.kv_get(bus.subjects.kv_state, "tools") or b"[]")
        assert {"time__get_current_time", "time__convert_time"} <= {t["name"] for t in offered}
        meta = json.loads(await bus.kv_get(bus.subjects.kv_state, "tools.meta") or b"{}")
    stats = meta["time__get_current_time"]
    assert stats["invocations"] == 2 and stats["successes"] == 1, stats


async def test_broken_servers_are_reported_and_nothing_else_stops(
    fake: FakeLLM, settings_for: SettingsFor, bus: Bus, tmp_path: Path,
) -> None:
    settings = settings_for(
        WM__MODELS__DEFAULT="openai/test-model", WM__EXECUTOR__MODE="direct",
        WM__MCP=servers(tmp_path, crashy=script(tmp_path, "crashy", CRASHY),
                        garbage=script(tmp_path, "garbage", GARBAGE),
                        silent=script(tmp_path, "silent", SILENT)))
    async with actors(settings, *ALL), chat(settings) as c:
        async def reported() -> ExecutorFacts | None:
            f = await facts(bus)
            ok = f and all(f.mcp.get(n, {}).get("error") for n in ("garbage", "silent"))
            return f if ok and f.mcp.get("crashy", {}).get("state") == "ready" else None

        f = await wait_for(reported)
        assert f.mcp["time"]["state"] == "ready"
        assert f.mcp["garbage"]["state"] == "restarting"
        assert f.mcp["silent"]["state"] == "restarting"
        assert await c.ask('tool:crashy__echo {"text": "hi"}') == "Tool said: echoed hi"
        died = await c.ask("tool:crashy__die {}")
        assert "crashy" in died and ("failed" in died or "unavailable" in died), died
        # Everything else goes on: another server, core tools, plain turns.
        assert "UTC" in await c.ask('tool:time__get_current_time {"timezone": "UTC"}')
        assert "still-here" in await c.ask("run: echo still-here")

        async def back() -> bool:  # the crashed server is restarted and answers again
            reply = await c.ask('tool:crashy__echo {"text": "again"}')
            return reply == "Tool said: echoed again"

        await wait_for(back, 90)
        restarted = await facts(bus)
    assert restarted is not None and restarted.mcp["crashy"]["restarts"] >= 1


def test_bad_mcp_config_names_the_key(settings_for: SettingsFor) -> None:
    both = json.dumps({"servers": [{"name": "x", "command": "a", "url": "http://b"}]})
    with pytest.raises(ConfigError, match=r"'mcp.servers\[0\]' \(x\) needs exactly one"):
        settings_for(WM__MCP=both)
    bad = json.dumps({"servers": [{"name": "x", "command": "a", "approval": "sometimes"}]})
    with pytest.raises(ConfigError, match=r"'mcp.servers\[0\].approval'"):
        settings_for(WM__MCP=bad)
