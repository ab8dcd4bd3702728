"""Retrying a model call ourselves, so every retry is in llm.log with its reason.

The SDKs' own retries are silent (max_retries=0 there). Retried: what ProviderError marks
retryable (429, 408/409, 5xx, connection errors); not retried: timeouts (a slow model is
most likely slow again, and the user has already waited `timeout_secs`) and everything a
retry cannot fix (bad key, unknown model, a refused request).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from actors.llm.providers import ProviderError

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Backoff before retry n (0-based): 0.5 s, 1 s, 2 s, … at most MAX_DELAY; Retry-After wins.
FIRST_DELAY = 0.5
MAX_DELAY = 20.0


def delay_before(attempt: int, retry_after: float | None) -> float:
    """Seconds to wait before the retry after failed attempt number `attempt` (0-based)."""
    if retry_after is not None and retry_after >= 0:
        return float(min(retry_after, MAX_DELAY * 3))
    return float(min(FIRST_DELAY * 2**attempt, MAX_DELAY))


async def with_retries(spec: str, retries: int, attempt: Callable[[], Awaitable[T]]) -> T:
    """Run `attempt` until it succeeds, fails for good, or `retries` retries are used up."""
    n = 0
    while True:
        try:
            return await attempt()
        except ProviderError as exc:
            if not exc.retryable or exc.timed_out or n >= retries:
                if n:
                    log.warning("model %s failed after %d attempts: %s", spec, n + 1, exc.message)
                raise
            delay = delay_before(n, exc.retry_after)
            log.warning("model %s: attempt %d of %d failed; retrying in %.1f s. Reason: %s",
                        spec, n + 1, retries + 1, delay, exc.message)
            await asyncio.sleep(delay)
            n += 1
