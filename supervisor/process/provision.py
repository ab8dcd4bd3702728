"""What the supervisor creates before any actor starts: streams, buckets, every durable.

With per-actor NATS users only the supervisor may create streams, buckets and consumers; the
actors look theirs up. Each actor's durables come from its own `subscriptions()`.
"""

from __future__ import annotations

import logging

from actors import ACTORS
from actors.runtime import actor_class
from bus import Bus, Subscription, ensure_consumer
from contracts.config import Settings

log = logging.getLogger(__name__)


def actor_subscriptions(settings: Settings) -> dict[str, list[Subscription]]:
    """Every actor's durable consumers, as it declares them for this configuration."""
    # Never connected: an actor only reads subject names from its bus to declare them.
    bus = Bus("", settings.config.nats.prefix)
    found: dict[str, list[Subscription]] = {}
    for name in ACTORS:
        try:
            found[name] = [sub for sub, _ in actor_class(name)(settings, bus).subscriptions()]
        except Exception:  # noqa: BLE001 - that actor fails on its own; the others still run
            log.exception("cannot read the %s actor's subscriptions; its consumers are not "
                          "provisioned and its NATS user may pull from none", name)
            found[name] = []
    return found


async def provision_all(bus: Bus, durables: dict[str, list[Subscription]]) -> None:
    """Streams, KV buckets and the actors' durable consumers, created or updated as needed."""
    await bus.provision()
    for subs in durables.values():
        for sub in subs:
            await ensure_consumer(bus, sub)
