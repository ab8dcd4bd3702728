"""Restart policy of one actor: permanent or transient, backoff with jitter, intensity limit."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

BASE_DELAY = 0.25  # first restart after a crash
MAX_DELAY = 30.0  # backoff ceiling while under the intensity limit
MAX_FAILED_DELAY = 600.0  # retries of a failed actor slow down to one every 10 minutes
JITTER = 0.2  # +-20 %, so actors that died together do not restart in lockstep


@dataclass(frozen=True)
class Decision:
    """What to do after an exit: restart (after `delay` s) or not, and whether it is failed."""

    restart: bool
    delay: float = 0.0
    failed: bool = False
    newly_failed: bool = False  # crossed the intensity limit just now: tell the owner once
    recovered: bool = False  # was failed, then stayed up a whole window


@dataclass
class RestartPolicy:
    """permanent: always restarted; transient: restarted only when it crashed (exit != 0)."""

    kind: str = "permanent"
    max_restarts: int = 5
    window: float = 60.0
    failed_retry: float = 60.0
    exits: list[float] = field(default_factory=list)
    consecutive: int = 0  # crashes since the last run that lasted a whole window
    failed: bool = False
    failed_retries: int = 0

    def check_recovered(self, ran_for: float) -> bool:
        """A failed actor that has now run a whole window is healthy again (True once)."""
        if self.failed and ran_for >= self.window:
            self.consecutive, self.failed, self.failed_retries = 0, False, 0
            return True
        return False

    def on_exit(self, code: int, ran_for: float, now: float, *, rng: random.Random | None = None
                ) -> Decision:
        """Record an exit (code as from Popen: negative for a signal) and decide what follows."""
        recovered = False
        if ran_for >= self.window:
            recovered = self.failed
            self.consecutive, self.failed, self.failed_retries = 0, False, 0
        if self.kind == "transient" and code == 0:
            return Decision(restart=False, recovered=recovered)
        self.consecutive += 1
        self.exits = [t for t in self.exits if now - t < self.window] + [now]
        jitter = (rng or random).uniform(1 - JITTER, 1 + JITTER)
        if self.failed or len(self.exits) > self.max_restarts:
            newly = not self.failed
            self.failed = True
            delay = min(self.failed_retry * 2 ** self.failed_retries, MAX_FAILED_DELAY)
            self.failed_retries += 1
            return Decision(restart=True, delay=delay * jitter, failed=True, newly_failed=newly)
        delay = min(BASE_DELAY * 2 ** (self.consecutive - 1), MAX_DELAY)
        return Decision(restart=True, delay=delay * jitter, recovered=recovered)
