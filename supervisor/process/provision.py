"""What the supervisor creates before any actor starts: streams, buckets, every durable.

With per-actor NATS users only the supervisor may create streams, buckets and consumers; the
actors look theirs up. The durables come from the route table (contracts/routes.py), read
without loading any actor code.
"""

from __future__ import annotations

from bus import Bus, Subscription, ensure_consumer
from bus.routing import actor_subscriptions as _from_table
from contracts.config import Settings


def actor_subscriptions(settings: Settings) -> dict[str, list[Subscription]]:
    """Every actor's durable consumers this configuration runs, from the route table."""
    return _from_table(Bus("", settings.config.nats.prefix).subjects, settings.config)


async def provision_all(bus: Bus, durables: dict[str, list[Subscription]]) -> None:
    """Streams, KV buckets and the actors' durable consumers, created or updated as needed."""
    await bus.provision()
    for subs in durables.values():
        for sub in subs:
            await ensure_consumer(bus, sub)
