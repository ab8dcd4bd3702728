"""The executor: policy gate, then the tool. Direct mode only for now (no sandbox yet)."""

from __future__ import annotations

import logging
import os
import time
from typing import Any

import msgspec

from actors.base import Actor
from actors.common.redact import Redactor
from actors.common.secrets import load_dotenv
from actors.executor.command import run_command, scrubbed_env
from actors.executor.policy import PolicyGate
from actors.executor.tools import CORE_TOOLS
from bus import Subscription
from contracts import (
    ApprovalRequest,
    ApprovalResolved,
    MemorySave,
    MemorySearch,
    Sink,
    ToolOutcome,
    ToolRequest,
    ToolResult,
    short_hash,
)

log = logging.getLogger(__name__)

ExecutorInbox = ToolRequest | ApprovalResolved

MODE_NOTE = (
    "direct: commands run as the Wintermute user without a sandbox (bubblewrap and Docker "
    "sandboxes are not built yet); risky commands need the owner's approval"
)


class ExecutorActor(Actor):
    name = "executor"

    async def on_start(self) -> None:
        secrets = load_dotenv(self.home / ".env")
        self.redactor = Redactor.from_env(self.home / ".env", os.environ)
        self.env = scrubbed_env(os.environ, secrets.keys())
        self.workspace = self.home / "workspace"
        self.workspace.mkdir(parents=True, exist_ok=True)
        self.gate = PolicyGate(self.config.executor.risky_patterns)
        self.tools = {t.name: t for t in CORE_TOOLS}
        await self.bus.kv_put(
            self.subjects.kv_state, "tools", msgspec.json.encode(list(self.tools.values()))
        )
        await self.bus.kv_put(
            self.subjects.kv_state, "executor",
            msgspec.json.encode({"mode": "direct", "note": MODE_NOTE, "tools": list(self.tools)}),
        )

    def subscriptions(self) -> list[tuple[Subscription, Any]]:
        s = self.subjects
        cmd = Subscription(s.stream_cmd, "executor", (s.cmd("executor", "*"),))
        evt = Subscription(
            s.stream_evt, "executor-approvals", (f"{s.p}.evt.approval.resolved.>",)
        )
        return [(cmd, ExecutorInbox), (evt, ExecutorInbox)]

    def health_info(self) -> dict[str, Any]:
        return {"mode": "direct", "tools": len(getattr(self, "tools", {}))}

    async def handle(self, msg: ExecutorInbox) -> None:
        match msg:
            case ToolRequest():
                await self._on_request(msg)
            case ApprovalResolved():
                await self._on_resolved(msg)

    async def _on_request(self, req: ToolRequest) -> None:
        if req.name not in self.tools:
            known = ", ".join(sorted(self.tools))
            await self._result(req, False, f"Unknown tool {req.name!r}. Available: {known}.")
            return
        decision = self.gate.decide(req.name, req.arguments, req.is_owner)
        if decision.verdict == "deny":
            await self._result(req, False, decision.reason)
            return
        if decision.verdict == "approve":
            summary = f"{req.name}: {self.redactor.redact(str(req.arguments.get('command', '')))}"
            approval = ApprovalRequest(
                id=f"{req.id}:approval", session=req.session, summary=summary,
                reason=decision.reason, call=req,
                sink=Sink.parse(self.config.owner.sink),
            )
            await self.publish(self.subjects.cmd("approval", "request"), approval)
            await self._result(
                req, True,
                "Waiting for the owner's approval to run this ("
                f"{decision.reason}). It will run once approved and the result will follow as a "
                "new event. Carry on with other work or tell the user you are waiting.",
            )
            return
        await self._run(req)

    async def _run(self, req: ToolRequest, *, deferred: bool = False, result_id: str = "") -> None:
        match req.name:
            case "execute_command":
                await self._execute(req, deferred=deferred, result_id=result_id)
            case "memory_save":
                save = MemorySave(
                    id=f"{req.id}:memory", session=req.session,
                    content=self.redactor.redact(str(req.arguments.get("content", ""))),
                    kind=str(req.arguments.get("kind", "fact")), for_call=req,
                )
                await self.publish(self.subjects.cmd("memory", "save"), save)
            case "memory_search":
                search = MemorySearch(
                    id=f"{req.id}:memory", session=req.session,
                    query=str(req.arguments.get("query", "")),
                    limit=_int(req.arguments.get("limit"), 5), for_call=req,
                )
                await self.publish(self.subjects.cmd("memory", "search"), search)

    async def _execute(self, req: ToolRequest, *, deferred: bool, result_id: str) -> None:
        # A command is never run twice: if we crashed mid-run, say so instead of re-running.
        key = "exec." + short_hash(req.id, 32)
        if await self.bus.kv_get(self.subjects.kv_done, key) is not None:
            await self._result(
                req, False,
                "The executor restarted while this command was running, so its outcome is "
                "unknown; it was not run again. Check its effects before retrying.",
                deferred=deferred, result_id=result_id,
            )
            return
        await self.bus.kv_put(self.subjects.kv_done, key, b"started")
        command = str(req.arguments.get("command", ""))
        limit = self.config.executor.timeout_secs
        timeout = min(_float(req.arguments.get("timeout_secs"), limit), limit)
        started = time.monotonic()
        res = await run_command(
            command, cwd=self.workspace, timeout=timeout,
            output_limit=self.config.executor.output_limit, env=self.env,
        )
        output = self.redactor.redact(res.output)
        if res.timed_out:
            text = f"Timed out after {timeout:g}s and was killed.\n{output}"
        else:
            text = f"exit code {res.exit_code}\n{output}"
        ok = not res.timed_out and res.exit_code == 0
        await self._result(req, ok, text, deferred=deferred, result_id=result_id)
        outcome = ToolOutcome(
            id=f"{req.id}:outcome", tool=req.name, ok=ok,
            duration_ms=int((time.monotonic() - started) * 1000),
            error="" if ok else output[-500:], timed_out=res.timed_out,
        )
        await self.publish(self.subjects.evt("tool", "outcome", req.name), outcome)

    async def _on_resolved(self, msg: ApprovalResolved) -> None:
        call = msg.call
        if call is None:
            return
        result_id = f"{msg.id}:result"
        if msg.status == "approved":
            await self._run(call, deferred=True, result_id=result_id)
            return
        why = "denied it" if msg.status == "denied" else "did not answer in time (expired)"
        await self._result(
            call, False, f"Not run: the owner {why}.", deferred=True, result_id=result_id
        )

    async def _result(
        self, req: ToolRequest, ok: bool, output: str, *, deferred: bool = False,
        result_id: str = "",
    ) -> None:
        result = ToolResult(
            id=result_id or f"{req.id}:result", session=req.session, turn_id=req.turn_id,
            step=req.step, call_id=req.call_id, name=req.name, ok=ok,
            output=self.redactor.redact(output), deferred=deferred, reply_to=req.reply_to,
        )
        await self.publish(self.subjects.evt("tool", "result", req.session), result)


def _float(value: Any, default: float) -> float:
    try:
        return float(value) if value is not None else default
    except (TypeError, ValueError):
        return default


def _int(value: Any, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except (TypeError, ValueError):
        return default
