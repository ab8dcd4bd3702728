"""Run real actors in-process against the real nats-server, and talk to them like `chat` does."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import weakref
from collections.abc import AsyncIterator, Coroutine
from typing import Any

from actors.runtime import ActorProcess, actor_class
from bus import Bus
from contracts import Delivered
from contracts.config import Settings
from supervisor.cli.chat import ChatClient

#: The in-process actor whose code is running; every task an actor creates inherits it.
_OWNER: contextvars.ContextVar[str | None] = contextvars.ContextVar("wm_test_owner", default=None)
_TASKS: dict[str, weakref.WeakSet[asyncio.Task[Any]]] = {}


def _track_tasks(loop: asyncio.AbstractEventLoop) -> None:
    """Record every task with the actor that created it, so a simulated kill -9 can stop all
    of them (fetch loops, health reporter, adapters' pollers) without knowing their names."""
    if getattr(loop, "_wm_tracked", False):
        return

    def factory(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any],
                **kwargs: Any) -> asyncio.Task[Any]:
        task = asyncio.Task(coro, loop=loop, **kwargs)
        owner = _OWNER.get()
        if owner is not None:
            _TASKS.setdefault(owner, weakref.WeakSet()).add(task)
        return task

    loop.set_task_factory(factory)  # type: ignore[arg-type]
    loop._wm_tracked = True  # type: ignore[attr-defined]


class Running:
    """Actors running as tasks in this event loop, each with its own connection."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.procs: dict[str, tuple[ActorProcess, asyncio.Task[None], Bus]] = {}

    async def start(self, name: str) -> ActorProcess:
        cfg = self.settings.config.nats
        bus = await Bus(cfg.url, cfg.prefix, name=name).connect()
        await bus.provision()
        proc = ActorProcess(actor_class(name)(self.settings, bus))
        _track_tasks(asyncio.get_running_loop())
        ctx = contextvars.copy_context()
        ctx.run(_OWNER.set, f"{name}@{id(proc)}")
        task = asyncio.create_task(proc.run(), name=f"actor:{name}", context=ctx)
        self.procs[name] = (proc, task, bus)
        return proc

    async def stop(self, name: str) -> None:
        proc, task, bus = self.procs.pop(name)
        proc.request_stop()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, 10)
        await bus.close()

    async def crash(self, name: str) -> None:
        """Like kill -9: every task the actor started stops at once, nothing is cleaned up or
        acked, and its connection drops."""
        proc, task, bus = self.procs.pop(name)
        victims = [task, *_TASKS.pop(f"{name}@{id(proc)}", ())]
        pending: set[asyncio.Task[Any]] = set(victims)
        for _ in range(3):  # a task may catch one cancellation while it cleans up
            for t in pending:
                t.cancel()
            _, pending = await asyncio.wait(pending, timeout=10)
            if not pending:
                break
        if pending:  # a real kill -9 cannot be ignored: name the task instead of hanging
            raise AssertionError(f"{name} tasks ignored cancellation: " + "; ".join(
                f"{t.get_name()} at {t.get_stack(limit=3)}" for t in pending))
        with contextlib.suppress(Exception):
            await asyncio.wait_for(bus.nc.close(), 10)

    async def stop_all(self) -> None:
        for name in list(self.procs):
            await self.stop(name)


@contextlib.asynccontextmanager
async def actors(settings: Settings, *names: str) -> AsyncIterator[Running]:
    running = Running(settings)
    try:
        for name in names:
            await running.start(name)
        yield running
    finally:
        await running.stop_all()


class Chat:
    """The terminal side, as `wintermute chat` uses it. Deliveries not yet asked for are kept."""

    def __init__(self, client: ChatClient) -> None:
        self.client = client
        self.backlog: list[Delivered] = []

    async def say(self, text: str) -> str:
        return await self.client.send(text)

    async def _wait(self, match: Any, timeout: float) -> Delivered:
        for d in self.backlog:
            if match(d):
                self.backlog.remove(d)
                return d
        async with asyncio.timeout(timeout):
            while True:
                d = await self.client.inbox.get()
                if match(d):
                    return d
                self.backlog.append(d)

    async def next(self, kinds: tuple[str, ...] = ("reply",), timeout: float = 30) -> Delivered:
        return await self._wait(lambda d: d.kind in kinds, timeout)

    async def ask(self, text: str, timeout: float = 30) -> str:
        input_id = await self.say(text)
        refs = (input_id, f"terminal:{input_id}")
        d = await self._wait(lambda d: d.ref in refs and d.kind != "approval", timeout)
        return d.text


@contextlib.asynccontextmanager
async def chat(settings: Settings, chat_id: str = "owner") -> AsyncIterator[Chat]:
    cfg = settings.config.nats
    bus = await Bus(cfg.url, cfg.prefix, name="chat").connect()
    client = ChatClient(bus, chat_id)
    await client.start()
    try:
        yield Chat(client)
    finally:
        await bus.close()


ALL = ("memory", "llm", "executor", "approval", "planner", "channel")


def env_for(kind: str, url: str, **extra: Any) -> dict[str, str]:
    base = {"openai": "OPENAI_BASE_URL", "anthropic": "ANTHROPIC_BASE_URL", "ollama": "OLLAMA_HOST"}
    env = {base[kind]: url, "WM__MODELS__DEFAULT": f"{kind}/test-model"}
    env.update({k: str(v) for k, v in extra.items()})
    return env
