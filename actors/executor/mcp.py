"""MCP servers as tool sources, held by the executor (the official `mcp` SDK).

Each `[[mcp.servers]]` entry is one long-lived client: a stdio server started as a child
process with only the environment its entry gives it (values `"$NAME"` come from `.env`), or a
Streamable HTTP endpoint (header values likewise). Its tools join the registry as
`<server>__<tool>` and pass the executor's gate like any tool: the outbound secret check,
quarantine, owner approval (per server: `approval = "never" | "always"` or a list of tool
names), redaction, `_meta` outcomes. A server that exits, hangs or speaks broken JSON-RPC is
restarted with growing delays; meanwhile its tools answer that it is unavailable, and `status`
shows its state. Decided here: the executor holds the servers (it owns the gate and the
outcomes); stdio servers run as host processes, not in the sandbox (the sandbox backends run
one command at a time, not a long-lived process with pipes) - give them nothing secret they
should not have.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any

from actors.executor.base import Tool, ToolContext, ToolOutput
from contracts import ToolRequest, ToolSpec
from contracts.config import McpServer

log = logging.getLogger(__name__)

OUTPUT_CAP = 16_000
_NAME = re.compile(r"[^A-Za-z0-9_-]")


def tool_name(server: str, tool: str) -> str:
    """The registry name of a server's tool: `<server>__<tool>`, within OpenAI's 64 chars."""
    return _NAME.sub("_", f"{server}__{tool}")[:64]


def resolve(values: dict[str, str], secrets: dict[str, str]) -> dict[str, str]:
    """Values that are `$NAME` come from .env (or the environment); others are literal."""
    out: dict[str, str] = {}
    for key, value in values.items():
        if value.startswith("$") and len(value) > 1:
            out[key] = secrets.get(value[1:], os.environ.get(value[1:], ""))
        else:
            out[key] = value
    return out


class McpServerConn:
    """One configured server: connected in a background task, restarted when it dies."""

    def __init__(self, cfg: McpServer, secrets: dict[str, str],
                 changed: Callable[[], Awaitable[None]]) -> None:
        self.cfg = cfg
        self.secrets = secrets
        self.changed = changed  # the executor republishes its tools
        self.client: Any = None
        self.tools: dict[str, Any] = {}  # MCP tool name -> its definition
        self.state = "starting"
        self.error = ""
        self.restarts = 0
        self.since = time.time()
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()

    def facts(self) -> dict[str, Any]:
        return {"state": self.state, "tools": sorted(self.tools), "error": self.error,
                "restarts": self.restarts, "since": self.since}

    def start(self) -> None:
        self._task = asyncio.create_task(self._keep_connected(), name=f"mcp:{self.cfg.name}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def wait_ready(self, timeout: float) -> bool:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._ready.wait(), timeout)
        return self.state == "ready"

    def _target(self) -> Any:
        from mcp import StdioServerParameters

        if self.cfg.url:
            headers = resolve(self.cfg.headers, self.secrets)
            if not headers:
                return self.cfg.url
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            return streamable_http_client(self.cfg.url,
                                          http_client=httpx2.AsyncClient(headers=headers))
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
               "HOME": os.environ.get("HOME", "/tmp"), **resolve(self.cfg.env, self.secrets)}
        return StdioServerParameters(command=self.cfg.command, args=list(self.cfg.args), env=env)

    async def _keep_connected(self) -> None:
        delay = 1.0
        while True:
            try:
                await self._session()
                self.error = self.error or "the server closed the connection"
            except asyncio.CancelledError:
                raise
            except BaseException as exc:  # noqa: BLE001 - a server's failure is reported, not fatal
                self.error = _describe(exc)
            # Its tools stay listed (the model may call them; they say the server is down).
            self.client = None
            self.state = "restarting"
            self.restarts += 1
            self.since = time.time()
            self._ready.set()
            log.warning("MCP server %s is down (%s); restarting in %.0fs", self.cfg.name,
                        self.error, delay)
            await self.changed()
            await asyncio.sleep(delay)
            delay = min(delay * 2, 60.0)
            self._ready.clear()

    async def _session(self) -> None:
        from mcp import Client

        target = self._target()
        # The handshake and the tool list must come within timeout_secs: a server that never
        # answers is restarted like one that crashed (the deadline is lifted once it is up).
        async with asyncio.timeout(self.cfg.timeout_secs) as deadline, \
                Client(target, read_timeout_seconds=self.cfg.timeout_secs,
                       mode="legacy") as client:
            listed = await client.list_tools()
            deadline.reschedule(None)
            allow, deny = set(self.cfg.allow), set(self.cfg.deny)
            self.tools = {t.name: t for t in listed.tools
                          if (not allow or t.name in allow) and t.name not in deny}
            self.client, self.state, self.error = client, "ready", ""
            self.since = time.time()
            self._ready.set()
            log.info("MCP server %s ready: %s", self.cfg.name, ", ".join(self.tools) or "no tools")
            await self.changed()
            while True:  # stay connected; a dead server shows up as a failing ping
                await asyncio.sleep(15)
                await asyncio.wait_for(client.send_ping(), self.cfg.timeout_secs)  # legacy mode

    async def call(self, tool: str, arguments: dict[str, Any]) -> ToolOutput:
        client = self.client
        if client is None or self.state != "ready":
            why = f" ({self.error})" if self.error else ""
            return ToolOutput(ok=False, output=(
                f"The MCP server {self.cfg.name} is unavailable{why}; it is being restarted. "
                "Try again shortly or do without it."))
        try:
            result = await asyncio.wait_for(client.call_tool(tool, arguments),
                                            self.cfg.timeout_secs)
        except TimeoutError:
            return ToolOutput(ok=False, timed_out=True, output=(
                f"The MCP server {self.cfg.name} did not answer {tool} within "
                f"{self.cfg.timeout_secs:.0f}s."))
        except Exception as exc:  # noqa: BLE001 - a broken answer is the tool's failure
            return ToolOutput(ok=False, output=f"The MCP server {self.cfg.name} failed on "
                                               f"{tool}: {_describe(exc)}")
        parts = []
        for block in getattr(result, "content", None) or []:
            text = getattr(block, "text", None)
            parts.append(text if isinstance(text, str) else f"[{getattr(block, 'type', 'data')}]")
        text = "\n".join(parts).strip() or "(no output)"
        if len(text) > OUTPUT_CAP:
            text = text[:OUTPUT_CAP] + f"\n[... {len(text) - OUTPUT_CAP} characters cut ...]"
        return ToolOutput(ok=not getattr(result, "is_error", False), output=text)


def _describe(exc: BaseException) -> str:
    """A one-line cause, unwrapping the SDK's exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"[:300] if str(exc) else type(exc).__name__


class McpTool(Tool):
    """One tool of an MCP server, offered to the model under `<server>__<tool>`."""

    core = False  # its calls are counted in _meta like an agent-created tool's
    outbound = True  # its arguments leave for another program (maybe another host)
    side_effects = True  # unknown: a redelivered call after a crash is reported, not re-run

    def __init__(self, conn: McpServerConn, definition: Any) -> None:
        self.conn = conn
        self.remote = str(definition.name)
        schema = getattr(definition, "input_schema", None) or {"type": "object"}
        self.spec = ToolSpec(
            name=tool_name(conn.cfg.name, self.remote),
            description=(f"[MCP server {conn.cfg.name}] "
                         + (getattr(definition, "description", "") or self.remote))[:1024],
            parameters=dict(schema),
        )

    async def approval_reason(self, req: ToolRequest, ctx: ToolContext) -> str:
        approve = self.conn.cfg.approval
        if approve == "always" or (isinstance(approve, list) and self.remote in approve):
            return f"the MCP server {self.conn.cfg.name} is set to ask before {self.remote}"
        return ""

    async def run(self, req: ToolRequest, ctx: ToolContext) -> ToolOutput:
        return await self.conn.call(self.remote, dict(req.arguments))


class McpHub:
    """Every configured server, and the tools they offer right now."""

    def __init__(self, servers: list[McpServer], secrets: dict[str, str],
                 changed: Callable[[], Awaitable[None]]) -> None:
        self.conns = [McpServerConn(cfg, secrets, changed) for cfg in servers]

    async def start(self, wait: float = 10.0) -> None:
        """Connect all; wait a little for them so the first tool list includes theirs."""
        for conn in self.conns:
            conn.start()
        await asyncio.gather(*(c.wait_ready(wait) for c in self.conns))

    async def stop(self) -> None:
        await asyncio.gather(*(c.stop() for c in self.conns))

    def tools(self) -> list[McpTool]:
        return [McpTool(c, d) for c in self.conns for d in c.tools.values()]

    def facts(self) -> dict[str, Any]:
        return {c.cfg.name: c.facts() for c in self.conns}
