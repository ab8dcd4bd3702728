"""Model outages: retry transient failures durably, and keep the planner told we are working.

A transient failure (HTTP 5xx/408/409/429, a timeout, an unreachable server, an answer that is
not JSON) of every model in the chain is retried by handing the request back to JetStream with
a delay (`Retry` -> nak): the attempt number is JetStream's delivery count and the deadline
counts from the request's own timestamp, so a restart of the llm actor keeps the schedule.
Past the deadline (or the attempts the subscription allows) the turn fails with one sentence
and `outage=True`, which the planner turns into one owner alert per outage and `/retry`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from bus import Retry, delivery
from contracts import LlmProgress, LlmRequest
from contracts.routes import durable

if TYPE_CHECKING:
    from actors.llm.actor import LlmActor

log = logging.getLogger(__name__)

#: Deliveries of one request the llm subscription allows; retries stop two short of it, so
#: the consumer's crash-loop dead letter is left for real crashes.
MAX_DELIVER = durable("llm").max_deliver


def retry_delay(attempt: int, cap: float) -> float:
    """Seconds before attempt `attempt` + 1: 1, 2, 4 ... capped."""
    return float(min(2 ** (attempt - 1), cap))


def schedule(actor: LlmActor, req: LlmRequest, reason: str) -> float | None:
    """The delay before the next attempt, or None when the retries are over."""
    cfg = actor.config.models
    attempt = delivery()
    delay = retry_delay(attempt, cfg.retry_max_delay_secs)
    if attempt >= MAX_DELIVER - 2 or time.time() + delay > req.ts + cfg.retry_deadline_secs:
        log.warning("model call for %s failed on attempt %d (%s); giving up", req.id, attempt,
                    reason)
        return None
    log.warning("model call for %s failed on attempt %d (%s); retrying in %.0f s", req.id,
                attempt, reason, delay)
    return delay


async def retry_later(actor: LlmActor, req: LlmRequest, reason: str, delay: float) -> None:
    """Tell the planner the step is still alive, then hand the request back to JetStream."""
    await progress(actor, req, "retry", reason=reason, retry_in=delay)
    raise Retry(reason, delay=delay)


async def progress(actor: LlmActor, req: LlmRequest, seq: int | str, *, reason: str = "",
                   retry_in: float = 0.0) -> None:
    """One progress event for the planner's deadline; a lost one only shortens its patience."""
    attempt = delivery()
    event = LlmProgress(
        id=f"{req.id}:progress:{attempt}:{seq}", session=req.session,
        turn_id=req.turn_id, step=req.step, request_id=req.id, attempt=attempt,
        reason=reason[:300], retry_in=retry_in,
    )
    try:
        await actor.send(event)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # noqa: BLE001 - the planner's deadline is generous
        log.warning("progress for %s not published: %s", req.id, exc)


@contextlib.asynccontextmanager
async def working(actor: LlmActor, req: LlmRequest) -> AsyncIterator[None]:
    """While a call runs, tell the planner every models.progress_every_secs."""
    every = actor.config.models.progress_every_secs

    async def beat() -> None:
        for seq in itertools.count(1):
            await asyncio.sleep(every)
            await progress(actor, req, seq, reason="waiting for the model")

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
