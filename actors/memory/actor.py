"""The memory actor: owns the LanceDB store under data/memory; answers saves, searches, recalls,
the chat's `/memory` and the owner's `wintermute memory` commands. Scopes come from the turn
(actors/memory/scopes.py); search is hybrid when the embedding model works (store.py)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from typing import Any

from actors.base import Actor
from actors.memory._labels import OVERFETCH, visible
from actors.memory.scopes import OWNER, Audience, audience
from bus import delivery
from contracts import (
    ApprovalResolved,
    MemoryAdmin,
    MemoryChanged,
    MemoryCommand,
    MemoryPropose,
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

MemoryInbox = MemorySave | MemorySearch | Recall | MemoryCommand | MemoryPropose
#: A store failure is retried by redelivery this many times, then the tool call is answered
#: with the failure: remembering is a side effect, the turn must go on.
SOFT_AFTER = 3


class MemoryActor(Actor):
    name = "memory"
    inbox = MemoryInbox | MemoryAdmin | ApprovalResolved  # from its three durables

    async def on_start(self) -> None:
        from actors.memory.embedding import EmbeddingUnavailable, make_embedder
        from actors.memory.store import MemoryStore
        from kit.secrets import load_dotenv

        models = self.config.models
        env = {**load_dotenv(self.home / ".env"), **os.environ}  # .env: embedding API keys
        try:
            embedder = make_embedder(models.embedding, models.embedding_url, env)
            problem = ""
        except EmbeddingUnavailable as exc:
            embedder, problem = None, str(exc)
        path = self.home / "data" / "memory"
        self.store = await asyncio.to_thread(MemoryStore, path, embedder)
        if problem:
            self.store.disable_vectors(problem)
        await self._publish_stats()

    def health_info(self) -> dict[str, Any]:
        store = getattr(self, "store", None)
        if store is None:
            return {"memories": 0}
        return {"memories": store.count(), "search": self._search_mode(),
                "warning": store.status_note()}

    def _search_mode(self) -> str:
        store = self.store
        return f"hybrid ({store.embedder.name})" if store.hybrid and store.embedder else "full-text"

    async def audit(self, change: str, memory_id: str, cause: str, scope: str = "",
                    by: str = "", content: str = "") -> None:
        """Publish the immutable audit event of one change (after the change was made)."""
        event = MemoryChanged(id=f"audit:{cause}:{change}:{memory_id}", memory_id=memory_id,
                              change=change, scope=scope, by=by, cause=cause, content=content)
        await self.send(event)

    async def _publish_stats(self) -> None:
        record = MemoryFacts(counts=self.store.counts_by_kind(), search=self._search_mode(),
                              warning=self.store.status_note())
        await self.bus.kv_put(self.subjects.kv_state, "memory", record)

    async def handle(self, msg: MemoryInbox | MemoryAdmin | ApprovalResolved) -> None:
        from actors.memory import _commands

        match msg:
            case MemorySave():
                await self._save(msg)
            case MemorySearch():
                await self._search(msg)
            case Recall():
                await self._recall(msg)
            case MemoryCommand():
                await _commands.chat_command(self, msg)
            case MemoryPropose():
                from actors.memory._learn import propose

                await propose(self, msg)
            case MemoryAdmin():
                await _commands.admin(self, msg)
            case ApprovalResolved():
                from actors.memory._learn import resolved

                await resolved(self, msg)

    def audience(self, principal: str, session: str, is_owner: bool) -> Audience:
        return audience(principal, session, is_owner, self.config.owner.principals)

    async def _save(self, msg: MemorySave) -> None:
        from actors.memory.store import KINDS

        kind = msg.kind if msg.kind in KINDS else "fact"
        scope = self.audience(msg.principal, msg.session, msg.is_owner).write
        try:
            mem_id = await asyncio.to_thread(
                self.store.save, msg.content, kind=kind, tags=msg.tags, session=msg.session,
                scope=scope, id=short_hash(msg.id, 12), label=msg.label,
            )
            ok, text = True, f"Saved as memory {mem_id} ({kind})."
            await self.audit("saved", mem_id, msg.id, scope, msg.principal, msg.content)
        except ValueError as exc:
            ok, text = False, f"Not saved: {exc}"
        except Exception as exc:  # noqa: BLE001 - the store failing (disk full, read-only)
            if delivery() < SOFT_AFTER:
                raise  # maybe passing: JetStream delivers it again shortly
            log.exception("memory save failed; answering the call without it")
            ok, text = False, f"Not saved: the memory store failed ({exc}). Go on without it."
        with contextlib.suppress(Exception):  # counts are for /memory: not worth a failure
            await self._publish_stats()
        if msg.for_call is not None:
            await self._answer(msg.for_call, ok, text)

    async def _search(self, msg: MemorySearch) -> None:
        scopes = self.audience(msg.principal, msg.session, msg.is_owner).read
        limit = max(1, min(msg.limit, 20))
        try:
            hits = await asyncio.to_thread(self.store.search, msg.query, limit * OVERFETCH,
                                           scopes)
            hits = visible(hits, msg.ceiling, msg.sink, self.config, limit)
        except Exception as exc:  # noqa: BLE001 - as for saves: retry, then answer without
            if delivery() < SOFT_AFTER or msg.for_call is None:
                raise
            log.exception("memory search failed; answering the call without it")
            await self._answer(msg.for_call, False, f"The memory store failed ({exc}).")
            return
        if hits:
            text = "\n".join(f"- [{h.kind}] {h.content} (id {h.id})" for h in hits)
        else:
            text = f"No memories match {msg.query!r}."
        if msg.for_call is not None:
            await self._answer(msg.for_call, True, text)

    async def _recall(self, msg: Recall) -> None:
        scopes = self.audience(msg.principal, msg.session, msg.is_owner).read
        try:
            hits = await asyncio.to_thread(self.store.search, msg.query,
                                           msg.limit * OVERFETCH, scopes)
            hits = visible(hits, msg.ceiling, msg.sink, self.config, msg.limit)
            error = ""
        except Exception as exc:  # noqa: BLE001 - a turn goes on without memories
            log.exception("recall failed")
            hits, error = [], f"memory search failed: {exc}"
        out = Recalled(
            id=f"{msg.id}:recalled", session=msg.session, turn_id=msg.turn_id, hits=hits,
            error=error, owner_context=OWNER in scopes,
        )
        await self.send(out)

    async def _answer(self, call: ToolRequest, ok: bool, text: str) -> None:
        result = ToolResult(
            id=f"{call.id}:result", session=call.session, turn_id=call.turn_id, step=call.step,
            call_id=call.call_id, name=call.name, ok=ok, output=text, reply_to=call.reply_to,
        )
        await self.send(result)
