"""Judging an actor's health record, shared by the supervisor (over KV) and `wintermute probe`
(over the file each actor keeps next to itself, for Kubernetes liveness/readiness probes)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from contracts.ops import Health


def stale_reason(h: Health, now: float, stale_after: float, floor: float = 0.0) -> str:
    """Why this record shows a stuck actor, or "". `floor`: ages count from no earlier than
    this (e.g. when NATS came back after an outage nobody could report through)."""
    if now - max(h.ts, floor) > stale_after:
        return f"it has not reported health for {now - h.ts:.0f}s"
    for loop, ts in h.loops.items():
        if now - max(ts, floor) > stale_after + h.periods.get(loop, 0.0):
            return f"its {loop} loop made no progress for {now - ts:.0f}s"
    return ""


def local_health_path(home: Path, actor: str) -> Path:
    """Where an actor process writes its latest health record on its own machine or pod: under
    TMPDIR (a pod's own /tmp), keyed by the home so two instances on one machine never mix."""
    key = hashlib.sha256(str(home.resolve()).encode()).hexdigest()[:12]
    base = Path(os.environ.get("TMPDIR") or "/tmp")
    return base / f"wintermute-{key}" / f"{actor}.health.json"
