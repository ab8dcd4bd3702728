"""The lattice for memories (seed 003 §4.3): a memory keeps the label of the turn it came
from, and a recall or memory_search returns only what its turn may read (no read up: at most
the turn's label) and what may reach the turn's chat (no write down: `labels.cleared`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from contracts import MemoryHit, labels

if TYPE_CHECKING:
    from contracts.config import Config

#: Hits asked of the store per hit wanted, so that filtering still leaves enough.
OVERFETCH = 3


def visible(hits: list[MemoryHit], ceiling: str, sink: str, config: Config,
            limit: int) -> list[MemoryHit]:
    """The first `limit` hits a turn labelled `ceiling` replying to `sink` may see ("" for
    either: no limit of that kind; a ceiling that is not a label reads only public ones)."""
    if ceiling:
        try:
            labels.parse(ceiling)
        except labels.LabelError:
            ceiling = labels.PUBLIC
    rules, owner = config.privacy.sink_rules, config.owner.sink
    kept = [h for h in hits
            if (not ceiling or labels.dominates(ceiling, h.label))
            and (not sink or labels.cleared(h.label, sink, rules, owner))]
    return kept[:limit]
