"""What every platform adapter provides to the channel actor."""

from __future__ import annotations

from typing import Any

from contracts import ApprovalPrompt, LlmPreview, Notice, Reply, Sink

#: The agent's way of saying nothing (seed 000, "Silence").
NO_REPLY = "[NO_REPLY]"


def is_no_reply(text: str) -> bool:
    """Whether a reply is to be suppressed: empty, or starting with [NO_REPLY].

    Seed 000's rule: `[NO_REPLY]` alone *or a response starting with it* is not sent, so a
    model that adds an explanation after the marker ("[NO_REPLY] nothing to add") stays
    silent too. Every channel goes through this one test (ChannelActor._send and the
    Telegram preview), so terminal, Telegram and Slack behave alike.
    """
    return text.strip().startswith(NO_REPLY) or not text.strip()


class Adapter:
    """A platform: turns its updates into turns and sends outbound messages once."""

    channel = "adapter"

    def __init__(self, actor: Any) -> None:
        self.actor = actor
        self.bus = actor.bus
        self.subjects = actor.subjects
        self.config = actor.config

    @classmethod
    def enabled(cls, config: Any, home: Any) -> bool:
        """Whether this adapter should run with this configuration."""
        return False

    async def start(self) -> None:
        """Begin receiving (pollers, sockets)."""

    async def stop(self) -> None:
        """Stop receiving."""

    async def receive(self, update: Any) -> None:
        """Handle one platform update handed over through the bus."""
        raise NotImplementedError

    async def send(self, msg: Reply | ApprovalPrompt | Notice) -> None:
        """Deliver one outbound message to the platform."""
        raise NotImplementedError

    async def suppressed(self, msg: Reply) -> None:
        """A reply the agent chose not to send ([NO_REPLY] or empty)."""

    async def direct(self, sink: Sink, text: str) -> None:
        """Say something at once without the message store (it may be full): no exactly-once
        marker, so only for notices that may at worst arrive twice."""
        raise NotImplementedError(f"the {self.channel} adapter cannot send without the store")

    async def preview(self, msg: LlmPreview) -> None:
        """The answer so far of a turn still being written; adapters without previews ignore it."""
