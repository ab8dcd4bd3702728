"""Token budget counters in KV: per day and per session, updated with compare-and-set."""

from __future__ import annotations

import time

from bus import Bus
from contracts import short_hash
from contracts.config import BudgetConfig

WARN_LEVELS = (0.95, 0.85, 0.70)


def day_key(ts: float | None = None) -> str:
    return "day." + time.strftime("%Y%m%d", time.gmtime(ts or time.time()))


def session_key(session: str) -> str:
    return f"session.{short_hash(session, 32)}"


async def used(bus: Bus, key: str) -> int:
    """Tokens counted under `key` (0 when none, or when the value is unreadable)."""
    return await bus.kv_get_as(bus.subjects.kv_budget, key, int) or 0


async def add(bus: Bus, key: str, tokens: int) -> int:
    """Add tokens to a counter atomically (compare-and-set; raises bus.Conflict when it keeps
    losing to concurrent writers)."""
    total = await bus.kv_update(bus.subjects.kv_budget, key, lambda n: (n or 0) + tokens,
                                kind=int)
    return total or 0


async def exhausted(bus: Bus, cfg: BudgetConfig, session: str) -> str:
    """A sentence saying which budget is used up, or "" when there is room."""
    day = await used(bus, day_key())
    if cfg.max_tokens_per_day and day >= cfg.max_tokens_per_day:
        return (
            f"The daily token budget is used up ({day:,} of {cfg.max_tokens_per_day:,}). "
            "It resets at midnight UTC; raise budget.max_tokens_per_day in config.toml to go on."
        )
    sess = await used(bus, session_key(session))
    if cfg.max_tokens_per_session and sess >= cfg.max_tokens_per_session:
        return (
            f"This session's token budget is used up ({sess:,} of "
            f"{cfg.max_tokens_per_session:,}). Send /reset to start a fresh session, or raise "
            "budget.max_tokens_per_session in config.toml."
        )
    return ""


async def budget_note(bus: Bus, cfg: BudgetConfig) -> str:
    """A warning for the model at 70/85/95 % of the daily budget, else ""."""
    if not cfg.max_tokens_per_day:
        return ""
    day = await used(bus, day_key())
    share = day / cfg.max_tokens_per_day
    for level in WARN_LEVELS:
        if share >= level:
            return (
                f"{int(level * 100)}% of today's token budget is used ({day:,} of "
                f"{cfg.max_tokens_per_day:,}). Be brief and avoid needless tool calls."
            )
    return ""
