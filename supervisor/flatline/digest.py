"""Periodic Flatline checks: dead-letter summaries and budget-burn alerts for the owner."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from typing import Any

import msgspec

from bus import Bus
from contracts import DeadLetter
from contracts.config import Settings
from contracts.records import SessionHead
from state import budget
from supervisor.process.announce import Announcer

log = logging.getLogger(__name__)

CURSOR_KEY = "flatline.dlq.cursor"  # last WM_DLQ sequence already summarised
ALERTS_KEY = "flatline.alerts"  # alert key -> time, so each alert is sent once
BATCH = 1000
_letter = msgspec.json.Decoder(DeadLetter)


def reason_head(reason: str) -> str:
    """The kind of a dead-letter reason, without the per-message detail."""
    return reason.split(":", 1)[0].strip()[:120] or "no reason given"


class Digest:
    """Runs every few seconds; each check keeps its progress in KV."""

    def __init__(self, settings: Settings, bus: Bus, announce: Announcer) -> None:
        self.settings = settings
        self.cfg = settings.config.supervisor.flatline
        self.budget = settings.config.budget
        self.bus = bus
        self.announce = announce

    async def run(self) -> None:
        last_dlq = last_budget = 0.0
        while True:
            now = time.monotonic()
            try:
                if now - last_dlq >= self.cfg.dead_letter_summary_secs:
                    last_dlq = now
                    await self.dead_letters()
                if now - last_budget >= self.cfg.check_interval_secs:
                    last_budget = now
                    await self.budget_burn()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - NATS restarting; try at the next round
                log.warning("flatline check failed: %s", exc)
            await asyncio.sleep(1.0)

    # -- dead letters --------------------------------------------------------------------------

    async def dead_letters(self) -> bool:
        """Tell the owner about dead letters since the last summary; True if there were any."""
        s = self.bus.subjects
        cursor = await self.bus.kv_get_as(s.kv_state, CURSOR_KEY, int) or 0
        info = await self.bus.stream_state(s.stream_dlq)
        if info is None:
            return False
        last = info.last_seq
        if last <= cursor or not info.messages:
            return False
        first = max(cursor + 1, info.first_seq)
        upto = min(last, first + BATCH - 1)
        kinds: Counter[tuple[str, str]] = Counter()
        for seq in range(first, upto + 1):
            try:
                stored = await self.bus.stored(s.stream_dlq, seq)
                letter = _letter.decode(stored.data if stored else b"")
            except Exception:  # noqa: BLE001 - deleted or foreign message
                continue
            kinds[(letter.actor, reason_head(letter.reason))] += 1
        total = sum(kinds.values())
        if total:
            parts = [f"{n} for {actor} ({why})" for (actor, why), n in kinds.most_common(5)]
            more = len(kinds) - 5
            text = (
                f"{total} message{'s were' if total > 1 else ' was'} dead-lettered since the last "
                f"summary: {'; '.join(parts)}{f'; and {more} other kinds' if more > 0 else ''}. "
                "Nothing was retried; see them with `wintermute tap wm.dlq.>` or "
                f"`nats stream view {s.stream_dlq}`."
            )
            await self.announce.intervene(
                "dead_letters", "dlq", f"Summarised {total} dead letters.",
                "Dead letters mean messages that could not be handled.",
                ref=f"flatline:dlq:{first}-{upto}", outcome="reported",
                evidence={"from_seq": first, "to_seq": upto,
                          "kinds": {f"{a}: {w}": n for (a, w), n in kinds.items()}},
                notify=text,
            )
        await self.bus.kv_put(s.kv_state, CURSOR_KEY, upto)
        return bool(total)

    # -- budget ---------------------------------------------------------------------------------

    async def _alerted(self) -> dict[str, float]:
        alerts = await self.bus.kv_get_as(self.bus.subjects.kv_state, ALERTS_KEY,
                                          dict[str, float]) or {}
        week = time.time() - 7 * 86400
        return {k: v for k, v in alerts.items() if v > week}

    async def _alert_once(self, alerts: dict[str, float], key: str, target: str, reason: str,
                          evidence: dict[str, Any], text: str) -> bool:
        if key in alerts:
            return False
        alerts[key] = time.time()
        await self.bus.kv_put(self.bus.subjects.kv_state, ALERTS_KEY, alerts)
        await self.announce.intervene(
            "budget_alert", target, "Alerted the owner about token spending.", reason,
            ref=f"flatline:alert:{key}", evidence=evidence, outcome="reported", notify=text,
        )
        return True

    async def budget_burn(self, now: float | None = None) -> list[str]:
        """Alert on a day burning too fast or a session far above the others; alert keys sent."""
        now = now or time.time()
        sent: list[str] = []
        alerts = await self._alerted()
        tz = self.budget.timezone
        day_key = budget.day_key(now, tz)
        limit = self.budget.max_tokens_per_day
        used = await budget.used(self.bus, day_key)
        start = budget.day_start(now, tz)
        elapsed = (now - start) / max(1.0, budget.next_day(now, tz) - start)
        if limit and used >= self.cfg.budget_burn_share * limit and elapsed < self.cfg.budget_burn_before:
            hour = budget.local_time(now, tz).strftime("%H:%M %Z").strip()
            text = (f"{used / limit:.0%} of today's token budget ({used:,} of {limit:,}) is used "
                    f"by {hour}. At this pace it runs out well before midnight; check "
                    "what is running (`wintermute status`, /budget) or raise "
                    "budget.max_tokens_per_day.")
            if await self._alert_once(alerts, f"burn.{day_key}", "budget", "The day's budget is "
                                      "burning fast.", {"used": used, "limit": limit,
                                                        "day_elapsed": round(elapsed, 3)}, text):
                sent.append(f"burn.{day_key}")
        sessions = await self._session_usage()
        if len(sessions) >= 2:
            total = sum(sessions.values())
            for key, tokens in sessions.items():
                others = (total - tokens) / (len(sessions) - 1)
                if tokens < self.cfg.session_burn_min_tokens:
                    continue
                if tokens < self.cfg.session_burn_factor * max(others, 1.0):
                    continue
                name = await self._session_name(key)
                text = (f"The session {name} has used {tokens:,} tokens, {tokens / max(others, 1):.0f} "
                        f"times the average of the other sessions ({others:,.0f}). If that is not "
                        "expected, send /reset in it or look at what it runs.")
                if await self._alert_once(alerts, key, name, "A session is far above average.",
                                          {"tokens": tokens, "others_average": round(others)},
                                          text):
                    sent.append(key)
        return sent

    async def _session_usage(self) -> dict[str, int]:
        keys = await self.bus.kv_keys(self.bus.subjects.kv_budget, "session.")
        out = {}
        for key in keys:
            out[key] = await budget.used(self.bus, key)
        return out

    async def _session_name(self, key: str) -> str:
        """The session's own name from the planner's state (same hash), else the key."""
        head = await self.bus.kv_get_as(self.bus.subjects.kv_sessions,
                                        "s." + key.split(".", 1)[1], SessionHead)
        return (head.session if head is not None else "") or key
