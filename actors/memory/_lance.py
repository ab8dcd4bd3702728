"""LanceDB details of the memory table: schema, migration, indexes, queries as typed rows."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from contracts.memory import MemoryHit, MemoryRecord

log = logging.getLogger(__name__)

RECORD_COLUMNS = ["id", "kind", "content", "tags", "session", "created", "status", "scope",
                  "confidence", "source", "key", "version", "replaces", "used", "label"]
# Columns added after the first release, with the SQL that fills them in older rows. Rows from
# before scopes get their own session's scope: visible only in the conversation they came from.
ADDED_COLUMNS = {
    "scope": "concat('session:', coalesce(session, ''))",
    "confidence": "cast(1.0 as double)",
    "source": "''",
    "key": "''",
    "version": "cast(1 as bigint)",
    "replaces": "''",
    "used": "cast(0.0 as double)",
    # Rows from before labels: internal, what every recall returned them as.
    "label": "'internal'",
}
VECTOR = "vector"
MAX_DELTAS = 8  # deltas of the vector index (one per optimize) before it is rebuilt
PARTITION_ROWS = 16_384  # rows of an IVF partition (ensure_vector_index says why)


def schema() -> Any:
    """Arrow schema of a new memories table (the vector column comes with the first vector)."""
    import pyarrow as pa

    return pa.schema([
        pa.field("id", pa.string(), nullable=False),
        pa.field("kind", pa.string()),
        pa.field("content", pa.string()),
        pa.field("tags", pa.list_(pa.string())),
        pa.field("session", pa.string()),
        pa.field("created", pa.float64()),
        pa.field("status", pa.string()),
        pa.field("scope", pa.string()),
        pa.field("confidence", pa.float64()),
        pa.field("source", pa.string()),
        pa.field("key", pa.string()),
        pa.field("version", pa.int64()),
        pa.field("replaces", pa.string()),
        pa.field("used", pa.float64()),
        pa.field("label", pa.string()),
    ])


def open_table(db: Any, name: str) -> Any:
    """Open the table (migrating an older schema) or create it."""
    try:
        table = db.open_table(name)
    except ValueError:
        return db.create_table(name, schema=schema(), exist_ok=True)
    missing = {k: v for k, v in ADDED_COLUMNS.items() if k not in table.schema.names}
    if missing:
        log.info("memory store: adding columns %s", ", ".join(missing))
        table.add_columns(missing)
    return table


def ensure_indexes(table: Any) -> bool:
    """Full-text index on content, bitmap indexes on scope and status; True if FTS works."""
    from lancedb.index import FTS, Bitmap

    have = {(i.index_type, tuple(i.columns)) for i in _indices(table)}
    try:
        for column in ("scope", "status"):
            if ("Bitmap", (column,)) not in have:
                table.create_index(column, config=Bitmap(), replace=False)
    except Exception as exc:  # noqa: BLE001 - another process won the race: fine
        log.info("memory store: bitmap index: %s", exc)
    try:
        if ("FTS", ("content",)) not in have:
            table.create_index("content", config=FTS(), replace=False)
        return True
    except Exception as exc:  # noqa: BLE001
        log.warning("memory store: full-text index unavailable (%s)", exc)
        return any(i.index_type == "FTS" for i in _indices(table))


def _indices(table: Any) -> list[Any]:
    try:
        return list(table.list_indices())
    except Exception:  # noqa: BLE001
        return []


def ensure_vector_index(table: Any, minimum: int) -> None:
    """An IVF_FLAT index on the vectors once there are `minimum` of them, kept from decaying.

    The index keeps the vectors in memory, so a scoped search compares only the scope's rows
    (2.4 ms for 2k of 100k; without an index LanceDB reads each from the data files: 21 ms).
    PARTITION_ROWS rows a partition: up to 20 partitions (~330k memories) the 20 probes of a
    search (_search.NPROBES) cover them all and a recall is exact (as on main once optimize had
    merged its index);
    smaller partitions would make it approximate (with sqrt(n) of them "automobile" no longer
    found the Volvo among 100k random vectors). The size is given as `target_partition_size`:
    an index given `num_partitions` was merged by the next `optimize()` (316 became 7).
    Each `optimize()` adds the new rows as one more delta of the index and each delta costs
    every search more (2.8 ms with 1, 4.5 ms with 12 at 100k), so past MAX_DELTAS the index is
    rebuilt (~2 s at 100k, once per MAX_DELTAS optimizes, i.e. every ~400 writes).
    """
    from lancedb.index import IvfFlat

    if VECTOR not in table.schema.names:
        return
    current = [i.name for i in _indices(table) if i.columns == [VECTOR]]
    if current:
        stats = table.index_stats(current[0])
        if stats is None or stats.num_indices <= MAX_DELTAS:
            return
    elif table.count_rows(f"{VECTOR} IS NOT NULL") < minimum:
        return
    table.create_index(VECTOR, replace=True, config=IvfFlat(
        distance_type="cosine", target_partition_size=PARTITION_ROWS))


def set_vector_column(table: Any, dim: int, replace: bool = False) -> None:
    """Make `vector` a column of `dim` floats (all empty when it is new or replaced)."""
    import pyarrow as pa

    names = table.schema.names
    if VECTOR in names:
        if not replace and table.schema.field(VECTOR).type.list_size == dim:
            return
        table.drop_columns([VECTOR])
    table.add_columns(pa.field(VECTOR, pa.list_(pa.float32(), dim)))


def without_vectors(table: Any) -> int:
    """Active rows that have no vector (all of them when there is no vector column yet)."""
    if VECTOR not in table.schema.names:
        return int(table.count_rows("status = 'active'"))
    return int(table.count_rows(f"status = 'active' AND {VECTOR} IS NULL"))


def set_vectors(table: Any, ids: list[str], vectors: list[list[float]], dim: int) -> None:
    import pyarrow as pa

    data = pa.table({"id": ids, VECTOR: pa.array(vectors, pa.list_(pa.float32(), dim))})
    table.merge_insert("id").when_matched_update_all().execute(data)


def insert_new(table: Any, rows: list[dict[str, Any]]) -> int:
    """Insert rows whose id is not in the table yet; returns how many were inserted."""
    import pyarrow as pa

    data = pa.Table.from_pylist(rows, schema=table.schema)
    # a memory saved while the model is unavailable has no vector: null, found by full text
    result = table.merge_insert("id").when_not_matched_insert_all().execute(
        data, on_bad_vectors="null")
    return int(getattr(result, "num_inserted_rows", len(rows)) or 0)


def sql_str(value: str) -> str:
    """Quote a value as an SQL string literal."""
    return "'" + value.replace("'", "''") + "'"


def scope_in(scopes: Iterable[str]) -> str:
    """SQL condition: the row's scope is one of `scopes` (none: false)."""
    names = sorted({s for s in scopes if s})
    if not names:
        return "false"
    return f"scope IN ({', '.join(sql_str(s) for s in names)})"


def rows(table: Any, where: str, columns: list[str], limit: int | None = None) -> list[dict[str, Any]]:
    """Rows matching `where` (all when empty) with these columns."""
    query = table.search().select(columns)
    if where:
        query = query.where(where)
    query = query.limit(limit) if limit else query.limit(table.count_rows() or 1)
    result: list[dict[str, Any]] = query.to_list()
    return result


def column(table: Any, name: str, where: str) -> list[Any]:
    return [r[name] for r in rows(table, where, [name])]


def fts(table: Any, query: str, where: str, limit: int, columns: list[str]) -> list[MemoryHit]:
    """BM25 matches through the full-text index, best first."""
    from lancedb.query import MatchQuery

    match = MatchQuery(query, "content")  # type: ignore[call-arg]  # pydantic defaults
    found = (table.search(match, query_type="fts").where(where, prefilter=True)
             .select([*columns, "_score"]).limit(limit).to_list())
    found.sort(key=lambda r: r.get("_score") or 0.0, reverse=True)
    return [hit(r) for r in found]


def nearest(table: Any, vector: list[float], where: str, limit: int,
            columns: list[str], nprobes: int = 20) -> list[MemoryHit]:
    """Nearest vectors by cosine distance (ANN when indexed, else flat), best first; at least
    `nprobes` IVF partitions, more until `limit` rows of the scope are found."""
    if VECTOR not in table.schema.names:
        return []
    found = (table.search(vector, vector_column_name=VECTOR).distance_type("cosine")
             .maximum_nprobes(0).minimum_nprobes(nprobes)
             .where(where, prefilter=True).select([*columns, "_distance"]).limit(limit)
             .to_list())
    return [hit(r) for r in found]


def hit(r: dict[str, Any]) -> MemoryHit:
    return MemoryHit(id=r["id"], kind=r["kind"] or "fact", content=r["content"] or "",
                     scope=r.get("scope") or "", label=_label(r.get("label")))


def record(r: dict[str, Any]) -> MemoryRecord:
    return MemoryRecord(
        id=r["id"], kind=r["kind"] or "fact", content=r["content"] or "",
        tags=list(r["tags"] or []), session=r["session"] or "", created=r["created"] or 0.0,
        status=r["status"] or "active", scope=r["scope"] or "",
        confidence=1.0 if r.get("confidence") is None else float(r["confidence"]),
        source=r.get("source") or "", key=r.get("key") or "",
        version=int(r.get("version") or 1), replaces=r.get("replaces") or "",
        used=float(r.get("used") or 0.0), label=_label(r.get("label")),
    )


def _label(value: Any) -> str:
    """A stored label, or internal for a row without one (or with one that is not a label:
    the file is the owner's, but a recall must never fail on it)."""
    from contracts.labels import LabelError, parse

    try:
        return parse(value) if isinstance(value, str) else "internal"
    except LabelError:
        return "internal"
