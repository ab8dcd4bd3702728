"""The only code that touches raw NATS: connection, provisioning, codec, consumers, tracing."""

from bus.connection import Bus, PublishError
from bus.consumer import Consumer, Reject, Retry, Subscription
from bus.subjects import Subjects

__all__ = ["Bus", "Consumer", "PublishError", "Reject", "Retry", "Subjects", "Subscription"]
