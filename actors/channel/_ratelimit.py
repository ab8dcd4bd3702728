"""A per-user rate limit at the door, so one user's burst cannot crowd out everyone else.

The owner is never limited. A user over `channels.user_rate_per_min` gets one polite notice a
minute; the messages over the limit are not turned into turns (nothing queues for them).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

WINDOW = 60.0
NOTICE = (
    "You are sending messages faster than I can answer (more than {limit} a minute), so I "
    "skipped this one. Please wait a minute, then send it again."
)


class UserRateLimit:
    """Sliding one-minute window per principal, shared by every adapter of the channel."""

    def __init__(self, per_min: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_min = per_min
        self.clock = clock
        self._seen: dict[str, deque[float]] = {}
        self._told: dict[str, float] = {}

    def check(self, principal: str, is_owner: bool) -> str | None:
        """None when the message may pass; else the notice to send ("" when already told)."""
        if is_owner or self.per_min <= 0:
            return None
        now = self.clock()
        seen = self._seen.setdefault(principal, deque())
        while seen and seen[0] <= now - WINDOW:
            seen.popleft()
        if len(seen) < self.per_min:
            seen.append(now)
            return None
        if now - self._told.get(principal, -WINDOW) < WINDOW:
            return ""
        self._told[principal] = now
        return NOTICE.format(limit=self.per_min)
