"""Learned memories: what the observer's model proposed, validated and promoted by policy.

Each item enters with a confidence and a source. `[memory] policy` says per kind what happens:
`auto` makes it active at once when its confidence reaches `auto_min_confidence` (else it waits
as a suggestion), `suggest` keeps it `proposed` until the owner promotes it, `off` drops it.
A suggestion about the owner is put to the owner through the approval flow (buttons on
Telegram and Slack; approved: active, denied: rejected, expired: still pending); one about
someone else waits in `wintermute memory pending`, so their private words are not pushed
into the owner's chat. A malformed answer from the model is rejected
whole (the consumer dead-letters it with the reason): nothing of it is written.
Conflicts with existing facts, corrections and versions: actors/memory/_facts.py.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

import msgspec

from actors.memory._facts import conflicts, finish_version, norm_key, promote
from actors.memory._lance import sql_str
from actors.memory.scopes import OWNER
from bus import Reject
from contracts import (
    ApprovalRequest,
    ApprovalResolved,
    MemoryPropose,
    MemoryRecord,
    Sink,
    short_hash,
)
from contracts.config import MEMORY_POLICY
from kit.modellist import json_list

if TYPE_CHECKING:
    from actors.memory.actor import MemoryActor

log = logging.getLogger(__name__)

MAX_ITEMS = 20
MAX_CHARS = 500
KIND_OF = {"fact": "fact", "preference": "preference", "procedure": "procedure",
           "correction": "fact"}  # a correction is stored as the fact it corrects to


class Proposal(msgspec.Struct, frozen=True, forbid_unknown_fields=False):
    """One item as the extraction prompt asks the model to write it."""

    content: str
    kind: str = "fact"
    confidence: float = 0.5
    key: str = ""  # what it is about ("car"): facts with one key conflict (actors/memory/_facts.py)


_proposals = msgspec.json.Decoder(list[Proposal])


def parse(text: str) -> list[Proposal]:
    """The model's JSON list (inside prose or a code fence, too); raises ValueError saying why."""
    items: list[Proposal] = json_list(text, _proposals, "the model's answer",
                                      "a list of {content, kind, confidence}")
    if len(items) > MAX_ITEMS:
        raise ValueError(f"the model proposed {len(items)} items; at most {MAX_ITEMS} are taken")
    for i, item in enumerate(items):
        if not item.content.strip() or len(item.content) > MAX_CHARS:
            raise ValueError(f"item {i}: content must be 1 to {MAX_CHARS} characters")
        if item.kind not in KIND_OF:
            raise ValueError(f"item {i}: kind {item.kind!r} is not one of {sorted(KIND_OF)}")
        if not 0.0 <= item.confidence <= 1.0:
            raise ValueError(f"item {i}: confidence {item.confidence} is not between 0 and 1")
        if len(item.key) > 100:
            raise ValueError(f"item {i}: key must be at most 100 characters")
    return items


async def propose(actor: MemoryActor, msg: MemoryPropose) -> None:
    """Validate, then save each item as active or proposed by policy (off: dropped)."""
    try:
        items = parse(msg.text)
    except ValueError as exc:
        raise Reject(f"malformed memory proposals from {msg.source or 'the model'}: {exc}") from exc
    config = actor.config.memory
    scope = actor.audience(msg.principal, msg.session, msg.is_owner).write
    store = actor.store
    for i, item in enumerate(items):
        policy = config.policy.get(item.kind) or MEMORY_POLICY.get(item.kind, "suggest")
        mem_id = short_hash(f"{msg.id}:{i}", 12)
        saved = await asyncio.to_thread(store.records, f"id = {sql_str(mem_id)}", 1)
        if saved:
            # Saved by an earlier delivery of this batch that may have crashed before its audit
            # or before superseding what it replaces: both again (their ids make them once).
            first = {"proposed": "proposed", "active": "learned"}.get(saved[0].status)
            if first:  # other statuses: changed since, so its first audit was made
                await actor.audit(first, mem_id, msg.id, scope, "observer", saved[0].content)
            await finish_version(actor, mem_id, msg.id, "observer")
            continue
        if policy == "off" or await asyncio.to_thread(store.known, item.content, scope):
            continue
        key = norm_key(item.key)
        old = await asyncio.to_thread(conflicts, actor, key, scope, item.content)
        # A correction ("actually, X") applies at once and overwrites what it corrects.
        correction = item.kind == "correction"
        strategy = "overwrite_latest" if correction else config.conflict
        # Learning is a write of free text: from tainted content it waits for the owner
        # (the graduated taint rule, contracts/taint.py), whatever the policy says.
        auto = (correction or (policy == "auto" and item.confidence >= config.auto_min_confidence)
                ) and msg.taint == "clean"
        if old and strategy == "ask":
            auto = False  # a contradiction is put to the owner, never promoted silently
        replaces = old[0] if old and strategy != "keep_both" else None
        await asyncio.to_thread(
            store.save, item.content, kind=KIND_OF[item.kind], session=msg.session, scope=scope,
            id=mem_id, status="active" if auto else "proposed",
            confidence=item.confidence, source=msg.source, key=key, label=msg.label,
            version=replaces.version + 1 if replaces else 1,
            replaces=replaces.id if replaces else "",
        )
        await actor.audit("learned" if auto else "proposed", mem_id, msg.id, scope, "observer",
                          item.content)
        if auto and replaces is not None:
            await finish_version(actor, mem_id, msg.id, "observer")
        if not auto and scope == OWNER:
            await _ask_owner(actor, mem_id, item, policy, replaces)
        log.info("learned %s memory (%s): %s", item.kind, "active" if auto else "proposed",
                 item.content[:80])
    await actor._publish_stats()


APPROVAL_SESSION = "memory:proposal:"


async def _ask_owner(actor: MemoryActor, mem_id: str, item: Proposal, policy: str,
                     replaces: MemoryRecord | None) -> None:
    why = (f"memory.policy.{item.kind} = suggest" if policy == "suggest" else
           f"{item.confidence:.0%} sure, below memory.auto_min_confidence")
    summary = f"Remember this about you? \u201c{item.content}\u201d (memory {mem_id})"
    if replaces is not None:
        why = f"it contradicts memory {replaces.id} (memory.conflict = ask)"
        summary = (f"Replace \u201c{replaces.content}\u201d with \u201c{item.content}\u201d? "
                   f"(memory {mem_id})")
    request = ApprovalRequest(
        id=f"memory:{mem_id}:approve", session=f"{APPROVAL_SESSION}{mem_id}",
        summary=summary[:500],
        reason=f"learned from a conversation ({why})",
        sink=Sink.parse(actor.config.owner.sink),
    )
    await actor.send(request)


async def resolved(actor: MemoryActor, msg: ApprovalResolved) -> None:
    """The owner's answer to a suggestion (other approvals are not ours: skipped)."""
    if not msg.session.startswith(APPROVAL_SESSION) or msg.status == "expired":
        return
    mem_id = msg.session.removeprefix(APPROVAL_SESSION)
    if msg.status == "approved":
        done = await promote(actor, mem_id, msg.id, "owner (approval)")
    elif done := await asyncio.to_thread(actor.store.set_status, mem_id, "proposed", "rejected"):
        await actor.audit("rejected", mem_id, msg.id, by="owner (approval)")
    if done:
        log.info("memory %s %s by the owner", mem_id, msg.status)
        await actor._publish_stats()
