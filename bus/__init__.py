"""The only code that touches raw NATS: connection, provisioning, codec, consumers, tracing."""

from nats.errors import Error as BusError  # any NATS client error, for `except` outside bus/

from bus.connection import Bus, ProvisionError, PublishError
from bus.consumer import Consumer, Reject, Retry, Subscription, ensure_consumer
from bus.kv import Conflict, decode_record
from bus.routing import actor_subscriptions, inbox, subscription, subscriptions
from bus.streams import Delivery, Stored, StreamState, Tap
from bus.subjects import Subjects

__all__ = [
    "Bus", "BusError", "Conflict", "Consumer", "Delivery", "ProvisionError", "PublishError", "Reject",
    "Retry", "Stored", "StreamState", "Subjects", "Subscription", "Tap", "actor_subscriptions",
    "decode_record", "ensure_consumer", "inbox", "subscription", "subscriptions",
]
