"""The actor base: lifecycle hooks, declared subscriptions, one `handle`, health reporting."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine
from typing import Any, ClassVar

from bus import Bus, Subscription, inbox, subscription
from contracts import Msg, audit_event
from contracts.audit import AuditOutcome
from contracts.config import Settings
from contracts.routes import Durable, durables_of

log = logging.getLogger(__name__)


class Actor:
    """Subclasses set `name` and `inbox` and implement `handle(msg)`.

    The durables an actor pulls from are declared in the route table (contracts/routes.py)
    under its name, so the supervisor provisions and grants them without loading actor code;
    `durables` is that declaration as class data.
    """

    name: ClassVar[str] = "actor"
    #: Every message type `handle` accepts (a union); each durable decodes its share of it.
    inbox: ClassVar[Any] = None
    #: This actor's durables from the route table (set for each subclass from its `name`).
    durables: ClassVar[tuple[Durable, ...]] = ()
    #: Handle each fetched batch in order in one task, then `end_batch`, then ack it
    #: (bus/batch.py): for a cheap local handler that never waits on another actor.
    batched: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.durables = durables_of(cls.name)

    def __init__(self, settings: Settings, bus: Bus) -> None:
        self.settings = settings
        self.config = settings.config
        self.home = settings.home
        self.bus = bus
        self.subjects = bus.subjects
        self.started = time.time()
        self._loops: dict[str, float] = {}
        self._periods: dict[str, float] = {}
        self._background: list[asyncio.Task[Any]] = []

    def subscriptions(self) -> list[tuple[Subscription, Any]]:
        """(subscription, decoded type) of each durable this configuration enables."""
        return [(subscription(self.subjects, d), inbox(d)) for d in self.durables
                if d.enabled(self.config)]

    async def handle(self, msg: Any) -> None:
        """Handle one inbox message; raise Retry or Reject to say otherwise."""
        raise NotImplementedError

    async def end_batch(self) -> None:
        """A batched actor makes the effects of the batch just handled durable."""

    async def on_start(self) -> None:
        """Called once connected and provisioned, before any message is fetched."""

    async def on_stop(self) -> None:
        """Called after consumers stopped, before the connection drains."""

    def on_failure(self, exc: BaseException) -> None:
        """Called when the actor is about to exit because of `exc`."""
        log.error("actor %s failing: %r", self.name, exc)

    def health_info(self) -> dict[str, Any]:
        """Extra facts for the health record (e.g. executor mode, memory count)."""
        return {}

    def alive(self, loop: str, every: float = 1.0) -> None:
        """Record that one of this actor's loops made progress; it runs every `every` s."""
        self._loops[loop] = time.time()
        self._periods[loop] = every

    def spawn(self, coro: Coroutine[Any, Any, Any], loop: str = "") -> None:
        """Run a background loop for the actor's lifetime; its crash crashes the actor."""
        task = asyncio.create_task(coro, name=loop or None)
        self._background.append(task)

    async def send(self, msg: Msg) -> bool:
        """Publish `msg` on the subject its route derives from it."""
        return await self.bus.send(msg)

    async def audit_decision(self, decision: str, outcome: AuditOutcome, reason: str, *,
                             about: str, principal: str = "", session: str = "",
                             refs: dict[str, str] | None = None) -> None:
        """Record a privileged decision on the audit stream (`wintermute audit` lists them)."""
        await self.send(audit_event(self.name, decision, outcome, reason, about=about,
                                    principal=principal, session=session, refs=refs))
