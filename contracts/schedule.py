"""When scheduled work fires: cron, interval and one-shot tasks, and HEARTBEAT.md cadences.

Pure functions (no bus, no clock of their own) shared by the config check (a bad entry is an
error naming it), the heartbeat (which fires tasks) and `wintermute tasks` (next fire times).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from dataclasses import dataclass

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_EVERY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")


class ScheduleError(ValueError):
    """A schedule that cannot be understood; the message says which value and why."""


def parse_every(text: str) -> float:
    """'90s', '15m', '2h', '1d', '1w' or plain seconds -> seconds (at least 1)."""
    match = _EVERY.match(text.lower())
    if not match:
        raise ScheduleError(f"{text!r} is not an interval like '15m', '2h' or '1d'")
    seconds = float(match.group(1)) * _UNITS[match.group(2) or "s"]
    if seconds < 1:
        raise ScheduleError(f"{text!r} is shorter than one second")
    return seconds


def parse_at(text: str) -> float:
    """An ISO date-time ('2026-12-01T09:00', local time unless it names a zone) -> epoch."""
    try:
        when = dt.datetime.fromisoformat(text.strip())
    except ValueError as exc:
        raise ScheduleError(f"{text!r} is not a date-time like '2026-12-01T09:00'") from exc
    if when.tzinfo is None:
        when = when.astimezone()  # local time of this machine
    return when.timestamp()


def check_cron(expr: str) -> None:
    from croniter import croniter

    if not croniter.is_valid(expr):
        raise ScheduleError(f"{expr!r} is not a cron expression like '0 8 * * *'")


@dataclass(frozen=True)
class When:
    """One of cron, every or at."""

    cron: str = ""
    every: float = 0.0
    at: float = 0.0
    jitter: float = 0.0

    def next_after(self, now: float, last: float = 0.0, salt: str = "") -> float | None:
        """The next fire time after `now` (`last`: when it last fired; None: never again)."""
        if self.at:
            return None if last else self.at
        if self.every:
            base = last + self.every if last else now + self.every
            return max(base, now) + self._jitter(salt, base)
        from croniter import croniter

        return float(croniter(self.cron, now).get_next(float)) + self._jitter(salt, now)

    def _jitter(self, salt: str, base: float) -> float:
        """A spread within `jitter` seconds, stable for a task and a period (no herd)."""
        if not self.jitter:
            return 0.0
        digest = hashlib.sha256(f"{salt}:{int(base // max(self.jitter, 1))}".encode()).digest()
        return self.jitter * int.from_bytes(digest[:4], "big") / 2**32


def when_of(cron: str, every: str, at: str, jitter: float, where: str, *,
            cron_syntax: bool = True) -> When:
    """Exactly one of cron / every / at, checked (a cron expression's syntax only if
    `cron_syntax`: that loads croniter); ScheduleError names `where` and the key."""
    given = [k for k, v in (("cron", cron), ("every", every), ("at", at)) if v]
    if len(given) != 1:
        raise ScheduleError(f"{where}: set exactly one of cron, every or at"
                            + (f" (it has {', '.join(given)})" if given else ""))
    if jitter < 0:
        raise ScheduleError(f"{where}.jitter_secs: must not be negative")
    key = given[0]
    try:
        if cron:
            if cron_syntax:
                check_cron(cron)
            return When(cron=cron, jitter=jitter)
        if every:
            return When(every=parse_every(every), jitter=jitter)
        return When(at=parse_at(at), jitter=jitter)
    except ScheduleError as exc:
        raise ScheduleError(f"{where}.{key}: {exc}") from None


# -- HEARTBEAT.md ---------------------------------------------------------------------------

CADENCES = ("hourly", "daily", "weekly", "biweekly", "monthly")


@dataclass(frozen=True)
class Cadence:
    """One `##` section of HEARTBEAT.md: a light periodic check written in prose."""

    name: str
    title: str
    when: When
    prompt: str
    sink: str = ""


def _slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:40] or "check"


def cadence_when(cadence: str, title: str) -> When:
    """A cadence level -> a cron time spread by the entry's title (seed 002's jitter windows:
    hourly any minute, daily 06-22 h, weekly Mon-Fri, monthly day 1-28), stable across restarts,
    so that entries do not all fire at once. 'every 30m' style intervals are accepted too."""
    level = cadence.strip().lower()
    if level.startswith("every "):
        return When(every=parse_every(level[6:]))
    if level not in CADENCES:
        raise ScheduleError(f"cadence {cadence!r}: use one of {', '.join(CADENCES)} or "
                            "'every 30m'")
    n = int.from_bytes(hashlib.sha256(title.encode()).digest()[:8], "big")
    minute, hour, weekday, day = n % 60, 6 + (n >> 8) % 17, 1 + (n >> 16) % 5, 1 + (n >> 24) % 28
    if level == "hourly":
        return When(cron=f"{minute} * * * *")
    if level == "daily":
        return When(cron=f"{minute} {hour} * * *")
    if level == "weekly":
        return When(cron=f"{minute} {hour} * * {weekday}")
    if level == "biweekly":
        return When(every=14 * 86400.0, jitter=3600.0)
    return When(cron=f"{minute} {hour} {day} * *")


_FIELD = re.compile(r"^\s*(?:[-*]\s*)?(cadence|prompt|sink)\s*:\s*(.*)$", re.I)


def parse_heartbeat_md(text: str) -> tuple[list[Cadence], list[str]]:
    """Entries and errors (one sentence per malformed section, naming it and its line).

    Each `##` heading starts an entry; `Cadence:` and `Prompt:` are required; the prompt runs
    to the next heading (multi-line prompts); `Sink:` is optional (default: the owner's)."""
    entries: list[Cadence] = []
    errors: list[str] = []
    sections: list[tuple[int, str, list[str]]] = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("## "):
            sections.append((number, line[3:].strip(), []))
        elif sections:
            sections[-1][2].append(line)
    seen: set[str] = set()
    for number, title, lines in sections:
        fields: dict[str, str] = {}
        prompt_lines: list[str] = []
        in_prompt = False
        for line in lines:
            match = _FIELD.match(line)
            if match and not (in_prompt and match.group(1).lower() == "prompt"):
                key, value = match.group(1).lower(), match.group(2).strip()
                in_prompt = key == "prompt"
                if in_prompt:
                    prompt_lines = [value] if value else []
                else:
                    fields[key] = value
            elif in_prompt:
                prompt_lines.append(line)
        prompt = "\n".join(prompt_lines).strip()
        where = f"HEARTBEAT.md line {number} ('## {title}')"
        if not fields.get("cadence") or not prompt:
            missing = [k for k, v in (("Cadence", fields.get("cadence")), ("Prompt", prompt))
                       if not v]
            errors.append(f"{where}: missing {' and '.join(missing)}; this entry is skipped")
            continue
        try:
            when = cadence_when(fields["cadence"], title)
        except ScheduleError as exc:
            errors.append(f"{where}: {exc}; this entry is skipped")
            continue
        name = "heartbeat-" + _slug(title)
        if name in seen:
            errors.append(f"{where}: another entry has the same title; this one is skipped")
            continue
        seen.add(name)
        entries.append(Cadence(name, title, when, prompt, fields.get("sink", "")))
    return entries, errors
