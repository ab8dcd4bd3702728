"""The self-coding loop through `wintermute up`: the model writes a tool, uses it, breaks it, and
the owner reverts it from another terminal.

The model is the scripted OpenAI-compatible server (tests/fakes/llm_servers.py) in its own
process; everything else is the real thing: embedded NATS, eight actor processes, the CLI, and
git in WINTERMUTE_HOME/scripts.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kit.safegit import run_git
from supervisor.process.natsauth import connect_kwargs

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]

ADD = (
    "import json, sys\n"
    "args = json.load(sys.stdin)\n"
    "json.dump({'sum': args['a'] + args['b']}, sys.stdout)\n"
)
BROKEN = "import sys\nprint('boom: the adder is broken', file=sys.stderr)\nsys.exit(3)\n"


def create_message(source: str) -> str:
    args = {"name": "add_numbers", "description": "Add two integers a and b.",
            "parameters_schema": {"type": "object", "properties": {
                "a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]},
            "implementation": source}
    return "tool:create_tool " + json.dumps(args)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wm(env: dict[str, str], *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "supervisor.cli.main", *args], env=env, cwd=ROOT,
                          text=True, capture_output=True, timeout=timeout)


def say(env: dict[str, str], text: str) -> str:
    out = wm(env, "chat", "--once", text, "--timeout", "90")
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def git_log(home: Path) -> list[str]:
    return run_git(home / "scripts", "log", "--format=%s")[1].splitlines()


def tools(env: dict[str, str]) -> dict[str, dict[str, Any]]:
    out = wm(env, "tools", "--json")
    assert out.returncode == 0, out.stderr
    return {row["name"]: row for row in json.loads(out.stdout)}


def outcomes(env: dict[str, str], tool: str) -> list[dict[str, Any]]:
    """tool.outcome events for one tool, read back from the WM_EVT stream."""
    from bus import Bus

    async def read() -> list[dict[str, Any]]:
        home = Path(env["WINTERMUTE_HOME"])
        info = json.loads((home / "data" / "runtime.json").read_text())
        bus = await Bus(info["nats_url"], "wm").connect(**connect_kwargs(home, "supervisor"))
        try:
            si = await bus.js.stream_info("WM_EVT")
            found = []
            for seq in range(si.state.first_seq, si.state.last_seq + 1):
                payload = json.loads((await bus.js.get_msg("WM_EVT", seq)).data)
                if payload["type"] == "tool.outcome" and payload["tool"] == tool:
                    found.append(payload)
            return found
        finally:
            await bus.close()

    return asyncio.run(read())


def wait_for(predicate: Any, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.3)
    raise AssertionError(f"condition not met within {timeout}s")


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    port = free_port()
    fake = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.llm_servers", "--kind", "openai", "--port", str(port)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    assert fake.stdout is not None
    url = fake.stdout.readline().strip()
    home = tmp_path_factory.mktemp("self-coding-home")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("WM__", "OPENAI_", "ANTHROPIC_", "OLLAMA_"))}
    env.update({"WINTERMUTE_HOME": str(home), "OPENAI_BASE_URL": url,
                "WM__MODELS__DEFAULT": "openai/test-model", "PYTHONUNBUFFERED": "1"})
    log = (home.parent / "up.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "supervisor.cli.main", "up"], env=env, cwd=ROOT,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for(lambda: (home / "data" / "runtime.json").exists(), 30)
        yield {"env": env, "home": home}
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        fake.terminate()
        fake.wait(10)


def test_model_creates_uses_breaks_and_owner_reverts_a_tool(up: dict[str, Any]) -> None:
    env, home = up["env"], up["home"]

    reply = say(env, create_message(ADD))
    assert reply.startswith("Tool said: Created tool add_numbers"), reply
    assert git_log(home)[0] == "create tool: add_numbers"

    # the next turn: the tool is offered and runs in the sandbox, JSON in and out
    assert say(env, 'tool:add_numbers {"a": 2, "b": 40}') == 'Tool said: {"sum": 42}'
    listed = tools(env)
    assert listed["add_numbers"]["status"] == "offered"
    assert listed["add_numbers"]["meta"]["invocations"] == 1
    assert listed["add_numbers"]["meta"]["success_rate"] == 1.0
    assert listed["create_tool"]["kind"] == "core"

    reply = say(env, create_message(BROKEN))
    assert reply.startswith("Tool said: Updated tool add_numbers"), reply
    assert git_log(home)[0] == "update tool: add_numbers"
    reply = say(env, 'tool:add_numbers {"a": 2, "b": 40}')
    assert "failed with exit code 3" in reply and "boom: the adder is broken" in reply, reply

    out = wm(env, "revert")  # from another terminal, through the bus
    assert out.returncode == 0, out.stderr
    assert "Reverted “update tool: add_numbers”" in out.stdout
    assert git_log(home)[:3] == ["revert: update tool: add_numbers", "update tool: add_numbers",
                                 "create tool: add_numbers"]

    assert say(env, 'tool:add_numbers {"a": 20, "b": 22}') == 'Tool said: {"sum": 42}'
    meta = tools(env)["add_numbers"]["meta"]
    assert meta["invocations"] == 3 and meta["version"] == 3
    assert "boom: the adder is broken" in meta["last_error"]
    assert meta["consecutive_failures"] == 0

    events = wait_for(lambda: (found := outcomes(env, "add_numbers")) and len(found) == 3
                      and found, 15)
    assert [e["ok"] for e in events] == [True, False, True]
    assert [e["version"] for e in events] == [1, 2, 3]
    human = wm(env, "tools").stdout
    assert "add_numbers" in human and "offered" in human and "execute_command" in human
