"""The memory actor: owns the LanceDB store under data/; answers saves, searches and recalls."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from actors.base import Actor
from contracts import (
    MemorySave,
    MemorySearch,
    Recall,
    Recalled,
    ToolRequest,
    ToolResult,
    short_hash,
)
from contracts.records import MemoryFacts

log = logging.getLogger(__name__)

MemoryInbox = MemorySave | MemorySearch | Recall


class MemoryActor(Actor):
    name = "memory"
    inbox = MemoryInbox

    async def on_start(self) -> None:
        from actors.memory.store import MemoryStore

        path = self.home / "data" / "memory"
        self.store = await asyncio.to_thread(MemoryStore, path)
        self.count = await asyncio.to_thread(self.store.count)
        await self._publish_stats()

    def health_info(self) -> dict[str, Any]:
        return {"memories": getattr(self, "count", 0)}

    async def _publish_stats(self) -> None:
        counts = await asyncio.to_thread(self.store.counts_by_kind)
        self.count = sum(counts.values())
        await self.bus.kv_put(self.subjects.kv_state, "memory", MemoryFacts(counts=counts))

    async def handle(self, msg: MemoryInbox) -> None:
        match msg:
            case MemorySave():
                await self._save(msg)
            case MemorySearch():
                await self._search(msg)
            case Recall():
                await self._recall(msg)

    async def _save(self, msg: MemorySave) -> None:
        kind = msg.kind if msg.kind in ("fact", "procedure", "episode", "skill", "note") else "fact"
        try:
            mem_id = await asyncio.to_thread(
                self.store.save, msg.content, kind=kind, tags=msg.tags, session=msg.session,
                id=short_hash(msg.id, 12),
            )
            ok, text = True, f"Saved as memory {mem_id} ({kind})."
        except ValueError as exc:
            ok, text = False, f"Not saved: {exc}"
        await self._publish_stats()
        if msg.for_call is not None:
            await self._answer(msg.for_call, ok, text)

    async def _search(self, msg: MemorySearch) -> None:
        hits = await asyncio.to_thread(self.store.search, msg.query, max(1, min(msg.limit, 20)))
        if hits:
            text = "\n".join(f"- [{h.kind}] {h.content} (id {h.id})" for h in hits)
        else:
            text = f"No memories match {msg.query!r}."
        if msg.for_call is not None:
            await self._answer(msg.for_call, True, text)

    async def _recall(self, msg: Recall) -> None:
        try:
            hits = await asyncio.to_thread(self.store.search, msg.query, msg.limit)
            error = ""
        except Exception as exc:  # noqa: BLE001 - a turn goes on without memories
            log.exception("recall failed")
            hits, error = [], f"memory search failed: {exc}"
        out = Recalled(
            id=f"{msg.id}:recalled", session=msg.session, turn_id=msg.turn_id, hits=hits,
            error=error,
        )
        await self.send(out)

    async def _answer(self, call: ToolRequest, ok: bool, text: str) -> None:
        result = ToolResult(
            id=f"{call.id}:result", session=call.session, turn_id=call.turn_id, step=call.step,
            call_id=call.call_id, name=call.name, ok=ok, output=text, reply_to=call.reply_to,
        )
        await self.send(result)
