"""The monthly tool review (seed 000): agent-created tools that went unused or keep failing,
from their `_meta`, proposed to the owner for archiving. Nothing is archived without the owner's
approval: the proposal is an approval request whose call is the executor's `archive_tools`."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from contracts import ApprovalRequest, Sink, ToolRequest
from contracts.config import HeartbeatConfig
from contracts.records import CatalogRow, ToolMeta

if TYPE_CHECKING:
    from actors.heartbeat.actor import HeartbeatActor

log = logging.getLogger(__name__)

SESSION = "task:tool_review"


def _age_days(stamp: str | None, now: float) -> float | None:
    if not stamp:
        return None
    try:
        when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return (now - when.timestamp()) / 86400


def findings(meta: dict[str, ToolMeta], existing: list[str], cfg: HeartbeatConfig,
             now: float) -> dict[str, str]:
    """Tool name -> why it is proposed, for the agent-created tools that exist now."""
    out: dict[str, str] = {}
    days = cfg.tool_review_unused_days
    for name in sorted(existing):
        m = meta.get(name)
        if m is None:
            continue
        rate = m.success_rate
        if m.invocations >= 3 and rate is not None and rate < cfg.tool_review_min_success:
            out[name] = (f"failing: {rate:.0%} of {m.invocations} calls succeeded"
                         + (f", last error: {m.last_error[:80]}" if m.last_error else ""))
            continue
        used = _age_days(m.last_used, now)
        born = _age_days(m.created_at, now)
        if used is None and born is not None and born >= days:
            out[name] = f"never used in the {born:.0f} days since it was created"
        elif used is not None and used >= days:
            out[name] = f"unused for {used:.0f} days"
    return out


async def propose(actor: HeartbeatActor, suffix: str, now: float) -> str:
    """Send the owner an archive proposal if any tool qualifies; the outcome for the schedule."""
    bus, s = actor.bus, actor.subjects
    meta = await bus.kv_get_as(s.kv_state, "tools.meta", dict[str, ToolMeta]) or {}
    catalog = await bus.kv_get_as(s.kv_state, "tools.catalog", list[CatalogRow]) or []
    existing = [row.name for row in catalog if row.kind == "agent"]
    found = findings(meta, existing, actor.settings.agent.heartbeat, now)
    if not found:
        log.info("tool review: nothing to archive among %d agent tools", len(existing))
        return "nothing to archive"
    sink = Sink.parse(actor.config.owner.sink)
    names = sorted(found)
    why = "; ".join(f"{n}: {found[n]}" for n in names)
    run_id = f"{SESSION}:{suffix}"
    call = ToolRequest(
        id=f"{run_id}:archive", session=SESSION, turn_id=run_id, step=0, call_id="archive",
        name="archive_tools", arguments={"names": names, "reason": "monthly tool review"},
        is_owner=True, reply_to=sink,
    )
    request = ApprovalRequest(
        id=f"{run_id}:approval", session=SESSION,
        summary=f"archive_tools: {', '.join(names)}"[:500],
        reason=(f"the monthly tool review proposes archiving them ({why}); they move to "
                "scripts/archive/ and /revert brings them back")[:1000],
        call=call, sink=sink,
    )
    await actor.send(request)
    log.info("tool review: proposed archiving %s", ", ".join(names))
    return f"proposed archiving {len(names)} tool{'s' if len(names) != 1 else ''}"
