"""The memory table in LanceDB: hybrid search (BM25 full text + vectors, fused by reciprocal
rank), scoped, with indexes so a search never scans the whole table.

Indexes: a native full-text (inverted) index on `content`, bitmap indexes on `scope` and
`status` (the prefilter of every search), and a vector index once there are enough vectors
(`VECTOR_INDEX_MIN`; below that a flat search over the prefiltered rows is fast). New rows are
folded into the indexes by `optimize()`; until then Lance searches them flat, so a memory is
findable as soon as it is saved.

Vectors come from the `[models] embedding` model (actors/memory/embedding.py). Which model made
the stored vectors is recorded in `embedding.json` beside the table; with another model (or
none, or one that fails) the store searches full text only and says so in `warning`, until
`reembed()` (``wintermute memory reembed``) rebuilds the vectors.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from actors.memory import _lance
from actors.memory._search import Legs, fuse
from actors.memory._vectors import Vectors
from actors.memory.embedding import Embedder, EmbeddingUnavailable
from contracts.memory import MemoryHit, MemoryRecord

log = logging.getLogger(__name__)

TABLE = "memories"
KINDS = frozenset({"fact", "preference", "procedure", "episode", "skill", "note"})
STATUSES = frozenset({"active", "archived", "proposed", "rejected", "revoked"})
OPTIMIZE_EVERY = 50  # writes between folding new rows into the indexes
# Vectors before the IVF index is built: it keeps them in memory, so an exact search over
# 10k of them takes 1.9 ms instead of 6.7 ms read from the data files, for a 0.1 s build.
VECTOR_INDEX_MIN = 4_096
_HIT_COLUMNS = ["id", "kind", "content", "scope", "label"]


class MemoryStore:
    """A LanceDB table of memories; every method is blocking, writes are serialised by a lock."""

    def __init__(self, path: Path, embedder: Embedder | None = None) -> None:
        """Open or create the table at `path`, migrate it and provision its indexes."""
        import lancedb  # 2 s import: kept local so only the memory actor pays it

        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self.embedder = embedder
        self.vectors = Vectors(self.path / "embedding.json", embedder)
        self._lock = threading.Lock()
        self._writes = 0
        self._db = lancedb.connect(str(self.path))
        self._table = _lance.open_table(self._db, TABLE)
        self._fts_ok = _lance.ensure_indexes(self._table)
        self._legs = Legs(self._table)
        # active memories per kind (count()) and per scope (how exact a search can afford to be)
        self._counts, self._scopes = _lance.active_counts(self._table)
        # memories without a vector (from before vectors, or saved while the model was down)
        self.vectors.unembedded = _lance.without_vectors(self._table) if embedder else 0

    # -- vectors (state in _vectors.py) -------------------------------------------------

    @property
    def warning(self) -> str:
        """Why search is full-text only right now, and what to do; empty when it is hybrid."""
        return self.vectors.warning

    @property
    def hybrid(self) -> bool:
        """Whether searches use vectors now."""
        return self.vectors.usable

    @property
    def unembedded(self) -> int:
        """Active memories without a vector."""
        return self.vectors.unembedded

    def disable_vectors(self, reason: str) -> None:
        """Search full text only, for `reason` (e.g. an invalid `[models] embedding`)."""
        self.vectors.problem = reason

    def status_note(self) -> str:
        """The warning for `status`: full-text only, or memories that lack vectors."""
        return self.vectors.note()

    def _embed(self, texts: list[str]) -> list[list[float]] | None:
        vectors = self.vectors.embed(texts)
        if vectors is not None and not self.vectors.model:
            with self._lock:  # the first vectors: this model owns the column now
                _lance.set_vector_column(self._table, len(vectors[0]))
                self.vectors.record(len(vectors[0]))
        return vectors

    # -- writes --------------------------------------------------------------------------

    def save(self, content: str, *, kind: str = "fact", tags: Iterable[str] = (),
             session: str = "", scope: str = "", id: str | None = None,
             created: float | None = None, status: str = "active", confidence: float = 1.0,
             source: str = "", key: str = "", version: int = 1, replaces: str = "",
             label: str = "internal") -> str:
        """Insert a memory unless a row with the same id exists; return its id.

        `scope` defaults to the memory's own session (see actors/memory/scopes.py).
        """
        content = content.strip() if isinstance(content, str) else ""
        if not content:
            raise ValueError("memory content must not be empty")
        if kind not in KINDS:
            raise ValueError(f"unknown memory kind {kind!r}; expected one of {sorted(KINDS)}")
        mem_id = id or uuid.uuid4().hex
        vectors = self._embed([content])
        row: dict[str, Any] = {
            "id": mem_id, "kind": kind, "content": content, "tags": [str(t) for t in tags],
            "session": session, "created": created or time.time(), "status": status,
            "scope": scope or f"session:{session}", "confidence": confidence, "source": source,
            "key": key, "version": version, "replaces": replaces, "used": 0.0,
            "label": label,
        }
        if vectors is not None:
            row["vector"] = vectors[0]
        with self._lock:
            inserted = _lance.insert_new(self._table, [row])
            if status == "active":
                self._counts[kind] += inserted
                self._scopes[row["scope"]] += inserted
            if vectors is None and self.embedder is not None:
                self.vectors.unembedded += inserted
            self._after_write()
        return mem_id

    def add_many(self, records: list[MemoryRecord],
                 vectors: list[list[float]] | None = None, batch: int = 256) -> int:
        """Insert validated records as they are (scope, status, created kept) in batches,
        embedding them unless `vectors` are given; returns how many were new."""
        added = 0
        for start in range(0, len(records), batch):
            part = records[start : start + batch]
            vecs = (vectors[start : start + batch] if vectors is not None
                    else self._embed([r.content for r in part]))
            rows = [{"id": r.id, "kind": r.kind, "content": r.content, "tags": r.tags,
                     "session": r.session, "created": r.created or time.time(),
                     "status": r.status, "scope": r.scope, "confidence": r.confidence,
                     "source": r.source, "key": r.key, "version": r.version,
                     "replaces": r.replaces, "used": r.used, "label": r.label} for r in part]
            if vecs is not None:
                if not self.vectors.model and self.embedder is not None:
                    self._embed([part[0].content])  # claims the vector column for the model
                for row, vec in zip(rows, vecs, strict=True):
                    row["vector"] = vec
            with self._lock:
                inserted = _lance.insert_new(self._table, rows)
                added += inserted
                self._writes += inserted
        with self._lock:
            self._counts, self._scopes = _lance.active_counts(self._table)
            if added >= OPTIMIZE_EVERY:
                self._optimize_locked()
        return added

    def missing(self, ids: list[str]) -> set[str]:
        """The ids among `ids` that are not in the table."""
        if not ids:
            return set()
        where = "id IN (" + ", ".join(_lance.sql_str(i) for i in ids) + ")"
        return set(ids) - set(_lance.column(self._table, "id", where))

    def forget(self, id: str, scopes: Iterable[str] | None = None) -> bool:
        """Archive an active memory (only within `scopes` when given); True if one was."""
        return self.set_status(id, "active", "archived", scopes)

    def set_status(self, id: str, old: str, new: str,
                   scopes: Iterable[str] | None = None) -> bool:
        """Move a memory from status `old` to `new` (e.g. proposed -> active); True if it was."""
        where = f"id = {_lance.sql_str(id)} AND status = {_lance.sql_str(old)}"
        if scopes is not None:
            where += " AND " + _lance.scope_in(scopes)
        with self._lock:
            found = _lance.rows(self._table, where, ["kind", "scope"])
            if not found:
                return False
            self._table.update(where=where, values={"status": new})
            change = (new == "active") - (old == "active")
            self._counts[found[0]["kind"]] += change
            self._scopes[found[0]["scope"] or ""] += change
            self._after_write()
        return True

    def records(self, where: str, limit: int | None = None) -> list[MemoryRecord]:
        """Memories matching an SQL condition (built with _lance.sql_str), in no set order."""
        return [_lance.record(r) for r in _lance.rows(self._table, where, _lance.RECORD_COLUMNS,
                                                      limit)]

    def update(self, ids: Iterable[str], values: dict[str, Any]) -> None:
        """Set columns other than the status (confidence, last used) of these memories."""
        names = sorted(set(ids))
        if not names:
            return
        with self._lock:
            where = "id IN (" + ", ".join(_lance.sql_str(i) for i in names) + ")"
            self._table.update(where=where, values=values)
            self._after_write()

    def vectors_of(self, where: str) -> dict[str, list[float]]:
        """The stored vectors of the memories matching `where` (none before the first)."""
        if _lance.VECTOR not in self._table.schema.names or not self.hybrid:
            return {}
        found = _lance.rows(self._table, where, ["id", _lance.VECTOR])
        return {r["id"]: r[_lance.VECTOR] for r in found if r[_lance.VECTOR] is not None}

    def known(self, content: str, scope: str) -> bool:
        """Whether this exact content is already remembered or proposed in `scope`."""
        where = (f"content = {_lance.sql_str(content.strip())} AND scope = {_lance.sql_str(scope)}"
                 " AND status IN ('active', 'proposed')")
        return bool(_lance.rows(self._table, where, ["id"], limit=1))

    def _after_write(self) -> None:
        """Every OPTIMIZE_EVERY writes, fold new rows into the indexes (lock held)."""
        self._writes += 1
        if self._writes % OPTIMIZE_EVERY == 0:
            self._optimize_locked()

    def _optimize_locked(self) -> None:
        try:
            self._table.optimize()
            if self.hybrid:
                _lance.ensure_vector_index(self._table, VECTOR_INDEX_MIN)
        except Exception as exc:  # noqa: BLE001 - an index catching up later is harmless
            log.warning("memory store: optimize failed: %s", exc)

    def optimize(self) -> None:
        """Index unindexed rows and compact small fragments (safe to call when idle)."""
        with self._lock:
            self._optimize_locked()

    # -- reads ---------------------------------------------------------------------------

    def search(self, query: str, limit: int = 5,
               scopes: Iterable[str] | None = ()) -> list[MemoryHit]:
        """Active memories in `scopes` matching `query`, best first; never raises on odd queries.

        No scopes, no results: a caller must say whose memories it may see. None means every
        scope, for the owner's command line only.
        """
        if limit <= 0 or not query or not query.strip():
            return []
        where = "status = 'active'"
        if scopes is not None:
            scopes = list(scopes)
            if not any(scopes):
                return []
            where += " AND " + _lance.scope_in(scopes)
        def embed() -> list[float] | None:
            vectors = self._embed([query]) if self.hybrid else None
            return vectors[0] if vectors else None

        return fuse(self._legs.run(query, embed, where, limit * 2, _HIT_COLUMNS, self._fts_ok,
                                   self.active_in(scopes)), limit)

    def recent(self, scopes: Iterable[str] | None = None, limit: int = 50,
               kind: str = "", status: str = "active") -> list[MemoryRecord]:
        """Memories with `status` (in `scopes` when given), newest first."""
        where = f"status = {_lance.sql_str(status)}"
        if scopes is not None:
            where += " AND " + _lance.scope_in(scopes)
        if kind:
            where += f" AND kind = {_lance.sql_str(kind)}"
        rows = _lance.rows(self._table, where, _lance.RECORD_COLUMNS)
        rows.sort(key=lambda r: r["created"] or 0.0, reverse=True)
        return [_lance.record(r) for r in rows[: max(0, limit)]]

    def export(self, scopes: Iterable[str] | None = None) -> list[MemoryRecord]:
        """Every memory (archived ones too), oldest first, for a JSONL backup."""
        where = "" if scopes is None else _lance.scope_in(scopes)
        rows = _lance.rows(self._table, where, _lance.RECORD_COLUMNS)
        rows.sort(key=lambda r: r["created"] or 0.0)
        return [_lance.record(r) for r in rows]

    def count(self) -> int:
        """Number of active memories (kept as a counter: no table scan)."""
        return sum(self._counts.values())

    def active_in(self, scopes: Iterable[str] | None) -> int:
        """Active memories in `scopes` (every scope: None), from the counters."""
        return self.count() if scopes is None else sum(self._scopes[s] for s in set(scopes))

    def counts_by_kind(self) -> dict[str, int]:
        """Active memories per kind."""
        return {k: n for k, n in self._counts.items() if n > 0}

    def get(self, id: str) -> MemoryHit | None:
        """The memory with this id (any status), or None."""
        rows = _lance.rows(self._table, f"id = {_lance.sql_str(id)}", _HIT_COLUMNS, limit=1)
        return _lance.hit(rows[0]) if rows else None

    # -- re-embedding --------------------------------------------------------------------

    def reembed(self, progress: Callable[[int, int], None] = lambda done, total: None,
                batch: int = 64) -> int:
        """Rebuild every vector with the current model; returns how many were embedded."""
        if self.embedder is None:
            raise EmbeddingUnavailable("no embedding model is configured ([models] embedding)")
        rows = _lance.rows(self._table, "", ["id", "content"])
        dim = self.embedder.dim
        with self._lock:
            _lance.set_vector_column(self._table, dim, replace=True)
            self.vectors.clear()
        progress(0, len(rows))
        for start in range(0, len(rows), batch):
            part = rows[start : start + batch]
            vectors = self.embedder.embed([r["content"] for r in part])
            with self._lock:
                _lance.set_vectors(self._table, [r["id"] for r in part], vectors, dim)
            progress(start + len(part), len(rows))
        self.vectors.record(dim)
        self.vectors.unembedded = 0
        self.optimize()
        return len(rows)

