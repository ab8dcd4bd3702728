"""One-for-one supervision of actor processes (and the embedded nats-server), health, status.

Restart decisions live in restart.py, health judgement in health.py, and the rules for tools,
tasks, dead letters and budget in flatline.py and digest.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bus import Bus, Consumer, subscription
from contracts import DeadLetter
from contracts.config import Settings
from contracts.records import ActorRunState, SupervisorStatus
from contracts.routes import ACTORS, STOP_ORDER, durable
from kit.private import open_private, private_dir
from supervisor.flatline.diagnosis import log_tail
from supervisor.flatline.policy import Flatline
from supervisor.process.announce import Announcer
from supervisor.process.health import HealthView, HealthWatch
from supervisor.process.natsserver import EmbeddedNats, describe_exit, exit_sentence
from supervisor.process.procs import actor_command, actor_env, pdeathsig
from supervisor.process.restart import RestartPolicy
from supervisor.process.status import build_status, update_runtime
from supervisor.process.storage import StorageWatch

log = logging.getLogger(__name__)


@dataclass
class ActorState:
    """What the supervisor knows of one actor."""

    name: str
    policy: RestartPolicy = field(default_factory=RestartPolicy)
    proc: asyncio.subprocess.Process | None = None
    started: float = 0.0
    restarts: int = 0
    state: ActorRunState = "starting"
    last_exit: str = ""
    last_crash: float = 0.0
    kill_reason: str = ""
    healthy: bool | None = None  # last judgement, to announce changes in watch mode

    @property
    def pid(self) -> int | None:
        if self.proc is not None and self.proc.returncode is None:
            return self.proc.pid
        return None


class Supervisor:
    """Spawns every actor (or, with spawn=False, only watches them, as on Kubernetes)."""

    def __init__(
        self, settings: Settings, bus: Bus, nats_url: str, *, spawn: bool = True,
        nats: EmbeddedNats | None = None, only: list[str] | None = None,
        runtime_file: Path | None = None, logins: dict[str, dict[str, str]] | None = None,
    ) -> None:
        self.settings = settings
        self.cfg = settings.config.supervisor
        self.bus = bus
        self.nats_url = nats_url
        self.nats = nats
        self.spawn = spawn
        self.runtime_file = runtime_file
        self.metrics_url = ""
        self.logins = logins  # actor -> its Bus.connect arguments (embedded server's users)
        names = only or list(ACTORS)
        unknown = set(self.cfg.restart_policy) - set(ACTORS)
        if unknown:
            log.warning("supervisor.restart_policy names unknown actors: %s", sorted(unknown))
        self.actors = {n: ActorState(n, self._policy(n)) for n in names}
        self.view = HealthView(bus, self.cfg, names)
        self.run_id = uuid.uuid4().hex[:12]  # this run; notices about its processes carry it
        self.announce = Announcer(settings, bus, self.run_id)
        self.flatline = Flatline(settings, bus, self.announce)
        self.watch = HealthWatch(self.view, self.announce, self.cfg)
        self.dead_letters = 0
        self.storage = (StorageWatch(nats, self.view.storage_changed,
                                     every=self.cfg.storage_check_secs,
                                     restart_gap=self.cfg.storage_restart_gap_secs)
                        if nats is not None else None)
        self._stopping = asyncio.Event()
        self._tasks: list[asyncio.Task[Any]] = []
        self._logs = settings.home / "logs"
        self._since = time.time()

    def _policy(self, name: str) -> RestartPolicy:
        return RestartPolicy(
            kind=self.cfg.restart_policy.get(name, "permanent"), max_restarts=self.cfg.max_restarts,
            window=self.cfg.restart_window_secs, failed_retry=self.cfg.failed_retry_secs,
        )

    # -- lifecycle ---------------------------------------------------------------------------

    async def run(self) -> None:
        """Run until stop() is called."""
        private_dir(self._logs)
        self._since = time.time()
        await self.announce.load()
        if self.spawn:
            for name in self.actors:
                self._tasks.append(asyncio.create_task(self._keep_running(name)))
        if self.nats is not None:
            self._tasks.append(asyncio.create_task(self.nats.supervise(self._nats_restarted)))
            if self.storage is not None and self.nats.max_file_store is not None:
                self._tasks.append(asyncio.create_task(self.storage.run()))
        self._tasks.append(asyncio.create_task(self._watch_health()))
        dlq = Consumer(
            self.bus, "supervisor",
            subscription(self.bus.subjects, durable("supervisor-dlq")),
            DeadLetter, self._on_dead_letter,
        )
        self._tasks.append(asyncio.create_task(dlq.run()))
        self._tasks.append(asyncio.create_task(self.flatline.run()))
        await self._start_metrics()
        from supervisor.process.backup import scheduled_backups

        self._tasks.append(asyncio.create_task(
            scheduled_backups(self.settings, self.bus, self.announce.notify)))
        await self._stopping.wait()

    def stop(self) -> None:
        self._stopping.set()

    async def _start_metrics(self) -> None:
        """Prometheus /metrics (its URL goes to status and data/runtime.json)."""
        tel = self.settings.config.telemetry
        if not tel.metrics:
            return
        from supervisor.process.metrics import Metrics, serve_metrics
        from supervisor.process.provision import actor_subscriptions

        durables = [(sub.stream, sub.durable)
                    for subs in actor_subscriptions(self.settings).values() for sub in subs]

        def actors() -> dict[str, dict[str, Any]]:
            now = time.time()
            return {name: {"restarts": st.restarts, "healthy": self.is_healthy(name, now)}
                    for name, st in self.actors.items()}

        try:
            self.metrics_url = await serve_metrics(self.bus, Metrics(), tel.metrics_host,
                                                   tel.metrics_port, actors, durables)
        except OSError as exc:
            log.error("cannot serve /metrics on %s:%s: %s (set telemetry.metrics_port)",
                      tel.metrics_host, tel.metrics_port, exc)
            return
        if self.runtime_file is not None and self.runtime_file.exists():
            update_runtime(self.runtime_file, metrics_url=self.metrics_url)

    async def shutdown(self) -> None:
        """Stop actors in order: intake first, then the rest together; kill stragglers."""
        self._stopping.set()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.announce.close()
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
        out = open_private(self._logs / f"{name}.log", "ab")
        try:
            return await asyncio.create_subprocess_exec(
                *actor_command(name), stdin=asyncio.subprocess.DEVNULL, stdout=out, stderr=out,
                env=actor_env(name, self.nats_url, str(self.settings.home),
                              self.logins[name] if self.logins else None,
                              run=self.run_id),
                preexec_fn=pdeathsig, start_new_session=True,
            )
        finally:
            out.close()

    async def _keep_running(self, name: str) -> None:
        st = self.actors[name]
        while not self._stopping.is_set():
            st.proc = await self._spawn(name)
            st.started = time.time()
            st.state = "failed" if st.policy.failed else "running"
            st.kill_reason = ""
            log.info("started %s (pid %s)", name, st.proc.pid)
            await self._publish_status()
            code = await st.proc.wait()
            if self._stopping.is_set():
                break
            reason = st.kill_reason or describe_exit(code)
            now = time.time()
            decision = st.policy.on_exit(code, now - st.started, now)
            st.last_exit, st.last_crash = reason, now
            if decision.recovered:
                await self._recovered(name)
            if not decision.restart:
                st.state = "stopped"
                log.info("%s exited cleanly (%s) and is transient; not restarting", name, reason)
                await self._publish_status()
                return
            st.restarts += 1
            st.state = "failed" if decision.failed else "restarting"
            # Recorded in the background: a restart must not wait for NATS to take the record.
            if decision.newly_failed:
                self.announce.soon(self.announce.intervene(
                    "failed", name, f"Marked the {name} actor failed.",
                    f"It exited {len(st.policy.exits)} times in "
                    f"{self.cfg.restart_window_secs:.0f}s (last: {reason}).",
                    evidence={"exits": len(st.policy.exits), "last_exit": reason},
                    undo="none needed: it is retried and counts as running again after a "
                         "whole window without a crash",
                    notify=(f"The {name} actor failed {len(st.policy.exits)} times in "
                            f"{self.cfg.restart_window_secs:.0f}s (last: {reason}). It is "
                            f"marked failed; I retry it after {decision.delay:.0f}s, then less "
                            f"and less often. Its log is logs/{name}.log."),
                ))
                self.announce.soon(self._diagnose(name))
            else:
                self.announce.soon(self.announce.intervene(
                    "restart", name, f"Restarting the {name} actor.", exit_sentence(reason),
                    ref=f"flatline:restart:{name}:{st.proc.pid}", evidence={"exit": reason},
                ))
            log.warning("%s exited (%s); restarting in %.1fs", name, reason, decision.delay)
            await self._publish_status()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), decision.delay)

    async def _diagnose(self, name: str) -> None:
        """Crash loops are what the rules cannot explain: ask the flatline model, if any."""
        why_not = await self.flatline.diagnoser.ask(name, log_tail(self._logs / f"{name}.log"))
        if why_not:
            log.info("no diagnosis of %s: %s", name, why_not)

    async def _recovered(self, name: str) -> None:
        self.actors[name].state = "running"
        await self.announce.intervene(
            "recovered", name, f"The {name} actor is running again.",
            f"It ran {self.cfg.restart_window_secs:.0f}s without a crash.",
            notify=f"The {name} actor has been running for "
                   f"{self.cfg.restart_window_secs:.0f}s without a crash; it is no longer failed.",
        )

    async def _nats_restarted(self, reason: str, down_for: float) -> None:
        self.view.nats_restarted()
        if self.runtime_file is not None and self.nats is not None:
            update_runtime(self.runtime_file, nats_pid=self.nats.pid)
        await self.announce.intervene(
            "nats_restart", "nats-server", "Restarted the embedded NATS server.",
            exit_sentence(reason), evidence={"down_secs": round(down_for, 2), "pid": self.nats and
                                       self.nats.pid},
            notify=(f"The embedded NATS server stopped ({reason}); I restarted it on the same "
                    f"port and store after {down_for:.1f}s. Actors reconnect by themselves; "
                    "messages in flight are redelivered."),
        )
        await self._publish_status()

    # -- health ------------------------------------------------------------------------------

    def is_healthy(self, name: str, now: float | None = None) -> bool:
        pid = self.actors[name].pid
        if self.spawn and pid is None:
            return False
        return self.view.is_healthy(name, pid if self.spawn else None, now or time.time())

    async def _watch_health(self) -> None:
        rounds = 0
        while True:
            try:
                if await self.view.refresh():
                    if self.spawn:
                        await self.watch.kill_hung(self.actors)
                        now = time.time()
                        for name, st in self.actors.items():
                            if st.pid and st.policy.check_recovered(now - st.started):
                                await self._recovered(name)
                    else:
                        await self.watch.announce_changes(self.actors, self._since)
                    if rounds % 3 == 0:
                        await self.flatline.refresh()
                    await self._publish_status()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - NATS restarting; next round
                log.warning("health round failed: %s", exc)
            rounds += 1
            await asyncio.sleep(self.cfg.health_interval_secs)

    # -- reporting ---------------------------------------------------------------------------

    def status(self) -> SupervisorStatus:
        return build_status(self)

    async def _publish_status(self) -> None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.bus.kv_put(
                self.bus.subjects.kv_state, "supervisor", self.status()), 3)

    async def _on_dead_letter(self, letter: DeadLetter) -> None:
        self.dead_letters += 1
        log.warning("dead letter from %s on %s: %s", letter.actor, letter.subject, letter.reason)
