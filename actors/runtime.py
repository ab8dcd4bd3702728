"""Runs one actor as a process: connect, provision, consume, report health, stop gracefully."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from actors import ACTORS, replicas
from actors.base import Actor
from actors.replicas import Replicas
from bus import Bus, Consumer, ProvisionError, lost, tracing
from bus import logs as buslogs
from bus.batch import BatchConsumer
from contracts import Health
from contracts.config import Settings
from contracts.liveness import local_health_path

log = logging.getLogger(__name__)


def actor_class(name: str) -> type[Actor]:
    """Import the actor's module only now, so each process pays only for what it uses."""
    try:
        target = ACTORS[name]
    except KeyError:
        raise SystemExit(f"unknown actor {name!r}; actors are: {', '.join(ACTORS)}") from None
    module, cls = target.split(":")
    return getattr(importlib.import_module(module), cls)  # type: ignore[no-any-return]


async def connect_bus(settings: Settings, name: str) -> Bus:
    """Connect as this actor's NATS user (if one is configured)."""
    cfg = settings.config.nats
    if not cfg.url:
        raise SystemExit(
            "no NATS URL: set [nats] url in config.toml or WM__NATS__URL, "
            "or start everything with `wintermute up`"
        )
    bus = Bus(cfg.url, cfg.prefix, name=f"wintermute-{name}")
    await bus.connect(timeout=30, credentials=cfg.credentials, user=cfg.user,
                      password=cfg.password, seed=cfg.seed, api_prefix=cfg.api_prefix)
    return bus


async def verify_bus(actor: Actor, patience: float = 300.0) -> None:
    """Make sure the streams and buckets this actor uses exist (created only if allowed).

    Started next to the supervisor (Kubernetes starts all pods at once) an actor may look before
    the supervisor provisioned them: it waits, saying so, for up to `patience` seconds."""
    from bus.permissions import scope

    subs = [sub for sub, _ in actor.subscriptions()]
    streams, buckets = scope(actor.subjects, actor.name, subs)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + patience
    delay = 1.0
    while True:
        try:
            await actor.bus.provision(streams, buckets)
            return
        except ProvisionError as exc:
            if loop.time() + delay > deadline:
                raise SystemExit(str(exc)) from None
            log.warning("waiting for the supervisor to provision the bus (%s); retrying in "
                        "%.0fs", exc, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 15.0)


def write_atomic(path: Path, data: bytes) -> None:
    """Replace a small file in one step (a reader sees the old or the new record)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    part = path.with_name(f".{path.name}.{os.getpid()}")
    part.write_bytes(data)
    part.replace(path)


class ActorProcess:
    """Owns one actor instance and its consumers for the life of the process."""

    def __init__(self, actor: Actor, replicas: Replicas | None = None) -> None:
        self.actor = actor
        self.consumers: list[Consumer] = []
        self.replicas = replicas  # the other processes of this actor, when this one leads
        self._stop = asyncio.Event()

    def request_stop(self) -> None:
        self._stop.set()

    def health(self) -> Health:
        loops = dict(self.actor._loops)
        for c in self.consumers:
            loops[f"fetch:{c.sub.durable}"] = c.stats.last_fetch_ok
        return Health(
            actor=self.actor.name,
            pid=os.getpid(),
            started=self.actor.started,
            ts=time.time(),
            handled=sum(c.stats.handled for c in self.consumers),
            failed=sum(c.stats.failed for c in self.consumers),
            loops=loops,
            periods=dict(self.actor._periods),
            info=self.actor.health_info() | (
                {"replicas": self.replicas.pids(), "replica_restarts": self.replicas.restarts}
                if self.replicas else {}),
        )

    async def _report_health(self) -> None:
        interval = self.actor.config.supervisor.health_interval_secs
        bucket = self.actor.subjects.kv_health
        local = local_health_path(self.actor.home, self.actor.name)
        while True:
            record = self.health()
            # The local copy is what `wintermute probe` (Kubernetes probes) reads: it proves
            # this process's loops run, whatever the state of the bus.
            with contextlib.suppress(OSError):
                write_atomic(local, msgspec.json.encode(record))
            with contextlib.suppress(Exception):
                await self.actor.bus.kv_put(bucket, self.actor.name, record)
            await asyncio.sleep(interval)

    async def run(self) -> None:
        actor = self.actor
        await actor.on_start()
        tasks: list[asyncio.Task[Any]] = []
        for sub, inbox in actor.subscriptions():
            consumer = (BatchConsumer(actor.bus, actor.name, sub, inbox, actor.handle,
                                      actor.end_batch) if actor.batched
                        else Consumer(actor.bus, actor.name, sub, inbox, actor.handle))
            self.consumers.append(consumer)
            tasks.append(asyncio.create_task(consumer.run(), name=f"consume:{sub.durable}"))
        if replicas.index() == 0:  # replica 0 speaks for all (the supervisor watches it)
            tasks.append(asyncio.create_task(self._report_health(), name="health"))
        if self.replicas is not None:
            tasks.append(asyncio.create_task(self.replicas.run(), name="replicas"))
        tasks.extend(actor._background)
        stopper = asyncio.create_task(self._stop.wait(), name="stop")
        log.info("actor %s running (pid %s)", actor.name, os.getpid())
        done, _ = await asyncio.wait([*tasks, stopper], return_when=asyncio.FIRST_COMPLETED)
        failure = next((t.exception() for t in done if t is not stopper and t.exception()), None)
        if failure is None:
            crashed = [t for t in done if t is not stopper]
            if crashed:
                failure = RuntimeError(f"loop {crashed[0].get_name()} ended unexpectedly")
        grace = actor.config.supervisor.stop_grace_secs - 1
        stops = [c.stop(grace) for c in self.consumers]
        if self.replicas is not None:
            stops.append(self.replicas.stop(grace))
        await asyncio.gather(*stops, return_exceptions=True)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        stopper.cancel()
        with contextlib.suppress(Exception):
            await actor.on_stop()
        if failure is not None:
            actor.on_failure(failure)
            raise failure


def log_scrub(settings: Settings) -> Callable[[str], str]:
    """What every log line of an actor passes through: the home's secrets (.env, NATS
    credentials, secret-named variables of this process) and credential shapes redacted."""
    from kit.redact import Redactor

    return Redactor.for_home(settings.home, os.environ).redact


async def run_actor(name: str, settings: Settings) -> None:
    """Entry point of `wintermute actor NAME`."""
    buslogs.setup(name, settings.config.logging.level, scrub=log_scrub(settings))
    lost.set_path(settings.home / "logs" / "lost.jsonl")
    tracing.setup(f"wintermute-{name}", settings.config.telemetry.traces,
                  settings.home / "logs" / "traces.jsonl")
    cls = actor_class(name)
    bus = await connect_bus(settings, name)
    wanted = settings.config.actors.get(name)
    count = wanted.replicas if wanted is not None else 1
    leads = replicas.index() == 0 and count > 1
    proc = ActorProcess(cls(settings, bus), replicas.Replicas(name, count) if leads else None)
    await verify_bus(proc.actor)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, proc.request_stop)
    try:
        await proc.run()
    finally:
        if replicas.index() == 0:
            with contextlib.suppress(Exception):
                await bus.kv_put(bus.subjects.kv_health, name, b"")
        await bus.close()
        tracing.shutdown()
