"""`/memory` from a chat and `wintermute memory` from the owner's command line."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import msgspec

from actors.memory._facts import promote, undo
from actors.memory.embedding import EmbeddingUnavailable
from actors.memory.scopes import valid_scope
from contracts import MemoryAdmin, MemoryAnswer, MemoryCommand, MemoryRecord, Notice

if TYPE_CHECKING:
    from actors.memory.actor import MemoryActor

Say = Callable[..., Awaitable[None]]
EXPORT_PART = 500  # records per answer message (well under the 1 MB NATS payload limit)
LIST_IN_CHAT = 20
CHAT_HELP = ("Use /memory, /memory search WORDS, /memory forget ID, /memory pending, "
             "/memory promote ID, /memory reject ID or /memory undo.")


def _line(r: MemoryRecord | object) -> str:
    kind, content, mem_id = (getattr(r, a) for a in ("kind", "content", "id"))
    scope = getattr(r, "scope", "")
    return f"- [{kind}] {content} (id {mem_id}{', ' + scope if scope else ''})"


async def chat_command(actor: MemoryActor, msg: MemoryCommand) -> None:
    """Answer /memory within what this conversation may read, as a notice to the chat."""
    store = actor.store
    scopes = actor.audience(msg.principal, msg.session, msg.is_owner).read
    if msg.action == "list":
        records = await asyncio.to_thread(store.recent, scopes, LIST_IN_CHAT)
        if records:
            text = f"Remembered here (newest {len(records)}):\n" + "\n".join(map(_line, records))
        else:
            text = "Nothing is remembered for this conversation yet."
        if store.warning:
            text += f"\n(Search is full-text only: {store.warning}.)"
    elif msg.action == "search" and msg.arg.strip():
        hits = await asyncio.to_thread(store.search, msg.arg, 10, scopes)
        text = "\n".join(map(_line, hits)) if hits else f"No memories here match {msg.arg!r}."
    elif msg.action == "forget" and msg.arg.strip():
        target = msg.arg.strip().split()[0]
        if await asyncio.to_thread(store.forget, target, scopes):
            text = f"Forgot memory {target}."
            await actor.audit("archived", target, msg.id, by=msg.principal)
            await actor._publish_stats()
        else:
            text = f"No memory {target} here; /memory lists them with their ids."
    elif msg.action == "pending":
        records = await asyncio.to_thread(store.recent, scopes, LIST_IN_CHAT, "", "proposed")
        text = ("Learned, waiting for you (/memory promote ID, /memory reject ID):\n"
                + "\n".join(f"{_line(r)} {r.confidence:.0%} sure" for r in records)
                if records else "No learned memories are waiting.")
    elif msg.action in ("promote", "reject") and msg.arg.strip():
        target = msg.arg.strip().split()[0]
        if await _decide(actor, msg.action, target, msg.id, msg.principal, scopes):
            text = f"{'Promoted' if msg.action == 'promote' else 'Rejected'} memory {target}."
        else:
            text = f"No waiting memory {target} here; /memory pending lists them."
    elif msg.action == "undo":
        text = await undo(actor, msg.id, scopes, msg.principal)
    else:
        text = CHAT_HELP
    notice = Notice(id=f"{msg.id}:answer", sink=msg.reply_to, text=text, source="memory")
    await actor.send(notice)


async def admin(actor: MemoryActor, msg: MemoryAdmin) -> None:
    """The owner's command line: every scope (or `msg.scope`), answered as MemoryAnswer parts."""
    part = 0

    async def say(text: str = "", records: list[MemoryRecord] | None = None, ok: bool = True,
                  last: bool = True) -> None:
        nonlocal part
        answer = MemoryAnswer(id=f"{msg.id}:answer:{part}", request=msg.id, ok=ok, text=text,
                              records=records or [], part=part, last=last)
        part += 1
        await actor.send(answer)

    if msg.scope and not valid_scope(msg.scope):
        await say(f"{msg.scope!r} is not a scope: use global, user:ID, group:ID or session:ID.",
                  ok=False)
        return
    store = actor.store
    scopes = [msg.scope] if msg.scope else None
    match msg.action:
        case "list":
            await say(records=await asyncio.to_thread(store.recent, scopes, msg.limit))
        case "search":
            hits = await asyncio.to_thread(store.search, msg.query, msg.limit, scopes)
            found = [MemoryRecord(id=h.id, kind=h.kind, content=h.content, scope=h.scope)
                     for h in hits]
            await say("\n".join(map(_line, hits)) or f"No memories match {msg.query!r}.", found)
        case "forget":
            done = await asyncio.to_thread(store.forget, msg.target, scopes)
            if done:
                await actor.audit("archived", msg.target, msg.id, by="cli")
            await say(f"Forgot memory {msg.target}." if done else
                      f"No active memory {msg.target}; `wintermute memory list` shows ids.",
                      ok=done)
            await actor._publish_stats()
        case "export":
            records = await asyncio.to_thread(store.export, scopes)
            chunks = [records[i : i + EXPORT_PART] for i in range(0, len(records), EXPORT_PART)]
            for i, chunk in enumerate(chunks or [[]]):
                await say(records=chunk, last=i == len(chunks or [[]]) - 1)
        case "import":
            text, added = await asyncio.to_thread(_import, actor, msg.records, msg.scope)
            for r in added:
                await actor.audit("imported", r.id, msg.id, r.scope, "cli", r.content)
            await say(text)
            await actor._publish_stats()
        case "reembed":
            await _reembed(actor, say)
        case "pending":
            await say(records=await asyncio.to_thread(store.recent, scopes, msg.limit, "",
                                                      "proposed"))
        case "promote" | "reject":
            done = await _decide(actor, msg.action, msg.target, msg.id, "cli", scopes)
            word = "Promoted" if msg.action == "promote" else "Rejected"
            await say(f"{word} memory {msg.target}." if done else
                      f"No waiting memory {msg.target}; `wintermute memory pending` lists them.",
                      ok=done)
        case "revoke":
            done = False
            for old in ("active", "proposed"):
                if await asyncio.to_thread(store.set_status, msg.target, old, "revoked", scopes):
                    done = True
                    await actor.audit("revoked", msg.target, msg.id, by="cli", before=old)
                    await actor._publish_stats()
                    break
            await say(f"Revoked memory {msg.target}." if done else
                      f"No active or waiting memory {msg.target}.", ok=done)
        case "undo":
            await say(await undo(actor, msg.id, scopes, "cli"))
        case "dream":
            from actors.memory._dream import dream

            await say(await dream(actor, msg.id))
        case _:
            await say(f"Unknown memory action {msg.action!r}.", ok=False)


async def _decide(actor: MemoryActor, action: str, target: str, cause: str, by: str,
                  scopes: list[str] | tuple[str, ...] | None) -> bool:
    """Promote (superseding what it replaces) or reject a waiting memory; True if it was."""
    if action == "promote":
        done = await promote(actor, target, cause, by, scopes)
    elif done := await asyncio.to_thread(actor.store.set_status, target, "proposed",
                                         "rejected", scopes):
        await actor.audit("rejected", target, cause, by=by)
    if done:
        await actor._publish_stats()
    return done


def _import(actor: MemoryActor, records: list[MemoryRecord],
            scope: str) -> tuple[str, list[MemoryRecord]]:
    """Save exported records as they were (same ids: importing twice adds nothing), embedded in
    batches; say which were skipped and why."""
    from actors.memory.store import KINDS, STATUSES

    good, skipped = [], []
    for r in records:
        target = scope or r.scope
        if not valid_scope(target):
            skipped.append(f"{r.id}: scope {target!r} is not valid")
        elif not r.id or not r.content.strip():
            skipped.append(f"{r.id}: memory content must not be empty")
        elif r.kind not in KINDS or r.status not in STATUSES:
            skipped.append(f"{r.id}: kind {r.kind!r} or status {r.status!r} is unknown")
        else:
            good.append(msgspec.structs.replace(r, scope=target, content=r.content.strip()))
    new = actor.store.missing([r.id for r in good])
    added = actor.store.add_many(good)
    text = f"Imported {added} of {len(records)} memories."
    if len(good) > added:
        text += f" Already there: {len(good) - added}."
    if skipped:
        text += " Skipped: " + "; ".join(skipped[:10]) + (" …" if len(skipped) > 10 else "")
    return text, [r for r in good if r.id in new]


async def _reembed(actor: MemoryActor, say: Say) -> None:
    """Re-embed every memory, reporting progress about once a second."""
    loop = asyncio.get_running_loop()
    last = [0.0]
    pending: list[Any] = []  # concurrent futures of the progress answers

    def progress(done: int, total: int) -> None:
        now = time.monotonic()
        if now - last[0] >= 1.0 or done == total:
            last[0] = now
            coro = say(f"re-embedded {done} of {total}", last=False)
            pending.append(asyncio.run_coroutine_threadsafe(coro, loop))  # type: ignore[arg-type]

    try:
        count = await asyncio.to_thread(actor.store.reembed, progress)
        await asyncio.gather(*(asyncio.wrap_future(f) for f in pending))
        name = actor.store.embedder.name if actor.store.embedder else "?"
        await say(f"Re-embedded {count} memories with {name}.")
    except EmbeddingUnavailable as exc:
        await say(f"Not re-embedded: {exc}.", ok=False)
    await actor._publish_stats()
