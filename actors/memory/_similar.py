"""Conflicts of learned facts that carry no `key`: found by meaning, from the stored vectors.

The nearest active memory of the same scope is a conflict when its cosine similarity to the new
fact is at least `[memory] conflict_similarity` and below `merge_similarity` (at or above that,
or with the same words, it says the same thing: a duplicate, which nightly dreaming merges).
Only the single nearest memory counts: a new fact replaces at most one old one, so a loose
threshold never archives a cluster of related facts at once.

Why 0.7 by default (all-MiniLM-L6-v2, measured; tests/actors/test_memory_similar.py keeps the
pairs): "my car is red" / "my car is blue" 0.735, "The owner lives in Lisbon" / "... in Porto"
0.791, "My favourite colour is green" / "... blue" 0.855 conflict; "my car is red" / "I like red
wine" 0.387, "The owner's car is red" / "The owner likes red wine" 0.591 do not. The model
weighs the shape of a sentence more than its subject, so some pairs about different things
score high too ("Was born in Porto" / "Lives in Porto" 0.815): with the default strategy
(`ask`) such a false conflict is a question to the owner, never a silent loss, and every
supersede is undoable. Without vectors (no embedding model) keyless facts never conflict.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING

from actors.memory import _lance, _search

if TYPE_CHECKING:
    from actors.memory.store import MemoryStore
    from contracts import MemoryRecord

log = logging.getLogger(__name__)

NEAREST = 3  # candidates read; the nearest decides


def words(text: str) -> str:
    """A text's words, lower case: the same words are the same fact."""
    return " ".join(re.findall(r"\w+", text.lower()))


def nearest_conflict(store: MemoryStore, scope: str, content: str, conflict: float,
                     duplicate: float, exclude: str = "") -> MemoryRecord | None:
    """The active memory of `scope` that the keyless fact `content` contradicts, if any
    (blocking). None also when the nearest one is a duplicate of it."""
    if not store.hybrid:
        return None
    table = store._table  # a read-only vector query beside the store's own legs
    if _lance.VECTOR not in table.schema.names:
        return None
    vectors = store.vectors.embed([content])
    if not vectors:
        return None
    where = (f"scope = {_lance.sql_str(scope)} AND status = 'active'"
             f" AND id != {_lance.sql_str(exclude)}")
    try:
        found = (table.search(vectors[0], vector_column_name=_lance.VECTOR)
                 .distance_type("cosine").maximum_nprobes(0)
                 .minimum_nprobes(_search.probes(store.active_in([scope])))  # exact when narrow
                 .where(where, prefilter=True)
                 .select(["id", "content", "_distance"]).limit(NEAREST).to_list())
    except Exception as exc:  # noqa: BLE001 - no conflict found is the safe answer
        log.warning("memory store: conflict search failed: %s", exc)
        return None
    if not found:
        return None
    best = min(found, key=lambda r: r["_distance"])
    similarity = 1.0 - float(best["_distance"])
    if similarity < conflict or similarity >= duplicate or words(best["content"]) == words(
            content):
        return None
    records = store.records(f"id = {_lance.sql_str(best['id'])}", 1)
    return records[0] if records else None
