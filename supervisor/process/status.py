"""What `wintermute status` shows, as the supervisor publishes it, and data/runtime.json."""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from msgspec.structs import replace

from contracts.records import ActorStatus, NatsStatus, SupervisorStatus
from kit.private import private_dir, write_private

if TYPE_CHECKING:
    from supervisor.process.supervisor import Supervisor


def build_status(sup: Supervisor) -> SupervisorStatus:
    """Actors (pid, health, restarts, last crash), NATS, failed actors, Flatline's holds."""
    now = time.time()
    actors = []
    for name, st in sup.actors.items():
        h = sup.view.health.get(name)
        actors.append(ActorStatus(
            name=name,
            pid=st.pid if sup.spawn else (h.pid if h else None),
            healthy=sup.is_healthy(name, now),
            state=st.state if sup.spawn else ("running" if h else "unknown"),
            policy=st.policy.kind,
            restarts=st.restarts,
            last_exit=st.last_exit,
            last_crash=st.last_crash or None,
            uptime_secs=round(now - st.started, 1) if st.pid else 0,
            handled=h.handled if h else 0,
            info=h.info if h else {},
        ))
    nats = NatsStatus(url=sup.nats_url, pid=sup.nats.pid if sup.nats else None,
                      embedded=sup.nats is not None)
    if sup.nats is not None:
        nats = replace(nats, restarts=sup.nats.restarts, last_exit=sup.nats.last_exit)
    return SupervisorStatus(
        updated=now,
        mode="spawn" if sup.spawn else "watch",
        nats=nats,
        actors=actors,
        failed=[a.name for a in actors if a.state == "failed"],
        quarantined=dict(sup.flatline.quarantined),
        disabled_tasks=dict(sup.flatline.disabled),
        interventions=list(sup.announce.recent)[-10:],
        dead_letters_seen=sup.dead_letters,
        metrics_url=sup.metrics_url,
    )


def write_runtime(path: Path, data: dict[str, Any]) -> None:
    """Write data/runtime.json atomically (NATS URL and pids, for status/chat/tap)."""
    private_dir(path.parent)
    write_private(path, json.dumps(data, indent=2))


def update_runtime(path: Path, **changes: Any) -> None:
    """Change a few fields of data/runtime.json (e.g. the nats pid after a restart)."""
    with contextlib.suppress(OSError, ValueError):
        data = json.loads(path.read_text())
        data.update(changes)
        write_runtime(path, data)
