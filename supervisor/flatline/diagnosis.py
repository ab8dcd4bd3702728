"""A model's diagnosis for what Flatline's rules cannot explain (today: an actor that keeps
crashing). Only with its own model (`models.roles.flatline`; never the main model) and its own
daily token budget (`supervisor.flatline.policy.diagnosis_tokens_per_day`). The answer is advice for
the owner: it is announced, never acted upon.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from bus import Bus
from contracts import ChatMessage, LlmRequest, LlmResponse
from contracts.config import Settings
from contracts.routes import DIAGNOSIS_SESSION
from kit.redact import Redactor
from state import budget
from supervisor.process.announce import Announcer

log = logging.getLogger(__name__)

SESSION = DIAGNOSIS_SESSION  # its responses arrive on wm.evt.llm.response.flatline-diagnosis
PREFIX = "flatline:diagnose:"
LOG_LINES = 60
SYSTEM = (
    "You are Flatline, the supervisor of a personal AI agent made of actor processes on NATS. "
    "An actor keeps crashing. From its log tail, say in at most four sentences what most likely "
    "breaks it and what the owner should check or change. Say so if the log does not show it."
)


def day_key(now: float | None = None) -> str:
    """The wm_budget key of Flatline's own token counter for the day."""
    return "flatline." + time.strftime("%Y%m%d", time.gmtime(now or time.time()))


def log_tail(path: Path, lines: int = LOG_LINES) -> str:
    """The last lines of a log file ("" when there is none)."""
    try:
        data = path.read_bytes()[-64_000:]
    except OSError:
        return ""
    return "\n".join(data.decode("utf-8", "replace").splitlines()[-lines:])


class Diagnoser:
    """Asks the flatline model about a failing actor and announces its answer."""

    def __init__(self, settings: Settings, bus: Bus, announce: Announcer) -> None:
        self.settings = settings
        self.bus = bus
        self.announce = announce
        self.model = settings.config.models.roles.get("flatline", "")
        self.limit = settings.config.supervisor.flatline.diagnosis_tokens_per_day

    async def ask(self, target: str, evidence: str) -> str:
        """Send the question; why not, when it was not sent ("" when it was)."""
        if not self.model or self.limit <= 0:
            return "no flatline model configured (models.roles.flatline)"
        used = await budget.used(self.bus, day_key())
        if used >= self.limit:
            return f"today's diagnosis budget is spent ({used:,} of {self.limit:,} tokens)"
        # kit reads the .env to redact; this module never sees a value itself.
        text = Redactor.for_home(self.settings.home, os.environ).redact(evidence)[-12_000:]
        rid = f"{PREFIX}{target}:{time.time_ns()}"
        request = LlmRequest(
            id=rid, session=SESSION, turn_id=rid, step=0, role="flatline", max_tokens=400,
            purpose="diagnosis",
            messages=[ChatMessage(role="system", content=SYSTEM),
                      ChatMessage(role="user", content=f"Actor: {target}\nLog tail:\n{text}")],
        )
        await self.bus.send(request)
        return ""

    async def on_response(self, msg: LlmResponse) -> None:
        """Count its tokens against the day's budget and tell the owner what it said."""
        if not msg.turn_id.startswith(PREFIX):
            return
        target = msg.turn_id[len(PREFIX):].rpartition(":")[0]
        tokens = msg.usage.input_tokens + msg.usage.output_tokens
        if tokens:
            await budget.add(self.bus, day_key(), tokens)
        if msg.error or not msg.content.strip():
            log.warning("diagnosis of %s failed: %s", target, msg.error or "empty answer")
            return
        await self.announce.intervene(
            "diagnosis", target, f"Asked {msg.model or self.model} why {target} keeps failing.",
            "Its crashes match no rule that explains them.", ref=f"{msg.turn_id}:answer",
            evidence={"model": msg.model, "tokens": tokens}, outcome="advice",
            notify=(f"Flatline's diagnosis of the {target} actor (from {msg.model or self.model}, "
                    f"unverified): {msg.content.strip()[:1500]}"),
        )
