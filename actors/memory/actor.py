"""The memory actor: owns the LanceDB store under data/memory; answers saves, searches, recalls,
the chat's `/memory` and the owner's `wintermute memory` commands. Scopes come from the turn
(actors/memory/scopes.py); search is hybrid when the embedding model works (store.py)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from typing import Any

from actors.base import Actor
from actors.memory._labels import OVERFETCH, visible
from actors.memory.scopes import OWNER, Audience, audience
from actors.memory.store import TABLE  # store.py imports LanceDB only when a store opens
from bus import delivery
from contracts import (
    ApprovalResolved,
    LlmResponse,
    MemoryAdmin,
    MemoryChanged,
    MemoryCommand,
    MemoryDream,
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
USED_FLUSH = 200  # recall stamps kept before they are written


class MemoryActor(Actor):
    name = "memory"
    # its four durables (memory-dreaming: the model's answers to the dreaming pass)
    inbox = MemoryInbox | MemoryAdmin | MemoryDream | ApprovalResolved | LlmResponse
    #: Memories returned by recalls and searches since the last flush (id -> when): written to
    #: their `used` column in batches, not once per recall (dreaming decays the unused ones).
    used: dict[str, float]
    #: Dreaming's model requests awaiting their answer, by request id (_dream_model.py).
    dreams: dict[str, asyncio.Future[LlmResponse]]

    async def on_start(self) -> None:
        # LanceDB (~1.4 s to import, ~130 MB) loads on the first message that needs the store
        # (`open_store`), the embedding model on the first vector: the actor reports healthy
        # within a second and stays small at rest. A recall while no table exists on disk
        # (nothing was ever saved) answers "no memories" without loading anything.
        from actors.memory._vectors import Vectors
        from actors.memory.embedding import EmbeddingUnavailable, make_embedder
        from kit.secrets import load_dotenv

        self._opening = asyncio.Lock()
        self.used = {}
        self.dreams = {}
        self._store_path = self.home / "data" / "memory"
        models = self.config.models
        env = {**load_dotenv(self.home / ".env"), **os.environ}  # .env: embedding API keys
        try:
            self._embedder = make_embedder(models.embedding, models.embedding_url, env)
            self._problem = ""
        except EmbeddingUnavailable as exc:
            self._embedder, self._problem = None, str(exc)
        # What status shows until the store opens: the last run's counts, this run's model.
        vectors = Vectors(self._store_path / "embedding.json", self._embedder)
        if self._problem:
            vectors.problem = self._problem
        last = await self.bus.kv_get_as(self.subjects.kv_state, "memory", MemoryFacts)
        mode = f"hybrid ({self._embedder.name})" if vectors.usable and self._embedder else "full-text"
        counts = last.counts if last is not None and self._stored() else {}
        with contextlib.suppress(Exception):
            await self.bus.kv_put(self.subjects.kv_state, "memory", MemoryFacts(
                counts=counts, search=mode, warning=vectors.note()))

    def _stored(self) -> bool:
        """Whether the memory table exists on disk (an opened store always makes it)."""
        return (self._store_path / f"{TABLE}.lance").exists()

    async def open_store(self) -> None:
        """Open the store (and choose the embedder) once, on first use."""
        if getattr(self, "store", None) is not None:
            return
        async with self._opening:
            if getattr(self, "store", None) is not None:
                return
            from actors.memory._changes import ChangeLog
            from actors.memory.store import MemoryStore

            store = await asyncio.to_thread(MemoryStore, self._store_path, self._embedder)
            if self._problem:
                store.disable_vectors(self._problem)
            self.changes = await asyncio.to_thread(ChangeLog, self._store_path)
            self.store = store
            log.info("memory store opened (%d memories)", store.count())
        with contextlib.suppress(Exception):  # counts are for status: not worth a failure
            await self._publish_stats()

    async def on_stop(self) -> None:
        with contextlib.suppress(Exception):  # best effort: a lost stamp only ages a memory
            await self.flush_used()

    async def _touch(self, ids: list[str]) -> None:
        self.used.update(dict.fromkeys(ids, time.time()))
        if len(self.used) >= USED_FLUSH:
            with contextlib.suppress(Exception):  # a recall never fails for its stamp
                await self.flush_used()

    async def flush_used(self) -> None:
        """Write the recall stamps kept since the last flush (one update for all of them)."""
        if not getattr(self, "used", None):
            return
        stamps, self.used = self.used, {}
        await asyncio.to_thread(self.store.update, list(stamps), {"used": max(stamps.values())})

    def health_info(self) -> dict[str, Any]:
        store = getattr(self, "store", None)
        if store is None:
            return {"memories": None if self._stored() else 0, "search": "loads on first use"}
        return {"memories": store.count(), "search": self._search_mode(),
                "warning": store.status_note()}

    def _search_mode(self) -> str:
        store = self.store
        return f"hybrid ({store.embedder.name})" if store.hybrid and store.embedder else "full-text"

    async def audit(self, change: str, memory_id: str, cause: str, scope: str = "",
                    by: str = "", content: str = "", before: str | None = None) -> None:
        """Record one change (after it was made) in the change log that `/memory undo` reads,
        and publish its immutable audit event. `before`: the status it changed from, for a
        change whose TRANSITIONS entry does not say (a revoke)."""
        from actors.memory._facts import TRANSITIONS

        if not scope or not content:
            hit = await asyncio.to_thread(self.store.get, memory_id)
            scope, content = scope or (hit.scope if hit else ""), content or (
                hit.content if hit else "")
        if change in TRANSITIONS or before is not None:
            was, after = TRANSITIONS.get(change, (before or "", change))
            await asyncio.to_thread(self.changes.add, cause, memory_id, scope, was, after)
        event = MemoryChanged(id=f"audit:{cause}:{change}:{memory_id}", memory_id=memory_id,
                              change=change, scope=scope, by=by, cause=cause, content=content)
        await self.send(event)

    async def _publish_stats(self) -> None:
        record = MemoryFacts(counts=self.store.counts_by_kind(), search=self._search_mode(),
                              warning=self.store.status_note())
        await self.bus.kv_put(self.subjects.kv_state, "memory", record)

    async def handle(self, msg: MemoryInbox | MemoryAdmin | ApprovalResolved | LlmResponse
                     ) -> None:
        from actors.memory import _commands

        if isinstance(msg, LlmResponse):  # to the dreaming pass that waits for it, if any
            waiting = self.dreams.get(msg.turn_id)
            if waiting is not None and not waiting.done():
                waiting.set_result(msg)
            return
        if not (isinstance(msg, Recall) and not self._stored()):
            await self.open_store()
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
            case MemoryDream():
                from actors.memory._dream import dream

                await dream(self, msg.id)
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
        await self._touch([h.id for h in hits])
        if hits:
            text = "\n".join(f"- [{h.kind}] {h.content} (id {h.id})" for h in hits)
        else:
            text = f"No memories match {msg.query!r}."
        if msg.for_call is not None:
            await self._answer(msg.for_call, True, text)

    async def _recall(self, msg: Recall) -> None:
        scopes = self.audience(msg.principal, msg.session, msg.is_owner).read
        store = getattr(self, "store", None)  # None: nothing was ever saved, nothing to find
        try:
            hits = (await asyncio.to_thread(store.search, msg.query, msg.limit * OVERFETCH,
                                            scopes) if store is not None else [])
            hits = visible(hits, msg.ceiling, msg.sink, self.config, msg.limit)
            error = ""
        except Exception as exc:  # noqa: BLE001 - a turn goes on without memories
            log.exception("recall failed")
            hits, error = [], f"memory search failed: {exc}"
        await self._touch([h.id for h in hits])
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
