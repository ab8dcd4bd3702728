"""Slack under `wintermute up`: real processes, kill -9 of the channel, a stalled socket.

The local Slack (tests/fakes/slack_server.py) and the scripted model server run in the test's
event loop; `wintermute up` runs as a subprocess whose channel actor talks to them.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.llm_servers import FakeLLM
from tests.fakes.slack_server import APP_TOKEN, BOT_TOKEN, FakeSlack

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
ALICE = "U0ALICE"


async def wm(env: dict[str, str], *args: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "supervisor.cli.main", *args, env=env, cwd=ROOT,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    return out.decode()


async def channel_pid(env: dict[str, str]) -> int | None:
    """The channel actor's pid while it is healthy, per `wintermute status --json`."""
    try:
        data = json.loads(await wm(env, "status", "--json"))
    except ValueError:
        return None
    for actor in data.get("actors", []):
        if actor["name"] == "channel" and actor["healthy"]:
            return int(actor["pid"])
    return None


async def until(predicate: Any, timeout: float) -> Any:
    """Poll an async predicate until it is truthy (each poll is a `status` subprocess)."""
    async with asyncio.timeout(timeout):
        while not (value := await predicate()):  # noqa: ASYNC110 - polling another process
            await asyncio.sleep(0.5)
    return value


@pytest.fixture
async def system(tmp_path: Path) -> AsyncIterator[dict[str, Any]]:
    slack, model = FakeSlack(), FakeLLM()
    await slack.start()
    model_url = await model.start("openai")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("WM__", "OPENAI_", "ANTHROPIC_", "OLLAMA_", "WINTERMUTE_"))}
    env.update({
        "WINTERMUTE_HOME": str(tmp_path / "home"), "OPENAI_BASE_URL": model_url,
        "WM__MODELS__DEFAULT": "openai/test-model", "PYTHONUNBUFFERED": "1",
        "WINTERMUTE_SLACK_BOT_TOKEN": BOT_TOKEN, "WINTERMUTE_SLACK_APP_TOKEN": APP_TOKEN,
        "WM__CHANNELS__SLACK__API_BASE_URL": slack.api_url,
        "WM__CHANNELS__SLACK__ALLOWED_USERS": json.dumps([ALICE]),
        "WM__CHANNELS__SLACK__PING_INTERVAL_SECS": "1",
        # A stalled link is noticed after stale_after (default 15 s, stretched on a busy
        # machine): 8 s, as in the other fault tests, halves the wait by the same rule.
        "WM__SUPERVISOR__STALE_AFTER_SECS": "8",
    })
    log = (tmp_path / "up.log").open("w")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "supervisor.cli.main", "up", env=env, cwd=ROOT, stdout=log,
        stderr=asyncio.subprocess.STDOUT, start_new_session=True,
    )
    try:
        yield {"env": env, "slack": slack, "model": model}
    finally:
        if proc.returncode is None:
            os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
        log.close()
        await slack.stop()
        await model.stop()


async def test_kill_9_of_the_channel_and_a_stalled_socket(system: dict[str, Any]) -> None:
    env, slack, model = system["env"], system["slack"], system["model"]
    await slack.wait_connected(timeout=120)
    first = await until(lambda: channel_pid(env), 90)

    # kill -9 while the model is still working on a stored turn: one reply, after the restart
    await slack.push("events_api", slack.dm(ALICE, "slow:3 during the kill"))
    async with asyncio.timeout(60):
        while not any("during the kill" in json.dumps(r) for r in model.requests):  # noqa: ASYNC110
            await asyncio.sleep(0.1)
    os.kill(first, signal.SIGKILL)
    await slack.wait_posted(lambda ms: [m for m in ms if m["text"] == "slept 3"], timeout=90)
    second = await until(lambda: channel_pid(env), 60)
    assert second != first

    # the link goes silent and Slack will not hand out a new one: the channel stops reporting
    # liveness, the supervisor restarts it, and it reconnects once Slack is back
    opened = slack.connections
    slack.refuse_sockets = True
    slack.stall()
    restarted = await until(lambda: _restarted(env, second), 90)
    assert "slack loop" in json.dumps(restarted)  # why the supervisor restarted it
    slack.refuse_sockets = False
    await slack.wait_connected(count=opened + 1, timeout=90)
    await slack.push("events_api", slack.dm(ALICE, "after the stall"))
    await slack.wait_posted(lambda ms: [m for m in ms if "after the stall" in m["text"]], 90)
    texts = [m["text"] for m in slack.posted()]
    assert texts.count("slept 3") == 1 and texts.count("echo: after the stall") == 1


async def _restarted(env: dict[str, str], old: int) -> dict[str, Any] | None:
    """The channel's status entry once it runs under a new pid, else None."""
    data = json.loads(await wm(env, "status", "--json"))
    channel: dict[str, Any] = next(a for a in data["actors"] if a["name"] == "channel")
    return channel if channel["pid"] and channel["pid"] != old else None
