"""The life of a fact: conflicts, versions, promotion, undo.

A learned fact may carry a `key` (what it is about). An active fact in the same scope with the
same key and other words conflicts with it; without a key, the nearest active fact of the scope
by meaning does when it is similar enough but not a duplicate (actors/memory/_similar.py). `[memory] conflict` decides: `overwrite_latest`
(the new one is version n+1, `replaces` the old, which is archived), `keep_both`, or `ask` (the
new one waits as proposed, with `replaces` set, until the owner promotes it; promoting it
supersedes the old). A correction ("actually, X") overwrites at once whatever the strategy.

Every status change is an audit event (`memory.changed`) and a row of the change log
(_changes.py), from which `/memory undo` reverts the newest change of an audience.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from actors.memory._lance import sql_str

if TYPE_CHECKING:
    from actors.memory.actor import MemoryActor
    from contracts import MemoryRecord

#: What each audited change does to a memory's status (before "" : it was created).
TRANSITIONS = {
    "saved": ("", "active"), "learned": ("", "active"), "proposed": ("", "proposed"),
    "promoted": ("proposed", "active"), "rejected": ("proposed", "rejected"),
    "archived": ("active", "archived"), "superseded": ("active", "archived"),
    "merged": ("active", "archived"), "decayed": ("active", "archived"),
}


def norm_key(key: str) -> str:
    """A key as stored: lower case words joined by `_`, at most 60 characters."""
    return "_".join(re.findall(r"\w+", key.lower()))[:60]


def conflicts(actor: MemoryActor, key: str, scope: str, content: str,
              exclude: str = "") -> list[MemoryRecord]:
    """Active memories in `scope` about `key` that say something else (blocking); without a
    key, the one nearest by meaning that says something else (at most one)."""
    if not key:
        from actors.memory._similar import nearest_conflict

        cfg = actor.config.memory
        near = nearest_conflict(actor.store, scope, content, cfg.conflict_similarity,
                                cfg.merge_similarity, exclude)
        return [near] if near is not None else []
    where = (f"key = {sql_str(key)} AND scope = {sql_str(scope)} AND status = 'active'"
             f" AND id != {sql_str(exclude)}")
    found = actor.store.records(where)
    return sorted((r for r in found if r.content.strip() != content.strip()),
                  key=lambda r: r.version, reverse=True)


async def supersede(actor: MemoryActor, old: Iterable[MemoryRecord], cause: str,
                    by: str) -> None:
    """Archive the versions a new active fact replaces (each audited)."""
    for record in old:
        if await asyncio.to_thread(actor.store.set_status, record.id, "active", "archived"):
            await actor.audit("superseded", record.id, cause, record.scope, by, record.content)


async def promote(actor: MemoryActor, mem_id: str, cause: str, by: str,
                  scopes: Iterable[str] | None = None) -> bool:
    """A waiting memory becomes active; the facts it conflicts with are superseded."""
    store = actor.store
    done = await asyncio.to_thread(store.set_status, mem_id, "proposed", "active", scopes)
    if done:
        await actor.audit("promoted", mem_id, cause, by=by)
    # Also when it was active already: a redelivery after a crash before the supersede.
    await finish_version(actor, mem_id, cause, by, scopes)
    return done


async def finish_version(actor: MemoryActor, mem_id: str, cause: str, by: str,
                         scopes: Iterable[str] | None = None) -> None:
    """An active new version supersedes the facts it conflicts with (idempotent)."""
    found = await asyncio.to_thread(actor.store.records, f"id = {sql_str(mem_id)}", 1)
    allowed = scopes is None or (found and found[0].scope in set(scopes))
    if found and allowed and found[0].status == "active" and found[0].replaces:
        new = found[0]
        if new.key:
            old = await asyncio.to_thread(conflicts, actor, new.key, new.scope, new.content,
                                          new.id)
        else:  # found by meaning when it was saved: exactly the one it replaces, if still active
            where = (f"id = {sql_str(new.replaces)} AND scope = {sql_str(new.scope)}"
                     " AND status = 'active'")
            old = await asyncio.to_thread(actor.store.records, where, 1)
        await supersede(actor, old, cause, by)


async def undo(actor: MemoryActor, undo_id: str, scopes: Iterable[str] | None,
               by: str) -> str:
    """Revert the newest change within `scopes`; the answer as a sentence."""
    changes, store = actor.changes, actor.store
    if done := await asyncio.to_thread(changes.undo_done, undo_id):
        return f"Already undone: the changes made by {done}."
    batch = await asyncio.to_thread(changes.last, scopes)
    if not batch:
        return "There is no change to undo here."
    lines = []
    for change in batch:  # newest first: a promotion before the version it superseded
        back = change.before or "revoked"  # a memory that was created is revoked
        if await asyncio.to_thread(store.set_status, change.memory_id, change.after, back):
            hit = await asyncio.to_thread(store.get, change.memory_id)
            await actor.audit("undone", change.memory_id, undo_id, change.scope, by,
                              hit.content if hit else "")
            lines.append(f"- {change.memory_id}: {change.after} -> {back}"
                         + (f" ({hit.content[:80]})" if hit else ""))
    await asyncio.to_thread(changes.mark_undone, undo_id, batch)
    await actor._publish_stats()
    if not lines:
        return (f"The last change ({batch[0].cause}) was already changed again since; "
                "nothing was reverted.")
    return f"Undid {batch[0].cause}:\n" + "\n".join(lines)
