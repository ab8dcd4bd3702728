"""Reading actor health from KV and judging it: stale reports, stuck loops, silent starts."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from collections.abc import Mapping
from typing import Any

from bus import Bus
from contracts import Health
from contracts.config import SupervisorConfig
from contracts.liveness import stale_reason
from supervisor.process.announce import Announcer

log = logging.getLogger(__name__)



def load_per_core() -> float:
    """The 1-minute load average per CPU core (1.0 where the OS does not say)."""
    try:
        return os.getloadavg()[0] / (os.cpu_count() or 1)
    except OSError:
        return 1.0


class HealthView:
    """The latest health record of each actor, and whether it is alive."""

    def __init__(self, bus: Bus, cfg: SupervisorConfig, names: list[str]) -> None:
        self.bus = bus
        self.cfg = cfg
        self.names = names
        self.health: dict[str, Health] = {}
        # While NATS is away nobody can report; ages count from when it came back. The same
        # when this supervisor itself was starved of CPU: nobody else ran either.
        self.bus_back_at = time.time()
        self.bus_down = False
        self.store_full = False  # nobody can write health to a full store: judge nobody
        self.load = load_per_core  # replaceable in tests
        self.stretch = 1.0  # how much slower than normal the machine is now (>= 1)
        self._last_round = 0.0

    def storage_changed(self, full: bool) -> None:
        """The message store became full (or has room again: ages count from now)."""
        if self.store_full and not full:
            self.bus_back_at = time.time()
        self.store_full = full

    @property
    def busy(self) -> bool:
        """The machine is overloaded: more runnable work than cores."""
        return self.stretch > 1.0

    def _measure(self, now: float) -> None:
        """Stretch the limits on a busy machine; restart the clocks if we were starved."""
        self.stretch = min(max(self.load(), 1.0), max(self.cfg.max_load_stretch, 1.0))
        late = now - self._last_round - self.cfg.health_interval_secs
        if self._last_round and late > self.cfg.stale_after_secs / 2:
            log.warning("this health round came %.0fs late (load %.1f per core): actors were "
                        "as starved as the supervisor, so their ages count from now", late,
                        self.load())
            self.bus_back_at = now
        self._last_round = now

    async def refresh(self) -> bool:
        """Read every actor's record; False (and nothing judged) when NATS is unreachable."""
        self._measure(time.time())
        bucket = self.bus.subjects.kv_health
        fresh: dict[str, Health] = {}
        try:
            for name in self.names:
                record = await self.bus.kv_get_as(bucket, name, Health)
                if record is not None:
                    fresh[name] = record
        except Exception as exc:  # noqa: BLE001 - NATS restarting: judge nobody meanwhile
            if not self.bus_down:
                log.warning("cannot read health (%s); not judging actors until NATS is back", exc)
            self.bus_down = True
            return False
        if self.bus_down:
            self.bus_down = False
            self.bus_back_at = time.time()
        self.health = fresh
        return True

    def nats_restarted(self) -> None:
        self.bus_back_at = time.time()

    def stale_reason(self, h: Health, now: float) -> str:
        """Why this record shows a stuck actor, or "" (limits stretched on a busy machine)."""
        return stale_reason(h, now, self.cfg.stale_after_secs * self.stretch, self.bus_back_at)

    def hung_reason(self, name: str, pid: int | None, started: float, now: float) -> str:
        """Why the process `pid` of `name` counts as hung, or "" (also "" while NATS is away)."""
        if self.bus_down or self.store_full or pid is None:
            return ""
        h = self.health.get(name)
        if h is None or h.pid != pid:
            # Not one report yet: only a start deadline (stretched when the machine is busy)
            # makes it hung; a slow start on a loaded machine is slow, not dead.
            silent = now - max(started, self.bus_back_at)
            if silent > self.cfg.startup_grace_secs * self.stretch:
                return f"it reported no health in the {silent:.0f}s since it started"
            return ""
        return self.stale_reason(h, now)

    def is_healthy(self, name: str, pid: int | None, now: float) -> bool:
        """Reporting, fresh, and (when we know the pid) from the process we started."""
        h = self.health.get(name)
        if h is None or (pid is not None and h.pid != pid):
            return False
        return self.stale_reason(h, now) == ""


class HealthWatch:
    """Acts on health: kills hung processes (spawn mode) or reports changes (watch mode)."""

    def __init__(self, view: HealthView, announce: Announcer, cfg: SupervisorConfig) -> None:
        self.view = view
        self.announce = announce
        self.cfg = cfg
        self._excused = False  # said once that mass "hangs" are the machine being slow

    def judge(self, actors: Mapping[str, Any], now: float) -> dict[str, str]:
        """The running processes that count as hung now, with why.

        When most actors look hung at once on a busy machine, that is the machine, not them:
        killing them would only add eight start-ups to the load (the storm of issue 17), so
        none is judged hung until the load falls or they report again.
        """
        running = {n: st for n, st in actors.items() if st.pid is not None and not st.kill_reason}
        hung = {n: r for n, st in running.items()
                if (r := self.view.hung_reason(n, st.pid, st.started, now))}
        if len(hung) > 1 and len(hung) * 2 > len(running) and self.view.busy:
            if not self._excused:
                log.warning("%d of %d actors look hung on a busy machine (load %.1f per core); "
                            "that is the machine being slow, so none is killed: %s", len(hung),
                            len(running), self.view.stretch, "; ".join(
                                f"{n}: {r}" for n, r in sorted(hung.items())))
            self._excused = True
            return {}
        self._excused = False
        return hung

    async def kill_hung(self, actors: Mapping[str, Any]) -> None:
        """SIGKILL each process whose health is stale; its keeper restarts it."""
        now = time.time()
        for name, reason in self.judge(actors, now).items():
            st = actors[name]
            pid = st.pid
            st.kill_reason = f"hung: {reason}"
            log.warning("%s is hung (%s); killing pid %s", name, reason, pid)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)  # works on a stopped (SIGSTOP) process too
            self.announce.soon(self.announce.intervene(
                "hung", name, f"Killed the hung {name} actor (pid {pid}) to restart it.",
                _sentence(reason), ref=f"flatline:hung:{name}:{pid}", evidence={"pid": pid},
                undo="none needed: it is restarted at once",
                notify=(f"The {name} actor was hung ({reason}); I killed pid {pid} and am "
                        "restarting it."),
            ))

    async def announce_changes(self, actors: Mapping[str, Any], since: float) -> None:
        """Watch mode: Kubernetes restarts pods; tell the owner when an actor's health changes."""
        now = time.time()
        for name, st in actors.items():
            healthy = self.view.is_healthy(name, None, now)
            grace = self.cfg.startup_grace_secs * self.view.stretch
            if st.healthy is None and not healthy and now - since < grace:
                continue  # just started watching: give actors their start-up time
            if healthy == st.healthy or (st.healthy is None and healthy):
                st.healthy = healthy
                continue
            st.healthy = healthy
            h = self.view.health.get(name)
            why = (self.view.stale_reason(h, now) if h else "") or "it has not reported health"
            await self.announce.intervene(
                "health", name, f"The {name} actor is {'healthy' if healthy else 'unhealthy'}.",
                "Its health reports are fresh again." if healthy else _sentence(why),
                outcome="reported",
                notify=(f"The {name} actor is healthy again." if healthy else
                        f"The {name} actor looks unhealthy: {why}. Kubernetes restarts its pod "
                        "if its liveness probe fails."),
            )


def _sentence(text: str) -> str:
    return f"{text[:1].upper()}{text[1:]}."
