"""A running `wintermute up` for benchmarks: the scripted model server in this process (so its
own time per call is measured where it is spent), the real actors, and a `cli` client that
sends terminal input and times each hop it sees on the bus."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from bus import Bus, Delivery
from contracts import TerminalInput
from contracts.config import load_settings
from supervisor.cli.client import connect
from tests.fakes.llm_servers import FakeLLM

ROOT = Path(__file__).resolve().parents[1]

#: The terminal chats the benchmarks talk in, all the owner's: a chat that is not an owner's is
#: a third party's, whose turns are planned without the message (plan-then-execute: two model
#: calls, no tool run) and rate-limited, which is not the path these figures are about.
OWNER_CHATS = [f"terminal:{c}" for c in (
    "owner", *(f"b{i}" for i in range(1, 301)), *(f"load{i}" for i in range(1000)),
    *(f"t{i}" for i in range(50)))]


class TimedLLM(FakeLLM):
    """The scripted OpenAI-compatible server, with a model latency and the span of every call
    (request received to answer written) recorded: the model's own time."""

    def __init__(self) -> None:
        super().__init__()
        self.latency = 0.001
        self.spans: list[tuple[float, float]] = []

    async def _chat(self, request: Any) -> Any:
        t = time.perf_counter()
        await asyncio.sleep(self.latency)
        resp = await super()._chat(request)
        self.spans.append((t, time.perf_counter()))
        return resp

    def model_time(self, start: float, end: float) -> float:
        """Seconds of model time of the calls that started within [start, end]."""
        return sum(b - a for a, b in self.spans if start <= a <= end)


@dataclass
class Turn:
    sent: float
    chat: str
    done: asyncio.Future[float]


@dataclass
class Hops:
    """Arrival times (client clock) of llm requests and responses, by request id."""

    requests: dict[str, float] = field(default_factory=dict)
    responses: dict[str, float] = field(default_factory=dict)
    # memory recalls a turn waits for, by turn id (the recall's id): asked, answered
    recalls: dict[str, float] = field(default_factory=dict)
    recalled: dict[str, float] = field(default_factory=dict)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _proc_tree(root: int) -> list[int]:
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        with contextlib.suppress(OSError):
            for task in Path(f"/proc/{pid}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
    return out


def _name(pid: int) -> str:
    args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    words = [a.decode(errors="replace") for a in args if a]
    if "actors" in words and words.index("actors") + 1 < len(words):
        return words[words.index("actors") + 1]
    return "nats-server" if any(w.endswith("nats-server") for w in words) else "supervisor"


def cpu_seconds(root: int) -> dict[str, float]:
    """User + system CPU seconds of a process and its descendants, by actor (replicas summed;
    children that already exited are not counted: the actors live for the whole run)."""
    tick = os.sysconf("SC_CLK_TCK")
    total: dict[str, float] = {}
    for pid in _proc_tree(root):
        with contextlib.suppress(OSError, ValueError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            name = _name(pid)
            total[name] = total.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return total


class Instance:
    """`wintermute up` in a temporary home, driven through the bus as the `cli` user."""

    def __init__(self, fake: TimedLLM, env: dict[str, str] | None = None) -> None:
        self.fake = fake
        self.extra = env or {}
        self.home = Path(tempfile.mkdtemp(prefix="wm-bench-"))
        self.up: subprocess.Popen[bytes] | None = None
        self.bus: Bus | None = None
        self.turns: dict[str, Turn] = {}
        self.hops = Hops()
        self.ready_secs = 0.0
        self.actor_pids: dict[str, int] = {}
        self._n = 0

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Instance]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("WM__")}
        self.monitor_port = _free_port()  # the server's /varz counts its messages
        env.update({"WINTERMUTE_HOME": str(self.home), "OPENAI_BASE_URL": self.fake.url,
                    "WM__MODELS__DEFAULT": "openai/bench",
                    "WM__NATS__MONITOR_PORT": str(self.monitor_port),
                    "WM__OWNER__PRINCIPALS": json.dumps(OWNER_CHATS), **self.extra})
        self.env = env
        t0 = time.perf_counter()
        self.up = subprocess.Popen(  # noqa: ASYNC220 - started once, before anything is timed
            [sys.executable, "-m", "supervisor.cli.main", "up"], env=env,
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            await self._wait_healthy()
            self.ready_secs = time.perf_counter() - t0
            self.bus = await connect(load_settings(self.home, env), "bench")
            await self._listen(self.bus)
            yield self
        finally:
            if self.bus is not None:
                await self.bus.close()
            self.up.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                await asyncio.to_thread(self.up.wait, 30)
            if self.up.poll() is None:
                self.up.kill()

    async def _wait_healthy(self, timeout: float = 120.0) -> None:  # noqa: ASYNC109
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            out = await asyncio.to_thread(
                subprocess.run, [sys.executable, "-m", "supervisor.cli.main", "status", "--json"],
                env=self.env, cwd=ROOT, capture_output=True, text=True, timeout=60)
            if out.returncode == 0:
                st = json.loads(out.stdout)
                if st["actors"] and all(a["healthy"] for a in st["actors"]):
                    self.actor_pids = {a["name"]: int(a["pid"]) for a in st["actors"]}
                    return
            await asyncio.sleep(0.2)
        raise TimeoutError("wintermute up did not become healthy in time")

    async def _listen(self, bus: Bus) -> None:
        p = bus.subjects.p

        async def delivered(d: Delivery) -> None:
            now = time.perf_counter()
            info = msgspec.json.decode(d.data)
            turn = self.turns.get(str(info.get("ref", "")))
            if turn is not None and not turn.done.done() and info.get("kind") in (
                    "reply", "suppressed", "notice"):
                turn.done.set_result(now)

        async def llm(d: Delivery) -> None:
            now = time.perf_counter()
            info = msgspec.json.decode(d.data)
            if d.subject.startswith(f"{p}.cmd.llm."):
                self.hops.requests.setdefault(str(info.get("id")), now)
            else:
                self.hops.responses.setdefault(str(info.get("request_id")), now)

        await bus.subscribe(f"{p}.evt.channel.delivered.*", delivered)
        async def memory(d: Delivery) -> None:
            now = time.perf_counter()
            info = msgspec.json.decode(d.data)
            if d.subject.startswith(f"{p}.cmd.memory."):
                self.hops.recalls.setdefault(str(info.get("turn_id") or info.get("id")), now)
            else:
                self.hops.recalled.setdefault(str(info.get("turn_id") or info.get("id")), now)

        await bus.subscribe(f"{p}.cmd.llm.*", llm)
        await bus.subscribe(f"{p}.cmd.memory.recall", memory)
        await bus.subscribe(f"{p}.evt.memory.recalled.*", memory)
        await bus.subscribe(f"{p}.evt.llm.response.*", llm)

    async def turn(self, text: str, chat: str | None = None) -> Turn:
        """Send one line as terminal input; the Turn's future resolves at its reply."""
        assert self.bus is not None
        self._n += 1
        chat = chat or f"b{self._n}"
        if f"terminal:{chat}" not in OWNER_CHATS:
            raise ValueError(f"chat {chat} is not one of the benchmark's owner chats")
        msg = TerminalInput(id=f"bench{self._n}-{time.time_ns()}", chat=chat, text=text)
        turn = Turn(time.perf_counter(), chat, asyncio.get_running_loop().create_future())
        self.turns[f"terminal:{msg.id}"] = turn
        self.turns[msg.id] = turn  # a notice refers to the input itself
        await self.bus.send(msg)
        return turn

    async def server_messages(self) -> dict[str, int]:
        """Messages the nats-server has received so far from each client, by connection name
        (every publish, JetStream API request and ack counts), and in all ("all")."""
        url = f"http://127.0.0.1:{self.monitor_port}/connz?limit=1024"

        def get() -> dict[str, Any]:
            with urllib.request.urlopen(url, timeout=10) as resp:  # noqa: S310 - our loopback
                return dict(json.load(resp))

        out: dict[str, int] = {}
        for conn in (await asyncio.to_thread(get)).get("connections", []):
            name = str(conn.get("name") or "?").removeprefix("wintermute-")
            out[name] = out.get(name, 0) + int(conn.get("in_msgs", 0))
        out["all"] = sum(out.values())
        return out

    def pid(self) -> int:
        assert self.up is not None
        return self.up.pid
