"""Synchronous LanceDB-backed memory store with native full-text search and a keyword fallback."""

from __future__ import annotations

import logging
import re
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from contracts.memory import MemoryHit

log = logging.getLogger(__name__)

TABLE = "memories"
KINDS = frozenset({"fact", "procedure", "episode", "skill", "note"})
OPTIMIZE_EVERY = 50  # writes between folding new rows into the FTS index / compacting fragments
_COLUMNS = ["id", "kind", "content", "tags", "session", "created", "status", "scope"]
_TOKEN = re.compile(r"\w+", re.UNICODE)
_STOP = frozenset(
    "a an and are as at be by for from has have i in is it its me my of on or that the this "
    "to was were what when where which who why will with you your".split()
)


def _schema() -> Any:
    """Arrow schema of the memories table."""
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            pa.field("kind", pa.string()),
            pa.field("content", pa.string()),
            pa.field("tags", pa.list_(pa.string())),
            pa.field("session", pa.string()),
            pa.field("created", pa.float64()),
            pa.field("status", pa.string()),
            pa.field("scope", pa.string()),
        ]
    )


def _sql_str(value: str) -> str:
    """Quote a value as an SQL string literal."""
    return "'" + value.replace("'", "''") + "'"


def _scope_filter(scopes: Iterable[str]) -> str | None:
    """SQL filter for active rows in these scopes, or None when there are none."""
    names = sorted({s for s in scopes if s})
    if not names:
        return None
    return f"status = 'active' AND scope IN ({', '.join(_sql_str(s) for s in names)})"


def _terms(text: str) -> list[str]:
    """Lower-cased word tokens minus stop words, for the keyword fallback."""
    return [t for t in _TOKEN.findall(text.lower()) if t not in _STOP and len(t) > 1]


class MemoryStore:
    """A LanceDB table of memories; every method is blocking and serialised by a lock."""

    def __init__(self, path: Path) -> None:
        """Open or create the database at `path` and provision the table and FTS index."""
        import lancedb  # 2 s import: kept local so only the memory actor pays it

        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._writes = 0
        self._db = lancedb.connect(str(self.path))
        try:  # an existing table may have an older schema: open it, then migrate
            self._table = self._db.open_table(TABLE)
        except ValueError:
            self._table = self._db.create_table(TABLE, schema=_schema(), exist_ok=True)
        self._migrate()
        self._fts_ok = self._ensure_fts_index()

    def _migrate(self) -> None:
        """Give rows from before scopes the scope of their own session (visible only there)."""
        if "scope" not in self._table.schema.names:
            log.info("memory store: adding scopes; old memories stay in their own session")
            self._table.add_columns({"scope": "concat('session:', coalesce(session, ''))"})

    def _ensure_fts_index(self) -> bool:
        """Create the native (Lance inverted) FTS index on `content` unless it exists."""
        from lancedb.index import FTS

        try:
            for index in self._table.list_indices():
                if index.index_type == "FTS" and list(index.columns) == ["content"]:
                    return True
            self._table.create_index("content", config=FTS(), replace=False)
            return True
        except Exception as exc:  # another process won the race, or FTS unavailable
            log.warning("memory store: FTS index unavailable (%s); keyword fallback only", exc)
            return any(i.index_type == "FTS" for i in self._safe_indices())

    def _safe_indices(self) -> list[Any]:
        """List indices, or nothing if listing fails."""
        try:
            return list(self._table.list_indices())
        except Exception:
            return []

    def save(
        self,
        content: str,
        *,
        kind: str = "fact",
        tags: Iterable[str] = (),
        session: str = "",
        scope: str = "",
        id: str | None = None,
    ) -> str:
        """Insert a memory unless a row with the same id exists; return its id.

        `scope` defaults to the memory's own session (see actors/memory/scopes.py).
        """
        content = content.strip() if isinstance(content, str) else ""
        if not content:
            raise ValueError("memory content must not be empty")
        if kind not in KINDS:
            raise ValueError(f"unknown memory kind {kind!r}; expected one of {sorted(KINDS)}")
        mem_id = id or uuid.uuid4().hex
        row = {
            "id": mem_id,
            "kind": kind,
            "content": content,
            "tags": [str(t) for t in tags],
            "session": session,
            "created": time.time(),
            "status": "active",
            "scope": scope or f"session:{session}",
        }
        with self._lock:
            self._table.merge_insert("id").when_not_matched_insert_all().execute([row])
            self._after_write()
        return mem_id

    def _after_write(self) -> None:
        """Every OPTIMIZE_EVERY writes, fold new rows into the index and compact (lock held)."""
        self._writes += 1
        if self._writes % OPTIMIZE_EVERY == 0:
            self._optimize_locked()

    def _optimize_locked(self) -> None:
        """Run LanceDB optimize, logging instead of raising."""
        try:
            self._table.optimize()
        except Exception as exc:
            log.warning("memory store: optimize failed: %s", exc)

    def optimize(self) -> None:
        """Index unindexed rows and compact small fragments (safe to call when idle)."""
        with self._lock:
            self._optimize_locked()

    def search(self, query: str, limit: int = 5, scopes: Iterable[str] = ()) -> list[MemoryHit]:
        """Active memories in `scopes` matching `query`, best first; never raises on odd queries.

        No scopes, no results: a caller must say whose memories it may see.
        """
        where = _scope_filter(scopes)
        if limit <= 0 or not query or not query.strip() or where is None:
            return []
        with self._lock:
            hits: list[MemoryHit] = []
            if self._fts_ok:
                try:
                    hits = self._fts(query, limit, where)
                except Exception as exc:
                    log.warning("memory store: FTS query failed (%s); using keyword fallback", exc)
            if not hits:
                try:
                    hits = self._keyword(query, limit, set(scopes))
                except Exception as exc:
                    log.warning("memory store: keyword fallback failed: %s", exc)
            return hits

    def _fts(self, query: str, limit: int, where: str) -> list[MemoryHit]:
        """BM25 search via the native index; unindexed rows are flat-searched by Lance."""
        from lancedb.query import MatchQuery

        match = MatchQuery(query, "content")  # type: ignore[call-arg]  # pydantic defaults
        rows = (
            self._table.search(match, query_type="fts")
            .where(where, prefilter=True)
            .select(["id", "kind", "content", "scope", "_score"])  # naming _score avoids a lance warning
            .limit(limit)
            .to_list()
        )
        hits = [
            MemoryHit(
                id=r["id"],
                kind=r["kind"],
                content=r["content"],
                scope=r["scope"] or "",
                score=float(r.get("_score") or 0.0),
            )
            for r in rows
        ]
        return sorted(hits, key=lambda h: h.score, reverse=True)

    def _keyword(self, query: str, limit: int, scopes: set[str]) -> list[MemoryHit]:
        """Score active rows by query-term overlap (fraction of terms, tf as tie-break)."""
        q = set(_terms(query))
        if not q:
            return []
        scored: list[tuple[float, float, MemoryHit]] = []
        for r in self._active_rows(["id", "kind", "content", "created", "scope"]):
            if r["scope"] not in scopes:
                continue
            tf = Counter(_terms(r["content"]))
            matched = [t for t in q if t in tf]
            if not matched:
                continue
            score = len(matched) / len(q) + 0.01 * min(sum(tf[t] for t in matched), 10)
            hit = MemoryHit(
                id=r["id"], kind=r["kind"], content=r["content"], scope=r["scope"], score=score
            )
            scored.append((score, r["created"] or 0.0, hit))
        scored.sort(key=lambda s: (s[0], s[1]), reverse=True)
        return [s[2] for s in scored[:limit]]

    def _active_rows(self, columns: list[str]) -> list[dict[str, Any]]:
        """All active rows (selected columns) as dicts."""
        import pyarrow.compute as pc

        table = self._table.to_arrow().select(_COLUMNS)
        table = table.filter(pc.equal(table["status"], "active"))
        rows: list[dict[str, Any]] = table.select(columns).to_pylist()
        return rows

    def count(self) -> int:
        """Number of active memories."""
        with self._lock:
            return int(self._table.count_rows("status = 'active'"))

    def counts_by_kind(self) -> dict[str, int]:
        """Active memories per kind."""
        with self._lock:
            return dict(Counter(r["kind"] for r in self._active_rows(["kind"])))

    def get(self, id: str) -> MemoryHit | None:
        """The memory with this id (any status), or None."""
        with self._lock:
            rows = (
                self._table.search()
                .where(f"id = {_sql_str(id)}")
                .select(["id", "kind", "content"])
                .limit(1)
                .to_list()
            )
        if not rows:
            return None
        r = rows[0]
        return MemoryHit(id=r["id"], kind=r["kind"], content=r["content"])

    def forget(self, id: str) -> bool:
        """Archive an active memory; True if one was archived."""
        with self._lock:
            result = self._table.update(
                where=f"id = {_sql_str(id)} AND status = 'active'", values={"status": "archived"}
            )
            self._after_write()
        return int(getattr(result, "rows_updated", 0) or 0) > 0
