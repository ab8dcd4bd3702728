"""Core tools: execute_command, memory_save, memory_search, create_tool."""

from __future__ import annotations

from actors.executor.base import Tool, ToolContext, ToolOutput, arg_float, arg_int, arg_str
from actors.executor.dynamic import CreateTool
from actors.executor.dynamic.archive import ArchiveTools
from actors.executor.home_gate import hint
from actors.executor.messaging import Escalate, SendMessage
from actors.executor.policy import PolicyGate
from actors.executor.web import WebFetch
from actors.executor.web_request import WebRequest
from contracts import MemorySave, MemorySearch, ToolRequest, ToolSpec


class ExecuteCommand(Tool):
    spec = ToolSpec(
        name="execute_command",
        description=(
            "Run a shell command (bash) in the workspace directory and return its output and "
            "exit code. Risky commands wait for the owner's approval."
        ),
        parameters={
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The bash command line to run."},
                "timeout_secs": {"type": "number", "description": "Give up after this many seconds."},
            },
            "required": ["command"],
        },
    )
    owner_only = True

    def __init__(self, gate: PolicyGate) -> None:
        self.gate = gate

    async def approval_reason(self, req: ToolRequest, ctx: ToolContext) -> str:
        decision = self.gate.decide(self.name, req.arguments, True)
        return decision.reason if decision.verdict == "approve" else ""

    async def run(self, req: ToolRequest, ctx: ToolContext) -> ToolOutput:
        command = arg_str(req, "command")
        if not command.strip():
            return ToolOutput(ok=False, output="execute_command needs a non-empty 'command'.")
        limit = ctx.config.executor.timeout_secs
        timeout = min(arg_float(req, "timeout_secs", limit), limit)
        res = await ctx.sandbox.run(
            command, cwd=ctx.workspace, timeout=timeout,
            output_limit=ctx.config.executor.output_limit, env=ctx.env,
        )
        if res.timed_out:
            return ToolOutput(
                ok=False, output=f"Timed out after {timeout:g}s and was killed.\n{res.output}",
                timed_out=True,
            )
        return ToolOutput(ok=res.exit_code == 0, output=f"exit code {res.exit_code}\n{res.output}"
                          + hint(command))


class MemorySaveTool(Tool):
    spec = ToolSpec(
        name="memory_save",
        description="Remember something for later sessions (a fact, procedure or note).",
        parameters={
            "type": "object",
            "properties": {
                "content": {"type": "string", "description": "What to remember, in one sentence."},
                "kind": {"type": "string", "enum": ["fact", "procedure", "episode", "skill", "note"]},
            },
            "required": ["content"],
        },
    )
    side_effects = False  # the memory actor saves idempotently by id

    async def run(self, req: ToolRequest, ctx: ToolContext) -> None:
        save = MemorySave(
            id=f"{req.id}:memory", session=req.session,
            content=ctx.redactor.redact(arg_str(req, "content")),
            kind=arg_str(req, "kind", "fact"), for_call=req,
            principal=req.principal, is_owner=req.is_owner, label=req.label,
        )
        await ctx.bus.send(save)


class MemorySearchTool(Tool):
    spec = ToolSpec(
        name="memory_search",
        description="Search saved memories by keywords.",
        parameters={
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 20},
            },
            "required": ["query"],
        },
    )
    side_effects = False

    async def run(self, req: ToolRequest, ctx: ToolContext) -> None:
        search = MemorySearch(
            id=f"{req.id}:memory", session=req.session, query=arg_str(req, "query"),
            limit=arg_int(req, "limit", 5), for_call=req,
            principal=req.principal, is_owner=req.is_owner,
            ceiling=req.label, sink=_sink(req),
        )
        await ctx.bus.send(search)


def _sink(req: ToolRequest) -> str:
    """The conversation's chat as `channel:chat` (what memories found may reach), or ""."""
    return f"{req.reply_to.channel}:{req.reply_to.chat}" if req.reply_to else ""


def core_tools(gate: PolicyGate) -> list[Tool]:
    """The built-in tools, always offered."""
    tools: list[Tool] = [ExecuteCommand(gate), MemorySaveTool(), MemorySearchTool()]
    tools += [WebFetch(), WebRequest(), SendMessage(), Escalate(), ArchiveTools()]
    # create_tool refuses the names of every core tool, including ones appended below it.
    tools.append(CreateTool(reserved=lambda: [t.name for t in tools]))
    return tools
