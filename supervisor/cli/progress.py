"""What the terminal shows while the user waits: start-up progress and "still thinking…".

A busy machine can take minutes to start eight Python processes; a silent prompt then looks
broken. `startup` reads the supervisor's status record and says, as it changes, how many
actors are ready and which are not; `Thinking` says so when a turn takes long.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable

from bus import Bus
from contracts.records import ActorStatus, SupervisorStatus

#: Seconds before a turn without an answer gets its first "still thinking…", then between them.
THINKING_AFTER = 5.0
THINKING_EVERY = 20.0
#: Start-up slower than this gets the load average added to the progress line.
SLOW_START_SECS = 20.0


async def read_actors(bus: Bus) -> list[ActorStatus] | None:
    """The actors as the supervisor last published them, or None before its first record."""
    try:
        status = await bus.kv_get_as(bus.subjects.kv_state, "supervisor", SupervisorStatus)
    except Exception:  # noqa: BLE001 - NATS busy or restarting: no news this round
        return None
    return status.actors if status is not None else None


async def why_no_reply(bus: Bus) -> str:
    """The likeliest cause of a missing answer, as the end of a sentence."""
    actors = await read_actors(bus)
    if actors is None:
        return "the supervisor has published no status (is `wintermute up` starting?)"
    down = [a.name for a in actors if not a.healthy]
    if down:
        return f"not ready: {', '.join(down)}{busy_note()}"
    return f"every actor is up, so the model is slow or failing (see logs/llm.log){busy_note()}"


def busy_note() -> str:
    """"; the machine is busy: load average 15.2 on 2 cores" when it is, else ""."""
    try:
        load = os.getloadavg()[0]
    except OSError:
        return ""
    cores = os.cpu_count() or 1
    return f"; the machine is busy: load average {load:.1f} on {cores} cores" if load > cores else ""


def progress_line(actors: list[ActorStatus] | None, waited: float) -> str:
    """One line on how far start-up is."""
    slow = busy_note() if waited > SLOW_START_SECS else ""
    if not actors:
        return f"starting: waiting for the supervisor's first report ({waited:.0f} s{slow})…"
    ready = [a for a in actors if a.healthy]
    waiting = ", ".join(a.name for a in actors if not a.healthy)
    restarted = sum(a.restarts for a in actors)
    again = f"; {restarted} restarts so far (`wintermute status`)" if restarted else ""
    return (f"starting: {len(ready)} of {len(actors)} actors ready (waiting for {waiting}; "
            f"{waited:.0f} s{slow}{again})…")


#: After this long the progress lines stop with one that says where to look.
GIVE_UP_SECS = 600.0


async def startup(bus: Bus, say: Callable[[str], None], every: float = 1.0) -> float:
    """Say start-up progress as it changes until every actor is ready; return seconds taken.

    Says nothing at all when everything is already up (a `chat` next to a running `up`).
    """
    began = time.monotonic()
    last = ""
    last_said = began
    while True:
        actors = await read_actors(bus)
        waited = time.monotonic() - began
        if actors and all(a.healthy for a in actors):
            if last:
                say(f"ready: all {len(actors)} actors are up ({waited:.0f} s).")
            return waited
        if waited > GIVE_UP_SECS:
            say(f"still not ready after {waited:.0f} s ({progress_line(actors, waited)[10:-1]}); "
                "`wintermute status` shows why (failed actors, last crash reasons).")
            return waited
        line = progress_line(actors, waited)
        # A new count is news at once; the same count again only every 15 s (the clock moves).
        head = line.split("(", 1)[0]
        if head != last or time.monotonic() - last_said > 15:
            say(line)
            last, last_said = head, time.monotonic()
        await asyncio.sleep(every)


class Thinking:
    """Turns waiting for an answer; `due()` yields the "still thinking…" lines to show now."""

    def __init__(self, after: float | None = None, every: float | None = None) -> None:
        self.after = THINKING_AFTER if after is None else after
        self.every = THINKING_EVERY if every is None else every
        self.waiting: dict[str, tuple[float, float]] = {}  # input id -> (sent, next line at)

    def sent(self, input_id: str) -> None:
        now = time.monotonic()
        self.waiting[input_id] = (now, now + self.after)

    def answered(self, ref: str) -> None:
        """A delivery for `ref` (the input id, or its turn id `terminal:<id>`) ends the wait."""
        self.waiting.pop(ref.removeprefix("terminal:"), None)

    def due(self) -> list[str]:
        now = time.monotonic()
        lines = []
        for input_id, (sent, at) in list(self.waiting.items()):
            if now >= at:
                self.waiting[input_id] = (sent, now + self.every)
                lines.append(f"still thinking… ({now - sent:.0f} s)")
        return lines
