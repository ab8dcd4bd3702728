"""Sections of config.toml about learning: the observer and the memory store."""

from __future__ import annotations

from typing import Literal

import msgspec

from contracts.config_base import _Section


class ObserverConfig(_Section):
    idle_secs: float = 600.0
    # On session.idle, ask the model (role `observer`) what to remember from the conversation.
    learn: bool = True
    # After a session with failed tool calls, ask the model what failed and what worked and
    # propose the lessons for AGENTS.md through the WriteGate.
    reflect: bool = True
    # AGENTS.md past this many lines: the model consolidates it and the result goes through
    # the WriteGate (0: never).
    agents_md_max_lines: int = 100


CONFLICT_STRATEGIES = ("overwrite_latest", "keep_both", "ask")
MEMORY_POLICY = {"fact": "auto", "preference": "auto", "correction": "auto",
                 "procedure": "suggest"}


GatePolicy = Literal["auto", "suggest", "off"]


class MemoryConfig(_Section):
    """Learned memories: promotion policy per kind (auto | suggest | off); a kind left out of
    a configured `policy` keeps its default (MEMORY_POLICY)."""

    policy: dict[str, str] = msgspec.field(default_factory=lambda: dict(MEMORY_POLICY))
    auto_min_confidence: float = 0.8  # below this an `auto` item waits as a suggestion
    # A learned fact whose key matches an active fact's in the same scope (seed 004):
    # overwrite_latest (the new version supersedes, the old is archived), keep_both, or ask
    # (the new one waits for the owner: approval, or `pending` for someone else's). A
    # correction ("actually, X") always overwrites at once.
    conflict: str = "ask"
    # A learned fact without a key conflicts with the nearest active fact of its scope when
    # their vectors' cosine is at least this (and below merge_similarity: a duplicate). 0.7 was
    # measured on all-MiniLM-L6-v2 pairs (actors/memory/_similar.py).
    conflict_similarity: float = 0.7
    # Nightly dreaming (heartbeat.dreaming in agent.toml): active memories whose texts are this
    # similar (cosine of their vectors; the same words without vectors) are merged into one ...
    merge_similarity: float = 0.92
    # ... and, when a model is configured ([models.roles] memory, else [models] default), the
    # model rewords each merged set into one fact (purpose `dreaming`, on the day budget); any
    # failure keeps the most confident of the set instead.
    dream_with_model: bool = True
    # ... and memories no recall has returned for decay_after_days lose decay_step of their
    # confidence each night; below archive_below they are archived (`/memory undo` restores).
    decay_after_days: float = 60.0
    decay_step: float = 0.1
    archive_below: float = 0.3
    # Compaction (seed 000): once a session has used this share of its token budget
    # (budget.max_tokens_per_session), older history is folded into the rolling summary,
    # keeping the last compact_keep messages, again each time another such share is used.
    compact_at: float = 0.6
    compact_keep: int = 8

    # The WriteGate (actors/executor/gate): changes proposed to AGENTS.md and USER.md by the
    # agent, reflection or digests are applied after the owner approves (suggest), at once
    # (auto; a non-owner turn's proposal still asks), or refused (off).
    agents_md: GatePolicy = "suggest"
    user_md: GatePolicy = "suggest"

    def __post_init__(self) -> None:
        if self.conflict not in CONFLICT_STRATEGIES:
            raise ValueError(f"conflict must be one of {', '.join(CONFLICT_STRATEGIES)}, "
                             f"got {self.conflict!r}")
        for name in ("merge_similarity", "conflict_similarity", "decay_step", "archive_below", "compact_at"):
            if not 0.0 < getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be above 0 and at most 1")
        if self.conflict_similarity >= self.merge_similarity:
            raise ValueError("conflict_similarity must be below merge_similarity (facts that "
                             "similar are duplicates, merged by dreaming)")
        if self.decay_after_days <= 0 or self.compact_keep < 2:
            raise ValueError("decay_after_days must be positive and compact_keep at least 2")
