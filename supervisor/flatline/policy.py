"""Flatline: the supervisor's rules for tools (quarantine, revert proposals) and scheduled tasks.

Rules first, always: every verdict comes from thresholds in `[supervisor.flatline.policy]`. There is no
model diagnosis yet for patterns the rules do not know. Each intervention is reversible,
recorded as an event and announced to the owner; the one that changes files (a revert of
scripts/) is only proposed and waits for the owner's approval.
"""

from __future__ import annotations

import asyncio
import logging
import time

from msgspec.structs import replace

from bus import Bus, Consumer, subscription
from contracts import (
    ApprovalRequest,
    ApprovalResolved,
    HoldRelease,
    LlmResponse,
    ScriptsRevert,
    ScriptsReverted,
    TaskOutcome,
    ToolOutcome,
    audit_event,
)
from contracts.config import Settings
from contracts.records import TaskHold, ToolHold
from contracts.routes import FLATLINE_SESSION, SUPERVISOR, durable
from state.holds import (
    disabled_tasks,
    enable_task,
    put_task_status,
    put_tool_status,
    quarantined_tools,
    release_tool,
    task_status,
    tool_status,
    window_key,
)
from supervisor.flatline import scripts_git, tool_rules
from supervisor.flatline.diagnosis import Diagnoser
from supervisor.flatline.digest import Digest
from supervisor.flatline.scripts_git import Commit
from supervisor.process.announce import Announcer

log = logging.getLogger(__name__)

SESSION = FLATLINE_SESSION  # approvals Flatline asks for carry this session
REVERT_PREFIX = "flatline:revert:"
FlatlineInbox = ApprovalResolved | ScriptsReverted | LlmResponse


class Flatline:
    """Consumes tool and task outcomes, keeps their counts in KV, and intervenes."""

    def __init__(self, settings: Settings, bus: Bus, announce: Announcer) -> None:
        self.settings = settings
        self.cfg = settings.config.supervisor.flatline
        self.bus = bus
        self.announce = announce
        self.scripts = settings.home / "scripts"
        self.digest = Digest(settings, bus, announce)
        self.diagnoser = Diagnoser(settings, bus, announce)
        self.quarantined: dict[str, ToolHold] = {}
        self.disabled: dict[str, TaskHold] = {}

    def consumers(self) -> list[Consumer]:
        # Declared in contracts/routes.py (the flatline filter names this module's SESSION
        # and the diagnosis session).
        s = self.bus.subjects
        return [
            Consumer(self.bus, SUPERVISOR, subscription(s, durable("supervisor-tools")),
                     ToolOutcome, self.on_tool_outcome),
            Consumer(self.bus, SUPERVISOR, subscription(s, durable("supervisor-tasks")),
                     TaskOutcome, self.on_task_outcome),
            Consumer(self.bus, SUPERVISOR, subscription(s, durable("supervisor-flatline")),
                     FlatlineInbox, self.on_event),
            # The owner's releases from the chat (/tools release): durable, so one sent while
            # the supervisor restarts is applied when it is back.
            Consumer(self.bus, SUPERVISOR, subscription(s, durable("supervisor-release")),
                     HoldRelease, self.on_release),
        ]

    async def run(self) -> None:
        """Consume outcomes and run the periodic checks until cancelled."""
        tasks = [asyncio.create_task(c.run()) for c in self.consumers()]
        tasks.append(asyncio.create_task(self.digest.run()))
        try:
            await asyncio.gather(*tasks)
        finally:
            for t in tasks:
                t.cancel()

    async def refresh(self) -> None:
        """Quarantined tools and disabled tasks, for `status`."""
        self.quarantined = await quarantined_tools(self.bus)
        self.disabled = await disabled_tasks(self.bus)

    # -- tools ---------------------------------------------------------------------------------

    async def on_tool_outcome(self, outcome: ToolOutcome) -> None:
        tool = outcome.tool
        if tool in self.cfg.exempt_tools or outcome.refused:
            return  # a policy refusal (a refused URL, a rate limit) is not the tool failing
        status = await tool_status(self.bus, tool)
        if status is not None and status.status == "quarantined":
            return
        bucket = self.bus.subjects.kv_state
        window = tool_rules.load_window(tool, await self.bus.kv_get(bucket, window_key(tool)))
        released_at = status.released_at if status is not None else 0.0
        if not tool_rules.add(window, outcome, time.time(), self.cfg, released_at):
            return
        await self.bus.kv_put(bucket, window_key(tool), tool_rules.dump_window(window))
        verdict = tool_rules.verdict(window, self.cfg)
        commit = None
        if not outcome.ok and (self.scripts / f"{tool}.py").exists():
            commit = await scripts_git.last_commit(self.scripts, tool)
            if commit and tool_rules.regression(window, commit.ts, self.cfg):
                since = len([c for c in window.calls if c.ts >= commit.ts])
                verdict = tool_rules.Verdict(
                    "regression",
                    f"it worked until scripts commit {commit.sha[:8]} (“{commit.subject}”) and "
                    f"failed all {since} calls since",
                    {"commit": commit.sha, "commit_subject": commit.subject,
                     "failed_since_commit": since, "last_errors": window.last_errors},
                )
            else:
                commit = None
        if verdict is not None:
            await self._quarantine(tool, verdict, outcome, commit)

    async def _quarantine(self, tool: str, verdict: tool_rules.Verdict, outcome: ToolOutcome,
                          commit: Commit | None) -> None:
        record = ToolHold(status="quarantined", reason=verdict.reason, rule=verdict.rule,
                          since=time.time(), by="flatline", evidence=verdict.evidence)
        await put_tool_status(self.bus, tool, record)
        self.quarantined[tool] = record
        ref = f"flatline:quarantine:{tool}:{outcome.id}"
        undo = f"wintermute tools release {tool} (or /tools release {tool})"
        await self.announce.intervene(
            "quarantine", tool, f"Quarantined the tool {tool}.",
            f"{verdict.reason[:1].upper()}{verdict.reason[1:]}.",
            ref=ref, evidence={"rule": verdict.rule, **verdict.evidence}, undo=undo,
            notify=(f"I quarantined the tool {tool}: {verdict.reason}. Calls to it are refused "
                    f"and the agent is told why. Lift it with `wintermute tools release {tool}` "
                    f"or /tools release {tool}."),
        )
        if commit is not None:
            await self._propose_revert(tool, commit, verdict)

    async def _propose_revert(self, tool: str, commit: Commit, verdict: tool_rules.Verdict
                              ) -> None:
        ref = f"{REVERT_PREFIX}{tool}:{commit.sha}"
        if not commit.is_head:
            await self.announce.intervene(
                "revert", tool, "No revert proposed.",
                f"The commit that broke {tool} ({commit.sha[:8]}) is not the last one in "
                "scripts/, and only the last commit can be reverted safely.",
                ref=ref, evidence={"commit": commit.sha}, outcome="not proposed",
                notify=(f"The tool {tool} broke with scripts commit {commit.sha[:8]} "
                        f"(“{commit.subject}”), but later commits followed it, so I did not "
                        "propose reverting it; fix the tool or revert by hand."),
            )
            return
        request = ApprovalRequest(
            id=ref, session=SESSION,
            summary=(f"Revert the last scripts commit {commit.sha[:8]} “{commit.subject}”: the "
                     f"tool {tool} {verdict.reason}."),
            reason="Flatline proposes undoing the change that broke a tool",
            sink=self.announce.sink,
        )
        await self.bus.send(request)
        await self.announce.intervene(
            "revert", tool, f"Proposed reverting scripts commit {commit.sha[:8]}.",
            f"The tool {tool} {verdict.reason}.", ref=f"{ref}:proposed",
            evidence={"commit": commit.sha, "subject": commit.subject}, outcome="proposed",
            proposed=True, undo="deny the approval; an applied revert is itself revertible",
        )

    async def on_event(self, msg: FlatlineInbox) -> None:
        match msg:
            case ApprovalResolved():
                await self._on_revert_decision(msg)
            case ScriptsReverted():
                await self._on_reverted(msg)
            case LlmResponse():
                await self.diagnoser.on_response(msg)

    async def _on_revert_decision(self, msg: ApprovalResolved) -> None:
        request_id = msg.id.removesuffix(":resolved")
        if not request_id.startswith(REVERT_PREFIX):
            return
        tool, _, sha = request_id[len(REVERT_PREFIX):].rpartition(":")
        if msg.status != "approved":
            await self.announce.intervene(
                "revert", tool, f"Did not revert scripts commit {sha[:8]}.",
                f"The owner's answer was: {msg.status}.", ref=f"{request_id}:{msg.status}",
                outcome=msg.status,
                notify=f"The revert for {tool} was {msg.status}; the tool stays quarantined.",
            )
            return
        current = await scripts_git.head(self.scripts)
        if current != sha:
            await self.announce.intervene(
                "revert", tool, "Did not revert: scripts/ changed meanwhile.",
                f"Commit {sha[:8]} is no longer the last one.", ref=f"{request_id}:stale",
                outcome="skipped",
                notify=(f"The revert for {tool} was approved, but scripts/ changed since it was "
                        "proposed, so nothing was reverted; the tool stays quarantined."),
            )
            return
        revert = ScriptsRevert(id=f"{request_id}:do", principal="flatline", is_owner=True,
                               reply_to=self.announce.sink)
        await self.bus.send(revert)
        await self.announce.intervene(
            "revert", tool, f"Asked the executor to revert scripts commit {sha[:8]}.",
            "The owner approved it.", ref=f"{request_id}:approved", outcome="approved",
        )

    async def _on_reverted(self, msg: ScriptsReverted) -> None:
        request_id = msg.request_id.removesuffix(":do")
        if not request_id.startswith(REVERT_PREFIX) or not msg.ok:
            return
        tool = request_id[len(REVERT_PREFIX):].rpartition(":")[0]
        # The tool is back at its working version: lift the quarantine the revert was for.
        text = await release_tool(self.bus, tool, "flatline after the approved revert")
        self.quarantined.pop(tool, None)
        await self.announce.notify(text, f"{request_id}:released")

    async def on_release(self, msg: HoldRelease) -> None:
        """Lift a hold the owner asked to lift, and tell them what happened."""
        owners = self.settings.config.owner.principals
        allowed = msg.is_owner and msg.principal in owners
        await self.bus.send(audit_event(
            SUPERVISOR, f"holds.release_{msg.kind}", "allowed" if allowed else "refused",
            f"The owner lifted the hold on {msg.name}." if allowed else
            f"Only the owner can lift the hold on {msg.name}; the request was ignored.",
            about=msg.id, principal=msg.principal, refs={"kind": msg.kind, "name": msg.name}))
        if not allowed:
            log.warning("release of %s asked by non-owner %s; ignored", msg.name, msg.principal)
            text = (f"Only the owner can release {msg.name}; the request from {msg.principal} "
                    "was ignored.")
        elif msg.kind == "tool":
            text = await release_tool(self.bus, msg.name, f"{msg.principal} (/tools release)")
            self.quarantined.pop(msg.name, None)
        else:
            text = await enable_task(self.bus, msg.name, msg.principal)
            self.disabled.pop(msg.name, None)
        await self.announce.notify(text, msg.id, msg.reply_to)

    # -- scheduled tasks -------------------------------------------------------------------------

    async def on_task_outcome(self, out: TaskOutcome) -> None:
        record = await task_status(self.bus, out.task)
        if out.turn_id in record.seen:
            return
        record = replace(record, seen=[*record.seen, out.turn_id][-10:])
        if record.status == "disabled" or out.skipped:
            # A run stopped by a spent budget neither fails nor clears the failure streak.
            await put_task_status(self.bus, out.task, record)
            return
        failures = 0 if out.ok else record.failures + 1
        record = replace(record, task=out.task, failures=failures,
                         last_reason=record.last_reason if out.ok else out.reason)
        limit = self.cfg.task_failures
        if failures >= limit:
            record = replace(record, status="disabled", since=time.time(),
                             reason=f"it failed {failures} times in a row")
        await put_task_status(self.bus, out.task, record)
        if record.status == "disabled":
            self.disabled[out.task] = record
            await self.announce.intervene(
                "disable_task", out.task, f"Disabled the scheduled task {out.task}.",
                f"It failed {limit} times in a row; last: {out.reason}",
                ref=f"flatline:disable_task:{out.task}:{out.turn_id}",
                evidence={"failures": record.failures, "last_reason": out.reason,
                          "turn": out.turn_id},
                undo=f"wintermute tasks enable {out.task}",
                notify=(f"I disabled the scheduled task {out.task}: it failed {limit} times in a "
                        f"row (last: {out.reason}). Enable it again with "
                        f"`wintermute tasks enable {out.task}`."),
            )
