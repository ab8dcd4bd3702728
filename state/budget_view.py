"""Budgets as the owner reads them in /budget and `wintermute status`: both counters, what used
them by purpose, the estimated cost and when each renews."""

from __future__ import annotations

from bus import Bus
from contracts.config import BudgetConfig
from contracts.records import BudgetUsage
from state import budget

#: The order purposes are listed in (others follow by name).
PURPOSES = ("user", "escalation", "heartbeat", "proactive", "observer", "compaction", "dreaming",
            "diagnosis")


def _share(used: int, limit: int) -> str:
    if not limit:
        return f"{used:,} tokens (no limit)"
    return f"{used:,} of {limit:,} tokens ({used / limit:.0%})"


def by_purpose(record: BudgetUsage) -> str:
    """`user 1,200, heartbeat 300` in the fixed purpose order; "" when nothing was used."""
    names = [p for p in PURPOSES if record.by_purpose.get(p)]
    names += sorted(p for p in record.by_purpose if p not in PURPOSES and record.by_purpose[p])
    return ", ".join(f"{p} {record.by_purpose[p]:,}" for p in names)


def _cost(record: BudgetUsage, cfg: BudgetConfig) -> str:
    if not cfg.prices:
        return ""
    return f" Estimated cost: ${record.cost:,.2f} (from [budget.prices])."


def session_line(record: BudgetUsage, cfg: BudgetConfig) -> str:
    if record.paused == "session":
        state = ("⏸ paused: its budget is spent; your next message renews it (history kept), "
                 "/reset starts afresh")
    else:
        state = (f"{_share(record.tokens, cfg.max_tokens_per_session)}; renews when it is spent "
                 "and you send another message, or with /reset")
    used = by_purpose(record)
    return f"This session: {state}." + (f" Used by: {used}." if used else "")


async def day_lines(bus: Bus, cfg: BudgetConfig) -> list[str]:
    record = await budget.usage(bus, budget.day_key(tz=cfg.timezone))
    spent = cfg.max_tokens_per_day and record.tokens >= cfg.max_tokens_per_day
    state = "spent: model calls stop until it renews" if spent else "renews"
    lines = [f"Today: {_share(record.tokens, cfg.max_tokens_per_day)}; {state} at "
             f"{budget.renews_text(cfg.timezone)}.{_cost(record, cfg)}"]
    used = by_purpose(record)
    if used:
        lines.append(f"Used today by: {used}.")
    return lines


async def summary(bus: Bus, cfg: BudgetConfig, session: str = "") -> str:
    """The budget report: today's, and the session's when one is given."""
    lines = await day_lines(bus, cfg)
    if session:
        record = await budget.usage(bus, budget.session_key(session))
        lines.append(session_line(record, cfg))
    return "\n".join(lines)
