"""The two legs of one recall (BM25 full text and nearest vectors) run against LanceDB with as
few hand-offs as possible; store.py fuses what they find.

Why not LanceDB's synchronous query builder: each of its queries is about seven round trips to
LanceDB's event-loop thread (schema look-ups, the execution, each batch), ~1 ms of a 3 ms leg on
a busy machine. Here a leg is one coroutine on that same loop (one hand-off, the table handle
the store writes through, so a search sees every write), the full-text leg starts before the
query is embedded and runs while this thread embeds it (onnxruntime and LanceDB both release the
GIL), and the vector leg follows the embedding. Without LanceDB's asynchronous handle (a version
that moved it) the legs run through the synchronous builder, one after the other: slower, same
results.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import Any

from actors.memory import _lance
from contracts.memory import MemoryHit

log = logging.getLogger(__name__)

# Partitions an IVF search probes at least; more only when the scope has too few rows in them
# (maximum_nprobes 0: until `limit` rows are found), so a narrow scope still gets every match.
NPROBES = 20


class Legs:
    """Runs the full-text and vector legs of a search on one table."""

    def __init__(self, table: Any) -> None:
        self.table = table
        self._async, self._loop = _async_handle(table)

    def run(self, query: str, embed: Callable[[], list[float] | None], where: str, limit: int,
            columns: list[str], fts: bool) -> list[list[MemoryHit]]:
        """Ranked hits of each leg that ran (full text first), best first within a leg.

        `embed` makes the query's vector (None: no vector leg); it runs in this thread while the
        full-text leg runs on LanceDB's loop. A failing leg logs and leaves the other.
        """
        if self._async is None:
            return self._run_sync(query, embed, where, limit, columns, fts)
        text = self._submit(self._fts(query, where, limit, columns)) if fts else None
        vector = embed()  # should it raise, the full-text leg ends on the loop, unread
        near = (self._submit(self._nearest(vector, where, limit, columns))
                if vector is not None else None)
        ranked = [_result(text, "full-text")] if text is not None else []
        if near is not None:
            ranked.append(_result(near, "vector"))
        return ranked

    def _submit(self, coro: Coroutine[Any, Any, list[MemoryHit]]) -> Future[list[MemoryHit]]:
        assert self._loop is not None  # run() takes the synchronous path without a loop
        # LanceDB's loop as it is now: LanceDB starts a new one in a forked child
        return asyncio.run_coroutine_threadsafe(coro, self._loop.loop)

    async def _fts(self, query: str, where: str, limit: int,
                   columns: list[str]) -> list[MemoryHit]:
        from lancedb.query import MatchQuery

        match = MatchQuery(query, "content")  # type: ignore[call-arg]  # pydantic defaults
        found = await (self._async.query().nearest_to_text(match).where(where)
                       .select([*columns, "_score"]).limit(limit).to_arrow())
        rows = found.to_pylist()
        rows.sort(key=lambda r: r.get("_score") or 0.0, reverse=True)
        return [_lance.hit(r) for r in rows]

    async def _nearest(self, vector: list[float], where: str, limit: int,
                       columns: list[str]) -> list[MemoryHit]:
        found = await (self._async.query().nearest_to(vector).column(_lance.VECTOR)
                       .distance_type("cosine").maximum_nprobes(0).minimum_nprobes(NPROBES)
                       .where(where).select([*columns, "_distance"]).limit(limit).to_arrow())
        return [_lance.hit(r) for r in found.to_pylist()]

    def _run_sync(self, query: str, embed: Callable[[], list[float] | None], where: str,
                  limit: int, columns: list[str], fts: bool) -> list[list[MemoryHit]]:
        ranked: list[list[MemoryHit]] = []
        if fts:
            try:
                ranked.append(_lance.fts(self.table, query, where, limit, columns))
            except Exception as exc:  # noqa: BLE001 - odd query syntax: the vector leg answers
                log.warning("memory store: full-text query failed: %s", exc)
                ranked.append([])
        vector = embed()
        if vector is not None:
            try:
                ranked.append(_lance.nearest(self.table, vector, where, limit, columns,
                                             NPROBES))
            except Exception as exc:  # noqa: BLE001 - one leg failing leaves the other
                log.warning("memory store: vector query failed: %s", exc)
                ranked.append([])
        return ranked


def _result(future: Future[list[MemoryHit]], leg: str) -> list[MemoryHit]:
    try:
        return future.result()
    except Exception as exc:  # noqa: BLE001 - odd query syntax, a missing column: the other leg
        log.warning("memory store: %s query failed: %s", leg, exc)
        return []


def _async_handle(table: Any) -> tuple[Any, Any]:
    """LanceDB's asynchronous handle behind a synchronous table and the holder of the loop it
    runs on (`.loop`), or (None, None) when this LanceDB keeps them elsewhere."""
    try:
        from lancedb.background_loop import LOOP
        from lancedb.table import AsyncTable
    except ImportError:
        return None, None
    inner = getattr(table, "_table", None)
    loop = getattr(LOOP, "loop", None)
    if not isinstance(inner, AsyncTable) or not isinstance(loop, asyncio.AbstractEventLoop):
        log.warning("memory store: this LanceDB has no asynchronous table handle; searches "
                    "take the slower synchronous path")
        return None, None
    return inner, LOOP
