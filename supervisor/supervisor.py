"""One-for-one supervision of actor processes: restarts with backoff, intensity limit, health."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import random
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from actors import ACTORS, STOP_ORDER
from bus import Bus, Consumer, Subscription
from contracts import DeadLetter, Health, Notice, Sink
from contracts.config import Settings
from supervisor.procs import actor_command, actor_env, pdeathsig

log = logging.getLogger(__name__)

STARTUP_GRACE = 25.0  # seconds a new process has to report health before it counts as stale
FAILED_RETRY_SECS = 60.0


@dataclass
class ActorState:
    """What the supervisor knows of one actor."""

    name: str
    proc: asyncio.subprocess.Process | None = None
    started: float = 0.0
    restarts: int = 0
    restart_times: list[float] = field(default_factory=list)
    state: str = "starting"  # starting | running | restarting | failed | stopped
    last_exit: str = ""
    last_crash: float = 0.0
    kill_reason: str = ""

    @property
    def pid(self) -> int | None:
        if self.proc is not None and self.proc.returncode is None:
            return self.proc.pid
        return None


_health_dec = msgspec.json.Decoder(Health)


class Supervisor:
    """Spawns every actor (or, with spawn=False, only watches them, as on Kubernetes)."""

    def __init__(
        self, settings: Settings, bus: Bus, nats_url: str, *, spawn: bool = True,
        nats_pid: int | None = None, only: list[str] | None = None,
    ) -> None:
        self.settings = settings
        self.cfg = settings.config.supervisor
        self.bus = bus
        self.nats_url = nats_url
        self.nats_pid = nats_pid
        self.spawn = spawn
        names = only or list(ACTORS)
        self.actors = {n: ActorState(n) for n in names}
        self.health: dict[str, Health] = {}
        self.dead_letters = 0
        self._stopping = asyncio.Event()
        self._tasks: list[asyncio.Task[Any]] = []
        self._logs = settings.home / "logs"

    # -- lifecycle ---------------------------------------------------------------------------

    async def run(self) -> None:
        """Run until stop() is called."""
        self._logs.mkdir(parents=True, exist_ok=True)
        if self.spawn:
            for name in self.actors:
                self._tasks.append(asyncio.create_task(self._keep_running(name)))
        self._tasks.append(asyncio.create_task(self._watch_health()))
        dlq = Consumer(
            self.bus, "supervisor",
            Subscription(self.bus.subjects.stream_dlq, "supervisor-dlq",
                         (f"{self.bus.subjects.p}.dlq.>",), ordered_by="", dedupe=False),
            DeadLetter, self._on_dead_letter,
        )
        self._tasks.append(asyncio.create_task(dlq.run()))
        await self._stopping.wait()

    def stop(self) -> None:
        self._stopping.set()

    async def shutdown(self) -> None:
        """Stop actors in order: intake first, then the rest together; kill stragglers."""
        self._stopping.set()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if not self.spawn:
            return
        first, rest = STOP_ORDER[:1], STOP_ORDER[1:]
        await self._terminate([n for n in first if n in self.actors], grace=3.0)
        await self._terminate([n for n in rest if n in self.actors], grace=self.cfg.stop_grace_secs)
        await self._publish_status()

    async def _terminate(self, names: list[str], grace: float) -> None:
        procs = [(n, self.actors[n].proc) for n in names if self.actors[n].pid]
        for _, proc in procs:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)  # type: ignore[union-attr]
        for name, proc in procs:
            assert proc is not None
            try:
                await asyncio.wait_for(proc.wait(), grace)
            except TimeoutError:
                log.warning("%s did not stop in %.0fs; killing it", name, grace)
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
            self.actors[name].state = "stopped"

    # -- one actor ---------------------------------------------------------------------------

    async def _spawn(self, name: str) -> asyncio.subprocess.Process:
        out = (self._logs / f"{name}.log").open("ab")
        try:
            return await asyncio.create_subprocess_exec(
                *actor_command(name), stdin=asyncio.subprocess.DEVNULL, stdout=out, stderr=out,
                env=actor_env(name, self.nats_url, str(self.settings.home)),
                preexec_fn=pdeathsig, start_new_session=True,
            )
        finally:
            out.close()

    async def _keep_running(self, name: str) -> None:
        st = self.actors[name]
        consecutive = 0
        while not self._stopping.is_set():
            st.proc = await self._spawn(name)
            st.started = time.time()
            st.state = "running"
            st.kill_reason = ""
            log.info("started %s (pid %s)", name, st.proc.pid)
            await self._publish_status()
            code = await st.proc.wait()
            if self._stopping.is_set():
                break
            reason = st.kill_reason or _describe_exit(code)
            ran_for = time.time() - st.started
            consecutive = 0 if ran_for > self.cfg.restart_window_secs else consecutive + 1
            st.last_exit, st.last_crash = reason, time.time()
            st.restarts += 1
            now = time.time()
            st.restart_times = [t for t in st.restart_times if now - t < self.cfg.restart_window_secs]
            st.restart_times.append(now)
            if len(st.restart_times) > self.cfg.max_restarts:
                st.state = "failed"
                delay = FAILED_RETRY_SECS
                await self._notify(
                    f"The {name} actor failed {len(st.restart_times)} times in "
                    f"{self.cfg.restart_window_secs:.0f}s (last: {reason}). It is marked failed; "
                    f"I will retry every {delay:.0f}s. Its log is logs/{name}.log."
                )
            else:
                st.state = "restarting"
                delay = min(0.25 * 2 ** max(consecutive - 1, 0), 30.0) * random.uniform(0.8, 1.2)
            log.warning("%s exited (%s); restarting in %.1fs", name, reason, delay)
            await self._publish_status()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), delay)

    # -- health ------------------------------------------------------------------------------

    async def _read_health(self) -> None:
        bucket = self.bus.subjects.kv_health
        for name in self.actors:
            data = await self.bus.kv_get(bucket, name)
            if data:
                with contextlib.suppress(msgspec.DecodeError, msgspec.ValidationError):
                    self.health[name] = _health_dec.decode(data)

    def is_healthy(self, name: str, now: float | None = None) -> bool:
        now = now or time.time()
        h = self.health.get(name)
        st = self.actors[name]
        if h is None or (self.spawn and h.pid != st.pid):
            return False
        return self.stale_reason(h, now) == ""

    def stale_reason(self, h: Health, now: float) -> str:
        stale = self.cfg.stale_after_secs
        if now - h.ts > stale:
            return f"health not reported for {now - h.ts:.0f}s"
        for loop, ts in h.loops.items():
            if now - ts > stale + h.periods.get(loop, 0.0):
                return f"its {loop} loop made no progress for {now - ts:.0f}s"
        return ""

    async def _watch_health(self) -> None:
        while True:
            with contextlib.suppress(Exception):
                await self._read_health()
                if self.spawn:
                    self._restart_hung()
                await self._publish_status()
            await asyncio.sleep(self.cfg.health_interval_secs)

    def _restart_hung(self) -> None:
        now = time.time()
        for name, st in self.actors.items():
            if st.pid is None or now - st.started < STARTUP_GRACE:
                continue
            h = self.health.get(name)
            reason = "no health reported" if h is None or h.pid != st.pid else ""
            reason = reason or self.stale_reason(h, now)  # type: ignore[arg-type]
            if reason:
                st.kill_reason = f"hung: {reason}"
                log.warning("%s is hung (%s); killing pid %s", name, reason, st.pid)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(st.pid, signal.SIGKILL)

    # -- reporting ---------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        now = time.time()
        actors = []
        for name, st in self.actors.items():
            h = self.health.get(name)
            actors.append({
                "name": name,
                "pid": st.pid if self.spawn else (h.pid if h else None),
                "healthy": self.is_healthy(name, now),
                "state": st.state if self.spawn else ("running" if h else "unknown"),
                "restarts": st.restarts,
                "last_exit": st.last_exit,
                "last_crash": st.last_crash or None,
                "uptime_secs": round(now - st.started, 1) if st.pid else 0,
                "handled": h.handled if h else 0,
                "info": h.info if h else {},
            })
        return {
            "updated": now,
            "mode": "spawn" if self.spawn else "watch",
            "nats": {"url": self.nats_url, "pid": self.nats_pid},
            "actors": actors,
            "dead_letters_seen": self.dead_letters,
        }

    async def _publish_status(self) -> None:
        with contextlib.suppress(Exception):
            await self.bus.kv_put(
                self.bus.subjects.kv_state, "supervisor", json.dumps(self.status()).encode()
            )

    async def _notify(self, text: str) -> None:
        sink = Sink.parse(self.settings.config.owner.sink)
        notice = Notice(id=f"supervisor:{time.time_ns()}", sink=sink, text=text,
                        source="supervisor")
        with contextlib.suppress(Exception):
            await self.bus.publish(self.bus.subjects.outbound(sink.channel, sink.chat), notice)

    async def _on_dead_letter(self, letter: DeadLetter) -> None:
        self.dead_letters += 1
        log.warning("dead letter from %s on %s: %s", letter.actor, letter.subject, letter.reason)


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def write_runtime(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2))
    tmp.replace(path)
