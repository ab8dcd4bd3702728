"""`wintermute tasks [--json]` and `wintermute tasks run NAME`: the heartbeat's schedule.

The heartbeat publishes its schedule (every job with its next fire time and last outcome) to
the `wm_state` key `schedule`; Flatline's holds say which tasks it disabled; the budget
counters say what each task's session spent.
"""

from __future__ import annotations

import time
from typing import Any

import msgspec

from bus import Bus
from contracts import Sink, TurnRequest
from contracts.config import Settings
from contracts.records import Schedule
from state import budget
from state.holds import disabled_tasks
from supervisor.cli.client import connect


async def _schedule(bus: Bus) -> dict[str, Any]:
    """The heartbeat's published schedule as plain data ({} before it published one)."""
    doc = await bus.kv_get_as(bus.subjects.kv_state, "schedule", Schedule)
    return msgspec.to_builtins(doc) if doc is not None else {}


async def gather_tasks(settings: Settings) -> dict[str, Any]:
    bus = await connect(settings, "tasks")
    try:
        doc = await _schedule(bus)
        disabled = await disabled_tasks(bus)
        jobs = []
        for job in doc.get("jobs") or []:
            name = str(job.get("name"))
            spent = await budget.used(bus, budget.session_key(f"task:{name}"))
            hold = disabled.get(name)
            jobs.append({**{k: v for k, v in job.items() if k != "prompt"}, "tokens": spent,
                         "disabled": bool(hold),
                         "disabled_reason": hold.reason if hold else ""})
        return {"running": bool(doc), "enabled": doc.get("enabled", True), "jobs": jobs}
    finally:
        await bus.close()


def _when(ts: Any) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(float(ts))) if ts else "-"


def render_tasks(view: dict[str, Any]) -> str:
    if not view["running"]:
        return "The heartbeat has not published a schedule (is `wintermute up` running?)."
    if not view["enabled"]:
        return "The heartbeat is off (heartbeat.enabled = false in agent.toml): nothing fires."
    if not view["jobs"]:
        return ("Nothing is scheduled. Add [[scheduled_tasks]] to agent.toml or sections to "
                "HEARTBEAT.md; the heartbeat picks them up without a restart.")
    lines = [f"{'name':24} {'kind':9} {'schedule':24} {'next':16} {'last':16} {'tokens':>8}  outcome"]
    for j in view["jobs"]:
        outcome = "disabled: " + j["disabled_reason"] if j["disabled"] else (j.get("outcome") or "-")
        lines.append(f"{j['name'][:24]:24} {j['kind']:9} {j['when'][:24]:24} {_when(j.get('next')):16} "
                     f"{_when(j.get('last')):16} {j['tokens']:>8}  {outcome}")
    return "\n".join(lines)


async def run_task(settings: Settings, name: str) -> tuple[bool, str]:
    """Fire one job now, as the heartbeat would; (done, sentence)."""
    bus = await connect(settings, "tasks-run")
    try:
        jobs = {str(j.get("name")): j for j in (await _schedule(bus)).get("jobs") or []}
        job = jobs.get(name)
        if job is None:
            known = ", ".join(sorted(jobs)) or "none"
            return False, f"There is no scheduled job {name!r} (known: {known})."
        if job.get("kind") == "review":
            return False, ("The tool review is not a turn: it runs on heartbeat.tool_review's "
                           "schedule, or edit that cron in agent.toml to run it sooner.")
        if job.get("kind") == "dream":
            return False, ("Dreaming is not a turn: `wintermute memory dream` runs it now "
                           "(heartbeat.dreaming in agent.toml is its schedule).")
        text = str(job.get("prompt") or f"Run the scheduled task {name}.")
        text = text.replace("{now}", time.strftime("%Y-%m-%d %H:%M %Z")).replace(
            "{upcoming}", "see `wintermute tasks`")
        hb = settings.agent.heartbeat
        own = next((t.budget_tokens for t in settings.agent.scheduled_tasks if t.name == name), 0)
        proactive = job.get("kind") == "proactive"
        turn = TurnRequest(
            id=f"task:{name}:manual-{time.time_ns()}", session=f"task:{name}",
            principal="heartbeat", text=text, reply_to=Sink.parse(str(job["sink"])),
            is_owner=True, origin="schedule", principal_kind="cron",
            budget_tokens=hb.proactive_budget if proactive else own,
            purpose="proactive" if proactive else "heartbeat")
        await bus.send(turn)
        return True, f"Fired {name} now; its answer goes to {job['sink']}."
    finally:
        await bus.close()
