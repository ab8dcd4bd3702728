"""Phase 0 of plan-then-execute (seed 003 §7): typed metadata from an untrusted message,
deterministic, no model.

Only typed fields leave: counts, booleans, an intent from a fixed list, dates from fixed
patterns, link domains that are plain host names, attachment kinds. No free text of the
message does, so an instruction hidden in it cannot reach the planning model.
"""

from __future__ import annotations

import re
from typing import Any

from contracts import TurnRequest

_INTENTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("scheduling", ("meet", "meeting", "schedule", "calendar", "appointment", "available",
                    "reschedule", "call")),
    ("greeting", ("hello", "hi", "hey", "thanks", "thank")),
    ("report", ("build", "deploy", "failed", "passed", "alert", "incident", "error", "status")),
    ("question", ("what", "when", "where", "who", "why", "how", "which", "can", "could")),
)
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_RELATIVE = ("today", "tomorrow", "tonight", "yesterday", "next week", "this week")
_ISO = re.compile(r"\b(\d{4}-\d{2}-\d{2})\b")
_TIME = re.compile(r"\b(\d{1,2}:\d{2})\b")
_HOST = re.compile(r"https?://([a-z0-9-]+(?:\.[a-z0-9-]+)+)", re.IGNORECASE)
_WORD = re.compile(r"[a-z']+")


def extract(req: TurnRequest) -> dict[str, Any]:
    """What the planning model may know about the message instead of the message."""
    text = req.text
    lower = text.lower()
    words = set(_WORD.findall(lower))
    intent = next((name for name, keys in _INTENTS if words & set(keys)), "other")
    dates = [d for d in (*_RELATIVE, *_WEEKDAYS) if re.search(rf"\b{d}\b", lower)]
    dates += _ISO.findall(text)[:5]
    return {
        "from": req.principal_kind or "third_party",
        "intent": intent,
        "is_question": "?" in text,
        "characters": len(text),
        "lines": text.count("\n") + 1 if text else 0,
        "dates_mentioned": dates[:8],
        "times_mentioned": _TIME.findall(text)[:5],
        "link_domains": sorted({h.lower() for h in _HOST.findall(text)})[:5],
        "attachments": [a.kind for a in req.attachments][:10],
    }
