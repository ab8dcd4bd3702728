"""Fault injection against a real `wintermute up`: start it with a scripted model, send turns the
way `wintermute chat` does, kill things, then count from the streams what was lost or doubled.

Shared by tests/e2e/test_faults.py (assertions) and benchmarks/chaos.py (figures).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from bus import Bus
from contracts import Health, TerminalInput
from contracts.records import SupervisorStatus
from supervisor.process.natsauth import connect_kwargs

ROOT = Path(__file__).resolve().parents[1]
CHAT = "owner"  # the owner: owner-only tools work and owner notices arrive here


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class FakeModel:
    """The scripted OpenAI-compatible server (tests/fakes/llm_servers.py) in its own process."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.fakes.llm_servers", "--kind", "openai", "--port",
             str(free_port())], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True,
        )
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


class Instance:
    """`wintermute up` as a subprocess in its own process group, for one home."""

    def __init__(self, home: Path, model_url: str, env: dict[str, str] | None = None) -> None:
        self.home = home
        base = {k: v for k, v in os.environ.items()
                if not k.startswith(("WM__", "OPENAI_", "ANTHROPIC_", "OLLAMA_"))}
        base.update({"WINTERMUTE_HOME": str(home), "OPENAI_BASE_URL": model_url,
                     "WM__MODELS__DEFAULT": "openai/chaos", "PYTHONUNBUFFERED": "1"})
        base.update(env or {})
        self.env = base
        self.proc: subprocess.Popen[bytes] | None = None
        self.bus: Bus | None = None

    def start(self) -> None:
        log = (self.home.parent / f"{self.home.name}-up.log").open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "supervisor.cli.main", "up"], env=self.env, cwd=ROOT, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True,
        )

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def runtime(self) -> dict[str, Any]:
        return json.loads((self.home / "data" / "runtime.json").read_text())  # type: ignore[no-any-return]

    async def connect(self, timeout: float = 60) -> Bus:
        deadline = time.monotonic() + timeout
        while not (self.home / "data" / "runtime.json").exists():
            if time.monotonic() > deadline:
                raise TimeoutError("wintermute up wrote no runtime.json")
            await asyncio.sleep(0.2)
        # As the supervisor's NATS user: the driver publishes and reads anywhere under wm.
        self.bus = await Bus(self.runtime()["nats_url"], "wm", name="chaos").connect(
            timeout=30, **connect_kwargs(self.home, "supervisor"))
        return self.bus

    async def status(self) -> dict[str, Any]:
        assert self.bus is not None
        st = await self.bus.kv_get_as(self.bus.subjects.kv_state, "supervisor", SupervisorStatus)
        return msgspec.to_builtins(st) if st is not None else {"actors": []}

    async def health_pid(self, name: str) -> int | None:
        """The pid in the actor's own fresh health record (what a restarted process writes)."""
        assert self.bus is not None
        h = await self.bus.kv_get_as(self.bus.subjects.kv_health, name, Health)
        if h is None:
            return None
        return h.pid if time.time() - h.ts < 5 else None

    async def wait_healthy(self, timeout: float = 90) -> dict[str, Any]:
        """Every actor healthy in the supervisor's view."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            st = await self.status()
            actors = st.get("actors", [])
            if len(actors) == 8 and all(a["healthy"] and a["pid"] for a in actors):
                return st
            await asyncio.sleep(0.3)
        raise AssertionError(f"actors not all healthy within {timeout}s: {await self.status()}")

    async def actor_pid(self, name: str, timeout: float = 60) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for a in (await self.status()).get("actors", []):
                if a["name"] == name and a["healthy"] and a["pid"]:
                    return int(a["pid"])
            await asyncio.sleep(0.2)
        raise AssertionError(f"{name} not healthy within {timeout}s")

    async def recovered(self, name: str, old_pid: int, timeout: float = 60) -> float:
        """Seconds until a new process of `name` reports health (measured from now)."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            pid = await self.health_pid(name)
            if pid and pid != old_pid:
                return time.monotonic() - t0
            await asyncio.sleep(0.1)
        raise AssertionError(f"{name} did not come back within {timeout}s")


@contextlib.asynccontextmanager
async def running_up(home: Path, env: dict[str, str] | None = None,
                     timeout: float = 120) -> AsyncIterator[tuple[Instance, FakeModel]]:
    """`wintermute up` on `home` answered by a FakeModel, connected and healthy; killed after."""
    model = FakeModel()
    inst = Instance(home, model.url, env)
    inst.start()
    try:
        await inst.connect()
        await inst.wait_healthy(timeout)
        yield inst, model
    finally:
        if inst.bus is not None:
            await inst.bus.close()
        inst.kill()
        model.stop()


async def read_stream(bus: Bus, stream: str, subject: str = ">", start: int = 1
                      ) -> tuple[list[dict[str, Any]], int]:
    """Payloads stored in `stream` on `subject` from sequence `start`; and the next start."""
    out: list[dict[str, Any]] = []
    seq = start
    while True:
        msg = await bus.stored(stream, seq, subject=subject, next=True)
        if msg is None:
            return out, seq
        try:
            payload = msgspec.json.decode(msg.data)
        except msgspec.DecodeError:
            payload = None
        if not isinstance(payload, dict):
            payload = {"type": "unparsed"}
        payload["_subject"] = msg.subject
        out.append(payload)
        seq = msg.seq + 1


@dataclass
class Driver:
    """Sends owner messages to the terminal channel and waits for their replies."""

    bus: Bus
    sent: dict[str, float] = field(default_factory=dict)  # input id -> time sent
    answered: dict[str, float] = field(default_factory=dict)  # input id -> time delivered
    texts: dict[str, str] = field(default_factory=dict)  # input id -> what was delivered
    notices: list[str] = field(default_factory=list)  # owner notices seen in this chat
    _cursor: int = 1

    async def send(self, text: str) -> str:
        msg = TerminalInput(id=uuid.uuid4().hex, chat=CHAT, text=text)
        self.sent[msg.id] = time.monotonic()
        await self.bus.send(msg)
        return msg.id

    async def poll(self) -> None:
        """Read new delivery events from WM_EVT (the stream survives NATS restarts)."""
        events, self._cursor = await read_stream(
            self.bus, self.bus.subjects.stream_evt, f"wm.evt.channel.delivered.{CHAT}",
            self._cursor,
        )
        for e in events:
            ref = str(e.get("ref", "")).removeprefix("terminal:")
            if ref in self.sent and e.get("kind") in ("reply", "suppressed", "notice"):
                self.answered.setdefault(ref, time.monotonic())
                self.texts.setdefault(ref, str(e.get("text", "")))
            elif e.get("kind") == "notice":
                self.notices.append(str(e.get("text", "")))

    async def wait(self, ids: list[str], timeout: float) -> list[str]:
        """Wait for replies to `ids`; the ids still unanswered at the timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                await self.poll()
            except Exception:  # noqa: BLE001 - NATS restarting under us: poll again
                await asyncio.sleep(0.5)
            missing = [i for i in ids if i not in self.answered]
            if not missing:
                return []
            await asyncio.sleep(0.2)
        return [i for i in ids if i not in self.answered]


@dataclass
class Tally:
    """Per input: turns accepted, replies published, replies delivered (each must be 1)."""

    turns: dict[str, int]
    replies: dict[str, int]
    delivered: dict[str, int]

    def lost(self) -> list[str]:
        return [i for i, n in self.delivered.items() if n == 0]

    def duplicated(self) -> list[str]:
        return [i for i in self.turns if max(self.turns[i], self.replies[i],
                                             self.delivered[i]) > 1]


async def tally(bus: Bus, ids: list[str]) -> Tally:
    """Count, from the streams themselves, what became of each input."""
    s = bus.subjects
    turns = dict.fromkeys(ids, 0)
    replies = dict.fromkeys(ids, 0)
    delivered = dict.fromkeys(ids, 0)
    for p in (await read_stream(bus, s.stream_in, "wm.in.terminal.>"))[0]:
        key = str(p.get("id", "")).removeprefix("terminal:")
        if key in turns:
            turns[key] += 1
    for p in (await read_stream(bus, s.stream_out, f"wm.out.terminal.{CHAT}"))[0]:
        key = str(p.get("turn_id", "")).removeprefix("terminal:")
        if p.get("type") == "turn.reply" and key in replies:
            replies[key] += 1
    for p in (await read_stream(bus, s.stream_evt, f"wm.evt.channel.delivered.{CHAT}"))[0]:
        key = str(p.get("ref", "")).removeprefix("terminal:")
        if p.get("kind") in ("reply", "suppressed") and key in delivered:
            delivered[key] += 1
    return Tally(turns, replies, delivered)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]
