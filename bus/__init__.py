"""The only code that touches raw NATS: connection, provisioning, codec, consumers, tracing."""

from bus.connection import (
    Bus,
    PayloadTooLarge,
    ProvisionError,
    PublishError,
    StoreFull,
)
from bus.consumer import Consumer, Reject, Retry, Subscription, delivery, ensure_consumer
from bus.subjects import Subjects

__all__ = [
    "Bus", "Consumer", "PayloadTooLarge", "ProvisionError", "StoreFull", "PublishError", "Reject", "Retry", "Subjects",
    "Subscription", "delivery", "ensure_consumer",
]
