"""The registry of agent-created tools: scripts/*.json + *.py, reloaded when files change."""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from actors.executor.dynamic import deps
from actors.executor.dynamic.meta import MetaBook, ToolMeta
from actors.executor.dynamic.run import DynamicTool
from actors.executor.dynamic.spec import NAME_RE, SpecError, parse_spec_file
from kit import safefs

if TYPE_CHECKING:
    from bus import Bus
    from contracts import ToolSpec

log = logging.getLogger(__name__)

Signature = tuple[int, ...]  # inode, mtime and size of the .json, then of the .py


class ScriptRegistry:
    """Name -> DynamicTool for every valid pair in scripts/, plus why the others are broken."""

    def __init__(self, scripts: Path, bus: Bus, reserved: Callable[[], Iterable[str]]) -> None:
        self.scripts = scripts
        self.meta = MetaBook(bus)
        self._reserved = reserved
        self._tools: dict[str, DynamicTool] = {}
        self._problems: dict[str, str] = {}
        self._sigs: dict[str, Signature] = {}
        self._deps_sig: tuple[tuple[str, int, int], ...] = ()
        self._lock = asyncio.Lock()

    async def load(self) -> None:
        """Read saved _meta, then the scripts folder."""
        await self.meta.load()
        await self.refresh()  # also commits dependency files edited while we were away

    def get(self, name: str) -> DynamicTool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return sorted(self._tools)

    def problem(self, name: str) -> str:
        """Why scripts/<name> is not a usable tool, or "" if it is fine or absent."""
        return self._problems.get(name, "")

    def _scan(self) -> dict[str, Signature]:
        sigs: dict[str, Signature] = {}
        try:
            candidates = sorted(self.scripts.glob("*.json"))
        except OSError:
            return sigs
        for spec_file in candidates:
            # A .json without a .py next to it is not a tool (the agent may keep data here).
            try:
                js, py = spec_file.stat(), spec_file.with_suffix(".py").stat()
            except OSError:
                continue
            sigs[spec_file.stem] = (js.st_ino, js.st_mtime_ns, js.st_size,
                                    py.st_ino, py.st_mtime_ns, py.st_size)
        return sigs

    async def refresh(self) -> bool:
        """Reload what changed on disk since the last look; True if the tools changed."""
        async with self._lock:
            deps_sig = deps.signature(self.scripts)
            if deps_sig != self._deps_sig:
                self._deps_sig = deps_sig
                committed = await deps.commit_dependencies(self.scripts)
                if committed:
                    log.info("committed %s", ", ".join(committed))
            sigs = self._scan()
            if sigs == self._sigs:
                return False
            reserved = set(self._reserved())
            new_version = False
            for name in set(self._sigs) - set(sigs):
                self._tools.pop(name, None)
                self._problems.pop(name, None)
            for name, sig in sigs.items():
                if self._sigs.get(name) != sig:
                    new_version |= self._load_one(name, reserved)
            self._sigs = sigs
            if new_version:
                await self.meta.save()
            log.info("agent-created tools: %s", ", ".join(self.names()) or "none")
            return True

    def _load_one(self, name: str, reserved: set[str]) -> bool:
        """(Re)build one tool from its files; True if its content is new to the _meta book."""
        self._tools.pop(name, None)
        self._problems.pop(name, None)
        if not NAME_RE.fullmatch(name):
            self._problems[name] = (f"scripts/{name}.json is not a valid tool name (lowercase "
                                    "letters, digits and underscores).")
            return False
        if name in reserved:
            self._problems[name] = f"scripts/{name}.json has the name of a core tool, which wins."
            return False
        try:  # never through a link the sandbox planted (to config.toml, .env, ...)
            spec_bytes = safefs.read_bytes(self.scripts, f"{name}.json")
            code = safefs.read_bytes(self.scripts, f"{name}.py")
            spec = parse_spec_file(name, spec_bytes)
        except (OSError, safefs.UnsafePath) as exc:
            self._problems[name] = f"scripts/{name} could not be read: {exc}."
            return False
        except SpecError as exc:
            self._problems[name] = str(exc)
            return False
        digest = hashlib.sha256(spec_bytes + b"\0" + code).hexdigest()
        changed = self.meta.seen(name, digest)
        meta = self.meta.get(name)
        self._tools[name] = DynamicTool(spec, self.scripts / f"{name}.py",
                                        meta.version if meta else 1)
        return changed

    def offered(self, limit: int) -> list[DynamicTool]:
        """The tools shown to the model: at most `limit`, most recently used or changed first.

        Ranking by relevance needs embeddings, which are not built yet; recency stands in.
        """
        def recency(tool: DynamicTool) -> str:
            meta = self.meta.get(tool.name)
            return meta.recency() if meta else ""

        ranked = sorted(self._tools.values(), key=lambda t: t.name)
        ranked.sort(key=recency, reverse=True)
        return ranked[:max(limit, 0)]

    async def record(self, name: str, ok: bool, duration_ms: int, error: str,
                     timed_out: bool) -> None:
        """Count one call in _meta and save it."""
        self.meta.record(name, ok, duration_ms, error, timed_out)
        await self.meta.save()

    def catalog(self, core: list[ToolSpec], limit: int) -> list[dict[str, Any]]:
        """Every tool with its kind, whether it is offered, what is wrong with it, and _meta."""
        offered = {t.name for t in self.offered(limit)}
        rows: list[dict[str, Any]] = [
            {"name": s.name, "kind": "core", "description": s.description, "offered": True}
            for s in core
        ]
        for name in sorted({*self._tools, *self._problems}):
            tool = self._tools.get(name)
            meta: ToolMeta | None = self.meta.get(name)
            rows.append({
                "name": name, "kind": "agent",
                "description": tool.spec.description if tool else "",
                "offered": name in offered, "problem": self._problems.get(name, ""),
                "timeout_secs": tool.script_spec.timeout_secs if tool else None,
                "meta": meta.public() if meta else None,
            })
        return rows
