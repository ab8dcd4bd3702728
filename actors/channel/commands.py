"""Slash commands shared by every adapter: /status /budget /reset /memory /tools /revert /help
/approve /deny. They answer from shared state in KV; none of them reaches the model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

from contracts import (
    ApprovalDecision,
    HoldRelease,
    HomeCommand,
    MemoryCommand,
    ScriptsRevert,
    SessionReset,
    SessionRetry,
    Sink,
)
from contracts.records import ExecutorFacts, SkillsReport, SupervisorStatus
from kit.skillmd import problem_line
from state import budget_view

HELP = (
    "Commands: /status (actors and health), /budget (token budgets, what used them, when they renew), /reset (forget this "
    "conversation; memories stay), /memory (what is remembered; /memory search WORDS, "
    "/memory forget ID, /memory pending, /memory promote|reject ID, /memory undo; AGENTS.md and USER.md: "
    "/memory history, /memory changes, /memory apply|drop ID, /memory revert [VERSION]), /tools (tools and status; /tools release NAME lifts a "
    "quarantine), "
    "/skills (skills and how often each was used; /skills revert undoes the last skill change), "
    "/skill NAME TEXT (the agent loads that skill, then answers TEXT), "
    "/revert (undo the last tool change), /approve ID, /deny ID, /help. Anything else goes to "
    "the agent."
)

T = TypeVar("T")

OWNER_ONLY = {"/status", "/budget", "/tools", "/revert", "/approve", "/deny", "/memory",
              "/skills"}


@dataclass
class CommandContext:
    """Who sent the command and where it came from."""

    principal: str
    is_owner: bool
    session: str
    input_id: str
    reply_to: Sink | None = None  # the chat the command came from; else owner.sink


async def handle_command(actor: Any, ctx: CommandContext, text: str) -> str | None:
    """The answer to a slash command, or None when `text` is not one (it goes to the agent)."""
    word, _, rest = text.strip().partition(" ")
    word = word.split("@", 1)[0].lower()  # Telegram appends @botname in groups
    if not word.startswith("/") or word not in COMMANDS:
        return None
    if word in OWNER_ONLY and not ctx.is_owner:
        return "Only the owner can use that command."
    return await COMMANDS[word](actor, ctx, rest.strip())


async def _help(actor: Any, ctx: CommandContext, rest: str) -> str:
    return HELP


async def _decide(actor: Any, ctx: CommandContext, rest: str, approved: bool) -> str:
    if not rest:
        return "Say which approval: /approve ID or /deny ID."
    decision = ApprovalDecision(
        id=f"{ctx.input_id}:decision", approval_id=rest.split()[0], approved=approved,
        principal=ctx.principal, is_owner=ctx.is_owner, reply_to=ctx.reply_to,
    )
    await actor.bus.send(decision)
    # Only sent: the approval actor decides, and says so here if the decision did not happen.
    return f"Sent: {'approve' if approved else 'deny'} {decision.approval_id}."


async def _approve(actor: Any, ctx: CommandContext, rest: str) -> str:
    return await _decide(actor, ctx, rest, True)


async def _deny(actor: Any, ctx: CommandContext, rest: str) -> str:
    return await _decide(actor, ctx, rest, False)


async def _reset(actor: Any, ctx: CommandContext, rest: str) -> str:
    reset = SessionReset(id=f"{ctx.input_id}:reset", session=ctx.session, reply_to=ctx.reply_to)
    await actor.bus.send(reset)
    return ("This conversation was reset: its history, any message in progress and any "
            "waiting behind it were cleared, so the next message starts fresh, and its session "
            "budget starts afresh; memories stay.")


async def _retry(actor: Any, ctx: CommandContext, rest: str) -> str:
    retry = SessionRetry(id=f"{ctx.input_id}:retry", session=ctx.session, reply_to=ctx.reply_to)
    await actor.bus.send(retry)
    return "Sending your last failed message again; the answer follows here."


async def _state(actor: Any, key: str, kind: type[T]) -> T | None:
    value: T | None = await actor.bus.kv_get_as(actor.subjects.kv_state, key, kind)
    return value


async def _status(actor: Any, ctx: CommandContext, rest: str) -> str:
    status = await _state(actor, "supervisor", SupervisorStatus)
    if status is None:
        return "No supervisor status yet (is `wintermute up` running?)."
    lines = []
    for a in status.actors:
        mark = "ok" if a.healthy else "DOWN"
        extra = f", {a.restarts} restarts" if a.restarts else ""
        lines.append(f"{a.name}: {mark}{extra}")
    return "Actors: " + "; ".join(lines)


async def _budget(actor: Any, ctx: CommandContext, rest: str) -> str:
    return await budget_view.summary(actor.bus, actor.config.budget, ctx.session)


async def _memory(actor: Any, ctx: CommandContext, rest: str) -> str:
    # The memory actor owns the store: it answers with a notice to this chat, showing only
    # what this conversation may read (a group never sees the owner's private memories).
    verb, _, arg = rest.strip().partition(" ")
    action = verb.lower() or "list"
    if action in HOME_ACTIONS:
        return await _home(actor, ctx, HOME_ACTIONS[action], arg.strip())
    needs_arg = ("search", "forget", "promote", "reject")
    if action not in ("list", "pending", "undo", *needs_arg) or (
            action in needs_arg and not arg.strip()):
        return ("Use /memory, /memory search WORDS, /memory forget ID, /memory pending, "
                "/memory promote ID, /memory reject ID or /memory undo.")
    sink = ctx.reply_to or Sink.parse(actor.config.owner.sink)
    command = MemoryCommand(
        id=f"{ctx.input_id}:memory", action=action, arg=arg.strip(), principal=ctx.principal,
        is_owner=ctx.is_owner, session=ctx.session, reply_to=sink,
    )
    await actor.bus.send(command)
    return {"list": "Looking at what I remember here…", "search": "Searching my memory…",
            "forget": "Asking memory to forget it…", "pending": "Looking at what I learned…",
            "promote": "Promoting it…", "reject": "Rejecting it…",
            "undo": "Undoing the last change to memory here…"}[action]


#: /memory verbs about AGENTS.md and USER.md, answered by the executor (their WriteGate).
HOME_ACTIONS = {"history": "history", "changes": "pending", "apply": "apply", "drop": "drop",
                "revert": "revert"}


async def _home(actor: Any, ctx: CommandContext, action: str, arg: str) -> str:
    if action in ("apply", "drop") and not arg:
        return f"Say which change: /memory {action} ID (see /memory changes)."
    sink = ctx.reply_to or Sink.parse(actor.config.owner.sink)
    await actor.bus.send(HomeCommand(id=f"{ctx.input_id}:home", action=action, arg=arg,
                                     principal=ctx.principal, is_owner=ctx.is_owner,
                                     reply_to=sink))
    return {"history": "Looking at the versions of AGENTS.md and USER.md…",
            "pending": "Looking at the proposed changes…", "apply": "Applying it…",
            "drop": "Dropping it…", "revert": "Reverting it…"}[action]


async def _tools(actor: Any, ctx: CommandContext, rest: str) -> str:
    verb, _, name = rest.partition(" ")
    if verb == "release":
        return await _release(actor, ctx, name.strip())
    facts = await _state(actor, "executor", ExecutorFacts)
    if facts is None:
        return "The executor has not reported its tools yet."
    text = f"Tools ({facts.mode} mode): " + ", ".join(facts.tools)
    agent = facts.agent_tools
    return text + (f". Agent-created: {', '.join(agent)}" if agent else "")


async def _release(actor: Any, ctx: CommandContext, name: str) -> str:
    # Quarantine is the supervisor's state: the channel asks, the supervisor applies it and
    # tells the owner the outcome (the channel may not write wm_tools).
    if not name:
        return "Say which tool: /tools release NAME."
    sink = ctx.reply_to or Sink.parse(actor.config.owner.sink)
    release = HoldRelease(id=f"{ctx.input_id}:release", kind="tool", name=name,
                          principal=ctx.principal, is_owner=ctx.is_owner, reply_to=sink)
    await actor.bus.send(release)
    return f"Asked the supervisor to release the tool {name}; the outcome goes to {sink}."


async def _revert(actor: Any, ctx: CommandContext, rest: str, repo: str = "scripts") -> str:
    # The executor owns scripts/ and skills/: it reverts, reloads, and reports to the sink.
    sink = ctx.reply_to or Sink.parse(actor.config.owner.sink)
    revert = ScriptsRevert(id=f"{ctx.input_id}:revert", principal=ctx.principal,
                           is_owner=ctx.is_owner, reply_to=sink,
                           repo="skills" if repo == "skills" else "scripts")
    await actor.bus.send(revert)
    return f"Asked the executor to undo the last change in {repo}/; the outcome goes to {sink}."


async def _skills(actor: Any, ctx: CommandContext, rest: str) -> str:
    if rest.strip() == "revert":
        return await _revert(actor, ctx, "", repo="skills")
    report = await _state(actor, "tools.skills", SkillsReport)
    if report is None:
        return "The executor has not reported its skills yet."
    lines = [f"{r.name} — {r.description} (loaded {r.loads}×, scripts run {r.runs}×"
             + (f", {r.failures} failed" if r.failures else "") + ")"
             + ("" if r.available else f" [unavailable: {r.problem}]") for r in report.skills]
    lines += [problem_line(folder, why) for folder, why in sorted(report.problems.items())]
    return "Skills:\n" + "\n".join(lines) if lines else "No skills in skills/."


COMMANDS = {
    "/help": _help, "/start": _help, "/approve": _approve, "/deny": _deny, "/reset": _reset,
    "/retry": _retry,
    "/status": _status, "/budget": _budget, "/memory": _memory, "/tools": _tools,
    "/revert": _revert, "/skills": _skills,
}
