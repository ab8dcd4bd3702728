"""Per-tool rate limits: a sliding one-minute window kept in the executor process."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable


class RateLimiter:
    """Allows at most `per_minute` calls in any 60 seconds (0 or less: no limit)."""

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_minute = per_minute
        self.clock = clock
        self._calls: deque[float] = deque()

    def wait_needed(self) -> float:
        """Record a call and return 0, or return the seconds until one is allowed."""
        if self.per_minute <= 0:
            return 0.0
        now = self.clock()
        while self._calls and now - self._calls[0] >= 60.0:
            self._calls.popleft()
        if len(self._calls) >= self.per_minute:
            return 60.0 - (now - self._calls[0])
        self._calls.append(now)
        return 0.0

    def refusal(self, tool: str) -> str:
        """A sentence for the model when the limit is reached ("" when the call may go)."""
        wait = self.wait_needed()
        if not wait:
            return ""
        return (
            f"{tool} is limited to {self.per_minute} calls a minute and that limit is reached; "
            f"wait about {wait:.0f} seconds before calling it again."
        )
