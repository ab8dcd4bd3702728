"""What `wintermute status` shows, as the supervisor publishes it, and data/runtime.json."""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from msgspec.structs import replace

from contracts import Health
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
        storage=sup.storage.info if sup.storage is not None else {},
    )


def judge(status: dict[str, Any], health: dict[str, Health], now: float,
          stale_after: float) -> dict[str, Any]:
    """Check the supervisor's record against the actors' own health reports.

    The record is only as fresh as the supervisor's last write: when it stopped (a full disk,
    a hung supervisor) it is flagged stale with its age, and each actor's health is taken from
    what the actor itself last reported. The planner's report lists turns in progress.
    """
    updated = float(status.get("updated") or 0)
    status["age_secs"] = round(now - updated, 1) if updated else None
    status["stale"] = not updated or now - updated > stale_after
    known = {a["name"] for a in status.get("actors", [])}
    for name in sorted(set(health) - known):
        status.setdefault("actors", []).append({"name": name, "state": "unknown"})
    for actor in status.get("actors", []):
        h = health.get(actor["name"])
        actor["health_age_secs"] = round(now - h.ts, 1) if h else None
        if status["stale"]:
            actor["healthy"] = h is not None and now - h.ts <= stale_after
            actor["pid"] = actor.get("pid") or (h.pid if h else None)
    planner = health.get("planner")
    turns = dict(planner.info) if planner else {}
    status["turns"] = {"active_turns": turns.get("active_turns", 0),
                       "stuck_turns": turns.get("stuck_turns", 0),
                       "turns": turns.get("turns", [])}
    return status


def status_warnings(status: dict[str, Any]) -> list[str]:
    """Plain sentences for `status` about what is wrong beyond the actor table."""
    lines = []
    if status.get("stale"):
        age = status.get("age_secs")
        when = f"is {age:.0f} s old" if age is not None else "is missing"
        lines.append(
            f"WARNING: the supervisor's status record {when}: the supervisor is not updating it "
            "(is `wintermute up` running? is the disk full?). Health below is from the actors' "
            "own reports.")
    storage = status.get("storage") or {}
    if storage.get("full"):
        lines.append(f"WARNING: {storage.get('note', 'the message store is full')}")
    turns = status.get("turns") or {}
    if turns.get("active_turns"):
        lines.append(f"turns in progress: {turns['active_turns']}, stuck: "
                     f"{turns.get('stuck_turns', 0)}")
        for t in turns.get("turns", []):
            if t.get("stuck") or t.get("age_secs", 0) > 120:
                mark = "STUCK" if t.get("stuck") else "long-running"
                lines.append(
                    f"  {mark} {t['session']}: {t['phase']} step for {t['step_secs']:.0f} s, "
                    f"turn {t['age_secs']:.0f} s old, {t.get('queued', 0)} waiting"
                    + (f" ({t['progress']})" if t.get("progress") else "")
                    + (" - /reset in that chat clears it" if t.get("stuck") else ""))
    return lines


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
