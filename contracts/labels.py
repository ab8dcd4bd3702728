"""Security labels and their lattice (seed 003 §4): public < internal < sensitive <
regulated:<kind> < secret.

A label says how far data may travel. Combining data takes the join (the higher label); two
different regulated kinds (health and finance) have no common regulated label, so their join
is `secret`: conservative, since no single regulation's sinks cover both. The label of a turn
is set at the edge (the channel), travels on the messages derived from it, and decides which
models may see it (`actors/llm`): sensitive and above only local ones, secret none.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from typing import Annotated

import msgspec

#: A label as it travels on the bus: anything else fails validation (and is dead-lettered).
LABEL_PATTERN = r"^(public|internal|sensitive|secret|regulated:[a-z0-9_-]{1,32})$"
Label = Annotated[str, msgspec.Meta(pattern=LABEL_PATTERN)]

PUBLIC, INTERNAL, SENSITIVE, SECRET = "public", "internal", "sensitive", "secret"
_RANK = {PUBLIC: 0, INTERNAL: 1, SENSITIVE: 2, SECRET: 4}
REGULATED_RANK = 3


class LabelError(ValueError):
    """Text that is not a security label."""


def parse(text: str) -> str:
    """Check a label; raises LabelError with a sentence naming the valid ones."""
    if not re.fullmatch(LABEL_PATTERN, text):
        raise LabelError(f"{text!r} is not a security label: use public, internal, sensitive, "
                         "regulated:<kind> (e.g. regulated:health) or secret")
    return text


def rank(label: str) -> int:
    """The label's height in the lattice (every regulated kind shares one height)."""
    return REGULATED_RANK if label.startswith("regulated:") else _RANK[parse(label)]


def join(a: str, b: str) -> str:
    """The least label at least as high as both (different regulated kinds join to secret)."""
    if a == b:
        return a
    ra, rb = rank(a), rank(b)
    if ra == rb == REGULATED_RANK:
        return SECRET
    return a if ra > rb else b


def dominates(a: str, b: str) -> bool:
    """Whether data labelled `b` may flow where `a` is cleared (a ≥ b in the lattice)."""
    return join(a, b) == a


def cleared(label: str, sink: str, rules: Mapping[str, list[str]], owner_sink: str) -> bool:
    """Whether data labelled `label` may be written to `sink` ("channel:chat"): no write down.

    public and internal data go anywhere. For higher labels `rules` (privacy.sink_rules) lists
    the sinks allowed per label (`telegram:123`, `slack:*`); a label without a rule may reach
    only the owner's own sink, except secret, which reaches nothing unless a rule says so.
    """
    if rank(label) < _RANK[SENSITIVE]:
        return True
    if label in rules:
        allowed = rules[label]
    elif label.startswith("regulated:") and "regulated:*" in rules:
        allowed = rules["regulated:*"]
    else:
        allowed = [] if label == SECRET else [owner_sink]
    return any(fnmatch.fnmatchcase(sink, pattern) for pattern in allowed if pattern)


def local_only(label: str) -> bool:
    """Whether data with this label may go only to models running locally (seed §11.1)."""
    return rank(label) >= _RANK[SENSITIVE]
