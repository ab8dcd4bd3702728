"""Budget guards of a turn: what its model calls are charged as, the seed's warnings in the
request, a task's own budget, the per-turn ceiling and the repeated-tool-call (runaway) check."""

from __future__ import annotations

import json
from dataclasses import dataclass

import msgspec

from actors.planner.state import TurnState
from contracts import ChatMessage, LlmResponse, TurnRequest, short_hash
from contracts.config import BudgetConfig


def purpose_of(req: TurnRequest) -> str:
    """The purpose tag of a turn's model calls (the heartbeat says proactive for its checks)."""
    if req.purpose:
        return req.purpose
    return "heartbeat" if req.origin == "schedule" else "user"


def with_note(messages: list[ChatMessage], note: str) -> list[ChatMessage]:
    """The messages with the budget warning appended to the system message (never stored in
    the turn, so history and later steps carry only the current warning)."""
    if not note or not messages or messages[0].role != "system":
        return messages
    system = msgspec.structs.replace(messages[0], content=f"{messages[0].content}\n\n# Budget\n"
                                                          f"{note}")
    return [system, *messages[1:]]


@dataclass(frozen=True)
class Halt:
    """A turn stopped by a guard: the text for its sink and whether it is a budget skip."""

    text: str
    skipped: bool  # a spent budget (not a failure of a scheduled task)
    reason: str  # for the task outcome and the log


def _task_name(req: TurnRequest) -> str:
    return req.session.removeprefix("task:")


def check_tokens(turn: TurnState, msg: LlmResponse, cfg: BudgetConfig) -> Halt | None:
    """Stop before the next step when it would go past the turn's own budget or the ceiling.

    The next call reads at least what this one read and wrote, so that is its lower bound."""
    if not msg.tool_calls:
        return None
    spent = turn.tokens_used
    upcoming = spent + msg.usage.input_tokens + msg.usage.output_tokens
    req = turn.request
    own = req.budget_tokens
    if own and upcoming > own:
        reason = (f"it used {spent:,} tokens and the next step would pass its budget of "
                  f"{own:,}")
        if req.origin == "schedule":
            if purpose_of(req) == "proactive":
                return Halt("[NO_REPLY]", True, reason)
            text = (f"The scheduled task {_task_name(req)} stopped: {reason} (budget_tokens in "
                    "agent.toml). It runs again at its next time.")
            return Halt(text, True, reason)
        return Halt(f"I stopped this turn: {reason}.", True, reason)
    ceiling = cfg.max_tokens_per_turn
    if ceiling and upcoming > ceiling:
        reason = (f"it used {spent:,} tokens and the next step would pass the per-turn ceiling "
                  f"of {ceiling:,} (budget.max_tokens_per_turn)")
        text = (f"I stopped this turn: {reason}. Tell me how to go on in a shorter way, or raise "
                "budget.max_tokens_per_turn in config.toml.")
        return Halt(text, True, reason)
    return None


def check_repeats(turn: TurnState, msg: LlmResponse, cfg: BudgetConfig) -> Halt | None:
    """Count each (tool, arguments) of the turn; stop when one comes back too often."""
    limit = cfg.max_repeated_tool_calls
    if not limit:
        return None
    for call in msg.tool_calls:
        key = short_hash(f"{call.name} {json.dumps(call.arguments, sort_keys=True, default=str)}",
                         16)
        turn.repeats[key] = turn.repeats.get(key, 0) + 1
        if turn.repeats[key] >= limit:
            reason = (f"it asked for {call.name} with the same arguments {limit} times "
                      "(budget.max_repeated_tool_calls), which looks like a loop")
            return Halt(f"I stopped this turn: {reason}. Tell me what to do differently.",
                        False, reason)
    return None
