"""Replicas: `[actors.<name>] replicas = N` runs N processes of one actor on its durables.

The supervised process (replica 0) starts N-1 more of itself and keeps them running; they
pull from the same durable consumers, so JetStream hands each message to one of them and
redelivers what a dead one held after `ack_wait`. Only replica 0 reports health (the
supervisor watches one process per actor, and the health key is the actor's); the others
die with it (PR_SET_PDEATHSIG), so a kill -9 of the actor or of `up` leaves no orphan, and
the supervisor's restart of replica 0 brings them all back. Which actors may scale, and why
the others may not, is `contracts.routes.SCALABLE`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys

log = logging.getLogger(__name__)

#: Set in the environment of replicas 1..N-1 (absent in the supervised process).
REPLICA_VAR = "WINTERMUTE_REPLICA"
_PR_SET_PDEATHSIG = 1
RESTART_DELAY = 1.0


def index() -> int:
    """This process's replica number (0: the supervised one)."""
    try:
        return int(os.environ.get(REPLICA_VAR, "0"))
    except ValueError:
        return 0


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    import ctypes  # already loaded by Replicas(): a lookup, no import after fork

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class Replicas:
    """Replicas 1..count-1 of `name`, each restarted when it exits, stopped with SIGTERM."""

    def __init__(self, name: str, count: int) -> None:
        import ctypes  # noqa: F401 - for _die_with_parent; not in every actor at rest (0.5 MB)

        self.name = name
        self.count = count
        self.command = [sys.executable, "-m", "actors", name]
        self.procs: dict[int, asyncio.subprocess.Process] = {}
        self.restarts = 0
        self._stopping = False

    def pids(self) -> dict[str, int]:
        return {str(i): p.pid for i, p in self.procs.items() if p.returncode is None}

    async def _spawn(self, i: int) -> asyncio.subprocess.Process:
        env = {**os.environ, REPLICA_VAR: str(i)}
        return await asyncio.create_subprocess_exec(
            *self.command, env=env,
            stdin=asyncio.subprocess.DEVNULL, preexec_fn=_die_with_parent)

    async def _keep(self, i: int) -> None:
        while not self._stopping:
            proc = self.procs[i] = await self._spawn(i)
            log.info("replica %d of %s started (pid %d)", i, self.name, proc.pid)
            code = await proc.wait()
            if self._stopping:
                return
            self.restarts += 1
            log.warning("replica %d of %s exited (code %s); restarting in %.0f s", i,
                        self.name, code, RESTART_DELAY)
            await asyncio.sleep(RESTART_DELAY)

    async def run(self) -> None:
        """Keep every replica running until cancelled; then stop them (SIGTERM, wait)."""
        try:
            await asyncio.gather(*(self._keep(i) for i in range(1, self.count)))
        finally:
            self._stopping = True
            await self.stop(grace=10.0)

    async def stop(self, grace: float) -> None:
        """SIGTERM every replica; kill one that is still running after `grace` seconds."""
        self._stopping = True
        live = [p for p in self.procs.values() if p.returncode is None]
        for p in live:
            with contextlib.suppress(ProcessLookupError):
                p.send_signal(signal.SIGTERM)
        for p in live:
            try:
                await asyncio.wait_for(p.wait(), grace)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    p.kill()
                await p.wait()
