"""The executor's side of agent-created tools: reload, publish, count calls, revert."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

import msgspec

from actors.executor.base import Tool, ToolOutput
from actors.executor.dynamic.create import CreateTool
from actors.executor.dynamic.git import GitError, Reverted, ensure_repo, revert_last
from actors.executor.dynamic.registry import ScriptRegistry
from contracts import Notice, ScriptsRevert, ScriptsReverted, ToolSpec, short_hash
from contracts.records import CatalogRow

if TYPE_CHECKING:
    from actors.executor.actor import ExecutorActor

log = logging.getLogger(__name__)

WATCH_SECS = 2.0  # how often scripts/ is looked at besides every request
CATALOG_KEY = "tools.catalog"


class ScriptsService:
    """Keeps the executor's view of scripts/ current and tells the rest of the system."""

    def __init__(self, actor: ExecutorActor) -> None:
        self.actor = actor
        self.bus = actor.bus
        self.registry = ScriptRegistry(actor.ctx.scripts, actor.bus, actor.registry.names)
        create = actor.registry.get("create_tool")
        if isinstance(create, CreateTool):  # also refuse core tools added after core_tools()
            create.reserved = actor.registry.names
        self._published: dict[str, bytes] = {}
        self._publish_lock = asyncio.Lock()

    @property
    def limit(self) -> int:
        return self.actor.config.budget.max_dynamic_tools_per_turn

    async def start(self) -> None:
        """Load _meta and scripts/, then watch the folder for hand edits."""
        self.actor.ctx.scripts.mkdir(parents=True, exist_ok=True)
        # `up` does this too; an executor started on its own (Kubernetes) must not use an old
        # scripts/.git the sandbox could have written.
        await asyncio.to_thread(ensure_repo, self.actor.ctx.scripts)
        await self.registry.load()
        self.actor.spawn(self._watch(), "scripts")

    async def _watch(self) -> None:
        while True:
            self.actor.alive("scripts", every=WATCH_SECS)
            await self.refresh()
            await asyncio.sleep(WATCH_SECS)

    async def refresh(self) -> None:
        """Reload scripts/ if it changed on disk, and republish the tool lists if so."""
        try:
            if await self.registry.refresh():
                await self.actor.publish_tools()
        except Exception:  # noqa: BLE001 - a bad file or KV hiccup must not block tool calls
            log.exception("reloading scripts/ failed")

    def get(self, name: str) -> Tool | None:
        return self.registry.get(name)

    def names(self) -> list[str]:
        return self.registry.names()

    def unknown(self, name: str, core: list[str]) -> str:
        """The sentence for a call to a tool that does not exist (or is broken)."""
        problem = self.registry.problem(name)
        if problem:
            return (f"The tool {name} cannot be loaded: {problem} Fix it with create_tool "
                    "(or /revert the last change).")
        known = ", ".join(core + self.registry.names())
        return f"Unknown tool {name!r}. Available: {known}."

    async def publish(self, core: list[ToolSpec]) -> None:
        """Write the offered tool specs (for the planner) and the catalog (for people)."""
        async with self._publish_lock:
            offered = [t.spec for t in self.registry.offered(self.limit)]
            await self._put("tools", msgspec.json.encode(core + offered))
            rows = msgspec.convert(self.registry.catalog(core, self.limit), list[CatalogRow])
            await self._put(CATALOG_KEY, msgspec.json.encode(rows))

    async def _put(self, key: str, data: bytes) -> None:
        if self._published.get(key) == data:
            return
        await self.bus.kv_put(self.bus.subjects.kv_state, key, data)
        self._published[key] = data

    async def after_run(self, tool: Tool, out: ToolOutput, duration_ms: int) -> int:
        """Count an agent-created tool's call, pick up files a tool changed; the tool's version."""
        version = int(getattr(tool, "version", 0)) if not tool.core else 0
        try:
            if not tool.core:
                error = "" if out.ok else self.actor.ctx.redactor.redact(out.output)
                await self.registry.record(tool.name, out.ok, duration_ms, error, out.timed_out)
            changed = await self.registry.refresh()
            if changed or not tool.core:
                await self.actor.publish_tools()
        except Exception:  # noqa: BLE001 - the call's result matters more than its statistics
            log.exception("updating tools after %s failed", tool.name)
        return version

    async def revert(self, msg: ScriptsRevert) -> None:
        """Undo the last scripts/ commit once, then tell the event subject and reply_to."""
        subjects = self.bus.subjects
        marker = "revert." + short_hash(msg.id, 32)
        if not msg.is_owner:
            done = Reverted(ok=False, text="Only the owner may revert changes to scripts/.")
        elif await self.bus.kv_get(subjects.kv_done, marker) is not None:
            done = Reverted(ok=False, text=(
                "The executor restarted while this revert was running, so it was not run "
                "again; check `git --git-dir=data/scripts.git log` and revert again if needed."))
        else:
            await self.bus.kv_put(subjects.kv_done, marker, b"started")
            skills = getattr(self.actor, "skills", None)
            repo = skills.root if msg.repo == "skills" and skills else self.actor.ctx.scripts
            try:
                done = await revert_last(repo, msg.head)
            except GitError as exc:
                done = Reverted(ok=False, text=f"Could not revert: {exc}.")
            await self.refresh()
            if skills is not None and msg.repo == "skills":
                await skills.refresh(force=True)
        log.info("revert requested by %s: %s", msg.principal or "unknown", done.text)
        event = ScriptsReverted(id=f"{msg.id}:reverted", request_id=msg.id, ok=done.ok,
                                text=done.text, commit=done.commit, files=done.files)
        await self.actor.send(event)
        if msg.reply_to is not None:
            sink = msg.reply_to
            notice = Notice(id=f"{msg.id}:notice", sink=sink, text=done.text, source="executor")
            await self.actor.send(notice)

    def health(self) -> dict[str, Any]:
        return {"agent_tools": len(self.registry.names())}
