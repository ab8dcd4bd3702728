"""Compaction: history that leaves the context is folded into the session's rolling summary.

Two triggers: history past its length (state.HISTORY_MESSAGES, HISTORY_CHARS), and the session
budget (seed 000): once the session has used `[memory] compact_at` of
`budget.max_tokens_per_session`, every turn that leaves more than twice `compact_keep` messages
folds all but the last `compact_keep` into the summary, so each later request re-reads a short
history and the session budget lasts. The summary call is charged to the daily budget
(purpose `compaction`), not to the session's.

One summary request is in flight per session: messages dropped meanwhile wait in
`state.unsummarized` and go with the next request once the answer arrives, so a summary never
forgets what an earlier, still unanswered one was about. Ids derive from the turn and a
counter, so a re-done step re-publishes the same request.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import msgspec

from actors.planner import context
from contracts import ChatMessage, LlmRequest, LlmResponse
from state import budget

if TYPE_CHECKING:
    from actors.planner.actor import PlannerActor
    from actors.planner.state import SessionState

log = logging.getLogger(__name__)

SUMMARY_CHARS = 4000
MAX_UNSUMMARIZED = 200  # messages waiting while the model fails; the oldest go first
UNSUMMARIZED_CHARS = 100_000
MESSAGE_CHARS = 4000


async def over_budget_share(planner: PlannerActor, state: SessionState) -> list[ChatMessage]:
    """Cut the history to `compact_keep` messages when the session budget is `compact_at`
    used; returns what was cut (nothing below the share or with a short history)."""
    limit = planner.config.budget.max_tokens_per_session
    keep = planner.config.memory.compact_keep
    if not limit or len(state.history) <= 2 * keep:
        return []
    used = await budget.used(planner.bus, budget.session_key(state.session))
    if used < planner.config.memory.compact_at * limit:
        return []
    kept = state.history[-keep:]
    while kept and kept[0].role != "user":  # the kept part starts with the user, as history does
        kept.pop(0)
    cut = state.history[: len(state.history) - len(kept)]
    state.history = kept
    log.info("session %s at %d of %d tokens: %d messages folded into the summary",
             state.session, used, limit, len(cut))
    return cut


async def fold(planner: PlannerActor, state: SessionState, turn_id: str,
               dropped: list[ChatMessage]) -> None:
    """Queue messages that left the history for the summary; ask now unless one is asked."""
    # Only user and assistant words go into a summary; each kept short, all bounded, since
    # they live in the session state (one KV value) until a summary holds them.
    fresh = [msgspec.structs.replace(m, content=m.content[:MESSAGE_CHARS]) for m in dropped
             if m.role in ("user", "assistant") and m.content.strip()]
    waiting = [*state.unsummarized, *fresh][-MAX_UNSUMMARIZED:]
    while sum(len(m.content) for m in waiting) > UNSUMMARIZED_CHARS:
        waiting.pop(0)
    state.unsummarized = waiting
    if not state.summarizing and state.unsummarized:
        await _ask(planner, state, f"{turn_id}:summary")


async def _ask(planner: PlannerActor, state: SessionState, request_id: str) -> None:
    state.summarizing, state.summarizing_n = request_id, len(state.unsummarized)
    req = LlmRequest(
        id=request_id, session=state.session, turn_id=request_id, step=0, role="observer",
        messages=context.summary_request(state.summary, state.unsummarized),
        max_tokens=800, purpose="compaction",
        label=state.label,  # the dropped history is the session's data
    )
    await planner.send(req)


async def answered(planner: PlannerActor, state: SessionState, msg: LlmResponse) -> bool:
    """The model's summary: it becomes the session's; messages dropped meanwhile go next."""
    if msg.turn_id != state.summarizing:
        return False  # an answer to a request this state no longer waits for (after /reset)
    state.summarizing = ""
    if msg.error or not msg.content.strip():
        log.warning("no conversation summary: %s", msg.error or "empty answer")
        return True  # kept in unsummarized: the next dropped history asks again
    state.summary = msg.content.strip()[:SUMMARY_CHARS]
    state.unsummarized = state.unsummarized[state.summarizing_n :]
    if state.unsummarized:
        await _ask(planner, state, f"{msg.turn_id.removesuffix(':summary')}+:summary")
    return True
