"""The route table's durables as the bus's Subscriptions, and the type each one decodes."""

from __future__ import annotations

from typing import Any, Union

import msgspec

from bus.consumer import Subscription
from bus.subjects import Subjects
from contracts.routes import ACTORS, Durable, durables_of


def subscription(s: Subjects, d: Durable) -> Subscription:
    """The durable pull consumer of one table entry, for this prefix."""
    return Subscription(
        s.stream(d.stream), d.name, tuple(s.rel(f) for f in d.filters), ack_wait=d.ack_wait,
        max_deliver=d.max_deliver, max_ack_pending=d.max_ack_pending,
        concurrency=d.concurrency, ordered_by=d.ordered_by, dedupe=d.dedupe,
    )


def inbox(d: Durable) -> Any:
    """What a durable decodes into: the union of the types routed to its filters (or raw)."""
    if d.raw:
        return msgspec.Raw
    types = d.types()
    if not types:
        raise LookupError(f"durable {d.name} matches no route; fix its filters in "
                          "contracts/routes.py")
    return types[0] if len(types) == 1 else Union[types]  # noqa: UP007 - built at run time


def subscriptions(s: Subjects, role: str, config: Any = None) -> list[Subscription]:
    """A role's subscriptions; with a config only the enabled ones (without: every one)."""
    return [subscription(s, d) for d in durables_of(role, config)]


def actor_subscriptions(s: Subjects, config: Any) -> dict[str, list[Subscription]]:
    """Every actor's durables this configuration runs: what the supervisor provisions."""
    return {name: subscriptions(s, name, config) for name in ACTORS}
