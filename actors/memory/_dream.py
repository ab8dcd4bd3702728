"""Nightly dreaming (seed 001), a heartbeat job: merge near-duplicate memories and decay stale
ones. Duplicates are found by the stored vectors (cosine at least `[memory] merge_similarity`)
or, without vectors, by the same words.

Of a set of duplicates in one scope the most confident (then newest) stays and takes the
highest confidence of the set; the others are archived as `merged`. With a model (and
`[memory] dream_with_model`), the model first rewords each set into one fact, which replaces
the whole set; any failure falls back to the merge above (actors/memory/_dream_model.py). A memory no recall or
search has returned for `decay_after_days` (counted from its creation when never returned)
loses `decay_step` of its confidence each night and is archived as `decayed` below
`archive_below`. Every archive is audited and the night is one batch for `/memory undo`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import time
from typing import TYPE_CHECKING

from actors.memory import _dream_model
from contracts import MemoryRecord
from kit.secrets import load_dotenv

if TYPE_CHECKING:
    from actors.memory.actor import MemoryActor
    from actors.memory.store import MemoryStore

log = logging.getLogger(__name__)

BY = "dreaming"
MAX_PER_SCOPE = 5000  # pairwise comparison per scope is n * kept: bounded


def _words(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))


def duplicates(store: MemoryStore, records: list[MemoryRecord],
               similarity: float) -> list[tuple[MemoryRecord, MemoryRecord]]:
    """(kept, merged) pairs among active memories, per scope (blocking)."""
    import numpy as np

    vectors = store.vectors_of("status = 'active'")
    by_scope: dict[str, list[MemoryRecord]] = {}
    for r in records:
        by_scope.setdefault(r.scope, []).append(r)
    pairs = []
    for group in by_scope.values():
        group.sort(key=lambda r: (r.confidence, r.created), reverse=True)
        kept: list[MemoryRecord] = []
        texts: dict[str, MemoryRecord] = {}
        unit: list[np.ndarray] = []  # normalised vectors of the kept ones that have one
        owners: list[MemoryRecord] = []
        for r in group[:MAX_PER_SCOPE]:
            same = texts.get(_words(r.content))
            vec = vectors.get(r.id)
            if same is None and vec is not None and unit:
                v = np.asarray(vec, dtype=np.float32)
                v = v / (np.linalg.norm(v) or 1.0)
                scores = np.stack(unit) @ v
                best = int(np.argmax(scores))
                if scores[best] >= similarity:
                    same = owners[best]
            if same is not None:
                pairs.append((same, r))
                continue
            kept.append(r)
            texts.setdefault(_words(r.content), r)
            if vec is not None:
                v = np.asarray(vec, dtype=np.float32)
                unit.append(v / (np.linalg.norm(v) or 1.0))
                owners.append(r)
    return pairs


def _groups(pairs: list[tuple[MemoryRecord, MemoryRecord]]
            ) -> list[tuple[MemoryRecord, list[MemoryRecord]]]:
    """(kept, merged ones) per set of duplicates, in the order found."""
    sets: dict[str, tuple[MemoryRecord, list[MemoryRecord]]] = {}
    for keep, drop in pairs:
        sets.setdefault(keep.id, (keep, []))[1].append(drop)
    return list(sets.values())


async def _merge(actor: MemoryActor, cause: str, keep: MemoryRecord, drops: list[MemoryRecord],
                 model: _dream_model.Reworder | None, merged: set[str]) -> None:
    """Archive `drops` into `keep`; or, reworded by the model, the whole set into a new fact."""
    store = actor.store
    group = [keep, *drops]
    text = await model.ask(group) if model is not None else None
    if text is not None and _words(text) == _words(keep.content):
        text = None  # the model said what the kept one says: nothing to reword
    into = keep.id
    if text is not None:
        into = await _dream_model.reworded(actor, cause, keep, group, text)
        assert model is not None
        model.reworded += 1
    for drop in (group if text is not None else drops):
        if await asyncio.to_thread(store.set_status, drop.id, "active", "archived"):
            merged.add(drop.id)
            await actor.audit("merged", drop.id, cause, drop.scope, BY,
                              f"{drop.content} (merged into {into})")
    top = max(r.confidence for r in group)
    if text is None and top > keep.confidence:
        await asyncio.to_thread(store.update, [keep.id], {"confidence": top})


async def dream(actor: MemoryActor, cause: str) -> str:
    """One night's pass; the outcome as a sentence (also logged)."""
    cfg, store = actor.config.memory, actor.store
    if await asyncio.to_thread(actor.changes.seen, cause):
        return "This dreaming pass already ran."
    await actor.flush_used()
    records = await asyncio.to_thread(store.records, "status = 'active'")
    pairs = await asyncio.to_thread(duplicates, store, records, cfg.merge_similarity)
    merged: set[str] = set()
    env = {**load_dotenv(actor.home / ".env"), **os.environ}  # provider keys, as the llm's
    model = (_dream_model.Reworder(actor, cause) if _dream_model.enabled(actor.config, env)
             else None)
    for keep, drops in _groups(pairs):
        await _merge(actor, cause, keep, drops, model, merged)
    stale_before = time.time() - cfg.decay_after_days * 86400
    decayed, lowered = 0, 0
    for r in records:
        if r.id in merged or max(r.created, r.used) >= stale_before:
            continue
        confidence = round(r.confidence - cfg.decay_step, 4)
        if confidence < cfg.archive_below:
            if await asyncio.to_thread(store.set_status, r.id, "active", "archived"):
                decayed += 1
                await actor.audit("decayed", r.id, cause, r.scope, BY, r.content)
        else:
            lowered += 1
            await asyncio.to_thread(store.update, [r.id], {"confidence": confidence})
    await asyncio.to_thread(actor.changes.add, cause, "", "", "", "dreamed", "dreaming")
    await actor._publish_stats()
    text = (f"Dreaming: merged {len(merged)} near-duplicate memories, archived {decayed} "
            f"stale ones, lowered the confidence of {lowered}.")
    if model is not None and model.asked:
        text += f" The model reworded {model.reworded} of {model.asked} merged groups"
        text += f" (then stopped: {model.stopped})." if model.stopped else "."
    log.info(text)
    return text
