"""The executor: look up the tool, gate it (owner, approval), run it once, redact, report."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from typing import Any

import msgspec

from actors.base import Actor
from actors.executor import _leases, _taint
from actors.executor._capability import CapabilityGate
from actors.executor.base import Tool, ToolContext, ToolOutput
from actors.executor.command import scrubbed_env
from actors.executor.dynamic.service import ScriptsService
from actors.executor.home_gate import HomeFiles
from actors.executor.mcp import McpHub
from actors.executor.policy import PolicyGate
from actors.executor.registry import ToolRegistry
from actors.executor.sandbox import detect_sandbox
from actors.executor.tools import core_tools
from bus import tracing
from contracts import (
    ApprovalRequest,
    ApprovalResolved,
    HomeCommand,
    HomeEditPropose,
    ScriptsRevert,
    Sink,
    ToolOutcome,
    ToolRequest,
    ToolResult,
    labels,
    short_hash,
)
from contracts.records import ExecutorFacts
from contracts.taint import Taint
from kit.outbound import check_arguments
from kit.redact import HomeRedactor
from kit.secrets import load_dotenv
from state.holds import tool_status

log = logging.getLogger(__name__)

ExecutorInbox = ToolRequest | ApprovalResolved | ScriptsRevert | HomeEditPropose | HomeCommand


class ExecutorActor(Actor, CapabilityGate):
    name = "executor"
    inbox = ExecutorInbox

    async def on_start(self) -> None:
        # Picking the sandbox (probing a Docker API, trying bwrap) takes up to seconds: it runs
        # after the first health report, and messages wait for it in `handle`.
        self._ready = asyncio.Event()
        self.spawn(self._start(), "setup")

    async def _start(self) -> None:
        await self._set_up()
        self._ready.set()
        await asyncio.Event().wait()  # background tasks last the actor's life (base.spawn)

    async def _set_up(self) -> None:
        secrets = load_dotenv(self.home / ".env")
        # Follows .env and the NATS credential files: a secret added later is redacted too.
        redactor = HomeRedactor(self.home, os.environ)
        env = scrubbed_env(os.environ, secrets.keys(), redactor)
        (self.home / "workspace").mkdir(parents=True, exist_ok=True)
        # invariant I: a killed executor's commands end here, each kill on the audit log
        for pid, started in await _leases.adopt(self.home):
            await self.audit_decision(
                "command.leftover_killed", "killed",
                f"A command (process {pid}) that a killed executor left running was ended, "
                "with everything it started.",
                about=f"leftover:{pid}:{started}", refs={"pid": str(pid)})
        self.sandbox = await detect_sandbox(self.config, self.home)
        self.ctx = ToolContext(self.settings, self.bus, self.sandbox, redactor, env)
        # Direct mode approves every risky pattern; a sandbox contains damage to the machine,
        # so only what it cannot contain (sandboxed_risky_patterns) still needs approval.
        ex = self.config.executor
        # Direct mode also asks for anything not made only of harmless commands (shellgate).
        gate = (PolicyGate(ex.sandboxed_risky_patterns) if self.sandbox.isolated
                else PolicyGate(ex.risky_patterns, allowlist=ex.direct_allowlist))
        self.registry = ToolRegistry(core_tools(gate))
        self.home_files = HomeFiles(self)  # AGENTS.md and USER.md behind the WriteGate
        self.registry.add(self.home_files.tool)
        from actors.executor.docker_tool import docker_manage_tool  # offered only with an API

        if docker_tool := await docker_manage_tool(self.config):
            self.registry.add(docker_tool)
        self.scripts = ScriptsService(self)  # agent-created tools from scripts/
        await self.scripts.start()
        from actors.executor.skills import attach_skills

        self.skills = await attach_skills(self)  # skills/: load_skill, run_skill_script, ...
        self.mcp: McpHub | None = None
        self._mcp_names: set[str] = set()
        if self.config.mcp.servers:  # the SDK is imported only when servers are configured
            self.mcp = McpHub(self.config.mcp.servers, secrets, self._mcp_changed)
            await self.mcp.start()
            self._sync_mcp()
        await self.publish_tools()

    def _sync_mcp(self) -> None:
        """The registry holds exactly the MCP tools the servers offer now (never shadowing a
        core tool)."""
        for name in self._mcp_names:
            self.registry.remove(name)
        self._mcp_names = set()
        for tool in self.mcp.tools() if self.mcp else []:
            if self.registry.get(tool.name) is None:
                self.registry.add(tool)
                self._mcp_names.add(tool.name)

    async def _mcp_changed(self) -> None:
        if not hasattr(self, "registry"):
            return  # still starting: _set_up publishes once all servers answered
        self._sync_mcp()
        with contextlib.suppress(Exception):
            await self.publish_tools()

    async def on_stop(self) -> None:
        hub: McpHub | None = getattr(self, "mcp", None)  # unset while still setting up
        if hub is not None:
            await hub.stop()
        if getattr(self, "sandbox", None) is not None:
            await self.sandbox.close()

    async def publish_tools(self) -> None:
        """Tell the planner (tool definitions), the heartbeat (IDENTITY.md) and `wintermute
        tools` (catalog) what exists; at most budget.max_dynamic_tools_per_turn agent-created
        tools are offered, core tools always."""
        await self.scripts.publish(self.registry.specs())
        hub: McpHub | None = getattr(self, "mcp", None)
        mcp = hub.facts() if hub is not None else {}
        skills = getattr(self, "skills", None)
        facts = msgspec.convert({**self.sandbox.facts(), "tools": self.registry.names(), "mcp": mcp,
                                 "agent_tools": self.scripts.names(),
                                 **(skills.facts() if skills else {})}, ExecutorFacts)
        await self.bus.kv_put(self.subjects.kv_state, "executor", facts)

    def health_info(self) -> dict[str, Any]:
        sandbox = getattr(self, "sandbox", None)
        registry = getattr(self, "registry", None)
        return {"mode": sandbox.kind if sandbox else "starting",
                "tools": len(registry.names()) if registry else 0}

    async def handle(self, msg: ExecutorInbox) -> None:
        await self._ready.wait()  # the consumer keeps the message in progress meanwhile
        match msg:
            case ToolRequest():
                await self._on_request(msg)
            case ApprovalResolved():
                await self._on_resolved(msg)
            case ScriptsRevert():
                await self.scripts.revert(msg)
            case HomeEditPropose():
                await self.home_files.propose(msg)
            case HomeCommand():
                await self.home_files.command(msg)

    def _tool(self, name: str) -> Tool | None:
        """A core tool, else an agent-created one (core names always win)."""
        return self.registry.get(name) or self.scripts.get(name)

    async def _on_request(self, req: ToolRequest) -> None:
        await self.scripts.refresh()  # hot reload: files edited since the last look
        problem = self._capability_problem(req)
        if problem:  # no valid token for this call under its turn's template: never run
            await self._refuse(req, "capability", problem)
            return
        tool = self._tool(req.name)
        if tool is None:
            await self._result(req, False, self.scripts.unknown(req.name, self.registry.names()))
            return
        quarantine = await self._quarantined(req.name)
        if quarantine:
            await self._refuse(req, "quarantined", quarantine)
            return
        if tool.owner_only and not req.is_owner:
            await self._refuse(
                req, "owner_only", f"Only the owner may use {req.name}; this request was refused."
            )
            return
        leak = check_arguments(self.ctx.scanner, req.arguments, network=tool.outbound)
        if leak:  # the outbound gate: a secret never leaves without the owner's yes
            why = f"its arguments carry a secret ({', '.join(leak)}) off this machine"
            await self.audit_decision("tool.held", "asked", f"The outbound gate held {req.name}: {why}.",
                             about=req.id, session=req.session,
                             refs={"tool": req.name, "request": req.id, "rule": "outbound"})
            await self._ask_approval(req, why)
            return
        if why := _taint.held(req, tool, self.config):  # the graduated taint rule
            await self.audit_decision("taint.held", "asked", f"Held {req.name}: {why}.",
                                      about=req.id, session=req.session,
                                      refs={"tool": req.name, "request": req.id,
                                            "taint": req.taint})
            await self._ask_approval(req, why)
            return
        reason = await tool.approval_reason(req, self.ctx)
        if reason:
            await self._ask_approval(req, reason)
            return
        await self._run(tool, req)

    async def _label(self, req: ToolRequest, claimed: str) -> str:
        """The result's label: the tool's ceiling, raised (never lowered) by its claim; a claim
        below the ceiling, or not a label at all, is overridden and audited."""
        ceiling = self.config.executor.tool_labels.get(
            req.name, _taint.DEFAULT_LABELS.get(req.name, labels.INTERNAL))
        try:
            label = labels.join(ceiling, labels.parse(claimed)) if claimed else ceiling
        except labels.LabelError:
            label = ceiling
        if claimed and claimed != label:
            await self.audit_decision("label.override", "refused",
                             f"{req.name} claimed its output is {claimed!r}; its ceiling makes "
                             f"it {label}.", about=req.id, session=req.session,
                             refs={"tool": req.name, "claimed": claimed[:40], "label": label})
        return label

    async def _refuse(self, req: ToolRequest, rule: str, why: str) -> None:
        """Refuse a call: the model hears why, the audit log records it."""
        await self._result(req, False, why)
        await self.audit_decision("tool.refused", "refused", why, about=req.id, session=req.session,
                         refs={"tool": req.name, "request": req.id, "rule": rule})

    async def _quarantined(self, name: str) -> str:
        """A sentence for the model and the user if the supervisor quarantined this tool."""
        hold = await tool_status(self.bus, name)
        if hold is None or hold.status != "quarantined":
            return ""
        reason = hold.reason or "it kept failing"
        return (
            f"The tool {name} is quarantined by the supervisor ({reason}), so it was not run. "
            f"Tell the user; the owner can lift it with `wintermute tools release {name}` or "
            f"/tools release {name}."
        )

    async def _ask_approval(self, req: ToolRequest, reason: str) -> None:
        detail = req.arguments.get("command") or msgspec.json.encode(req.arguments).decode()
        approval = ApprovalRequest(
            id=f"{req.id}:approval", session=req.session,
            summary=f"{req.name}: {self.ctx.redactor.redact(str(detail))[:500]}", reason=reason,
            call=req, sink=Sink.parse(self.config.owner.sink), traceparent=tracing.current(),
        )
        await self.send(approval)
        await self._result(
            req, True,
            f"Waiting for the owner's approval to run this ({reason}). It will run once "
            "approved and the result will follow as a new event. Carry on with other work or "
            "tell the user you are waiting.",
        )

    async def _run(self, tool: Tool, req: ToolRequest, *, deferred: bool = False,
                   result_id: str = "") -> None:
        if tool.side_effects:
            # Never run twice: if we crashed mid-run, say so instead of running again.
            key = "exec." + short_hash(req.id, 32)
            if await self.bus.kv_get(self.subjects.kv_done, key) is not None:
                await self._result(
                    req, False,
                    "The executor restarted while this call was running, so its outcome is "
                    "unknown; it was not run again. Check its effects before retrying.",
                    deferred=deferred, result_id=result_id,
                )
                return
            await self.bus.kv_put(self.subjects.kv_done, key, b"started")
        started = time.monotonic()
        try:
            out = await tool.run(req, self.ctx)
        except Exception as exc:  # noqa: BLE001 - a broken tool is a tool error, not a crash
            log.exception("tool %s failed", req.name)
            out = ToolOutput(ok=False, output=f"The tool {req.name} failed: {exc!r}")
        if out is None:
            return  # forwarded: another actor answers
        duration_ms = int((time.monotonic() - started) * 1000)
        tracing.annotate({"gen_ai.tool.name": req.name, "wintermute.tool.ok": out.ok,
                            "wintermute.tool.duration_ms": duration_ms})
        if not out.ok:
            tracing.failed(f"{req.name} failed")
        # _meta, hot reload (create_tool) and the offered list, before the model hears back
        version = await self.scripts.after_run(tool, out, duration_ms)
        label = await self._label(req, out.label)
        withheld = await self._read_up(req, label)  # above the template's ceiling: not shown
        await self._result(req, out.ok and not withheld, withheld or out.output,
                           deferred=deferred, result_id=result_id,
                           label=labels.INTERNAL if withheld else label,
                           taint=_taint.output_taint(req.name, self.config))
        outcome = ToolOutcome(
            id=f"{result_id or req.id}:outcome", tool=req.name, ok=out.ok,
            duration_ms=duration_ms,
            error="" if out.ok else self.ctx.redactor.redact(out.output[-500:]),
            timed_out=out.timed_out, version=version, refused=out.refused,
        )
        await self.send(outcome)

    async def _on_resolved(self, msg: ApprovalResolved) -> None:
        call = msg.call
        if call is None:
            if self.home_files.gate.ours(msg):
                await self.home_files.gate.resolved(msg)
            return
        result_id = f"{msg.id}:result"
        tool = self._tool(call.name)
        problem = self._capability_problem(call, approved=True)
        if msg.status == "approved" and problem:  # approved, but not what a turn asked for
            await self._result(call, False, problem, deferred=True, result_id=result_id)
            await self.audit_decision("tool.refused", "refused", problem, about=result_id,
                                      session=call.session,
                                      refs={"tool": call.name, "rule": "capability"})
            return
        if msg.status == "approved" and tool is not None:
            await self._run(tool, call, deferred=True, result_id=result_id)
            return
        why = {"approved": "approved it, but the tool no longer exists",
               "denied": "denied it"}.get(msg.status, "did not answer in time (expired)")
        await self._result(
            call, False, f"Not run: the owner {why}.", deferred=True, result_id=result_id
        )

    async def _result(
        self, req: ToolRequest, ok: bool, output: str, *, deferred: bool = False,
        result_id: str = "", label: str = labels.INTERNAL, taint: Taint = "clean",
    ) -> None:
        result = ToolResult(
            id=result_id or f"{req.id}:result", session=req.session, turn_id=req.turn_id,
            step=req.step, call_id=req.call_id, name=req.name, ok=ok,
            output=self.ctx.redactor.redact(output), deferred=deferred, reply_to=req.reply_to,
            label=label, taint=taint,
        )
        await self.send(result)
