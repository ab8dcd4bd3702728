"""Flatline's shared records in KV: tool quarantine (wm_tools) and disabled scheduled tasks.

The supervisor writes them; the executor (quarantine) and the heartbeat (disabled tasks) obey
them; the owner lifts them with `wintermute tools release NAME`, `/tools release NAME` or
`wintermute tasks enable NAME`. Every lift is recorded as an intervention event.
"""

from __future__ import annotations

import json
import time
from typing import Any

from bus import Bus
from contracts import Intervention, subject_token


def tool_key(name: str) -> str:
    """The wm_tools key of a tool (tool names are already safe; this keeps odd ones legal)."""
    return subject_token(name)


def window_key(name: str) -> str:
    """The wm_state key of a tool's recent outcomes, kept by the supervisor."""
    return f"flatline.tool.{subject_token(name)}"


def task_key(name: str) -> str:
    """The wm_state key of a scheduled task's failure count and status."""
    return f"task.{subject_token(name)}"


async def _get_json(bus: Bus, bucket: str, key: str) -> dict[str, Any] | None:
    raw = await bus.kv_get(bucket, key)
    if not raw:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


async def _put_json(bus: Bus, bucket: str, key: str, value: dict[str, Any]) -> None:
    await bus.kv_put(bucket, key, json.dumps(value).encode())


async def tool_status(bus: Bus, name: str) -> dict[str, Any] | None:
    """The tool's status record, or None when the supervisor never touched it."""
    return await _get_json(bus, bus.subjects.kv_tools, tool_key(name))


async def quarantined_tools(bus: Bus) -> dict[str, dict[str, Any]]:
    """Every quarantined tool with its record."""
    out: dict[str, dict[str, Any]] = {}
    for key in await bus.kv_keys(bus.subjects.kv_tools):
        record = await _get_json(bus, bus.subjects.kv_tools, key)
        if record and record.get("status") == "quarantined":
            out[key] = record
    return out


async def disabled_tasks(bus: Bus) -> dict[str, dict[str, Any]]:
    """Every scheduled task the supervisor disabled, with its record."""
    out: dict[str, dict[str, Any]] = {}
    for key in await bus.kv_keys(bus.subjects.kv_state, "task."):
        record = await _get_json(bus, bus.subjects.kv_state, key)
        if record and record.get("status") == "disabled":
            out[str(record.get("task") or key[5:])] = record
    return out


async def task_status(bus: Bus, name: str) -> dict[str, Any]:
    """A scheduled task's record: status (enabled | disabled), failures in a row, reason."""
    return await _get_json(bus, bus.subjects.kv_state, task_key(name)) or {
        "task": name, "status": "enabled", "failures": 0,
    }


async def put_task_status(bus: Bus, name: str, record: dict[str, Any]) -> None:
    await _put_json(bus, bus.subjects.kv_state, task_key(name), record)


async def _record(bus: Bus, kind: str, target: str, action: str, reason: str, by: str,
                  evidence: dict[str, Any]) -> None:
    iv = Intervention(
        id=f"flatline:{kind}:{target}:{time.time_ns()}", kind=kind, target=target,
        action=action, reason=reason, evidence={**evidence, "by": by}, outcome="done",
    )
    await bus.send(iv)


async def release_tool(bus: Bus, name: str, by: str) -> str:
    """Lift a tool's quarantine; a sentence saying what happened."""
    current = await tool_status(bus, name)
    if not current or current.get("status") != "quarantined":
        return f"The tool {name} is not quarantined; nothing to release."
    now = time.time()
    await _put_json(bus, bus.subjects.kv_tools, tool_key(name), {
        "status": "active", "released_at": now, "released_by": by,
        "previous_reason": current.get("reason", ""),
    })
    # Its old failures no longer count; the supervisor also ignores outcomes before released_at.
    await bus.kv_put(bus.subjects.kv_state, window_key(name), b"")
    await _record(bus, "release", name, f"Released the tool {name}.",
                  f"{by} lifted the quarantine.", by, {"quarantine": current})
    return (
        f"Released the tool {name}; the executor runs it again. It had been quarantined because "
        f"{current.get('reason') or 'it kept failing'}."
    )


async def enable_task(bus: Bus, name: str, by: str) -> str:
    """Re-enable a scheduled task the supervisor disabled; a sentence saying what happened."""
    current = await task_status(bus, name)
    if current.get("status") != "disabled":
        return f"The scheduled task {name} is not disabled; nothing to enable."
    await put_task_status(bus, name, {
        "task": name, "status": "enabled", "failures": 0, "enabled_at": time.time(),
        "enabled_by": by,
    })
    await _record(bus, "enable_task", name, f"Enabled the scheduled task {name} again.",
                  f"{by} re-enabled it.", by, {"was": current})
    return f"The scheduled task {name} is enabled again; it runs at its next scheduled time."
