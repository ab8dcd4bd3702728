"""The memory change log: what each change did to a memory's status, so `/memory undo` can
revert the last one of an audience.

A change is identified by its cause (the id of the message that made it: one save, one
observer batch, one promotion with the version it superseded) and recorded per memory as
status `before` -> `after` ("" before: the memory was created). Undo reverts the newest cause's
rows within the audience's scopes, newest first, each only if the memory still has the status
the change gave it, then writes a marker row (`undo_of`) under the undo's own id: a redelivered
undo finds its marker and reverts nothing more. The audit events (`memory.changed`) stay the
immutable record; this table is the working index for undo, beside the memories in LanceDB.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from actors.memory._lance import scope_in, sql_str

TABLE = "changes"
_COLUMNS = ["id", "cause", "at", "scope", "memory_id", "before", "after", "undo_of", "undone"]


@dataclass(frozen=True)
class Change:
    cause: str
    at: float
    scope: str
    memory_id: str
    before: str
    after: str


def _schema() -> Any:
    import pyarrow as pa

    return pa.schema([
        pa.field("id", pa.string(), nullable=False),
        pa.field("cause", pa.string()),
        pa.field("at", pa.float64()),
        pa.field("scope", pa.string()),
        pa.field("memory_id", pa.string()),
        pa.field("before", pa.string()),
        pa.field("after", pa.string()),
        pa.field("undo_of", pa.string()),
        pa.field("undone", pa.bool_()),
    ])


class ChangeLog:
    """The `changes` table beside the memories; blocking methods, writes under one lock."""

    def __init__(self, path: Path) -> None:
        import lancedb

        db = lancedb.connect(str(path))
        try:
            self._table = db.open_table(TABLE)
        except ValueError:
            self._table = db.create_table(TABLE, schema=_schema(), exist_ok=True)
        self._lock = threading.Lock()

    def _rows(self, where: str) -> list[dict[str, Any]]:
        limit = self._table.count_rows() or 1
        result: list[dict[str, Any]] = (self._table.search().select(_COLUMNS).where(where)
                                        .limit(limit).to_list())
        return result

    def _insert(self, rows: list[dict[str, Any]]) -> None:
        import pyarrow as pa

        data = pa.Table.from_pylist(rows, schema=self._table.schema)
        with self._lock:  # the same id again (a redelivery) inserts nothing
            self._table.merge_insert("id").when_not_matched_insert_all().execute(data)

    def add(self, cause: str, memory_id: str, scope: str, before: str, after: str,
            undo_of: str = "") -> None:
        """Record one memory's status change made by `cause`."""
        row = {"id": f"{cause}|{memory_id}|{after}", "cause": cause, "at": time.time(),
               "scope": scope, "memory_id": memory_id, "before": before, "after": after,
               "undo_of": undo_of, "undone": False}
        self._insert([row])

    def undo_done(self, undo_id: str) -> str:
        """The cause that the undo `undo_id` already reverted, or "" if it has not run."""
        rows = self._rows(f"cause = {sql_str(undo_id)} AND undo_of != ''")
        return str(rows[0]["undo_of"]) if rows else ""

    def seen(self, cause: str) -> bool:
        """Whether a pass with this id (a dreaming night) left its marker already."""
        return bool(self._rows(f"cause = {sql_str(cause)} AND memory_id = ''"))

    def last(self, scopes: Iterable[str] | None) -> list[Change]:
        """The newest cause's changes that are not undone (within `scopes`), newest first."""
        where = "undo_of = '' AND undone = false"
        if scopes is not None:
            where += " AND " + scope_in(scopes)
        rows = self._rows(where)
        if not rows:
            return []
        newest = max(rows, key=lambda r: r["at"])["cause"]
        batch = sorted((r for r in rows if r["cause"] == newest), key=lambda r: r["at"],
                       reverse=True)
        return [Change(cause=r["cause"], at=r["at"], scope=r["scope"], memory_id=r["memory_id"],
                       before=r["before"], after=r["after"]) for r in batch]

    def mark_undone(self, undo_id: str, batch: list[Change]) -> None:
        """The batch is reverted: flag its rows and leave the undo's marker."""
        if not batch:
            return
        cause = batch[0].cause
        where = (f"cause = {sql_str(cause)} AND undo_of = '' AND "
                 + scope_in({c.scope for c in batch}))
        with self._lock:
            self._table.update(where=where, values={"undone": True})
        self._insert([{"id": f"{undo_id}|marker", "cause": undo_id, "at": time.time(),
                       "scope": batch[0].scope, "memory_id": "", "before": "", "after": "",
                       "undo_of": cause, "undone": True}])
