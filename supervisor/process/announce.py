"""Every Flatline intervention is recorded (an event in WM_EVT) and, if it matters, announced."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Coroutine
from typing import Any

import msgspec

from bus import Bus
from contracts import Intervention, Notice, Sink
from contracts.config import Settings
from contracts.records import InterventionNote

log = logging.getLogger(__name__)

LOG_KEY = "flatline.log"
KEPT = 20
#: Interventions about this run's processes: their notices mean nothing to a later run.
RUN_SCOPED = frozenset({"hung", "restart", "failed", "recovered", "nats_restart", "health"})


class Announcer:
    """Publishes interventions and owner notices; keeps the latest few for `status`."""

    def __init__(self, settings: Settings, bus: Bus, run: str = "") -> None:
        self.settings = settings
        self.bus = bus
        self.run = run  # this `up`'s run id, stamped on notices about its processes
        self.recent: deque[InterventionNote] = deque(maxlen=KEPT)
        self._pending: set[asyncio.Task[Any]] = set()

    def soon(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Run a record or notice in the background (it may wait for NATS to come back)."""
        task = asyncio.create_task(coro)
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def close(self) -> None:
        """Give records still on their way a moment, then drop them (we are stopping)."""
        if self._pending:
            await asyncio.wait(set(self._pending), timeout=2)
        for task in list(self._pending):
            task.cancel()

    async def load(self) -> None:
        """The latest interventions recorded by an earlier supervisor run."""
        try:
            log_ = await self.bus.kv_get_as(self.bus.subjects.kv_state, LOG_KEY,
                                            list[InterventionNote])
            self.recent.extend(log_ or [])
        except Exception as exc:  # noqa: BLE001 - status history is a convenience
            log.warning("could not read the intervention log: %s", exc)

    @property
    def sink(self) -> Sink:
        return Sink.parse(self.settings.config.owner.sink)

    async def notify(self, text: str, ref: str, sink: Sink | None = None, *,
                     run_scoped: bool = False) -> None:
        """A notice to `sink` (the owner's by default); `ref` makes it idempotent.

        `run_scoped`: the notice is about this run's processes (stamped with the run id)."""
        sink = sink or self.sink
        notice = Notice(id=f"{ref}:notice", sink=sink, text=text, source="flatline",
                        run=self.run if run_scoped else "")
        try:
            await self.bus.send(notice)
        except Exception as exc:  # noqa: BLE001 - the record below still happens
            log.warning("could not notify the owner: %s", exc)

    async def record(self, iv: Intervention, *, notify: str = "") -> None:
        """Publish the intervention, remember it, and tell the owner `notify` if given."""
        log.warning("intervention %s on %s: %s (%s)", iv.kind, iv.target, iv.action, iv.reason)
        try:
            await self.bus.send(iv)
        except Exception as exc:  # noqa: BLE001 - keep going; the log line above remains
            log.warning("could not record the intervention: %s", exc)
        self.recent.append(InterventionNote(
            ts=iv.ts, kind=iv.kind, target=iv.target, action=iv.action, reason=iv.reason,
            outcome=iv.outcome, undo=iv.undo, proposed=iv.proposed,
        ))
        try:
            await self.bus.kv_put(self.bus.subjects.kv_state, LOG_KEY, list(self.recent))
        except Exception:  # noqa: BLE001 - NATS may be restarting
            pass
        if notify:
            await self.notify(notify, iv.id, run_scoped=iv.kind in RUN_SCOPED)

    async def intervene(self, kind: str, target: str, action: str, reason: str, *,
                        ref: str = "", evidence: dict[str, Any] | None = None,
                        outcome: str = "done", undo: str = "", proposed: bool = False,
                        notify: str = "") -> Intervention:
        """Build, record and (optionally) announce one intervention."""
        iv = Intervention(
            id=ref or f"flatline:{kind}:{target}:{time.time_ns()}", kind=kind, target=target,
            action=action, reason=reason, evidence=_jsonable(evidence or {}), outcome=outcome,
            undo=undo, proposed=proposed,
        )
        await self.record(iv, notify=notify)
        return iv


def _jsonable(value: dict[str, Any]) -> dict[str, Any]:
    """Evidence must survive JSON; anything odd becomes its string."""
    return msgspec.json.decode(msgspec.json.encode(value, enc_hook=str))  # type: ignore[no-any-return]
