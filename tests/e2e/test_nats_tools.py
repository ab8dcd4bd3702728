"""Standard NATS tools on a running instance: `wintermute nats-context` writes a context that a
client we did not write (nats.js from npm, under node) uses to follow the README's tap recipes:
list streams, consumers and buckets, print a session's history, subscribe to `wm.>`.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks.chaos_kit import CHAT, ROOT, Driver, Instance, running_up

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).parent / "js" / "tap.mjs"


@pytest.fixture(scope="module")
def nats_js(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with the `nats` npm package installed (node resolves it from there)."""
    if not (shutil.which("node") and shutil.which("npm")):
        pytest.skip("node and npm are needed to run a NATS client we did not write")
    folder = tmp_path_factory.mktemp("nats-js")
    subprocess.run(["npm", "install", "--silent", "--no-audit", "--no-fund", "nats@2"],
                   cwd=folder, check=True, timeout=300, capture_output=True)
    shutil.copy(SCRIPT, folder / SCRIPT.name)
    return folder


@pytest.fixture(scope="module")
async def wm(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Instance]:
    async with running_up(tmp_path_factory.mktemp("nats-tools") / "home") as (inst, model):
        yield inst


def write_context(wm: Instance, config_home: Path) -> Path:
    """`wintermute nats-context`, as the owner runs it; the context file it wrote."""
    env = {**wm.env, "XDG_CONFIG_HOME": str(config_home)}
    out = subprocess.run([sys.executable, "-m", "supervisor.cli.main", "nats-context"], env=env,
                         cwd=ROOT, text=True, capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr
    path = config_home / "nats" / "context" / "wintermute-operator.json"
    assert "nats --context wintermute-operator sub 'wm.>'" in out.stdout
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    ctx = json.loads(path.read_text())
    assert ctx["url"] == wm.runtime()["nats_url"] and ctx["inbox_prefix"] == "_INBOX_operator"
    seed = Path(ctx["nkey"]).read_text().strip()
    assert seed not in path.read_text()  # the path of the key, not the key
    return path


async def test_a_foreign_client_taps_with_the_operator_context(
    wm: Instance, nats_js: Path, tmp_path: Path,
) -> None:
    assert wm.bus is not None
    driver = Driver(wm.bus)
    first = await driver.send("history for the operator")
    assert await driver.wait([first], 120) == []
    path = await asyncio.to_thread(write_context, wm, tmp_path)

    node = await asyncio.create_subprocess_exec(
        "node", SCRIPT.name, str(path), f"wm.in.terminal.{CHAT}", cwd=nats_js,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "NODE_PATH": str(nats_js / "node_modules")})
    assert node.stdout is not None
    found: dict[str, Any] = {}
    async with asyncio.timeout(120):
        while "history" not in found:
            line = await node.stdout.readline()
            assert line, (await node.stderr.read()).decode() if node.stderr else "node exited"
            item = json.loads(line)
            found[item["what"]] = item["value"]
        await driver.send("and live")  # `nats sub 'wm.>'` sees it
        line = await node.stdout.readline()
        assert line, (await node.stderr.read()).decode() if node.stderr else "node exited"
        found["live"] = json.loads(line)["value"]
        await node.wait()
    assert {"WM_IN", "WM_OUT", "WM_CMD", "WM_EVT", "WM_DLQ"} <= set(found["streams"])
    assert "planner-in" in found["consumers"]
    assert {"wm_state", "wm_health"} <= set(found["buckets"])
    history = found["history"]
    assert isinstance(history, list)
    texts = [h["payload"].get("text") for h in history]
    assert "history for the operator" in texts and "echo: history for the operator" in texts
    assert str(found["live"]).startswith("wm.")


async def test_tap_takes_a_session_id_as_users_write_it(wm: Instance) -> None:
    assert wm.bus is not None
    driver = Driver(wm.bus)
    tap = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "supervisor.cli.main", "tap", f"terminal:{CHAT}", env=wm.env,
        cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    assert tap.stdout is not None and tap.stderr is not None
    try:
        async with asyncio.timeout(60):
            started = (await tap.stderr.readline()).decode()
        assert f"session=terminal:{CHAT}" in started
        await driver.send("tap my session")
        # Something of another session meanwhile, which the tap must leave out.
        await wm.bus.nc.publish("wm.evt.session.idle.terminal_other",
                                b'{"type": "session.idle", "session": "terminal:other"}')
        lines: list[str] = []
        async with asyncio.timeout(60):
            while not any("turn.reply" in line and "tap my session" in line for line in lines):
                lines.append((await tap.stdout.readline()).decode())
    finally:
        tap.terminate()
        await tap.wait()
    assert all(f"session=terminal:{CHAT}" in line for line in lines if line.strip()), lines
    assert any("turn.request" in line and "tap my session" in line for line in lines), lines
