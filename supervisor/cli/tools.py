"""`wintermute tools` and `wintermute revert`: agent-created tools of the running instance.

Listing reads what the executor published in KV (so it works while the executor restarts);
revert is a command to the executor, which owns scripts/, and waits for its answer.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, Literal

import msgspec

from bus import Delivery, codec
from contracts import ScriptsRevert, ScriptsReverted
from contracts.config import Settings
from contracts.records import CatalogRow
from state.holds import tool_status
from supervisor.cli.client import connect

CATALOG_KEY = "tools.catalog"
_reverted = codec.decoder_for(ScriptsReverted)


class NotReported(Exception):
    """The executor has not published its tools yet."""


async def gather_tools(settings: Settings) -> list[dict[str, Any]]:
    """Every tool with status (ok, offered, not offered, broken, quarantined) and _meta."""
    bus = await connect(settings, "tools")
    try:
        catalog = await bus.kv_get_as(bus.subjects.kv_state, CATALOG_KEY, list[CatalogRow])
        if catalog is None:
            raise NotReported("The executor has not reported its tools yet; is `wintermute up` "
                              "running?")
        rows: list[dict[str, Any]] = msgspec.to_builtins(catalog)
        for row in rows:
            row["status"], row["status_reason"] = _status(row)
            hold = await tool_status(bus, row["name"])
            if hold is not None and hold.status == "quarantined":
                row["status"] = "quarantined"
                row["status_reason"] = hold.reason
        return rows
    finally:
        await bus.close()


def _status(row: dict[str, Any]) -> tuple[str, str]:
    if row.get("kind") == "core":
        return "ok", ""
    if row.get("problem"):
        return "broken", str(row["problem"])
    if row.get("offered"):
        return "offered", ""
    return "idle", "not offered: over budget.max_dynamic_tools_per_turn and used less recently"


def render_tools(rows: list[dict[str, Any]]) -> str:
    """A table: name, kind, status, version, calls, success rate, average time, last use."""
    table = [("NAME", "KIND", "STATUS", "VER", "CALLS", "OK%", "AVG MS", "LAST USED")]
    notes = []
    for r in rows:
        meta = r.get("meta") or {}
        rate = meta.get("success_rate")
        table.append((
            r["name"], r["kind"], r["status"], str(meta.get("version", "")) if meta else "",
            str(meta.get("invocations", "")) if meta else "",
            f"{rate * 100:.0f}" if rate is not None else "",
            str(meta.get("avg_duration_ms") or "") if meta else "",
            (meta.get("last_used") or "")[:19].replace("T", " "),
        ))
        if r.get("status_reason") and r["status"] != "idle":
            notes.append(f"{r['name']}: {r['status_reason']}")
        elif meta.get("last_error") and meta.get("consecutive_failures"):
            last = " ".join(str(meta["last_error"]).split())[:160]
            notes.append(f"{r['name']}: last error: {last}")
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
             for row in table]
    return "\n".join(lines + ([""] + notes if notes else []))


async def revert_scripts(settings: Settings, timeout: float,
                         repo: Literal["scripts", "skills"] = "scripts") -> tuple[bool, str]:
    """Ask the executor to undo the last commit of scripts/ (or skills/); (ok, what it said)."""
    bus = await connect(settings, "revert")
    try:
        request = ScriptsRevert(id=f"cli:{uuid.uuid4().hex}", principal="cli", is_owner=True,
                                repo=repo)
        answer: asyncio.Future[ScriptsReverted] = asyncio.get_running_loop().create_future()

        async def on_msg(raw: Delivery) -> None:
            try:
                msg = _reverted.decode(raw.data)
            except (msgspec.DecodeError, msgspec.ValidationError):
                return
            if msg.request_id == request.id and not answer.done():
                answer.set_result(msg)

        subject = bus.subjects.route(ScriptsReverted, request_id=request.id)
        await bus.subscribe(subject, on_msg)
        await bus.send(request)
        try:
            done = await asyncio.wait_for(answer, timeout)
        except TimeoutError:
            return False, (f"The executor did not answer within {timeout:.0f}s; the revert "
                           "stays queued and runs when the executor is back. Check "
                           "`wintermute status`.")
        return done.ok, done.text
    finally:
        await bus.close()
