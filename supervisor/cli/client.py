"""Connecting a CLI command (status, chat, tap, approve) to a running instance."""

from __future__ import annotations

import sys
import time
from typing import Any

import msgspec

from bus import Bus
from contracts import Health
from contracts.config import Settings
from contracts.records import ExecutorFacts, MemoryFacts, SupervisorStatus
from kit.skillmd import problem_line
from state import budget, budget_view
from state.holds import disabled_tasks, quarantined_tools
from supervisor.process.status import judge, status_warnings
from supervisor.process.storage import live_report
from supervisor.process.up import running_instance


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


def nats_login(settings: Settings) -> dict[str, str]:
    """`Bus.connect` arguments: the configured NATS user, else the `cli` user of the embedded
    server (if it has users)."""
    cfg = settings.config.nats
    if cfg.user or cfg.url or cfg.credentials or cfg.seed:
        return {"credentials": cfg.credentials, "user": cfg.user, "password": cfg.password,
                "seed": cfg.seed, "api_prefix": cfg.api_prefix}
    info = running_instance(settings.home)
    if info is None or not info.get("nats_keys"):
        return {}
    from supervisor.process.natsauth import connect_kwargs, seed_file

    found = connect_kwargs(settings.home, "cli")
    if not found:
        sys.exit(f"The NATS key {seed_file(settings.home, 'cli')} is missing or unreadable; "
                 "restart `wintermute up` to create it again.")
    return found


async def connect(settings: Settings, name: str) -> Bus:
    """Connect a CLI command as the `cli` user (embedded) or as configured (external NATS)."""
    url, login = nats_url(settings), nats_login(settings)
    bus = Bus(url, settings.config.nats.prefix, name=f"wintermute-{name}")
    try:
        await bus.connect(timeout=10, **login)
    except ConnectionError as exc:
        if "authorization" in str(exc).lower():
            user = login.get("user") or ("the cli key" if login.get("seed") else "")
            who = f"the user {user}" if user else "a connection without a user"
            sys.exit(f"NATS at {url} refused {who}. For the embedded server leave [nats] url "
                     "unset (CLI commands then use its `cli` user); for your own server set "
                     "nats.user/nats.password or nats.credentials.")
        sys.exit(str(exc))
    return bus


async def gather_status(settings: Settings) -> dict[str, Any]:
    """Supervisor view + health + stream counts, as `status --json` prints it."""
    bus = await connect(settings, "status")
    try:
        record = await bus.kv_get_as(bus.subjects.kv_state, "supervisor", SupervisorStatus)
        status: dict[str, Any] = (msgspec.to_builtins(record) if record is not None
                                  else {"actors": [], "nats": {}})
        info = running_instance(settings.home)
        nats = dict(status.get("nats") or {})
        nats["url"] = bus.url
        if info and info.get("nats_pid"):
            nats["pid"] = info["nats_pid"]  # runtime.json follows restarts of the server too
        status["nats"] = nats
        # Flatline's holds straight from KV: right even while the supervisor restarts.
        status["quarantined"] = msgspec.to_builtins(await quarantined_tools(bus))
        status["disabled_tasks"] = msgspec.to_builtins(await disabled_tasks(bus))
        streams = {}
        for spec in bus.subjects.streams():
            try:
                si = await bus.stream_state(spec.name)
            except Exception:  # noqa: BLE001 - no answer: counted as empty
                si = None
            streams[spec.name] = {"messages": si.messages if si else 0,
                                  "bytes": si.bytes if si else 0}
        status["streams"] = streams
        facts = await bus.kv_get_as(bus.subjects.kv_state, "executor", ExecutorFacts)
        status["executor"] = msgspec.to_builtins(facts) if facts is not None else {}
        memory = await bus.kv_get_as(bus.subjects.kv_state, "memory", MemoryFacts)
        if memory is not None:
            status["memory"] = msgspec.to_builtins(memory)
        status["budget"] = await _budget(bus, settings)
        live = live_report(settings.home) if not settings.config.nats.url else None
        if live is not None:
            status["storage"] = live
        health = await actor_health(bus)
        return judge(status, health, time.time(), settings.config.supervisor.stale_after_secs)
    finally:
        await bus.close()


async def actor_health(bus: Bus) -> dict[str, Health]:
    """Each actor's own last health report (true even when the supervisor's record is not)."""
    out: dict[str, Health] = {}
    try:
        names = await bus.kv_keys(bus.subjects.kv_health)
    except Exception:  # noqa: BLE001 - no bucket yet: nothing reported
        return out
    for name in names:
        health = await bus.kv_get_as(bus.subjects.kv_health, name, Health)
        if health is not None:
            out[name] = health
    return out
def _breaker_lines(status: dict[str, Any]) -> list[str]:
    """Model providers whose circuit breaker is not closed (the llm actor's health info)."""
    lines = []
    for a in status.get("actors", []):
        for provider, b in sorted(((a.get("info") or {}).get("breakers") or {}).items()):
            if b.get("state") == "closed":
                continue
            until = time.strftime("%H:%M:%S", time.localtime(b.get("retry_at", 0)))
            what = ("probing" if b["state"] == "half_open"
                    else f"open, skipped until {until}")
            lines.append(f"model provider {provider}: circuit {what} ({b.get('last_error', '')})")
    return lines


async def _budget(bus: Bus, settings: Settings) -> dict[str, Any]:
    """Today's budget (and the terminal session's) as /budget words it, plus the numbers."""
    cfg = settings.config.budget
    day = await budget.usage(bus, budget.day_key(tz=cfg.timezone))
    terminal = "terminal:owner"  # `wintermute chat`'s default session
    return {"day": msgspec.to_builtins(day), "limit_day": cfg.max_tokens_per_day,
            "limit_session": cfg.max_tokens_per_session,
            "renews": budget.next_day(tz=cfg.timezone),
            "text": await budget_view.summary(bus, cfg, terminal)}


def render_status(status: dict[str, Any]) -> str:
    """A readable table of actors, then NATS, stream counts and Flatline's interventions."""
    warnings = status_warnings(status)
    rows = [("ACTOR", "PID", "HEALTHY", "STATE", "RESTARTS", "LAST CRASH")]
    for a in status.get("actors", []):
        rows.append((
            a["name"], str(a.get("pid") or "-"), "yes" if a.get("healthy") else "NO",
            a.get("state", ""), str(a.get("restarts", 0)), a.get("last_exit") or "",
        ))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    nats = status.get("nats", {})
    lines.append("")
    restarts = f", {nats['restarts']} restarts" if nats.get("restarts") else ""
    lines.append(f"nats: {nats.get('url')} (pid {nats.get('pid') or 'external'}{restarts})")
    if status.get("metrics_url"):
        lines.append(f"metrics: {status['metrics_url']}")
    for name, s in status.get("streams", {}).items():
        lines.append(f"stream {name}: {s['messages']} messages")
    lines += _breaker_lines(status)
    for line in (status.get("budget") or {}).get("text", "").splitlines():
        lines.append(f"budget: {line}")
    executor = status.get("executor") or {}
    if executor.get("note"):
        lines.append(f"executor: {executor['note']}")
    if executor.get("skills"):
        lines.append(f"skills: {', '.join(executor['skills'])} (`wintermute skills`)")
    for folder, why in sorted((executor.get("skill_problems") or {}).items()):
        lines.append(f"skill WARNING: {problem_line(folder, why)}")
    memory = status.get("memory") or {}
    if memory:
        total = sum(memory.get("counts", {}).values())
        lines.append(f"memory: {total} memories, {memory.get('search', 'full-text')} search")
        if memory.get("warning"):
            lines.append(f"memory WARNING: {memory['warning']}")
    if status.get("failed"):
        lines.append(f"failed actors: {', '.join(status['failed'])} (retried with growing delays)")
    for tool, rec in (status.get("quarantined") or {}).items():
        lines.append(f"quarantined tool {tool}: {rec.get('reason', '')} "
                     f"(`wintermute tools release {tool}`)")
    for task, rec in (status.get("disabled_tasks") or {}).items():
        lines.append(f"disabled task {task}: {rec.get('reason', '')} "
                     f"(`wintermute tasks enable {task}`)")
    lines += warnings
    recent = [i for i in status.get("interventions") or [] if i.get("kind") != "restart"][-5:]
    if recent:
        lines.append("recent interventions:")
        for i in recent:
            when = time.strftime("%H:%M:%S", time.localtime(i.get("ts", 0)))
            lines.append(f"  {when} {i.get('action', '')} {i.get('reason', '')}".rstrip())
    return "\n".join(lines)
