"""Post-inference validation (seed 001's "Turing Protocol"): a final answer that claims an
action no tool call of the turn did ("I've saved it", "I sent the message") is answered with a
correction and the model is asked once more, at most once per turn (`planner.turing_protocol`).

Detection is a short list of first-person claims, each with the tools that would have done
it; a shell command (`execute_command`) or an agent-created tool can do any of them, so a
turn that ran one is never corrected. Tool calls in the history the model sees count too
(a claim about an earlier turn's save is true), and event turns (an approval's or a
delegation's result) report actions done before, so they are not checked. The second model call is an ordinary step: it counts in
the turn's tokens, the budgets and the tool-call limit.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING

from actors.planner.state import SessionState, TurnState
from contracts import ChatMessage, ToolSpec

if TYPE_CHECKING:
    from contracts.config import Config

log = logging.getLogger(__name__)

_I = r"\b(?:i(?:['’]ve| have)?)\s+(?:now\s+|just\s+|already\s+)?"
#: (what the answer claims, a pattern for the claim, tools any one of which would have done it)
CLAIMS: tuple[tuple[str, re.Pattern[str], tuple[str, ...]], ...] = (
    ("saved or remembered something", re.compile(
        _I + r"(?:saved|stored|remembered|noted down|written down|memori[sz]ed)\b", re.I),
     ("memory_save", "create_tool", "write_skill")),
    ("sent a message", re.compile(_I + r"(?:sent|messaged|emailed|forwarded|posted)\b", re.I),
     ("send_message", "web_request")),
    ("created or wrote a file or tool", re.compile(
        _I + r"(?:created|written|wrote|saved the file|made a (?:new )?(?:file|tool|script))\b",
        re.I), ("create_tool", "write_skill")),
    ("ran a command", re.compile(_I + r"(?:ran|run|executed|installed|deleted|removed)\b",
                                 re.I), ()),
    ("delegated work", re.compile(_I + r"(?:delegated|handed (?:it|this) (?:off|over))\b",
                                  re.I), ("delegate",)),
)
#: Tools that can do anything a claim says (a command); so can any tool not in CORE (an
#: agent-created script, an MCP server's tool).
ANY = ("execute_command", "docker_manage")
CORE = frozenset({*ANY, "memory_save", "memory_search", "send_message", "web_fetch",
                  "web_request", "create_tool", "escalate", "archive_tools", "delegate",
                  "load_skill", "write_skill"})


def called(turn: TurnState) -> set[str]:
    """The tools asked for in what the model sees: this turn and the history before it (an
    answer may rightly say "I saved it" about a save two messages back)."""
    return {c.name for m in turn.messages if m.role == "assistant" for c in m.tool_calls}


def unbacked_claim(text: str, tools: set[str]) -> str:
    """The first action `text` claims that none of `tools` could have done, or ""."""
    if tools & set(ANY) or tools - CORE:
        return ""
    for what, pattern, backing in CLAIMS:
        if pattern.search(text) and not tools & set(backing):
            return what
    return ""


def correction(what: str) -> ChatMessage:
    return ChatMessage(role="user", content=(
        f"[Correction] Your answer says you {what}, but no tool call in this turn did that. "
        "If it should be done, call the tool now; otherwise answer again without claiming it."))


class ClaimCheck:
    """Mixed into PlannerActor, which provides the turn steps."""

    config: Config

    def _arm(self, turn: TurnState, phase: str) -> None:
        raise NotImplementedError

    async def _offered_tools(self, turn: TurnState) -> list[ToolSpec]:
        raise NotImplementedError

    def _tool_limit(self, turn: TurnState) -> int:
        raise NotImplementedError

    def _tools_for(self, turn: TurnState, tools: list[ToolSpec]) -> list[ToolSpec]:
        raise NotImplementedError

    async def _ask_model(self, state: SessionState, turn: TurnState,
                         tools: list[ToolSpec]) -> None:
        raise NotImplementedError

    async def _claim_check(self, state: SessionState, turn: TurnState, text: str) -> bool:
        """Ask the model again, once, when its final answer claims an action no tool did."""
        if not self.config.planner.turing_protocol or turn.corrections:
            return False
        if turn.request.origin == "event":  # reports an action done before (an approval's)
            return False
        what = unbacked_claim(text, called(turn))
        if not what:
            return False
        log.info("turn %s: the answer claims it %s without a tool call; corrected once",
                 turn.turn_id, what)
        turn.corrections += 1
        turn.messages.append(correction(what))
        turn.step += 1
        self._arm(turn, "llm")
        limit_hit = turn.tool_calls_used >= self._tool_limit(turn)
        tools = [] if limit_hit else self._tools_for(turn, await self._offered_tools(turn))
        await self._ask_model(state, turn, tools)
        return True
