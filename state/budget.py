"""Token budgets in KV (seed 000 "Budget Management"): one record per local day and per session,
changed only with compare-and-set so two llm replicas never lose a count.

The session budget protects against a runaway conversation: when it is spent the session
pauses, and the user's next message renews it (a fresh allowance, the history kept); /reset
renews it too. The daily budget is the cost protection: when it is spent every model call
stops (user turns and background work alike) until midnight in `budget.timezone`.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from bus import Bus
from contracts import Usage, short_hash
from contracts.config import BudgetConfig
from contracts.records import BudgetUsage
from state._coalesce import Batch, Coalescer

#: The clock every budget decision reads; tests replace it to move to the next day.
clock: Callable[[], float] = time.time

#: Purposes the session budget applies to: model calls made for a conversation. Scheduled and
#: background calls have their own caps (budget_tokens, proactive_budget, the turn ceiling).
SESSION_PURPOSES = frozenset({"user", "escalation"})

WARNINGS = (
    (0.95, "Budget at 95%. Send final response now. Next message will fail."),
    (0.85, "Budget at 85%. Finish current task. Avoid new tool calls."),
    (0.70, "Budget at 70%. Consider wrapping up or summarizing."),
)

SESSION_SPENT = (
    "⚠️ Session token budget reached ({used:,} of {limit:,}). Send another message to continue "
    "with a fresh allocation, or /reset to start a new conversation. Adjust limits in "
    "config.toml under [budget].max_tokens_per_session."
)
DAY_SPENT = (
    "⚠️ Daily token budget reached ({used:,} of {limit:,}). I'll be back tomorrow (the budget "
    "renews at {renews}), or you can adjust the limit in config.toml under "
    "[budget].max_tokens_per_day."
)


def zone(tz: str = "") -> tzinfo | None:
    """The zone days are counted in: `budget.timezone`, or the machine's local time."""
    if not tz:
        return None
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"budget.timezone {tz!r} is not a known time zone; use an IANA name "
                         "such as 'Europe/Berlin', or leave it empty for local time") from exc


def local_time(ts: float, tz: str = "") -> datetime:
    """`ts` as an aware time in the budget's zone."""
    return datetime.fromtimestamp(ts, zone(tz)).astimezone(zone(tz))


def day_key(ts: float | None = None, tz: str = "") -> str:
    """The wm_budget key of the local day containing `ts` (now by default)."""
    return "day." + local_time(clock() if ts is None else ts, tz).strftime("%Y%m%d")


def day_start(ts: float | None = None, tz: str = "") -> float:
    """When the local day containing `ts` began."""
    local = local_time(clock() if ts is None else ts, tz)
    return local.replace(hour=0, minute=0, second=0, microsecond=0).timestamp()


def next_day(ts: float | None = None, tz: str = "") -> float:
    """When the daily budget renews: the next local midnight after `ts`."""
    local = local_time(clock() if ts is None else ts, tz)
    midnight = (local + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    return midnight.timestamp()


def renews_text(tz: str = "") -> str:
    when = local_time(next_day(tz=tz), tz)
    return when.strftime("%Y-%m-%d 00:00 %Z").strip() or when.strftime("%Y-%m-%d 00:00")


def session_key(session: str) -> str:
    return f"session.{short_hash(session, 32)}"


async def usage(bus: Bus, key: str) -> BudgetUsage:
    """The record under `key` (empty when none, or when the value is unreadable)."""
    record, revision = await bus.kv_get_rev(bus.subjects.kv_budget, key, BudgetUsage)
    _remember(bus, key, record, revision)
    return record or BudgetUsage()


#: Per connection, the record and revision this process last read or wrote under each key:
#: a charge after the check that read it (or after this process's last charge) writes
#: without reading again; a stale one is refused by the compare-and-set and read afresh.
_known: weakref.WeakKeyDictionary[Bus, dict[str, tuple[BudgetUsage | None, int]]] = (
    weakref.WeakKeyDictionary())
_KNOWN_MAX = 4096


def _remember(bus: Bus, key: str, record: BudgetUsage | None, revision: int) -> None:
    known = _known.get(bus)
    if known is None:
        known = _known[bus] = {}
    known.pop(key, None)
    known[key] = (record, revision)
    if len(known) > _KNOWN_MAX:  # the least recently seen keys go first
        del known[next(iter(known))]


async def used(bus: Bus, key: str) -> int:
    """Tokens counted against the limit under `key` (a session's: since its last renewal)."""
    return (await usage(bus, key)).tokens


async def add(bus: Bus, key: str, tokens: int, purpose: str = "", cost: float = 0.0) -> int:
    """Add tokens (and their estimated cost) to a record atomically; the new count.

    Concurrent additions in this process are written together (`_coalesce.py`); the write is
    a compare-and-set: raises bus.Conflict when it keeps losing to other processes."""

    async def write(batch: Batch) -> int:
        def change(old: BudgetUsage | None) -> BudgetUsage:
            old = old or BudgetUsage()
            by = dict(old.by_purpose)
            for name, n in batch.by_purpose.items():
                by[name] = by.get(name, 0) + n
            return BudgetUsage(tokens=old.tokens + batch.tokens, total=old.total + batch.tokens,
                               by_purpose=by, cost=old.cost + batch.cost, paused=old.paused,
                               renewals=old.renewals, renewed_at=old.renewed_at)

        known = _known.get(bus, {}).get(key)
        new, revision = await bus.kv_update_known(bus.subjects.kv_budget, key, change,
                                                  kind=BudgetUsage, known=known)
        _remember(bus, key, new, revision)
        return new.tokens if new is not None else 0

    coalescer = _coalescers.get(bus)
    if coalescer is None:
        coalescer = _coalescers[bus] = Coalescer()
    return await coalescer.add(key, tokens, purpose, cost, write)


#: One per connection (tests run several buses in one process).
_coalescers: weakref.WeakKeyDictionary[Bus, Coalescer] = weakref.WeakKeyDictionary()


def cost_of(cfg: BudgetConfig, model: str, spent: Usage) -> float:
    """Estimated US dollars of one call from [budget.prices] (0 for a model without a price)."""
    price = cfg.prices.get(model)
    if price is None:
        return 0.0
    return (spent.input_tokens * price.input + spent.output_tokens * price.output) / 1_000_000


async def charge(bus: Bus, cfg: BudgetConfig, session: str, purpose: str, model: str,
                 spent: Usage) -> None:
    """Count one model call against the day and the session, under its purpose."""
    tokens = spent.input_tokens + spent.output_tokens
    if not tokens:
        return
    cost = cost_of(cfg, model, spent)
    # Two independent records: both updates go out together (one write, one wait).
    await asyncio.gather(add(bus, day_key(tz=cfg.timezone), tokens, purpose, cost),
                         add(bus, session_key(session), tokens, purpose, cost))


@dataclass(frozen=True)
class Stop:
    """Why a model call may not be made: which budget, and the sentence for the user."""

    kind: str  # session | day
    message: str


async def day_spent(bus: Bus, cfg: BudgetConfig) -> Stop | None:
    """The daily budget's stop, or None while there is room."""
    day = await used(bus, day_key(tz=cfg.timezone))
    if cfg.max_tokens_per_day and day >= cfg.max_tokens_per_day:
        text = DAY_SPENT.format(used=day, limit=cfg.max_tokens_per_day,
                                renews=renews_text(cfg.timezone))
        return Stop("day", text)
    return None


async def check(bus: Bus, cfg: BudgetConfig, session: str, purpose: str = "user") -> Stop | None:
    """The budget that forbids a model call for this session and purpose, or None."""
    if purpose not in SESSION_PURPOSES:
        return await day_spent(bus, cfg)
    # Both records are read at once: one round trip of waiting instead of two.
    stop, sess = await asyncio.gather(day_spent(bus, cfg), used(bus, session_key(session)))
    if stop is not None:
        return stop
    if cfg.max_tokens_per_session and sess >= cfg.max_tokens_per_session:
        return Stop("session", SESSION_SPENT.format(used=sess, limit=cfg.max_tokens_per_session))
    return None


async def exhausted(bus: Bus, cfg: BudgetConfig, session: str) -> str:
    """A sentence saying which budget is used up for a conversation, or "" when there is room."""
    stop = await check(bus, cfg, session)
    return stop.message if stop else ""


async def pause(bus: Bus, session: str, kind: str) -> None:
    """Mark a session paused by a spent budget (the user's next message renews it)."""

    def change(old: BudgetUsage | None) -> BudgetUsage:
        old = old or BudgetUsage()
        return BudgetUsage(tokens=old.tokens, total=old.total, by_purpose=old.by_purpose,
                           cost=old.cost, paused="day" if kind == "day" else "session",
                           renewals=old.renewals, renewed_at=old.renewed_at)

    await bus.kv_update(bus.subjects.kv_budget, session_key(session), change, kind=BudgetUsage)


async def renew(bus: Bus, session: str, force: bool = False) -> bool:
    """Give a paused session a fresh allowance (always with `force`: /reset); whether it did.

    The count since renewal and its split by purpose start again; `total` stays."""
    renewed = False

    def change(old: BudgetUsage | None) -> BudgetUsage | None:
        nonlocal renewed
        old = old or BudgetUsage()
        renewed = force or bool(old.paused)
        if not renewed:
            return None  # leave it as it is
        return BudgetUsage(total=old.total, renewals=old.renewals + 1, renewed_at=clock())

    await bus.kv_update(bus.subjects.kv_budget, session_key(session), change, kind=BudgetUsage)
    return renewed


def _warning(share: float) -> str:
    for level, text in WARNINGS:
        if share >= level:
            return text
    return ""


async def budget_note(bus: Bus, cfg: BudgetConfig, session: str = "",
                      purpose: str = "user") -> str:
    """The seed's warning for the model once a budget passes 70/85/95 %, else ""."""
    notes = []
    with_session = bool(session and purpose in SESSION_PURPOSES and cfg.max_tokens_per_session)

    async def nothing() -> int:
        return 0

    # Both records read at once: one round trip of waiting per model step, not two.
    day, sess = await asyncio.gather(
        used(bus, day_key(tz=cfg.timezone)),
        used(bus, session_key(session)) if with_session else nothing())
    if cfg.max_tokens_per_day and (text := _warning(day / cfg.max_tokens_per_day)):
        notes.append(f"[System: {text}] (daily budget: {day:,} of {cfg.max_tokens_per_day:,} "
                     "tokens)")
    if with_session:
        if text := _warning(sess / cfg.max_tokens_per_session):
            notes.append(f"[System: {text}] (session budget: {sess:,} of "
                         f"{cfg.max_tokens_per_session:,} tokens)")
    return "\n".join(notes)
