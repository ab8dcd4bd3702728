"""The only code that touches raw NATS: connection, provisioning, codec, consumers, tracing."""

from bus import _natsimport  # noqa: F401, I001 - first: nats.py without aiohttp (see there)
from nats.errors import Error as BusError  # any NATS client error, for `except` outside bus/

from bus.connection import Bus, PayloadTooLarge, ProvisionError, PublishError, StoreFull
from bus.consumer import Consumer, Reject, Retry, Subscription, delivery, ensure_consumer
from bus.kv import Conflict, decode_record
from bus.routing import actor_subscriptions, inbox, subscription, subscriptions
from bus.streams import Delivery, Stored, StreamState, Tap
from bus.subjects import Subjects

__all__ = [
    "Bus", "BusError", "Conflict", "Consumer", "Delivery", "PayloadTooLarge", "ProvisionError",
    "PublishError", "Reject", "Retry", "StoreFull", "Stored", "StreamState", "Subjects",
    "Subscription", "Tap", "actor_subscriptions", "decode_record", "delivery",
    "ensure_consumer", "inbox", "subscription", "subscriptions",
]
