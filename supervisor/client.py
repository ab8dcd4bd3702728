"""Connecting a CLI command (status, chat, tap, approve) to a running instance."""

from __future__ import annotations

import json
import sys
from typing import Any

from bus import Bus
from contracts.config import Settings
from supervisor.up import running_instance


def nats_url(settings: Settings) -> str:
    """The configured URL, else the one the running `up` for this home recorded."""
    if settings.config.nats.url:
        return settings.config.nats.url
    info = running_instance(settings.home)
    if info is None:
        sys.exit(
            f"wintermute is not running for {settings.home}: start it with `wintermute up` "
            "(or set [nats] url / WM__NATS__URL to an existing server)."
        )
    return str(info["nats_url"])


async def connect(settings: Settings, name: str) -> Bus:
    bus = Bus(nats_url(settings), settings.config.nats.prefix, name=f"wintermute-{name}")
    try:
        await bus.connect(timeout=5, credentials=settings.config.nats.credentials)
    except ConnectionError as exc:
        sys.exit(str(exc))
    return bus


async def gather_status(settings: Settings) -> dict[str, Any]:
    """Supervisor view + health + stream counts, as `status --json` prints it."""
    bus = await connect(settings, "status")
    try:
        raw = await bus.kv_get(bus.subjects.kv_state, "supervisor")
        status: dict[str, Any] = json.loads(raw) if raw else {"actors": [], "nats": {}}
        info = running_instance(settings.home)
        status["nats"] = {
            "url": bus.url,
            "pid": info.get("nats_pid") if info else status.get("nats", {}).get("pid"),
        }
        streams = {}
        for spec in bus.subjects.streams():
            try:
                si = await bus.js.stream_info(spec.name)
                streams[spec.name] = {"messages": si.state.messages, "bytes": si.state.bytes}
            except Exception:  # noqa: BLE001 - not provisioned yet
                streams[spec.name] = {"messages": 0, "bytes": 0}
        status["streams"] = streams
        return status
    finally:
        await bus.close()


def render_status(status: dict[str, Any]) -> str:
    """A readable table of actors, then NATS and stream counts."""
    rows = [("ACTOR", "PID", "HEALTHY", "STATE", "RESTARTS", "LAST EXIT")]
    for a in status.get("actors", []):
        rows.append((
            a["name"], str(a.get("pid") or "-"), "yes" if a.get("healthy") else "NO",
            a.get("state", ""), str(a.get("restarts", 0)), a.get("last_exit") or "",
        ))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    nats = status.get("nats", {})
    lines.append("")
    lines.append(f"nats: {nats.get('url')} (pid {nats.get('pid') or 'external'})")
    for name, s in status.get("streams", {}).items():
        lines.append(f"stream {name}: {s['messages']} messages")
    return "\n".join(lines)
