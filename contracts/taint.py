"""Taint with graduated decay (seed 003 §4.4): how far data is from anyone we trust.

Alongside its label every turn carries a taint level: `raw` (external content as it came:
a webhook payload, a third party's message, a web page, a file from outside), `extracted`
(only the typed fields a structured extractor let through, `kit/extract.py`), `clean` (the
owner's own words, or content the owner approved). Combining data takes the worse level.

The graduated rule decides whether a *write* (a tool that changes something outside the turn:
sends, saves, posts, runs) needs the owner's approval:

| taint     | structured fields only | with free text |
|-----------|------------------------|----------------|
| raw       | approval               | approval       |
| extracted | auto-approved          | approval       |
| clean     | auto-approved          | auto-approved  |

The taint is set where data enters (the channel for turns, the executor for tool results),
travels on the bus messages derived from it and is never taken from model output.
"""

from __future__ import annotations

from typing import Literal

Taint = Literal["clean", "extracted", "raw"]

CLEAN: Taint = "clean"
EXTRACTED: Taint = "extracted"
RAW: Taint = "raw"
_RANK: dict[str, int] = {CLEAN: 0, EXTRACTED: 1, RAW: 2}
LEVELS: tuple[Taint, ...] = (CLEAN, EXTRACTED, RAW)


def join(a: Taint, b: Taint) -> Taint:
    """The worse of two taint levels (combined data is as tainted as its worst part)."""
    return a if _RANK[a] >= _RANK[b] else b


def needs_approval(taint: Taint, free_text: bool) -> bool:
    """The graduated rule: whether a write carrying data of this taint needs the owner."""
    if taint == RAW:
        return True
    return taint == EXTRACTED and free_text


#: Principal kinds whose words are the owner's or the system's own (contracts/channel.py);
#: "" is a producer older than the field. Everyone else's text is external content.
TRUSTED_KINDS = frozenset({"owner", "cron", "event", ""})


def at_edge(kind: str) -> Taint:
    """The taint of a turn's text as it enters: clean from the owner, raw from anyone else."""
    return CLEAN if kind in TRUSTED_KINDS else RAW


def floor(kind: str) -> Taint:
    """The least taint a turn of this principal kind may claim: an extractor may lower a third
    party's text to `extracted`, but nothing a third party sends is ever `clean`."""
    return CLEAN if kind in TRUSTED_KINDS else EXTRACTED
