"""Circuit breakers per model provider (seed 003 §11.3, §14.2).

`threshold` outage-like failures (timeouts, refused connections, HTTP 429/5xx) within `window`
seconds open a provider's breaker: the fallback chain skips it for `cooldown` seconds. Then it
is half-open: one request probes it (others keep skipping it); success closes the breaker,
failure opens it again for another cooldown. Errors that say nothing about the provider's
health (a bad key, an unknown model) do not count: they are configuration, not outages.

State is per llm process: a restart closes every breaker, which costs at most `threshold`
failed calls. Transitions are returned to the caller, which audits them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal

State = Literal["closed", "open", "half_open"]


@dataclass
class Breaker:
    """One provider's breaker."""

    provider: str
    state: State = "closed"
    failures: list[float] = field(default_factory=list)  # times of recent failures
    opened_at: float = 0.0
    probing: bool = False  # a half-open probe is in flight
    last_error: str = ""


@dataclass(frozen=True)
class Transition:
    """A breaker changed state (what the llm actor audits)."""

    provider: str
    state: State
    since: float
    reason: str


class Breakers:
    """Every provider's breaker; `clock` is injectable for tests."""

    def __init__(self, threshold: int = 3, window: float = 60.0, cooldown: float = 300.0,
                 clock: Callable[[], float] = time.time) -> None:
        self.threshold, self.window, self.cooldown = max(1, threshold), window, cooldown
        self.clock = clock
        self._by: dict[str, Breaker] = {}

    def _get(self, provider: str) -> Breaker:
        return self._by.setdefault(provider, Breaker(provider))

    def allow(self, provider: str) -> tuple[bool, Transition | None]:
        """Whether a request may go to `provider` now (and the half-open transition, if the
        cooldown just ended: this request is the probe)."""
        b = self._get(provider)
        if b.state == "closed":
            return True, None
        if b.state == "open" and self.clock() - b.opened_at >= self.cooldown:
            b.state, b.probing = "half_open", True
            return True, Transition(provider, "half_open", self.clock(),
                                    f"The {self.cooldown:g} s cooldown ended; one request "
                                    "probes the provider.")
        if b.state == "half_open" and not b.probing:
            b.probing = True
            return True, None
        return False, None

    def success(self, provider: str) -> Transition | None:
        b = self._get(provider)
        b.failures.clear()
        was, b.state, b.probing = b.state, "closed", False
        if was == "closed":
            return None
        return Transition(provider, "closed", self.clock(),
                          "A probe request succeeded; the provider is used again.")

    def failure(self, provider: str, error: str) -> Transition | None:
        """Record an outage-like failure; the transition when it opens the breaker."""
        b, now = self._get(provider), self.clock()
        b.last_error = error
        if b.state == "half_open":
            b.state, b.opened_at, b.probing = "open", now, False
            return Transition(provider, "open", now,
                              f"The probe failed ({error}); skipped for another "
                              f"{self.cooldown:g} s.")
        b.failures = [t for t in b.failures if now - t < self.window] + [now]
        if b.state == "closed" and len(b.failures) >= self.threshold:
            b.state, b.opened_at = "open", now
            return Transition(provider, "open", now,
                              f"{len(b.failures)} failures within {self.window:g} s (last: "
                              f"{error}); skipped for {self.cooldown:g} s, the fallback chain "
                              "goes on to the next model.")
        return None

    def release(self, provider: str) -> None:
        """A half-open probe ended without a verdict (cancelled): let the next one try."""
        b = self._get(provider)
        b.probing = False

    def retry_at(self, provider: str) -> float:
        """When an open breaker lets a probe through."""
        return self._get(provider).opened_at + self.cooldown

    def snapshot(self, providers: Iterable[str] = ()) -> dict[str, dict[str, object]]:
        """The state of each provider used so far and of `providers` (the configured chain),
        for health info and `wintermute status`."""
        now = self.clock()
        out: dict[str, dict[str, object]] = {}
        for name in sorted({*self._by, *providers}):
            b = self._by.get(name) or Breaker(name)
            recent = len([t for t in b.failures if now - t < self.window])
            row: dict[str, object] = {"state": b.state, "recent_failures": recent}
            if b.state != "closed":
                row["opened_at"] = b.opened_at
                row["retry_at"] = b.opened_at + self.cooldown
                row["last_error"] = b.last_error
            out[name] = row
        return out
