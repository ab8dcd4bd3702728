"""Structured extractors (seed 003 §6.10) and the structured/free-text test of the graduated
taint rule (§4.4).

An extractor keeps only typed values from external content: a date, an e-mail address, a
number, a member of a fixed set, a person's name of a few words. Whatever does not fit its
type is dropped, so a sentence (an instruction to the model) cannot pass. Its output is
`extracted`, not `raw`: a write made only of such values is auto-approved, a write with free
text still needs the owner. Deterministic, no model.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

MAX_ITEMS = 50  # values kept per list field

_PATTERNS = {
    "email": r"[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9.-]{1,190}\.[A-Za-z]{2,24}",
    "date": r"\d{4}-\d{2}-\d{2}",
    "datetime": r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,6})?)?(?:Z|[+-]\d{2}:?\d{2})?",
    "duration": r"\d{1,6}(?:\.\d{1,3})?\s?(?:s|secs?|seconds?|m|mins?|minutes?|h|hrs?|hours?|d|days?)",
    "number": r"-?\d{1,15}(?:\.\d{1,6})?",
    "boolean": r"true|false",
    # A person's or a thing's name: at most four words of letters, each starting upper-case,
    # so "Ana Ruiz" passes and "ignore your rules" does not.
    "name": r"(?:[^\W\d_][\w'’.-]{0,30})(?: [^\W\d_][\w'’.-]{0,30}){0,3}",
}
_PLURAL = {"names": "name", "emails": "email", "dates": "date"}
# Values that are typed wherever they appear (a write made only of these is structured).
_TYPED = re.compile("|".join(f"(?:{_PATTERNS[k]})" for k in
                             ("email", "datetime", "date", "duration", "number", "boolean")))
_KEY = re.compile(r"[A-Za-z_][\w.-]{0,39}")


class ExtractError(ValueError):
    """A field type an extractor does not know."""


def check_type(kind: str) -> None:
    """Raise ExtractError with a sentence unless `kind` is an extractor field type."""
    base, _, choices = kind.partition(":")
    if base in ("enum", "enums"):
        if not [c for c in choices.split("|") if c.strip()]:
            raise ExtractError(f"{kind!r} lists no values: write enum:a|b|c")
        return
    if base not in _PATTERNS and base not in _PLURAL:
        raise ExtractError(
            f"{kind!r} is not a field type: use name, names, email, emails, date, dates, "
            "datetime, duration, number, boolean, enum:a|b|c or enums:a|b|c")


def _one(kind: str, value: Any) -> str | None:
    """`value` as a typed string of `kind`, or None when it is not one."""
    if isinstance(value, bool):
        value = "true" if value else "false"
    elif isinstance(value, int | float):
        value = str(value)
    if not isinstance(value, str):
        return None
    text = value.strip()
    if kind.startswith("enum"):
        return text if text in kind.partition(":")[2].split("|") else None
    if kind == "name" and not all(w[:1].isupper() for w in text.split()):
        return None
    return text if re.fullmatch(_PATTERNS[kind], text) else None


def extract(payload: Mapping[str, Any], fields: Mapping[str, str]) -> dict[str, str | list[str]]:
    """The typed values of `payload` for each field of `fields` (field -> type); values not of
    their type are dropped, and so is a field with nothing left."""
    out: dict[str, str | list[str]] = {}
    for field, kind in fields.items():
        check_type(kind)
        base = kind.partition(":")[0]
        many = base in _PLURAL or base == "enums"
        single = _PLURAL.get(base, "enum" + kind[5:] if base == "enums" else kind)
        value = payload.get(field)
        if many:
            items = value if isinstance(value, list) else [value]
            kept = [v for v in (_one(single, x) for x in items[:MAX_ITEMS]) if v is not None]
            if kept:
                out[field] = kept
        elif (one := _one(single, value)) is not None:
            out[field] = one
    return out


def vocabulary(extracted: Mapping[str, str | list[str]]) -> set[str]:
    """Every value an extractor let through (what a structured write may be made of)."""
    words: set[str] = set()
    for value in extracted.values():
        words.update([value] if isinstance(value, str) else value)
    return words


def enums(schema: Any) -> set[str]:
    """Every `enum` member in a JSON Schema (a tool's parameters): fixed choices, not text."""
    found: set[str] = set()
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "enum" and isinstance(value, list):
                found.update(str(v) for v in value)
            else:
                found |= enums(value)
    elif isinstance(schema, list):
        for item in schema:
            found |= enums(item)
    return found


def free_text(arguments: Any, allowed: Iterable[str] = ()) -> list[str]:
    """The strings in a tool call's arguments that are free text: not typed values (dates,
    numbers, addresses, ...), not in `allowed` (extracted values, schema enums), not empty.
    Keys count as structured when they are short identifiers. Returns them (for the reason)."""
    allow = set(allowed)
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                if not _KEY.fullmatch(str(key)):
                    found.append(str(key))
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)
        elif isinstance(value, str):
            text = value.strip()
            if text and text not in allow and not _TYPED.fullmatch(text):
                found.append(text)

    walk(arguments)
    return found
