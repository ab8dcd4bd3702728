"""The only code that touches raw NATS: connection, provisioning, codec, consumers, tracing."""

from bus.connection import Bus, ProvisionError, PublishError
from bus.consumer import Consumer, Reject, Retry, Subscription, ensure_consumer
from bus.routing import actor_subscriptions, inbox, subscription, subscriptions
from bus.subjects import Subjects

__all__ = [
    "Bus", "Consumer", "ProvisionError", "PublishError", "Reject", "Retry", "Subjects",
    "Subscription", "actor_subscriptions", "ensure_consumer", "inbox", "subscription",
    "subscriptions",
]
