"""Flatline's shared records in KV: tool quarantine (wm_tools) and disabled scheduled tasks.

The supervisor writes them; the executor (quarantine) and the heartbeat (disabled tasks) obey
them; the owner lifts them with `wintermute tools release NAME`, `/tools release NAME` or
`wintermute tasks enable NAME`. Every lift is recorded as an intervention event.
"""

from __future__ import annotations

import time
from typing import Any

import msgspec

from bus import Bus
from contracts import Intervention, subject_token
from contracts.records import TaskHold, ToolHold


def tool_key(name: str) -> str:
    """The wm_tools key of a tool (tool names are already safe; this keeps odd ones legal)."""
    return subject_token(name)


def window_key(name: str) -> str:
    """The wm_state key of a tool's recent outcomes, kept by the supervisor."""
    return f"flatline.tool.{subject_token(name)}"


def task_key(name: str) -> str:
    """The wm_state key of a scheduled task's failure count and status."""
    return f"task.{subject_token(name)}"


async def tool_status(bus: Bus, name: str) -> ToolHold | None:
    """The tool's hold record, or None when the supervisor never touched it."""
    return await bus.kv_get_as(bus.subjects.kv_tools, tool_key(name), ToolHold)


async def put_tool_status(bus: Bus, name: str, record: ToolHold) -> None:
    await bus.kv_put(bus.subjects.kv_tools, tool_key(name), record)


async def quarantined_tools(bus: Bus) -> dict[str, ToolHold]:
    """Every quarantined tool with its record."""
    out: dict[str, ToolHold] = {}
    for key in await bus.kv_keys(bus.subjects.kv_tools):
        record = await bus.kv_get_as(bus.subjects.kv_tools, key, ToolHold)
        if record is not None and record.status == "quarantined":
            out[key] = record
    return out


async def disabled_tasks(bus: Bus) -> dict[str, TaskHold]:
    """Every scheduled task the supervisor disabled, with its record."""
    out: dict[str, TaskHold] = {}
    for key in await bus.kv_keys(bus.subjects.kv_state, "task."):
        record = await bus.kv_get_as(bus.subjects.kv_state, key, TaskHold)
        if record is not None and record.status == "disabled":
            out[record.task or key[5:]] = record
    return out


async def task_status(bus: Bus, name: str) -> TaskHold:
    """A scheduled task's record: status (enabled | disabled), failures in a row, reason."""
    record = await bus.kv_get_as(bus.subjects.kv_state, task_key(name), TaskHold)
    return record if record is not None else TaskHold(task=name)


async def put_task_status(bus: Bus, name: str, record: TaskHold) -> None:
    await bus.kv_put(bus.subjects.kv_state, task_key(name), record)


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
    if current is None or current.status != "quarantined":
        return f"The tool {name} is not quarantined; nothing to release."
    await put_tool_status(bus, name, ToolHold(
        status="active", released_at=time.time(), released_by=by,
        previous_reason=current.reason,
    ))
    # Its old failures no longer count; the supervisor also ignores outcomes before released_at.
    await bus.kv_delete(bus.subjects.kv_state, window_key(name))
    await _record(bus, "release", name, f"Released the tool {name}.",
                  f"{by} lifted the quarantine.", by,
                  {"quarantine": msgspec.to_builtins(current)})
    return (
        f"Released the tool {name}; the executor runs it again. It had been quarantined because "
        f"{current.reason or 'it kept failing'}."
    )


async def enable_task(bus: Bus, name: str, by: str) -> str:
    """Re-enable a scheduled task the supervisor disabled; a sentence saying what happened."""
    current = await task_status(bus, name)
    if current.status != "disabled":
        return f"The scheduled task {name} is not disabled; nothing to enable."
    await put_task_status(bus, name, TaskHold(
        task=name, status="enabled", failures=0, enabled_at=time.time(), enabled_by=by,
    ))
    await _record(bus, "enable_task", name, f"Enabled the scheduled task {name} again.",
                  f"{by} re-enabled it.", by, {"was": msgspec.to_builtins(current)})
    return f"The scheduled task {name} is enabled again; it runs at its next scheduled time."
