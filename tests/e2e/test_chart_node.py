"""The Helm chart on a stand-in node: every rendered container runs as the kubelet would run it.

`helm template` renders the chart; tests/fakes/k8s_node.py runs each pod's init containers and
main container as local processes with the rendered command, args and env, volumes as
directories and Service names as 127.0.0.1, against a nats-server started from the chart's own
nats.conf (users, permissions, JetStream cap). Then it checks what a user of a k3s node
would: the actors come up healthy, plain and tool turns are answered, the seeded prompt files
reach the model, an agent-created tool survives a pod restart, and a frozen actor fails its
liveness probe.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.k8s_node import Node, free_port
from tests.fakes.llm_servers import FakeLLM
from tests.helm_kit import CHART, helm_runner

yaml = pytest.importorskip("yaml", reason="PyYAML is not installed (pip install pyyaml)")

pytestmark = pytest.mark.slow

FULL = "wm-wintermute"
MARKER = "MARKER-SEEDED-LESSON: answer in haiku when asked about poems"
ADD = ("import json, sys\nargs = json.load(sys.stdin)\n"
       "json.dump({'sum': args['a'] + args['b']}, sys.stdout)\n")


async def eventually(check: Any, timeout: float, what: str) -> Any:
    """Poll an async check until it returns something truthy."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    last: Any = None
    while loop.time() < deadline:
        last = await check()
        if last:
            return last
        await asyncio.sleep(0.5)
    raise AssertionError(f"{what} within {timeout:.0f}s (last: {last!r})")


def port_open(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
async def node(tmp_path: Path) -> AsyncIterator[tuple[Node, FakeLLM]]:
    fake = FakeLLM()
    await fake.start("openai")
    values = {
        "secrets": {"llm": {"env": {"OPENAI_BASE_URL": fake.url}}},
        # stale_after as in the other fault tests (default 15 s): the frozen planner's
        # liveness probe fails sooner, by the same rule.
        "config": {"models": {"default": "openai/test-model"},
                   "supervisor": {"stale_after_secs": 8}},
        "prompts": {"AGENTS.md": f"# AGENTS.md\n\n- {MARKER}\n"},
        "nats": {"jetstream": {"maxFileStore": "256M"}},
    }
    (tmp_path / "values.yaml").write_text(yaml.safe_dump(values))
    helm = helm_runner(tmp_path / "helm")
    out = helm("template", "wm", str(CHART), "--namespace", "wintermute",
               "--values", str(tmp_path / "values.yaml"))
    assert out.returncode == 0, out.stderr
    manifests = [d for d in yaml.safe_load_all(out.stdout) if d]
    # WM_NODE_IMAGE (`just image-node`): run the wintermute containers in the built image.
    node = Node(manifests, tmp_path / "node", ports={4222: free_port(), 8222: free_port()},
                image=os.environ.get("WM_NODE_IMAGE", ""))
    try:
        yield node, fake
    finally:
        await node.stop_all()
        await fake.stop()


async def status(node: Node) -> dict[str, Any] | None:
    code, out = await node.exec(f"{FULL}-supervisor", "wintermute", "status", "--json")
    if code != 0:
        return None
    try:
        return json.loads(out[out.index("{"):])  # type: ignore[no-any-return]
    except ValueError:
        return None


async def chat(node: Node, text: str) -> str:
    code, out = await node.exec(f"{FULL}-supervisor", "wintermute", "chat", "--once", text,
                                "--timeout", "90", timeout=150)
    assert code == 0, out
    return out.strip()


async def test_the_chart_runs_on_a_node_like_up_does(node: tuple[Node, FakeLLM]) -> None:
    n, fake = node
    await n.start(f"{FULL}-nats")
    await eventually(lambda: asyncio.to_thread(port_open, n.ports[4222]), 60, "NATS listening")
    await n.start(f"{FULL}-supervisor")
    actors = ["channel", "planner", "llm", "executor", "memory", "observer", "heartbeat",
              "approval"]
    # All pods at once, as Kubernetes starts them: their init containers share the home.
    await asyncio.gather(*(n.start(f"{FULL}-{a}") for a in actors))

    async def all_healthy() -> dict[str, Any] | None:
        st = await status(n)
        ok = st and len(st["actors"]) == 8 and all(a["healthy"] for a in st["actors"])
        return st if ok else None

    await eventually(all_healthy, 240, "all eight actors healthy")
    for a in actors:
        assert await n.probe(f"{FULL}-{a}", "readinessProbe") == 0, a

    # A plain turn and a tool turn, through the chart's NATS users and permissions.
    assert await chat(n, "hello node") == "echo: hello node"
    assert "node-42" in await chat(n, "run: echo node-$((40+2))")
    # The seeded AGENTS.md reached the model's prompt.
    system = [m["content"] for r in fake.requests for m in r["messages"] if m["role"] == "system"]
    assert any(MARKER in s for s in system), system[-1][:2000]

    # An agent-created tool is committed to scripts/ on the shared home and survives the
    # executor's pod being replaced.
    create = {"name": "add_two", "description": "add_two: adds two integers.",
              "parameters_schema": {"type": "object", "properties": {
                  "a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]},
              "implementation": ADD}
    made = await chat(n, "tool:create_tool " + json.dumps(create))
    assert "add_two" in made and "fatal" not in made, made
    assert '"sum": 5' in await chat(n, 'tool:add_two {"a": 2, "b": 3}')
    await n.restart(f"{FULL}-executor")
    await eventually(all_healthy, 120, "healthy again after the executor's pod was replaced")
    assert '"sum": 9' in await chat(n, 'tool:add_two {"a": 4, "b": 5}')

    # A frozen actor fails its liveness probe (Kubernetes then restarts the pod).
    planner = n.pods[f"{FULL}-planner"]
    assert await n.probe(f"{FULL}-planner") == 0
    await n.kill(f"{FULL}-planner", signal.SIGSTOP)
    try:
        async def probe_fails() -> bool:
            return await n.probe(f"{FULL}-planner") != 0

        await eventually(probe_fails, 90, "the frozen planner's liveness probe failing")
    finally:
        await n.kill(f"{FULL}-planner", signal.SIGCONT)
    assert planner.proc is not None and planner.proc.returncode is None
